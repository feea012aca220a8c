//! The session's own namespaces, through `pincer run` under the real BPF LSM (inside the
//! VM, as root), tried as an attacker would: a victim process and IPC objects of the same
//! uid 1000 outside every session; inside, `/proc` lists only the session's processes, the
//! user's POSIX message queue (by name or as a file under `/dev/mqueue`) and SysV segment
//! cannot be named, the session's own queue works, the command has a terminal of its own
//! that `pincer run` relays (reads what is typed, gets one `SIGINT` per `^C` and
//! `SIGWINCH`), exit status propagates, and a signal sent
//! to the session's init reaches the command. Each wall is also shown open with the
//! namespaces turned off in the configuration (the kernel hooks then answer alone), so the
//! test fails if it is removed.

use pincer_tests::worker::{chown_tree, Daemon, DaemonSettings};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const PINCER: &str = env!("CARGO_BIN_EXE_pincer");
const PROBE: &str = env!("CARGO_BIN_EXE_pincer-probe");
const HISTORY: &str = include_str!("../../corpus/software-dev/history.jsonl");
const POLICIES: &str = include_str!("../../corpus/software-dev/policies.jsonl");
const PROMPT: &str = "Update my todo: tick off the release notes item.";

/// A daemon, a workspace and the shared (open) directory the worker writes results to.
struct Env {
    dir: PathBuf,
    ws: PathBuf,
    shared: PathBuf,
    daemon: Daemon,
}

impl Env {
    fn new(name: &str) -> Self {
        let dir = pincer_tests::fresh_dir(name);
        let ws = dir.join("ws");
        pincer_tests::write_file(&ws.join("notes/todo.md"), "- [ ] release notes\n");
        chown_tree(&ws, 1000);
        let daemon = Daemon::start(Path::new(PINCER), &dir, &DaemonSettings { on_miss: "record", escalation_timeout_secs: 60 });
        let (h, p) = (dir.join("history.jsonl"), dir.join("policies.jsonl"));
        std::fs::write(&h, HISTORY).unwrap();
        std::fs::write(&p, POLICIES).unwrap();
        let out = daemon.pincer(&["import", "--history", h.to_str().unwrap(), "--policies", p.to_str().unwrap(), "--uid", "1000"]);
        assert!(out.status.success(), "import: {}", String::from_utf8_lossy(&out.stderr));
        let shared = dir.join("shared");
        Env { dir, ws, shared, daemon }
    }

    /// Restarts the daemon with `pid_namespace` and `ipc_namespace` set to `on`.
    fn namespaces(&mut self, on: bool) {
        let config = self.dir.join("pincer.toml");
        let text = std::fs::read_to_string(&config).unwrap();
        let keys = format!("[containment]\npid_namespace = {on}\nipc_namespace = {on}\n");
        let text = text.replace("[containment]\npid_namespace = true\nipc_namespace = true\n", "[containment]\n");
        let text = text.replace("[containment]\npid_namespace = false\nipc_namespace = false\n", "[containment]\n");
        std::fs::write(&config, text.replacen("[containment]\n", &keys, 1)).unwrap();
        self.daemon.crash();
        self.daemon.restart();
    }

    /// `pincer run` of a shell script (`S` is the shared directory, `PROBE` the probe).
    fn command(&self, script: &str) -> Command {
        let script = format!("S={}\nPROBE={PROBE}\n{script}", self.shared.display());
        let mut c = Command::new(PINCER);
        c.args(["run", "--root", self.ws.to_str().unwrap(), "--user", "1000", "--prompt", PROMPT, "--", "/bin/sh", "-c", &script]);
        c.env("PINCER_SOCKET", &self.daemon.socket);
        c
    }

    fn spawn(&self, script: &str) -> Child {
        self.command(script).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start pincer run")
    }

