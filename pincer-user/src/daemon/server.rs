//! The socket server: accepts connections, identifies each peer, reads call lines and
//! hands them to the actor; waits for the user's answer to escalated requests (deny on
//! timeout, measured with `tokio::time`) and streams the audit log. This is the socket
//! edge: the only place a failed call becomes an `error` reply.
//!
//! Lines are framed by `tokio_util`'s [`LinesCodec`] bounded to [`MAX_LINE`] bytes: a longer
//! line (or one that is not UTF-8) gets an `error` reply naming the limit and the
//! connection is closed, without the daemon buffering more than the limit.

use super::audit::{AuditEntry, AuditLog};
use super::core::{CallResult, Cmd};
use super::error::chain;
use super::peer::{self, CgroupLookup};
use super::protocol::{parse_call, reply_line, ErrorKind, RequestOutcome, Reply, Ruling, MAX_LINE};
use futures_util::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::{FramedRead, LinesCodec, LinesCodecError};

/// What each connection needs.
#[derive(Clone)]
pub struct ServerCtx {
    /// Where calls go: the actor that owns sessions, twins and the enforcer.
    pub actor: mpsc::Sender<Cmd>,
    /// The audit log, read directly (not through the actor) to stream `log` replies.
    pub audit: Arc<AuditLog>,
    /// How a peer's pid is mapped to its cgroup (`/proc/PID/cgroup`, or a test's stand-in).
    pub lookup: CgroupLookup,
    /// How long a worker's escalated request waits for the user before it is denied.
    pub escalation_timeout: Duration,
    /// How long an answer to another host's question waits for that host to apply it.
    pub answer_wait: Duration,
    /// The fleet's shared store, whose audit `log` replies stream instead of this host's
    /// file (`None`: the SQLite backend, one host).
    pub shared: Option<crate::store::StoreSpec>,
}

impl std::fmt::Debug for ServerCtx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerCtx").field("escalation_timeout", &self.escalation_timeout).finish_non_exhaustive()
    }
}

/// Accepts connections until `shutdown` completes, serving each on its own task; open
/// connections are dropped at shutdown.
pub async fn serve(listener: UnixListener, ctx: ServerCtx, shutdown: impl std::future::Future<Output = ()>) {
    tokio::pin!(shutdown);
    let mut conns = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let ctx = ctx.clone();
                    conns.spawn(async move { connection(stream, ctx).await });
                }
                Err(e) => tracing::warn!(error = %e, "accept failed"),
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    conns.abort_all();
}

async fn write(stream: &mut tokio::net::unix::OwnedWriteHalf, reply: Reply) -> bool {
    stream.write_all(reply_line(reply).as_bytes()).await.is_ok()
}

