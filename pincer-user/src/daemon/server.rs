//! The socket server: accepts connections, identifies each peer, reads call lines and
//! hands them to the actor; waits for the user's answer to escalated requests (deny on
//! timeout, measured with `tokio::time`) and streams the audit log. This is the socket
//! edge: the only place a failed call becomes an `error` reply.
//!
//! Lines are framed by `tokio_util`'s [`LinesCodec`] bounded to [`MAX_LINE`] bytes: a longer
//! line (or one that is not UTF-8) gets an `error` reply naming the limit and the
//! connection is closed, without the daemon buffering more than the limit.
//!
//! A session holds at most [`SESSION_CONNECTIONS`] connections at once: past them a new
//! one of its processes is refused and closed, so no session can spend the daemon's
//! descriptors (or fill the actor's queue with calls) and keep the user's own calls, a
//! new session's start and the answers to questions, from being served.

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

/// How many connections the processes of one session may hold open at once (a worker's
/// request tool, its MCP server and its agent's hooks each hold one, or one per call).
pub const SESSION_CONNECTIONS: usize = 64;

/// The connections each session holds (by the session's cgroup, the first under the
/// sessions' parent), counted while they are open ([`Held`]).
#[derive(Default)]
pub struct OpenConnections(std::sync::Mutex<std::collections::HashMap<std::path::PathBuf, usize>>);

/// One connection of a session's, counted until dropped.
struct Held {
    open: Arc<OpenConnections>,
    session: std::path::PathBuf,
}

impl OpenConnections {
    /// Counts a connection of the session whose cgroup is `session`; `None` if the session
    /// holds [`SESSION_CONNECTIONS`] already.
    fn take(self: &Arc<Self>, session: std::path::PathBuf) -> Option<Held> {
        let mut open = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let n = open.entry(session.clone()).or_default();
        if *n >= SESSION_CONNECTIONS {
            return None;
        }
        *n += 1;
        Some(Held { open: self.clone(), session })
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut open = self.open.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.session) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.session);
            }
        }
    }
}

/// The session cgroup `cgroup` is in (the first level under `parent`), or `None` for a
/// process outside every session.
fn session_of(parent: &std::path::Path, cgroup: &std::path::Path) -> Option<std::path::PathBuf> {
    let first = cgroup.strip_prefix(parent).ok()?.components().next()?;
    Some(parent.join(first))
}

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
    /// Where the sessions' cgroups are (`cgroup_parent`).
    pub session_parent: std::path::PathBuf,
    /// The connections each session holds.
    pub open: Arc<OpenConnections>,
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
                Err(e) => {
                    // Out of descriptors (EMFILE, ENFILE) the listener stays ready: wait
                    // for connections to close rather than spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
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
    let _held = match session_of(&ctx.session_parent, &peer.cgroup) {
        Some(session) => match ctx.open.take(session) {
            Some(held) => Some(held),
            None => {
                let _ = write(&mut w, Reply::error(ErrorKind::Refused, format!("this session holds {SESSION_CONNECTIONS} connections to the daemon already, the most one session may; close one first"))).await;
                return;
            }
        },
        None => None,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A session's connections past [`SESSION_CONNECTIONS`] are refused until one closes;
    /// another session's, and processes outside every session, are not counted.
    #[test]
    fn a_sessions_connections_are_bounded_and_others_are_not() {
        let parent = std::path::Path::new("/sys/fs/cgroup/pincer");
        assert_eq!(session_of(parent, &parent.join("s-1/sub")), Some(parent.join("s-1")));
        assert_eq!(session_of(parent, std::path::Path::new("/sys/fs/cgroup/user.slice")), None);
        let open = Arc::new(OpenConnections::default());
        let mut held: Vec<Held> = (0..SESSION_CONNECTIONS).map(|_| open.take(parent.join("s-1")).expect("within the bound")).collect();
        assert!(open.take(parent.join("s-1")).is_none(), "past the bound");
        assert!(open.take(parent.join("s-2")).is_some(), "another session");
        held.pop();
        assert!(open.take(parent.join("s-1")).is_some(), "one closed");
    }
}