    fn result(&self, name: &str) -> String {
        let p = self.shared.join(name);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())).trim().to_string()
    }

    fn wait_for(&self, name: &str) {
        let start = Instant::now();
        while !self.shared.join(name).exists() {
            assert!(start.elapsed() < Duration::from_secs(120), "the worker did not write {name}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn clear(&self) {
        for e in std::fs::read_dir(&self.shared).unwrap() {
            let _ = std::fs::remove_file(e.unwrap().path());
        }
    }
}

/// Runs the probe as uid 1000 outside every session.
fn outside_probe(args: &[&str]) -> String {
    let out = Command::new(PROBE).args(args).uid(1000).gid(1000).output().expect("run the probe");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn exit_code(child: Child) -> (i32, String) {
    let out = child.wait_with_output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

const LOOK: &str = r#"
for d in /proc/[0-9]*; do tr '\0' ' ' < $d/cmdline; echo; done > $S/procs 2>/dev/null
echo /proc/[0-9]* > $S/pids
$PROBE mq-open $MQ > $S/mq
$PROBE mq-own /pincer-own-$$ > $S/own
$PROBE shm-get $KEY > $S/shmget
$PROBE shm-at $ID > $S/shmat
if cat /dev/mqueue$MQ > /dev/null 2>&1; then echo open; else echo refused; fi > $S/mqfs
exit 42
"#;

#[test]
fn the_session_cannot_name_the_users_processes_or_ipc_objects() {
    let mut env = Env::new("spawn-ns");
    // The user's own live things, outside every session.
    let mut victim = Command::new("/bin/sleep").arg("86399").uid(1000).gid(1000).spawn().unwrap();
    let mq = format!("/pincer-outside-{}", std::process::id());
    // The queues' filesystem where a Debian host mounts it: the user's queue is a file there.
    std::fs::create_dir_all("/dev/mqueue").unwrap();
    if !std::fs::read_to_string("/proc/self/mounts").unwrap().lines().any(|l| l.split(' ').nth(1) == Some("/dev/mqueue")) {
        // SAFETY: mount(2) with constant C strings.
        let rc = unsafe { libc::mount(c"mqueue".as_ptr(), c"/dev/mqueue".as_ptr(), c"mqueue".as_ptr(), 0, std::ptr::null()) };
        assert_eq!(rc, 0, "mount mqueue: {}", std::io::Error::last_os_error());
    }
    let key = (0x5eed0000 + std::process::id() as i32).to_string();
    assert_eq!(outside_probe(&["mq-make", &mq]), "ok");
    let id = outside_probe(&["shm-make", &key]);
    assert!(id.parse::<i32>().is_ok(), "shm-make: {id}");
    // Open to an ungated process of the same uid: only the session's walls can stop it.
    assert_eq!(outside_probe(&["mq-open", &mq]), "ok");
    assert_eq!(outside_probe(&["shm-get", &key]), id);
    assert_eq!(outside_probe(&["shm-at", &id]), "ok");

    let script = format!("MQ={mq}\nKEY={key}\nID={id}\n{LOOK}");
    let (code, text) = exit_code(env.spawn(&script));
    println!("{text}");
    assert_eq!(code, 42, "the command's exit status: {text}");
    let procs = env.result("procs");
    println!("inside /proc:\n{procs}");
    assert!(!procs.contains("86399"), "the user's process is visible inside: {procs}");
    assert!(procs.lines().next().unwrap_or("").contains("session-init"), "pid 1 is the session's init: {procs}");
    let pids = env.result("pids");
    assert!(pids.split_whitespace().count() <= 4 && pids.starts_with("/proc/1 "), "only the session's processes: {pids}");
    assert_eq!(env.result("mq"), format!("errno {}", libc::ENOENT), "the user's POSIX queue");
    assert_eq!(env.result("own"), "ok", "the session's own queue");
    assert_eq!(env.result("shmget"), format!("errno {}", libc::ENOENT), "the user's SysV segment by key");
    assert_eq!(env.result("shmat"), format!("errno {}", libc::EINVAL), "the user's SysV segment by id");
    assert_eq!(env.result("mqfs"), "refused", "the user's POSIX queue as a file under /dev/mqueue");

    // Without the namespaces the same script names them all; the hooks alone still
    // refuse the SysV segment and the POSIX queue (by name and as a file).
    env.namespaces(false);
    env.clear();
    let (code, text) = exit_code(env.spawn(&script));
    assert_eq!(code, 42, "{text}");
    let procs = env.result("procs");
    assert!(procs.contains("86399"), "without a PID namespace the user's process is listed: {procs}");
    // POSIX queues have a hook too: a gated task opens only the queues its session made.
    assert_eq!(env.result("mq"), format!("errno {}", libc::EACCES), "without an IPC namespace the mqueue hook refuses the user's POSIX queue");
    assert_eq!(env.result("mqfs"), "refused", "without the session's /dev/mqueue the mqueue hook refuses the user's queue file");
    assert_eq!(env.result("own"), "ok");
    assert_eq!(env.result("shmat"), format!("errno {}", libc::EACCES), "the ipc hook refuses the segment");

    let _ = victim.kill();
    let _ = victim.wait();
    // SAFETY: removing the test's own segment by id.
    unsafe { libc::shmctl(id.parse().unwrap(), libc::IPC_RMID, std::ptr::null_mut()) };
    let name = std::ffi::CString::new(mq).unwrap();
    // SAFETY: unlink of the test's own queue.
    unsafe { libc::mq_unlink(name.as_ptr()) };
}

/// The outer pid of the session's init: the process of pid 1 in its namespace whose
/// parent (the keeper) is a child of `run`.
fn init_of(run: u32) -> i32 {
    let field = |pid: &str, key: &str| -> Option<String> {
        let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        s.lines().find_map(|l| l.strip_prefix(key)).map(|v| v.trim().to_string())
    };
    let start = Instant::now();
    loop {
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let pid = e.file_name().to_string_lossy().into_owned();
            let Some(ns) = field(&pid, "NSpid:") else { continue };
            let ns: Vec<&str> = ns.split_whitespace().collect();
            if ns.len() == 2 && ns[1] == "1" {
                let keeper = field(&pid, "PPid:").unwrap_or_default();
                if field(&keeper, "PPid:").as_deref() == Some(run.to_string().as_str()) {
                    return pid.parse().unwrap();
                }
            }
        }
        assert!(start.elapsed() < Duration::from_secs(60), "no session init under pincer run {run}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn signals_sent_to_the_init_or_to_pincer_run_reach_the_command() {
    let env = Env::new("spawn-signal");
    let script = r#"
trap 'echo usr1 > $S/usr1; exit 7' USR1
trap 'echo term > $S/term; exit 9' TERM
echo ready > $S/ready
while :; do sleep 0.1; done
"#;
    let run = env.spawn(script);
    env.wait_for("ready");
    let init = init_of(run.id());
    // SAFETY: kill(2) of the session's init.
    assert_eq!(unsafe { libc::kill(init, libc::SIGUSR1) }, 0);
    let (code, text) = exit_code(run);
    assert_eq!((code, env.result("usr1").as_str()), (7, "usr1"), "{text}");

    env.clear();
    let run = env.spawn(script);
    env.wait_for("ready");
    // SAFETY: kill(2) of pincer run.
    assert_eq!(unsafe { libc::kill(run.id() as i32, libc::SIGTERM) }, 0);
    let (code, text) = exit_code(run);
    assert_eq!((code, env.result("term").as_str()), (9, "term"), "{text}");
}

/// A new pty: `(master, slave path)`.
fn pty() -> (i32, String) {
    pincer_tests::ensure_devpts();
    // SAFETY: open and ioctl on the pty master with integer out-parameters.
    unsafe {
        let master = libc::open(c"/dev/ptmx".as_ptr(), libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        assert!(master >= 0, "open /dev/ptmx: {}", std::io::Error::last_os_error());
        let mut unlock: libc::c_int = 0;
        let mut n: libc::c_uint = 0;
        assert!(libc::ioctl(master, libc::TIOCSPTLCK, &mut unlock) == 0 && libc::ioctl(master, libc::TIOCGPTN, &mut n) == 0);
        (master, format!("/dev/pts/{n}"))
    }
}

fn write_master(master: i32, bytes: &[u8]) {
    // SAFETY: write of a local buffer to the pty master.
    assert_eq!(unsafe { libc::write(master, bytes.as_ptr().cast(), bytes.len()) }, bytes.len() as isize);
}

#[test]
fn the_command_gets_a_terminal_of_its_own_in_its_pid_namespace() {
    let env = Env::new("spawn-tty");
    let (master, slave) = pty();
    // Drain what pincer run and the command print on the terminal.
    // SAFETY: dup of the master for the reader thread.
    let reader = unsafe { libc::dup(master) };
    let printed = std::thread::spawn(move || {
        let mut all = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            // SAFETY: read into a local buffer.
            let n = unsafe { libc::read(reader, buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                break;
            }
            all.extend_from_slice(&buf[..n as usize]);
        }
        String::from_utf8_lossy(&all).into_owned()
    });
    let outer = slave.clone();
    let slave = std::ffi::CString::new(slave).unwrap();
    // The command reads a line from the terminal (it would be stopped by SIGTTIN outside
    // the foreground group), then logs every terminal signal it gets.
    let mut cmd = env.command(
        r#"
tty > $S/tty.part; mv $S/tty.part $S/tty
read line
echo "$line" > $S/line.part && mv $S/line.part $S/line
exec $PROBE watch-signals $S/sigs $S/stop
"#,
    );
    // SAFETY: in the child: a new session whose controlling terminal is the pty slave,
    // on stdin, stdout and stderr (async-signal-safe calls only).
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let fd = libc::open(slave.as_ptr(), libc::O_RDWR);
            if fd < 0 || libc::ioctl(fd, libc::TIOCSCTTY, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            for target in 0..3 {
                libc::dup2(fd, target);
            }
            Ok(())
        });
    }
    let mut run = cmd.spawn().expect("start pincer run on the pty");
    // Typed ahead if the session is still starting: the terminal keeps it.
    write_master(master, b"hello from the terminal\n");
    env.wait_for("line");
    assert_eq!(env.result("line"), "hello from the terminal");
    let tty = env.result("tty");
    assert!(tty.starts_with("/dev/pts/") && tty != outer, "the command's terminal is one of its own, not the user's {outer}: {tty:?}");
    env.wait_for("sigs");
    std::thread::sleep(Duration::from_millis(300));
    // ^C once: the terminal signals its foreground group; the command must see it once.
    write_master(master, b"\x03");
    std::thread::sleep(Duration::from_secs(2));
    let ws = libc::winsize { ws_row: 40, ws_col: 100, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: TIOCSWINSZ with a local winsize.
    assert_eq!(unsafe { libc::ioctl(master, libc::TIOCSWINSZ, &ws) }, 0);
    std::thread::sleep(Duration::from_secs(1));
    std::fs::write(env.shared.join("stop"), "").unwrap();
    let status = run.wait().unwrap();
    // SAFETY: closing the test's master fd; the reader sees EOF or EIO.
    unsafe { libc::close(master) };
    let printed = printed.join().unwrap();
    println!("{printed}");
    assert_eq!(status.code(), Some(5), "exit status of the command");
    assert_eq!(env.result("sigs"), "ready\nINT\nWINCH", "one SIGINT per ^C, and SIGWINCH, from the terminal");
}

/// `pincer run` started in the background of the user's terminal (`pincer run ... &` from
/// an interactive shell, whose own group keeps the foreground), with that terminal as its
/// stdin: it must not read the terminal (a background job that reads it is stopped by
/// `SIGTTIN`) nor change its modes; the worker runs and its status comes back, and the
/// terminal's modes are the user's after.
#[test]
fn pincer_run_in_the_background_of_the_users_terminal_runs_without_taking_it() {
    let env = Env::new("spawn-bg");
    let (master, slave) = pty();
    let slave = std::ffi::CString::new(slave).unwrap();
    // SAFETY: open of the slave for the test's own look at its modes.
    let user_side = unsafe { libc::open(slave.as_ptr(), libc::O_RDWR | libc::O_NOCTTY) };
    assert!(user_side >= 0);
    let modes = || {
        // SAFETY: tcgetattr into a local termios.
        unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            assert_eq!(libc::tcgetattr(user_side, &mut t), 0);
            t.c_lflag & (libc::ICANON | libc::ECHO)
        }
    };
    let before = modes();
    // The user's shell on the terminal runs `pincer run ... &` and waits for it.
    let script = format!("S={}\necho started > $S/bg.part && mv $S/bg.part $S/bg; exit 7", env.shared.display());
    let mut cmd = Command::new(PROBE);
    cmd.arg("background-job")
        .arg(slave.to_str().unwrap())
        .args([PINCER, "run", "--root", env.ws.to_str().unwrap(), "--user", "1000", "--prompt", PROMPT, "--", "/bin/sh", "-c", &script])
        .env("PINCER_SOCKET", &env.daemon.socket);
    let mut run = cmd.spawn().expect("start the user's shell on the pty");
    let start = Instant::now();
    let status = loop {
        if let Some(st) = run.try_wait().unwrap() {
            break Some(st);
        }
        if start.elapsed() > Duration::from_secs(90) {
            let _ = run.kill();
            let _ = run.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let after = modes();
    // SAFETY: closing the test's descriptors of the pty.
    unsafe {
        libc::close(user_side);
        libc::close(master);
    }
    assert_eq!(env.result("bg"), "started", "control: the worker ran");
    assert_eq!(status.and_then(|s| s.code()), Some(7), "pincer run in the background came back with the worker's status (None: it did not end, stopped for want of the terminal)");
    assert_eq!(after, before, "the user's terminal's modes, changed by pincer run in the background");
}

const CROSSING: &str = r#"
if cat <&5 > /dev/null 2>&1; then echo read; else echo closed; fi > $S/fd
$PROBE key-read $SERIAL > $S/userkey
$PROBE key-own pincer-own-$$ > $S/ownkey
exit 42
"#;

#[test]
fn only_stdio_crosses_into_the_session_and_its_keyring_is_its_own() {
    let mut env = Env::new("spawn-cross");
    // A file `pincer run` happens to hold open at fd 5 (inherited from the user's shell
    // or IDE): no hook checks reads of an fd that is already open.
    let held = env.dir.join("held-open.txt");
    std::fs::write(&held, "held open by the caller\n").unwrap();
    let held = std::fs::File::open(&held).unwrap();
    let raw = std::os::fd::AsRawFd::as_raw_fd(&held);
    // A key in the user's keyring, readable by the user's processes outside.
    let serial = outside_probe(&["key-add", &format!("pincer-user-key-{}", std::process::id())]);
    assert!(serial.parse::<i32>().is_ok(), "key-add: {serial}");
    assert_eq!(outside_probe(&["key-read", &serial]), "ok", "the user's key reads outside every session");
    let script = format!("SERIAL={serial}\n{CROSSING}");
    for namespaces in [true, false] {
        if !namespaces {
            env.namespaces(false);
        }
        env.clear();
        let mut cmd = env.command(&script);
        // SAFETY: dup2 in the child (async-signal-safe); the new fd 5 has no close-on-exec.
        unsafe {
            cmd.pre_exec(move || if libc::dup2(raw, 5) < 0 { Err(std::io::Error::last_os_error()) } else { Ok(()) });
        }
        let run = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start pincer run");
        let (code, text) = exit_code(run);
        assert_eq!(code, 42, "namespaces {namespaces}: {text}");
        assert_eq!(env.result("fd"), "closed", "namespaces {namespaces}: fd 5 of pincer run reached the command");
        // Refused by the hook at lookup (keyctl reports that as ENOKEY); without it the
        // kernel's own check would answer EACCES (the key is no longer possessed).
        let user_key = env.result("userkey");
        assert!(
            user_key == format!("errno {}", libc::ENOKEY) || user_key == format!("errno {}", libc::EPERM),
            "namespaces {namespaces}: the user's key: {user_key}"
        );
        assert_eq!(env.result("ownkey"), "ok", "namespaces {namespaces}: the session's own keyring");
    }
    drop(held);
}
