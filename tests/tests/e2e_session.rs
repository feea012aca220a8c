//! End to end under the real BPF LSM (inside the VM, as root): the `pincer` daemon with the
//! offline twin, `pincer run` starting a real worker shell as uid 1000 in its session
//! cgroup, the request tool, escalation to the user, revocation at exit, kernel misses as
//! implicit requests, and a daemon crash and restart in the middle of a session.

use pincer::kernel::{Enforcer, ObjectId, Scope};
use pincer_tests::worker::{chown_tree, Daemon, DaemonSettings};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const PINCER: &str = env!("CARGO_BIN_EXE_pincer");
const WORKER_UID: &str = "1000";

/// Trusted history and policies of the shipped software-dev persona.
const HISTORY: &str = include_str!("../../corpus/software-dev/history.jsonl");
const POLICIES: &str = include_str!("../../corpus/software-dev/policies.jsonl");
/// A few of its workspace files (path, content).
const FILES: &[(&str, &str)] = &[
    ("notes/todo.md", include_str!("../../corpus/software-dev/workspace/notes/todo.md")),
    ("notes/standup.md", include_str!("../../corpus/software-dev/workspace/notes/standup.md")),
    ("secrets/prod.env", include_str!("../../corpus/software-dev/workspace/secrets/prod.env")),
    ("projects/ledger/Cargo.toml", include_str!("../../corpus/software-dev/workspace/projects/ledger/Cargo.toml")),
];
/// `[hold]` bounds for tests of what a hold decides rather than of its bounds: a first
/// decision builds the session's twin and compiles the content detectors it needs (the
/// tests' daemons do not warm up), which takes about 1 s of emulated CPU here and more on a
/// slower or busier host, past the shipped `locked_max_ms` of 1 s.
const ROOMY_HOLDS: &str = "max_ms = 30000\nlocked_max_ms = 15000\n";
const TODO_PROMPT: &str = "Update my todo: tick off the release notes item and add 'look at the ledger backups'.";

/// A daemon with its own socket, state, pins and cgroup parent, and a workspace.
struct Env {
    dir: PathBuf,
    ws: PathBuf,
    daemon: Daemon,
}

impl Env {
    fn new(name: &str, on_miss: &'static str) -> Self {
        let dir = pincer_tests::fresh_dir(name);
        let ws = dir.join("ws");
        for (rel, text) in FILES {
            pincer_tests::write_file(&ws.join(rel), text);
        }
        chown_tree(&ws, 1000);
        // Also makes `dir` reachable for the worker (uid 1000): socket and workspace.
        let daemon = Daemon::start(Path::new(PINCER), &dir, &DaemonSettings { on_miss, escalation_timeout_secs: 60 });
        let env = Env { dir, ws, daemon };
        let h = env.dir.join("history.jsonl");
        let p = env.dir.join("policies.jsonl");
        std::fs::write(&h, HISTORY).unwrap();
        std::fs::write(&p, POLICIES).unwrap();
        let out = env.pincer(&["import", "--history", h.to_str().unwrap(), "--policies", p.to_str().unwrap(), "--uid", WORKER_UID]);
        assert!(out.status.success(), "import: {}", text_of(&out));
        env
    }

    fn pincer(&self, args: &[&str]) -> Output {
        self.daemon.pincer(args)
    }

    /// `pincer run` of a worker shell script, started in the background.
    fn spawn_worker(&self, prompt: &str, script: &str) -> Child {
        self.spawn_worker_in("enforce", prompt, script)
    }

    /// [`Env::spawn_worker`] in a session of `mode` (`enforce` or `shadow`).
    fn spawn_worker_in(&self, mode: &str, prompt: &str, script: &str) -> Child {
        let script = format!("P={PINCER}\nW={}\n{script}", self.ws.display());
        Command::new(PINCER)
            .args(["run", "--mode", mode, "--root", self.ws.to_str().unwrap(), "--user", WORKER_UID, "--prompt", prompt, "--", "/bin/sh", "-c", &script])
            .env("PINCER_SOCKET", &self.daemon.socket)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start pincer run")
    }

    fn run_worker(&self, prompt: &str, script: &str) -> String {
        self.run_worker_in("enforce", prompt, script)
    }

    fn run_worker_in(&self, mode: &str, prompt: &str, script: &str) -> String {
        let out = self.spawn_worker_in(mode, prompt, script).wait_with_output().unwrap();
        let text = text_of(&out);
        println!("{text}");
        assert!(out.status.success(), "pincer run failed: {text}");
        text
    }

    fn audit(&self) -> String {
        self.daemon.audit()
    }
}

fn text_of(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn cgroup_id_of(run_output: &str) -> u64 {
    let after = run_output.split("cgroup_id ").nth(1).expect("pincer run prints the cgroup id");
    after.split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
}

/// Waits until `done`, failing the test with `what` after 60 s: a bound far above any
/// decision, since a held access that is never answered waits for good.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(60), "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A process (in any PID namespace) whose command line has an argument ending in `suffix`.
fn process_with_arg(suffix: &str) -> Option<i32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: i32 = e.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
        cmdline.split(|b| *b == 0).any(|a| a.ends_with(suffix.as_bytes())).then_some(pid)
    })
}

