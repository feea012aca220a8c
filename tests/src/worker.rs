//! A scripted worker of real processes that replays corpus sample sessions under a running
//! `pincer` daemon: for each request step whose `needs` were met it asks with `pincer
//! request` and, if granted, performs the access with a real program (busybox `cat`, `ls`,
//! `cp`, `rm`, `mkdir`, `rmdir`, a shell redirection), inside the session's cgroup as an
//! unprivileged user started by `pincer run`. Used by the demo (`cargo xtask demo`) and by
//! the end-to-end replay test.
//!
//! The script reports each step on its standard output as `STEP <index> <asked> <granted>
//! <done>` (each 0 or 1) and, when asked to, tries the sample's monitored access without a
//! grant at the end of a session in which it did not happen, reporting `PROBE done` or
//! `PROBE refused <message>`.

use pincer::access::Access;
use pincer::eval::corpus::{same_path, PathAccess, SetupOp, Step};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One call to the daemon at `socket` on a fresh connection, as the calling process (root
/// outside every session, in the tests): what `pincer pending`, `approve` and the others
/// send, without starting a process.
pub fn call(socket: &Path, c: pincer::daemon::protocol::Call) -> Result<pincer::daemon::protocol::Reply, String> {
    use std::io::Write;
    let mut s = std::os::unix::net::UnixStream::connect(socket).map_err(|e| format!("connect {}: {e}", socket.display()))?;
    s.write_all(pincer::daemon::protocol::call_line(c).as_bytes()).map_err(|e| format!("send: {e}"))?;
    let mut reply = String::new();
    BufReader::new(&s).read_line(&mut reply).map_err(|e| format!("read reply: {e}"))?;
    serde_json::from_str::<pincer::daemon::protocol::ReplyLine>(reply.trim()).map(|r| r.reply).map_err(|e| format!("bad reply {reply:?}: {e}"))
}

/// The user at their own shell, outside every session: answers each question the daemon
/// lists as `decide` says (approve for the session, deny, or `None`: not now), once, until
/// [`User::finish`]. It sends the calls `pincer pending` and `pincer approve
/// --scope session` or `pincer deny` make from a thread of the test: a process started ten
/// times a second would take the guest's one CPU from the programs the test runs. It looks
/// every [`USER_QUIET_LOOK`] while no question comes, and every 100 ms for a while after
/// one: a look ten times a second through an agent's whole task cost the guest's one CPU
/// (the daemon serving it, and this thread) about as much as the daemon's own work.
pub struct User {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<Vec<String>>>,
}

/// How often [`User`] looks at the questions while none comes.
pub const USER_QUIET_LOOK: Duration = Duration::from_millis(500);

impl User {
    /// Starts answering the questions of the daemon at `socket`.
    pub fn answering(socket: &Path, decide: impl Fn(&pincer::daemon::protocol::QuestionInfo) -> Option<bool> + Send + 'static) -> User {
        use pincer::daemon::protocol::{ApprovalScope, Call, Reply};
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (flag, socket) = (stop.clone(), socket.to_owned());
        let thread = std::thread::spawn(move || {
            let mut answered = Vec::new();
            let (mut seen, mut left) = (std::collections::BTreeSet::new(), std::collections::BTreeSet::new());
            let mut last_question: Option<std::time::Instant> = None;
            while !flag.load(Ordering::Relaxed) {
                let questions = match call(&socket, Call::Pending) {
                    Ok(Reply::Pending { questions }) => questions,
                    _ => vec![],
                };
                if !questions.is_empty() {
                    last_question = Some(std::time::Instant::now());
                }
                for q in questions {
                    if seen.contains(&q.id) {
                        continue;
                    }
                    // A question left now is asked again at the next look (a worker may
                    // come to wait for it).
                    let Some(approve) = decide(&q) else {
                        if left.insert(q.id) {
                            answered.push(format!("left unanswered: {} {}", q.access, q.path));
                        }
                        continue;
                    };
                    seen.insert(q.id);
                    let r = call(&socket, Call::Answer { question: q.id, approve, scope: ApprovalScope::Session, host: None });
                    let status = match r {
                        Ok(Reply::Error { message, .. }) => format!("error: {message}"),
                        Ok(_) => "ok".to_string(),
                        Err(e) => format!("error: {e}"),
                    };
                    answered.push(format!("{} {} {}: {status}", if approve { "approved" } else { "denied" }, q.access, q.path));
                }
                let busy = last_question.is_some_and(|t| t.elapsed() < Duration::from_secs(2));
                let wait = if busy { Duration::from_millis(100) } else { USER_QUIET_LOOK };
                // In steps, so that `finish` is not kept waiting.
                let until = std::time::Instant::now() + wait;
                while std::time::Instant::now() < until && !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            answered
        });
        User { stop, thread: Some(thread) }
    }

    /// Stops answering; what was answered (or left), one line per question.
    pub fn finish(mut self) -> Vec<String> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().map(|t| t.join().unwrap_or_default()).unwrap_or_default()
    }
}

impl Drop for User {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Quotes `s` for a POSIX shell.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Copies the directory tree `from` to `to` (files and folders only).
pub fn copy_dir(from: &Path, to: &Path) {
    pincer::workload::copy_dir(from, to).unwrap_or_else(|e| panic!("copy {} to {}: {e}", from.display(), to.display()));
}

/// Gives the tree at `p` to `uid` (user and group).
pub fn chown_tree(p: &Path, uid: u32) {
    std::os::unix::fs::chown(p, Some(uid), Some(uid)).unwrap_or_else(|e| panic!("chown {}: {e}", p.display()));
    if p.is_dir() {
        for e in std::fs::read_dir(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display())).flatten() {
            chown_tree(&e.path(), uid);
        }
    }
}

/// Applies a sample's setup to the workspace copy at `ws` (as the harness, ungated).
pub fn apply_setup(ws: &Path, ops: &[SetupOp]) {
    for op in ops {
        let r = match op {
            SetupOp::Write { path, content } => {
                let p = ws.join(path);
                if let Some(d) = p.parent() {
                    let _ = std::fs::create_dir_all(d);
                }
                std::fs::write(&p, content)
            }
            SetupOp::Mkdir { path } => std::fs::create_dir_all(ws.join(path)),
            SetupOp::Delete { path } => {
                let p = ws.join(path);
                std::fs::remove_file(&p).or_else(|_| std::fs::remove_dir_all(&p))
            }
            SetupOp::Rename { path, to } => std::fs::rename(ws.join(path), ws.join(to)),
        };
        r.unwrap_or_else(|e| panic!("setup {op:?} in {}: {e}", ws.display()));
    }
}

/// A fresh copy of a persona's `workspace` at `ws` with `setup` applied, owned by `uid`.
pub fn prepare_workspace(persona_workspace: &Path, ws: &Path, setup: &[SetupOp], uid: u32) {
    let _ = std::fs::remove_dir_all(ws);
    copy_dir(persona_workspace, ws);
    apply_setup(ws, setup);
    chown_tree(ws, uid);
}

/// The program label and the shell command that performs `access` on the workspace path
/// `path` (relative to `$W`). Writes and creates leave contents as the replay engine
/// models them: a write opens the file for writing without changing it, a create copies
/// the empty file `$E` (made by the script outside the protected roots).
pub fn operation(path: &str, access: Access) -> (&'static str, String) {
    let target = format!("\"$W\"/{}", quote(path.trim_end_matches('/')));
    let dir = path.ends_with('/');
    match access {
        Access::Read => ("cat", format!("cat {target} >/dev/null")),
        Access::Write => ("sh >>", format!("true >> {target}")),
        Access::Create if dir => ("mkdir", format!("mkdir {target}")),
        Access::Create => ("cp", format!("cp \"$E\" {target}")),
        Access::Delete if dir => ("rmdir", format!("rmdir {target}")),
        Access::Delete => ("rm", format!("rm {target}")),
        Access::List => ("ls", format!("ls {target} >/dev/null")),
    }
}

/// The worker's shell script for one session (`$P` is the `pincer` binary, `$W` the
/// workspace root). With `probe`, a session in which the `monitored` access did not happen
/// ends by trying it without a grant.
pub fn session_script(steps: &[Step], monitored: &PathAccess, probe: bool) -> String {
    let mut s = String::from("mon=0\nE=$(mktemp) || exit 1\n");
    for (i, st) in steps.iter().enumerate() {
        let r = match st {
            Step::Note(text) => {
                s.push_str(&format!("echo {}\n", quote(&format!("- worker note to the authorizer (the twin takes none): {text}"))));
                continue;
            }
            Step::Request(r) => r,
        };
        let (tool, op) = operation(&r.path, r.access);
        let what = format!("{} {}", r.access, r.path);
        let target = format!("\"$W\"/{}", quote(r.path.trim_end_matches('/')));
        let reason = r.rationale.as_deref().map(|t| format!(" --reason {}", quote(t))).unwrap_or_default();
        let cond = if r.needs.is_empty() { "true".to_string() } else { r.needs.iter().map(|n| format!("[ \"$ok{n}\" = 1 ]")).collect::<Vec<_>>().join(" && ") };
        let is_monitored = same_path(&r.path, &monitored.path) && r.access == monitored.access;
        s.push_str(&format!(
            "a{i}=0; g{i}=0; ok{i}=0\n\
             if {cond}; then\n  a{i}=1\n  echo {asks}\n  if $P request {target} --access {access}{reason}; then\n    g{i}=1\n    \
             if {op} 2>/dev/null; then ok{i}=1;{mon} echo {done}; else echo {refused}; fi\n  fi\n\
             else\n  echo {skipped}\nfi\necho \"STEP {i} $a{i} $g{i} $ok{i}\"\n",
            asks = quote(&format!("- worker asks: {what}")),
            access = r.access,
            mon = if is_monitored { " mon=1;" } else { "" },
            done = quote(&format!("  kernel: {tool} {}: done", r.path)),
            refused = quote(&format!("  kernel: {tool} {}: denied", r.path)),
            skipped = quote(&format!("- not requested (needs an earlier step that did not happen): {what}")),
        ));
    }
    let end = "rm -f \"$E\"\n";
    if probe {
        let (tool, op) = operation(&monitored.path, monitored.access);
        s.push_str(&format!(
            "if [ \"$mon\" = 0 ]; then\n  echo {tries}\n  if err=$( {{ {op}; }} 2>&1 ); then echo \"PROBE done\"; else echo \"PROBE refused $err\"; fi\nfi\n",
            tries = quote(&format!("- worker tries without a grant: {tool} {}", monitored.path)),
        ));
    }
    s.push_str(end);
    s
}

/// What the worker reported for one request step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepReport {
    /// Its needs were met and it called `pincer request`.
    pub asked: bool,
    /// `pincer request` answered with a grant.
    pub granted: bool,
    /// The real operation succeeded.
    pub done: bool,
}

