//! The decision pipeline. A request from the request tool, an access the kernel denied (a
//! miss) and a user's approval all enter [`Core::submit`] with their [`Origin`], a
//! [`PipelineRequest`] that carries the object the grant goes on (the kernel's (dev, ino)
//! for a miss, the resolved object for the tool) and who waits for the answer
//! ([`Waiter`]). They leave as one [`Ruling`]: the socket reply and the audit entry are
//! both made from it. The votes are cast outside the actor ([`super::decisions`]).
//!
//! ```text
//! tool:   request line → server → actor → resolve (O_NOFOLLOW walk: path, object, content)
//!                                        → submit(Origin::Tool, request) ⇢ ruling → reply
//! miss:   ring buffer → actor → the kernel's root, path and (dev, ino) → content read from
//!                               that object → submit(Origin::Miss, request) ⇢ ruling → audit,
//!                               hold released
//! answer: approve → actor → submit(Origin::Answer, the waiting request) ⇢ ruling → waiters
//!
//! ⇢: begin (checks, Twin::ballot; with a costly decider, of each request of a batch that
//!    waited together) → votes in a task → Cmd::Decided → per request in order: conclude
//!    (grant, question, counters, audit) → finish (the waiters)
//! ```
//!
//! Nothing here fails open: an unknown root, a walk out of bound, a truncated path, a twin
//! that cannot be built or a grant the kernel refuses are each a denial with its reason.

use super::audit::{AuditEntry, AuditRequest, Event, Source};
use super::config::OnMiss;
use super::core::{CallResult, Cmd, Core};
use super::decisions::{DeciderCall, HeldMiss, Job, JobId, ReplyTo, Waiter};
use super::error::chain;
use super::peer::Peer;
use super::protocol::{ApprovalScope, RequestOutcome, Reply, Ruling};
use super::questions::Waiting;
use super::resolve;
use crate::access::Access;
use crate::decider::Verdict;
use crate::kernel::{Hook, Miss, ObjectId, Scope};
use crate::twin::{self, Decision, Votes};
use tokio::time::Instant;
use std::path::{Path, PathBuf};

/// Where a request entered the pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// The request tool (`pincer request`, the MCP tool) of a session's worker; it waits
    /// for the user's answer to an escalation.
    Tool {
        /// The calling process.
        peer: Peer,
        /// The worker's rationale (untrusted).
        reason: Option<String>,
    },
    /// An access the kernel denied (an implicit request; nobody waits for its answer).
    Miss {
        /// The hook that denied.
        hook: Hook,
        /// The denied process.
        pid: u32,
        /// Its uid.
        uid: u32,
        /// `EVENT_FLAG_*` bits of the event.
        flags: u32,
    },
    /// The user approved question `question`: the request of `first` is decided again
    /// with the approval in the trusted state.
    Answer {
        /// The question answered.
        question: u64,
        /// Where the request first came from.
        first: Box<Origin>,
    },
}

impl Origin {
    /// Where the request first came from, as audited.
    pub fn source(&self) -> Source {
        match self {
            Origin::Tool { .. } => Source::Tool,
            Origin::Miss { .. } => Source::Miss,
            Origin::Answer { first, .. } => first.source(),
        }
    }

    /// The requesting process and its uid.
    pub fn process(&self) -> (u32, u32) {
        match self {
            Origin::Tool { peer, .. } => (peer.pid, peer.uid),
            Origin::Miss { pid, uid, .. } => (*pid, *uid),
            Origin::Answer { first, .. } => first.process(),
        }
    }

    /// The worker's rationale, if it gave one.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Origin::Tool { reason, .. } => reason.as_deref(),
            Origin::Miss { .. } => None,
            Origin::Answer { first, .. } => first.reason(),
        }
    }

    /// The kernel hook, for a miss.
    pub fn hook(&self) -> Option<Hook> {
        match self {
            Origin::Miss { hook, .. } => Some(*hook),
            Origin::Tool { .. } => None,
            Origin::Answer { first, .. } => first.hook(),
        }
    }

    /// The request as the audit log shows it.
    pub fn audit_request(&self, path: &str, access: Access) -> AuditRequest {
        let (pid, uid) = self.process();
        AuditRequest { path: path.into(), access, source: self.source(), hook: self.hook(), rationale: self.reason().map(str::to_string), pid: Some(pid), uid: Some(uid) }
    }
}

/// One access to one object, as the pipeline decides it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineRequest {
    /// The session.
    pub session: String,
    /// The path as the twin sees it (relative to its root, `/` after a directory).
    pub path: String,
    /// The resource's absolute path (checked against the never-grantable list).
    pub abs: PathBuf,
    /// The access type.
    pub access: Access,
    /// The object the grant goes on: the resource itself, or for `create` its parent
    /// directory (for a miss, the (dev, ino) the kernel named).
    pub target: ObjectId,
    /// Up to [`resolve::MAX_CONTENT`] bytes of the resource (untrusted, for vote 2).
    pub content: Option<Vec<u8>>,
    /// A `create` asked for the existing folder `abs` itself (a tool request): any visible
    /// name in it, the grant on the folder. Otherwise a `create` is of one new entry.
    pub any_name: bool,
    /// The resource, or a folder on the way to it, is kept more private than its folder
    /// (the kernel's flag or the modes read now): granted only on the user's word.
    pub kept_private: bool,
}

