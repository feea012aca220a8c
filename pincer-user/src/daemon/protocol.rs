//! The daemon's socket protocol, version 1: JSON lines over a Unix stream socket.
//!
//! Each line a client writes is one call, an object with the protocol version `v`, the call
//! name `call` and its fields; each call gets one reply line (`log` with `follow` gets a
//! stream of `entry` replies that ends when the client hangs up). A client may make several
//! calls on one connection, one after the other. A line longer than [`MAX_LINE`] bytes, an
//! unknown call or a wrong version gets an `error` reply naming what was wrong.
//!
//! ```text
//! → {"v":1,"call":"request","path":"/work/notes/a.md","access":"read","reason":"summarize it"}
//! ← {"v":1,"reply":"decision","granted":true,"outcome":"grant","reason":"...","question":null}
//! → {"v":1,"call":"request","path":"/work/projects/ledger/Cargo.toml","access":"write"}
//! ← {"v":1,"reply":"decision","granted":false,"outcome":"escalate","reason":"...","question":3}
//! → {"v":1,"call":"answer","question":3,"approve":true}
//! ← {"v":1,"reply":"error","kind":"refused","message":"..."}
//! ```
//!
//! A decision's `outcome` ([`RequestOutcome`]) is one of:
//! - `grant`: all three votes allow; the grant is in the kernel.
//! - `deny`: denied (a vote denied, the path could not be resolved, or the grant could
//!   not be inserted in the kernel).
//! - `escalate`: the request became question `question` for the user. A request from
//!   the request tool waits for the answer (up to the configured timeout) and gets a
//!   second decision line instead; an `escalate` reply reaches only callers that do not
//!   wait (implicit requests from kernel misses, as audited).
//! - `user_approved`, `user_denied`: the user answered the question.
//! - `timeout`: the user did not answer in time; denied (the question stays pending).
//!
//! Who may make which call (the caller is identified by `SO_PEERCRED` and its cgroup):
//! - `request`, `status`: a process inside a gated session, for its own session only
//!   (`status` also from the session's owner outside every session).
//! - `create_session`: root outside every session (`pincer run` under sudo).
//! - `end_session`, `prompt`, `pending`, `answer`, `log`, `sessions`, `import`, `rules`,
//!   `remove_rule`: the session owner's uid (or root) from outside every gated cgroup
//!   (`rules` and `remove_rule` act on the caller's own trusted state).
//!
//! Every refusal is written to the audit log.

use crate::access::Access;
pub use crate::store::{Rule, RuleId, StandingRule};
pub use crate::twin::ApprovalScope;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The protocol version this build speaks.
pub const PROTOCOL_VERSION: u32 = 1;
/// Longest line accepted, in bytes.
pub const MAX_LINE: usize = 1 << 20;

/// A call with its version, as sent on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallLine {
    /// Protocol version ([`PROTOCOL_VERSION`]).
    pub v: u32,
    /// The call.
    #[serde(flatten)]
    pub call: Call,
}

/// A reply with its version, as sent on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplyLine {
    /// Protocol version ([`PROTOCOL_VERSION`]).
    pub v: u32,
    /// The reply.
    #[serde(flatten)]
    pub reply: Reply,
}