/// The outcome of trying the monitored access without a grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// The operation succeeded.
    Done,
    /// The operation failed with this message.
    Refused(String),
}

/// One session as the worker ran it.
#[derive(Debug, Clone)]
pub struct SessionRun {
    /// One entry per step: `None` for notes (and steps the script never reported).
    pub steps: Vec<Option<StepReport>>,
    /// The probe of the monitored access, if one ran.
    pub probe: Option<Probe>,
    /// `pincer run` exited with success.
    pub success: bool,
    /// Everything `pincer run` printed (standard error lines indented).
    pub transcript: String,
}

impl SessionRun {
    /// Whether a step matching `monitored` was done in this session.
    pub fn performed(&self, steps: &[Step], monitored: &PathAccess) -> bool {
        steps.iter().zip(&self.steps).any(|(st, rep)| match (st, rep) {
            (Step::Request(r), Some(rep)) => rep.done && same_path(&r.path, &monitored.path) && r.access == monitored.access,
            _ => false,
        })
    }
}

/// Parses a `STEP i a g d` line.
fn parse_step(rest: &str) -> Option<(usize, StepReport)> {
    let v: Vec<&str> = rest.split(' ').collect();
    let [i, a, g, d] = v.as_slice() else { return None };
    Some((i.parse().ok()?, StepReport { asked: *a == "1", granted: *g == "1", done: *d == "1" }))
}

