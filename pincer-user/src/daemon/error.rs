//! Why a call failed, typed until the socket edge: the server turns a [`CallError`] into
//! the `error` reply ([`ErrorKind`] and the message with its causes).

use super::protocol::ErrorKind;
use super::sessions::SessionError;
use std::path::PathBuf;

/// Why a caller may not make a call. Every refusal is audited.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The caller is in the gated cgroup parent but in no open session.
    #[error("the caller is inside a gated cgroup of no open session")]
    GatedUnknown,
    /// A worker asked for another session.
    #[error("a session's worker may request only for its own session, not {0}")]
    OtherSessionRequest(String),
    /// A worker asked for another session's status.
    #[error("a session's worker may read only its own status, not {0}")]
    OtherSessionStatus(String),
    /// A worker made a control call.
    #[error("`{0}` is accepted only from the session owner outside every gated session")]
    WorkerControl(&'static str),
    /// A `request` from outside every session.
    #[error("requests come from a session's worker (a process inside its cgroup)")]
    RequestFromOutside,
    /// `create_session` by a user other than root.
    #[error("creating a session needs root (run `pincer run` with sudo)")]
    CreateNeedsRoot,
    /// The session belongs to another user.
    #[error("session {0} belongs to another user")]
    OtherUsersSession(String),
    /// An import for another user by a user other than root.
    #[error("only root may import for another user")]
    ImportForOther,
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The caller may not make this call.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// No open session has that id.
    #[error("no open session {0:?}")]
    NoSession(String),
    /// The session ended before its pre-committed policy was made.
    #[error("session {0:?} ended before its pre-committed policy was made")]
    EndedStarting(String),
    /// The caller has no open session.
    #[error("no open session of yours")]
    NoSessionOfYours,
    /// The caller has several open sessions and named none.
    #[error("several open sessions ({}); name one with --session", .0.join(", "))]
    SeveralSessions(Vec<String>),
    /// `create_session` with an empty first prompt.
    #[error("the first prompt is empty (it makes the session's pre-committed policy)")]
    EmptyFirstPrompt,
    /// `create_session` with no root and no configured default.
    #[error("no protected root given (use --root DIR or set default_roots in the configuration)")]
    NoRoot,
    /// A session could not be set up (a bad root, or the cgroup).
    #[error(transparent)]
    Session(#[from] SessionError),
    /// `import` while the user has open sessions.
    #[error("user {0} has open sessions; import before starting them")]
    UserHasSessions(String),
    /// The imported history or policies are invalid.
    #[error(transparent)]
    Import(crate::store::StoreError),
    /// The import could not be staged in the state directory.
    #[error("cannot stage the import in {}", path.display())]
    ImportStage {
        /// The directory or file.
        path: std::path::PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// No question has that id.
    #[error("no pending question {0}")]
    NoQuestion(u64),
    /// Another host of the fleet has no open question of that id for the caller.
    #[error("no open question {question} of host {host} for you (see `pincer pending`)")]
    NoFleetQuestion {
        /// The host named.
        host: String,
        /// The question's id there.
        question: u64,
    },
    /// The question was answered on another host of the fleet first.
    #[error("question {question} was already answered on host {by}; this host applies that answer")]
    AnsweredElsewhere {
        /// The question.
        question: u64,
        /// The host it was answered on.
        by: String,
    },
    /// A question of another host named on a daemon whose store is not shared.
    #[error("questions of other hosts are answered through a fleet's shared store ([store] backend = \"postgres\"); this host's store is its own")]
    NotFleet,
    /// The caller has no standing approval or policy of that id.
    #[error("no approval or policy {0} of yours (see `pincer policy list`)")]
    NoRule(crate::store::RuleId),
    /// The twin refused a prompt.
    #[error(transparent)]
    Prompt(crate::twin::TwinError),
    /// The twin failed (starting a session, recording an answer).
    #[error(transparent)]
    Twin(crate::twin::TwinError),
    /// The user's twin could not be built over the trusted store.
    #[error(transparent)]
    Twins(#[from] super::twins::TwinsError),
    /// The trusted store failed.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// The kernel enforcer failed.
    #[error(transparent)]
    Kernel(#[from] crate::kernel::KernelError),
    /// The workspace given to `import` could not be snapshotted.
    #[error("cannot snapshot the workspace {}", path.display())]
    Workspace {
        /// The workspace.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The session's containment could not be set up.
    #[error("session containment")]
    Containment(#[from] super::contain::ContainError),
    /// The session's resource limits could not be set.
    #[error("session limits")]
    Limits(#[from] super::limits::LimitError),
}

impl CallError {
    /// The error's kind on the wire.
    pub fn kind(&self) -> ErrorKind {
        use SessionError as S;
        match self {
            CallError::Refused(_) => ErrorKind::Refused,
            CallError::NoSession(_)
            | CallError::EndedStarting(_)
            | CallError::NoSessionOfYours
            | CallError::SeveralSessions(_)
            | CallError::EmptyFirstPrompt
            | CallError::NoRoot
            | CallError::Session(S::Root { .. } | S::RootNotDir(_) | S::RootIsSlash)
            | CallError::UserHasSessions(_)
            | CallError::Import(_)
            | CallError::NoQuestion(_)
            | CallError::NoFleetQuestion { .. }
            | CallError::AnsweredElsewhere { .. }
            | CallError::NotFleet
            | CallError::NoRule(_)
            | CallError::Prompt(_)
            | CallError::Workspace { .. } => ErrorKind::BadRequest,
            CallError::Session(_) | CallError::ImportStage { .. } | CallError::Twin(_) | CallError::Twins(_) | CallError::Store(_) | CallError::Kernel(_) | CallError::Containment(_) | CallError::Limits(_) => {
                ErrorKind::Internal
            }
        }
    }

    /// The refusal, if the call was refused.
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            CallError::Refused(r) => Some(r),
            _ => None,
        }
    }
}

/// An error and its causes, `: `-separated (what a reply or an audit entry shows).
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}
