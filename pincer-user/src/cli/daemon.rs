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
    // At least two workers even on one CPU: the actor still reads folders of the sessions'
    // roots (a session's open scans them), where a session's held access keeps a folder
    // locked until its hold ends, and the hold's bound is a timer on this runtime, which
    // must fire while the actor's worker waits for that lock.
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().max(2));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(workers).enable_all().build()?;
    rt.block_on(crate::daemon::run_kernel_daemon(config))?;
    Ok(ExitCode::SUCCESS)
}
