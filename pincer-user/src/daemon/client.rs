//! A client of the daemon's socket (used by every CLI subcommand and the MCP server).

use super::protocol::{call_line, Call, ReplyLine, Reply, MAX_LINE};
use std::path::{Path, PathBuf};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;

/// Errors talking to the daemon.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The socket could not be reached.
    #[error("cannot connect to the Pincer daemon at {path} (is `pincer daemon` running?)")]
    Connect {
        /// The socket.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// Reading or writing failed.
    #[error("lost the connection to the Pincer daemon")]
    Io(#[source] std::io::Error),
    /// The daemon closed the connection without a reply.
    #[error("the Pincer daemon closed the connection without a reply")]
    Closed,
    /// The reply was not valid protocol JSON.
    #[error("unreadable reply from the Pincer daemon: {0}")]
    BadReply(serde_json::Error),
}

/// A connection to the daemon.
#[derive(Debug)]
pub struct Client {
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
}

impl Client {
    /// Connects to the daemon's socket.
    pub async fn connect(path: &Path) -> Result<Self, ClientError> {
        let s = UnixStream::connect(path).await.map_err(|source| ClientError::Connect { path: path.into(), source })?;
        let (r, w) = s.into_split();
        Ok(Client { reader: BufReader::new(r), writer: w })
    }

    /// Sends one call and reads its reply.
    pub async fn call(&mut self, call: Call) -> Result<Reply, ClientError> {
        self.send(call).await?;
        self.next().await?.ok_or(ClientError::Closed)
    }

    /// Sends one call without reading.
    pub async fn send(&mut self, call: Call) -> Result<(), ClientError> {
        self.writer.write_all(call_line(call).as_bytes()).await.map_err(ClientError::Io)
    }

    /// The next reply, `None` when the daemon hung up.
    pub async fn next(&mut self) -> Result<Option<Reply>, ClientError> {
        let mut line = String::new();
        let n = (&mut self.reader).take(MAX_LINE as u64 + 1).read_line(&mut line).await.map_err(ClientError::Io)?;
        if n == 0 {
            return Ok(None);
        }
        let r: ReplyLine = serde_json::from_str(line.trim()).map_err(ClientError::BadReply)?;
        Ok(Some(r.reply))
    }
}

/// The socket to use: `--socket`, else `PINCER_SOCKET`, else the configuration's `socket`
/// (from `--config`, `PINCER_CONFIG` or `/etc/pincer/pincer.toml`).
pub fn socket_path(socket: Option<PathBuf>, config: Option<&Path>) -> Result<PathBuf, super::config::ConfigError> {
    if let Some(s) = socket {
        return Ok(s);
    }
    if let Some(s) = std::env::var_os("PINCER_SOCKET").filter(|s| !s.is_empty()) {
        return Ok(PathBuf::from(s));
    }
    Ok(super::config::Config::load(config)?.socket)
}

/// One call on a fresh connection.
pub async fn call_once(socket: &Path, call: Call) -> Result<Reply, ClientError> {
    Client::connect(socket).await?.call(call).await
}