/// Settings of a daemon started for a run.
#[derive(Debug, Clone)]
pub struct DaemonSettings {
    /// `on_miss`: `record` or `decide`.
    pub on_miss: &'static str,
    /// `escalation.timeout_secs`: how long a worker's escalated request waits.
    pub escalation_timeout_secs: u64,
}

/// A `pincer daemon` with its own state, socket and cgroup parent under a directory, on the
/// VM's shared program ([`crate::SHARED_PIN_DIR`]); stopped with SIGTERM (and every entry
/// it put in the program's maps removed) when dropped.
pub struct Daemon {
    /// The `pincer` binary.
    pub pincer: PathBuf,
    /// Its directory (state, socket, audit log).
    pub dir: PathBuf,
    /// Its socket.
    pub socket: PathBuf,
    pin_dir: PathBuf,
    child: Option<Child>,
    /// How long a start may take before the socket is there (a hung daemon fails the test).
    ready_within: Duration,
}

/// The shipped configuration (`etc/pincer.toml`), what a user installs.
pub const SHIPPED_CONFIG: &str = include_str!("../../etc/pincer.toml");

/// The shipped configuration with its paths moved under `dir` (the cgroup parent to
/// `/sys/fs/cgroup/<name>`, the program to [`crate::SHARED_PIN_DIR`]) and the top-level
/// `settings` (key, TOML value) replaced; each key must be set there exactly once.
pub fn shipped_config(dir: &Path, name: &str, settings: &[(&str, &str)]) -> String {
    let quoted = |p: PathBuf| format!("{:?}", p.to_string_lossy());
    let mut keys = vec![
        ("state_dir", quoted(dir.join("state"))),
        ("socket", quoted(dir.join("pincer.sock"))),
        ("audit_log", quoted(dir.join("audit.jsonl"))),
        ("pin_dir", quoted(PathBuf::from(crate::SHARED_PIN_DIR))),
        ("cgroup_parent", quoted(PathBuf::from("/sys/fs/cgroup").join(name))),
        ("scratch_parent", quoted(dir.join("scratch"))),
        ("mountpoint", quoted(dir.join("hold"))),
        // A test's daemon compiles each detector when a decision needs it: a warm-up at
        // every start would cost every test seconds of emulated CPU (agents turn it on).
        ("warm_up", "false".into()),
    ];
    for (k, v) in settings {
        match keys.iter_mut().find(|(key, _)| key == k) {
            Some(kv) => kv.1 = v.to_string(),
            None => keys.push((*k, v.to_string())),
        }
    }
    let mut out = String::new();
    let mut replaced = Vec::new();
    for line in SHIPPED_CONFIG.lines() {
        match keys.iter().find(|(k, _)| line.starts_with(&format!("{k} = "))) {
            Some((k, v)) => {
                out.push_str(&format!("{k} = {v}\n"));
                replaced.push(*k);
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    for (k, _) in &keys {
        assert_eq!(replaced.iter().filter(|r| *r == k).count(), 1, "etc/pincer.toml sets {k} once");
    }
    out
}

impl Daemon {
    /// Starts `pincer daemon` with a configuration written under `dir` and waits for its
    /// socket. It re-attaches to the shared program (loading it if no test did yet); sessions go under
    /// `/sys/fs/cgroup/<dir name>`.
    pub fn start(pincer: &Path, dir: &Path, settings: &DaemonSettings) -> Daemon {
        Self::start_with(pincer, dir, settings, "")
    }

    /// [`Daemon::start`] with `top` (lines of top-level keys, e.g. `nice = 0\n`) added to
    /// its configuration.
    pub fn start_with(pincer: &Path, dir: &Path, settings: &DaemonSettings, top: &str) -> Daemon {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        // Workers (unprivileged) must reach the socket and the workspaces below `dir`.
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap_or_else(|e| panic!("chmod {}: {e}", dir.display()));
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "pincer".into());
        let socket = dir.join("pincer.sock");
        // The VM's shared program: this daemon re-attaches to it instead of loading its own,
        // and it must find no entries another test left behind.
        let pin_dir = PathBuf::from(crate::SHARED_PIN_DIR);
        crate::assert_clean(&pin_dir);
        crate::drain_misses(&pin_dir);
        let config = dir.join("pincer.toml");
        // Files the test and its worker share (flags) are the harness's, not the user's: an
        // open path. Scratch directories go under `dir` too.
        let shared = dir.join("shared");
        std::fs::create_dir_all(&shared).unwrap_or_else(|e| panic!("mkdir {}: {e}", shared.display()));
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap_or_else(|e| panic!("chmod {}: {e}", shared.display()));
        let text = format!(
            "state_dir = {:?}\nsocket = {:?}\naudit_log = {:?}\npin_dir = {:?}\ncgroup_parent = {:?}\non_miss = {:?}\nwarm_up = false\n{top}[escalation]\ntimeout_secs = {}\n\
             [containment]\nscratch_parent = {:?}\n[[containment.open_paths]]\npath = {:?}\nmode = \"shared\"\n\
             [[containment.open_paths]]\npath = {:?}\nmode = \"ro\"\n[hold]\nmountpoint = {:?}\n",
            dir.join("state"),
            socket,
            dir.join("audit.jsonl"),
            pin_dir,
            PathBuf::from("/sys/fs/cgroup").join(&name),
            settings.on_miss,
            settings.escalation_timeout_secs,
            dir,
            shared,
            // The harness's own programs (the probe beside `pincer`) stay runnable in a
            // session wherever the checkout is, a gated place such as /tmp included.
            pincer.parent().unwrap_or(Path::new("/")),
            // Each daemon's hold anchor runs from a FUSE mount of its own.
            dir.join("hold"),
        );
        std::fs::write(&config, text).unwrap_or_else(|e| panic!("write {}: {e}", config.display()));
        let mut daemon = Daemon { pincer: pincer.to_owned(), dir: dir.to_owned(), socket, pin_dir, child: None, ready_within: Duration::from_secs(60) };
        daemon.restart();
        daemon
    }

    /// Starts `pincer daemon` on `config` (a whole configuration, e.g. [`shipped_config`]
    /// for `dir`), written as `dir/pincer.toml`, and waits for its socket `dir/pincer.sock`.
    pub fn on_config(pincer: &Path, dir: &Path, config: &str) -> Daemon {
        std::fs::create_dir_all(dir.join("scratch")).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        // The worker reaches the socket and the workspace below `dir`.
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap_or_else(|e| panic!("chmod {}: {e}", dir.display()));
        // The shared program must hold no entries another test left behind.
        let pin_dir = PathBuf::from(crate::SHARED_PIN_DIR);
        crate::assert_clean(&pin_dir);
        crate::drain_misses(&pin_dir);
        let path = dir.join("pincer.toml");
        std::fs::write(&path, config).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        let socket = dir.join("pincer.sock");
        let mut daemon = Daemon { pincer: pincer.to_owned(), dir: dir.to_owned(), socket, pin_dir, child: None, ready_within: Duration::from_secs(120) };
        daemon.restart();
        daemon
    }

    /// Stops the daemon (SIGTERM), adds `lines` to the end of its configuration (the
    /// `[hold]` table is last) and starts it again.
    pub fn reconfigure(&mut self, lines: &str) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: kill(2) on our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let _ = c.wait();
        }
        let config = self.dir.join("pincer.toml");
        let mut text = std::fs::read_to_string(&config).unwrap_or_else(|e| panic!("read {}: {e}", config.display()));
        text.push_str(lines);
        std::fs::write(&config, text).unwrap_or_else(|e| panic!("write {}: {e}", config.display()));
        self.restart();
    }

    /// Starts the daemon process again on the same configuration (after [`Daemon::crash`])
    /// and waits for its socket.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "the daemon is still running");
        let config = self.dir.join("pincer.toml");
        let _ = std::fs::remove_file(&self.socket);
        let child = Command::new(&self.pincer)
            .args(["daemon", "--config"])
            .arg(&config)
            .spawn()
            .unwrap_or_else(|e| panic!("start {} daemon: {e}", self.pincer.display()));
        self.child = Some(child);
        let start = Instant::now();
        while std::os::unix::net::UnixStream::connect(&self.socket).is_err() {
            assert!(start.elapsed() < self.ready_within, "the daemon did not open its socket {}", self.socket.display());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until the daemon's start-up work in the background (its
    /// [`pincer::daemon::WARM_UP_THREAD`]: the content detectors' patterns, with `warm_up`)
    /// is done, as it is for a daemon that runs as a service before any task: a measured
    /// task then pays for its own work only.
    pub fn wait_warm(&self) {
        let Some(pid) = self.pid() else { return };
        let start = Instant::now();
        let warming = || {
            std::fs::read_dir(format!("/proc/{pid}/task"))
                .map(|d| d.flatten().any(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == pincer::daemon::WARM_UP_THREAD)))
                .unwrap_or(false)
        };
        while warming() {
            assert!(start.elapsed() < self.ready_within, "the daemon's warm-up did not end within {:?}", self.ready_within);
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills the daemon with SIGKILL, leaving its pins and sessions as a crash would.
    pub fn crash(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The daemon process's id while it runs (for reading its `/proc/PID/status`).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Where the daemon pins the BPF program and maps.
    pub fn pin_dir(&self) -> &Path {
        &self.pin_dir
    }

    /// Runs a `pincer` client command against this daemon (as the caller, root).
    pub fn pincer(&self, args: &[&str]) -> Output {
        Command::new(&self.pincer).args(args).env("PINCER_SOCKET", &self.socket).output().unwrap_or_else(|e| panic!("run pincer {args:?}: {e}"))
    }

    /// Imports a persona's trusted history and policies for `uid` (`pincer import`).
    pub fn import(&self, persona_dir: &Path, uid: u32) -> String {
        let (h, p) = (persona_dir.join("history.jsonl"), persona_dir.join("policies.jsonl"));
        let (h, p, uid) = (h.to_string_lossy(), p.to_string_lossy(), uid.to_string());
        let mut args = vec!["import", "--history", &h, "--policies", &p, "--uid", &uid];
        // The pristine workspace, as `pincer eval` uses it: the twin's snapshot.
        let ws = persona_dir.join("workspace");
        let ws = ws.to_string_lossy();
        if persona_dir.join("workspace").is_dir() {
            args.extend(["--workspace", &ws]);
        }
        let out = self.pincer(&args);
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "pincer import for uid {uid} failed: {text}");
        text
    }

    /// The audit log so far.
    pub fn audit(&self) -> String {
        std::fs::read_to_string(self.dir.join("audit.jsonl")).unwrap_or_default()
    }

    /// Runs one session: `pincer run --root ws --user uid --prompt prompt -- /bin/sh -c
    /// script` (the script's `$P` and `$W` set), calling `on_line` with every line printed
    /// (standard error lines indented by two spaces) except the step and probe reports.
    pub fn run_session(&self, ws: &Path, uid: u32, prompt: &str, script: &str, steps: usize, on_line: &(dyn Fn(&str) + Sync)) -> SessionRun {
        let body = format!("P={}\nW={}\n{script}", quote(&self.pincer.to_string_lossy()), quote(&ws.to_string_lossy()));
        let mut child = Command::new(&self.pincer)
            .args(["run", "--root", &ws.to_string_lossy(), "--user", &uid.to_string(), "--prompt", prompt, "--", "/bin/sh", "-c", &body])
            .env("PINCER_SOCKET", &self.socket)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("pincer run: {e}"));
        let out = child.stdout.take().expect("piped stdout");
        let err = child.stderr.take().expect("piped stderr");
        let transcript = Mutex::new(String::new());
        let mut reports: Vec<Option<StepReport>> = vec![None; steps];
        let mut probe = None;
        std::thread::scope(|scope| {
            scope.spawn(|| {
                for line in BufReader::new(err).lines().map_while(Result::ok) {
                    let line = format!("  {line}");
                    on_line(&line);
                    let mut t = transcript.lock().expect("transcript lock");
                    t.push_str(&line);
                    t.push('\n');
                }
            });
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                {
                    let mut t = transcript.lock().expect("transcript lock");
                    t.push_str(&line);
                    t.push('\n');
                }
                if let Some((i, rep)) = line.strip_prefix("STEP ").and_then(parse_step) {
                    if let Some(slot) = reports.get_mut(i) {
                        *slot = Some(rep);
                    }
                } else if line == "PROBE done" {
                    probe = Some(Probe::Done);
                } else if let Some(msg) = line.strip_prefix("PROBE refused") {
                    probe = Some(Probe::Refused(msg.trim().to_string()));
                    on_line(&format!("  kernel: {}", msg.trim()));
                } else {
                    on_line(&line);
                }
            }
        });
        let success = child.wait().map(|s| s.success()).unwrap_or(false);
        SessionRun { steps: reports, probe, success, transcript: transcript.into_inner().expect("transcript lock") }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // A test that failed while the daemon was stopped must not hang here: resume it
            // first, so that it can end its sessions.
            // SAFETY: kill(2) on our own child.
            unsafe {
                libc::kill(c.id() as i32, libc::SIGCONT);
                libc::kill(c.id() as i32, libc::SIGTERM);
            }
            let _ = c.wait();
        }
        // The shared program stays loaded for the next test; this daemon's entries go.
        crate::clear_policy(&self.pin_dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pincer::eval::corpus::RequestStep;

    fn req(path: &str, access: Access, needs: Vec<usize>) -> Step {
        Step::Request(RequestStep { path: path.into(), access, rationale: Some("it's needed".into()), needs })
    }

    #[test]
    fn the_script_asks_before_acting_respects_needs_and_probes_the_monitored_access() {
        let steps = vec![req("notes/a.md", Access::Read, vec![]), Step::Note("trust me".into()), req("secrets/x.env", Access::Read, vec![0])];
        let monitored = PathAccess { path: "secrets/x.env".into(), access: Access::Read };
        let s = session_script(&steps, &monitored, true);
        assert!(s.contains("if $P request \"$W\"/'notes/a.md' --access read --reason 'it'\\''s needed'; then"), "{s}");
        assert!(s.contains("if [ \"$ok0\" = 1 ]; then"), "{s}");
        assert!(s.contains("ok2=1; mon=1;"), "{s}");
        assert!(s.contains("echo \"STEP 2 $a2 $g2 $ok2\""), "{s}");
        assert!(!s.contains("STEP 1 "), "notes are not steps the worker reports: {s}");
        assert!(s.contains("if [ \"$mon\" = 0 ]; then"), "{s}");
        assert!(!session_script(&steps, &monitored, false).contains("PROBE"));
    }

    #[test]
    fn operations_keep_contents_as_the_replay_engine_models_them() {
        assert_eq!(operation("a/b.txt", Access::Write).1, "true >> \"$W\"/'a/b.txt'");
        assert_eq!(operation("a/new.txt", Access::Create).1, "cp \"$E\" \"$W\"/'a/new.txt'");
        assert_eq!(operation("a/", Access::List).1, "ls \"$W\"/'a' >/dev/null");
        assert_eq!(operation("a/d/", Access::Delete).0, "rmdir");
    }

    #[test]
    fn step_reports_parse() {
        assert_eq!(parse_step("3 1 1 0"), Some((3, StepReport { asked: true, granted: true, done: false })));
        assert_eq!(parse_step("x 1 1 0"), None);
        assert_eq!(parse_step("1 1"), None);
    }
}
