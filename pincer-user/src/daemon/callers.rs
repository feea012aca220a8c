//! Who may make which call: callers are told apart by their cgroup (a session's worker,
//! a process in a gated cgroup of no open session, or a process outside every session),
//! and each call is checked against the matrix in the [`protocol`](super::protocol) docs
//! and against the session's owner.

use super::error::{CallError, Refusal};
use super::peer::Peer;
use super::protocol::Call;
use super::sessions::{Session, Sessions};
use std::path::Path;

/// What kind of process is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// A process inside the cgroup of this open session (its worker).
    Worker(String),
    /// A process inside the gated cgroup parent but in no open session.
    GatedUnknown,
    /// A process outside every gated cgroup (the user's CLI, root's `pincer run`).
    Outside,
}

/// Tells the caller apart by its cgroup.
pub fn classify(cgroup_parent: &Path, sessions: &Sessions, peer: &Peer) -> Caller {
    if !peer.cgroup.starts_with(cgroup_parent) {
        return Caller::Outside;
    }
    match sessions.containing(&peer.cgroup) {
        Some(s) => Caller::Worker(s.id.clone()),
        None => Caller::GatedUnknown,
    }
}

/// Checks the call against the caller's kind (not yet against session owners: see
/// [`owned`]). A worker may only `request` and read `status` for its own session; control
/// calls come from outside every session; `create_session` needs root; importing for
/// another user needs root.
pub fn permit(caller: &Caller, peer: &Peer, call: &Call) -> Result<(), Refusal> {
    match (caller, call) {
        (Caller::GatedUnknown, _) => Err(Refusal::GatedUnknown),
        (Caller::Worker(own), Call::Request { session, .. }) => match session {
            Some(s) if s != own => Err(Refusal::OtherSessionRequest(s.clone())),
            _ => Ok(()),
        },
        (Caller::Worker(own), Call::Status { session }) => match session {
            Some(s) if s != own => Err(Refusal::OtherSessionStatus(s.clone())),
            _ => Ok(()),
        },
        (Caller::Worker(_), other) => Err(Refusal::WorkerControl(other.name())),
        (Caller::Outside, Call::Request { .. }) => Err(Refusal::RequestFromOutside),
        (Caller::Outside, Call::CreateSession { .. }) if peer.uid != 0 => Err(Refusal::CreateNeedsRoot),
        (Caller::Outside, Call::Import { uid: Some(u), .. }) if *u != peer.uid && peer.uid != 0 => Err(Refusal::ImportForOther),
        (Caller::Outside, _) => Ok(()),
    }
}

/// The session `id` if the caller owns it (or is root).
pub fn owned<'a>(sessions: &'a Sessions, peer: &Peer, id: &str) -> Result<&'a Session, CallError> {
    match sessions.get(id) {
        Some(s) if peer.uid == 0 || peer.uid == s.owner_uid => Ok(s),
        Some(_) => Err(Refusal::OtherUsersSession(id.to_string()).into()),
        None => Err(CallError::NoSession(id.to_string())),
    }
}

/// The caller's only open session (root: the only open session).
pub fn only_session(sessions: &Sessions, peer: &Peer) -> Result<String, CallError> {
    let mine: Vec<&Session> = sessions.iter().filter(|s| peer.uid == 0 || s.owner_uid == peer.uid).collect();
    match mine.as_slice() {
        [one] => Ok(one.id.clone()),
        [] => Err(CallError::NoSessionOfYours),
        many => Err(CallError::SeveralSessions(many.iter().map(|s| s.id.clone()).collect())),
    }
}

/// The session a call names, or the caller's only one; checked to be the caller's.
pub fn named_or_only(sessions: &Sessions, peer: &Peer, session: Option<String>) -> Result<String, CallError> {
    let id = match session {
        Some(s) => s,
        None => only_session(sessions, peer)?,
    };
    owned(sessions, peer, &id)?;
    Ok(id)
}

/// Whether the caller may read the entries of `session` (root and the owner may; a
/// session that is not open any more is filtered by owner when the log is read).
pub fn may_read_log(sessions: &Sessions, peer: &Peer, session: Option<&str>) -> Result<(), CallError> {
    if let Some(sess) = session.and_then(|s| sessions.get(s)) {
        if peer.uid != 0 && sess.owner_uid != peer.uid {
            return Err(Refusal::OtherUsersSession(sess.id.clone()).into());
        }
    }
    Ok(())
}
