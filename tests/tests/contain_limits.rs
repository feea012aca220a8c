//! Each session's resource limits (`[limits]`), through `pincer run` under the real daemon
//! (inside the VM, as root), tried as an attacker would: a session forks without end and
//! allocates more than it may, while the same user (uid 1000) outside every session, with a
//! process limit (`RLIMIT_NPROC`) of its own, must still fork and allocate. Without the
//! session's `pids.max` the bomb's processes count against the user's process limit and the
//! user's fork fails; without `memory.max` the session's allocation succeeds. And the CPU:
//! the daemon runs ahead of the sessions, and nothing it starts for the user inherits that.

use pincer_tests::worker::{chown_tree, Daemon, DaemonSettings};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PINCER: &str = env!("CARGO_BIN_EXE_pincer");
const PROBE: &str = env!("CARGO_BIN_EXE_pincer-probe");
const PIDS_MAX: usize = 64;
const MEMORY_MAX_MIB: u64 = 64;
/// The user's own process limit outside the session: more than the session may hold, less
/// than the bomb tries to make.
const USER_NPROC: u64 = 200;
const BOMB: usize = 300;

/// Waits until the worker's file has a whole last line that `done` accepts (the shell
/// writes "Killed" on a line of its own before the exit status).
fn wait_for(path: &Path, done: impl Fn(&str) -> bool) -> String {
    let start = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            if text.ends_with('\n') && done(text.trim_end().lines().last().unwrap_or("")) {
                return text.trim().to_string();
            }
        }
        assert!(start.elapsed() < Duration::from_secs(180), "the worker did not write {}", path.display());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs the probe as uid 1000 outside every session, with `RLIMIT_NPROC` = [`USER_NPROC`].
