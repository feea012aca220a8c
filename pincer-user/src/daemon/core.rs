//! The daemon's actor: one task owns the enforcer, the twins (one per user), the open
//! sessions and the escalation queue, and serves commands that carry `oneshot` replies.
//! Every permission check happens here, so it is tested on the host against a
//! [`MemoryEnforcer`](super::enforce::MemoryEnforcer).

use super::audit::{AuditCaller, AuditEntry, AuditLog, AuditRequest, AuditVote, Event};
use super::config::{Config, OnMiss, VariantName};
use super::enforce::Enforce;
use super::peer::Peer;
use super::protocol::{Call, Counters, ErrorKind, QuestionInfo, Reply, SessionInfo};
use super::resolve::{self, Root};
use super::users;
use crate::access::Access;
use crate::decider::{Decider, Verdict};
use crate::kernel::{Miss, ObjectId, Scope};
use crate::sanitize::Sanitizer;
use crate::store::Store;
use crate::twin::{Decision, Outcome, Request, Twin, TwinConfig, Variant};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{mpsc, oneshot};

/// Entries of the workspace tree handed to the pre-committed policy at most.
pub const TREE_LIMIT: usize = 5000;

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
        /// Where the answer goes.
        reply: oneshot::Sender<CallResult>,
    },
    /// A kernel miss.
    Miss(Miss),
    /// A worker's wait for question `question` ran out.
    WaitTimedOut {
        /// The question.
        question: u64,
    },
}

/// A protected root as persisted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct RootRec {
    path: PathBuf,
    dev: u32,
    ino: u64,
    label: String,
}

impl RootRec {
    fn root(&self) -> Root {
        Root { path: self.path.clone(), id: ObjectId { dev: self.dev, ino: self.ino }, label: self.label.clone() }
    }
}

/// An open session as the daemon keeps it (persisted in `sessions.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Session {
    id: String,
    owner_uid: u32,
    user: String,
    cgroup: PathBuf,
    cgroup_id: u64,
    roots: Vec<RootRec>,
    prompts: Vec<String>,
    policy_entries: usize,
    counters: Counters,
    /// Grants made before the last daemon restart (the twin's session state is rebuilt
    /// from the prompts; these are written to the trusted history when the session ends).
    #[serde(default)]
    grants: Vec<(String, Access)>,
    #[serde(default)]
    grants_before_restart: usize,
}

impl Session {
    fn info(&self) -> SessionInfo {
        SessionInfo {
            session: self.id.clone(),
            owner_uid: self.owner_uid,
            user: self.user.clone(),
            cgroup: self.cgroup.clone(),
            cgroup_id: self.cgroup_id,
            roots: self.roots.iter().map(|r| r.path.clone()).collect(),
            policy_entries: self.policy_entries,
            counters: self.counters.clone(),
        }
    }
    fn roots(&self) -> Vec<Root> {
        self.roots.iter().map(RootRec::root).collect()
    }
}

/// Where a grant goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Target {
    id: ObjectId,
    access: Access,
}

/// A request waiting for the user.
#[derive(Debug)]
struct Waiting {
    user: String,
    twin_question: u64,
    session: String,
    req: Request,
    target: Target,
    source: &'static str,
    pid: u32,
    uid: u32,
    waiters: Vec<oneshot::Sender<Reply>>,
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
    /// `sessions.json` could not be parsed.
    #[error("cannot parse {path}: {detail}")]
    SessionsFile {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        detail: String,
    },
    /// The trusted store failed.
    #[error("trusted store")]
    Store(#[from] crate::store::StoreError),
    /// The twin refused to resume a session.
    #[error("cannot resume session {session}")]
    Resume {
        /// The session.
        session: String,
        /// Cause.
        #[source]
        source: crate::twin::TwinError,
    },
}

/// What the actor needs.
pub struct CoreDeps {
    /// Configuration.
    pub config: Config,
    /// The enforcer.
    pub enforcer: Box<dyn Enforce>,
    /// The decider of every twin.
    pub decider: Arc<dyn Decider>,
    /// The sanitizer (its key never leaves the twins).
    pub sanitizer: Sanitizer,
    /// The audit log.
    pub audit: Arc<AuditLog>,
}

impl std::fmt::Debug for CoreDeps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoreDeps").field("config", &self.config).finish_non_exhaustive()
    }
}

/// The actor's state.
pub struct Core {
    config: Config,
    enforcer: Box<dyn Enforce>,
    decider: Arc<dyn Decider>,
    sanitizer: Sanitizer,
    audit: Arc<AuditLog>,
    twins: HashMap<String, Twin>,
    sessions: BTreeMap<String, Session>,
    waiting: BTreeMap<u64, Waiting>,
    next_question: u64,
}