impl PipelineRequest {
    /// For a `create` of one new entry, its name: what the grant is given for (the kernel
    /// makes that name only, [`crate::kernel::Enforcer::grant_create_name`]).
    pub fn new_name(&self) -> Option<&std::ffi::OsStr> {
        (self.access == Access::Create && !self.any_name).then(|| self.abs.file_name()).flatten()
    }

    /// The request for `access` to what the request tool's path resolved to: `create` of
    /// an existing folder is for any visible name in it.
    pub fn resolved(session: String, access: Access, r: resolve::Resolved) -> Self {
        let any_name = access == Access::Create && r.is_dir;
        PipelineRequest { session, path: r.rel, abs: r.abs, access, target: r.target, content: r.content, any_name, kept_private: r.kept_private }
    }

    fn for_twin(&self, origin: &Origin) -> twin::Request {
        twin::Request { path: self.path.clone(), access: self.access, rationale: origin.reason().map(str::to_string), content: self.content.clone(), kept_private: self.kept_private }
    }
}

/// Why a request was denied before the twin saw it.
#[derive(Debug, thiserror::Error)]
pub enum Unresolved {
    /// The request tool's path could not be resolved inside the roots.
    #[error("{0}")]
    Path(resolve::ResolveError),
    /// The kernel named no registered root of the session (or its walk ran out of bound).
    #[error("the object's protected root is unknown (walk out of bound); denied")]
    UnknownRoot,
    /// The object is the user's own but lies outside every place of the session: the
    /// kernel gates it by its owner and the twin has no root to judge it under.
    #[error("the object belongs to the session's user outside the session's places (gated by its owner); add its folder to the session's roots or to the open paths to have it decided; denied")]
    OwnedOutside,
    /// The kernel ran out of room for the path: a partial path is never decided as whole.
    #[error("the kernel truncated the object's path (deeper than the event holds); a partial path is not decided; denied")]
    PathTruncated,
    /// The user's twin could not be built.
    #[error("{}", chain(.0))]
    Twin(super::twins::TwinsError),
    /// The trusted store cannot be reached (a fleet's database is away): nothing is decided
    /// on a state that may be stale.
    #[error("the trusted store cannot be reached ({}); denied (fail closed)", chain(.0))]
    Store(crate::store::StoreError),
    /// The resource is never grantable: the pattern or rule that says so.
    #[error("never-grantable ({0}): no vote, rule or approval can grant it; denied")]
    Never(String),
    /// The session already has [`super::decisions::LANE_QUEUE_MAX`] requests waiting for a
    /// decision.
    #[error("the session has {} requests waiting for a decision already; denied without one", super::decisions::LANE_QUEUE_MAX)]
    LaneFull,
    /// The owner's containment configuration could not be compiled: everything is denied.
    #[error("the session's containment cannot be compiled ({}); denied", chain(.0))]
    Containment(super::contain::ContainError),
}

/// The reason a worker is given for a denial: per vote that did not allow, the kind of
/// evidence it rests on ([`crate::decider::Mechanism::worker_phrase`]), never the vote's
/// free text, which may quote names or values read from the resource the worker was refused
/// (or, from a model, anything). The audit keeps the full reasons.
fn deny_reason(d: &Decision) -> String {
    let reasons: Vec<String> = d
        .votes
        .iter()
        .enumerate()
        .filter(|(_, v)| v.verdict != Verdict::Allow)
        .map(|(i, v)| {
            let verdict = if v.verdict == Verdict::AskUser { "asks the user" } else { "denies" };
            match v.mechanism {
                Some(m) => format!("vote {} {verdict}: {}", i + 1, m.worker_phrase()),
                None => format!("vote {} {verdict}", i + 1),
            }
        })
        .collect();
    if reasons.is_empty() {
        "denied".into()
    } else {
        reasons.join("; ")
    }
}

/// The kernel's miss as requests, one per missing access type, or why it cannot be one.
fn miss_requests(session: &super::sessions::Session, m: &Miss) -> Result<Vec<PipelineRequest>, Unresolved> {
    let unresolved = if m.owned_outside_roots() { Unresolved::OwnedOutside } else { Unresolved::UnknownRoot };
    let root = s_root(session, m).ok_or(unresolved)?;
    if m.walk_exhausted() || m.relative_path.as_os_str().is_empty() {
        return Err(Unresolved::UnknownRoot);
    }
    if m.path_truncated() {
        return Err(Unresolved::PathTruncated);
    }
    let is_dir = m.access.contains(&Access::List) || m.hook.object_is_dir();
    let path = resolve::twin_path(&root, m.relative_path.components(), is_dir);
    let object = m.target(Access::Read);
    let abs = root.path.join(&m.relative_path);
    // The kernel's word, read when the access was made: the path is not looked up again
    // (a held creation keeps its folder locked, and a lookup there would wait on it).
    let kept_private = m.kept_private();
    Ok(m
        .access
        .iter()
        .map(|&access| {
            let target = m.target(access);
            let content = if matches!(access, Access::Read | Access::Write | Access::Delete) {
                resolve::content_of(&root, &m.relative_path, object)
            } else {
                None
            };
            PipelineRequest { session: session.id.clone(), path: path.clone(), abs: abs.clone(), access, target, content, any_name: false, kept_private }
        })
        .collect())
}

