//! The decision pipeline. A request from the request tool, an access the kernel denied (a
//! miss) and a user's approval all enter [`Core::decide`] with their [`Origin`] and a
//! [`PipelineRequest`] that carries the object the grant goes on (the kernel's (dev, ino)
//! for a miss, the resolved object for the tool). They leave as one [`Ruling`]: the
//! socket reply and the audit entry are both made from it.
//!
//! ```text
//! tool:   request line → server → actor → resolve (O_NOFOLLOW walk: path, object, content)
//!                                        → decide(Origin::Tool, request) → ruling → reply
//! miss:   ring buffer → actor → the kernel's root, path and (dev, ino) → content read from
//!                               that object → decide(Origin::Miss, request) → ruling → audit
//! answer: approve → actor → decide(Origin::Answer, the waiting request) → ruling → waiters
//! ```
//!
//! Nothing here fails open: an unknown root, a walk out of bound, a truncated path, a twin
//! that cannot be built or a grant the kernel refuses are each a denial with its reason.

use super::audit::{AuditEntry, AuditRequest, Event, Source};
use super::config::OnMiss;
use super::core::{CallResult, Core};
use super::error::chain;
use super::peer::Peer;
use super::protocol::{RequestOutcome, Reply, Ruling};
use super::questions::Waiting;
use super::resolve;
use crate::access::Access;
use crate::decider::Verdict;
use crate::kernel::{Hook, Miss, ObjectId, Scope};
use crate::twin::{self, Decision};
use tokio::time::Instant;
use std::path::PathBuf;

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
}

impl PipelineRequest {
    fn for_twin(&self, origin: &Origin) -> twin::Request {
        twin::Request { path: self.path.clone(), access: self.access, rationale: origin.reason().map(str::to_string), content: self.content.clone() }
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
    /// The resource is never grantable: the pattern that says so.
    #[error("never-grantable ({0}): no vote, rule or approval can grant it; denied")]
    Never(String),
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
    let object = ObjectId { dev: m.dev, ino: m.ino };
    let abs = root.path.join(&m.relative_path);
    Ok(m
        .access
        .iter()
        .map(|&access| {
            let target = if access == Access::Create { ObjectId { dev: m.parent_dev, ino: m.parent_ino } } else { object };
            let content = if matches!(access, Access::Read | Access::Write | Access::Delete) {
                resolve::content_of(&root, &m.relative_path, object)
            } else {
                None
            };
            PipelineRequest { session: session.id.clone(), path: path.clone(), abs: abs.clone(), access, target, content }
        })
        .collect())
}

fn s_root(session: &super::sessions::Session, m: &Miss) -> Option<resolve::Root> {
    session.all_root_recs().find(|r| r.dev == m.root_dev && r.ino == m.root_ino).map(|r| r.root())
}

impl Core {
    /// Decides one request and applies the ruling: the grant into the kernel, the question
    /// for the user, the counters and the audit entry.
    pub(super) async fn decide(&mut self, origin: Origin, req: PipelineRequest) -> Ruling {
        let Some((user, owner)) = self.sessions.get(&req.session).map(|s| (s.user.clone(), s.owner_uid)) else {
            return Ruling::deny(format!("no open session {:?}", req.session), None);
        };
        // Never-grantable beats every vote, rule and approval; a containment that cannot
        // be compiled denies everything.
        let never = match self.containment(owner) {
            Ok(c) => c.never.forbids(&req.abs, req.access).map(|p| Unresolved::Never(p.to_string())),
            Err(e) => Some(Unresolved::Containment(e)),
        };
        if let Some(why) = never {
            return self.deny_unresolved(&origin, &req.session, &req.path, req.access, &why);
        }
        let start = Instant::now();
        if let Err(e) = self.twins.reachable(&user) {
            return self.deny_unresolved(&origin, &req.session, &req.path, req.access, &Unresolved::Store(e));
        }
        let d = match self.twins.get(&user).await {
            Ok(t) => t.decide(&req.session, &req.for_twin(&origin)).await,
            Err(e) => return self.deny_unresolved(&origin, &req.session, &req.path, req.access, &Unresolved::Twin(e)),
        };
        let answered = match &origin {
            Origin::Answer { question, .. } => Some(*question),
            _ => None,
        };
        let ruling = match (answered, &d.outcome) {
            (Some(q), _) => {
                // A vote that asks the user has its answer now; a vote that denies still denies.
                let answered = d.granted() || d.votes.iter().all(|v| v.verdict != Verdict::Deny);
                let granted = answered && self.apply_grant(&req);
                let reason = if granted { "the user approved".to_string() } else { deny_reason(&d) };
                Ruling { granted, outcome: if granted { RequestOutcome::UserApproved } else { RequestOutcome::Deny }, reason, question: Some(q) }
            }
            (None, twin::Outcome::Grant) => {
                if self.apply_grant(&req) {
                    Ruling { granted: true, outcome: RequestOutcome::Grant, reason: "all three votes allow".into(), question: None }
                } else {
                    Ruling::deny("the grant could not be inserted in the kernel", None)
                }
            }
            (None, twin::Outcome::Deny) => Ruling::deny(deny_reason(&d), None),
            (None, twin::Outcome::Escalate) => {
                let q = d.question.expect("the twin numbers every question it escalates");
                let votes = d.votes.to_vec();
                if self.questions.ask(q, || Waiting { user: user.clone(), session: req.session.clone(), request: req.clone(), origin: origin.clone(), votes, waiters: vec![] }) {
                    // A fleet's other hosts list it too; an answer given there comes back here.
                    self.publish_question(q);
                }
                Ruling { granted: false, outcome: RequestOutcome::Escalate, reason: deny_reason(&d), question: Some(q) }
            }
        };
        self.account(&req.session, &d, ruling.granted, answered.is_none());
        self.audit_decision(&origin, &req, &d, &ruling, start);
        self.persist();
        ruling
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
            self.audit.record(&e);
        }
        Ruling::deny(why, None)
    }

