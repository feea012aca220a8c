//! The daemon's actor never waits on a decider: a decision (or a pre-committed policy) that
//! takes long holds up its own session only, and a decider that fails still denies. The
//! slow decider here holds its calls at a gate the test opens, so every test states an
//! order of events (this reply came while that call was still held), never a duration.

use pincer::daemon::audit::{read_entries, Event};
use pincer::daemon::client::Client;
use pincer::daemon::config::Config;
use pincer::daemon::peer::CgroupLookup;
use pincer::daemon::protocol::{SessionInfo, SessionMode};
use pincer::daemon::{Call, Reply};
use pincer::decider::{Decider, DeciderError, OfflineDecider, PolicyAnswer, PolicyInput, TokenUsage, Vote1Input, Vote2Input, VoteOutcome};
use pincer::kernel::{KernelEvent, MemoryMaps, Miss, ObjectId};
use pincer::Access;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot, watch, Barrier};

use crate::common;
use common::{config_in, persona_state, persona_workspace, start_daemon_with, OUTSIDE, TODO_PROMPT};

/// What the test decider does to the calls of sessions whose prompt holds [`MARK`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Votes 1 and 2 wait at the gate.
    SlowVotes,
    /// The pre-committed policy waits at the gate.
    SlowPolicy,
    /// Vote 2 fails (as a model that times out does).
    FailingVote,
    /// The pre-committed policy fails.
    FailingPolicy,
    /// Votes 1 and 2 each wait for the other to have begun: only votes cast together pass.
    Together,
}

/// Marks the sessions the test decider treats as [`Mode`] says (any other session is
/// decided by the offline decider at once).
const MARK: &str = "Take your time.";

/// A gate that holds calls until it is opened, counting the calls that wait at it and the
/// calls dropped while they waited (their task was aborted).
struct Gate {
    open: watch::Sender<bool>,
    waiting: watch::Sender<usize>,
    dropped: watch::Sender<usize>,
}

impl Gate {
    fn new() -> Arc<Self> {
        Arc::new(Gate { open: watch::channel(false).0, waiting: watch::channel(0).0, dropped: watch::channel(0).0 })
    }

    async fn pass(&self) {
        struct Held<'a>(&'a Gate, bool);
        impl Drop for Held<'_> {
            fn drop(&mut self) {
                if !self.1 {
                    self.0.dropped.send_modify(|n| *n += 1);
                }
            }
        }
        let mut open = self.open.subscribe();
        let mut held = Held(self, false);
        self.waiting.send_modify(|n| *n += 1);
        open.wait_for(|o| *o).await.unwrap();
        held.1 = true;
    }

    fn open(&self) {
        self.open.send_replace(true);
    }

    /// Waits until `n` calls wait (or waited) at the gate.
    async fn waiting(&self, n: usize) {
        self.waiting.subscribe().wait_for(|w| *w >= n).await.unwrap();
    }

    /// Waits until `n` held calls were dropped.
    async fn dropped(&self, n: usize) {
        self.dropped.subscribe().wait_for(|d| *d >= n).await.unwrap();
    }
}

struct TestDecider {
    offline: OfflineDecider,
    mode: Mode,
    gate: Arc<Gate>,
    together: Barrier,
}

fn marked(input: &Vote1Input<'_>) -> bool {
    input.session.prompts.iter().any(|p| p.as_str().contains(MARK))
}

fn failure() -> DeciderError {
    DeciderError::Timeout { backend: "test", secs: 2.0 }
}

#[async_trait::async_trait]
impl Decider for TestDecider {
    fn name(&self) -> &str {
        "test"
    }

    async fn vote1(&self, input: &Vote1Input<'_>) -> VoteOutcome {
        if marked(input) {
            match self.mode {
                Mode::SlowVotes => self.gate.pass().await,
                Mode::Together => {
                    self.together.wait().await;
                }
                _ => {}
            }
        }
        self.offline.vote1(input).await
    }

    async fn vote2(&self, input: &Vote2Input<'_>) -> VoteOutcome {
        if marked(&input.v1) {
            match self.mode {
                Mode::SlowVotes => self.gate.pass().await,
                Mode::Together => {
                    self.together.wait().await;
                }
                Mode::FailingVote => return VoteOutcome::failed(&failure(), TokenUsage::default()),
                _ => {}
            }
        }
        self.offline.vote2(input).await
    }