fn s_root(session: &super::sessions::Session, m: &Miss) -> Option<resolve::Root> {
    session.all_root_recs().find(|r| r.dev == m.root_dev && r.ino == m.root_ino).map(|r| r.root())
}

/// What deciding a job starts with ([`Core::begin`]).
enum Begun {
    /// Ruled without any vote.
    Ruled(Ruling),
    /// The twin refused the request before any vote.
    Rejected(Decision),
    /// Votes 1 and 2 are to be cast.
    Ballot(twin::Ballot),
}

impl Core {
    /// Queues a request in its session's lane ([`super::decisions`]) with who waits for its
    /// ruling, and starts it if the lane is idle. The actor does not wait for the votes.
    pub(super) async fn submit(&mut self, origin: Origin, req: PipelineRequest, waiter: Waiter) {
        let session = req.session.clone();
        if let Err(job) = self.lanes.enqueue(origin, req, waiter) {
            let ruling = self.deny_unresolved(&job.origin, &session, &job.req.path, job.req.access, &Unresolved::LaneFull);
            self.finish(job, &ruling);
            return;
        }
        self.pump(&session).await;
    }

    /// Starts the next decision of `session`'s lane if none is in flight: the checks that
    /// need no decider run here, votes 1 and 2 in a task of their own ([`DeciderCall`]).
    /// With a costly decider ([`twin::Ballot::batches`]) the jobs waiting behind the first
    /// that may be decided with it ([`Job::batches_with`]) join it, up to
    /// [`twin::BATCH_MAX`], as one [`twin::Batch`]; a job ruled before any vote is answered
    /// at once and the gathering goes on.
    async fn pump(&mut self, session: &str) {
        let mut batch: Vec<(Job, twin::Ballot)> = Vec::new();
        loop {
            let job = if batch.is_empty() {
                self.lanes.next(session)
            } else {
                self.lanes.next_if(session, |j| batch.iter().all(|(b, _)| b.batches_with(j)))
            };
            let Some(job) = job else { break };
            match self.begin(&job).await {
                Begun::Ruled(ruling) => self.finish(job, &ruling),
                Begun::Rejected(d) => {
                    let ruling = self.conclude(&job, &d);
                    self.finish(job, &ruling);
                }
                Begun::Ballot(ballot) => {
                    let alone = !ballot.batches() || batch.first().is_some_and(|(_, b)| !b.batches());
                    batch.push((job, ballot));
                    if alone || batch.len() >= twin::BATCH_MAX {
                        break;
                    }
                }
            }
        }
        let Some(id) = batch.first().map(|(j, _)| j.id) else { return };
        let (jobs, ballots): (Vec<Job>, Vec<twin::Ballot>) = batch.into_iter().unzip();
        let session = session.to_string();
        // The batch (each request's scan for injected text among them) is made in the task.
        let call = DeciderCall::spawn(&self.inbox, async move { Cmd::Decided { session, job: id, votes: twin::Batch::new(ballots).cast().await } });
        self.lanes.start(jobs, call);
    }

    /// What deciding `job` starts with: a ruling without any vote (never-grantable, a store
    /// that cannot be reached, a twin that cannot be built, a miss granted meanwhile), the
    /// twin's refusal before any vote, or the ballot of votes 1 and 2.
    async fn begin(&mut self, job: &Job) -> Begun {
        let (origin, req) = (&job.origin, &job.req);
        let Some((user, owner, cgroup_id)) = self.sessions.get(&req.session).map(|s| (s.user.clone(), s.owner_uid, s.cgroup_id)) else {
            return Begun::Ruled(Ruling::deny(format!("no open session {:?}", req.session), None));
        };
        // A miss queued behind the decision that granted its access is not decided again.
        if matches!(origin, Origin::Miss { .. }) && self.enforcer.holds_for_name(cgroup_id, req.target, req.access, req.new_name()).unwrap_or(false) {
            return Begun::Ruled(Ruling { granted: true, outcome: RequestOutcome::Grant, reason: "granted by an earlier decision".into(), question: None });
        }
        // Never-grantable beats every vote, rule and approval; a containment that cannot
        // be compiled denies everything.
        let never = match self.containment(owner) {
            Ok(c) => c
                .never
                .forbids(&req.abs, req.access)
                .map(|p| p.to_string())
                .or_else(|| c.hidden_in_root(&req.abs, req.access))
                .map(Unresolved::Never),
            Err(e) => Some(Unresolved::Containment(e)),
        };
        if let Some(why) = never {
            return Begun::Ruled(self.deny_unresolved(origin, &req.session, &req.path, req.access, &why));
        }
        if let Err(e) = self.twins.reachable(&user) {
            return Begun::Ruled(self.deny_unresolved(origin, &req.session, &req.path, req.access, &Unresolved::Store(e)));
        }
        match self.twins.get(&user).await {
            Ok(t) => match t.ballot(&req.session, &req.for_twin(origin)) {
                Ok(b) => Begun::Ballot(b),
                Err(d) => Begun::Rejected(d),
            },
            Err(e) => Begun::Ruled(self.deny_unresolved(origin, &req.session, &req.path, req.access, &Unresolved::Twin(e))),
        }
    }

