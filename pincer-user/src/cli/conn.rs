//! Connection options shared by the subcommands that talk to the daemon.

use clap::Args;
use crate::daemon::client::{call_once, socket_path};
use crate::daemon::protocol::ErrorKind;
use crate::daemon::{Call, Reply};
use std::path::PathBuf;

/// Where the daemon is.
#[derive(Args, Debug, Clone)]
pub struct Conn {
    /// The daemon's socket (default: $PINCER_SOCKET, else the configuration's `socket`).
    #[arg(long, global = true)]
    pub socket: Option<PathBuf>,
    /// Configuration file giving the socket (default: $PINCER_CONFIG or /etc/pincer/pincer.toml).
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
}

impl Conn {
    /// The socket path.
    pub fn socket(&self) -> anyhow::Result<PathBuf> {
        Ok(socket_path(self.socket.clone(), self.config.as_deref())?)
    }
}

/// A current-thread runtime for one client call.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread().enable_all().build()?)
}

/// One call; an error reply becomes an error naming its kind.
pub fn call(conn: &Conn, call: Call) -> anyhow::Result<Reply> {
    let socket = conn.socket()?;
    let reply = runtime()?.block_on(call_once(&socket, call))?;
    if let Reply::Error { kind, message } = reply {
        let what = match kind {
            ErrorKind::Refused => "refused",
            ErrorKind::BadRequest => "bad request",
            ErrorKind::Internal => "daemon error",
        };
        anyhow::bail!("{what}: {message}");
    }
    Ok(reply)
}