enum Caller {
    Worker(String),
    GatedUnknown,
    Outside,
}

type CallOutcome = Result<CallResult, (ErrorKind, String)>;

fn refuse<T>(msg: impl Into<String>) -> Result<T, (ErrorKind, String)> {
    Err((ErrorKind::Refused, msg.into()))
}

fn bad<T>(msg: impl Into<String>) -> Result<T, (ErrorKind, String)> {
    Err((ErrorKind::BadRequest, msg.into()))
}

fn internal(msg: impl std::fmt::Display) -> (ErrorKind, String) {
    (ErrorKind::Internal, msg.to_string())
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

fn deny_reason(d: &Decision) -> String {
    let reasons: Vec<String> = d
        .votes
        .iter()
        .enumerate()
        .filter(|(_, v)| v.verdict != Verdict::Allow)
        .map(|(i, v)| format!("vote {}: {}", i + 1, v.reason))
        .collect();
    if reasons.is_empty() {
        "denied".into()
    } else {
        reasons.join("; ")
    }
}

fn decision_reply(granted: bool, outcome: &str, reason: String, question: Option<u64>) -> Reply {
    Reply::Decision { granted, outcome: outcome.into(), reason, question }
}

/// Kills every process left in a cgroup and waits (bounded) for it to empty.
async fn empty_cgroup(cgroup: &Path) {
    let kill = cgroup.join("cgroup.kill");
    if kill.is_file() {
        let _ = std::fs::write(&kill, "1");
    } else if let Ok(procs) = std::fs::read_to_string(cgroup.join("cgroup.procs")) {
        for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
            // SAFETY: plain kill(2) on a pid read from the cgroup.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
    for _ in 0..200 {
        match std::fs::read_to_string(cgroup.join("cgroup.procs")) {
            Ok(p) if !p.trim().is_empty() => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
            _ => break,
        }
    }
}

fn remove_cgroup(cgroup: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir(cgroup) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

fn new_session_id() -> String {
    let mut b = [0u8; 5];
    if getrandom::fill(&mut b).is_err() {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        b.copy_from_slice(&t.to_le_bytes()[..5]);
    }
    format!("s-{}", hex::encode(b))
}

struct TwinParts {
    db: PathBuf,
    sanitizer: Sanitizer,
    decider: Arc<dyn Decider>,
    config: TwinConfig,
}

/// A twin over `user`'s trusted state, with `resume`'s sessions reopened from their prompts
/// (before the store is attached, so nothing is recorded twice).
async fn build_twin(p: TwinParts, user: &str, resume: &[Session]) -> Result<Twin, CoreError> {
    let store = Store::open(&p.db)?;
    let mut state = store.load_state(user)?;
    state.tasks.retain(|t| !resume.iter().any(|s| s.id == t.session));
    let mut twin = Twin::new(state, p.sanitizer, p.decider, p.config);
    for s in resume {
        let tree: Vec<String> = s.roots().iter().flat_map(|r| resolve::workspace_tree(r, TREE_LIMIT)).collect();
        let first = s.prompts.first().cloned().unwrap_or_default();
        twin.start_session(&s.id, &first, &tree).await.map_err(|source| CoreError::Resume { session: s.id.clone(), source })?;
        for prompt in s.prompts.iter().skip(1) {
            twin.prompt(&s.id, prompt).await.map_err(|source| CoreError::Resume { session: s.id.clone(), source })?;
        }
    }
    Ok(twin.with_store(store))
}

impl Core {
    /// Builds the actor state and resumes the sessions left open by an earlier daemon.
    pub async fn new(deps: CoreDeps) -> Result<Self, CoreError> {
        let dir = deps.config.state_dir.clone();
        std::fs::create_dir_all(&dir).map_err(|source| CoreError::StateDir { path: dir.clone(), source })?;
        let mut core = Core {
            config: deps.config,
            enforcer: deps.enforcer,
            decider: deps.decider,
            sanitizer: deps.sanitizer,
            audit: deps.audit,
            twins: HashMap::new(),
            sessions: BTreeMap::new(),
            waiting: BTreeMap::new(),
            next_question: 1,
        };
        core.resume().await?;
        Ok(core)
    }

    fn sessions_file(&self) -> PathBuf {
        self.config.state_dir.join("sessions.json")
    }

    fn db(&self) -> PathBuf {
        self.config.state_dir.join("state.db")
    }

    fn persist(&self) {
        let path = self.sessions_file();
        let tmp = path.with_extension("json.tmp");
        let list: Vec<&Session> = self.sessions.values().collect();
        let text = serde_json::to_string_pretty(&list).expect("sessions serialize");
        if let Err(e) = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, &path)) {
            tracing::error!(file = %path.display(), error = %e, "cannot persist open sessions");
        }
    }

    async fn resume(&mut self) -> Result<(), CoreError> {
        let path = self.sessions_file();
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(source) => return Err(CoreError::StateDir { path, source }),
        };
        let list: Vec<Session> = serde_json::from_str(&text).map_err(|e| CoreError::SessionsFile { path: path.clone(), detail: e.to_string() })?;
        let mut by_user: BTreeMap<String, Vec<Session>> = BTreeMap::new();
        for mut s in list {
            if !s.cgroup.is_dir() {
                let n = self.enforcer.revoke_session(s.cgroup_id).unwrap_or(0);
                let mut e = self.entry(Event::SessionEnd, &s);
                e.detail = Some(format!("its cgroup disappeared while the daemon was down; {n} grants revoked"));
                self.audit.record(&e);
                continue;
            }
            // Enforcement stayed pinned; make sure the session and its roots are in the maps.
            if let Err(e) = self.enforcer.register_session(s.cgroup_id) {
                tracing::error!(session = %s.id, error = %chain(&e), "cannot re-register session");
            }
            for r in &s.roots {
                let _ = self.enforcer.add_root(ObjectId { dev: r.dev, ino: r.ino });
            }
            s.grants_before_restart = s.grants.len();
            by_user.entry(s.user.clone()).or_default().push(s);
        }
        for (user, list) in by_user {
            let twin = build_twin(self.twin_parts(), &user, &list).await?;
            self.twins.insert(user, twin);
            for s in list {
                self.audit.record(&self.entry(Event::SessionResume, &s));
                self.sessions.insert(s.id.clone(), s);
            }
        }
        self.persist();
        Ok(())
    }

    fn twin_parts(&self) -> TwinParts {
        TwinParts { db: self.db(), sanitizer: self.sanitizer.clone(), decider: self.decider.clone(), config: self.twin_config() }
    }

    fn twin_config(&self) -> TwinConfig {
        TwinConfig {
            variant: match self.config.decider.variant {
                VariantName::Pincer => Variant::Pincer,
                VariantName::PincerP2 => Variant::PincerP2,
            },
            escalate_after: self.config.escalation.after_denials,
        }
    }

    async fn twin(&mut self, user: &str) -> Result<&mut Twin, (ErrorKind, String)> {
        if !self.twins.contains_key(user) {
            let twin = build_twin(self.twin_parts(), user, &[]).await.map_err(|e| internal(chain(&e)))?;
            self.twins.insert(user.to_string(), twin);
        }
        Ok(self.twins.get_mut(user).expect("inserted above"))
    }

    fn entry(&self, event: Event, s: &Session) -> AuditEntry {
        let mut e = AuditEntry::new(event);
        e.session = Some(s.id.clone());
        e.owner_uid = Some(s.owner_uid);
        e
    }

    fn classify(&self, peer: &Peer) -> Caller {
        if !peer.cgroup.starts_with(&self.config.cgroup_parent) {
            return Caller::Outside;
        }
        match self.sessions.values().find(|s| peer.cgroup.starts_with(&s.cgroup)) {
            Some(s) => Caller::Worker(s.id.clone()),
            None => Caller::GatedUnknown,
        }
    }

    fn audit_refusal(&self, peer: &Peer, call: &Call, why: &str) {
        let mut e = AuditEntry::new(Event::Refusal);
        e.outcome = Some("refused".into());
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

    /// Runs the actor until every sender is dropped.
    pub async fn run(mut self, mut rx: mpsc::Receiver<Cmd>) {
        while let Some(cmd) = rx.recv().await {
            match cmd {
                Cmd::Call { peer, call, reply } => {
                    let shown = call.clone();
                    let result = match self.call(&peer, call).await {
                        Ok(r) => r,
                        Err((kind, message)) => {
                            if kind == ErrorKind::Refused {
                                self.audit_refusal(&peer, &shown, &message);
                            }
                            CallResult::Now(Reply::Error { kind, message })
                        }
                    };
                    let _ = reply.send(result);
                }
                Cmd::Miss(m) => self.miss(m).await,
                Cmd::WaitTimedOut { question } => self.wait_timed_out(question),
            }
        }
        self.persist();
    }

    fn owned(&self, peer: &Peer, session: &str) -> Result<&Session, (ErrorKind, String)> {
        match self.sessions.get(session) {
            Some(s) if peer.uid == 0 || peer.uid == s.owner_uid => Ok(s),
            Some(_) => refuse(format!("session {session} belongs to another user")),
            None => bad(format!("no open session {session:?}")),
        }
    }

    fn only_session(&self, peer: &Peer) -> Result<String, (ErrorKind, String)> {
        let mine: Vec<&Session> = self.sessions.values().filter(|s| peer.uid == 0 || s.owner_uid == peer.uid).collect();
        match mine.as_slice() {
            [one] => Ok(one.id.clone()),
            [] => bad("no open session of yours"),
            many => bad(format!(
                "several open sessions ({}); name one with --session",
                many.iter().map(|s| s.id.as_str()).collect::<Vec<_>>().join(", ")
            )),
        }
    }

    async fn call(&mut self, peer: &Peer, call: Call) -> CallOutcome {
        let caller = self.classify(peer);
        match (&caller, call) {
            (Caller::GatedUnknown, _) => refuse("the caller is inside a gated cgroup of no open session"),
            (Caller::Worker(own), Call::Request { path, access, reason, session }) => {
                if let Some(s) = session.filter(|s| s != own) {
                    return refuse(format!("a session's worker may request only for its own session, not {s}"));
                }
                let own = own.clone();
                Ok(self.request(&own, peer, &path, access, reason).await)
            }
            (Caller::Worker(own), Call::Status { session }) => {
                if let Some(s) = session.filter(|s| s != own) {
                    return refuse(format!("a session's worker may read only its own status, not {s}"));
                }
                Ok(CallResult::Now(Reply::Session(self.sessions[own].info())))
            }
            (Caller::Worker(_), other) => refuse(format!("`{}` is accepted only from the session owner outside every gated session", other.name())),
            (Caller::Outside, Call::Request { .. }) => refuse("requests come from a session's worker (a process inside its cgroup)"),
            (Caller::Outside, Call::Status { session }) => {
                let id = match session {
                    Some(s) => s,
                    None => self.only_session(peer)?,
                };
                Ok(CallResult::Now(Reply::Session(self.owned(peer, &id)?.info())))
            }
            (Caller::Outside, Call::CreateSession { owner_uid, roots, prompt }) => {
                if peer.uid != 0 {
                    return refuse("creating a session needs root (run `pincer run` with sudo)");
                }
                self.create(owner_uid, roots, prompt).await
            }
            (Caller::Outside, Call::EndSession { session }) => {
                self.owned(peer, &session)?;
                self.end(&session).await
            }
            (Caller::Outside, Call::Prompt { session, text }) => {
                let id = match session {
                    Some(s) => s,
                    None => self.only_session(peer)?,
                };
                self.owned(peer, &id)?;
                self.prompt(&id, &text).await
            }
            (Caller::Outside, Call::Pending) => Ok(CallResult::Now(Reply::Pending { questions: self.pending(peer) })),
            (Caller::Outside, Call::Answer { question, approve }) => self.answer(peer, question, approve).await,
            (Caller::Outside, Call::Log { session, follow }) => {
                if let Some(s) = &session {
                    if let Some(sess) = self.sessions.get(s) {
                        if peer.uid != 0 && sess.owner_uid != peer.uid {
                            return refuse(format!("session {s} belongs to another user"));
                        }
                    }
                }
                Ok(CallResult::Log { session, owner: if peer.uid == 0 { None } else { Some(peer.uid) }, follow })
            }
            (Caller::Outside, Call::Sessions) => {
                let sessions = self.sessions.values().filter(|s| peer.uid == 0 || s.owner_uid == peer.uid).map(Session::info).collect();
                Ok(CallResult::Now(Reply::Sessions { sessions }))
            }
            (Caller::Outside, Call::Import { history, policies, uid }) => {
                let uid = match uid {
                    Some(u) if u != peer.uid && peer.uid != 0 => return refuse("only root may import for another user"),
                    Some(u) => u,
                    None => peer.uid,
                };
                self.import(uid, &history, &policies)
            }
        }
    }

    async fn create(&mut self, owner_uid: u32, roots: Vec<PathBuf>, prompt: String) -> CallOutcome {
        if prompt.trim().is_empty() {
            return bad("the first prompt is empty (it makes the session's pre-committed policy)");
        }
        let roots = if roots.is_empty() { self.config.default_roots.clone() } else { roots };
        if roots.is_empty() {
            return bad("no protected root given (use --root DIR or set default_roots in the configuration)");
        }
        let mut recs: Vec<RootRec> = Vec::new();
        for r in &roots {
            let canon = r.canonicalize().map_err(|e| (ErrorKind::BadRequest, format!("protected root {}: {e}", r.display())))?;
            if !canon.is_dir() {
                return bad(format!("protected root {} is not a directory", r.display()));
            }
            if canon == Path::new("/") {
                return bad("/ cannot be a protected root (the worker could not run)");
            }
            let id = ObjectId::of_path(&canon).map_err(|e| internal(chain(&e)))?;
            recs.push(RootRec { path: canon, dev: id.dev, ino: id.ino, label: String::new() });
        }
        if recs.len() > 1 {
            for i in 0..recs.len() {
                let base = recs[i].path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "root".into());
                let taken = recs[..i].iter().any(|r| r.label == base);
                recs[i].label = if taken { format!("{base}-{i}") } else { base };
            }
        }
        let id = new_session_id();
        let cgroup = self.config.cgroup_parent.join(&id);
        std::fs::create_dir_all(&self.config.cgroup_parent)
            .and_then(|()| std::fs::create_dir(&cgroup))
            .map_err(|e| internal(format!("cannot create cgroup {}: {e}", cgroup.display())))?;
        let cgroup_id = match crate::kernel::cgroup_id(&cgroup) {
            Ok(i) => i,
            Err(e) => {
                let _ = remove_cgroup(&cgroup);
                return Err(internal(chain(&e)));
            }
        };
        let gate = (|| {
            self.enforcer.register_session(cgroup_id)?;
            for r in &recs {
                self.enforcer.add_root(ObjectId { dev: r.dev, ino: r.ino })?;
            }
            Ok::<(), crate::kernel::KernelError>(())
        })();
        if let Err(e) = gate {
            let _ = self.enforcer.revoke_session(cgroup_id);
            let _ = remove_cgroup(&cgroup);
            return Err(internal(chain(&e)));
        }
        let user = users::by_uid(owner_uid).name;
        let tree: Vec<String> = recs.iter().flat_map(|r| resolve::workspace_tree(&r.root(), TREE_LIMIT)).collect();
        let start = match self.twin(&user).await {
            Ok(t) => t.start_session(&id, &prompt, &tree).await.map_err(|e| internal(chain(&e))),
            Err(e) => Err(e),
        };
        let start = match start {
            Ok(s) => s,
            Err(e) => {
                let _ = self.enforcer.revoke_session(cgroup_id);
                let _ = remove_cgroup(&cgroup);
                return Err(e);
            }
        };
        let mut counters = Counters::default();
        counters.tokens += start.tokens;
        let s = Session {
            id: id.clone(),
            owner_uid,
            user,
            cgroup,
            cgroup_id,
            roots: recs,
            prompts: vec![prompt.clone()],
            policy_entries: start.policy.entries().len(),
            counters,
            grants: vec![],
            grants_before_restart: 0,
        };
        let mut e = self.entry(Event::SessionStart, &s);
        e.detail = Some(format!("prompt: {prompt}; pre-committed policy of {} entries", s.policy_entries));
        e.decider = Some(self.decider.name().to_string());
        e.tokens = Some(s.counters.tokens);
        self.audit.record(&e);
        let info = s.info();
        self.sessions.insert(id, s);
        self.persist();
        Ok(CallResult::Now(Reply::Session(info)))
    }

    async fn end(&mut self, id: &str) -> CallOutcome {
        let s = self.sessions.get(id).cloned().ok_or_else(|| (ErrorKind::BadRequest, format!("no open session {id:?}")))?;
        empty_cgroup(&s.cgroup).await;
        let revoked = self.enforcer.revoke_session(s.cgroup_id).map_err(|e| internal(chain(&e)))?;
        if let Err(e) = remove_cgroup(&s.cgroup) {
            tracing::warn!(cgroup = %s.cgroup.display(), error = %e, "cannot remove the session's cgroup");
        }
        if let Some(twin) = self.twins.get_mut(&s.user) {
            if let Some(store) = twin.store() {
                for (path, access) in s.grants.iter().take(s.grants_before_restart) {
                    let g = crate::store::TwinGrant { session: s.id.clone(), path: path.clone(), access: *access };
                    if let Err(e) = store.add_twin_grant(&s.user, twin.state().last_day(), &g) {
                        tracing::warn!(error = %e, "cannot record a grant made before the restart");
                    }
                }
            }
            if let Err(e) = twin.end_session(id) {
                tracing::warn!(session = id, error = %chain(&e), "twin could not end the session");
            }
        }
        let qs: Vec<u64> = self.waiting.iter().filter(|(_, w)| w.session == id).map(|(q, _)| *q).collect();
        for q in qs {
            if let Some(w) = self.waiting.remove(&q) {
                for tx in w.waiters {
                    let _ = tx.send(decision_reply(false, "deny", "the session ended".into(), Some(q)));
                }
            }
        }
        self.sessions.remove(id);
        self.persist();
        let mut e = self.entry(Event::SessionEnd, &s);
        let c = &s.counters;
        e.detail = Some(format!(
            "{} requests, {} grants, {} denials, {} escalations, {} misses; {} grants revoked",
            c.requests, c.grants, c.denials, c.escalations, c.misses, revoked
        ));
        e.tokens = Some(c.tokens);
        self.audit.record(&e);
        Ok(CallResult::Now(Reply::Summary { session: s.info(), revoked }))
    }

    async fn prompt(&mut self, id: &str, text: &str) -> CallOutcome {
        let user = self.sessions[id].user.clone();
        self.twin(&user).await?.prompt(id, text).await.map_err(|e| (ErrorKind::BadRequest, chain(&e)))?;
        let s = self.sessions.get_mut(id).expect("checked by the caller");
        s.prompts.push(text.to_string());
        let mut e = AuditEntry::new(Event::Prompt);
        e.session = Some(id.into());
        e.owner_uid = Some(s.owner_uid);
        e.detail = Some(text.into());
        self.audit.record(&e);
        self.persist();
        Ok(CallResult::Now(Reply::Ok { message: format!("prompt added to session {id}") }))
    }

    fn import(&mut self, uid: u32, history: &str, policies: &str) -> CallOutcome {
        let user = users::by_uid(uid).name;
        if self.sessions.values().any(|s| s.user == user) {
            return bad(format!("user {user} has open sessions; import before starting them"));
        }
        let dir = tempfile::Builder::new().prefix("import-").tempdir_in(&self.config.state_dir).map_err(internal)?;
        let (h, p) = (dir.path().join("history.jsonl"), dir.path().join("policies.jsonl"));
        std::fs::write(&h, history).and_then(|()| std::fs::write(&p, policies)).map_err(internal)?;
        let store = Store::open(self.db()).map_err(|e| internal(chain(&e)))?;
        let sum = store.import_persona(&user, &h, &p).map_err(|e| (ErrorKind::BadRequest, chain(&e)))?;
        self.twins.remove(&user);
        let mut e = AuditEntry::new(Event::Import);
        e.owner_uid = Some(uid);
        e.detail = Some(format!("{} history tasks and {} policies for {user}", sum.tasks, sum.policies));
        self.audit.record(&e);
        Ok(CallResult::Now(Reply::Ok { message: format!("imported {} history tasks and {} policies for {user}", sum.tasks, sum.policies) }))
    }

    fn global_question(&mut self, user: &str, twin_q: u64) -> Option<u64> {
        self.waiting.iter().find(|(_, w)| w.user == user && w.twin_question == twin_q).map(|(q, _)| *q)
    }

    fn pending(&mut self, peer: &Peer) -> Vec<QuestionInfo> {
        let mut out = Vec::new();
        for (q, w) in &self.waiting {
            let Some(s) = self.sessions.get(&w.session) else { continue };
            if peer.uid != 0 && s.owner_uid != peer.uid {
                continue;
            }
            let reason = self
                .twins
                .get(&w.user)
                .and_then(|t| t.pending().iter().find(|x| x.id == w.twin_question).map(|x| x.reason.clone()))
                .unwrap_or_default();
            out.push(QuestionInfo {
                id: *q,
                session: w.session.clone(),
                path: w.req.path.clone(),
                access: w.req.access,
                reason,
                waiting: w.waiters.iter().any(|t| !t.is_closed()),
            });
        }
        out
    }

    async fn answer(&mut self, peer: &Peer, q: u64, approve: bool) -> CallOutcome {
        let Some(w) = self.waiting.get(&q) else {
            return bad(format!("no pending question {q}"));
        };
        self.owned(peer, &w.session.clone())?;
        let w = self.waiting.remove(&q).expect("present");
        let twin = self.twin(&w.user).await?;
        twin.answer(w.twin_question, approve).map_err(|e| internal(chain(&e)))?;
        let mut e = AuditEntry::new(Event::Answer);
        e.session = Some(w.session.clone());
        e.owner_uid = self.sessions.get(&w.session).map(|s| s.owner_uid);
        e.question = Some(q);
        e.outcome = Some(if approve { "user_approved" } else { "user_denied" }.into());
        e.request = Some(AuditRequest { path: w.req.path.clone(), access: w.req.access, source: w.source.into(), rationale: None, pid: w.pid, uid: w.uid });
        self.audit.record(&e);
        let reply = if approve {
            // The approval is trusted state now: the twin decides again with it.
            let start = Instant::now();
            let d = self.twin(&w.user).await?.decide(&w.session, &w.req).await;
            // A vote that asks the user has its answer now; a vote that denies still denies.
            let answered = d.granted() || d.votes.iter().all(|v| v.verdict != Verdict::Deny);
            let granted = answered && self.apply_grant(&w.session, w.target, &w.req);
            self.account(&w.session, &d, granted, false);
            let outcome = if granted { "user_approved" } else { "deny" };
            self.audit_decision(&w.session, &w.req, w.source, w.pid, w.uid, &d, outcome, start, Some(q));
            let reason = if granted { "the user approved".to_string() } else { deny_reason(&d) };
            decision_reply(granted, outcome, reason, Some(q))
        } else {
            if let Some(s) = self.sessions.get_mut(&w.session) {
                s.counters.denials += 1;
            }
            decision_reply(false, "user_denied", "the user denied the request".into(), Some(q))
        };
        for tx in w.waiters {
            let _ = tx.send(reply.clone());
        }
        self.persist();
        Ok(CallResult::Now(Reply::Ok { message: format!("question {q} {}", if approve { "approved" } else { "denied" }) }))
    }

    fn wait_timed_out(&mut self, q: u64) {
        let Some(w) = self.waiting.get_mut(&q) else { return };
        w.waiters.retain(|t| !t.is_closed());
        let session = w.session.clone();
        let req = AuditRequest { path: w.req.path.clone(), access: w.req.access, source: w.source.into(), rationale: None, pid: w.pid, uid: w.uid };
        if let Some(s) = self.sessions.get_mut(&session) {
            s.counters.denials += 1;
            let mut e = AuditEntry::new(Event::EscalationTimeout);
            e.session = Some(session);
            e.owner_uid = Some(s.owner_uid);
            e.question = Some(q);
            e.outcome = Some("timeout".into());
            e.request = Some(req);
            e.detail = Some("the user did not answer in time; the worker's request was denied (the question stays pending)".into());
            self.audit.record(&e);
        }
    }

    /// Inserts a grant; a kernel error is logged and makes the request a denial.
    fn apply_grant(&mut self, session: &str, target: Target, req: &Request) -> bool {
        let Some(s) = self.sessions.get_mut(session) else { return false };
        match self.enforcer.grant(s.cgroup_id, target.id, Scope::Exact, target.access) {
            Ok(()) => {
                s.grants.push((req.path.clone(), req.access));
                true
            }
            Err(e) => {
                tracing::error!(session, error = %chain(&e), "grant could not be inserted; denying");
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
                (Outcome::Escalate { .. }, false) => s.counters.escalations += 1,
                _ => s.counters.denials += 1,
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn audit_decision(&self, session: &str, req: &Request, source: &str, pid: u32, uid: u32, d: &Decision, outcome: &str, start: Instant, q: Option<u64>) {
        let Some(s) = self.sessions.get(session) else { return };
        let mut e = self.entry(Event::Decision, s);
        e.request = Some(AuditRequest { path: req.path.clone(), access: req.access, source: source.into(), rationale: req.rationale.clone(), pid, uid });
        e.outcome = Some(outcome.into());
        e.votes = d.votes.iter().map(|v| AuditVote { verdict: v.verdict, reason: v.reason.clone() }).collect();
        e.decider = Some(self.decider.name().to_string());
        let mut t = super::protocol::Tokens::default();
        t += d.tokens;
        e.tokens = Some(t);
        e.latency_ms = Some(start.elapsed().as_secs_f64() * 1000.0);
        e.question = q;
        self.audit.record(&e);
    }

    #[allow(clippy::too_many_arguments)]
    fn audit_unresolved(&mut self, session: &str, path: &str, access: Access, source: &str, pid: u32, uid: u32, why: &str) {
        let Some(s) = self.sessions.get_mut(session) else { return };
        s.counters.requests += 1;
        s.counters.denials += 1;
        let mut e = AuditEntry::new(if source == "miss" { Event::Miss } else { Event::Decision });
        e.session = Some(s.id.clone());
        e.owner_uid = Some(s.owner_uid);
        e.request = Some(AuditRequest { path: path.into(), access, source: source.into(), rationale: None, pid, uid });
        e.outcome = Some("deny".into());
        e.detail = Some(why.into());
        self.audit.record(&e);
    }

    /// Decides one request and applies the outcome.
    #[allow(clippy::too_many_arguments)]
    async fn decide(&mut self, session: &str, req: Request, target: Target, source: &'static str, pid: u32, uid: u32, waiter: bool) -> CallResult {
        let user = self.sessions[session].user.clone();
        let start = Instant::now();
        let d = match self.twin(&user).await {
            Ok(t) => t.decide(session, &req).await,
            Err((_, msg)) => {
                self.audit_unresolved(session, &req.path, req.access, source, pid, uid, &msg);
                return CallResult::Now(decision_reply(false, "deny", msg, None));
            }
        };
        match d.outcome {
            Outcome::Grant => {
                let granted = self.apply_grant(session, target, &req);
                self.account(session, &d, granted, true);
                let outcome = if granted { "grant" } else { "deny" };
                self.audit_decision(session, &req, source, pid, uid, &d, outcome, start, None);
                self.persist();
                let reason = if granted { "all three votes allow".to_string() } else { "the grant could not be inserted in the kernel".to_string() };
                CallResult::Now(decision_reply(granted, outcome, reason, None))
            }
            Outcome::Deny => {
                self.account(session, &d, false, true);
                self.audit_decision(session, &req, source, pid, uid, &d, "deny", start, None);
                self.persist();
                CallResult::Now(decision_reply(false, "deny", deny_reason(&d), None))
            }
            Outcome::Escalate { question } => {
                self.account(session, &d, false, true);
                let q = match self.global_question(&user, question) {
                    Some(q) => q,
                    None => {
                        let q = self.next_question;
                        self.next_question += 1;
                        self.waiting.insert(
                            q,
                            Waiting { user: user.clone(), twin_question: question, session: session.into(), req: req.clone(), target, source, pid, uid, waiters: vec![] },
                        );
                        q
                    }
                };
                self.audit_decision(session, &req, source, pid, uid, &d, "escalate", start, Some(q));
                self.persist();
                if !waiter {
                    return CallResult::Now(decision_reply(false, "escalate", deny_reason(&d), Some(q)));
                }
                let (tx, rx) = oneshot::channel();
                self.waiting.get_mut(&q).expect("inserted").waiters.push(tx);
                CallResult::Wait { rx, question: q }
            }
        }
    }

    async fn request(&mut self, session: &str, peer: &Peer, path: &str, access: Access, reason: Option<String>) -> CallResult {
        let roots = self.sessions[session].roots();
        let r = match resolve::resolve(&roots, path, access) {
            Ok(r) => r,
            Err(e) => {
                let why = e.to_string();
                self.audit_unresolved(session, path, access, "tool", peer.pid, peer.uid, &why);
                return CallResult::Now(decision_reply(false, "deny", why, None));
            }
        };
        let req = Request { path: r.rel, access, rationale: reason, content: r.content };
        self.decide(session, req, Target { id: r.target, access }, "tool", peer.pid, peer.uid, true).await
    }

    async fn miss(&mut self, m: Miss) {
        let Some(s) = self.sessions.values_mut().find(|s| s.cgroup_id == m.session) else {
            let mut e = AuditEntry::new(Event::Miss);
            e.detail = Some(format!("miss of unknown session cgroup {} ({} {})", m.session, m.hook, m.relative_path.display()));
            self.audit.record(&e);
            return;
        };
        s.counters.misses += 1;
        let id = s.id.clone();
        let root = s.roots.iter().find(|r| r.dev == m.root_dev && r.ino == m.root_ino).cloned();
        let dir = m.access.contains(&Access::List) || matches!(m.hook, "inode_mkdir" | "inode_rmdir");
        let (rel, root) = match root {
            Some(r) if !m.walk_exhausted() && !m.relative_path.as_os_str().is_empty() => {
                let mut rel = String::new();
                if !r.label.is_empty() {
                    rel.push_str(&r.label);
                    rel.push('/');
                }
                rel.push_str(&m.relative_path.to_string_lossy());
                if dir {
                    rel.push('/');
                }
                (rel, r)
            }
            _ => {
                for a in &m.access {
                    self.audit_unresolved(&id, &m.relative_path.to_string_lossy(), *a, "miss", m.pid, m.uid, "the object's protected root is unknown (walk out of bound); denied");
                }
                return;
            }
        };
        if self.config.on_miss == OnMiss::Record {
            let s = &self.sessions[&id];
            for a in &m.access {
                let mut e = self.entry(Event::Miss, s);
                e.request = Some(AuditRequest { path: rel.clone(), access: *a, source: "miss".into(), rationale: None, pid: m.pid, uid: m.uid });
                e.outcome = Some("deny".into());
                e.detail = Some(format!("denied by the kernel ({}); recorded only (on_miss = \"record\")", m.hook));
                self.audit.record(&e);
            }
            self.persist();
            return;
        }
        for a in m.access.clone() {
            let target = if a == Access::Create {
                Target { id: ObjectId { dev: m.parent_dev, ino: m.parent_ino }, access: a }
            } else {
                Target { id: ObjectId { dev: m.dev, ino: m.ino }, access: a }
            };
            let mut content = None;
            if matches!(a, Access::Read | Access::Write | Access::Delete) {
                let full = root.path.join(&m.relative_path);
                if let Ok(r) = resolve::resolve(&[root.root()], &full.to_string_lossy(), a) {
                    if r.target == target.id {
                        content = r.content;
                    }
                }
            }
            let req = Request { path: rel.clone(), access: a, rationale: None, content };
            let _ = self.decide(&id, req, target, "miss", m.pid, m.uid, false).await;
        }
    }
}
