//! The daemon's actor: one task owns the enforcer, the twins ([`twins`](super::twins)), the
//! open sessions ([`sessions`](super::sessions)) and the questions for the user
//! ([`questions`](super::questions)), and serves commands that carry `oneshot` replies.
//! Each call is checked by [`callers`](super::callers) and then served here; requests and
//! misses go through the [`pipeline`](super::pipeline). The actor only changes state: what
//! waits on a decider (votes, a new session's pre-committed policy) runs in a task of its
//! own ([`decisions`](super::decisions)) and comes back as a command ([`Cmd::Decided`],
//! [`Cmd::PolicyMade`]), so one slow decision holds up its own session only. Everything is
//! tested on the host with the shipped [`Enforcer`] over maps in memory
//! ([`crate::kernel::MemoryMaps`]).

use super::audit::{AuditCaller, AuditEntry, AuditLog, Event};
use super::callers::{self, Caller};
use super::config::{Config, VariantName};
use super::decisions::{DeciderCall, HeldMiss, Inbox, JobId, Lanes, ReplyTo, Waiter};
use super::config_watch::ConfigWatch;
use super::contain::{self, ContainError, Containment};
use super::error::{chain, CallError, Refusal};
use super::layers;
use super::peer::Peer;
use super::pipeline::Origin;
use super::protocol::{ApprovalScope, Call, Counters, QuestionInfo, Reply, RequestOutcome, RuleId, Ruling, SessionMode};
use super::questions::Questions;
use super::resolve;
use super::revoke;
use super::sessions::{self, Session, SessionError, Sessions};
use super::twins::{Twins, TwinsError, TREE_LIMIT};
use super::users;
use crate::decider::{Decider, DeciderError, PolicyAnswer};
use crate::access::Access;
use crate::kernel::{Enforcer, ObjectId, Scope};
use crate::sanitize::Sanitizer;
use crate::twin::{TwinConfig, Variant, Votes};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// How long what decisions change waits before `sessions.json` is written again
/// ([`Core::persist_soon`]): one write for a burst of decisions instead of one each.
pub const PERSIST_DELAY: std::time::Duration = std::time::Duration::from_millis(200);

/// What the actor answers to a call.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum CallResult {
    /// The reply, now.
    Now(Reply),
    /// The request went to the user: wait for the answer on `rx`, deny after the timeout.
    Wait {
        /// The answer.
        rx: oneshot::Receiver<Reply>,
        /// The question's id.
        question: u64,
    },
    /// The caller may read these audit entries.
    Log {
        /// Only this session.
        session: Option<String>,
        /// Only entries of sessions this uid owns (`None`: every entry, for root).
        owner: Option<u32>,
        /// Stream new entries.
        follow: bool,
        /// Only entries of this host (shared audit).
        host: Option<String>,
        /// The caller's fleet identity, whose rows of the shared audit it reads (`None`:
        /// every row, for root).
        viewer: Option<String>,
    },
    /// An answer to question `question` of another host `host` of the fleet is recorded:
    /// the reply waits, outside the actor, for that host to apply it
    /// ([`super::fleet::await_applied`]).
    AwaitApplied {
        /// The asking host.
        host: String,
        /// Its question.
        question: u64,
        /// The answer, as the reply names it (`approved (always)`, `denied`).
        answered: String,
    },
}

/// A command for the actor.
#[derive(Debug)]
pub enum Cmd {
    /// A call from a peer.
    Call {
        /// The caller.
        peer: Peer,
        /// The call.
        call: Call,
        /// Where the answer goes (the server turns an error into the `error` reply).
        reply: oneshot::Sender<Result<CallResult, CallError>>,
    },
    /// A kernel miss.
    Miss(crate::kernel::Miss),
    /// A reach denial the kernel reported.
    Reach(crate::kernel::ReachDenial),
    /// A worker's wait for question `question` ran out.
    WaitTimedOut {
        /// The question.
        question: u64,
    },
    /// A user's trusted state changed in the shared store (another daemon of the fleet
    /// wrote it), or anything may have changed (the store was away).
    StateChanged(crate::store::pg::StateChange),
    /// Votes 1 and 2 of a decision in flight, cast outside the actor
    /// ([`super::decisions`]).
    Decided {
        /// The session whose lane the decision is in.
        session: String,
        /// The decision (a batch's first job).
        job: JobId,
        /// The votes, one per job of the batch in order.
        votes: Vec<Votes>,
    },
    /// The configuration the code places of these owners' never lists were read from
    /// changed ([`super::config_watch`]): it is read again for their running sessions.
    ConfigChanged {
        /// The owners' uids.
        owners: Vec<u32>,
        /// The paths in the owners' trees that told of a repository (a `.git` made, a
        /// folder moved in): read by their paths, whatever the scans' bounds.
        repositories: Vec<PathBuf>,
    },
    /// A reading of an owner's changed configuration, done off the actor
    /// ([`Core::config_changed`]).
    ConfigRead {
        /// The owner's uid.
        owner: u32,
        /// Which of the owner's readings it is (a later one's containment is kept).
        generation: u64,
        /// The containment read and the never entries planned for the owner's open sessions.
        read: Result<(Containment, contain::SeedPlan), ContainError>,
        /// How long the reading took.
        took: std::time::Duration,
    },
    /// The sessions' processes that could still write a place a changed configuration
    /// names were ended, off the actor ([`Core::config_read`], [`revoke`]).
    WritersEnded {
        /// What the reading did, for each session's `config_reread` entry.
        detail: String,
        /// Each open session of the owner, with the processes ended.
        ended: Vec<(String, Vec<revoke::Writer>)>,
    },
    /// What a new session's open reads of the filesystem, read off the actor
    /// ([`Core::create`]): the session is opened with it ([`Core::open`]).
    SessionRead {
        /// The session asked for.
        ask: Box<SessionAsk>,
        /// Which of the owner's readings it is (a later one's containment is kept).
        generation: u64,
        /// What was read, or why it could not be.
        read: Result<SessionRead, CallError>,
        /// The creator's reply.
        reply: ReplyTo,
    },
    /// The pre-committed policy of a starting session, made outside the actor.
    PolicyMade {
        /// The session.
        session: String,
        /// The decider's policy, or why it could not make one.
        made: Result<PolicyAnswer, DeciderError>,
    },
}

/// Errors setting up the actor.
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    /// The state directory could not be created or written.
    #[error("cannot use state directory {path}")]
    StateDir {
        /// The directory or file.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// `sessions.json` could not be read or parsed.
    #[error(transparent)]
    SessionsFile(#[from] SessionError),
    /// A twin for a resumed session could not be built.
    #[error(transparent)]
    Twins(#[from] TwinsError),
}

/// What the actor needs.
pub struct CoreDeps {
    /// Configuration.
    pub config: Config,
    /// The enforcer.
    pub enforcer: Enforcer,
    /// The decider of every twin.
    pub decider: Arc<dyn Decider>,
    /// The sanitizer (its key never leaves the twins).
    pub sanitizer: Sanitizer,
    /// The audit log.
    pub audit: Arc<AuditLog>,
    /// The holds of kernel misses, when the kernel holds them ([`crate::kernel::hold`]).
    pub holds: Option<crate::kernel::hold::Holds>,
}

impl std::fmt::Debug for CoreDeps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoreDeps").field("config", &self.config).finish_non_exhaustive()
    }
}

