//! `pincer doctor`: checks that this host can run the daemon and prints, for each failure,
//! the command that fixes it. Exits 0 when the host is ready, 1 when a check failed.

use super::conn::{runtime, Conn};
use clap::Args;
use crate::doctor::{run as checks, Host};
use std::process::ExitCode;

/// Arguments of `pincer doctor`.
#[derive(Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    conn: Conn,
}

/// Runs every check.
pub fn run(args: DoctorArgs) -> anyhow::Result<ExitCode> {
    let socket = args.conn.socket.clone().or_else(|| std::env::var_os("PINCER_SOCKET").filter(|s| !s.is_empty()).map(Into::into));
    let report = runtime()?.block_on(checks(&Host::system(), args.conn.config.as_deref(), socket));
    print!("{}", report.render());
    Ok(if report.ready() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
