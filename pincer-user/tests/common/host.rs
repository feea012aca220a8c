//! One daemon on the host as the daemon tests drive it: its own folder (state, socket, audit
//! log, session cgroups as plain directories), a copy of the persona's workspace, the shipped
//! enforcer over maps in memory, a caller cgroup the test sets, and kernel misses the test
//! sends. `daemon_flow.rs` uses one; `fleet.rs` runs several on one database.

use super::{config_in, persona_state, persona_workspace, start_daemon, OUTSIDE};
use pincer::daemon::audit::{read_entries, AuditEntry};
use pincer::daemon::client::Client;
use pincer::daemon::config::Config;
use pincer::daemon::peer::CgroupLookup;
use pincer::daemon::protocol::{ApprovalScope, QuestionInfo, RequestOutcome, Rule, RuleId, SessionInfo, StandingRule};
use pincer::daemon::{Call, Reply};
use pincer::kernel::{KernelEvent, MemoryMaps, Miss};
use pincer::Access;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot};

/// A daemon on a temporary socket with its enforcer's maps in memory and a settable caller
/// cgroup.
pub struct Host {
    /// The host's folder (state, socket, audit log, workspace).
    pub dir: tempfile::TempDir,
    /// The persona's workspace, copied into `dir`.
    pub ws: PathBuf,
    /// The daemon's configuration.
    pub config: Config,
    /// The sanitizer's key.
    pub key: [u8; 32],
    /// The enforcer's maps.
    pub maps: MemoryMaps,
    caller: Arc<Mutex<PathBuf>>,
    /// Where the test sends kernel events (while the daemon runs).
    pub events: Option<mpsc::Sender<KernelEvent>>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Host {
    /// A daemon on [`config_in`] its own folder, without scratch directories (they add a
    /// grant of their own: the test that checks them turns them on), changed by `tweak`,
    /// started.
    pub async fn new(tweak: impl FnOnce(&mut Config)) -> Host {
        Self::new_in(tempfile::tempdir().unwrap(), tweak).await
    }

    /// As [`Host::new`], in `dir`.
    pub async fn new_in(dir: tempfile::TempDir, tweak: impl FnOnce(&mut Config)) -> Host {
        let ws = persona_workspace(dir.path());
        let mut config = config_in(dir.path());
        config.containment.scratch = false;
        config.containment.scratch_parent = dir.path().to_path_buf();
        tweak(&mut config);
        let mut h = Host {
            dir,
            ws,
            config,
            key: [7; 32],
            maps: MemoryMaps::default(),
            caller: Arc::new(Mutex::new(PathBuf::from(OUTSIDE))),
            events: None,
            stop: None,
            task: None,
        };
        h.start();
        h
    }

    /// Starts the daemon (again) on the host's configuration and maps.
    pub fn start(&mut self) {
        let caller = self.caller.clone();
        let lookup: CgroupLookup = Arc::new(move |_pid| Ok(caller.lock().unwrap().clone()));
        let (mtx, mrx) = mpsc::channel(16);
        let daemon = start_daemon(&self.config, self.maps.enforcer(), lookup, self.key, Some(mrx));
        self.task = Some(daemon.task);
        self.events = Some(mtx);
        self.stop = Some(daemon.stop);
    }

    /// Stops the daemon and waits until it ended.
    pub async fn shutdown(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.task.take() {
            t.await.unwrap();
        }
    }

    /// Stops the daemon and starts it again.
    pub async fn restart(&mut self) {
        self.shutdown().await;
        self.start();
    }

    /// Sends a kernel event (a miss or a reach denial).
    pub async fn event(&self, e: KernelEvent) {
        self.events.as_ref().expect("the daemon runs").send(e).await.unwrap();
    }

    /// Sends a kernel miss.
    pub async fn miss(&self, m: Miss) {
        self.events.as_ref().expect("the daemon runs").send(KernelEvent::Miss(m)).await.unwrap();
    }

    /// Makes the next connections come from `cgroup`.
    pub fn as_caller(&self, cgroup: &Path) {
        *self.caller.lock().unwrap() = cgroup.to_path_buf();
    }

    /// One call on a new connection (waiting for the daemon to bind its socket).
    pub async fn call(&self, call: Call) -> Reply {
        for _ in 0..200 {
            if let Ok(mut c) = Client::connect(&self.config.socket).await {
                return c.call(call).await.unwrap();
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("daemon at {} does not answer", self.config.socket.display());
    }

    /// Imports the persona's history and policies for the caller (root).
    pub async fn import(&self) {
        self.as_caller(Path::new(OUTSIDE));
        let (history, policies) = persona_state();
        let r = self.call(Call::Import { history, policies, uid: None, workspace: None }).await;
        assert!(matches!(r, Reply::Ok { .. }), "{r:?}");
    }

    /// A new session of root's over the workspace.
    pub async fn session(&self, prompt: &str) -> SessionInfo {
        self.as_caller(Path::new(OUTSIDE));
        match self.call(Call::CreateSession { owner_uid: 0, roots: vec![self.ws.clone()], prompt: prompt.into(), mode: Default::default() }).await {
            Reply::Session(s) => s,
            other => panic!("create_session: {other:?}"),
        }
    }

    /// `s`'s worker asks for `access` on `rel` through the request tool, giving `reason`.
    pub async fn request_because(&self, s: &SessionInfo, rel: &str, access: Access, reason: &str) -> Reply {
        self.as_caller(&s.cgroup);
        let r = self.call(Call::Request { path: self.ws.join(rel).to_string_lossy().into(), access, reason: Some(reason.into()), session: None }).await;
        self.as_caller(Path::new(OUTSIDE));
        r
    }

    /// `s`'s worker asks for `access` on `rel` because the task needs it.
    pub async fn request(&self, s: &SessionInfo, rel: &str, access: Access) -> Reply {
        self.request_because(s, rel, access, "needed for the task").await
    }

    /// The host's audit log (the spool, in a fleet).
    pub fn audit(&self) -> Vec<AuditEntry> {
        read_entries(&self.config.audit_log).unwrap()
    }

    /// The caller's standing approvals and policies.
    pub async fn standing(&self) -> Vec<StandingRule> {
        self.as_caller(Path::new(OUTSIDE));
        match self.call(Call::Rules).await {
            Reply::Rules { rules } => rules,
            other => panic!("rules: {other:?}"),
        }
    }

    /// The questions the caller may answer.
    pub async fn pending(&self) -> Vec<QuestionInfo> {
        self.as_caller(Path::new(OUTSIDE));
        match self.call(Call::Pending).await {
            Reply::Pending { questions } => questions,
            other => panic!("pending: {other:?}"),
        }
    }

    /// Ends session `s`.
    pub async fn end(&self, s: &SessionInfo) {
        self.as_caller(Path::new(OUTSIDE));
        assert!(matches!(self.call(Call::EndSession { session: s.session.clone() }).await, Reply::Summary { .. }));
    }

    /// `s`'s worker asks for `access` on `rel` on a connection of its own, and waits for the
    /// answer on it (the returned client).
    pub async fn ask_and_wait(&self, s: &SessionInfo, rel: &str, access: Access) -> Client {
        self.as_caller(&s.cgroup);
        let mut worker = Client::connect(&self.config.socket).await.unwrap();
        // The worker's connection is placed in its session by its first call.
        assert!(matches!(worker.call(Call::Status { session: None }).await.unwrap(), Reply::Session(_)));
        worker
            .send(Call::Request { path: self.ws.join(rel).to_string_lossy().into(), access, reason: Some("needed for the task".into()), session: None })
            .await
            .unwrap();
        self.as_caller(Path::new(OUTSIDE));
        worker
    }

    /// `s`'s worker asks for `access` on `rel`; the request goes to the user, who approves it
    /// with `scope` on this host; returns the answer the waiting worker gets.
    pub async fn approve_waiting(&self, s: &SessionInfo, rel: &str, access: Access, scope: ApprovalScope) -> Reply {
        let mut worker = self.ask_and_wait(s, rel, access).await;
        let q = eventually("a waiting question", || async { self.pending().await.into_iter().find(|q| q.waiting && q.path == rel) }).await;
        match self.call(Call::Answer { question: q.id, approve: true, scope, host: None }).await {
            Reply::Ok { .. } => {}
            other => panic!("answer: {other:?}"),
        }
        worker.next().await.unwrap().unwrap()
    }

    /// The first of [`UNRELATED`] the twin does not grant to `s` on its own when its write is
    /// asked for once (`after_denials` must be 1, so a denial is no question yet and the next
    /// ask is; a rule that asks the user makes it a question at once, unanswered until the
    /// timeout).
    pub async fn denied_on_its_own(&self, s: &SessionInfo) -> &'static str {
        for rel in UNRELATED {
            // Plain content, so that what the file says plays no part in the decisions.
            std::fs::write(self.ws.join(rel), "plain text\n").unwrap();
            match self.request_because(s, rel, Access::Write, "have a look").await {
                Reply::Decision { granted: false, outcome: RequestOutcome::Deny | RequestOutcome::Timeout, .. } => return rel,
                Reply::Decision { .. } => continue,
                other => panic!("{other:?}"),
            }
        }
        panic!("the twin granted every one of {UNRELATED:?}");
    }

    /// A kernel miss of a read of `rel` by `pid` in session `s`.
    pub fn read_miss(&self, s: &SessionInfo, rel: &str, pid: u32) -> Miss {
        read_miss(&self.ws, s, rel, pid)
    }
}

/// Writes the twin might not grant on its own for [`TODO_PROMPT`](super::TODO_PROMPT) (no
/// file is secret or has a rule that asks or denies): the first one it denies is the one a
/// test approves.
pub const UNRELATED: &[&str] = &[
    "dotfiles/gitconfig",
    "projects/notifier/README.md",
    "projects/notifier/notifier/templates.py",
    "projects/notifier/tests/test_sender.py",
    "projects/ledger/README.md",
    "projects/ledger/src/cli.rs",
    "notes/standup.md",
];

/// A kernel miss of a read of `rel` (under workspace `ws`) by `pid` in session `s`, with the
/// objects the kernel would name: the file, its folder and the root.
pub fn read_miss(ws: &Path, s: &SessionInfo, rel: &str, pid: u32) -> Miss {
    Miss::read_under(ws, rel, s.cgroup_id, 1000, pid).unwrap()
}

/// Polls `f` (up to about fifteen seconds) until it gives a value.
pub async fn eventually<T, F: std::future::Future<Output = Option<T>>>(what: &str, mut f: impl FnMut() -> F) -> T {
    for _ in 0..1500 {
        if let Some(v) = f().await {
            return v;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("gave up waiting for {what}");
}

/// Whether `r` is a granting decision.
pub fn granted(r: &Reply) -> bool {
    matches!(r, Reply::Decision { granted: true, .. })
}

/// The standing approval of `access` on `rel` among `rules`, if there is one.
pub fn approval_of(rules: &[StandingRule], rel: &str, access: Access) -> Option<RuleId> {
    rules.iter().find(|r| matches!(&r.rule, Rule::Approval(a) if a.path_glob == rel && a.access == access)).map(|r| r.id)
}
