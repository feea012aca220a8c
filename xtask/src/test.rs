//! `cargo xtask test`: the project's whole test suite, as CI runs it.

use anyhow::{bail, Context, Result};
use std::process::Command;

/// Arguments of `cargo xtask test`.
#[derive(clap::Args)]
pub struct TestArgs {
    /// Run only the host tests, not the VM tests.
    #[arg(long)]
    pub host_only: bool,
    /// Options of the VM tests.
    #[command(flatten)]
    pub vm: crate::vm::VmOptions,
}

/// Runs the host tests (`cargo test --release` on the default members), then the VM tests
/// on every kernel, printing each phase's time as it ends and all of them at the end.
pub fn run(args: TestArgs) -> Result<()> {
    let result = run_phases(&args);
    eprintln!("xtask: phase times\n{}", crate::phase::table());
    result
}

fn run_phases(args: &TestArgs) -> Result<()> {
    crate::phase::timed("packages", || {
        crate::deps::ensure(&if args.host_only { crate::deps::BUILD.iter().chain(crate::deps::FLEET).chain(crate::deps::HOST_TESTS).copied().collect() } else { crate::deps::all() })?;
        crate::deps::ensure_python_mcp()
    })?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let cargo_test = |extra: &[&str]| -> Result<()> {
        let status = Command::new(&cargo)
            .args(["test", "--release"])
            .args(extra)
            .current_dir(crate::vm::workspace_root())
            .status()
            .context("cargo test")?;
        if !status.success() {
            bail!("host tests failed");
        }
        Ok(())
    };
    // The VM tests' crate is built in the same run unless only the host tests are asked
    // for: cargo then compiles it while the host tests' largest crate is still compiling.
    if args.host_only {
        crate::phase::timed("build host tests", || cargo_test(&["--no-run"]))?;
    } else {
        crate::phase::timed("build host and VM tests", || cargo_test(&["--no-run", "--workspace"]))?;
    }
    crate::phase::timed("host tests", || cargo_test(&[]))?;
    if args.host_only {
        return Ok(());
    }
    crate::vm::vm_test(&args.vm)
}