fn lines_with<'a>(text: &'a str, tag: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.starts_with(tag)).collect()
}

#[test]
fn worker_gets_granted_resource_and_is_denied_secret_under_the_kernel() {
    let env = Env::new("e2e-grant", "record");
    let out = env.run_worker(
        TODO_PROMPT,
        r#"
cat $W/notes/todo.md >/dev/null 2>&1 && echo "R before: read" || echo "R before: denied"
$P request $W/notes/todo.md --access read --reason "read the todo to update it" && echo "R request todo: granted" || echo "R request todo: denied"
cat $W/notes/todo.md >/dev/null 2>&1 && echo "R after: read" || echo "R after: denied"
cp $W/notes/todo.md $TMPDIR/todo-copy-$$ 2>/dev/null && echo "R cp: ok" || echo "R cp: denied"
cat $W/notes/todo.md >> $W/notes/todo.md 2>/dev/null && echo "R write: ok" || echo "R write: denied"
$P request $W/secrets/prod.env --access read --reason "the todo says to check it" && echo "R request secret: granted" || echo "R request secret: denied"
cat $W/secrets/prod.env >/dev/null 2>&1 && echo "R secret: read" || echo "R secret: denied"
ln -s $W/secrets/prod.env $TMPDIR/link-$$ 2>/dev/null; cat $TMPDIR/link-$$ >/dev/null 2>&1 && echo "R secret via link: read" || echo "R secret via link: denied"
"#,
    );
    assert_eq!(
        lines_with(&out, "R "),
        [
            "R before: denied",
            "R request todo: granted",
            "R after: read",
            "R cp: ok",
            "R write: denied",
            "R request secret: denied",
            "R secret: denied",
            "R secret via link: denied",
        ]
    );
    // The read grant, and the creator's grants on the copy and the symlink it made in its
    // scratch.
    assert!(out.contains("3 grants revoked"), "{out}");
    let audit = env.audit();
    assert!(audit.contains("\"event\":\"decision\"") && audit.contains("\"outcome\":\"grant\""), "{audit}");
}

#[test]
fn grants_are_revoked_and_the_cgroup_removed_when_the_worker_exits() {
    let env = Env::new("e2e-revoke", "record");
    let out = env.run_worker(TODO_PROMPT, "$P request $W/notes/todo.md --access read && cat $W/notes/todo.md >/dev/null && echo R-read");
    assert!(out.contains("R-read"), "{out}");
    let id = cgroup_id_of(&out);
    let enforcer = Enforcer::reuse(env.daemon.pin_dir()).expect("open the daemon's pinned maps");
    let todo = ObjectId::of_path(&env.ws.join("notes/todo.md")).unwrap();
    assert_eq!(enforcer.granted_bits(id, todo, Scope::Exact).unwrap(), 0, "grant revoked at exit");
    let cg = out.split("(cgroup ").nth(1).unwrap().split(',').next().unwrap();
    assert!(!Path::new(cg).exists(), "cgroup {cg} removed");
}

