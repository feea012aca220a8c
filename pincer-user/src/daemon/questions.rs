//! Questions for the user: requests the twin escalated, under the id the twin gave them
//! (one numbering, shared by every user's twin), with what the daemon needs to apply the
//! answer and the workers waiting for it.

use super::audit::AuditVote;
use super::pipeline::{Origin, PipelineRequest};
use super::protocol::Reply;
use std::collections::BTreeMap;
use tokio::sync::oneshot;

/// A request waiting for the user's answer.
#[derive(Debug)]
pub struct Waiting {
    /// The twin's user.
    pub user: String,
    /// The session.
    pub session: String,
    /// The request as first decided (decided again when the user approves).
    pub request: PipelineRequest,
    /// Where it came from.
    pub origin: Origin,
    /// The votes of the decision that asked.
    pub votes: Vec<AuditVote>,
    /// Workers waiting for the answer.
    pub waiters: Vec<oneshot::Sender<Reply>>,
}

impl Waiting {
    /// Whether a worker still waits for the answer.
    pub fn has_waiter(&self) -> bool {
        self.waiters.iter().any(|t| !t.is_closed())
    }
}

/// The questions waiting for the user, by id.
#[derive(Debug, Default)]
pub struct Questions {
    waiting: BTreeMap<u64, Waiting>,
}

impl Questions {
    /// Records question `id` unless it is already waiting (a request asked again); true if
    /// it is new.
    pub fn ask(&mut self, id: u64, w: impl FnOnce() -> Waiting) -> bool {
        match self.waiting.entry(id) {
            std::collections::btree_map::Entry::Occupied(_) => false,
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(w());
                true
            }
        }
    }

    /// Adds a worker waiting for the answer to question `id`; `None` if there is no such
    /// question.
    pub fn wait(&mut self, id: u64) -> Option<oneshot::Receiver<Reply>> {
        let w = self.waiting.get_mut(&id)?;
        let (tx, rx) = oneshot::channel();
        w.waiters.push(tx);
        Some(rx)
    }

    /// A question by id.
    pub fn get(&self, id: u64) -> Option<&Waiting> {
        self.waiting.get(&id)
    }

    /// A question by id, to change.
    pub fn get_mut(&mut self, id: u64) -> Option<&mut Waiting> {
        self.waiting.get_mut(&id)
    }

    /// Takes question `id` out (it is being answered).
    pub fn take(&mut self, id: u64) -> Option<Waiting> {
        self.waiting.remove(&id)
    }

    /// Takes out every question of `session` (it ended).
    pub fn take_session(&mut self, session: &str) -> Vec<(u64, Waiting)> {
        let ids: Vec<u64> = self.waiting.iter().filter(|(_, w)| w.session == session).map(|(q, _)| *q).collect();
        ids.into_iter().filter_map(|q| self.waiting.remove(&q).map(|w| (q, w))).collect()
    }

    /// Every waiting question, by id.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &Waiting)> {
        self.waiting.iter().map(|(q, w)| (*q, w))
    }
}
