//! Decisions in flight. The actor ([`super::core`]) never waits on a decider: it keeps one
//! lane per session, makes the ballot of the lane's next request ([`crate::twin::Ballot`],
//! an owned copy of what votes 1 and 2 see), and hands it to a task of its own behind a
//! [`DeciderCall`]. With a costly decider, requests waiting together in an idle lane are
//! taken as one batch ([`crate::twin::Batch`], at most [`crate::twin::BATCH_MAX`]): each
//! gets its own ballot and verdict, and those the model must see share one call for vote 1 (vote 2, which reads untrusted content, is asked per request). The votes come back as a [`Cmd::Decided`], and the actor applies them
//! ([`crate::twin::Twin::conclude`], the grant into the enforcer, the audit) before it
//! answers whoever waits ([`Waiter`]): the grant is in the kernel before a held miss is
//! released or the request tool's caller hears of it. A session's pre-committed policy is
//! made the same way ([`Cmd::PolicyMade`]).
//!
//! ```text
//! tool / miss / answer ─→ actor: a Job in its session's lane (a miss of an object and access
//!                                already in the lane joins that job: decided once)
//! lane idle ─→ actor: checks that need no decider, Twin::ballot (of each job of the batch)
//!                     ─→ DeciderCall (task) votes 1 ∥ 2 ─→ Cmd::Decided ─→ actor
//! actor, per job in order: Twin::conclude → grant → audit → waiters (reply, hold release,
//!                          answers) → next job or batch
//! ```
//!
//! One session's decisions are made one after the other, each seeing the one before (the
//! session's earlier requests and grants are part of what the votes see), except within a
//! batch, whose requests see the same grants and each other as earlier requests not granted
//! ([`crate::twin::Batch`]); the sessions' lanes run side by side, so a slow decision holds
//! up its own session only. Ending a session drops its lane: the task is aborted and its
//! votes, if they come, find no job.

use super::core::{CallResult, Cmd};
use super::error::CallError;
use super::pipeline::{Origin, PipelineRequest};
use super::protocol::{ApprovalScope, Reply};
use crate::kernel::ObjectId;
use std::collections::{HashMap, VecDeque};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// Where the actor's own work comes back to it (votes cast, policies made).
pub type Inbox = mpsc::UnboundedSender<Cmd>;

/// Where the answer to a call goes (the server turns an error into the `error` reply).
pub type ReplyTo = oneshot::Sender<Result<CallResult, CallError>>;

/// A decider call running in a task of its own; dropping the handle aborts the task.
#[derive(Debug)]
pub struct DeciderCall(tokio::task::AbortHandle);

impl DeciderCall {
    /// Runs `work` in a task of its own and sends the command it ends with to `inbox`.
    pub fn spawn(inbox: &Inbox, work: impl std::future::Future<Output = Cmd> + Send + 'static) -> Self {
        let inbox = inbox.clone();
        let task = tokio::spawn(async move {
            // The actor is gone only when the daemon stops: nothing is left to apply it to.
            let _ = inbox.send(work.await);
        });
        DeciderCall(task.abort_handle())
    }
}

impl Drop for DeciderCall {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A decision's number, unique in the daemon: votes that come back for a job that is no
/// longer its lane's running one (the session ended) are dropped. A batch goes by its first
/// job's number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct JobId(u64);

/// What waits for a decision, answered once it is applied.
#[derive(Debug)]
pub enum Waiter {
    /// The request tool's caller.
    Tool(ReplyTo),
    /// A kernel miss: misses of the same object and access in the session join the first
    /// one's job, each with its own hold.
    Miss {
        /// Where the miss came from (a shadow session's would-be denial is audited with it).
        origin: Origin,
        /// The kernel's hold id (0: the access was not held).
        hold: u32,
        /// The kernel let the access through (shadow mode).
        shadow: bool,
    },
    /// The workers waiting for the user's answer to `question`, decided again after an
    /// approval.
    Answer {
        /// How far the approval reaches.
        scope: ApprovalScope,
        /// The waiting workers.
        waiters: Vec<oneshot::Sender<Reply>>,
    },
}

/// One request waiting in (or running in) its session's lane.
#[derive(Debug)]
pub struct Job {
    /// Its number.
    pub id: JobId,
    /// Where the request came from.
    pub origin: Origin,
    /// The request.
    pub req: PipelineRequest,
    /// Who waits for the ruling.
    pub waiters: Vec<Waiter>,
    /// When its decision began (for the audit's latency).
    pub start: Instant,
}

impl Job {
    /// Whether `other` may be decided in one batch with this job: neither is the re-decision
    /// of a user's answer, and they differ in object and in path for the access (a request
    /// of the same resource and access waits for this one's decision, and is then decided
    /// seeing its grant or its use of a one-time approval).
    pub fn batches_with(&self, other: &Job) -> bool {
        let answer = |j: &Job| matches!(j.origin, Origin::Answer { .. });
        let same = self.req.access == other.req.access && (self.req.path == other.req.path || self.req.target == other.req.target);
        !answer(self) && !answer(other) && !same
    }

