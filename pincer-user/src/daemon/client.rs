//! A client of the daemon's socket (used by every CLI subcommand and the MCP server).

use super::protocol::{call_line, Call, ReplyLine, Reply, MAX_LINE};
use futures_util::StreamExt;
use std::path::{Path, PathBuf};
use tokio::io::AsyncWriteExt;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;
use tokio_util::codec::{FramedRead, LinesCodec, LinesCodecError};

/// Errors talking to the daemon.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The socket could not be reached.
    #[error("cannot connect to the Pincer daemon at {path} (is `pincer daemon` running?)")]
    Connect {
        /// The socket path that was tried.
        path: PathBuf,
        /// Why `connect` failed (missing socket, permission, refused).
        #[source]
        source: std::io::Error,
    },
    /// Reading or writing the connection failed, or a reply line was not UTF-8.
    #[error("lost the connection to the Pincer daemon")]
    Io(#[source] std::io::Error),
    /// The daemon closed the connection without a reply.
    #[error("the Pincer daemon closed the connection without a reply")]
    Closed,
    /// The reply was not valid protocol JSON.
    #[error("unreadable reply from the Pincer daemon: {0}")]
    BadReply(serde_json::Error),
    /// A reply line was longer than the protocol allows.
    #[error("the Pincer daemon sent a reply line longer than {max} bytes")]
    ReplyTooLong {
        /// The protocol's line limit ([`MAX_LINE`]).
        max: usize,
    },
}

/// A connection to the daemon: calls are written as lines, replies read as lines of at
/// most [`MAX_LINE`] bytes.
#[derive(Debug)]
pub struct Client {
    reader: FramedRead<OwnedReadHalf, LinesCodec>,
    writer: OwnedWriteHalf,
}

impl Client {
    /// Connects to the daemon's socket at `path`.
    pub async fn connect(path: &Path) -> Result<Self, ClientError> {
        let s = UnixStream::connect(path).await.map_err(|source| ClientError::Connect { path: path.into(), source })?;
        let (r, w) = s.into_split();
        Ok(Client { reader: FramedRead::new(r, LinesCodec::new_with_max_length(MAX_LINE)), writer: w })
    }

    /// Sends one call and reads its reply (for a waiting `request`, the final decision).
    pub async fn call(&mut self, call: Call) -> Result<Reply, ClientError> {
        self.send(call).await?;
        self.next().await?.ok_or(ClientError::Closed)
    }

    /// Sends one call without reading its reply (read it with [`Client::next`]).
    pub async fn send(&mut self, call: Call) -> Result<(), ClientError> {
        self.writer.write_all(call_line(call).as_bytes()).await.map_err(ClientError::Io)
    }

    /// The next reply line, parsed; `None` when the daemon hung up.
    pub async fn next(&mut self) -> Result<Option<Reply>, ClientError> {
        let line = match self.reader.next().await {
            None => return Ok(None),
            Some(Ok(line)) => line,
            Some(Err(LinesCodecError::MaxLineLengthExceeded)) => return Err(ClientError::ReplyTooLong { max: MAX_LINE }),
            Some(Err(LinesCodecError::Io(e))) => return Err(ClientError::Io(e)),
        };
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

/// One call on a fresh connection, which is closed after the reply.
pub async fn call_once(socket: &Path, call: Call) -> Result<Reply, ClientError> {
    Client::connect(socket).await?.call(call).await
}
