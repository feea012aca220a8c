//! `cargo xtask`: developer and CI tasks for Pincer.
//!
//! Every task installs or checks the system packages it needs first, so the
//! README's commands work on a fresh machine.

mod deps;
mod test;

use clap::{Parser, Subcommand};

/// Developer and CI tasks.
#[derive(Parser)]
#[command(name = "xtask")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Install (as root) or check the system packages the build and tests need.
    Deps,
    /// Run every test: the host tests, then the VM tests against the real BPF LSM.
    Test(test::TestArgs),
}

fn main() -> std::process::ExitCode {
    match try_main() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn try_main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Deps => deps::ensure(deps::ALL),
        Command::Test(args) => test::run(args),
    }
}