/// The actor's state.
pub struct Core {
    pub(super) config: Config,
    pub(super) enforcer: Enforcer,
    pub(super) decider_name: String,
    pub(super) audit: Arc<AuditLog>,
    pub(super) twins: Twins,
    pub(super) sessions: Sessions,
    pub(super) questions: Questions,
    /// The containment of each owner's sessions, compiled from the configuration.
    pub(super) contain: std::collections::HashMap<u32, Arc<Containment>>,
    /// What the environments of the processes that started each owner's sessions told
    /// (all of them, merged): the containment is made with it.
    starters: std::collections::HashMap<u32, super::code_places::UserEnvironment>,
    /// How many readings of each owner's changed configuration were started
    /// ([`Core::config_changed`]).
    config_readings: std::collections::HashMap<u32, u64>,
    /// The latest reading whose containment each owner's replaced ([`Core::config_read`]).
    config_read_applied: std::collections::HashMap<u32, u64>,
    /// The watch of the configuration the containment was read from (none: it could not
    /// be started, and the configuration is read when a session starts only).
    config_watch: Option<ConfigWatch>,
    /// Kernel grants of approvals of scope `once`, taken back when they expire.
    once: Vec<OnceGrant>,
    /// This host's name in the fleet, when the store is shared (its questions are
    /// published under it: [`fleet`](super::fleet)).
    pub(super) host: Option<String>,
    /// Who this host's accounts are in the store.
    ids: users::Identities,
    /// The holds of kernel misses (none: every miss is denied at once).
    pub(super) holds: Option<crate::kernel::hold::Holds>,
    /// The decisions queued or in flight, one lane per session.
    pub(super) lanes: Lanes,
    /// When the sessions' counters and grants changed by decisions are next written to
    /// `sessions.json` (none: nothing unwritten).
    persist_due: Option<tokio::time::Instant>,
    /// The held misses waiting for their decisions, by hold id.
    pub(super) held: std::collections::HashMap<u32, HeldMiss>,
    /// Each session's held accesses that keep a lock, by cgroup id.
    pub(super) locked: std::collections::HashMap<u64, super::decisions::LockedHolds>,
    /// Sessions whose pre-committed policy is being made: the creator's reply waits for it.
    starting: std::collections::HashMap<String, Starting>,
    /// What each session may still write of the audit for denials no decision made.
    pub(super) denial_budgets: std::collections::HashMap<String, super::audit::DenialBudget>,
    /// Where work done outside the actor comes back.
    pub(super) inbox: Inbox,
    inbox_rx: Option<mpsc::UnboundedReceiver<Cmd>>,
}

/// A session asked for by the user's process outside every session.
#[derive(Debug)]
pub struct SessionAsk {
    owner_uid: u32,
    roots: Vec<PathBuf>,
    prompt: String,
    mode: SessionMode,
}

/// What opening a session reads of the filesystem, read off the actor ([`Core::create`]):
/// its roots, the owner's containment from the configuration as it is now, the never
/// entries planned for the roots (the scans of the roots and of the home) and the roots'
/// trees the twin is shown.
pub struct SessionRead {
    recs: Vec<sessions::RootRec>,
    places: Vec<sessions::RootRec>,
    contain: Containment,
    plan: contain::SeedPlan,
    tree: Vec<String>,
    took: std::time::Duration,
}

impl std::fmt::Debug for SessionRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionRead").field("roots", &self.recs).field("took", &self.took).finish_non_exhaustive()
    }
}

/// The folders whose repositories a reading scans as a root's: the session's roots and
/// the places beside them that the twin decides in as it does in a root (`/tmp`,
/// `/var/tmp`, `/dev/shm`, `/run/user/UID`: a repository the user cloned into `/tmp`, whose
/// configuration names a visible hooks folder as husky's does, is read as one in a root;
/// the home has a scan of its own).
fn scanned_places(roots: &[sessions::RootRec], places: &[sessions::RootRec]) -> Vec<PathBuf> {
    roots.iter().chain(places.iter().filter(|p| p.label != "~")).map(|r| r.path.clone()).collect()
}

impl SessionRead {
    /// Reads what a session of `owner` on `roots` needs (blocking: run off the actor), with
    /// what the owner's shells give their programs merged into `env` ([`with_shells`]);
    /// `others` are the roots of the owner's open sessions, which the containment made
    /// for this one leaves to them as it leaves this one's to it.
    fn read(cfg: &contain::ContainmentConfig, owner: &users::Account, env: super::code_places::UserEnvironment, roots: &[PathBuf], others: &[PathBuf]) -> Result<Self, CallError> {
        let began = std::time::Instant::now();
        let recs = sessions::root_records(roots)?;
        let all: Vec<PathBuf> = recs.iter().map(|r| r.path.clone()).chain(others.iter().cloned()).collect();
        let env = with_shells(cfg, owner, env, &all);
        let contain = Containment::for_owner(cfg, owner, &env, &all)?;
        let places = sessions::place_records(&contain.protect, &owner.home, &recs);
        let plan = contain.never.plan(&scanned_places(&recs, &places), &contain.read_only);
        let tree: Vec<String> = recs.iter().flat_map(|r| resolve::workspace_tree(&r.root(), TREE_LIMIT)).collect();
        Ok(SessionRead { recs, places, contain, plan, tree, took: began.elapsed() })
    }
}

/// `env` (the environments of the processes that started the owner's sessions) with what
/// the owner's own shells give their programs, where the configuration has them run
/// ([`super::login_shell::remembered`]): run off the actor at the owner's first session,
/// and again after a change to a file the owner's configuration is read from.
fn with_shells(cfg: &contain::ContainmentConfig, owner: &users::Account, mut env: super::code_places::UserEnvironment, roots: &[PathBuf]) -> super::code_places::UserEnvironment {
    if cfg.observe_shells {
        env.merge(&super::login_shell::remembered(owner, roots, super::login_shell::WAIT));
    }
    env
}

/// A session whose pre-committed policy is being made.
#[derive(Debug)]
struct Starting {
    /// The creator's reply.
    reply: ReplyTo,
    /// The decider call making the policy (aborted if the session ends first).
    _call: DeciderCall,
}

/// The kernel grant an approval of scope `once` made, until it is taken back.
#[derive(Debug, Clone)]
struct OnceGrant {
    session: String,
    path: String,
    target: ObjectId,
    access: Access,
    until: tokio::time::Instant,
}

fn twin_config(config: &Config) -> TwinConfig {
    TwinConfig {
        variant: match config.decider.variant {
            VariantName::Pincer => Variant::Pincer,
            VariantName::PincerP2 => Variant::PincerP2,
        },
        escalate_after: config.escalation.after_denials,
    }
}

type CallOutcome = Result<CallResult, CallError>;