async fn connection(stream: UnixStream, ctx: ServerCtx) {
    let peer = peer::identify(&stream, &ctx.lookup);
    let (r, mut w) = stream.into_split();
    let peer = match peer {
        Ok(p) => p,
        Err(e) => {
            // Unidentified callers get nothing.
            let _ = write(&mut w, Reply::error(ErrorKind::Refused, format!("cannot identify the caller: {e}"))).await;
            return;
        }
    };
    let mut lines = FramedRead::new(r, LinesCodec::new_with_max_length(MAX_LINE));
    loop {
        let line = match lines.next().await {
            None => return,
            Some(Ok(line)) => line,
            Some(Err(LinesCodecError::MaxLineLengthExceeded)) => {
                let _ = write(&mut w, Reply::error(ErrorKind::BadRequest, format!("call line longer than {MAX_LINE} bytes; closing the connection"))).await;
                return;
            }
            Some(Err(LinesCodecError::Io(e))) => {
                let _ = write(&mut w, Reply::error(ErrorKind::BadRequest, format!("unreadable call line: {e}"))).await;
                return;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let call = match parse_call(line.trim()) {
            Ok(c) => c,
            Err(e) => {
                if !write(&mut w, Reply::error(ErrorKind::BadRequest, e.to_string())).await {
                    return;
                }
                continue;
            }
        };
        let (tx, rx) = oneshot::channel();
        if ctx.actor.send(Cmd::Call { peer: peer.clone(), call, reply: tx }).await.is_err() {
            let _ = write(&mut w, Reply::error(ErrorKind::Internal, "the daemon is shutting down")).await;
            return;
        }
        let result = match rx.await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => CallResult::Now(Reply::error(e.kind(), chain(&e))),
            Err(_) => CallResult::Now(Reply::error(ErrorKind::Internal, "the daemon is shutting down")),
        };
        let ok = match result {
            CallResult::Now(reply) => write(&mut w, reply).await,
            CallResult::Wait { rx, question } => {
                let reply = match tokio::time::timeout(ctx.escalation_timeout, rx).await {
                    Ok(Ok(reply)) => reply,
                    Ok(Err(_)) => Ruling::deny("the daemon dropped the question", Some(question)).into(),
                    Err(_) => {
                        let _ = ctx.actor.send(Cmd::WaitTimedOut { question }).await;
                        Ruling {
                            granted: false,
                            outcome: RequestOutcome::Timeout,
                            reason: format!("the user did not answer question {question} within {} s", ctx.escalation_timeout.as_secs()),
                            question: Some(question),
                        }
                        .into()
                    }
                };
                write(&mut w, reply).await
            }
            CallResult::AwaitApplied { host, question, answered } => match &ctx.shared {
                Some(spec) => write(&mut w, super::fleet::await_applied(spec.clone(), host, question, answered, ctx.answer_wait).await).await,
                None => write(&mut w, Reply::error(ErrorKind::Internal, "an answer to another host without a shared store")).await,
            },
            CallResult::Log { session, owner, follow, host, viewer } => {
                match &ctx.shared {
                    Some(spec) => stream_shared_log(&mut w, spec, session, host, viewer, follow).await,
                    None => stream_log(&mut w, &ctx.audit, session, owner, follow).await,
                }
                return;
            }
        };
        if !ok {
            return;
        }
    }
}

/// How often a follower of the shared audit looks for new rows.
pub const SHARED_LOG_POLL: Duration = Duration::from_millis(300);

/// Streams the fleet's shared audit: a user's read runs as the user's database role, so
/// row-level security decides which rows come back (root reads every row).
async fn stream_shared_log(
    w: &mut tokio::net::unix::OwnedWriteHalf,
    spec: &crate::store::StoreSpec,
    session: Option<String>,
    host: Option<String>,
    viewer: Option<String>,
    follow: bool,
) {
    let store = match spec.open() {
        Ok(s) => s,
        Err(e) => {
            let _ = write(w, Reply::error(ErrorKind::Internal, chain(&e))).await;
            return;
        }
    };
    let mut q = crate::store::AuditQuery { session, host, after: 0, limit: 1000 };
    loop {
        let rows = match store.read_audit(viewer.as_deref(), &q) {
            Ok(r) => r,
            Err(e) => {
                let _ = write(w, Reply::error(ErrorKind::Internal, chain(&e))).await;
                return;
            }
        };
        let full = rows.len() as i64 == q.limit;
        for (seq, text) in rows {
            q.after = seq;
            match serde_json::from_str::<AuditEntry>(&text) {
                Ok(entry) => {
                    if !write(w, Reply::Entry { entry }).await {
                        return;
                    }
                }
                Err(e) => tracing::warn!(seq, error = %e, "skipping an unreadable shared audit row"),
            }
        }
        if full {
            continue;
        }
        if !follow {
            let _ = write(w, Reply::End).await;
            return;
        }
        tokio::time::sleep(SHARED_LOG_POLL).await;
    }
}

fn visible(e: &AuditEntry, session: &Option<String>, owner: Option<u32>) -> bool {
    if let Some(s) = session {
        if e.session.as_ref() != Some(s) {
            return false;
        }
    }
    match owner {
        None => true,
        Some(uid) => e.owner_uid == Some(uid),
    }
}

async fn stream_log(w: &mut tokio::net::unix::OwnedWriteHalf, audit: &AuditLog, session: Option<String>, owner: Option<u32>, follow: bool) {
    let mut rx = follow.then(|| audit.subscribe());
    let entries = match audit.read_all() {
        Ok(e) => e,
        Err(e) => {
            let _ = write(w, Reply::error(ErrorKind::Internal, e.to_string())).await;
            return;
        }
    };
    for e in entries.into_iter().filter(|e| visible(e, &session, owner)) {
        if !write(w, Reply::Entry { entry: e }).await {
            return;
        }
    }
    let Some(rx) = rx.as_mut() else {
        let _ = write(w, Reply::End).await;
        return;
    };
    loop {
        match rx.recv().await {
            Ok(e) if visible(&e, &session, owner) => {
                if !write(w, Reply::Entry { entry: e }).await {
                    return;
                }
            }
            Ok(_) => {}
            Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => tracing::warn!(n, "log follower lagged"),
            Err(_) => return,
        }
    }
}