/// A call to the daemon.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "call", rename_all = "snake_case", deny_unknown_fields)]
pub enum Call {
    /// The worker asks for access to a resource of its own session.
    Request {
        /// Absolute path of the resource.
        path: String,
        /// Access type.
        access: Access,
        /// The worker's rationale (untrusted).
        #[serde(default)]
        reason: Option<String>,
        /// The session the request is for (must be the caller's own; default: the caller's).
        #[serde(default)]
        session: Option<String>,
    },
    /// A session's status and counters.
    Status {
        /// Session (default: the caller's own or only one).
        #[serde(default)]
        session: Option<String>,
    },
    /// Opens a session: a cgroup, its protected roots and the user's first prompt.
    CreateSession {
        /// The uid of the user who owns the session (its worker runs as this user).
        owner_uid: u32,
        /// Protected roots (absolute directories).
        roots: Vec<PathBuf>,
        /// The user's first prompt (makes the pre-committed policy).
        prompt: String,
        /// `enforce` (the default) or `shadow`.
        #[serde(default)]
        mode: SessionMode,
    },
    /// Ends a session: revokes every grant, removes its cgroup, returns the summary.
    EndSession {
        /// Session.
        session: String,
    },
    /// A later prompt of the user in an open session.
    Prompt {
        /// Session (default: the caller's only open session).
        #[serde(default)]
        session: Option<String>,
        /// The prompt.
        text: String,
    },
    /// Questions waiting for the user.
    Pending,
    /// The user's answer to a question.
    Answer {
        /// Question id.
        question: u64,
        /// Approve (true) or deny (false).
        approve: bool,
        /// How far an approval reaches (default `always`; a refusal is always recorded).
        #[serde(default)]
        scope: ApprovalScope,
        /// The host that asked, for a question of another host of the fleet (shared store;
        /// `None` or this host's name: a question of this host).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        host: Option<String>,
    },
    /// The caller's standing approvals and policies, with their ids.
    Rules,
    /// Removes one of the caller's standing approvals or policies; the next decision of the
    /// caller's twin goes without it.
    RemoveRule {
        /// Its id (from `rules`).
        id: RuleId,
    },
    /// Audit entries of the caller's sessions.
    Log {
        /// Only this session.
        #[serde(default)]
        session: Option<String>,
        /// Keep the connection open and stream new entries.
        #[serde(default)]
        follow: bool,
        /// Only entries of this host (with the shared audit of a fleet).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        host: Option<String>,
    },
    /// Open sessions of the caller.
    Sessions,
    /// Imports trusted history and policies (corpus format) for the caller's user.
    Import {
        /// Contents of a `history.jsonl`.
        history: String,
        /// Contents of a `policies.jsonl`.
        policies: String,
        /// The user to import for (root only; default: the caller).
        #[serde(default)]
        uid: Option<u32>,
        /// The user's workspace as it is now (before any session touched it): the twin
        /// reads its tree and fingerprints the files the policies protect.
        #[serde(default)]
        workspace: Option<PathBuf>,
    },
}

impl Call {
    /// The call's wire name.
    pub fn name(&self) -> &'static str {
        match self {
            Call::Request { .. } => "request",
            Call::Status { .. } => "status",
            Call::CreateSession { .. } => "create_session",
            Call::EndSession { .. } => "end_session",
            Call::Prompt { .. } => "prompt",
            Call::Pending => "pending",
            Call::Answer { .. } => "answer",
            Call::Log { .. } => "log",
            Call::Sessions => "sessions",
            Call::Import { .. } => "import",
            Call::Rules => "rules",
            Call::RemoveRule { .. } => "remove_rule",
        }
    }
}

/// Why a call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The caller may not make this call.
    Refused,
    /// The call was malformed or named something that does not exist.
    BadRequest,
    /// The daemon failed (kernel map, store, cgroup).
    Internal,
}

/// What became of a request: the `outcome` of a decision reply and of its audit entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestOutcome {
    /// All three votes allowed and the grant is in the kernel.
    Grant,
    /// Denied: by a vote, because the request could not be resolved, or because the grant
    /// could not be inserted.
    Deny,
    /// Sent to the user as a question.
    Escalate,
    /// The user approved the question and the request was granted.
    UserApproved,
    /// The user denied the question.
    UserDenied,
    /// The user did not answer in time: denied.
    Timeout,
    /// A call was refused for its caller (audit only).
    Refused,
}

impl RequestOutcome {
    /// The outcome's wire name.
    pub fn name(self) -> &'static str {
        match self {
            RequestOutcome::Grant => "grant",
            RequestOutcome::Deny => "deny",
            RequestOutcome::Escalate => "escalate",
            RequestOutcome::UserApproved => "user_approved",
            RequestOutcome::UserDenied => "user_denied",
            RequestOutcome::Timeout => "timeout",
            RequestOutcome::Refused => "refused",
        }
    }
}

impl std::fmt::Display for RequestOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What the daemon decided about one request: the `decision` reply's fields, and what its
/// audit entry records as outcome and question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ruling {
    /// Whether access was granted (the grant is in the kernel).
    pub granted: bool,
    /// What became of the request.
    pub outcome: RequestOutcome,
    /// Why (the votes' reasons, or what stopped the request).
    pub reason: String,
    /// The question the user was asked, if any.
    pub question: Option<u64>,
}