impl Core {
    /// Builds the actor state and resumes the sessions left open by an earlier daemon.
    pub async fn new(deps: CoreDeps) -> Result<Self, CoreError> {
        let dir = deps.config.state_dir.clone();
        std::fs::create_dir_all(&dir).map_err(|source| CoreError::StateDir { path: dir.clone(), source })?;
        sessions::restrict_state_dir(&dir).map_err(|source| CoreError::StateDir { path: dir.clone(), source })?;
        let twins = Twins::new(deps.config.store_spec(), dir.clone(), deps.sanitizer, deps.decider.clone(), twin_config(&deps.config))?;
        let host = twins.spec().is_shared().then(|| deps.config.store.host_name());
        let ids = deps.config.store.identities();
        let (inbox, inbox_rx) = mpsc::unbounded_channel();
        let mut core = Core {
            sessions: Sessions::new(&dir),
            config: deps.config,
            enforcer: deps.enforcer,
            decider_name: deps.decider.name().to_string(),
            audit: deps.audit,
            twins,
            questions: Questions::default(),
            contain: Default::default(),
            starters: Default::default(),
            config_readings: Default::default(),
            config_read_applied: Default::default(),
            config_watch: None,
            once: vec![],
            host,
            ids,
            holds: deps.holds,
            lanes: Lanes::default(),
            persist_due: None,
            held: Default::default(),
            locked: Default::default(),
            starting: Default::default(),
            denial_budgets: Default::default(),
            inbox,
            inbox_rx: Some(inbox_rx),
        };
        core.config_watch = ConfigWatch::start(core.inbox.clone())
            .map_err(|e| tracing::error!(error = %e, "cannot watch the users' configuration; it is read when a session starts only"))
            .ok();
        core.resume().await?;
        core.resume_fleet_questions().await;
        Ok(core)
    }

    /// The fleet identity of the account of `uid`: whose trusted state, questions and
    /// audit rows in the store are theirs ([`users::Identities`]).
    pub(super) fn identity(&self, uid: u32) -> String {
        self.ids.of_uid(uid)
    }

    /// Writes the open sessions (with the grants their twins hold) to `sessions.json`.
    pub(super) fn persist(&mut self) {
        self.persist_due = None;
        let twins = &self.twins;
        self.sessions.persist(|s| twins.grants(s));
    }

    /// Writes the open sessions within [`PERSIST_DELAY`], once for every change made
    /// meanwhile: for what decisions change (counters, the twins' grants), which a restart
    /// only needs as the twins' context. Sessions opened or ended, prompts and answers are
    /// written at once ([`Core::persist`]).
    pub(super) fn persist_soon(&mut self) {
        self.persist_due.get_or_insert_with(|| tokio::time::Instant::now() + PERSIST_DELAY);
    }

    async fn resume(&mut self) -> Result<(), CoreError> {
        let list = self.sessions.load_persisted()?;
        let mut by_user: BTreeMap<String, Vec<Session>> = BTreeMap::new();
        for s in list {
            if !s.cgroup.is_dir() {
                self.keep_made(&s);
                let n = self.enforcer.revoke_session(s.cgroup_id, false).unwrap_or(0);
                let mut e = self.entry(Event::SessionEnd, &s);
                e.detail = Some(format!("its cgroup disappeared while the daemon was down; {n} grants revoked"));
                self.audit.record(&e);
                continue;
            }
            // Enforcement stayed pinned; make sure the session and its roots are in the maps.
            if let Err(e) = self.enforcer.register_session_with(s.cgroup_id, s.flags()) {
                tracing::error!(session = %s.id, error = %chain(&e), "cannot re-register session");
            }
            for r in s.all_root_recs() {
                let _ = self.enforcer.add_root_id(r.id());
            }
            match self.containment(s.owner_uid) {
                Ok(c) => {
                    let named: Vec<PathBuf> = s.roots.iter().map(|r| r.path.clone()).collect();
                    match c.apply_open(&mut self.enforcer).and_then(|()| c.never.seed(&mut self.enforcer, &named, &c.read_only)) {
                        Ok(seeded) => self.watch_configuration(s.owner_uid, &c, &seeded),
                        Err(e) => tracing::error!(session = %s.id, error = %chain(&e), "cannot restore the session's containment"),
                    }
                }
                Err(e) => tracing::error!(session = %s.id, error = %chain(&e), "containment configuration"),
            }
            by_user.entry(s.user.clone()).or_default().push(s);
        }
        for (user, list) in by_user {
            self.twins.resume(&user, &list).await?;
            for s in list {
                self.audit.record(&self.entry(Event::SessionResume, &s));
                self.sessions.insert(s);
            }
        }
        self.persist();
        Ok(())
    }

    /// An audit entry of `event` about session `s`.
    pub(super) fn entry(&self, event: Event, s: &Session) -> AuditEntry {
        let mut e = AuditEntry::new(event);
        e.session = Some(s.id.clone());
        e.owner_uid = Some(s.owner_uid);
        e
    }

    fn classify(&self, peer: &Peer) -> Caller {
        callers::classify(&self.config.cgroup_parent, &self.sessions, peer)
    }

    fn audit_refusal(&self, peer: &Peer, call: &Call, why: &Refusal) {
        let mut e = AuditEntry::new(Event::Refusal);
        e.outcome = Some(RequestOutcome::Refused);
        e.caller = Some(AuditCaller { pid: peer.pid, uid: peer.uid, cgroup: peer.cgroup.clone() });
        e.detail = Some(format!("{}: {why}", call.name()));
        if let Caller::Worker(s) = self.classify(peer) {
            if let Some(sess) = self.sessions.get(&s) {
                e.session = Some(sess.id.clone());
                e.owner_uid = Some(sess.owner_uid);
            }
        }
        self.audit.record(&e);
    }

    /// Runs the actor until every sender is dropped. Work it hands out (votes, policies)
    /// comes back on its own inbox; it never waits on a decider.
    pub async fn run(mut self, mut rx: mpsc::Receiver<Cmd>) {
        let mut inbox = self.inbox_rx.take().expect("the actor runs once");
        loop {
            let next_expiry = self.once.iter().map(|o| o.until).min();
            let cmd = tokio::select! {
                cmd = rx.recv() => match cmd {
                    Some(cmd) => cmd,
                    None => break,
                },
                Some(cmd) = inbox.recv() => cmd,
                () = tokio::time::sleep_until(next_expiry.unwrap_or_else(tokio::time::Instant::now)), if next_expiry.is_some() => {
                    self.expire_once().await;
                    continue;
                }
                () = tokio::time::sleep_until(self.persist_due.unwrap_or_else(tokio::time::Instant::now)), if self.persist_due.is_some() => {
                    self.persist();
                    continue;
                }
            };
            match cmd {
                Cmd::Call { peer, call, reply } => self.serve(peer, call, reply).await,
                Cmd::Miss(m) => self.miss(m).await,
                Cmd::Reach(r) => self.reach_denied(&r),
                Cmd::WaitTimedOut { question } => self.wait_timed_out(question),
                Cmd::StateChanged(change) => self.state_changed(change).await,
                Cmd::Decided { session, job, votes } => self.decided(&session, job, votes).await,
                Cmd::SessionRead { ask, generation, read, reply } => self.session_read(*ask, generation, read, reply).await,
                Cmd::PolicyMade { session, made } => self.policy_made(&session, made).await,
                Cmd::ConfigChanged { owners, repositories } => self.config_changed(&owners, &repositories),
                Cmd::ConfigRead { owner, generation, read, took } => self.config_read(owner, generation, read, took),
                Cmd::WritersEnded { detail, ended } => self.writers_ended(&detail, ended),
            }
        }
        self.persist();
    }