    async fn policy(&self, input: &PolicyInput<'_>) -> Result<PolicyAnswer, DeciderError> {
        if input.prompt.contains(MARK) {
            match self.mode {
                Mode::SlowPolicy => self.gate.pass().await,
                Mode::FailingPolicy => return Err(failure()),
                _ => {}
            }
        }
        self.offline.policy(input).await
    }
}

/// A daemon with the test decider, its enforcer's maps in memory, and callers placed in
/// the cgroup each connection is opened for.
struct Harness {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    config: Config,
    maps: MemoryMaps,
    gate: Arc<Gate>,
    caller: Arc<Mutex<PathBuf>>,
    misses: mpsc::Sender<KernelEvent>,
    _stop: oneshot::Sender<()>,
}

impl Harness {
    async fn new(mode: Mode) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ws = persona_workspace(dir.path());
        let mut config = config_in(dir.path());
        config.containment.scratch = false;
        config.containment.scratch_parent = dir.path().to_path_buf();
        let maps = MemoryMaps::default();
        let gate = Gate::new();
        let decider = Arc::new(TestDecider { offline: OfflineDecider::new(), mode, gate: gate.clone(), together: Barrier::new(2) });
        let caller = Arc::new(Mutex::new(PathBuf::from(OUTSIDE)));
        let at = caller.clone();
        let lookup: CgroupLookup = Arc::new(move |_pid| Ok(at.lock().unwrap().clone()));
        let (misses, mrx) = mpsc::channel(16);
        let daemon = start_daemon_with(&config, maps.enforcer(), lookup, [7; 32], Some(mrx), decider);
        let h = Harness { _dir: dir, ws, config, maps, gate, caller, misses, _stop: daemon.stop };
        let (history, policies) = persona_state();
        let r = h.outside().await.call(Call::Import { history, policies, uid: None, workspace: None }).await.unwrap();
        assert!(matches!(r, Reply::Ok { .. }), "{r:?}");
        h
    }

    /// A connection whose caller is in `cgroup` (identified before this returns).
    async fn client_in(&self, cgroup: &Path) -> Client {
        *self.caller.lock().unwrap() = cgroup.to_path_buf();
        let mut c = Client::connect(&self.config.socket).await.unwrap();
        // The caller is identified when the connection is served: a first call pins it.
        let pin = if cgroup == Path::new(OUTSIDE) { Call::Sessions } else { Call::Status { session: None } };
        let r = c.call(pin).await.unwrap();
        assert!(!matches!(r, Reply::Error { .. }), "{r:?}");
        c
    }

    async fn worker(&self, s: &SessionInfo) -> Client {
        self.client_in(&s.cgroup).await
    }

    async fn outside(&self) -> Client {
        self.client_in(Path::new(OUTSIDE)).await
    }

    async fn session(&self, prompt: &str) -> SessionInfo {
        match self.outside().await.call(create(&self.ws, prompt)).await.unwrap() {
            Reply::Session(s) => s,
            other => panic!("create_session: {other:?}"),
        }
    }

    fn request(&self, rel: &str, access: Access) -> Call {
        Call::Request { path: self.ws.join(rel).to_string_lossy().into(), access, reason: Some("the task needs it".into()), session: None }
    }

    async fn status(&self, s: &SessionInfo) -> SessionInfo {
        match self.outside().await.call(Call::Status { session: Some(s.session.clone()) }).await.unwrap() {
            Reply::Session(info) => info,
            other => panic!("status: {other:?}"),
        }
    }

    fn read_miss(&self, s: &SessionInfo, rel: &str, pid: u32) -> Miss {
        common::host::read_miss(&self.ws, s, rel, pid)
    }
}

/// Awaits `f`, which an actor that waited on the held decider would never complete: the
/// bound only turns such a hang into a failure, and is far beyond any wait of a passing run.
async fn unheld<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(std::time::Duration::from_secs(60), f).await.unwrap_or_else(|_| panic!("{what}: no answer; it waits on a held decider call"))
}

