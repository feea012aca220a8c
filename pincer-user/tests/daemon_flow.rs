//! The daemon end to end on the host: socket protocol, peer checks, twin decisions, kernel
//! grants (the shipped enforcer over maps in memory: this host's kernel refuses LSM programs;
//! the real kernel is exercised by the VM tests in `tests/tests/e2e_*.rs`), escalation, misses,
//! revocation at the end, audit, and resumption after a restart.

use pincer::daemon::audit::{Event, Source};
use pincer::daemon::client::Client;
use pincer::daemon::config::OnMiss;
use pincer::daemon::contain::NeverRule;
use pincer::daemon::protocol::{ApprovalScope, ErrorKind, RequestOutcome, Rule, RuleId, SessionInfo, SessionMode, StandingRule};
use pincer::daemon::{Call, Reply};
use pincer::kernel::{Hook, KernelEvent, ObjectId, Reach, ReachDenial, Scope};
use pincer::Access;
use std::path::{Path, PathBuf};

use crate::common;
use common::host::{approval_of, eventually, granted, Host};
use common::{OUTSIDE, PERSONA, TODO_PROMPT};

fn refused(r: &Reply) -> bool {
    matches!(r, Reply::Error { kind: ErrorKind::Refused, .. })
}


#[tokio::test]
async fn request_tool_grants_a_task_resource_into_the_kernel_and_denies_a_secret() {
    let h = Host::new(|_| {}).await;
    h.import().await;
    let s = h.session(TODO_PROMPT).await;
    assert!(s.cgroup.is_dir(), "the session's cgroup exists");
    assert!(h.maps.session(s.cgroup_id).is_some(), "session gated before the worker starts");
    let generation = h.maps.policy_generation();
    let r = h.request_because(&s, "notes/todo.md", Access::Read, "read the todo list to update it").await;
    assert!(granted(&r), "{r:?}");
    let todo = ObjectId::of_path(&h.ws.join("notes/todo.md")).unwrap();
    assert!(h.maps.has(s.cgroup_id, todo, Access::Read), "grant inserted on the file's inode");
    assert_eq!(h.maps.policy_generation(), generation, "a grant keeps what the kernel cached");
    let r = h.request_because(&s, "secrets/prod.env", Access::Read, "the todo says to check this").await;
    assert!(!granted(&r), "{r:?}");
    let secret = ObjectId::of_path(&h.ws.join("secrets/prod.env")).unwrap();
    assert!(!h.maps.has(s.cgroup_id, secret, Access::Read));
    let audit = h.audit();
    let decisions: Vec<_> = audit.iter().filter(|e| e.event == Event::Decision).collect();
    assert_eq!(decisions.len(), 2);
    assert_eq!(decisions[0].outcome, Some(RequestOutcome::Grant));
    assert_eq!(decisions[0].votes.len(), 3, "each vote's verdict is audited");
    assert_eq!(decisions[0].decider.as_deref(), Some("offline"));
    assert!(decisions[0].latency_ms.is_some() && decisions[0].tokens.is_some());
    assert_eq!(decisions[1].outcome, Some(RequestOutcome::Deny));
}