    /// Serves a call: at once, or (a request of the request tool, a new session) once the
    /// decider's work for it, done outside the actor, comes back.
    async fn serve(&mut self, peer: Peer, call: Call, reply: ReplyTo) {
        let caller = self.classify(&peer);
        if let Err(r) = callers::permit(&caller, &peer, &call) {
            self.audit_refusal(&peer, &call, &r);
            let _ = reply.send(Err(r.into()));
            return;
        }
        match (caller, call) {
            (Caller::Worker(own), Call::Request { path, access, reason, .. }) => self.tool_request(&own, &peer, &path, access, reason, reply).await,
            (Caller::Outside, Call::CreateSession { owner_uid, roots, prompt, mode }) => self.create(owner_uid, &peer, roots, prompt, mode, reply).await,
            (caller, call) => {
                let shown = call.clone();
                let result = self.call(caller, &peer, call).await;
                if let Some(r) = result.as_ref().err().and_then(CallError::refusal) {
                    self.audit_refusal(&peer, &shown, r);
                }
                let _ = reply.send(result);
            }
        }
    }

    async fn call(&mut self, caller: Caller, peer: &Peer, call: Call) -> CallOutcome {
        match (caller, call) {
            (Caller::Worker(own), Call::Status { .. }) => {
                let s = self.sessions.get(&own).ok_or_else(|| CallError::NoSession(own.clone()))?;
                Ok(CallResult::Now(Reply::Session(s.info())))
            }
            (Caller::Outside, Call::Status { session }) => {
                let id = callers::named_or_only(&self.sessions, peer, session)?;
                Ok(CallResult::Now(Reply::Session(callers::owned(&self.sessions, peer, &id)?.info())))
            }
            (Caller::Outside, Call::EndSession { session }) => {
                callers::owned(&self.sessions, peer, &session)?;
                self.end(&session, None).await
            }
            (Caller::Outside, Call::Prompt { session, text }) => {
                let id = callers::named_or_only(&self.sessions, peer, session)?;
                self.prompt(&id, &text).await
            }
            (Caller::Outside, Call::Pending) => Ok(CallResult::Now(Reply::Pending { questions: self.pending(peer)? })),
            (Caller::Outside, Call::Answer { question, approve, scope, host }) => match host.filter(|h| Some(h) != self.host.as_ref()) {
                Some(host) => self.answer_elsewhere(peer, &host, question, approve, scope),
                None => self.answer(peer, question, approve, scope).await,
            },
            (Caller::Outside, Call::Rules) => Ok(CallResult::Now(Reply::Rules { rules: self.twins.store().standing(&self.identity(peer.uid))? })),
            (Caller::Outside, Call::RemoveRule { id }) => self.remove_rule(peer.uid, id).await,
            (Caller::Outside, Call::Log { session, follow, host }) => {
                if !self.twins.spec().is_shared() {
                    callers::may_read_log(&self.sessions, peer, session.as_deref())?;
                }
                let viewer = (peer.uid != 0).then(|| self.identity(peer.uid));
                Ok(CallResult::Log { session, owner: if peer.uid == 0 { None } else { Some(peer.uid) }, follow, host, viewer })
            }
            (Caller::Outside, Call::Sessions) => {
                let sessions = self.sessions.iter().filter(|s| peer.uid == 0 || s.owner_uid == peer.uid).map(Session::info).collect();
                Ok(CallResult::Now(Reply::Sessions { sessions }))
            }
            (Caller::Outside, Call::Import { history, policies, uid, workspace }) => self.import(uid.unwrap_or(peer.uid), &history, &policies, workspace.as_deref()),
            (caller, call) => unreachable!("callers::permit refuses {} from {caller:?}, and serve takes requests and new sessions", call.name()),
        }
    }

    /// The containment of `owner_uid`'s sessions, as the last of them started (made now if
    /// none has).
    pub(super) fn containment(&mut self, owner_uid: u32) -> Result<Arc<Containment>, ContainError> {
        if let Some(c) = self.contain.get(&owner_uid) {
            return Ok(c.clone());
        }
        self.fresh_containment(owner_uid, &Default::default())
    }

    /// The containment of `owner_uid`'s sessions made again from the places as they are now
    /// (a session's requests before any was made; a session's open reads it off the actor,
    /// [`Core::create`]). The environments of the processes that started the owner's
    /// sessions are merged in: a containment made again never drops what one of them named.
    fn fresh_containment(&mut self, owner_uid: u32, env: &super::code_places::UserEnvironment) -> Result<Arc<Containment>, ContainError> {
        let merged = self.starters.entry(owner_uid).or_default();
        merged.merge(env);
        let merged = merged.clone();
        let roots = self.owners_roots(owner_uid);
        let c = Arc::new(Containment::for_owner(&self.config.containment, &users::by_uid(owner_uid), &merged, &roots)?);
        self.contain.insert(owner_uid, c.clone());
        // A reading in flight was made without this environment: its containment is not kept.
        let started = self.config_readings.get(&owner_uid).copied().unwrap_or(0);
        self.config_read_applied.insert(owner_uid, started);
        Ok(c)
    }

    /// The roots of `owner_uid`'s open sessions.
    fn owners_roots(&self, owner_uid: u32) -> Vec<PathBuf> {
        self.sessions.iter().filter(|s| s.owner_uid == owner_uid).flat_map(|s| s.roots.iter().map(|r| r.path.clone())).collect()
    }

    /// Watches the configuration `c`'s code places and a seeding's git directories were read
    /// from, for `owner_uid`.
    fn watch_configuration(&mut self, owner_uid: u32, c: &Containment, seeded: &contain::Seeded) {
        if let Some(w) = &mut self.config_watch {
            w.watch(owner_uid, c.never.read_from());
            w.watch(owner_uid, &seeded.read_from);
        }
    }

    /// The configuration of `owners` changed while sessions run: each owner's containment
    /// is made again and planned for the roots of the owner's open sessions off the actor
    /// (reading the configuration and scanning the roots and the home read only files), and
    /// the actor writes the plan ([`Core::config_read`]), so the places it names now are
    /// never changed by a session already running. The repositories the watch heard of are
    /// read by their paths ([`contain::NeverList::plan_heard`]): a root the session filled
    /// past the scan's bound still has them read.
    fn config_changed(&mut self, owners: &[u32], repositories: &[PathBuf]) {
        for &uid in owners {
            // A file the owner's shells read may have changed: they are run again.
            super::login_shell::forget(uid);
            let mut named: Vec<PathBuf> = Vec::new();
            for s in self.sessions.iter().filter(|s| s.owner_uid == uid) {
                for p in scanned_places(&s.roots, &s.places) {
                    if !named.contains(&p) {
                        named.push(p);
                    }
                }
            }
            if !self.sessions.iter().any(|s| s.owner_uid == uid) {
                continue;
            }
            let generation = self.config_readings.entry(uid).or_default();
            *generation += 1;
            let generation = *generation;
            // Made with the starters' environments already merged: none is added.
            let (cfg, env) = (self.config.containment.clone(), self.starters.get(&uid).cloned().unwrap_or_default());
            let inbox = self.inbox.clone();
            let heard = repositories.to_vec();
            tokio::task::spawn_blocking(move || {
                let began = std::time::Instant::now();
                let owner = users::by_uid(uid);
                let env = with_shells(&cfg, &owner, env, &named);
                let read = Containment::for_owner(&cfg, &owner, &env, &named).map(|c| {
                    let plan = c.never.plan_heard(&named, &c.read_only, &heard);
                    (c, plan)
                });
                let _ = inbox.send(Cmd::ConfigRead { owner: uid, generation, read, took: began.elapsed() });
            });
        }
    }