#[test]
fn a_gated_worker_is_refused_control_calls_and_other_sessions() {
    let env = Env::new("e2e-refuse", "record");
    // A second session the worker will try to use.
    let other = env.spawn_worker("Summarize my standup notes.", "sleep 30");
    let sessions = loop {
        let o = env.pincer(&["pending"]);
        assert!(o.status.success(), "{}", text_of(&o));
        let log = env.audit();
        if log.contains("session_start") {
            break log;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let other_id = sessions.split("\"session\":\"").nth(1).unwrap().split('"').next().unwrap().to_string();
    let out = env.run_worker(
        TODO_PROMPT,
        &format!(
            r#"
$P approve 1 2>&1 | grep -q refused && echo "R approve: refused"
$P prompt "also read secrets/prod.env" 2>&1 | grep -q refused && echo "R prompt: refused"
$P pending 2>&1 | grep -q refused && echo "R pending: refused"
$P request $W/notes/todo.md --access read --session {other_id} 2>&1 | grep -q refused && echo "R other session: refused"
"#
        ),
    );
    assert_eq!(lines_with(&out, "R "), ["R approve: refused", "R prompt: refused", "R pending: refused", "R other session: refused"]);
    assert!(env.audit().matches("\"event\":\"refusal\"").count() >= 4);
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(other.id() as i32, libc::SIGTERM) };
    let o = other.wait_with_output().unwrap();
    assert!(text_of(&o).contains("ended"), "signal forwarded, session ended: {}", text_of(&o));
}

#[test]
fn an_escalated_request_waits_for_the_users_approval_then_the_write_succeeds() {
    let env = Env::new("e2e-escalate", "record");
    let worker = env.spawn_worker(
        TODO_PROMPT,
        r#"
$P request $W/projects/ledger/Cargo.toml --access write --reason "bump a dependency" && echo "R request: granted" || echo "R request: denied"
echo "bumped = 1" >> $W/projects/ledger/Cargo.toml && echo "R write: ok" || echo "R write: denied"
"#,
    );
    let start = Instant::now();
    let id = loop {
        let o = env.pincer(&["pending", "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
        if let Some(q) = v.as_array().into_iter().flatten().find(|q| q["waiting"] == true) {
            break q["id"].as_u64().unwrap();
        }
        assert!(start.elapsed() < Duration::from_secs(60), "no question appeared");
        std::thread::sleep(Duration::from_millis(50));
    };
    let o = env.pincer(&["approve", &id.to_string()]);
    assert!(o.status.success(), "{}", text_of(&o));
    let out = text_of(&worker.wait_with_output().unwrap());
    println!("{out}");
    assert_eq!(lines_with(&out, "R "), ["R request: granted", "R write: ok"]);
}

/// A reach denial comes to the daemon as a record of its own and is audited naming its
/// target: the worker's write to `cgroup.freeze` of the user's delegated cgroup (outside
/// its session) is refused, and the audit names the file.
#[test]
fn a_reach_denial_is_audited_naming_what_it_refused() {
    let env = Env::new("e2e-reach", "decide");
    let slice = pincer_tests::TestCgroup::new("e2e-reach-user");
    for f in ["", "cgroup.freeze"] {
        pincer_tests::own(&slice.path.join(f));
    }
    let freeze = slice.path.join("cgroup.freeze");
    let out = env.run_worker(TODO_PROMPT, &format!("echo 1 > {} 2>/dev/null && echo 'R freeze: written' || echo 'R freeze: refused'", freeze.display()));
    assert_eq!(lines_with(&out, "R "), ["R freeze: refused"]);
    assert_eq!(std::fs::read_to_string(&freeze).unwrap().trim(), "0", "the user's cgroup is not frozen");
    let start = Instant::now();
    loop {
        let audit = env.audit();
        let denied = audit.lines().find(|l| l.contains("session containment (cgroup_write") && l.contains("cgroup.freeze"));
        if let Some(line) = denied {
            assert!(line.contains("\"outcome\":\"deny\""), "{line}");
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "no audit entry names the refused cgroup file:\n{audit}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Whether the kernel holds misses (the held `file_open` is attached: Linux 6.12).
fn kernel_holds(env: &Env) -> bool {
    Enforcer::reuse(env.daemon.pin_dir()).expect("reuse the pinned program").holds_misses()
}

#[test]
fn a_kernel_miss_is_decided_and_the_workers_retry_succeeds() {
    let env = Env::new("e2e-miss", "decide");
    let out = env.run_worker(
        TODO_PROMPT,
        r#"
cat $W/notes/todo.md >/dev/null 2>&1 && echo "R first: read" || echo "R first: denied"
i=0; while [ $i -lt 100 ]; do cat $W/notes/todo.md >/dev/null 2>&1 && break; i=$((i+1)); sleep 0.1; done
[ $i -lt 100 ] && echo "R retry: read" || echo "R retry: denied"
cat $W/secrets/prod.env >/dev/null 2>&1; sleep 1; cat $W/secrets/prod.env >/dev/null 2>&1 && echo "R secret: read" || echo "R secret: denied"
"#,
    );
    // Where the kernel holds a miss, the first touch waits for the grant and succeeds;
    // elsewhere it is denied at once and the retry succeeds.
    let first = if kernel_holds(&env) { "R first: read" } else { "R first: denied" };
    assert_eq!(lines_with(&out, "R "), [first, "R retry: read", "R secret: denied"]);
    assert!(env.audit().contains("\"source\":\"miss\""));
}

/// The hold (Linux 6.12): a real tool's first touch of a file the twin grants succeeds on
/// its first try, a file it denies fails with EACCES after the decision, 64 concurrent
/// first touches are all decided, and each hold is audited with its wait.
#[test]
fn a_held_first_touch_succeeds_when_granted_and_fails_when_denied() {
    let mut env = Env::new("e2e-hold", "decide");
    if !kernel_holds(&env) {
        println!("this kernel does not hold misses (no held file_open); covered by the retry test");
        return;
    }
    env.daemon.reconfigure(ROOMY_HOLDS);
    for i in 0..64 {
        pincer_tests::write_file(&env.ws.join(format!("notes/part-{i}.md")), &format!("part {i} of the todo\n"));
    }
    chown_tree(&env.ws, 1000);
    let out = env.run_worker(
        TODO_PROMPT,
        r#"
cat $W/notes/todo.md >/dev/null && echo "R first: read" || echo "R first: denied"
cat $W/secrets/prod.env >/dev/null 2>&1 && echo "R secret: read" || echo "R secret: denied"
i=0; while [ $i -lt 64 ]; do (cat $W/notes/part-$i.md >/dev/null 2>&1 && echo "P ok" || echo "P denied") & i=$((i+1)); done; wait
"#,
    );
    assert_eq!(lines_with(&out, "R "), ["R first: read", "R secret: denied"]);
    let parts = lines_with(&out, "P ");
    assert_eq!(parts.len(), 64, "every concurrent first touch ended: {out}");
    assert!(parts.iter().all(|l| *l == "P ok"), "every concurrent first touch was granted on its first try: {parts:?}");
    // The session's log of the first touch: the miss, its decision and the hold.
    let log = env.pincer(&["log"]);
    let log = text_of(&log);
    let about = |l: &&str| l.contains("todo.md") || l.contains("prod.env");
    let shown: Vec<&str> = log.lines().filter(about).chain(log.lines().filter(|l| l.contains("hold ")).take(2)).collect();
    // Past the test harness's capture: the log is part of the run's record.
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!("pincer log, the held first touches of todo.md and of the secret:\n  {}\n", shown.join("\n  ")).as_bytes(),
    );
    let audit = env.audit();
    let holds: Vec<&str> = audit.lines().filter(|l| l.contains("\"event\":\"hold\"")).collect();
    assert!(holds.len() >= 66, "each held miss is audited ({}):\n{audit}", holds.len());
    assert!(holds.iter().any(|l| l.contains("\"outcome\":\"deny\"") && l.contains("not granted")), "{audit}");
    assert!(holds.iter().any(|l| l.contains("\"outcome\":\"grant\"") && l.contains("waited")), "{audit}");
}

/// Held changes of names (Linux 6.12), as real tools make them: a new file (`sh`'s `>`), a
/// save by rename over the file (`mv`) and a new folder (`mkdir`) that the twin grants
/// succeed on their first try; a removal it denies (`rm`) fails with EACCES after its
/// decision; a move between two folders, whose hook holds the filesystem's rename lock, is
/// never held. Each first try would be denied without its hold.
#[test]
fn held_creations_renames_and_removals_are_decided_before_the_syscall_returns() {
    let mut env = Env::new("e2e-hold-names", "decide");
    if !kernel_holds(&env) {
        println!("this kernel does not hold misses (no held programs)");
        return;
    }
    env.daemon.reconfigure(ROOMY_HOLDS);
    let out = env.run_worker(
        TODO_PROMPT,
        r#"
printf '%s\n' '- [x] release notes' '- [ ] look at the ledger backups' > $W/notes/todo.md.new && echo "R create: ok" || echo "R create: denied"
mv $W/notes/todo.md.new $W/notes/todo.md && echo "R save by rename: ok" || echo "R save by rename: denied"
rm -f $W/notes/standup.md 2>/dev/null && echo "R remove: ok" || echo "R remove: denied"
mv $W/notes/todo.md $W/secrets/todo.md 2>/dev/null && echo "R move out: ok" || echo "R move out: denied"
"#,
    );
    assert_eq!(lines_with(&out, "R "), ["R create: ok", "R save by rename: ok", "R remove: denied", "R move out: denied"]);
    let todo = std::fs::read_to_string(env.ws.join("notes/todo.md")).unwrap();
    assert!(todo.contains("ledger backups"), "the save replaced the file: {todo}");
    assert!(env.ws.join("notes/standup.md").exists(), "the denied removal removed nothing");
    let audit = env.audit();
    let holds: Vec<&str> = audit.lines().filter(|l| l.contains("\"event\":\"hold\"")).collect();
    // create, the rename's write on the file replaced, the removal.
    assert!(holds.len() >= 3, "each held change of a name is audited ({}):\n{audit}", holds.len());
    assert!(holds.iter().any(|l| l.contains("\"outcome\":\"deny\"") && l.contains("not granted")), "{audit}");
    // A new folder: inode_mkdir cannot sleep, so path_mkdir holds it (6.12 with
    // CONFIG_SECURITY_PATH); the folder the prompt asks for is made on the first try.
    let out = env.run_worker(
        "Make a folder notes/archive for my old notes.",
        r#"
mkdir $W/notes/archive && echo "R mkdir: ok" || echo "R mkdir: denied"
mkdir $W/secrets/stash 2>/dev/null && echo "R mkdir in secrets: ok" || echo "R mkdir in secrets: denied"
"#,
    );
    assert_eq!(lines_with(&out, "R "), ["R mkdir: ok", "R mkdir in secrets: denied"]);
    assert!(env.ws.join("notes/archive").is_dir() && !env.ws.join("secrets/stash").exists());
    let log = text_of(&env.pincer(&["log"]));
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!("pincer log, held changes of names:\n  {}\n", log.lines().filter(|l| l.contains("notes/") || l.contains("secrets/") || l.contains("hold ")).collect::<Vec<_>>().join("\n  ")).as_bytes(),
    );
}

/// A hold never becomes the way in: the daemon stopped mid-hold keeps the worker waiting
/// (a process outside every session does not wait), SIGKILL ends a held process, and the
/// daemon killed during a hold gives EACCES, never data.
#[test]
fn a_held_access_fails_closed_when_the_daemon_stops_or_dies() {
    let mut env = Env::new("e2e-hold-dead", "decide");
    if !kernel_holds(&env) {
        println!("this kernel does not hold misses (no held file_open)");
        return;
    }
    let flags = env.dir.join("shared");
    // The session opens while the daemon runs; its worker touches the files only after the
    // daemon is stopped.
    let worker = env.spawn_worker(
        TODO_PROMPT,
        &format!(
            r#"
: > {f}/ready
while [ ! -e {f}/go ]; do sleep 0.05; done
cat $W/notes/standup.md >/dev/null 2>&1 &
(echo x > $W/projects/ledger/new.md) 2>/dev/null && echo "R create after death: made" || echo "R create after death: denied" &
cat $W/notes/todo.md 2>&1 && echo "R after death: read" || echo "R after death: denied"
wait
: > {f}/done
"#,
            f = flags.display()
        ),
    );
    wait_until("the worker is ready", || flags.join("ready").exists());
    let pid = env.daemon.pid().expect("daemon runs") as i32;
    // Stop the daemon: no miss is decided while it is stopped.
    // SAFETY: kill(2) on the test's own child.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    // Outside every session, the same file opens although no daemon answers.
    let mut outside = Command::new("/bin/cat").arg(env.ws.join("notes/todo.md")).stdout(Stdio::null()).spawn().unwrap();
    let mut status = None;
    wait_until("a process outside every session never waits", || {
        status = outside.try_wait().unwrap();
        status.is_some()
    });
    assert!(status.unwrap().success(), "the outside read succeeds");
    std::fs::write(flags.join("go"), "").unwrap();
    // Both cats are held now (the stopped daemon reads no request). The worker runs in its
    // own PID namespace: find the first cat by its command line.
    let mut victim = None;
    wait_until("the worker's first cat runs", || {
        victim = process_with_arg("notes/standup.md");
        victim.is_some()
    });
    let vpid = victim.unwrap();
    // SAFETY: kill(2) of the worker's process.
    unsafe { libc::kill(vpid, libc::SIGKILL) };
    let stat = format!("/proc/{vpid}/stat");
    wait_until("a held process dies on SIGKILL", || std::fs::read_to_string(&stat).map_or(true, |s| s.contains(") Z")));
    // Kill the stopped daemon: the held cat of todo.md gets EACCES, not the file.
    env.daemon.crash();
    wait_until("the held read ends when the daemon dies", || flags.join("done").exists());
    // `pincer run` ends its session through the daemon: start it again for that.
    env.daemon.restart();
    let out = text_of(&worker.wait_with_output().unwrap());
    println!("{out}");
    let mut lines = lines_with(&out, "R ");
    lines.sort();
    assert_eq!(lines, ["R after death: denied", "R create after death: denied"]);
    assert!(!out.contains("FOR UPDATE"), "no content of the file reached the worker: {out}");
    assert!(!env.ws.join("projects/ledger/new.md").exists(), "the held creation made nothing");
}

/// Restarts `env`'s daemon with `hold` lines added to its `[hold]` table and a model decider
/// whose endpoint, the listener returned, accepts calls and never answers: a decision that
/// reaches the model stays pending until the listener and its calls are dropped.
fn silent_model(env: &mut Env, hold: &str) -> std::net::TcpListener {
    pincer_tests::loopback_up();
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("a model endpoint that never answers");
    let port = silent.local_addr().unwrap().port();
    env.daemon.reconfigure(&format!(
        "{hold}[decider]\nbackend = \"openai\"\nendpoint = \"http://127.0.0.1:{port}/v1\"\nmodel = \"silent\"\ntimeout_secs = 120\n"
    ));
    silent
}

/// A held process dies on SIGKILL even after the daemon has read its thread's request (FUSE
/// then waits for the reply it owes): the daemon sees the pending SIGKILL and ends the
/// hold, long before `[hold] max_ms`. The decision is kept pending by a model endpoint that
/// accepts the call and never answers.
#[test]
fn a_held_process_dies_on_sigkill_while_its_decision_is_pending() {
    let mut env = Env::new("e2e-hold-kill", "decide");
    if !kernel_holds(&env) {
        println!("this kernel does not hold misses (no held file_open)");
        return;
    }
    let silent = silent_model(&mut env, "max_ms = 60000\n");
    // A file no rule of the user's names: its grant is not settled offline, so the model
    // is asked.
    pincer_tests::write_file(&env.ws.join("projects/ledger/NOTES.txt"), "ideas for the next sprint\n");
    chown_tree(&env.ws, 1000);
    let prompt = "Summarize projects/ledger/NOTES.txt for me.";
    let worker = env.spawn_worker(prompt, r#"cat $W/projects/ledger/NOTES.txt >/dev/null 2>&1; echo "R cat ended: $?""#);
    let mut held = None;
    wait_until("the worker's cat runs", || {
        held = process_with_arg("ledger/NOTES.txt");
        held.is_some()
    });
    let pid = held.unwrap();
    // The daemon read the request and asks the silent model: the cat stays held.
    silent.set_nonblocking(true).unwrap();
    let mut calls = Vec::new(); // kept open, unanswered, until the cat is dead
    let start = Instant::now();
    while calls.is_empty() {
        if let Ok((call, _)) = silent.accept() {
            calls.push(call);
        }
        assert!(start.elapsed() < Duration::from_secs(60), "the decision reached the model:\n{}", env.audit());
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    let stat = format!("/proc/{pid}/stat");
    assert!(std::fs::read_to_string(&stat).is_ok_and(|s| !s.contains(") Z")), "the cat is still held while its decision is pending");
    // SAFETY: kill(2) of the worker's held process.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let killed_at = Instant::now();
    wait_until("a held process dies on SIGKILL", || std::fs::read_to_string(&stat).map_or(true, |s| s.contains(") Z")));
    let died_after = killed_at.elapsed();
    assert!(died_after < Duration::from_secs(30), "died {died_after:?} after SIGKILL, before the 60 s bound");
    // Now the model call fails (a deny) and the decision's end is audited with the hold's.
    drop(calls);
    drop(silent);
    let out = text_of(&worker.wait_with_output().unwrap());
    println!("{out}\nthe held cat died {died_after:?} after SIGKILL");
    assert_eq!(lines_with(&out, "R "), ["R cat ended: 137"], "the cat was killed, not let through");
    wait_until("the hold's end is audited", || env.audit().contains("was killed"));
}

/// A session cannot keep the user's folders or files locked by holding accesses whose hooks
/// keep a lock (an attribute change here): with decisions that never come, one of two
/// concurrent ones waits `[hold] locked_max_ms` and the kernel does not hold the other at
/// all (one such hold per session), nor the next after them (the kernel keeps the session
/// quiet after a denied one), although `[hold] max_ms` is 60 s. The session's first
/// accesses come while its twin is still being built, before the daemon has seen any miss:
/// the kernel's count and quiet time and the bound the hold's server sets when the thread
/// arrives are what end the waits, whatever the daemon's speed.
#[test]
fn a_session_cannot_keep_the_users_files_locked_by_held_accesses() {
    let mut env = Env::new("e2e-hold-locked", "decide");
    if !kernel_holds(&env) {
        println!("this kernel does not hold misses (no held programs)");
        return;
    }
    let silent = silent_model(&mut env, "max_ms = 60000\nlocked_max_ms = 1000\n");
    for name in ["NOTES.txt", "IDEAS.txt"] {
        pincer_tests::write_file(&env.ws.join("projects/ledger").join(name), "ideas for the next sprint\n");
    }
    chown_tree(&env.ws, 1000);
    let prompt = "Make projects/ledger/NOTES.txt and projects/ledger/IDEAS.txt read-only for the group.";
    let start = Instant::now();
    let worker = env.spawn_worker(
        prompt,
        r#"
(chmod 644 $W/projects/ledger/NOTES.txt 2>/dev/null && echo "R notes: changed" || echo "R notes: denied") &
(chmod 644 $W/projects/ledger/IDEAS.txt 2>/dev/null && echo "R ideas: changed" || echo "R ideas: denied") &
wait
chmod 644 $W/projects/ledger/NOTES.txt 2>/dev/null && echo "R notes again: changed" || echo "R notes again: denied"
"#,
    );
    silent.set_nonblocking(true).unwrap();
    let mut calls = Vec::new(); // unanswered until the worker is done
    let waiter = std::thread::spawn(move || worker.wait_with_output().unwrap());
    while !waiter.is_finished() {
        if let Ok((call, _)) = silent.accept() {
            calls.push(call);
        }
        assert!(start.elapsed() < Duration::from_secs(30), "the worker still waits after 30 s (max_ms is 60 s, locked_max_ms 1 s):\n{}", env.audit());
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = text_of(&waiter.join().unwrap());
    println!("{out}");
    let mut lines = lines_with(&out, "R ");
    lines.sort();
    assert_eq!(lines, ["R ideas: denied", "R notes again: denied", "R notes: denied"]);
    // The waits ended by the bounds, whenever the daemon's decisions reach the model (which
    // never answers): on a slow machine that may be after the worker is done.
    let after = Instant::now();
    while calls.is_empty() && after.elapsed() < Duration::from_secs(20) {
        if let Ok((call, _)) = silent.accept() {
            calls.push(call);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!calls.is_empty(), "the decisions went to the model (so only the hold's bounds ended the waits)");
    // Now the model calls fail (denies): the holds' ends are audited with their waits.
    drop(calls);
    drop(silent);
    let mut waits = Vec::new();
    let held_waits = || -> Vec<f64> {
        env.audit()
            .lines()
            .filter(|l| l.contains("\"event\":\"hold\"") && l.contains("keeps a lock"))
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()?["latency_ms"].as_f64())
            .collect()
    };
    wait_until("the hold is audited", || {
        waits = held_waits();
        !waits.is_empty()
    });
    // Every miss is decided by now or soon: a third hold would be audited meanwhile.
    std::thread::sleep(Duration::from_secs(2));
    waits = held_waits();
    assert_eq!(
        waits.len(),
        1,
        "one hold: the concurrent access was not held at all (the kernel's one per session), nor the next (the kernel's quiet time after a denied one): {waits:?}\n{}",
        env.audit()
    );
    assert!(waits[0] >= 500.0 && waits[0] < 5000.0, "the held access waited locked_max_ms: {waits:?}");
}

/// One session's holds are bounded (`[hold] per_session`): past its share a miss is denied
/// at once while another session's first touch is still held and granted, and the share is
/// given back when the holds end.
#[test]
fn a_sessions_holds_are_bounded_and_other_sessions_are_still_held() {
    let mut env = Env::new("e2e-hold-share", "decide");
    if !kernel_holds(&env) {
        println!("this kernel does not hold misses (no held file_open)");
        return;
    }
    for i in 0..16 {
        pincer_tests::write_file(&env.ws.join(format!("notes/part-{i}.md")), &format!("part {i} of the todo\n"));
    }
    chown_tree(&env.ws, 1000);
    env.daemon.reconfigure(&format!("per_session = 4\n{ROOMY_HOLDS}"));
    let f = env.dir.join("shared");
    let greedy = env.spawn_worker(
        TODO_PROMPT,
        &format!(
            r#"
: > {f}/a-ready
while [ ! -e {f}/go ]; do sleep 0.05; done
i=0; while [ $i -lt 12 ]; do (cat $W/notes/part-$i.md >/dev/null 2>&1 && echo "P ok" || echo "P denied"; : > {f}/a-end-$i) & i=$((i+1)); done
wait
for i in 12 13 14 15; do cat $W/notes/part-$i.md >/dev/null 2>&1 && echo "Q ok" || echo "Q denied"; done
"#,
            f = f.display()
        ),
    );
    let other = env.spawn_worker(
        TODO_PROMPT,
        &format!(
            r#"
: > {f}/b-ready
while [ ! -e {f}/go ]; do sleep 0.05; done
cat $W/notes/todo.md >/dev/null 2>&1 && echo "B first: read" || echo "B first: denied"
"#,
            f = f.display()
        ),
    );
    wait_until("both workers are ready", || f.join("a-ready").exists() && f.join("b-ready").exists());
    let pid = env.daemon.pid().expect("daemon runs") as i32;
    // SAFETY: kill(2) on the test's own child: no miss is decided while it is stopped.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    std::fs::write(f.join("go"), "").unwrap();
    let ended = || (0..12).filter(|i| f.join(format!("a-end-{i}")).exists()).count();
    // Only the session's share waits; the rest is denied without waiting for the daemon.
    wait_until("the misses past the session's share end at once", || ended() >= 8);
    wait_until("the other session's first touch waits in a hold", || process_with_arg("notes/todo.md").is_some());
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let a = text_of(&greedy.wait_with_output().unwrap());
    let b = text_of(&other.wait_with_output().unwrap());
    println!("{a}\n{b}");
    let p = lines_with(&a, "P ");
    let ok = p.iter().filter(|l| **l == "P ok").count();
    assert_eq!(p.len(), 12, "every first touch ended: {a}");
    assert!((1..=4).contains(&ok), "at most the share of 4 was held (and granted), the rest denied at once: {p:?}");
    assert_eq!(lines_with(&a, "Q "), ["Q ok"; 4], "the share is given back when the holds end: {a}");
    assert_eq!(lines_with(&b, "B "), ["B first: read"], "the other session was held and granted: {b}");
}

#[test]
fn a_daemon_crash_keeps_enforcement_and_a_restarted_daemon_resumes_the_session() {
    let mut env = Env::new("e2e-restart", "record");
    let flag = env.dir.join("shared/go");
    let dir = env.dir.join("shared").display().to_string();
    // The worker (uid 1000) marks its first grant here; the daemon writes the audit entry
    // before it replies, so the audit alone cannot tell that the reply reached the worker.
    let flags = env.dir.join("shared/flags");
    std::fs::create_dir(&flags).unwrap();
    std::fs::set_permissions(&flags, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let worker = env.spawn_worker(
        TODO_PROMPT,
        &format!(
            r#"
$P request $W/notes/todo.md --access read >/dev/null && echo "R granted before crash"
: > {dir}/flags/granted
while [ ! -e {dir}/crashed ]; do sleep 0.1; done
cat $W/notes/todo.md >/dev/null 2>&1 && echo "R grant kept: read" || echo "R grant kept: denied"
cat $W/secrets/prod.env >/dev/null 2>&1 && echo "R secret while down: read" || echo "R secret while down: denied"
$P request $W/notes/standup.md --access read >/dev/null 2>&1 && echo "R request while down: granted" || echo "R request while down: denied"
while [ ! -e {dir}/go ]; do sleep 0.1; done
$P request $W/notes/todo.md --access write --reason "tick the item off" && echo "R request after restart: granted" || echo "R request after restart: denied"
$P request $W/secrets/prod.env --access read && echo "R secret after restart: granted" || echo "R secret after restart: denied"
"#
        ),
    );
    // Wait until the worker holds its first grant and has its reply, then crash the daemon.
    let start = Instant::now();
    while !flags.join("granted").exists() {
        assert!(start.elapsed() < Duration::from_secs(60), "no grant before the crash");
        std::thread::sleep(Duration::from_millis(50));
    }
    env.daemon.crash();
    std::fs::write(env.dir.join("shared/crashed"), "").unwrap();
    // Let the worker probe while the daemon is down.
    std::thread::sleep(Duration::from_secs(3));
    env.daemon.restart();
    std::fs::write(&flag, "").unwrap();
    let out = text_of(&worker.wait_with_output().unwrap());
    println!("{out}");
    assert_eq!(
        lines_with(&out, "R "),
        [
            "R granted before crash",
            "R grant kept: read",
            "R secret while down: denied",
            "R request while down: denied",
            "R request after restart: granted",
            "R secret after restart: denied",
        ]
    );
    assert!(env.audit().contains("session_resume"));
    assert!(out.contains("ended"), "the restarted daemon ended the session: {out}");
}

/// A file of the user's outside every named root, in `/tmp` (a place gated like a root).
fn users_tmp_file(env: &Env) -> PathBuf {
    let outside = PathBuf::from(format!("{}-outside", env.dir.display()));
    pincer_tests::write_file(&outside.join("notes.txt"), "the user's own notes");
    chown_tree(&outside, 1000);
    outside.join("notes.txt")
}

#[test]
fn default_containment_gates_tmp_gives_a_scratch_dir_and_refuses_never_grantable_paths() {
    let env = Env::new("e2e-contain", "decide");
    pincer_tests::write_file(&env.ws.join(".git/config"), "[core]\n");
    std::fs::create_dir_all(env.ws.join(".git/hooks")).unwrap();
    chown_tree(&env.ws, 1000);
    let notes = users_tmp_file(&env);
    let out = env.run_worker(
        TODO_PROMPT,
        &format!(
            r#"
cat {notes} >/dev/null 2>&1 && echo "R tmp file: read" || echo "R tmp file: denied"
[ -n "$TMPDIR" ] && echo scratch > $TMPDIR/s && cat $TMPDIR/s >/dev/null && echo "R scratch: used" || echo "R scratch: denied"
$P request $W/.git/config --access write --reason "set the remote" 2>&1 | grep -q never-grantable && echo "R git config: never" || echo "R git config: other"
$P request $W/.git/hooks/pre-commit --access create --reason "add a hook" 2>&1 | grep -q never-grantable && echo "R hook: never" || echo "R hook: other"
(echo x >> $W/.git/config) 2>/dev/null && echo "R git config write: done" || echo "R git config write: denied"
"#,
            notes = notes.display()
        ),
    );
    assert_eq!(
        lines_with(&out, "R "),
        ["R tmp file: denied", "R scratch: used", "R git config: never", "R hook: never", "R git config write: denied"]
    );
    assert!(env.audit().contains("never-grantable"), "the audit says why");
    assert_eq!(std::fs::read_to_string(env.ws.join(".git/config")).unwrap(), "[core]\n");
}

#[test]
fn a_shadow_session_lets_misses_through_and_audits_them_but_never_grantable_paths_stay_denied() {
    let env = Env::new("e2e-shadow", "decide");
    pincer_tests::write_file(&env.ws.join(".git/config"), "[core]\n");
    std::fs::create_dir_all(env.ws.join(".git/hooks")).unwrap();
    chown_tree(&env.ws, 1000);
    let out = env.run_worker_in(
        "shadow",
        TODO_PROMPT,
        r#"
cat $W/secrets/prod.env >/dev/null 2>&1 && echo "R secret: read" || echo "R secret: denied"
(echo x >> $W/.git/config) 2>/dev/null && echo "R git config write: done" || echo "R git config write: denied"
touch $W/.git/hooks/pre-commit 2>/dev/null && echo "R hook create: done" || echo "R hook create: denied"
sleep 3
"#,
    );
    // The kernel refuses the two writes at once; the sleep keeps the session open while
    // the daemon, still deciding the first miss (1.6 s under TCG on 6.1), audits them: a
    // miss the daemon takes up after its session ended is audited without the session.
    assert_eq!(lines_with(&out, "R "), ["R secret: read", "R git config write: denied", "R hook create: denied"]);
    let audit = env.audit();
    assert!(audit.contains("shadow mode"), "the audit marks what enforcing would deny: {audit}");
    assert!(audit.contains("never-grantable"), "{audit}");
    assert!(!env.ws.join(".git/hooks/pre-commit").exists());
    // When it ended, its accesses became one history task with its prompt.
    let log = env.pincer(&["log"]);
    let log = text_of(&log);
    // Written past the test harness's capture, so the VM console shows it.
    let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("pincer log of the shadow session:\n{log}\n").as_bytes());
    assert!(log.contains("ShadowHistory") && log.contains("recorded as a history task"), "{log}");
    let store = pincer::store::Store::open(env.dir.join("state/state.db")).expect("open the trusted store");
    let user = pincer::daemon::users::by_uid(1000).name;
    let state = store.load_state(&user).unwrap();
    let session = log.lines().find(|l| l.contains("ShadowHistory")).and_then(|l| l.split('[').nth(1)).and_then(|r| r.split(']').next()).expect("the session id");
    let task = state.tasks.iter().find(|t| t.session == session).unwrap_or_else(|| panic!("no history task {session}: {state:?}"));
    assert_eq!(task.prompts, [TODO_PROMPT]);
    let paths: Vec<&str> = task.accesses.iter().map(|(a, _)| a.path.as_str()).collect();
    assert!(paths.contains(&"secrets/prod.env"), "the kernel's report of the shadow read is history: {paths:?}");
    assert!(!paths.iter().any(|p| p.starts_with(".git")), "never-grantable misses are not history: {paths:?}");
}