    /// Votes 1 and 2 of batch `id` of `session`'s lane came back, one [`Votes`] per job in
    /// order: per job, the twin concludes, the ruling is applied and answered; then the
    /// lane's next job starts. A job the votes do not reach is denied. Votes for a batch that
    /// is no longer running (its session ended) change nothing.
    pub(super) async fn decided(&mut self, session: &str, id: JobId, votes: Vec<Votes>) {
        let Some(jobs) = self.lanes.finish(session, id) else { return };
        let mut votes = votes.into_iter();
        for job in jobs {
            let user = self.sessions.get(session).map(|s| s.user.clone());
            let d = match (votes.next(), user.as_deref().and_then(|u| self.twins.existing(u))) {
                (Some(v), Some(t)) => t.conclude(session, &job.req.for_twin(&job.origin), v),
                (None, _) => Decision::rejected("no votes came back for this request (fail closed)".into()),
                (_, None) => Decision::rejected(format!("no open session {session:?}")),
            };
            let ruling = self.conclude(&job, &d);
            self.finish(job, &ruling);
        }
        self.pump(session).await;
    }

    /// Applies the twin's decision of `job`: the grant into the kernel, the question for
    /// the user, the counters and the audit entry.
    fn conclude(&mut self, job: &Job, d: &Decision) -> Ruling {
        let (origin, req) = (&job.origin, &job.req);
        let Some(user) = self.sessions.get(&req.session).map(|s| s.user.clone()) else {
            return Ruling::deny(format!("no open session {:?}", req.session), None);
        };
        let answered = match origin {
            Origin::Answer { question, .. } => Some(*question),
            _ => None,
        };
        let ruling = match (answered, &d.outcome) {
            (Some(q), _) => {
                // A vote that asks the user has its answer now; a vote that denies still denies.
                let answered = d.granted() || d.votes.iter().all(|v| v.verdict != Verdict::Deny);
                let granted = answered && self.apply_grant(req);
                let reason = if granted { "the user approved".to_string() } else { deny_reason(d) };
                Ruling { granted, outcome: if granted { RequestOutcome::UserApproved } else { RequestOutcome::Deny }, reason, question: Some(q) }
            }
            (None, twin::Outcome::Grant) => {
                if self.apply_grant(req) {
                    Ruling { granted: true, outcome: RequestOutcome::Grant, reason: "all three votes allow".into(), question: None }
                } else {
                    Ruling::deny("the grant could not be inserted in the kernel", None)
                }
            }
            (None, twin::Outcome::Deny) => Ruling::deny(deny_reason(d), None),
            (None, twin::Outcome::Escalate) => {
                let q = d.question.expect("the twin numbers every question it escalates");
                let votes = d.votes.to_vec();
                if self.questions.ask(q, || Waiting { user: user.clone(), session: req.session.clone(), request: req.clone(), origin: origin.clone(), votes, waiters: vec![] }) {
                    // A fleet's other hosts list it too; an answer given there comes back here.
                    self.publish_question(q);
                }
                Ruling { granted: false, outcome: RequestOutcome::Escalate, reason: deny_reason(d), question: Some(q) }
            }
        };
        self.account(&req.session, d, ruling.granted, answered.is_none());
        self.audit_decision(origin, req, d, &ruling, job.start);
        self.persist_soon();
        ruling
    }

    /// Answers everyone who waits for `job`'s ruling (its grant, if any, is in the kernel).
    pub(super) fn finish(&mut self, job: Job, ruling: &Ruling) {
        let req = job.req;
        for w in job.waiters {
            match w {
                Waiter::Tool(reply) => {
                    let result = match (ruling.outcome, ruling.question) {
                        (RequestOutcome::Escalate, Some(question)) => match self.questions.wait(question) {
                            Some(rx) => CallResult::Wait { rx, question },
                            None => CallResult::Now(ruling.clone().into()),
                        },
                        _ => CallResult::Now(ruling.clone().into()),
                    };
                    let _ = reply.send(Ok(result));
                }
                Waiter::Miss { origin, hold, shadow } => {
                    if shadow && !ruling.granted {
                        // Shadow mode: the kernel let it through; the audit says what enforcing would do.
                        if let Some(s) = self.sessions.get(&req.session) {
                            let mut e = self.entry(Event::Miss, s);
                            e.request = Some(origin.audit_request(&req.path, req.access));
                            e.outcome = Some(RequestOutcome::Deny);
                            e.detail = Some(format!("shadow mode: allowed by the kernel; enforcing would deny ({})", ruling.reason));
                            self.audit.record(&e);
                        }
                    }
                    if hold != 0 {
                        self.hold_decided(hold);
                    }
                }
                Waiter::Answer { scope, waiters } => {
                    if ruling.granted && scope == ApprovalScope::Once {
                        self.once_granted(&req);
                    }
                    let reply: Reply = ruling.clone().into();
                    for tx in waiters {
                        let _ = tx.send(reply.clone());
                    }
                }
            }
        }
    }