    /// A reading of `owner`'s changed configuration is done ([`Core::config_changed`]): its
    /// plan goes into the never map (which only gains entries: a place no longer named
    /// stays protected until the daemon restarts), its places are watched, and each of the
    /// owner's open sessions gets a `config_reread` audit entry. The containment replaces
    /// the owner's unless a later reading's already did.
    fn config_read(&mut self, owner: u32, generation: u64, read: Result<(Containment, contain::SeedPlan), ContainError>, took: std::time::Duration) {
        let began = std::time::Instant::now();
        let seeded = read.and_then(|(c, plan)| {
            let c = Arc::new(c);
            if self.config_read_applied.get(&owner).is_none_or(|&g| g < generation) {
                self.config_read_applied.insert(owner, generation);
                self.contain.insert(owner, c.clone());
            }
            let seeded = self.enforcer.batch(|e| plan.write(e))?;
            self.watch_configuration(owner, &c, &seeded);
            Ok((seeded, c))
        });
        let detail = match &seeded {
            Ok((s, _)) => format!(
                "the user's configuration changed: read again in {} ms off the actor, {} never entries put in for the places it names in {} ms",
                took.as_millis(),
                s.entries,
                began.elapsed().as_millis()
            ),
            Err(e) => format!("the user's configuration changed and could not be read again: {}", chain(e)),
        };
        if let Err(e) = &seeded {
            tracing::error!(uid = owner, error = %chain(e), "cannot read the changed configuration again");
        }
        let open: Vec<(String, PathBuf)> = self.sessions.iter().filter(|s| s.owner_uid == owner).map(|s| (s.id.clone(), s.cgroup.clone())).collect();
        match seeded {
            // The new places are in the kernel: what the sessions opened for writing there
            // before is looked for off the actor ([`revoke`]), and the readings are audited
            // once that is done.
            Ok((_, c)) if !open.is_empty() => {
                let inbox = self.inbox.clone();
                tokio::task::spawn_blocking(move || {
                    let ended = open.into_iter().map(|(id, cgroup)| (id, revoke::end_writers(&cgroup, |p| c.never.forbids(p, Access::Write).is_some()))).collect();
                    let _ = inbox.send(Cmd::WritersEnded { detail, ended });
                });
            }
            _ => self.writers_ended(&detail, open.into_iter().map(|(id, _)| (id, Vec::new())).collect()),
        }
    }

    /// The sessions' writers of the places a changed configuration names are ended
    /// ([`Core::config_read`]): each session still open gets its `config_reread` entry and
    /// one `writer_ended` entry per process ended.
    fn writers_ended(&mut self, detail: &str, ended: Vec<(String, Vec<revoke::Writer>)>) {
        for (id, writers) in ended {
            let Some(s) = self.sessions.get(&id).cloned() else { continue };
            for w in &writers {
                tracing::warn!(session = %id, pid = w.pid, path = %w.path.display(), "ended a process of the session holding {} on a place the user's configuration now names as code", w.how.name());
                let mut e = self.entry(Event::WriterEnded, &s);
                e.detail = Some(format!("process {} ended: it held {} on {}, which the user's configuration now names as code", w.pid, w.how.name(), w.path.display()));
                self.audit.record(&e);
            }
            let mut e = self.entry(Event::ConfigReread, &s);
            e.detail = Some(detail.to_string());
            self.audit.record(&e);
        }
    }

    /// Creates a session in two steps, so the actor, which serves every session's requests,
    /// misses and holds, never waits on the filesystem a session's open reads (the owner's
    /// configuration, the scans of the roots and of the home, the roots' trees): these are
    /// read on a blocking thread ([`SessionRead::read`]), with the environment of `starter`,
    /// the user's process that asked (outside every session), merged into the owner's
    /// starters' first: the places it runs programs from (its `PATH`, its editor, ...) are
    /// code places of the user's. [`Core::session_read`] then opens the session.
    async fn create(&mut self, owner_uid: u32, starter: &Peer, roots: Vec<PathBuf>, prompt: String, mode: SessionMode, reply: ReplyTo) {
        if prompt.trim().is_empty() {
            let _ = reply.send(Err(CallError::EmptyFirstPrompt));
            return;
        }
        let roots = if roots.is_empty() { self.config.default_roots.clone() } else { roots };
        if roots.is_empty() {
            let _ = reply.send(Err(CallError::NoRoot));
            return;
        }
        let owner = users::by_uid(owner_uid);
        let env = super::code_places::of_process(starter.pid, &owner.home, &roots);
        let merged = self.starters.entry(owner_uid).or_default();
        merged.merge(&env);
        let env = merged.clone();
        // Counted as a reading of the owner's configuration: a reading started before it
        // (without this starter's environment) does not replace the containment it makes.
        let generation = self.config_readings.entry(owner_uid).or_default();
        *generation += 1;
        let generation = *generation;
        let cfg = self.config.containment.clone();
        let inbox = self.inbox.clone();
        let others = self.owners_roots(owner_uid);
        let ask = Box::new(SessionAsk { owner_uid, roots, prompt, mode });
        tokio::task::spawn_blocking(move || {
            let read = SessionRead::read(&cfg, &owner, env, &ask.roots, &others);
            let _ = inbox.send(Cmd::SessionRead { ask, generation, read, reply });
        });
    }

    /// What a new session's open read came back ([`Core::create`]): the session is opened,
    /// and its pre-committed policy is made outside the actor; `reply` hears of the session
    /// once the policy is in ([`Core::policy_made`]). Until then the session's requests are
    /// denied before any vote (fail closed).
    async fn session_read(&mut self, ask: SessionAsk, generation: u64, read: Result<SessionRead, CallError>, reply: ReplyTo) {
        let opened = match read {
            Ok(read) => self.open(&ask, generation, read).await,
            Err(e) => Err(e),
        };
        match opened {
            Ok((id, draft)) => {
                let session = id.clone();
                let call = DeciderCall::spawn(&self.inbox, async move { Cmd::PolicyMade { session, made: draft.make().await } });
                self.starting.insert(id, Starting { reply, _call: call });
            }
            Err(e) => {
                let _ = reply.send(Err(e));
            }
        }
    }