    /// True if a miss of `req` joins this job: both are misses of the same object and
    /// access in the same session.
    fn merges(&self, origin: &Origin, req: &PipelineRequest) -> bool {
        let miss = |o: &Origin| matches!(o, Origin::Miss { .. });
        miss(&self.origin) && miss(origin) && self.req.session == req.session && self.req.target == req.target && self.req.access == req.access
    }
}

#[derive(Debug, Default)]
struct Lane {
    /// The jobs being decided (one, or a batch), in order, with their call.
    running: Option<(Vec<Job>, DeciderCall)>,
    queue: VecDeque<Job>,
}

/// Most requests of one session waiting for a decision (besides the one being decided): a
/// request past it is denied at once, so a worker that touches objects without end cannot
/// grow the daemon's memory without bound. As many as the kernel's hold places
/// (`HOLD_MAX`), so a session's held threads never meet it alone.
pub const LANE_QUEUE_MAX: usize = pincer_common::HOLD_MAX as usize;

/// The sessions' lanes of decisions.
#[derive(Debug, Default)]
pub struct Lanes {
    by_session: HashMap<String, Lane>,
    next: u64,
}

impl Lanes {
    /// Queues `req` in its session's lane, or adds `waiter` to a job of the lane it joins
    /// (a miss of the same object and access). A lane that already holds
    /// [`LANE_QUEUE_MAX`] waiting jobs takes no new one: the job is given back, to be
    /// denied.
    pub fn enqueue(&mut self, origin: Origin, req: PipelineRequest, waiter: Waiter) -> Result<(), Job> {
        let lane = self.by_session.entry(req.session.clone()).or_default();
        let joined = lane.running.iter_mut().flat_map(|(j, _)| j.iter_mut()).chain(lane.queue.iter_mut()).find(|j| j.merges(&origin, &req));
        if let Some(job) = joined {
            job.waiters.push(waiter);
            return Ok(());
        }
        self.next += 1;
        let job = Job { id: JobId(self.next), origin, req, waiters: vec![waiter], start: Instant::now() };
        if lane.queue.len() >= LANE_QUEUE_MAX {
            return Err(job);
        }
        lane.queue.push_back(job);
        Ok(())
    }

    /// The next job of `session`'s lane if none is running (an idle, empty lane is dropped).
    pub fn next(&mut self, session: &str) -> Option<Job> {
        let lane = self.by_session.get_mut(session)?;
        if lane.running.is_some() {
            return None;
        }
        let job = lane.queue.pop_front();
        if job.is_none() {
            self.by_session.remove(session);
        }
        job.map(|mut j| {
            j.start = Instant::now();
            j
        })
    }

    /// The next job of `session`'s lane if none is running and `joins` accepts it (for a
    /// batch being gathered); the lane is kept even when this empties it.
    pub fn next_if(&mut self, session: &str, joins: impl FnOnce(&Job) -> bool) -> Option<Job> {
        let lane = self.by_session.get_mut(session)?;
        if lane.running.is_some() || !lane.queue.front().is_some_and(joins) {
            return None;
        }
        lane.queue.pop_front().map(|mut j| {
            j.start = Instant::now();
            j
        })
    }

    /// Records `jobs` (one, or a batch in order) as their lane's running ones, their votes
    /// being cast by `call`. The batch goes by its first job's number.
    pub fn start(&mut self, jobs: Vec<Job>, call: DeciderCall) {
        let Some(first) = jobs.first() else { return };
        let lane = self.by_session.entry(first.req.session.clone()).or_default();
        debug_assert!(lane.running.is_none(), "one decision in flight per session");
        lane.running = Some((jobs, call));
    }