fn outside(args: &[&str]) -> String {
    let mut c = Command::new(PROBE);
    c.args(args).uid(1000).gid(1000);
    // SAFETY: setrlimit in the child before exec; lowering one's own limit needs no privilege.
    unsafe {
        c.pre_exec(|| {
            let lim = libc::rlimit { rlim_cur: USER_NPROC, rlim_max: USER_NPROC };
            if libc::setrlimit(libc::RLIMIT_NPROC, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = c.output().expect("run the probe outside");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The count of `forked K ...`.
fn forked(line: &str) -> usize {
    line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("not a fork report: {line:?}"))
}

#[test]
fn a_fork_bomb_and_a_memory_hog_in_a_session_stop_at_its_limits_and_the_user_keeps_working() {
    let dir = pincer_tests::fresh_dir("limits");
    let ws = dir.join("ws");
    pincer_tests::write_file(&ws.join("notes.md"), "notes\n");
    chown_tree(&ws, 1000);
    let mut daemon = Daemon::start(Path::new(PINCER), &dir, &DaemonSettings { on_miss: "record", escalation_timeout_secs: 60 });
    let config = dir.join("pincer.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!("[limits]\npids_max = {PIDS_MAX}\nmemory_max = \"{MEMORY_MAX_MIB}M\"\n"));
    std::fs::write(&config, text).unwrap();
    daemon.crash();
    daemon.restart();

    let shared = dir.join("shared");
    let script = format!(
        "S={s}\nPROBE={PROBE}\n$PROBE alloc {big} > $S/alloc 2>&1; echo \"exit $?\" >> $S/alloc\n$PROBE fork-hold {BOMB} $S/bomb\n",
        s = shared.display(),
        big = MEMORY_MAX_MIB * 2,
    );
    let mut run = Command::new(PINCER)
        .args(["run", "--root", ws.to_str().unwrap(), "--user", "1000", "--prompt", "Read my notes.", "--", "/bin/sh", "-c", &script])
        .env("PINCER_SOCKET", &daemon.socket)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("pincer run");

    // Memory: the session's allocation of twice its limit is killed; the same outside works.
    let alloc = wait_for(&shared.join("alloc"), |last| last.starts_with("exit "));
    assert!(alloc.ends_with("exit 137") && !alloc.contains("ok"), "the session allocated past memory.max: {alloc:?}");
    assert_eq!(outside(&["alloc", &(MEMORY_MAX_MIB * 2).to_string()]), "ok");

    // Processes: the bomb stops at pids.max (EAGAIN) and holds what it got.
    let bomb = wait_for(&shared.join("bomb"), |_| true);
    assert!(forked(&bomb) < PIDS_MAX && bomb.ends_with("errno 11"), "the bomb was not stopped by pids.max: {bomb:?}");
    let parent = PathBuf::from("/sys/fs/cgroup").join(dir.file_name().unwrap());
    let sessions: Vec<PathBuf> = std::fs::read_dir(&parent).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let read = |f: &str| std::fs::read_to_string(sessions[0].join(f)).unwrap().trim().to_string();
    assert_eq!(read("pids.max"), PIDS_MAX.to_string());
    assert_eq!(read("memory.max"), (MEMORY_MAX_MIB << 20).to_string());
    // While the bomb holds its processes, the user outside still forks.
    assert_eq!(outside(&["fork", "20"]), "forked 20");

    // The session ends: everything in its cgroup is killed.
    std::fs::write(sessions[0].join("cgroup.kill"), "1").unwrap();
    let _ = run.wait();
    drop(daemon);
}

/// The niceness field of a `/proc/PID[/task/TID]/stat` text (after the command's name,
/// which may hold spaces, in parentheses).
fn niceness(stat: &str) -> i32 {
    let after = &stat[stat.rfind(')').expect("a stat line") + 2..];
    // Field 19 of the line is the 17th after the name (state is the 3rd of the line).
    after.split_whitespace().nth(16).and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("no niceness in {stat:?}"))
}

/// The daemon runs ahead of the sessions (`nice`, -10 by default), and nothing it runs for
/// the user inherits that: the user's startup files, which the daemon runs as the user (its
/// login shell reads `~/.profile`) to learn the environment a session starts from, are code
/// the user wrote, and a session's worker is the agent. Both record the niceness they ran
/// at. Without the daemon's raise its threads run at 0; without the restore in the child the
/// user's shell runs at -10, a priority the user could not set.
#[test]
fn the_daemon_runs_ahead_of_the_sessions_and_nothing_it_starts_for_the_user_does() {
    let dir = pincer_tests::fresh_dir("priority");
    let ws = dir.join("ws");
    pincer_tests::write_file(&ws.join("notes.md"), "notes\n");
    chown_tree(&ws, 1000);
    // The harness's shared folder (`Daemon::start` makes it, writable by all).
    let shared = dir.join("shared");
    let shell_record = shared.join("shell-nice");
    // The user's profile records the niceness of the shell that reads it.
    let profile = PathBuf::from("/home/worker/.profile");
    let before = std::fs::read(&profile).ok();
    let mut text = before.clone().unwrap_or_default();
    text.extend_from_slice(format!("\ncut -d' ' -f19 /proc/$$/stat >> {}\n", shell_record.display()).as_bytes());
    std::fs::write(&profile, text).unwrap();
    std::os::unix::fs::chown(&profile, Some(1000), Some(1000)).unwrap();
    struct Restore(PathBuf, Option<Vec<u8>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = match &self.1 {
                Some(b) => std::fs::write(&self.0, b),
                None => std::fs::remove_file(&self.0),
            };
        }
    }
    let _restore = Restore(profile, before);

    let daemon = Daemon::start(Path::new(PINCER), &dir, &DaemonSettings { on_miss: "record", escalation_timeout_secs: 60 });
    let pid = daemon.pid().expect("the daemon runs");
    let threads: Vec<(String, i32)> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .map(|t| {
            let t = t.unwrap().path();
            (t.display().to_string(), niceness(&std::fs::read_to_string(t.join("stat")).unwrap()))
        })
        .collect();
    assert!(threads.len() > 1 && threads.iter().all(|(_, n)| *n == -10), "every thread of the daemon runs at nice -10: {threads:?}");

    let script = format!("cut -d' ' -f19 /proc/self/stat > {}/worker-nice\n", shared.display());
    let status = Command::new(PINCER)
        .args(["run", "--root", ws.to_str().unwrap(), "--user", "1000", "--prompt", "Read my notes.", "--", "/bin/sh", "-c", &script])
        .env("PINCER_SOCKET", &daemon.socket)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("pincer run");
    assert!(status.success(), "pincer run: {status}");
    let worker = std::fs::read_to_string(shared.join("worker-nice")).unwrap();
    assert_eq!(worker.trim(), "0", "the session's worker runs at the niceness `pincer run` had");
    let shell = std::fs::read_to_string(&shell_record).unwrap_or_else(|e| panic!("the daemon did not run the user's login shell: {e}"));
    assert!(!shell.trim().is_empty() && shell.lines().all(|l| l.trim() == "0"), "the user's startup files ran at the daemon's priority: {shell:?}");
    drop(daemon);
}