fn create(ws: &Path, prompt: &str) -> Call {
    Call::CreateSession { owner_uid: 0, roots: vec![ws.to_path_buf()], prompt: prompt.into(), mode: SessionMode::default() }
}

fn slow_prompt() -> String {
    format!("{TODO_PROMPT} {MARK}")
}

fn granted(r: &Reply) -> bool {
    matches!(r, Reply::Decision { granted: true, .. })
}

fn file(h: &Harness, rel: &str) -> ObjectId {
    ObjectId::of_path(&h.ws.join(rel)).unwrap()
}

#[tokio::test]
async fn a_request_in_one_session_is_answered_while_another_sessions_decision_is_held() {
    let h = Harness::new(Mode::SlowVotes).await;
    let slow = h.session(&slow_prompt()).await;
    let fast = h.session(TODO_PROMPT).await;
    let (mut in_slow, mut in_fast) = (h.worker(&slow).await, h.worker(&fast).await);
    let held = tokio::spawn({
        let call = h.request("notes/todo.md", Access::Read);
        async move { in_slow.call(call).await.unwrap() }
    });
    unheld("the held call", h.gate.waiting(1)).await;
    let r = unheld("the other session's request", in_fast.call(h.request("notes/todo.md", Access::Read))).await.unwrap();
    assert!(granted(&r), "{r:?}");
    assert!(h.maps.has(fast.cgroup_id, file(&h, "notes/todo.md"), Access::Read));
    assert!(!held.is_finished(), "the held session's request is still being decided");
    assert!(!h.maps.has(slow.cgroup_id, file(&h, "notes/todo.md"), Access::Read));
    h.gate.open();
    let r = held.await.unwrap();
    assert!(granted(&r), "{r:?}");
    assert!(h.maps.has(slow.cgroup_id, file(&h, "notes/todo.md"), Access::Read), "the grant is in before the reply");
}