    /// Takes the running jobs of `session`'s lane, in order, if they are batch `id`.
    pub fn finish(&mut self, session: &str, id: JobId) -> Option<Vec<Job>> {
        let lane = self.by_session.get_mut(session)?;
        if lane.running.as_ref().is_some_and(|(j, _)| j.first().is_some_and(|j| j.id == id)) {
            lane.running.take().map(|(j, _)| j)
        } else {
            None
        }
    }

    /// Drops `session`'s lane: its running task is aborted; its jobs are returned (to be
    /// answered with a denial).
    pub fn close(&mut self, session: &str) -> Vec<Job> {
        let Some(lane) = self.by_session.remove(session) else { return vec![] };
        lane.running.map(|(j, _call)| j).into_iter().flatten().chain(lane.queue).collect()
    }
}

/// A session's held accesses whose hooks keep a lock ([`crate::kernel::Hook::holds_lock`]):
/// one at a time, and none until `cooldown_until` after one was denied.
#[derive(Debug, Default)]
pub struct LockedHolds {
    /// The one held now.
    pub active: Option<u32>,
    /// Until when the session's next ones are not held.
    pub cooldown_until: Option<std::time::Instant>,
}

/// A kernel miss whose thread waits in a hold until every access of the miss is decided.
#[derive(Debug, Clone)]
pub struct HeldMiss {
    /// The kernel's hold id.
    pub hold: u32,
    /// The session's cgroup id.
    pub cgroup_id: u64,
    /// The access types the miss asked for, each with the object its grant goes on
    /// ([`crate::kernel::Miss::target`]).
    pub access: Vec<(ObjectId, crate::access::Access)>,
    /// The entry's name (for a `create`, the new entry's, which the grant is given for:
    /// [`crate::kernel::Enforcer::holds_for_name`]).
    pub name: Option<std::ffi::OsString>,
    /// Decisions of the miss still to come.
    pub outstanding: usize,
    /// Its hook keeps a folder or the object locked while the thread waits.
    pub locked: bool,
    /// How long the thread had waited when the daemon took up the miss (none: it had not
    /// arrived yet).
    pub seen_after: Option<std::time::Duration>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Access;
    use crate::kernel::Hook;

    fn miss(session: &str, ino: u64) -> (Origin, PipelineRequest, Waiter) {
        let origin = Origin::Miss { hook: Hook::from_id(pincer_common::HOOK_FILE_OPEN), pid: 7, uid: 1000, flags: 0 };
        let req = PipelineRequest {
            session: session.into(),
            path: format!("f{ino}"),
            abs: format!("/w/f{ino}").into(),
            access: Access::Read,
            target: ObjectId { dev: 1, ino },
            content: None,
            any_name: false,
            kept_private: false,
        };
        (origin.clone(), req, Waiter::Miss { origin, hold: 0, shadow: false })
    }

    /// A session's lane takes at most LANE_QUEUE_MAX waiting jobs; past it a new request
    /// is given back (to be denied), a miss of an object already waiting still joins its
    /// job, and another session's lane is not affected.
    #[test]
    fn a_full_lane_gives_new_requests_back_and_still_merges() {
        let mut lanes = Lanes::default();
        for ino in 0..LANE_QUEUE_MAX as u64 {
            let (o, r, w) = miss("a", ino);
            assert!(lanes.enqueue(o, r, w).is_ok());
        }
        let (o, r, w) = miss("a", u64::MAX);
        let back = lanes.enqueue(o, r, w).expect_err("the lane is full");
        assert_eq!(back.req.target.ino, u64::MAX);
        let (o, r, w) = miss("a", 3);
        assert!(lanes.enqueue(o, r, w).is_ok(), "a miss of a waiting object joins its job");
        let (o, r, w) = miss("b", 0);
        assert!(lanes.enqueue(o, r, w).is_ok(), "another session has its own lane");
        let jobs: Vec<Job> = std::iter::from_fn(|| lanes.next("a")).collect();
        assert_eq!(jobs.len(), LANE_QUEUE_MAX, "nothing past the bound was queued");
        assert_eq!(jobs[3].waiters.len(), 2, "the joined miss waits with the first");
    }
}