impl Ruling {
    /// A denial for `reason`.
    pub fn deny(reason: impl Into<String>, question: Option<u64>) -> Self {
        Ruling { granted: false, outcome: RequestOutcome::Deny, reason: reason.into(), question }
    }
}

/// A session's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Requests decided (explicit and implicit).
    pub requests: u64,
    /// Of which granted.
    pub grants: u64,
    /// Of which denied (escalations that timed out or were refused included).
    pub denials: u64,
    /// Of which sent to the user.
    pub escalations: u64,
    /// Kernel misses seen.
    pub misses: u64,
    /// Tokens of every model call (pre-committed policy included).
    pub tokens: crate::decider::TokenUsage,
}

/// A session as the daemon reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionInfo {
    /// Session id.
    pub session: String,
    /// Owner uid.
    pub owner_uid: u32,
    /// The twin's user name for the owner.
    pub user: String,
    /// The session's cgroup directory.
    pub cgroup: PathBuf,
    /// The cgroup's id (the kernel's session key).
    pub cgroup_id: u64,
    /// Protected roots.
    pub roots: Vec<PathBuf>,
    /// Entries of the pre-committed policy.
    pub policy_entries: usize,
    /// Counters so far.
    pub counters: Counters,
    /// The session's scratch directory (the worker's `TMPDIR`).
    #[serde(default)]
    pub scratch: Option<PathBuf>,
    /// The layers `pincer run` binds over the read-write open paths in the worker's mount
    /// namespace.
    #[serde(default)]
    pub layers: Vec<super::layers::LayerMount>,
    /// Enforcing or shadow.
    #[serde(default)]
    pub mode: SessionMode,
    /// The namespaces of its own the worker is started in.
    #[serde(default)]
    pub namespaces: super::worker::Namespaces,
}

/// How the kernel treats a session's misses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionMode {
    /// A miss is denied (`EACCES`) and decided by the twin.
    #[default]
    Enforce,
    /// A miss is let through and reported; the twin decides it as it would and the audit
    /// marks would-deny decisions. Never-grantable paths stay denied.
    Shadow,
}

/// A question for the user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuestionInfo {
    /// Id to answer with `pincer approve ID` / `pincer deny ID`.
    pub id: u64,
    /// Session.
    pub session: String,
    /// The resource, relative to its root.
    pub path: String,
    /// Access.
    pub access: Access,
    /// Why the user is asked.
    pub reason: String,
    /// Whether a worker request is waiting for the answer.
    pub waiting: bool,
    /// Votes 1, 2, 3 of the decision that asked, each with its reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub votes: Vec<super::audit::AuditVote>,
    /// The host that asked (a fleet's shared store: every host's questions are listed;
    /// answer another host's with `pincer approve ID --host HOST`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// A reply from the daemon.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum Reply {
    /// The answer to a `request`.
    Decision {
        /// Whether access was granted.
        granted: bool,
        /// What became of the request.
        outcome: RequestOutcome,
        /// Why (the votes' reasons, or the refusal).
        reason: String,
        /// The question the user was asked, if any.
        question: Option<u64>,
    },
    /// A session (after `create_session`, `status`).
    Session(SessionInfo),
    /// Open sessions.
    Sessions {
        /// Sessions.
        sessions: Vec<SessionInfo>,
    },
    /// A finished session's summary.
    Summary {
        /// The session as it ended.
        session: SessionInfo,
        /// Grants revoked in the kernel.
        revoked: usize,
    },
    /// Pending questions.
    Pending {
        /// Questions.
        questions: Vec<QuestionInfo>,
    },
    /// The caller's standing approvals and policies (`rules`).
    Rules {
        /// Approvals first, oldest first.
        rules: Vec<StandingRule>,
    },
    /// One audit entry (`log`).
    Entry {
        /// The entry.
        entry: super::audit::AuditEntry,
    },
    /// The end of a `log` listing.
    End,
    /// An answer to another host's question (`answer` with `host`) is recorded; whether
    /// that host applied it within the wait.
    Answered {
        /// Whether the asking host acknowledged the answer (applied it, or found that the
        /// question expired, as `message` says).
        applied: bool,
        /// What became of the answer.
        message: String,
    },
    /// Done, nothing to report.
    Ok {
        /// What was done.
        message: String,
    },
    /// The call failed.
    Error {
        /// Why.
        kind: ErrorKind,
        /// What was wrong.
        message: String,
    },
}

