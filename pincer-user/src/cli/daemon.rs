//! `pincer daemon`: the root daemon owning the kernel enforcement and the twins.

use clap::Args;
use crate::daemon::config::Config;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `pincer daemon`.
#[derive(Args)]
pub struct DaemonArgs {
    /// Configuration file (default: $PINCER_CONFIG or /etc/pincer/pincer.toml).
    #[arg(long)]
    config: Option<PathBuf>,
}

/// Runs the daemon until SIGTERM or SIGINT.
pub fn run(args: DaemonArgs) -> anyhow::Result<ExitCode> {
    let config = Config::load(args.config.as_deref())?;
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(crate::daemon::run_kernel_daemon(config))?;
    Ok(ExitCode::SUCCESS)
}