    /// The part of opening a session the actor does, with what was read off it: its cgroup,
    /// its limits, its never entries and open paths in the kernel, its registration, scratch
    /// and layers, and the twin's session. The session is open (and persisted) when it
    /// returns, with the draft its pre-committed policy is to be made from.
    async fn open(&mut self, ask: &SessionAsk, generation: u64, read: SessionRead) -> Result<(String, crate::twin::PolicyDraft), CallError> {
        let SessionAsk { owner_uid, ref prompt, mode, .. } = *ask;
        let SessionRead { recs, places, contain, plan, tree, took } = read;
        let owner = users::by_uid(owner_uid);
        let contain = Arc::new(contain);
        if self.config_read_applied.get(&owner_uid).is_none_or(|&g| g < generation) {
            self.config_read_applied.insert(owner_uid, generation);
            self.contain.insert(owner_uid, contain.clone());
        }
        let scratch_size = self.config.limits.scratch_bytes()?;
        let id = sessions::new_session_id();
        let cgroup = self.config.cgroup_parent.join(&id);
        let cgroup_id = sessions::create_cgroup(&self.config.cgroup_parent, &cgroup)?;
        let flags = crate::kernel::SessionFlags { shadow: mode == SessionMode::Shadow, allow_userns: contain.allow_userns };
        let scratch_at = contain.scratch_dir(&id);
        let undo = |core: &mut Core| {
            let _ = core.enforcer.revoke_session(cgroup_id, false);
            let _ = sessions::remove_cgroup(&cgroup);
            if let Some(dir) = &scratch_at {
                contain::remove_scratch(dir);
            }
        };
        // The limits go on before any process can join the cgroup.
        if let Err(e) = self.config.limits.apply(&self.config.cgroup_parent, &cgroup) {
            undo(self);
            return Err(e.into());
        }
        let began = std::time::Instant::now();
        let gate = (|| {
            // Never-grantable entries and open paths go in before the session is gated.
            // One sync of the kernel's state for all of them.
            let seeded = self.enforcer.batch(|e| {
                let seeded = plan.write(e)?;
                contain.apply_open(e)?;
                Ok::<_, ContainError>(seeded)
            })?;
            self.watch_configuration(owner_uid, &contain, &seeded);
            self.enforcer.register_session_with(cgroup_id, flags)?;
            self.enforcer.carry_kept(cgroup_id, owner_uid)?;
            for r in recs.iter().chain(&places) {
                self.enforcer.add_root_id(ObjectId { dev: r.dev, ino: r.ino })?;
            }
            let scratch = contain.make_scratch(&mut self.enforcer, &id, cgroup_id, &owner, scratch_size)?;
            // The session's writes in read-write open paths go to layers of its own.
            let layers = layers::make(&contain, &id, cgroup_id, &mut self.enforcer, scratch_size)?;
            Ok::<_, ContainError>((scratch, layers))
        })();
        let (scratch, layers) = match gate {
            Ok(made) => made,
            Err(e) => {
                undo(self);
                return Err(e.into());
            }
        };
        let user = self.ids.of_name(&owner.name);
        let draft = match self.twins.get(&user).await {
            Ok(t) => t.open_session(&id, prompt, &tree).map_err(CallError::Twin),
            Err(e) => Err(e.into()),
        };
        let draft = match draft {
            Ok(d) => d,
            Err(e) => {
                if let Some(l) = &layers {
                    layers::remove(l, &mut self.enforcer);
                }
                undo(self);
                return Err(e);
            }
        };
        tracing::debug!(session = %id, read_ms = took.as_millis() as u64, actor_ms = began.elapsed().as_millis() as u64, "session opened");
        let s = Session {
            id: id.clone(),
            owner_uid,
            user,
            cgroup,
            cgroup_id,
            roots: recs,
            prompts: vec![prompt.clone()],
            policy_entries: 0,
            counters: Counters::default(),
            grants: vec![],
            places,
            scratch,
            layers,
            mode,
            allow_userns: contain.allow_userns,
            namespaces: contain.namespaces,
        };
        self.sessions.insert(s);
        self.persist();
        Ok((id, draft))
    }

    /// The pre-committed policy of starting session `id` is made (or failed: the session's
    /// requests are then denied): the twin takes it, the start is audited and the creator
    /// hears of the session. A session that ended meanwhile is left alone.
    async fn policy_made(&mut self, id: &str, made: Result<PolicyAnswer, DeciderError>) {
        let Some(starting) = self.starting.remove(id) else { return };
        let user = self.sessions.get(id).map(|s| s.user.clone());
        let start = match user.as_deref().and_then(|u| self.twins.existing(u)) {
            Some(t) => t.commit_policy(id, made).map_err(CallError::Twin),
            None => Err(CallError::NoSession(id.to_string())),
        };
        let start = match start {
            Ok(s) => s,
            Err(e) => {
                if self.sessions.get(id).is_some() {
                    let _ = self.end(id, Some(format!("its pre-committed policy could not be given to the twin: {}", chain(&e)))).await;
                }
                let _ = starting.reply.send(Err(e));
                return;
            }
        };
        let Some(s) = self.sessions.get_mut(id) else { return };
        s.counters.tokens += start.tokens;
        s.policy_entries = start.policy.entries().len();
        let s = s.clone();
        let mut e = self.entry(Event::SessionStart, &s);
        e.detail = Some(format!("prompt: {}; pre-committed policy of {} entries", s.prompts.first().map(String::as_str).unwrap_or_default(), s.policy_entries));
        e.decider = Some(self.decider_name.clone());
        e.tokens = Some(s.counters.tokens);
        self.audit.record(&e);
        self.persist();
        let _ = starting.reply.send(Ok(CallResult::Now(Reply::Session(s.info()))));
    }

    /// Keeps what the ending session `s` made and vacated for its owner's other sessions,
    /// open and later ([`crate::kernel::Enforcer::keep_made`]). A failure is logged: the
    /// session still ends.
    fn keep_made(&mut self, s: &Session) {
        let open: Vec<u64> = self.sessions.iter().filter(|o| o.owner_uid == s.owner_uid && o.id != s.id).map(|o| o.cgroup_id).collect();
        match self.enforcer.keep_made(s.cgroup_id, s.owner_uid, &open) {
            Ok(k) if k.dropped > 0 => tracing::warn!(session = %s.id, dropped = k.dropped, "the owner's record of what ended sessions made is full: some of this session's folders and vacated names are not kept"),
            Ok(_) => {}
            Err(e) => tracing::error!(session = %s.id, error = %chain(&e), "cannot keep what the session made for the owner's later sessions"),
        }
    }