impl Reply {
    /// An error reply.
    pub fn error(kind: ErrorKind, message: impl Into<String>) -> Self {
        Reply::Error { kind, message: message.into() }
    }
}

/// Why a call line could not be parsed.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    /// The line is not JSON.
    #[error("not a JSON object: {0}")]
    NotJson(serde_json::Error),
    /// The line carries another protocol version.
    #[error("protocol version {0} is not supported (this daemon speaks {PROTOCOL_VERSION})")]
    Version(u64),
    /// The line has no `v`.
    #[error("missing protocol version field `v`")]
    MissingVersion,
    /// The object is no call this version knows, or its fields are wrong.
    #[error("bad call: {0}")]
    BadCall(serde_json::Error),
}

/// Parses one call line, checking the version; the error says what was wrong.
pub fn parse_call(line: &str) -> Result<Call, ProtocolError> {
    let v: serde_json::Value = serde_json::from_str(line).map_err(ProtocolError::NotJson)?;
    match v.get("v").and_then(|x| x.as_u64()) {
        Some(n) if n == u64::from(PROTOCOL_VERSION) => {}
        Some(n) => return Err(ProtocolError::Version(n)),
        None => return Err(ProtocolError::MissingVersion),
    }
    serde_json::from_value::<CallLine>(v).map(|c| c.call).map_err(ProtocolError::BadCall)
}

/// Serializes a reply as one line (with the newline).
pub fn reply_line(reply: Reply) -> String {
    let mut s = serde_json::to_string(&ReplyLine { v: PROTOCOL_VERSION, reply }).expect("replies serialize");
    s.push('\n');
    s
}

/// Serializes a call as one line (with the newline).
pub fn call_line(call: Call) -> String {
    let mut s = serde_json::to_string(&CallLine { v: PROTOCOL_VERSION, call }).expect("calls serialize");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_round_trips_and_version_is_checked() {
        let c = Call::Request { path: "/w/a".into(), access: Access::Read, reason: Some("r".into()), session: None };
        let line = call_line(c.clone());
        assert!(line.contains("\"call\":\"request\"") && line.contains("\"v\":1"), "{line}");
        assert_eq!(parse_call(line.trim()).unwrap(), c);
        let e = parse_call(r#"{"v":2,"call":"pending"}"#).unwrap_err().to_string();
        assert!(e.contains("version 2"), "{e}");
        let e = parse_call(r#"{"call":"pending"}"#).unwrap_err().to_string();
        assert!(e.contains("`v`"), "{e}");
        let e = parse_call(r#"{"v":1,"call":"chmod"}"#).unwrap_err().to_string();
        assert!(e.contains("chmod"), "{e}");
        let e = parse_call(r#"{"v":1,"call":"request","path":"/a","access":"exec"}"#).unwrap_err().to_string();
        assert!(e.contains("exec"), "{e}");
    }

    #[test]
    fn outcomes_keep_their_wire_names() {
        for (o, name) in [
            (RequestOutcome::Grant, "grant"),
            (RequestOutcome::Deny, "deny"),
            (RequestOutcome::Escalate, "escalate"),
            (RequestOutcome::UserApproved, "user_approved"),
            (RequestOutcome::UserDenied, "user_denied"),
            (RequestOutcome::Timeout, "timeout"),
            (RequestOutcome::Refused, "refused"),
        ] {
            assert_eq!(serde_json::to_string(&o).unwrap(), format!("\"{name}\""));
            assert_eq!(o.name(), name);
        }
        let line = reply_line(Reply::Decision { granted: false, outcome: RequestOutcome::Escalate, reason: "r".into(), question: Some(3) });
        assert!(line.contains(r#""outcome":"escalate""#) && line.contains(r#""question":3"#), "{line}");
    }

    #[test]
    fn reply_is_tagged() {
        let line = reply_line(Reply::error(ErrorKind::Refused, "no"));
        let back: ReplyLine = serde_json::from_str(&line).unwrap();
        assert_eq!(back.reply, Reply::Error { kind: ErrorKind::Refused, message: "no".into() });
        assert!(line.contains("\"reply\":\"error\""));
    }
}