    /// Denies a request the twin never saw, counting and auditing it.
    fn deny_unresolved(&mut self, origin: &Origin, session: &str, path: &str, access: Access, why: &Unresolved) -> Ruling {
        let why = why.to_string();
        if let Some(s) = self.sessions.get_mut(session) {
            s.counters.requests += 1;
            s.counters.denials += 1;
            let mut e = AuditEntry::new(if origin.source() == Source::Miss { Event::Miss } else { Event::Decision });
            e.session = Some(s.id.clone());
            e.owner_uid = Some(s.owner_uid);
            let mut r = origin.audit_request(path, access);
            r.rationale = None;
            e.request = Some(r);
            e.outcome = Some(RequestOutcome::Deny);
            e.detail = Some(why.clone());
            self.record_denial(session, e);
        }
        Ruling::deny(why, None)
    }

    /// A request of the session's worker through the request tool; the answer goes to
    /// `reply` once it is decided.
    pub(super) async fn tool_request(&mut self, session: &str, peer: &Peer, path: &str, access: Access, reason: Option<String>, reply: ReplyTo) {
        let origin = Origin::Tool { peer: peer.clone(), reason };
        let roots = self.sessions.get(session).map(|s| s.all_roots()).unwrap_or_default();
        let r = match resolve::resolve(&roots, path, access) {
            Ok(r) => r,
            Err(e) => {
                let ruling = self.deny_unresolved(&origin, session, path, access, &Unresolved::Path(e));
                let _ = reply.send(Ok(CallResult::Now(ruling.into())));
                return;
            }
        };
        let req = PipelineRequest::resolved(session.into(), access, r);
        self.submit(origin, req, Waiter::Tool(reply)).await;
    }

    /// An access the kernel denied: recorded, or decided as an implicit request per
    /// missing access type. A held miss's wait ends once every access of it is decided
    /// (granted or not), whatever path the decision took.
    pub(super) async fn miss(&mut self, m: Miss) {
        let origin = Origin::Miss { hook: m.hook, pid: m.pid, uid: m.uid, flags: m.flags };
        let shadow = m.shadow_allowed();
        let requests = self.miss_to_decide(&origin, &m);
        let hold = if self.holds.is_some() { m.hold } else { 0 };
        if hold != 0 {
            let locked = m.hook.holds_lock();
            let seen_after = self.holds.as_ref().and_then(|h| h.waited(hold));
            let name = m.relative_path.file_name().map(std::ffi::OsStr::to_os_string);
            let held = HeldMiss { hold, cgroup_id: m.session, access: m.access.iter().map(|&a| (m.target(a), a)).collect(), name, outstanding: requests.len(), locked, seen_after };
            if requests.is_empty() {
                self.release_hold(&held);
                return;
            }
            if locked {
                self.admit_locked(&held);
            }
            self.held.insert(hold, held);
        }
        for req in requests {
            self.submit(origin.clone(), req, Waiter::Miss { origin: origin.clone(), hold, shadow }).await;
        }
    }

    /// A held access whose hook keeps a folder (or the object) locked waits only if it is
    /// its session's one such hold and the session is not cooling down after a denied one,
    /// and then at most `[hold] locked_max_ms`; otherwise its wait ends at once (EACCES; the
    /// decision still comes and serves a retry). So a session cannot keep the user's
    /// folders locked by holding accesses one after another.
    fn admit_locked(&mut self, held: &HeldMiss) {
        let Some(holds) = &self.holds else { return };
        let now = std::time::Instant::now();
        let st = self.locked.entry(held.cgroup_id).or_default();
        let cooling = st.cooldown_until.is_some_and(|until| now < until);
        if st.active.is_some() || cooling {
            holds.limit(held.hold, std::time::Duration::ZERO);
        } else {
            st.active = Some(held.hold);
            holds.limit(held.hold, std::time::Duration::from_millis(self.config.hold.locked_max_ms));
        }
    }

    /// One decision of held miss `hold` is applied; the hold ends with the last.
    fn hold_decided(&mut self, hold: u32) {
        let Some(held) = self.held.get_mut(&hold) else { return };
        held.outstanding = held.outstanding.saturating_sub(1);
        if held.outstanding == 0 {
            let held = self.held.remove(&hold).expect("looked up above");
            self.release_hold(&held);
        }
    }

