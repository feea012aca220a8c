//! Command-line interface: one file per subcommand.

mod bench;
mod eval;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Pincer: least privilege for AI coding agents, enforced at the resource.
#[derive(Parser)]
#[command(name = "pincer", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Replay a persona corpus against the seven defenses and report Table 2.
    Eval(eval::EvalArgs),
    /// Benchmarks (`pincer bench decide`: latency of an offline three-vote decision).
    Bench(bench::BenchArgs),
}

/// Parses the command line, runs the subcommand and maps errors to an exit code.
pub fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    match try_main(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("pincer: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn try_main(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Eval(args) => eval::run(args),
        Command::Bench(args) => bench::run(args),
    }
}
