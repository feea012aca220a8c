//! The socket's line framing, against the whole daemon on the host (the enforcer over maps
//! in memory): a call line over the protocol's limit, or one that is not UTF-8, gets an
//! `error` reply naming what was wrong and its connection is closed; the daemon keeps
//! serving others.

use pincer::daemon::client::Client;
use pincer::kernel::MemoryMaps;
use pincer::daemon::peer::CgroupLookup;
use pincer::daemon::protocol::{ErrorKind, ReplyLine, MAX_LINE};
use pincer::daemon::{Call, Reply};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::sync::oneshot;

use crate::common;

/// A daemon on a temporary socket; every caller is outside every session.
struct Daemon {
    _dir: tempfile::TempDir,
    socket: PathBuf,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Daemon {
    async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = common::config_in(dir.path());
        let lookup: CgroupLookup = Arc::new(|_pid| Ok(PathBuf::from("/sys/fs/cgroup/user.slice")));
        let d = common::start_daemon(&config, MemoryMaps::default().enforcer(), lookup, [3; 32], None);
        Daemon { _dir: dir, socket: config.socket, stop: Some(d.stop), task: Some(d.task) }
    }

    /// Whether the daemon still answers a call on a fresh connection.
    async fn answers(&self) -> bool {
        let mut c = Client::connect(&self.socket).await.unwrap();
        matches!(c.call(Call::Pending).await, Ok(Reply::Pending { .. }))
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.task.take().unwrap().await.unwrap();
    }
}

/// Sends `piece` `pieces` times (stopping when the connection is closed) while reading the
/// reply lines until the daemon hangs up; returns the replies and the bytes sent.
async fn send_and_read(socket: &std::path::Path, piece: &'static [u8], pieces: usize) -> (Vec<Reply>, usize) {
    let (r, mut w) = UnixStream::connect(socket).await.unwrap().into_split();
    let writer = tokio::spawn(async move {
        let mut sent = 0usize;
        for _ in 0..pieces {
            if w.write_all(piece).await.is_err() {
                break;
            }
            sent += piece.len();
        }
        sent
    });
    let mut replies = Vec::new();
    let mut lines = BufReader::new(r).lines();
    while let Some(line) = lines.next_line().await.unwrap_or(None) {
        replies.push(serde_json::from_str::<ReplyLine>(&line).unwrap().reply);
    }
    (replies, writer.await.unwrap())
}

#[tokio::test]
async fn a_100_mb_call_line_gets_an_error_reply_and_is_dropped_while_the_daemon_stays_up() {
    static PIECE: [u8; 1 << 20] = [b'x'; 1 << 20];
    let d = Daemon::start().await;
    let (replies, sent) = send_and_read(&d.socket, &PIECE, 100).await;
    assert!(sent < 100 * PIECE.len(), "the daemon hung up before the whole line arrived ({sent} bytes sent)");
    match replies.as_slice() {
        [Reply::Error { kind: ErrorKind::BadRequest, message }] => {
            assert!(message.contains("longer than") && message.contains(&MAX_LINE.to_string()), "{message}");
        }
        other => panic!("want one bad_request reply, then the connection closed: {other:?}"),
    }
    assert!(d.answers().await, "the daemon serves a new connection after dropping the long line");
    d.stop().await;
}

#[tokio::test]
async fn a_call_line_that_is_not_utf8_gets_an_error_reply_and_is_dropped() {
    static LINE: &[u8] = b"{\"v\":1,\"call\":\"pending\xff\"}\n";
    let d = Daemon::start().await;
    let (replies, _) = send_and_read(&d.socket, LINE, 1).await;
    match replies.as_slice() {
        [Reply::Error { kind: ErrorKind::BadRequest, message }] => assert!(message.contains("unreadable call line"), "{message}"),
        other => panic!("want one bad_request reply: {other:?}"),
    }
    assert!(d.answers().await);
    d.stop().await;
}

#[tokio::test]
async fn calls_on_one_connection_are_framed_by_line() {
    let d = Daemon::start().await;
    let mut s = UnixStream::connect(&d.socket).await.unwrap();
    // Two calls in one write, the second split across writes, and a blank line between.
    s.write_all(b"{\"v\":1,\"call\":\"pending\"}\n\n{\"v\":1,").await.unwrap();
    s.write_all(b"\"call\":\"pending\"}\r\n").await.unwrap();
    let mut lines = BufReader::new(s).lines();
    for _ in 0..2 {
        let line = lines.next_line().await.unwrap().expect("a reply line");
        assert!(matches!(serde_json::from_str::<ReplyLine>(&line).unwrap().reply, Reply::Pending { .. }), "{line}");
    }
    d.stop().await;
}