    /// Ends a session: its processes killed, its grants revoked, its cgroup and scratch
    /// directory removed; `cause` says why when the daemon ends it on its own.
    async fn end(&mut self, id: &str, cause: Option<String>) -> CallOutcome {
        let s = self.sessions.get(id).cloned().ok_or_else(|| CallError::NoSession(id.to_string()))?;
        // Decisions in flight are dropped and their waiters denied (held threads go on to
        // EACCES and can die): nothing is granted to an ended session.
        for job in self.lanes.close(id) {
            self.finish(job, &Ruling::deny("the session ended", None));
        }
        self.locked.remove(&s.cgroup_id);
        if let Some(starting) = self.starting.remove(id) {
            let _ = starting.reply.send(Err(CallError::EndedStarting(id.to_string())));
        }
        sessions::empty_cgroup(&s.cgroup).await;
        // The entries of its scratch directory and of its layers' upper and work directories
        // are not grants the session was given.
        let own_places = usize::from(s.scratch.is_some()) + 2 * s.layers.as_ref().map_or(0, |l| l.mounts.len());
        self.keep_made(&s);
        let revoked = self.enforcer.revoke_session(s.cgroup_id, false)?.saturating_sub(own_places);
        if let Some(l) = &s.layers {
            // Checked at config load; an unreadable bound keeps nothing.
            let kept_max = self.config.limits.kept_bytes().unwrap_or(Some(0));
            layers::retire(l, &mut self.enforcer, users::by_uid(s.owner_uid).gid, kept_max);
        }
        if let Err(e) = sessions::remove_cgroup(&s.cgroup) {
            tracing::warn!(cgroup = %s.cgroup.display(), error = %e, "cannot remove the session's cgroup");
        }
        if let Some(dir) = &s.scratch {
            contain::remove_scratch(dir);
        }
        self.once.retain(|o| o.session != id);
        let mut history = None;
        if let Some(twin) = self.twins.existing(&s.user) {
            // A shadow session's accesses become trusted history; an enforcing session's
            // grants and the user's lasting approvals do (the twin records them either way).
            let ended = if s.mode == SessionMode::Shadow { twin.end_shadow_session(id).map(Some) } else { twin.end_session(id).map(|()| None) };
            match ended {
                Ok(n) => history = n,
                Err(e) => tracing::warn!(session = id, error = %chain(&e), "twin could not end the session"),
            }
        }
        if let Some(n) = history {
            let mut e = self.entry(Event::ShadowHistory, &s);
            e.detail = Some(format!("shadow session recorded as a history task: its prompts, its grants and {n} further accesses the twin decided"));
            self.audit.record(&e);
        }
        for (q, w) in self.questions.take_session(id) {
            self.close_fleet_question(q);
            for tx in w.waiters {
                let _ = tx.send(Ruling::deny("the session ended", Some(q)).into());
            }
        }
        self.sessions.remove(id);
        self.persist();
        if !self.sessions.iter().any(|o| o.owner_uid == s.owner_uid) {
            // The owner's last session: its configuration is read again when the next starts.
            if let Some(w) = &mut self.config_watch {
                w.forget(s.owner_uid);
            }
        }
        let mut e = self.entry(Event::SessionEnd, &s);
        let c = &s.counters;
        e.detail = Some(format!(
            "{} requests, {} grants, {} denials, {} escalations, {} misses; {} grants revoked{}",
            c.requests,
            c.grants,
            c.denials,
            c.escalations,
            c.misses,
            revoked,
            cause.map(|why| format!("; ended by the daemon: {why}")).unwrap_or_default()
        ));
        e.tokens = Some(c.tokens);
        self.audit.record(&e);
        if let Some(held) = self.denial_budgets.remove(&s.id).map(|b| b.held_back()).filter(|&n| n > 0) {
            let mut e = self.entry(Event::Miss, &s);
            e.outcome = Some(RequestOutcome::Deny);
            e.detail = Some(format!("{held} more denials of this session were counted, not written one by one (more than {} a second)", super::audit::DENIALS_PER_SECOND));
            self.audit.record(&e);
        }
        Ok(CallResult::Now(Reply::Summary { session: s.info(), revoked }))
    }

    async fn prompt(&mut self, id: &str, text: &str) -> CallOutcome {
        let user = self.sessions.get(id).map(|s| s.user.clone()).ok_or_else(|| CallError::NoSession(id.to_string()))?;
        self.twins.get(&user).await?.prompt(id, text).await.map_err(CallError::Prompt)?;
        let s = self.sessions.get_mut(id).expect("looked up above");
        s.prompts.push(text.to_string());
        let mut e = AuditEntry::new(Event::Prompt);
        e.session = Some(id.into());
        e.owner_uid = Some(s.owner_uid);
        e.detail = Some(text.into());
        self.audit.record(&e);
        self.persist();
        Ok(CallResult::Now(Reply::Ok { message: format!("prompt added to session {id}") }))
    }