#[tokio::test]
async fn misses_of_one_object_while_its_decision_is_held_are_decided_once() {
    let h = Harness::new(Mode::SlowVotes).await;
    let slow = h.session(&slow_prompt()).await;
    let fast = h.session(TODO_PROMPT).await;
    h.misses.send(KernelEvent::Miss(h.read_miss(&slow, "notes/todo.md", 4242))).await.unwrap();
    unheld("the held call", h.gate.waiting(1)).await;
    for pid in [4242, 4243, 4244] {
        h.misses.send(KernelEvent::Miss(h.read_miss(&slow, "notes/todo.md", pid))).await.unwrap();
    }
    // The other session is served meanwhile (and its status call comes after the misses).
    let mut in_fast = unheld("a connection of the other session", h.worker(&fast)).await;
    assert!(granted(&unheld("the other session's request", in_fast.call(h.request("notes/todo.md", Access::Read))).await.unwrap()));
    let info = h.status(&slow).await;
    assert_eq!((info.counters.misses, info.counters.requests), (4, 0), "four misses seen, none decided yet: {info:?}");
    h.gate.open();
    let file = file(&h, "notes/todo.md");
    for _ in 0..1000 {
        if h.maps.has(slow.cgroup_id, file, Access::Read) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(h.maps.has(slow.cgroup_id, file, Access::Read));
    let info = h.status(&slow).await;
    assert_eq!((info.counters.misses, info.counters.requests, info.counters.grants), (4, 1, 1), "one decision for four misses: {info:?}");
    let decisions = read_entries(&h.config.audit_log).unwrap().into_iter().filter(|e| e.event == Event::Decision && e.session.as_deref() == Some(&slow.session)).count();
    assert_eq!(decisions, 1);
}

#[tokio::test]
async fn ending_a_session_drops_its_decision_in_flight_and_grants_nothing() {
    let h = Harness::new(Mode::SlowVotes).await;
    let slow = h.session(&slow_prompt()).await;
    let mut in_slow = h.worker(&slow).await;
    let held = tokio::spawn({
        let call = h.request("notes/todo.md", Access::Read);
        async move { in_slow.call(call).await.unwrap() }
    });
    unheld("votes 1 and 2 both held", h.gate.waiting(2)).await;
    let r = unheld("the end of the session", async { h.outside().await.call(Call::EndSession { session: slow.session.clone() }).await.unwrap() }).await;
    assert!(matches!(r, Reply::Summary { .. }), "{r:?}");
    match held.await.unwrap() {
        Reply::Decision { granted: false, reason, .. } => assert!(reason.contains("the session ended"), "{reason}"),
        other => panic!("{other:?}"),
    }
    // The decider call was aborted: its votes never come back to be applied.
    unheld("the held calls aborted", h.gate.dropped(2)).await;
    h.gate.open();
    assert!(!h.maps.has(slow.cgroup_id, file(&h, "notes/todo.md"), Access::Read));
    assert_eq!(h.maps.grant_count(slow.cgroup_id), 0);
}

#[tokio::test]
async fn a_session_whose_policy_is_being_made_holds_up_no_other_session() {
    let h = Harness::new(Mode::SlowPolicy).await;
    let fast = h.session(TODO_PROMPT).await;
    let mut creator = h.outside().await;
    let creating = tokio::spawn({
        let call = create(&h.ws, &slow_prompt());
        async move { creator.call(call).await.unwrap() }
    });
    unheld("the held call", h.gate.waiting(1)).await;
    let mut in_fast = unheld("a connection of the other session", h.worker(&fast)).await;
    assert!(granted(&unheld("the other session's request", in_fast.call(h.request("notes/todo.md", Access::Read))).await.unwrap()));
    assert!(!creating.is_finished(), "the new session waits for its pre-committed policy");
    // The starting session exists, and its requests are denied until its policy is in.
    let starting = match h.outside().await.call(Call::Sessions).await.unwrap() {
        Reply::Sessions { sessions } => sessions.into_iter().find(|s| s.session != fast.session).expect("the starting session is listed"),
        other => panic!("{other:?}"),
    };
    let mut early = h.worker(&starting).await;
    match early.call(h.request("notes/todo.md", Access::Read)).await.unwrap() {
        Reply::Decision { granted: false, reason, .. } => assert!(reason.contains("refused"), "{reason}"),
        other => panic!("{other:?}"),
    }
    h.gate.open();
    let s = match creating.await.unwrap() {
        Reply::Session(s) => s,
        other => panic!("{other:?}"),
    };
    assert_eq!(s.session, starting.session);
    assert!(s.policy_entries > 0, "{s:?}");
    assert!(granted(&early.call(h.request("notes/todo.md", Access::Read)).await.unwrap()));
}

#[tokio::test]
async fn a_vote_the_decider_fails_denies_what_it_would_grant() {
    let h = Harness::new(Mode::FailingVote).await;
    let failing = h.session(&slow_prompt()).await;
    let fine = h.session(TODO_PROMPT).await;
    assert!(granted(&h.worker(&fine).await.call(h.request("notes/todo.md", Access::Read)).await.unwrap()));
    match h.worker(&failing).await.call(h.request("notes/todo.md", Access::Read)).await.unwrap() {
        Reply::Decision { granted: false, reason, .. } => assert!(reason.contains("vote 2 denies: the decider failed (fail closed)"), "{reason}"),
        other => panic!("{other:?}"),
    }
    assert!(!h.maps.has(failing.cgroup_id, file(&h, "notes/todo.md"), Access::Read));
}

#[tokio::test]
async fn a_policy_the_decider_fails_to_make_denies_the_sessions_requests() {
    let h = Harness::new(Mode::FailingPolicy).await;
    let failing = h.session(&slow_prompt()).await;
    assert_eq!(failing.policy_entries, 0);
    match h.worker(&failing).await.call(h.request("notes/todo.md", Access::Read)).await.unwrap() {
        Reply::Decision { granted: false, reason, .. } => assert!(reason.contains("vote 3 denies"), "{reason}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(h.maps.grant_count(failing.cgroup_id), 0);
}

#[tokio::test]
async fn votes_one_and_two_are_cast_together() {
    let h = Harness::new(Mode::Together).await;
    let s = h.session(&slow_prompt()).await;
    // Each vote waits for the other to begin: cast one after the other, neither would end.
    let mut worker = h.worker(&s).await;
    let r = unheld("votes that wait for each other", worker.call(h.request("notes/todo.md", Access::Read))).await;
    assert!(granted(&r.unwrap()), "votes 1 and 2 run concurrently");
}
