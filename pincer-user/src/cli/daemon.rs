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
    raise_open_files();
    // Before any thread starts: the runtime's threads inherit it.
    if let Err(e) = crate::daemon::priority::raise(config.nice) {
        tracing::warn!(error = %e, nice = config.nice, "cannot set the daemon's priority; it runs as the sessions do");
    }
    // At least two workers even on one CPU: the actor still reads folders of the sessions'
    // roots (a miss's file, a content store's folders), where a session's held access keeps
    // a folder locked until its hold ends, and the hold's bound is a timer on this runtime,
    // which must fire while the actor's worker waits for that lock.
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().max(2));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(workers).enable_all().build()?;
    rt.block_on(crate::daemon::run_kernel_daemon(config))?;
    Ok(ExitCode::SUCCESS)
}

/// Raises the daemon's limit of open descriptors to its hard limit: it holds a connection
/// per caller, a descriptor per held miss and watches, and the sessions' share of them is
/// bounded on their side (`daemon::server::SESSION_CONNECTIONS`).
fn raise_open_files() {
    // SAFETY: getrlimit/setrlimit on a local struct.
    unsafe {
        let mut lim: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                tracing::warn!(error = %std::io::Error::last_os_error(), "cannot raise the limit of open files");
            }
        }
    }
}