    /// Ends a held miss's wait and audits it; the grant (if any) is in the kernel already,
    /// which checks it next.
    fn release_hold(&mut self, held: &HeldMiss) {
        let Some(holds) = self.holds.clone() else { return };
        let granted = held.access.iter().all(|&(target, a)| self.enforcer.holds_for_name(held.cgroup_id, target, a, held.name.as_deref()).unwrap_or(false));
        let hold = held.hold;
        let end = holds.release(hold);
        if let Some(s) = self.sessions.by_cgroup_id(held.cgroup_id) {
            use crate::kernel::hold::HoldEnd;
            let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
            let session = s.id.clone();
            let mut e = self.entry(Event::Hold, s);
            // A hold the bound ended was denied whatever the decision.
            let let_through = granted && !matches!(end, HoldEnd::TimedOut(_) | HoldEnd::Killed(_));
            if held.locked {
                self.locked_ended(held, &end, let_through);
            }
            e.outcome = Some(if let_through { RequestOutcome::Grant } else { RequestOutcome::Deny });
            e.latency_ms = match end {
                HoldEnd::Waited(w) | HoldEnd::TimedOut(w) | HoldEnd::Killed(w) => Some(ms(w)),
                HoldEnd::Early => None,
            };
            e.seen_ms = held.seen_after.map(ms);
            e.detail = Some(match end {
                HoldEnd::Waited(w) => format!("hold {hold}: the access waited {:.1} ms for the decision; {}", ms(w), if granted { "granted, the same syscall goes on" } else { "not granted, EACCES" }),
                HoldEnd::Early => format!("hold {hold}: decided before the thread's wait began; {}", if granted { "granted" } else { "not granted, EACCES" }),
                HoldEnd::TimedOut(w) if held.locked => format!("hold {hold}: ended after {:.1} ms before the decision (its hook keeps a lock: [hold] locked_max_ms, one such hold per session at a time, none for a while after a denied one); EACCES{}", ms(w), if granted { " (the grant serves the retry)" } else { "" }),
                HoldEnd::TimedOut(w) => format!("hold {hold}: timed out after {:.1} ms ([hold] max_ms) before the decision; EACCES{}", ms(w), if granted { " (the grant serves the retry)" } else { "" }),
                HoldEnd::Killed(w) => format!("hold {hold}: the waiting thread was killed after {:.1} ms, before the decision; its wait ended then", ms(w)),
            });
            self.record_outcome(&session, e, let_through);
        }
    }

    /// A session's held access that kept a lock ended: the next may be held, unless this one
    /// was denied, after which the session's next ones are not held for ten times its wait
    /// (1 s to 60 s).
    fn locked_ended(&mut self, held: &HeldMiss, end: &crate::kernel::hold::HoldEnd, let_through: bool) {
        use crate::kernel::hold::HoldEnd;
        let Some(st) = self.locked.get_mut(&held.cgroup_id) else { return };
        if st.active != Some(held.hold) {
            return;
        }
        st.active = None;
        if !let_through {
            let waited = match end {
                HoldEnd::Waited(w) | HoldEnd::TimedOut(w) | HoldEnd::Killed(w) => *w,
                HoldEnd::Early => std::time::Duration::ZERO,
            };
            let pause = (waited * 10).clamp(std::time::Duration::from_secs(1), std::time::Duration::from_secs(60));
            st.cooldown_until = Some(std::time::Instant::now() + pause);
        }
    }

    /// Writes `e`, an entry of session `session`'s: always when what it records was let
    /// through, else as a denial, within the session's budget ([`Self::record_denial`]).
    fn record_outcome(&mut self, session: &str, e: AuditEntry, let_through: bool) {
        if let_through {
            self.audit.record(&e);
        } else {
            self.record_denial(session, e);
        }
    }

    /// Writes `e`, a denial of session `session` that no decision made, within the
    /// session's [`DenialBudget`](super::audit::DenialBudget): past it the denial is only
    /// counted, and the next entry written says how many were not.
    fn record_denial(&mut self, session: &str, mut e: AuditEntry) {
        let now = std::time::Instant::now();
        let budget = self.denial_budgets.entry(session.to_string()).or_insert_with(|| super::audit::DenialBudget::new(now));
        let Some(held) = budget.take(now) else { return };
        if held > 0 {
            let d = e.detail.take().unwrap_or_default();
            e.detail = Some(format!("{d} ({held} earlier denials of this session were counted, not written one by one: more than {} a second)", super::audit::DENIALS_PER_SECOND));
        }
        self.audit.record(&e);
    }

    /// Audits a kernel event of a cgroup no open session has (one that ended while its
    /// event was on the way): it stays denied.
    fn audit_unknown_session(&self, detail: String) {
        let mut e = AuditEntry::new(Event::Miss);
        e.detail = Some(detail);
        self.audit.record(&e);
    }