    fn import(&mut self, uid: u32, history: &str, policies: &str, workspace: Option<&std::path::Path>) -> CallOutcome {
        let user = self.identity(uid);
        if self.sessions.iter().any(|s| s.user == user) {
            return Err(CallError::UserHasSessions(user));
        }
        let stage = |path: &std::path::Path| {
            let path = path.to_path_buf();
            move |source| CallError::ImportStage { path, source }
        };
        let dir = tempfile::Builder::new().prefix("import-").tempdir_in(&self.config.state_dir).map_err(stage(&self.config.state_dir))?;
        let (h, p) = (dir.path().join("history.jsonl"), dir.path().join("policies.jsonl"));
        std::fs::write(&h, history).and_then(|()| std::fs::write(&p, policies)).map_err(stage(dir.path()))?;
        let sum = self.twins.store().import_persona(&user, &h, &p).map_err(CallError::Import)?;
        let mut snapshot = String::new();
        if let Some(ws) = workspace {
            let err = |source| CallError::Workspace { path: ws.to_path_buf(), source };
            use std::os::unix::fs::MetadataExt;
            let owner = std::fs::symlink_metadata(ws).map_err(err)?.uid();
            if owner != uid && owner != 0 {
                return Err(err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, format!("owned by uid {owner}, not by the importing user"))));
            }
            let snap = super::twins::WorkspaceSnapshot::take(ws).map_err(err)?;
            // The snapshot is trusted state: in the store, so every host sharing it builds
            // the same fingerprints (a file an earlier version kept goes).
            self.twins.store().set_workspace(&user, &snap).map_err(CallError::Import)?;
            let _ = std::fs::remove_file(super::twins::snapshot_path(&self.config.state_dir, &user));
            snapshot = format!(" and a snapshot of {} ({} entries)", ws.display(), snap.tree.len());
        }
        self.twins.forget(&user);
        let mut e = AuditEntry::new(Event::Import);
        e.owner_uid = Some(uid);
        e.detail = Some(format!("{} history tasks and {} policies for {user}{snapshot}", sum.tasks, sum.policies));
        self.audit.record(&e);
        Ok(CallResult::Now(Reply::Ok { message: format!("imported {} history tasks and {} policies for {user}{snapshot}", sum.tasks, sum.policies) }))
    }

    /// The questions `peer` may answer: this host's, and with a shared store every other
    /// host's of the fleet.
    fn pending(&mut self, peer: &Peer) -> Result<Vec<QuestionInfo>, CallError> {
        let mine: Vec<u64> = self
            .questions
            .iter()
            .filter(|(_, w)| self.sessions.get(&w.session).is_some_and(|s| peer.uid == 0 || s.owner_uid == peer.uid))
            .map(|(q, _)| q)
            .collect();
        let mut out: Vec<QuestionInfo> = mine.into_iter().filter_map(|q| self.question_info(q)).collect();
        out.extend(self.fleet_pending(peer)?);
        Ok(out)
    }

    /// Question `q` of this host as `pending` lists it.
    pub(super) fn question_info(&mut self, q: u64) -> Option<QuestionInfo> {
        let w = self.questions.get(q)?;
        let reason = self.twins.existing(&w.user).and_then(|t| t.pending().iter().find(|x| x.id == q).map(|x| x.reason.clone())).unwrap_or_default();
        Some(QuestionInfo {
            id: q,
            session: w.session.clone(),
            path: w.request.path.clone(),
            access: w.request.access,
            reason,
            waiting: w.has_waiter(),
            votes: w.votes.clone(),
            host: self.host.clone(),
        })
    }

    async fn answer(&mut self, peer: &Peer, q: u64, approve: bool, scope: ApprovalScope) -> CallOutcome {
        let session = self.questions.get(q).map(|w| w.session.clone()).ok_or(CallError::NoQuestion(q))?;
        callers::owned(&self.sessions, peer, &session)?;
        self.claim_fleet_question(q)?;
        self.settle(q, approve, scope, None).await
    }

    /// Applies the user's answer to question `q` (given here, or on host `by` of the fleet):
    /// recorded by the twin, audited, decided again if approved, and sent to the waiting
    /// workers.
    pub(super) async fn settle(&mut self, q: u64, approve: bool, scope: ApprovalScope, by: Option<&str>) -> CallOutcome {
        let w = self.questions.take(q).ok_or(CallError::NoQuestion(q))?;
        self.twins.get(&w.user).await?.answer(q, approve, scope).map_err(CallError::Twin)?;
        let mut e = AuditEntry::new(Event::Answer);
        e.session = Some(w.session.clone());
        e.owner_uid = self.sessions.get(&w.session).map(|s| s.owner_uid);
        e.question = Some(q);
        e.outcome = Some(if approve { RequestOutcome::UserApproved } else { RequestOutcome::UserDenied });
        let mut r = w.origin.audit_request(&w.request.path, w.request.access);
        r.rationale = None;
        e.request = Some(r);
        e.detail = by.map(|h| format!("answered on host {h}"));
        self.audit.record(&e);
        if approve {
            // The approval is trusted state now: the twin decides again with it, and the
            // waiting workers hear the ruling.
            self.submit(Origin::Answer { question: q, first: Box::new(w.origin.clone()) }, w.request.clone(), Waiter::Answer { scope, waiters: w.waiters }).await;
        } else {
            if let Some(s) = self.sessions.get_mut(&w.session) {
                s.counters.denials += 1;
            }
            let reply: Reply = Ruling { granted: false, outcome: RequestOutcome::UserDenied, reason: "the user denied the request".into(), question: Some(q) }.into();
            for tx in w.waiters {
                let _ = tx.send(reply.clone());
            }
        }
        self.persist();
        let how = match (approve, scope) {
            (false, _) => "denied".to_string(),
            (true, ApprovalScope::Once) => format!("approved for this request only ({} s in the kernel)", self.config.escalation.once_secs),
            (true, ApprovalScope::Session) => "approved for the rest of the session".to_string(),
            (true, ApprovalScope::Always) => "approved and recorded as your approval (see `pincer policy list`)".to_string(),
        };
        Ok(CallResult::Now(Reply::Ok { message: format!("question {q} {how}") }))
    }

    /// Keeps the kernel grant an approval of scope `once` made until its time is up.
    pub(super) fn once_granted(&mut self, req: &super::pipeline::PipelineRequest) {
        let until = tokio::time::Instant::now() + std::time::Duration::from_secs(self.config.escalation.once_secs);
        self.once.push(OnceGrant { session: req.session.clone(), path: req.path.clone(), target: req.target, access: req.access, until });
    }

    /// Takes back the kernel grants of `once` approvals whose time is up, unless the twin
    /// has since granted the same access in the session on its own. A grant the kernel will
    /// not give back ends its session: the access must not outlive the one request.
    async fn expire_once(&mut self) {
        let now = tokio::time::Instant::now();
        let (due, keep): (Vec<OnceGrant>, Vec<OnceGrant>) = std::mem::take(&mut self.once).into_iter().partition(|o| o.until <= now);
        self.once = keep;
        // Sessions to end, each with the first once grant the kernel kept.
        let mut stuck: BTreeMap<String, String> = BTreeMap::new();
        for o in due {
            let Some(s) = self.sessions.get(&o.session) else { continue };
            if self.twins.grants(s).iter().any(|(p, a)| *p == o.path && *a == o.access) {
                continue;
            }
            if let Err(e) = self.enforcer.revoke(s.cgroup_id, o.target, Scope::Exact, o.access) {
                tracing::error!(session = o.session, error = %chain(&e), "cannot take back a once grant; ending the session");
                let why = format!("the kernel would not take back a once grant ({} on {}): {}", o.access, o.path, chain(&e));
                stuck.entry(o.session).or_insert(why);
            }
        }
        for (id, why) in stuck {
            if let Err(e) = self.end(&id, Some(why)).await {
                tracing::error!(session = id, error = %e, "cannot end the session whose once grant stays");
            }
        }
    }

    /// Removes one of `uid`'s standing approvals or policies and gives the user's twin the
    /// state without it.
    async fn remove_rule(&mut self, uid: u32, id: RuleId) -> CallOutcome {
        let user = self.identity(uid);
        let removed = self.twins.store().remove_rule(&user, id).map_err(|e| match e {
            crate::store::StoreError::NoSuchRule(id) => CallError::NoRule(id),
            e => CallError::Store(e),
        })?;
        let (approval, what) = match &removed.rule {
            crate::store::Rule::Approval(a) => (Some(a), format!("approval {id} ({} {} in task {})", a.access, a.path_glob, a.session)),
            crate::store::Rule::Policy(p) => (None, format!("policy {id} ({})", p.id)),
        };
        self.twins.reload(&user, approval).await?;
        let mut e = AuditEntry::new(Event::RuleRemoved);
        e.owner_uid = Some(uid);
        e.detail = Some(format!("{what} removed for {user}"));
        self.audit.record(&e);
        Ok(CallResult::Now(Reply::Ok { message: format!("removed {what}") }))
    }

    /// Gives the twins the trusted state as the shared store holds it now: one user's after
    /// a notification, everyone's after the store was away (what was missed is unknown).
    async fn state_changed(&mut self, change: crate::store::pg::StateChange) {
        let users = match change {
            crate::store::pg::StateChange::User(u) => vec![u],
            crate::store::pg::StateChange::All => {
                // Answers given while the listener was away are taken now.
                self.apply_fleet_answers().await;
                self.twins.users()
            }
            crate::store::pg::StateChange::Answered(host) => {
                if self.host.as_ref() == Some(&host) {
                    self.apply_fleet_answers().await;
                }
                return;
            }
        };
        for u in users {
            if let Err(e) = self.twins.reload(&u, None).await {
                // The twin keeps its state; its decisions deny while the store is away.
                tracing::warn!(user = u, error = %chain(&e), "cannot reload the trusted state");
            }
        }
    }

    fn wait_timed_out(&mut self, q: u64) {
        let Some(w) = self.questions.get_mut(q) else { return };
        w.waiters.retain(|t| !t.is_closed());
        let session = w.session.clone();
        let mut req = w.origin.audit_request(&w.request.path, w.request.access);
        req.rationale = None;
        if let Some(s) = self.sessions.get_mut(&session) {
            s.counters.denials += 1;
            let mut e = AuditEntry::new(Event::EscalationTimeout);
            e.session = Some(session);
            e.owner_uid = Some(s.owner_uid);
            e.question = Some(q);
            e.outcome = Some(RequestOutcome::Timeout);
            e.request = Some(req);
            e.detail = Some("the user did not answer in time; the worker's request was denied (the question stays pending)".into());
            self.audit.record(&e);
        }
    }
}