    /// A request of the session's worker through the request tool.
    pub(super) async fn tool_request(&mut self, session: &str, peer: &Peer, path: &str, access: Access, reason: Option<String>) -> CallResult {
        let origin = Origin::Tool { peer: peer.clone(), reason };
        let roots = self.sessions.get(session).map(|s| s.all_roots()).unwrap_or_default();
        let r = match resolve::resolve(&roots, path, access) {
            Ok(r) => r,
            Err(e) => return CallResult::Now(self.deny_unresolved(&origin, session, path, access, &Unresolved::Path(e)).into()),
        };
        let req = PipelineRequest { session: session.into(), path: r.rel, abs: r.abs, access, target: r.target, content: r.content };
        let ruling = self.decide(origin, req).await;
        if let (RequestOutcome::Escalate, Some(question)) = (ruling.outcome, ruling.question) {
            if let Some(rx) = self.questions.wait(question) {
                return CallResult::Wait { rx, question };
            }
        }
        CallResult::Now(ruling.into())
    }

    /// An access the kernel denied: recorded, or decided as an implicit request per
    /// missing access type. A held miss's wait ends once it is decided (granted or not),
    /// whatever path the decision took.
    pub(super) async fn miss(&mut self, m: Miss) {
        let (hold, session, object, bits) = (m.hold, m.session, ObjectId { dev: m.dev, ino: m.ino }, m.access.clone());
        self.miss_decide(m).await;
        if hold == 0 {
            return;
        }
        let Some(holds) = self.holds.clone() else { return };
        // The grant (if any) is in the kernel before the wait ends: the kernel checks it next.
        let granted = bits.iter().all(|a| self.enforcer.holds(session, object, *a).unwrap_or(false));
        let end = holds.release(hold);
        if let Some(s) = self.sessions.by_cgroup_id(session) {
            use crate::kernel::hold::HoldEnd;
            let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
            let mut e = self.entry(Event::Hold, s);
            // A hold the bound ended was denied whatever the decision.
            let let_through = granted && !matches!(end, HoldEnd::TimedOut(_));
            e.outcome = Some(if let_through { RequestOutcome::Grant } else { RequestOutcome::Deny });
            e.latency_ms = match end {
                HoldEnd::Waited(w) | HoldEnd::TimedOut(w) => Some(ms(w)),
                HoldEnd::Early => None,
            };
            e.detail = Some(match end {
                HoldEnd::Waited(w) => format!("hold {hold}: the access waited {:.1} ms for the decision; {}", ms(w), if granted { "granted, the same syscall goes on" } else { "not granted, EACCES" }),
                HoldEnd::Early => format!("hold {hold}: decided before the thread's wait began; {}", if granted { "granted" } else { "not granted, EACCES" }),
                HoldEnd::TimedOut(w) => format!("hold {hold}: timed out after {:.1} ms ([hold] max_ms) before the decision; EACCES{}", ms(w), if granted { " (the grant serves the retry)" } else { "" }),
            });
            self.audit.record(&e);
        }
    }