#[tokio::test]
async fn bad_paths_are_denied_with_the_reason_and_never_granted() {
    let h = Host::new(|_| {}).await;
    h.import().await;
    let s = h.session(TODO_PROMPT).await;
    std::os::unix::fs::symlink(h.ws.join("secrets/prod.env"), h.ws.join("notes/link.md")).unwrap();
    for (path, want) in [
        (h.ws.join("notes/link.md").to_string_lossy().into_owned(), "symbolic link"),
        (format!("{}/notes/../secrets/prod.env", h.ws.display()), "`..`"),
        ("/etc/passwd".to_string(), "outside every protected root"),
        (format!("{}/notes/{}", h.ws.display(), "n".repeat(300)), "component"),
    ] {
        h.as_caller(&s.cgroup);
        let r = h.call(Call::Request { path, access: Access::Read, reason: None, session: None }).await;
        match r {
            Reply::Decision { granted: false, reason, .. } => assert!(reason.contains(want), "{reason} should mention {want}"),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(h.maps.grant_count(s.cgroup_id), 0);
}

#[tokio::test]
async fn gated_workers_cannot_make_control_calls_or_request_for_other_sessions() {
    let h = Host::new(|_| {}).await;
    h.import().await;
    let a = h.session(TODO_PROMPT).await;
    let b = h.session("Summarize my standup notes.").await;
    h.as_caller(&a.cgroup.join("nested"));
    for call in [
        Call::Answer { question: 1, approve: true, scope: Default::default(), host: None },
        Call::Prompt { session: Some(a.session.clone()), text: "also read secrets/prod.env".into() },
        Call::Pending,
        Call::EndSession { session: a.session.clone() },
        Call::CreateSession { owner_uid: 0, roots: vec![h.ws.clone()], prompt: "x".into(), mode: Default::default() },
        Call::Log { session: None, follow: false, host: None },
        Call::Status { session: Some(b.session.clone()) },
        Call::Request { path: h.ws.join("notes/todo.md").to_string_lossy().into(), access: Access::Read, reason: None, session: Some(b.session.clone()) },
    ] {
        let name = call.name();
        let r = h.call(call).await;
        assert!(refused(&r), "{name} from a gated worker must be refused: {r:?}");
    }
    // Its own status is allowed.
    assert!(matches!(h.call(Call::Status { session: None }).await, Reply::Session(s) if s.session == a.session));
    // A cgroup under the session parent that is no open session gets nothing.
    h.as_caller(&h.config.cgroup_parent.join("s-gone"));
    assert!(refused(&h.call(Call::Status { session: None }).await));
    // Requests come only from inside a session.
    h.as_caller(Path::new(OUTSIDE));
    let r = h.call(Call::Request { path: h.ws.join("notes/todo.md").to_string_lossy().into(), access: Access::Read, reason: None, session: None }).await;
    assert!(refused(&r), "{r:?}");
    let refusals = h.audit().iter().filter(|e| e.event == Event::Refusal).count();
    assert_eq!(refusals, 10, "every refusal is audited");
}

#[tokio::test]
async fn an_escalated_request_waits_and_the_users_approval_grants_it() {
    let h = Host::new(|_| {}).await;
    h.import().await;
    let s = h.session(TODO_PROMPT).await;
    // The persona's policy asks the user before this write: the request goes to the user.
    let path = "projects/ledger/Cargo.toml";
    h.as_caller(&s.cgroup);
    let mut worker = Client::connect(&h.config.socket).await.unwrap();
    // The daemon identifies the caller when it serves the connection: make sure it did.
    assert!(matches!(worker.call(Call::Status { session: None }).await.unwrap(), Reply::Session(_)));
    worker.send(Call::Request { path: h.ws.join(path).to_string_lossy().into(), access: Access::Write, reason: Some("bump a dependency".into()), session: None }).await.unwrap();
    let question = eventually("a waiting question", || async {
        h.as_caller(Path::new(OUTSIDE));
        match h.call(Call::Pending).await {
            Reply::Pending { questions } => questions.into_iter().find(|q| q.waiting),
            _ => None,
        }
    })
    .await;
    assert_eq!((question.path.as_str(), question.access), (path, Access::Write));
    let r = h.call(Call::Answer { question: question.id, approve: true, scope: Default::default(), host: None }).await;
    assert!(matches!(r, Reply::Ok { .. }), "{r:?}");
    let answer = worker.next().await.unwrap().unwrap();
    assert!(granted(&answer), "the waiting request is granted after approval: {answer:?}");
    let obj = ObjectId::of_path(&h.ws.join(path)).unwrap();
    assert!(h.maps.has(s.cgroup_id, obj, Access::Write));
    assert!(h.audit().iter().any(|e| e.event == Event::Answer && e.outcome == Some(RequestOutcome::UserApproved)));
}

#[tokio::test(start_paused = true)]
async fn an_unanswered_escalation_is_denied_at_the_timeout() {
    let h = Host::new(|c| {
        c.escalation.after_denials = 0;
        c.escalation.timeout_secs = 1;
    })
    .await;
    h.import().await;
    let s = h.session(TODO_PROMPT).await;
    let r = h.request_because(&s, "projects/ledger/Cargo.toml", Access::Write, "bump a dependency").await;
    match r {
        Reply::Decision { granted: false, outcome, question: Some(_), .. } => assert_eq!(outcome, RequestOutcome::Timeout),
        other => panic!("{other:?}"),
    }
    assert!(h.audit().iter().any(|e| e.event == Event::EscalationTimeout));
}

/// `pending` shows each question with the three votes of the decision that asked, each with
/// its reason, and at least one of them is why the user is asked.
#[tokio::test]
async fn pending_questions_carry_the_votes_and_their_reasons() {
    let h = Host::new(|c| c.escalation.after_denials = 0).await;
    h.import().await;
    let s = h.session(TODO_PROMPT).await;
    h.as_caller(&s.cgroup);
    let mut worker = Client::connect(&h.config.socket).await.unwrap();
    // The daemon identifies the caller when it serves the connection: make sure it did.
    assert!(matches!(worker.call(Call::Status { session: None }).await.unwrap(), Reply::Session(_)));
    let path = h.ws.join("projects/ledger/Cargo.toml").to_string_lossy().into_owned();
    worker.send(Call::Request { path, access: Access::Write, reason: Some("bump a dependency".into()), session: None }).await.unwrap();
    let q = eventually("a waiting question", || async {
        h.as_caller(Path::new(OUTSIDE));
        match h.call(Call::Pending).await {
            Reply::Pending { questions } => questions.into_iter().find(|q| q.waiting),
            _ => None,
        }
    })
    .await;
    assert_eq!(q.votes.len(), 3, "{q:?}");
    assert!(q.votes.iter().all(|v| !v.reason.is_empty()), "{q:?}");
    assert!(q.votes.iter().any(|v| v.verdict != pincer::decider::Verdict::Allow), "a vote did not allow: {q:?}");
    let audit = h.audit();
    let asked = audit.iter().find(|e| e.event == Event::Decision && e.question == Some(q.id)).unwrap();
    assert_eq!(asked.votes, q.votes, "the same votes as the audited decision");
}

/// The escalation timeout runs on tokio's clock (paused here, so nothing waits for real):
/// a waiting request gets no answer before the timeout and the timeout answer at it.
#[tokio::test(start_paused = true)]
async fn a_waiting_request_is_answered_at_the_timeout_and_not_before() {
    let h = Host::new(|c| {
        c.escalation.after_denials = 0;
        c.escalation.timeout_secs = 600;
    })
    .await;
    h.import().await;
    let s = h.session(TODO_PROMPT).await;
    h.as_caller(&s.cgroup);
    let mut worker = Client::connect(&h.config.socket).await.unwrap();
    let path = h.ws.join("projects/ledger/Cargo.toml").to_string_lossy().into_owned();
    worker.send(Call::Request { path, access: Access::Write, reason: Some("bump a dependency".into()), session: None }).await.unwrap();
    let early = tokio::time::timeout(std::time::Duration::from_secs(599), worker.next()).await;
    assert!(early.is_err(), "answered before the escalation timeout: {early:?}");
    match worker.next().await.unwrap().unwrap() {
        Reply::Decision { granted: false, outcome: RequestOutcome::Timeout, question: Some(_), .. } => {}
        other => panic!("{other:?}"),
    }
    assert!(h.audit().iter().any(|e| e.event == Event::EscalationTimeout));
}

/// The kernel's report of uid 1000 (process `pid`) opening `notes/todo.md` of the workspace
/// for reading without a grant; `parent` absent as when the kernel could not name it.

#[tokio::test]
async fn a_kernel_miss_becomes_an_implicit_request_and_its_grant_is_inserted() {
    let h = Host::new(|_| {}).await;
    h.import().await;
    let s = h.session(TODO_PROMPT).await;
    let file = ObjectId::of_path(&h.ws.join("notes/todo.md")).unwrap();
    let miss = h.read_miss(&s, "notes/todo.md", 4242);
    h.miss(miss).await;
    // The status call is served after the miss (one actor, in order).
    let info = eventually("the miss to be decided", || async {
        h.as_caller(Path::new(OUTSIDE));
        match h.call(Call::Status { session: Some(s.session.clone()) }).await {
            Reply::Session(info) if info.counters.misses == 1 && info.counters.requests == 1 => Some(info),
            _ => None,
        }
    })
    .await;
    assert_eq!(info.counters.grants, 1, "{info:?}");
    assert!(h.maps.has(s.cgroup_id, file, Access::Read));
    let e = h.audit().into_iter().find(|e| e.event == Event::Decision).unwrap();
    assert_eq!(e.request.as_ref().unwrap().source, Source::Miss);
    assert_eq!(e.request.as_ref().unwrap().rationale, None);
}

/// A reach denial (here a signal to the user's process outside the session) is never the
/// twin's to decide: it is counted as a miss and a denial, audited naming its target, and
/// nothing is requested or granted.
#[tokio::test]
async fn a_reach_denial_is_audited_with_its_target_and_never_decided() {
    let h = Host::new(|_| {}).await;
    h.import().await;
    let s = h.session(TODO_PROMPT).await;
    let reach = Reach::Process { pid: 777, session: 0, comm: "ssh-agent".into(), detail: 9 };
    h.event(KernelEvent::Reach(ReachDenial { session: s.cgroup_id, pid: 4242, uid: 1000, hook: Hook::TaskKill, reach })).await;
    let info = eventually("the reach denial to be counted", || async {
        h.as_caller(Path::new(OUTSIDE));
        match h.call(Call::Status { session: Some(s.session.clone()) }).await {
            Reply::Session(info) if info.counters.misses == 1 => Some(info),
            _ => None,
        }
    })
    .await;
    assert_eq!((info.counters.denials, info.counters.requests, info.counters.grants), (1, 0, 0), "{info:?}");
    let audit = h.audit();
    let e = audit.iter().find(|e| e.event == Event::Miss).expect("an audit entry for the reach denial");
    assert_eq!(e.outcome, Some(RequestOutcome::Deny));
    let detail = e.detail.as_deref().unwrap_or_default();
    assert!(detail.contains("task_kill") && detail.contains("pid: 777") && detail.contains("ssh-agent"), "{detail}");
    assert!(!audit.iter().any(|e| e.event == Event::Decision), "a reach denial was decided: {audit:?}");
}

/// A worker retrying a denied open misses again until the grant is in; the misses that come
/// while the first is decided join its decision, later ones find the grant there: none is
/// decided (or granted) again.
#[tokio::test]
async fn repeated_misses_of_a_granted_access_are_counted_but_not_decided_again() {
    let h = Host::new(|_| {}).await;
    h.import().await;
    let s = h.session(TODO_PROMPT).await;
    let file = ObjectId::of_path(&h.ws.join("notes/todo.md")).unwrap();
    for pid in [4242, 4242, 4243] {
        h.miss(h.read_miss(&s, "notes/todo.md", pid)).await;
    }
    let info = eventually("the misses to be seen", || async {
        h.as_caller(Path::new(OUTSIDE));
        match h.call(Call::Status { session: Some(s.session.clone()) }).await {
            // The misses are seen in order; the decision is applied when its votes are back.
            Reply::Session(info) if info.counters.misses == 3 && info.counters.grants >= 1 => Some(info),
            _ => None,
        }
    })
    .await;
    assert_eq!((info.counters.requests, info.counters.grants), (1, 1), "one decision for three misses: {info:?}");
    assert!(h.maps.has(s.cgroup_id, file, Access::Read));
    assert_eq!(h.audit().iter().filter(|e| e.event == Event::Decision).count(), 1);
}

#[tokio::test]
async fn on_miss_record_only_audits() {
    let h = Host::new(|c| c.on_miss = OnMiss::Record).await;
    h.import().await;
    let s = h.session(TODO_PROMPT).await;
    let miss = h.read_miss(&s, "notes/todo.md", 1);
    h.miss(miss).await;
    eventually("the miss to be recorded", || async { h.audit().iter().any(|e| e.event == Event::Miss).then_some(()) }).await;
    assert_eq!(h.maps.grant_count(s.cgroup_id), 0);
}

#[tokio::test]
async fn ending_a_session_revokes_its_grants_removes_its_cgroup_and_summarizes() {
    let h = Host::new(|_| {}).await;
    h.import().await;
    let s = h.session(TODO_PROMPT).await;
    assert!(granted(&h.request_because(&s, "notes/todo.md", Access::Read, "read it").await));
    assert!(!granted(&h.request_because(&s, "secrets/aws-credentials", Access::Read, "need it").await));
    h.as_caller(Path::new(OUTSIDE));
    let generation = h.maps.policy_generation();
    match h.call(Call::EndSession { session: s.session.clone() }).await {
        Reply::Summary { session, revoked } => {
            assert_eq!(revoked, 1);
            assert_eq!((session.counters.requests, session.counters.grants, session.counters.denials), (2, 1, 1));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(h.maps.grant_count(s.cgroup_id), 0);
    assert_eq!(h.maps.session(s.cgroup_id), None, "no longer gated");
    assert_ne!(h.maps.policy_generation(), generation, "ending the session renews the policy generation");
    assert!(!s.cgroup.exists(), "cgroup removed");
    assert!(matches!(h.call(Call::Sessions).await, Reply::Sessions { sessions } if sessions.is_empty()));
    let _ = h.dir.path();
}

/// What decisions change is written to `sessions.json` soon after, with no shutdown to
/// write it: a daemon killed a moment later still resumes its sessions with their grants.
#[tokio::test]
async fn a_decisions_grant_reaches_sessions_json_while_the_daemon_runs() {
    let h = Host::new(|_| {}).await;
    h.import().await;
    let s = h.session(TODO_PROMPT).await;
    assert!(granted(&h.request_because(&s, "notes/todo.md", Access::Read, "read it").await));
    let file = h.config.state_dir.join("sessions.json");
    let written = || {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let list: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap_or_default();
        list.iter().any(|v| v["id"] == s.session.as_str() && v["grants"].as_array().is_some_and(|g| g.iter().any(|g| g[0] == "notes/todo.md")))
    };
    let start = std::time::Instant::now();
    while !written() {
        assert!(start.elapsed() < pincer::daemon::core::PERSIST_DELAY * 10, "the grant never reached {}", file.display());
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_restarted_daemon_resumes_open_sessions() {
    let mut h = Host::new(|_| {}).await;
    h.import().await;
    let s = h.session(TODO_PROMPT).await;
    assert!(granted(&h.request_because(&s, "notes/todo.md", Access::Read, "read it").await));
    h.restart().await;
    h.as_caller(Path::new(OUTSIDE));
    match h.call(Call::Sessions).await {
        Reply::Sessions { sessions } => {
            assert_eq!(sessions.len(), 1);
            assert_eq!(sessions[0].session, s.session);
            assert_eq!(sessions[0].counters.grants, 1);
        }
        other => panic!("{other:?}"),
    }
    // The twin's session was rebuilt from the prompt: it still decides for this worker.
    assert!(granted(&h.request_because(&s, "notes/todo.md", Access::Write, "tick the item off").await));
    assert!(!granted(&h.request_because(&s, "secrets/prod.env", Access::Read, "need it").await));
    assert!(h.audit().iter().any(|e| e.event == Event::SessionResume));
}

/// `pincer mcp` driven by the official Python MCP SDK client (installed by `.ci/run`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_server_serves_request_resource_to_the_python_sdk_client() {
    let h = Host::new(|_| {}).await;
    h.import().await;
    let s = h.session(TODO_PROMPT).await;
    // Every connection of the MCP server comes from inside the session.
    h.as_caller(&s.cgroup);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_client.py");
    let out = tokio::process::Command::new("python3")
        .args([script, env!("CARGO_BIN_EXE_pincer"), &h.config.socket.to_string_lossy(), &h.ws.to_string_lossy()])
        .output()
        .await
        .expect("python3 must be installed");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the MCP client failed (the Python SDK is installed by .ci/run: `pip install mcp`):\n{stderr}"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(v["server"], "pincer");
    assert_eq!(v["tools"], serde_json::json!(["request_resource"]));
    assert_eq!(v["schema"]["required"], serde_json::json!(["path", "access"]));
    let calls = v["calls"].as_array().unwrap();
    assert_eq!(calls[0]["is_error"], false, "{}", calls[0]);
    assert!(calls[0]["text"].as_str().unwrap().starts_with("granted"), "{}", calls[0]);
    assert_eq!(calls[1]["is_error"], true, "{}", calls[1]);
    assert!(calls[1]["text"].as_str().unwrap().starts_with("denied"), "{}", calls[1]);
    assert_eq!(calls[2]["is_error"], true, "{}", calls[2]);
    assert!(calls[2]["text"].as_str().unwrap().contains("chmod"), "{}", calls[2]);
    let todo = ObjectId::of_path(&h.ws.join("notes/todo.md")).unwrap();
    assert!(h.maps.has(s.cgroup_id, todo, Access::Read));
}

#[tokio::test]
async fn never_grantable_paths_are_refused_before_any_vote_or_question_and_seeded_in_the_kernel() {
    // The persona's policy asks the user before this write (see the escalation test): a
    // never rule must refuse it outright, so no question (and no approval) can grant it.
    let h = Host::new(|c| c.containment.never.push(NeverRule { pattern: "**/ledger/Cargo.toml".into(), access: vec![Access::Write] })).await;
    h.import().await;
    std::fs::create_dir_all(h.ws.join(".git/hooks")).unwrap();
    std::fs::write(h.ws.join(".git/config"), "[core]\n").unwrap();
    let s = h.session(TODO_PROMPT).await;
    for (path, access) in [("projects/ledger/Cargo.toml", Access::Write), (".git/config", Access::Write), (".git/hooks/pre-commit", Access::Create)] {
        match h.request_because(&s, path, access, "needed for the task").await {
            Reply::Decision { granted: false, outcome, reason, question: None } => {
                assert_eq!(outcome, RequestOutcome::Deny);
                assert!(reason.contains("never-grantable"), "{path}: {reason}");
            }
            other => panic!("{path} {access:?} must be refused as never-grantable: {other:?}"),
        }
    }
    h.as_caller(Path::new(OUTSIDE));
    match h.call(Call::Pending).await {
        Reply::Pending { questions } => assert!(questions.is_empty(), "no question for a never-grantable path: {questions:?}"),
        other => panic!("{other:?}"),
    }
    let cfg = ObjectId::of_path(&h.ws.join(".git/config")).unwrap();
    assert!(!h.maps.has(s.cgroup_id, cfg, Access::Write));
    let audit = h.audit();
    assert!(audit.iter().filter(|e| e.detail.as_deref().is_some_and(|d| d.contains("never-grantable"))).count() >= 3, "the audit says why");
    // The kernel's never map holds the objects and names that exist now.
    let git = ObjectId::of_path(&h.ws.join(".git")).unwrap();
    let hooks = ObjectId::of_path(&h.ws.join(".git/hooks")).unwrap();
    assert!(h.maps.never_bits(cfg).is_some(), "existing .git/config");
    assert!(h.maps.never_bits(hooks).is_some(), ".git/hooks covers its subtree");
    assert!(h.maps.never_name_bits(git, std::ffi::OsStr::new("config")).is_some(), "a deleted .git/config cannot be made again");
    assert!(h.maps.never_dir_count(git).is_some_and(|n| n >= 1), "the directory of a never name is marked");
    let counts = h.maps.state();
    assert!(counts.never_objects >= 2 && counts.never_names >= 1, "the kernel is told never entries exist: {counts:?}");
    // A read of .git/config is not never-grantable: git must read it.
    match h.request_because(&s, ".git/config", Access::Read, "git status").await {
        Reply::Decision { reason, .. } => assert!(!reason.contains("never-grantable"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_session_gets_a_private_scratch_dir_and_its_owners_places_are_gated() {
    let h = Host::new(|c| c.containment.scratch = true).await;
    h.import().await;
    let s = h.session(TODO_PROMPT).await;
    let scratch = s.scratch.clone().expect("a scratch directory");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&scratch).unwrap().permissions().mode() & 0o777, 0o700);
    let id = ObjectId::of_path(&scratch).unwrap();
    let all = Access::ALL.into_iter().fold(0, |bits, a| bits | pincer::kernel::access_bit(a));
    // In full, and as its own place (the never patterns do not apply inside).
    assert_eq!(
        h.maps.granted_bits(s.cgroup_id, id, Scope::Subtree),
        all | pincer_common::ACCESS_CREATED_BY_SESSION,
        "the scratch dir is the session's in full, as its own place"
    );
    let tmp = ObjectId::of_path(Path::new("/tmp")).unwrap();
    assert!(h.maps.is_root(tmp), "/tmp is gated like a root");
    // The state directory is private.
    assert_eq!(std::fs::metadata(&h.config.state_dir).unwrap().permissions().mode() & 0o777, 0o700);
    h.as_caller(Path::new(OUTSIDE));
    assert!(matches!(h.call(Call::EndSession { session: s.session.clone() }).await, Reply::Summary { .. }));
    assert!(!scratch.exists(), "the scratch dir ends with the session");
}

#[tokio::test]
async fn import_with_a_workspace_keeps_its_snapshot_in_the_trusted_store_the_twin_is_built_from() {
    let h = Host::new(|_| {}).await;
    h.as_caller(Path::new(OUTSIDE));
    let history = std::fs::read_to_string(Path::new(PERSONA).join("history.jsonl")).unwrap();
    let policies = std::fs::read_to_string(Path::new(PERSONA).join("policies.jsonl")).unwrap();
    let ws = Path::new(PERSONA).join("workspace").canonicalize().unwrap();
    match h.call(Call::Import { history: history.clone(), policies: policies.clone(), uid: None, workspace: Some(ws) }).await {
        Reply::Ok { message } => assert!(message.contains("snapshot"), "{message}"),
        other => panic!("{other:?}"),
    }
    let pincer::store::StoreSpec::Sqlite(db) = h.config.store_spec() else { panic!("the default store is SQLite") };
    let parsed = pincer::store::Store::open(&db).unwrap().workspace("root").unwrap().expect("the snapshot is in the trusted store");
    assert!(parsed.tree.iter().any(|p| p == "secrets/prod.env") && parsed.files.contains_key("secrets/prod.env"));
    assert!(!h.config.state_dir.join("workspace-root.json").exists(), "no copy beside the store");
    // A corrupt snapshot fails closed: no twin, so requests are denied.
    rusqlite::Connection::open(&db).unwrap().execute("UPDATE workspace SET snapshot = '{not json'", []).unwrap();
    let r = h.call(Call::CreateSession { owner_uid: 0, roots: vec![h.ws.clone()], prompt: TODO_PROMPT.into(), mode: Default::default() }).await;
    match &r {
        Reply::Error { message, .. } => assert!(message.contains("workspace snapshot"), "{message}"),
        other => panic!("no session without its twin: {other:?}"),
    }
    // A workspace that does not exist is an error that names it.
    match h.call(Call::Import { history, policies, uid: None, workspace: Some(PathBuf::from("/nonexistent/ws")) }).await {
        Reply::Error { message, .. } => assert!(message.contains("/nonexistent/ws"), "{message}"),
        other => panic!("{other:?}"),
    }
}

/// The write the persona's policy asks the user about, which the `once` tests approve.
const ONCE_PATH: &str = "projects/ledger/Cargo.toml";

/// A daemon whose `once` grants last 5 s, and a session whose request for [`ONCE_PATH`] the
/// user approved `--scope once` (granted); with the standing rules from before the approval.
async fn once_approved() -> (Host, SessionInfo, Vec<StandingRule>) {
    let h = Host::new(|c| {
        c.escalation.timeout_secs = 600;
        c.escalation.once_secs = 5;
    })
    .await;
    h.import().await;
    let s = h.session(TODO_PROMPT).await;
    let before = h.standing().await;
    let r = h.approve_waiting(&s, ONCE_PATH, Access::Write, ApprovalScope::Once).await;
    assert!(granted(&r), "the request the approval answers is granted: {r:?}");
    (h, s, before)
}

/// `approve --scope once`: the request it answers is granted, the kernel grant is taken back
/// after `once_secs`, the same request later is asked again, and nothing is recorded.
#[tokio::test(start_paused = true)]
async fn a_once_approval_does_not_outlive_its_request() {
    let (h, s, before) = once_approved().await;
    let path = ONCE_PATH;
    let obj = ObjectId::of_path(&h.ws.join(path)).unwrap();
    assert!(h.maps.has(s.cgroup_id, obj, Access::Write));
    tokio::time::sleep(std::time::Duration::from_secs(6)).await;
    // A call goes through the actor after the expiry ran.
    h.as_caller(Path::new(OUTSIDE));
    assert!(matches!(h.call(Call::Status { session: Some(s.session.clone()) }).await, Reply::Session(_)));
    assert!(!h.maps.has(s.cgroup_id, obj, Access::Write), "the once grant is taken back from the kernel");
    match h.request_because(&s, path, Access::Write, "bump it again").await {
        Reply::Decision { granted: false, outcome: RequestOutcome::Timeout, question: Some(_), .. } => {}
        other => panic!("the same request is asked again, not approved: {other:?}"),
    }
    assert_eq!(h.standing().await, before, "a once approval is not recorded");
}

/// A `once` grant the kernel will not take back does not stay: its session is ended, and
/// every grant of the session with it.
#[tokio::test(start_paused = true)]
async fn a_once_grant_that_cannot_be_taken_back_ends_its_session() {
    let (h, s, _) = once_approved().await;
    // The kernel refuses the next change of the exact grant map: taking the once grant back.
    h.maps.exact.fail_next_change();
    tokio::time::sleep(std::time::Duration::from_secs(6)).await;
    h.as_caller(Path::new(OUTSIDE));
    match h.call(Call::Status { session: Some(s.session.clone()) }).await {
        Reply::Error { .. } => {}
        other => panic!("the session whose once grant stays is ended: {other:?}"),
    }
    assert_eq!(h.maps.grant_count(s.cgroup_id), 0, "ending the session took back all its grants");
    let ends: Vec<_> = h.audit().into_iter().filter(|e| e.event == Event::SessionEnd).collect();
    assert_eq!(ends.len(), 1, "one session end is audited: {ends:?}");
    assert!(ends[0].detail.as_deref().is_some_and(|d| d.contains("would not take back a once grant")), "the end says why: {:?}", ends[0].detail);
}

/// `approve --scope session`: later requests of the session are granted; nothing is recorded
/// and a new session of the same task does not get it.
#[tokio::test]
async fn a_session_approval_ends_with_the_session() {
    let h = Host::new(|c| {
        c.escalation.after_denials = 1;
        c.escalation.timeout_secs = 2;
    })
    .await;
    h.import().await;
    let s1 = h.session(TODO_PROMPT).await;
    let rel = h.denied_on_its_own(&s1).await;
    let r = h.approve_waiting(&s1, rel, Access::Write, ApprovalScope::Session).await;
    assert!(granted(&r), "{r:?}");
    match h.request_because(&s1, rel, Access::Write, "have another look").await {
        Reply::Decision { granted: true, outcome: RequestOutcome::Grant, .. } => {}
        other => panic!("the session's approval grants it again in the session: {other:?}"),
    }
    assert_eq!(approval_of(&h.standing().await, rel, Access::Write), None, "a session approval is not recorded");
    h.end(&s1).await;
    let s2 = h.session(TODO_PROMPT).await;
    let r = h.request_because(&s2, rel, Access::Write, "have a look").await;
    assert!(!granted(&r), "the approval ended with its session: {r:?}");
}

/// `approve --scope always` (the default): recorded as the user's approval, which grants the
/// resource in a later session of the same task after a daemon restart, until `policy
/// remove` takes it away.
#[tokio::test]
async fn an_always_approval_survives_a_restart_and_a_new_session_until_it_is_removed() {
    let mut h = Host::new(|c| {
        c.escalation.after_denials = 1;
        c.escalation.timeout_secs = 2;
    })
    .await;
    h.import().await;
    let s1 = h.session(TODO_PROMPT).await;
    let rel = h.denied_on_its_own(&s1).await;
    let r = h.approve_waiting(&s1, rel, Access::Write, ApprovalScope::Always).await;
    assert!(granted(&r), "{r:?}");
    let id = approval_of(&h.standing().await, rel, Access::Write).expect("an always approval is listed");
    assert!(matches!(id, RuleId::Approval(_)));
    h.end(&s1).await;
    h.restart().await;
    // An approval licenses its resource for a like task whose prompt points at it (issue
    // 10's scoped approvals): the same task, naming the file.
    let stem = Path::new(rel).file_stem().and_then(|s| s.to_str()).expect("a file name");
    let like = format!("{TODO_PROMPT} Then look at {stem} again.");
    let s2 = h.session(&like).await;
    match h.request_because(&s2, rel, Access::Write, "have a look").await {
        Reply::Decision { granted: true, outcome: RequestOutcome::Grant, .. } => {}
        other => panic!("the recorded approval grants it in a new session after a restart: {other:?}"),
    }
    // Removing it takes effect for the next decision (s2 stays open: its grant is not history).
    h.as_caller(Path::new(OUTSIDE));
    match h.call(Call::RemoveRule { id }).await {
        Reply::Ok { message } => assert!(message.contains(&id.to_string()), "{message}"),
        other => panic!("remove: {other:?}"),
    }
    assert_eq!(approval_of(&h.standing().await, rel, Access::Write), None, "removed");
    let s3 = h.session(&like).await;
    let r = h.request_because(&s3, rel, Access::Write, "have a look").await;
    assert!(!granted(&r), "the removed approval grants nothing: {r:?}");
    // Removing it again names the id.
    h.as_caller(Path::new(OUTSIDE));
    match h.call(Call::RemoveRule { id }).await {
        Reply::Error { kind: ErrorKind::BadRequest, message } => assert!(message.contains(&id.to_string()), "{message}"),
        other => panic!("{other:?}"),
    }
    assert!(h.audit().iter().any(|e| e.event == Event::RuleRemoved));
}

/// Imported policies are listed too, and removing one changes the next decision of an open
/// session's twin (it is rebuilt over the store without it).
#[tokio::test]
async fn policies_are_listed_and_removing_one_changes_the_next_decision() {
    let h = Host::new(|_| {}).await;
    h.import().await;
    let rules = h.standing().await;
    let migration = rules
        .iter()
        .find(|r| matches!(&r.rule, Rule::Policy(p) if p.rules.iter().any(|x| x.path_glob == "projects/ledger/migrations/*.sql" && x.permission == pincer::store::Permission::Deny)))
        .expect("the persona's migration policy is listed")
        .id;
    assert!(matches!(migration, RuleId::Policy(_)));
    let s = h.session("Fix the typo in the comment of the first ledger migration, projects/ledger/migrations/0001_init.sql.").await;
    let r = h.request_because(&s, "projects/ledger/migrations/0001_init.sql", Access::Write, "fix the typo").await;
    let Reply::Decision { granted: false, reason: before, .. } = r else { panic!("{r:?}") };
    assert!(before.contains("denies"), "{before}");
    h.as_caller(Path::new(OUTSIDE));
    assert!(matches!(h.call(Call::RemoveRule { id: migration }).await, Reply::Ok { .. }));
    let r = h.request_because(&s, "projects/ledger/migrations/0001_init.sql", Access::Write, "fix the typo").await;
    let Reply::Decision { reason: after, .. } = r else { panic!("{r:?}") };
    assert_ne!(before, after, "the next decision goes without the removed policy");
}

/// Approving and removing standing rules are the user's, never a gated process's.
#[tokio::test]
async fn gated_callers_cannot_approve_or_list_or_remove_rules() {
    let h = Host::new(|c| c.escalation.after_denials = 0).await;
    h.import().await;
    let s = h.session(TODO_PROMPT).await;
    let before = h.standing().await;
    let id = before.first().expect("the persona has rules").id;
    for cgroup in [s.cgroup.join("nested"), h.config.cgroup_parent.join("s-gone")] {
        h.as_caller(&cgroup);
        for call in [Call::RemoveRule { id }, Call::Rules, Call::Answer { question: 1, approve: true, scope: ApprovalScope::Always, host: None }] {
            let name = call.name();
            let r = h.call(call).await;
            assert!(refused(&r), "{name} from {} must be refused: {r:?}", cgroup.display());
        }
    }
    assert_eq!(h.standing().await, before, "nothing was removed");
}

/// A shadow session's accesses (the kernel's reports, whatever the would-be outcome) become
/// one history task with the session's prompt when it ends; never-grantable misses do not.
/// An enforcing session records only its grants.
#[tokio::test]
async fn a_shadow_sessions_accesses_become_a_history_task_when_it_ends() {
    let h = Host::new(|_| {}).await;
    h.import().await;
    h.as_caller(Path::new(OUTSIDE));
    let prompt = TODO_PROMPT;
    let s = match h.call(Call::CreateSession { owner_uid: 0, roots: vec![h.ws.clone()], prompt: prompt.into(), mode: SessionMode::Shadow }).await {
        Reply::Session(s) => s,
        other => panic!("{other:?}"),
    };
    let shadow = pincer_common::EVENT_FLAG_SHADOW;
    let mut misses = vec![];
    for rel in ["notes/todo.md", "secrets/prod.env", "projects/notifier/CHANGELOG.md"] {
        let mut m = h.read_miss(&s, rel, 77);
        m.relative_path = rel.into();
        m.flags = shadow;
        misses.push(m);
    }
    // A never-grantable miss (the kernel's never map): audited, not history.
    let mut never = h.read_miss(&s, "notes/standup.md", 77);
    never.relative_path = "notes/standup.md".into();
    never.flags = pincer_common::EVENT_FLAG_NEVER;
    misses.push(never);
    for m in misses {
        h.miss(m).await;
    }
    eventually("the misses to be decided", || async {
        h.as_caller(Path::new(OUTSIDE));
        match h.call(Call::Status { session: Some(s.session.clone()) }).await {
            Reply::Session(info) if info.counters.misses == 4 => Some(()),
            _ => None,
        }
    })
    .await;
    h.end(&s).await;
    let store = pincer::store::Store::open(h.config.state_dir.join("state.db")).unwrap();
    let state = store.load_state("root").unwrap();
    let task = state.tasks.iter().find(|t| t.session == s.session).expect("the shadow session is a history task");
    assert_eq!(task.prompts, vec![prompt.to_string()]);
    let paths: Vec<&str> = task.accesses.iter().map(|(a, _)| a.path.as_str()).collect();
    for rel in ["notes/todo.md", "secrets/prod.env", "projects/notifier/CHANGELOG.md"] {
        assert!(paths.contains(&rel), "{rel} is recorded: {paths:?}");
    }
    assert!(!paths.contains(&"notes/standup.md"), "a never-grantable miss is not history: {paths:?}");
    assert!(h.audit().iter().any(|e| e.event == Event::ShadowHistory && e.session.as_deref() == Some(s.session.as_str())));
    // An enforcing session: what the twin denied is not history.
    let e = h.session(TODO_PROMPT).await;
    assert!(!granted(&h.request_because(&e, "secrets/aws-credentials", Access::Read, "need it").await));
    h.end(&e).await;
    let state = store.load_state("root").unwrap();
    if let Some(task) = state.tasks.iter().find(|t| t.session == e.session) {
        assert!(task.accesses.iter().all(|(a, _)| a.path != "secrets/aws-credentials"), "{task:?}");
    }
}

#[tokio::test]
async fn a_denial_tells_the_worker_the_kind_of_finding_never_what_the_resource_holds() {
    let h = Host::new(|_| {}).await;
    h.import().await;
    // The file the task is about now holds a secret under a name of its own.
    const NAME: &str = "ZQX_VAULT_MASTER_PASSWORD";
    const VALUE: &str = "x8Kq2Lm9Vt4Rz7Wp3Nb6Hc5J";
    std::fs::write(h.ws.join("notes/todo.md"), format!("- [ ] release notes\n{NAME} = \"{VALUE}\"\n")).unwrap();
    let s = h.session(TODO_PROMPT).await;
    match h.request_because(&s, "notes/todo.md", Access::Read, "read the todo list to update it").await {
        Reply::Decision { granted: false, reason, .. } => {
            assert!(!reason.contains(NAME) && !reason.contains(VALUE) && !reason.contains("ZQX"), "the reply quotes the resource: {reason}");
            assert!(reason.contains("a secret value"), "the reply names the kind of finding: {reason}");
        }
        other => panic!("a secret must be denied: {other:?}"),
    }
    // The user's audit keeps the detail.
    let audit = h.audit();
    let decision = audit.iter().rev().find(|e| e.event == Event::Decision).expect("a decision entry");
    assert!(decision.votes.iter().any(|v| v.reason.contains(NAME)), "{:?}", decision.votes);
}

/// A git repository `calc` whose object store has fan-out folders `ed/`, `5e/` and `0c/`, a
/// folder `pack/`, and a fan-out name `7f` that is a symlink to a folder elsewhere; and a
/// history of commits that created fan-out folders.
fn store_with_history(h: &Host) -> String {
    let objects = h.ws.join("calc/.git/objects");
    for d in ["ed", "5e", "0c", "pack"] {
        std::fs::create_dir_all(objects.join(d)).unwrap();
    }
    for f in ["calc/calc.py", "calc/.git/HEAD", "calc/.git/index"] {
        std::fs::write(h.ws.join(f), "x\n").unwrap();
    }
    std::fs::create_dir_all(h.ws.join("elsewhere")).unwrap();
    std::os::unix::fs::symlink(h.ws.join("elsewhere"), objects.join("7f")).unwrap();
    let task = |session: &str, prompt: &str, buckets: [&str; 2]| {
        let mut a: Vec<serde_json::Value> = [
            ("calc/calc.py", "read"),
            ("calc/calc.py", "write"),
            ("calc/.git/", "list"),
            ("calc/.git/HEAD", "read"),
            ("calc/.git/index", "read"),
            ("calc/.git/index", "write"),
            ("calc/.git/index.lock", "create"),
            ("calc/.git/objects/", "list"),
        ]
        .iter()
        .map(|(p, a)| serde_json::json!({"path": p, "access": a}))
        .collect();
        a.extend(buckets.iter().map(|b| serde_json::json!({"path": b, "access": "create"})));
        serde_json::json!({"day": 1, "session": session, "prompt": prompt, "accesses": a}).to_string()
    };
    [
        task("h1", "Fix the failing test in calc and commit the fix with git.", ["calc/.git/objects/a3/", "calc/.git/objects/9d/"]),
        task("h2", "Fix the rounding test in calc and commit it with git.", ["calc/.git/objects/e1/", "calc/.git/objects/47/"]),
    ]
    .join("\n")
        + "\n"
}

/// A daemon taught the calc repository's history ([`store_with_history`]) and a session of
/// a task like its tasks.
async fn calc_session() -> (Host, SessionInfo) {
    let h = Host::new(|_| {}).await;
    let history = store_with_history(&h);
    h.as_caller(Path::new(OUTSIDE));
    let r = h.call(Call::Import { history, policies: String::new(), uid: None, workspace: Some(h.ws.clone()) }).await;
    assert!(matches!(r, Reply::Ok { .. }), "{r:?}");
    let s = h.session("Fix the failing add test in calc and commit the fix with git.").await;
    (h, s)
}

#[tokio::test]
async fn a_create_granted_in_a_fanout_folder_is_granted_in_each_fanout_folder_of_its_store() {
    let (h, s) = calc_session().await;
    let objects = h.ws.join("calc/.git/objects");
    let id = |d: &str| ObjectId::of_path(&objects.join(d)).unwrap();
    let r = h.request(&s, "calc/.git/objects/ed/tmp_obj_Xq81zP", Access::Create).await;
    assert!(granted(&r), "{r:?} {:?}", h.audit().last().map(|e| e.votes.clone()));
    assert!(h.maps.has(s.cgroup_id, id("ed"), Access::Create));
    // The object a retry makes goes into another fan-out folder: it may.
    for d in ["5e", "0c"] {
        assert_eq!(h.maps.granted_bits(s.cgroup_id, id(d), Scope::Exact), pincer_common::ACCESS_CREATE, "{d}");
    }
    // Not a folder of another kind, nor where a fan-out name's symlink leads.
    assert_eq!(h.maps.granted_bits(s.cgroup_id, id("pack"), Scope::Exact), 0);
    assert_eq!(h.maps.granted_bits(s.cgroup_id, ObjectId::of_path(&h.ws.join("elsewhere")).unwrap(), Scope::Exact), 0);
}

#[tokio::test]
async fn a_create_is_granted_for_the_name_decided_not_for_its_folder() {
    let (h, s) = calc_session().await;
    let r = h.request(&s, "calc/.git/index.lock", Access::Create).await;
    assert!(granted(&r), "{r:?} {:?}", h.audit().last().map(|e| e.votes.clone()));
    let git = ObjectId::of_path(&h.ws.join("calc/.git")).unwrap();
    let e = h.maps.enforcer();
    let holds = |name: &str| e.holds_for_name(s.cgroup_id, git, Access::Create, Some(std::ffi::OsStr::new(name))).unwrap();
    assert!(holds("index.lock"), "the name decided");
    for beside in ["config", "HEAD.lock", "hooks", ".envrc"] {
        assert!(!holds(beside), "{beside} beside the decided name");
    }
    let bits = h.maps.granted_bits(s.cgroup_id, git, Scope::Exact);
    assert_eq!(bits & pincer_common::ACCESS_CREATE, 0, "no create on the folder: {bits:#x}");
    assert_ne!(bits & pincer_common::ACCESS_NAMED_CREATE, 0, "the folder's grant is marked for names: {bits:#x}");
}
