//! `pincer hook claude-code` on the host: the real binary, spawned with Claude Code's
//! `PreToolUse` JSON on stdin, against the daemon with the shipped enforcer over maps in
//! memory (this host's kernel refuses LSM programs). The daemon tells callers apart by pid:
//! the test process is the user outside every session, each spawned hook is the worker
//! inside the session.

use pincer::daemon::client::Client;
use pincer::daemon::config::Config;
use pincer::daemon::peer::CgroupLookup;
use pincer::daemon::protocol::SessionInfo;
use pincer::daemon::{Call, Reply};
use pincer::kernel::{MemoryMaps, ObjectId};
use pincer::Access;
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use crate::common;
use common::{config_in, persona_state, persona_workspace, start_daemon, OUTSIDE, TODO_PROMPT};

struct Harness {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    config: Config,
    config_file: PathBuf,
    maps: MemoryMaps,
    session: SessionInfo,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Harness {
    async fn new(tweak: impl FnOnce(&mut Config)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ws = persona_workspace(dir.path());
        let mut config = config_in(dir.path());
        tweak(&mut config);
        let config_file = dir.path().join("pincer.toml");
        std::fs::write(&config_file, toml::to_string(&config).unwrap()).unwrap();
        let maps = MemoryMaps::default();
        // This process is the user; every other process (a spawned hook) is in the session.
        let worker_cgroup: Arc<Mutex<PathBuf>> = Arc::new(Mutex::new(PathBuf::from(OUTSIDE)));
        let me = std::process::id();
        let wc = worker_cgroup.clone();
        let lookup: CgroupLookup = Arc::new(move |pid| Ok(if pid == me { PathBuf::from(OUTSIDE) } else { wc.lock().unwrap().clone() }));
        let stop = start_daemon(&config, maps.enforcer(), lookup, [7; 32], None).stop;
        let call = |c: Call| {
            let socket = config.socket.clone();
            async move { Client::connect(&socket).await.unwrap().call(c).await.unwrap() }
        };
        let (history, policies) = persona_state();
        assert!(matches!(call(Call::Import { history, policies, uid: None, workspace: None }).await, Reply::Ok { .. }));
        let session = match call(Call::CreateSession { owner_uid: 0, roots: vec![ws.clone()], prompt: TODO_PROMPT.into(), mode: Default::default() }).await {
            Reply::Session(s) => s,
            other => panic!("{other:?}"),
        };
        *worker_cgroup.lock().unwrap() = session.cgroup.clone();
        Harness { _dir: dir, ws, config, config_file, maps, session, _stop: stop }
    }

    fn payload(&self, tool: &str, input: Value) -> String {
        json!({
            "session_id": "6d3f0c1e-claude",
            "transcript_path": "/home/dana/.claude/projects/-ws/6d3f0c1e-claude.jsonl",
            "cwd": self.ws,
            "permission_mode": "default",
            "hook_event_name": "PreToolUse",
            "tool_name": tool,
            "tool_input": input,
            "tool_use_id": "toolu_01"
        })
        .to_string()
    }

    fn path(&self, rel: &str) -> String {
        self.ws.join(rel).to_string_lossy().into_owned()
    }

    /// Whether the kernel's grant maps (in memory) let the session do `access` on `rel`
    /// (a create is granted for the new name in its parent folder).
    fn kernel_allows(&self, rel: &str, access: Access) -> bool {
        let p = self.ws.join(rel);
        if access == Access::Create {
            let folder = ObjectId::of_path(p.parent().unwrap()).unwrap();
            return self.maps.enforcer().holds_for_name(self.session.cgroup_id, folder, access, p.file_name()).unwrap();
        }
        self.maps.has_any_scope(self.session.cgroup_id, ObjectId::of_path(&p).unwrap(), access)
    }
}

/// Runs the hook binary with `stdin`, `extra` arguments after the harness's socket.
fn hook_with(socket: &Path, config: &Path, stdin: &str, extra: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pincer"))
        .args(["hook", "claude-code", "--socket"])
        .arg(socket)
        .arg("--config")
        .arg(config)
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

async fn hook(h: &Harness, stdin: String) -> Output {
    let (socket, config) = (h.config.socket.clone(), h.config_file.clone());
    tokio::task::spawn_blocking(move || hook_with(&socket, &config, &stdin, &[])).await.unwrap()
}

/// The decision and reason on stdout (exit 0 required).
fn decision(out: &Output) -> Option<(String, String)> {
    assert_eq!(out.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    if stdout.trim().is_empty() {
        return None;
    }
    let v: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let o = &v["hookSpecificOutput"];
    assert_eq!(o["hookEventName"], "PreToolUse");
    Some((o["permissionDecision"].as_str().unwrap().to_string(), o["permissionDecisionReason"].as_str().unwrap().to_string()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_file_tool_gets_the_twins_decision_and_it_matches_the_kernels_grants() {
    use Access::*;
    let h = Harness::new(|_| {}).await;
    // (tool, tool_input, the resources it touches)
    type Case<'a> = (&'a str, Value, Vec<(&'a str, Access)>);
    let cases: Vec<Case> = vec![
        ("Read", json!({"file_path": h.path("notes/todo.md")}), vec![("notes/todo.md", Read)]),
        ("Edit", json!({"file_path": h.path("notes/todo.md"), "old_string": "- [ ] release notes", "new_string": "- [x] release notes"}), vec![("notes/todo.md", Read), ("notes/todo.md", Write)]),
        ("MultiEdit", json!({"file_path": h.path("notes/standup.md"), "edits": [{"old_string": "a", "new_string": "b"}]}), vec![("notes/standup.md", Read), ("notes/standup.md", Write)]),
        ("Write", json!({"file_path": h.path("notes/backups.md"), "content": "- look at the ledger backups\n"}), vec![("notes/backups.md", Create)]),
        ("NotebookEdit", json!({"notebook_path": h.path("notes/hours.ipynb"), "new_source": "1", "edit_mode": "insert"}), vec![("notes/hours.ipynb", Create)]),
        ("Glob", json!({"pattern": "notes/*.md"}), vec![("notes", List)]),
        ("Grep", json!({"pattern": "release", "path": h.path("notes")}), vec![("notes", List)]),
        ("Grep", json!({"pattern": "release", "path": h.path("notes/todo.md")}), vec![("notes/todo.md", Read)]),
        ("LS", json!({"path": h.path("notes")}), vec![("notes", List)]),
        ("Read", json!({"file_path": h.path("secrets/prod.env")}), vec![("secrets/prod.env", Read)]),
    ];
    let mut allowed = 0;
    for (tool, input, needs) in cases {
        let out = hook(&h, h.payload(tool, input.clone())).await;
        let (d, reason) = decision(&out).unwrap_or_else(|| panic!("{tool} {input} got no decision"));
        let kernel = needs.iter().all(|(rel, a)| h.kernel_allows(rel, *a));
        eprintln!("{tool} {input}\n  -> {d}: {reason}");
        match d.as_str() {
            "allow" => {
                allowed += 1;
                assert!(kernel, "{tool} {input} allowed but the kernel holds no grant for {needs:?}");
                for (rel, a) in &needs {
                    assert!(reason.contains(&format!("{a} {}", h.path(rel))), "{reason}");
                }
            }
            "deny" => {
                assert!(!kernel, "{tool} {input} denied although every grant is in the kernel");
                assert!(reason.contains("pincer request") && reason.contains("request_resource"), "a denial says how to ask: {reason}");
            }
            other => panic!("{other}"),
        }
    }
    assert!(allowed >= 3, "the task's own files are granted");
    // The task's file is granted, the secret is not.
    assert!(h.kernel_allows("notes/todo.md", Access::Read));
    assert!(!h.kernel_allows("secrets/prod.env", Access::Read));
    let secret = decision(&hook(&h, h.payload("Read", json!({"file_path": h.path("secrets/prod.env")}))).await).unwrap();
    assert_eq!(secret.0, "deny");
    assert!(secret.1.contains("secrets/prod.env denied"), "{}", secret.1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relative_dot_dot_and_outside_paths_and_other_tools() {
    let h = Harness::new(|_| {}).await;
    // A relative path is taken from the call's cwd.
    let mut p: Value = serde_json::from_str(&h.payload("Read", json!({"file_path": "todo.md"}))).unwrap();
    p["cwd"] = json!(h.ws.join("notes"));
    let (d, reason) = decision(&hook(&h, p.to_string()).await).unwrap();
    assert_eq!(d, "allow", "{reason}");
    assert!(reason.contains(&format!("read {}", h.path("notes/todo.md"))), "{reason}");
    // `..` is refused by name, never normalized into a grant.
    let (d, reason) = decision(&hook(&h, h.payload("Read", json!({"file_path": format!("{}/notes/../secrets/prod.env", h.ws.display())}))).await).unwrap();
    assert_eq!(d, "deny");
    assert!(reason.contains("`..`"), "{reason}");
    assert!(!h.kernel_allows("secrets/prod.env", Access::Read));
    // Outside every protected root the hook has no say; neither for Bash, web or MCP tools.
    for (tool, input) in [
        ("Read", json!({"file_path": "/etc/hostname"})),
        ("Bash", json!({"command": format!("cat {}", h.path("secrets/prod.env")), "description": "read it"})),
        ("WebFetch", json!({"url": "https://example.com", "prompt": "summarize"})),
        ("mcp__pincer__request_resource", json!({"path": h.path("notes/todo.md"), "access": "read"})),
    ] {
        let out = hook(&h, h.payload(tool, input)).await;
        assert_eq!(decision(&out), None, "{tool}: {}", String::from_utf8_lossy(&out.stdout));
    }
    // A file tool whose input is wrong is denied with what was wrong.
    let (d, reason) = decision(&hook(&h, h.payload("Read", json!({"path": "x"}))).await).unwrap();
    assert_eq!(d, "deny");
    assert!(reason.contains("file_path"), "{reason}");
    let (d, reason) = decision(&hook(&h, h.payload("Write", json!({"file_path": 7}))).await).unwrap();
    assert_eq!(d, "deny");
    assert!(reason.contains("not a string"), "{reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_input_blocks_with_exit_code_2() {
    let h = Harness::new(|_| {}).await;
    for (stdin, want) in [
        ("{\"tool_name\": \"Read\", \"tool_input\": {\"file_path\": \"/w/a\"".to_string(), "not a Claude Code hook call"),
        ("".to_string(), "not a Claude Code hook call"),
        ("[1, 2]".to_string(), "not a Claude Code hook call"),
        (json!({"hook_event_name": "PostToolUse", "tool_name": "Read", "tool_input": {}}).to_string(), "PreToolUse hooks only"),
    ] {
        let out = hook(&h, stdin.clone()).await;
        assert_eq!(out.status.code(), Some(2), "{stdin:?}");
        assert!(out.stdout.is_empty());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(want), "{stdin:?}: {stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_or_garbled_daemon_is_a_denial() {
    let h = Harness::new(|_| {}).await;
    let payload = h.payload("Read", json!({"file_path": h.path("notes/todo.md")}));
    let dir = tempfile::tempdir().unwrap();
    let dead = dir.path().join("gone.sock");
    let out = tokio::task::spawn_blocking({
        let (p, c, d) = (payload.clone(), h.config_file.clone(), dead.clone());
        move || hook_with(&d, &c, &p, &[])
    })
    .await
    .unwrap();
    let (d, reason) = decision(&out).unwrap();
    assert_eq!(d, "deny");
    assert!(reason.contains("cannot connect to the Pincer daemon"), "{reason}");
    // A server that answers every line with garbage.
    let garbled = dir.path().join("garbage.sock");
    let listener = tokio::net::UnixListener::bind(&garbled).unwrap();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(async move {
                use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
                let (r, mut w) = s.into_split();
                let mut lines = tokio::io::BufReader::new(r).lines();
                while let Ok(Some(_)) = lines.next_line().await {
                    let _ = w.write_all(b"{\"v\":1,\"reply\":\"decision\",\"granted\":\"yes\"}\n").await;
                }
            });
        }
    });
    let out = tokio::task::spawn_blocking({
        let (p, c) = (payload.clone(), h.config_file.clone());
        move || hook_with(&garbled, &c, &p, &[])
    })
    .await
    .unwrap();
    let (d, reason) = decision(&out).unwrap();
    assert_eq!(d, "deny");
    assert!(reason.contains("unreadable reply"), "{reason}");
    assert!(!h.kernel_allows("notes/todo.md", Access::Read));
}

/// Waits for a question whose worker request is waiting, as the user.
async fn waiting_question(h: &Harness) -> u64 {
    for _ in 0..1000 {
        let mut c = Client::connect(&h.config.socket).await.unwrap();
        if let Reply::Pending { questions } = c.call(Call::Pending).await.unwrap() {
            if let Some(q) = questions.into_iter().find(|q| q.waiting) {
                return q.id;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("no waiting question");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hook_waits_for_the_users_answer_to_an_escalation() {
    let h = Harness::new(|_| {}).await;
    // The persona's policy asks the user before this write.
    let payload = h.payload("Write", json!({"file_path": h.path("projects/ledger/Cargo.toml"), "content": "[package]\n"}));
    eprintln!("payload: {payload}");
    let (s, c) = (h.config.socket.clone(), h.config_file.clone());
    let pending = tokio::task::spawn_blocking(move || hook_with(&s, &c, &payload, &[]));
    let q = waiting_question(&h).await;
    assert!(!h.kernel_allows("projects/ledger/Cargo.toml", Access::Write), "nothing is granted while the user is asked");
    let mut c = Client::connect(&h.config.socket).await.unwrap();
    assert!(matches!(c.call(Call::Answer { question: q, approve: true, scope: Default::default(), host: None }).await.unwrap(), Reply::Ok { .. }));
    let out = pending.await.unwrap();
    eprintln!("question {q} approved by the user; hook output: {}", String::from_utf8_lossy(&out.stdout));
    let (d, reason) = decision(&out).unwrap();
    assert_eq!(d, "allow", "{reason}");
    assert!(h.kernel_allows("projects/ledger/Cargo.toml", Access::Write));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_escalation_past_the_hooks_deadline_is_a_denial() {
    let h = Harness::new(|_| {}).await;
    let payload = h.payload("Write", json!({"file_path": h.path("projects/ledger/Cargo.toml"), "content": "[package]\n"}));
    let (s, c) = (h.config.socket.clone(), h.config_file.clone());
    let out = tokio::task::spawn_blocking(move || hook_with(&s, &c, &payload, &["--timeout", "1"])).await.unwrap();
    let (d, reason) = decision(&out).unwrap();
    assert_eq!(d, "deny");
    assert!(reason.contains("no decision from the daemon within 1 s"), "{reason}");
    assert!(!h.kernel_allows("projects/ledger/Cargo.toml", Access::Write));
}