    /// The requests of a miss that are to be decided; a miss that is not the twin's to
    /// decide (or only recorded) is audited here and gives none.
    fn miss_to_decide(&mut self, origin: &Origin, m: &Miss) -> Vec<PipelineRequest> {
        let Some(s) = self.sessions.by_cgroup_id(m.session) else {
            self.audit_unknown_session(format!("miss of unknown session cgroup {} ({} {})", m.session, m.hook, m.relative_path.display()));
            return vec![];
        };
        let id = s.id.clone();
        // Misses that are not the twin's to decide: the kernel's never map or terminal
        // injection (whose walk may run past the root, so the path is the kernel's, not a
        // root-relative one). They are audited and stay denied.
        if m.never() {
            let mut e = self.entry(Event::Miss, s);
            e.request = m.access.first().map(|a| origin.audit_request(&m.relative_path.to_string_lossy(), *a));
            e.outcome = Some(RequestOutcome::Deny);
            e.detail = Some(format!("never-grantable ({}, {:?}): denied by the kernel's never map; not decided", m.hook, m.access));
            self.record_denial(&id, e);
            if let Some(s) = self.sessions.get_mut(&id) {
                s.counters.misses += 1;
                s.counters.denials += 1;
            }
            return vec![];
        }
        let requests = miss_requests(s, m);
        if let Some(s) = self.sessions.get_mut(&id) {
            s.counters.misses += 1;
        }
        let mut requests = match requests {
            Ok(r) => r,
            Err(why) => {
                for a in &m.access {
                    self.deny_unresolved(origin, &id, &m.relative_path.to_string_lossy(), *a, &why);
                }
                return vec![];
            }
        };
        // A worker that retries a denied access misses again until the grant is in: the
        // misses that come after it find the grant there and are not decided again (a
        // failed lookup decides as usual; nothing is granted here); those that come while
        // it is decided join its decision ([`super::decisions::Lanes::enqueue`]).
        if let Some(cgroup_id) = self.sessions.get(&id).map(|s| s.cgroup_id) {
            requests.retain(|r| !self.enforcer.holds_for_name(cgroup_id, r.target, r.access, r.new_name()).unwrap_or(false));
            if requests.is_empty() {
                return vec![];
            }
        }
        if self.config.on_miss == OnMiss::Record {
            let s = self.sessions.get(&id).expect("looked up above");
            let entries: Vec<AuditEntry> = requests
                .iter()
                .map(|r| {
                    let mut e = self.entry(Event::Miss, s);
                    e.request = Some(origin.audit_request(&r.path, r.access));
                    e.outcome = Some(RequestOutcome::Deny);
                    e.detail = Some(format!("denied by the kernel ({}); recorded only (on_miss = \"record\")", m.hook));
                    e
                })
                .collect();
            for e in entries {
                self.record_denial(&id, e);
            }
            self.persist_soon();
            return vec![];
        }
        requests
    }

    /// A reach denial (a process, IPC object, socket, key, terminal or cgroup file outside
    /// the session): never the twin's to decide, so it is audited and stays denied.
    pub(super) fn reach_denied(&mut self, r: &crate::kernel::ReachDenial) {
        let Some(s) = self.sessions.by_cgroup_id(r.session) else {
            self.audit_unknown_session(format!("reach denial of unknown session cgroup {} ({}): {:?}", r.session, r.hook, r.reach));
            return;
        };
        let id = s.id.clone();
        let mut e = self.entry(Event::Miss, s);
        e.outcome = Some(RequestOutcome::Deny);
        e.detail = Some(format!("denied by session containment ({}, pid {}): {:?}; not grantable", r.hook, r.pid, r.reach));
        self.record_denial(&id, e);
        if let Some(s) = self.sessions.get_mut(&id) {
            s.counters.misses += 1;
            s.counters.denials += 1;
        }
    }

    /// Inserts a grant; a kernel error is logged and makes the request a denial. A
    /// `create` gives that one name in its folder ([`PipelineRequest::new_name`]), hidden
    /// or not; in a fan-out folder of a content store, `create` of visible names there and
    /// in the store's other fan-out folders ([`Pipeline::grant_fanout_siblings`]).
    fn apply_grant(&mut self, req: &PipelineRequest) -> bool {
        let Some(s) = self.sessions.get(&req.session) else { return false };
        let cgroup_id = s.cgroup_id;
        let inserted = match req.new_name() {
            Some(_) if in_fanout_folder(req) => self.enforcer.grant(cgroup_id, req.target, Scope::Exact, req.access).map(|()| {
                self.grant_fanout_siblings(cgroup_id, req);
            }),
            Some(name) => self.enforcer.grant_create_name(cgroup_id, req.target, name),
            None => self.enforcer.grant(cgroup_id, req.target, Scope::Exact, req.access),
        };
        match inserted {
            Ok(()) => true,
            Err(e) => {
                tracing::error!(session = req.session, error = %chain(&e), "grant could not be inserted; denying");
                false
            }
        }
    }