    async fn miss_decide(&mut self, m: Miss) {
        let origin = Origin::Miss { hook: m.hook, pid: m.pid, uid: m.uid, flags: m.flags };
        let Some(s) = self.sessions.by_cgroup_id(m.session) else {
            let mut e = AuditEntry::new(Event::Miss);
            e.detail = Some(format!("miss of unknown session cgroup {} ({} {})", m.session, m.hook, m.relative_path.display()));
            self.audit.record(&e);
            return;
        };
        let id = s.id.clone();
        // Misses that are not the twin's to decide: reach outside the session (processes,
        // IPC, sockets), and the kernel's never map or terminal injection (whose walk may
        // run past the root, so the path is the kernel's, not a root-relative one). They
        // are audited and stay denied.
        let undecided = if let Some(reach) = m.reach() {
            Some((None, format!("denied by session containment ({}): {reach:?}; not grantable", m.hook)))
        } else if m.never() {
            let request = m.access.first().map(|a| origin.audit_request(&m.relative_path.to_string_lossy(), *a));
            Some((request, format!("never-grantable ({}, {:?}): denied by the kernel's never map; not decided", m.hook, m.access)))
        } else {
            None
        };
        if let Some((request, detail)) = undecided {
            let mut e = self.entry(Event::Miss, s);
            e.request = request;
            e.outcome = Some(RequestOutcome::Deny);
            e.detail = Some(detail);
            self.audit.record(&e);
            if let Some(s) = self.sessions.get_mut(&id) {
                s.counters.misses += 1;
                s.counters.denials += 1;
            }
            return;
        }
        let requests = miss_requests(s, &m);
        if let Some(s) = self.sessions.get_mut(&id) {
            s.counters.misses += 1;
        }
        let mut requests = match requests {
            Ok(r) => r,
            Err(why) => {
                for a in &m.access {
                    self.deny_unresolved(&origin, &id, &m.relative_path.to_string_lossy(), *a, &why);
                }
                return;
            }
        };
        // A worker that retries a denied access misses again until the grant is in: those
        // misses, queued behind the first, find the grant there and are not decided again
        // (a failed lookup decides as usual; nothing is granted here).
        if let Some(cgroup_id) = self.sessions.get(&id).map(|s| s.cgroup_id) {
            requests.retain(|r| !self.enforcer.holds(cgroup_id, r.target, r.access).unwrap_or(false));
            if requests.is_empty() {
                return;
            }
        }
        if self.config.on_miss == OnMiss::Record {
            let s = self.sessions.get(&id).expect("looked up above");
            for r in &requests {
                let mut e = self.entry(Event::Miss, s);
                e.request = Some(origin.audit_request(&r.path, r.access));
                e.outcome = Some(RequestOutcome::Deny);
                e.detail = Some(format!("denied by the kernel ({}); recorded only (on_miss = \"record\")", m.hook));
                self.audit.record(&e);
            }
            self.persist();
            return;
        }
        for req in requests {
            let (path, access) = (req.path.clone(), req.access);
            let ruling = self.decide(origin.clone(), req).await;
            if m.shadow_allowed() && !ruling.granted {
                // Shadow mode: the kernel let it through; the audit says what enforcing would do.
                if let Some(s) = self.sessions.get(&id) {
                    let mut e = self.entry(Event::Miss, s);
                    e.request = Some(origin.audit_request(&path, access));
                    e.outcome = Some(RequestOutcome::Deny);
                    e.detail = Some(format!("shadow mode: allowed by the kernel; enforcing would deny ({})", ruling.reason));
                    self.audit.record(&e);
                }
            }
        }
    }

    /// Inserts a grant; a kernel error is logged and makes the request a denial.
    fn apply_grant(&mut self, req: &PipelineRequest) -> bool {
        let Some(s) = self.sessions.get(&req.session) else { return false };
        match self.enforcer.grant(s.cgroup_id, req.target, Scope::Exact, req.access) {
            Ok(()) => true,
            Err(e) => {
                tracing::error!(session = req.session, error = %chain(&e), "grant could not be inserted; denying");
                false
            }
        }
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

    fn audit_decision(&self, origin: &Origin, req: &PipelineRequest, d: &Decision, ruling: &Ruling, start: Instant) {
        let Some(s) = self.sessions.get(&req.session) else { return };
        let mut e = self.entry(Event::Decision, s);
        e.request = Some(origin.audit_request(&req.path, req.access));
        e.outcome = Some(ruling.outcome);
        e.votes = d.votes.to_vec();
        e.decider = Some(self.decider_name.clone());
        e.tokens = Some(d.tokens);
        e.latency_ms = Some(start.elapsed().as_secs_f64() * 1000.0);
        e.question = ruling.question;
        self.audit.record(&e);
    }
}

impl From<Ruling> for Reply {
    fn from(r: Ruling) -> Self {
        Reply::Decision { granted: r.granted, outcome: r.outcome, reason: r.reason, question: r.question }
    }
}