    /// A grant to create (visible names) in a fan-out folder of a content store (a short
    /// hex name, as git's `objects/ed/`) is a grant to create in each of its store's fan-out
    /// folders: a new object goes into the one its hash names, so a worker that is refused
    /// and tries again (a kernel with no held accesses) writes an object of another hash
    /// (a commit's time changed) into another folder each time. Only folders that are
    /// directories themselves (not symlinks) and sit beside the granted one get it; creating
    /// only, and the never-grantable checks still come first in the kernel.
    fn grant_fanout_siblings(&mut self, cgroup_id: u64, req: &PipelineRequest) {
        /// At most this many entries of the store's folder are looked at.
        const SCAN_MAX: usize = 4096;
        let Some(dir) = req.abs.parent() else { return };
        // The path must still name the object the grant went on.
        if ObjectId::of_path(dir).ok() != Some(req.target) {
            return;
        }
        let Some(store) = dir.parent() else { return };
        let Ok(entries) = std::fs::read_dir(store) else { return };
        let mut granted = 0usize;
        for entry in entries.take(SCAN_MAX).flatten() {
            let is_fanout = entry.file_name().to_str().is_some_and(crate::sanitize::is_fanout);
            if !is_fanout || !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let Ok(meta) = entry.metadata() else { continue };
            let id = ObjectId::of_metadata(&meta);
            if id == req.target {
                continue;
            }
            match self.enforcer.grant(cgroup_id, id, Scope::Exact, Access::Create) {
                Ok(()) => granted += 1,
                Err(e) => {
                    tracing::warn!(session = req.session, error = %chain(&e), "a fan-out folder's create grant could not be inserted");
                    break;
                }
            }
        }
        tracing::debug!(session = req.session, store = %store.display(), granted, "create granted in the store's other fan-out folders");
    }

    fn account(&mut self, session: &str, d: &Decision, granted: bool, new_request: bool) {
        if let Some(s) = self.sessions.get_mut(session) {
            if new_request {
                s.counters.requests += 1;
            }
            s.counters.tokens += d.tokens;
            match (&d.outcome, granted) {
                (_, true) => s.counters.grants += 1,
                (twin::Outcome::Escalate, false) => s.counters.escalations += 1,
                _ => s.counters.denials += 1,
            }
        }
    }

    /// Audits a decision: a grant always, a denial or a question within the session's
    /// budget, as its other denials are (a session may ask as fast as the daemon answers).
    fn audit_decision(&mut self, origin: &Origin, req: &PipelineRequest, d: &Decision, ruling: &Ruling, start: Instant) {
        let Some(s) = self.sessions.get(&req.session) else { return };
        let mut e = self.entry(Event::Decision, s);
        e.request = Some(origin.audit_request(&req.path, req.access));
        e.outcome = Some(ruling.outcome);
        e.votes = d.votes.to_vec();
        e.decider = Some(self.decider_name.clone());
        e.tokens = Some(d.tokens);
        e.latency_ms = Some(start.elapsed().as_secs_f64() * 1000.0);
        e.question = ruling.question;
        self.record_outcome(&req.session, e, ruling.granted);
    }
}

impl From<Ruling> for Reply {
    fn from(r: Ruling) -> Self {
        Reply::Decision { granted: r.granted, outcome: r.outcome, reason: r.reason, question: r.question }
    }
}

/// Whether `req` creates a visible name in a fan-out folder of a content store (a short
/// hex name, as git's `objects/ed/`), where the next object's name is its hash.
fn in_fanout_folder(req: &PipelineRequest) -> bool {
    let visible = req.new_name().is_some_and(|n| !n.as_encoded_bytes().starts_with(b"."));
    visible && req.abs.parent().and_then(Path::file_name).and_then(|n| n.to_str()).is_some_and(crate::sanitize::is_fanout)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(abs: &str, access: Access) -> PipelineRequest {
        PipelineRequest { session: "s".into(), path: abs.trim_start_matches('/').into(), abs: abs.into(), access, target: ObjectId { dev: 1, ino: 2 }, content: None, any_name: false, kept_private: false }
    }

    #[test]
    fn a_create_is_granted_for_its_own_name_and_a_fanout_folder_for_visible_names() {
        assert_eq!(request("/ws/proj/notes.md", Access::Create).new_name(), Some(std::ffi::OsStr::new("notes.md")));
        assert_eq!(request("/ws/proj/.envrc", Access::Create).new_name(), Some(std::ffi::OsStr::new(".envrc")));
        assert_eq!(request("/ws/proj/.envrc", Access::Write).new_name(), None, "an existing file is decided as itself");
        let folder = PipelineRequest { any_name: true, ..request("/ws/proj/hello", Access::Create) };
        assert_eq!(folder.new_name(), None, "create in an existing folder, asked for the folder");
        assert!(in_fanout_folder(&request("/ws/.git/objects/ed/4f1c", Access::Create)));
        assert!(!in_fanout_folder(&request("/ws/.git/objects/ed/.envrc", Access::Create)), "a hidden name is its own");
        assert!(!in_fanout_folder(&request("/ws/proj/Cargo.toml", Access::Create)));
        assert!(!in_fanout_folder(&request("/ws/.git/objects/ed", Access::Write)));
    }
}
