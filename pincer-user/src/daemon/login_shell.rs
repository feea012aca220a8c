//! The environment the user's own shells give their programs, found by running them.
//!
//! What a startup file puts on `PATH` (or in `EDITOR`, `GIT_CONFIG_GLOBAL`, ...) is not
//! always written in it: a command substitution (`$(brew --prefix)/bin`, `$(go env
//! GOPATH)/bin`), a plugin manager, a condition on the host. Reading the files
//! ([`super::code_places`]) finds the places written there; the environment of a process
//! that started a session ([`super::code_places::of_process`]) finds the rest only when
//! that process ran the user's shell. So the daemon runs the user's shells itself, as the
//! user does when opening a terminal or logging in: as the owner (uid and gid, no
//! supplementary groups), outside every session, with a plain environment, standard input
//! from `/dev/null` and a bounded wait. Each shell ends by `exec`ing `cat
//! /proc/self/environ`, so what is read is the environment the shell exports to the
//! programs it runs. The shell's whole process group is killed when it is done or out of
//! time. A shell that fails, hangs or prints no environment adds nothing (the places read
//! from the files are kept).

use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::code_places::{of_environ, UserEnvironment, MAX_BYTES};
use super::users::Account;

/// How long one shell may take to start and print its environment.
pub const WAIT: Duration = Duration::from_secs(3);

/// What the shell prints before its environment (its startup files may print to standard
/// output first: a greeting, a fortune).
const MARKER: &[u8] = b"\n--pincer: the environment follows--\n";

/// The program each shell `exec`s to print its environment.
const CATS: &[&str] = &["/usr/bin/cat", "/bin/cat"];

/// Where a shell that is not the login shell is looked for.
const BIN_DIRS: &[&str] = &["/usr/bin", "/bin", "/usr/local/bin"];

/// Shells whose `-l` (login) and `-i` (interactive) flags are known; another login shell
/// is run with `-c` only.
const KNOWN: &[&str] = &["sh", "dash", "bash", "zsh", "fish", "ksh", "mksh", "yash"];

/// One way the user's shells start: a program and its flags (before `-c`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Start {
    /// The shell.
    pub shell: PathBuf,
    /// Its flags: `-l` for a login shell, `-i` for an interactive one.
    pub flags: Vec<&'static str>,
}

/// How one shell's run went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It printed its environment, of this many bytes.
    Read(usize),
    /// It was still running at the bound, and was killed.
    TimedOut,
    /// It ended without printing an environment (its exit code, or the signal that ended it).
    NoEnvironment(String),
    /// It could not be started.
    NotStarted(String),
}

/// The environment the owner's shells give their programs, with how each run went.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// What the environments name ([`of_environ`]), merged.
    pub env: UserEnvironment,
    /// The environments as the shells printed them (`NAME=value`, each ended by a NUL).
    pub environs: Vec<Vec<u8>>,
    /// Each shell run, with its outcome and time.
    pub runs: Vec<(Start, Outcome, Duration)>,
}

/// The shells `owner` starts: the login shell as a login and interactive shell (what `ssh`
/// and a console start), and each other shell whose startup files are in the home and
/// which is installed, as an interactive shell (what a terminal emulator starts): `bash -i`
/// reads `~/.bashrc`, which a login bash reads only when the profile sources it.
pub fn starts(owner: &Account) -> Vec<Start> {
    let mut out = Vec::new();
    let login = owner.shell.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if owner.shell.is_absolute() && is_executable(&owner.shell) && !matches!(login, "nologin" | "false" | "true" | "sync") {
        let flags = if KNOWN.contains(&login) { vec!["-l", "-i"] } else { vec![] };
        out.push(Start { shell: owner.shell.clone(), flags });
    }
    let home = &owner.home;
    let others: [(&str, &[&str], &[&'static str]); 3] = [
        ("bash", &[".bashrc"], &["-i"]),
        ("zsh", &[".zshrc", ".zshenv", ".zprofile", ".zlogin"], &["-l", "-i"]),
        ("fish", &[".config/fish/config.fish", ".config/fish/conf.d"], &["-l", "-i"]),
    ];
    for (name, files, flags) in others {
        if !files.iter().any(|f| home.join(f).exists()) {
            continue;
        }
        // The login shell already ran as a login and interactive shell (bash's login run
        // does not read `~/.bashrc`, so bash runs again).
        if name == login && name != "bash" {
            continue;
        }
        if let Some(shell) = BIN_DIRS.iter().map(|d| Path::new(d).join(name)).find(|p| is_executable(p)) {
            let start = Start { shell, flags: flags.to_vec() };
            if !out.contains(&start) {
                out.push(start);
            }
        }
    }
    out
}

/// Runs each of `owner`'s shells ([`starts`]) and reads what their environments name
/// ([`of_environ`], with `roots` the sessions' roots), each run bounded by `wait`.
pub fn observe(owner: &Account, roots: &[PathBuf], wait: Duration) -> Observed {
    let mut observed = Observed::default();
    let Some(cat) = CATS.iter().map(Path::new).find(|p| is_executable(p)) else {
        tracing::warn!("no cat in {CATS:?}: the user's shells are not run for their environment");
        return observed;
    };
    // The shells run side by side: a session's start waits for the slowest, not their sum.
    let runs: Vec<(Start, Outcome, Option<Vec<u8>>, Duration)> = std::thread::scope(|scope| {
        let handles: Vec<_> = starts(owner)
            .into_iter()
            .map(|start| {
                scope.spawn(move || {
                    let began = Instant::now();
                    let (outcome, env) = match run(owner, &start, cat, wait) {
                        Ok(Some(bytes)) => (Outcome::Read(bytes.len()), Some(bytes)),
                        Ok(None) => (Outcome::TimedOut, None),
                        Err(outcome) => (outcome, None),
                    };
                    (start, outcome, env, began.elapsed())
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    for (start, outcome, env, took) in runs {
        if let Some(bytes) = env {
            observed.env.merge(&of_environ(&bytes, &owner.home, roots));
            observed.environs.push(bytes);
        }
        match &outcome {
            Outcome::Read(n) => tracing::debug!(shell = %start.shell.display(), flags = ?start.flags, bytes = n, ms = took.as_millis() as u64, "read the environment the user's shell gives its programs"),
            other => tracing::warn!(shell = %start.shell.display(), flags = ?start.flags, outcome = ?other, ms = took.as_millis() as u64, "the user's shell gave no environment: only its startup files' text is read for code places"),
        }
        observed.runs.push((start, outcome, took));
    }
    observed
}

/// The environments of each account's shells as last run ([`remembered`]), by uid, home and
/// login shell; an account's are run again after [`forget`].
static REMEMBERED: std::sync::Mutex<Vec<Remembered>> = std::sync::Mutex::new(Vec::new());

/// One account's remembered environments: (uid, home, login shell), the startup files'
/// [`Stamp`] when its shells ran, and what they printed.
type Remembered = ((u32, PathBuf, PathBuf), Stamp, Vec<Vec<u8>>);

/// The startup files every run reads first, in the home and the system's: a change to one
/// (its inode, size, modification or change time) runs the shells again, as [`forget`]
/// does for a change to any file the configuration watch follows.
const STARTUP_FILES: &[&str] = &[
    "~/.bashrc", "~/.bash_profile", "~/.bash_login", "~/.profile", "~/.zshrc", "~/.zshenv", "~/.zprofile", "~/.zlogin",
    "~/.config/fish/config.fish", "/etc/profile", "/etc/bash.bashrc", "/etc/zsh/zshrc", "/etc/zsh/zshenv", "/etc/zshrc", "/etc/zshenv",
];

/// What [`STARTUP_FILES`] are now.
type Stamp = Vec<Option<(u64, u64, i64, i64, i64, i64)>>;

fn stamp(home: &Path) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    STARTUP_FILES
        .iter()
        .map(|f| {
            let p = match f.strip_prefix("~/") {
                Some(rel) => home.join(rel),
                None => PathBuf::from(f),
            };
            std::fs::metadata(p).ok().map(|m| (m.ino(), m.size(), m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec()))
        })
        .collect()
}

/// What `owner`'s shells give their programs ([`observe`]), run once and then remembered
/// until [`forget`] (the daemon forgets an owner's when a file the owner's shells read
/// changes: the configuration watch): a slow startup file (a version manager's `init`)
/// delays the owner's first session only.
pub fn remembered(owner: &Account, roots: &[PathBuf], wait: Duration) -> UserEnvironment {
    let key = (owner.uid, owner.home.clone(), owner.shell.clone());
    let now = stamp(&owner.home);
    let known = REMEMBERED.lock().unwrap_or_else(|e| e.into_inner()).iter().find(|(k, s, _)| *k == key && *s == now).map(|(_, _, e)| e.clone());
    let environs = match known {
        Some(environs) => environs,
        None => {
            let o = observe(owner, roots, wait);
            let mut all = REMEMBERED.lock().unwrap_or_else(|e| e.into_inner());
            all.retain(|(k, _, _)| *k != key);
            all.push((key, now, o.environs.clone()));
            return o.env;
        }
    };
    let mut env = UserEnvironment::default();
    for e in &environs {
        env.merge(&of_environ(e, &owner.home, roots));
    }
    env
}

/// Forgets what `uid`'s shells gave ([`remembered`]): they are run again at the next need.
pub fn forget(uid: u32) {
    REMEMBERED.lock().unwrap_or_else(|e| e.into_inner()).retain(|((u, _, _), _, _)| *u != uid);
}

/// Runs one shell: its environment, `Ok(None)` if it was still running after `wait`, or
/// why it gave none.
fn run(owner: &Account, start: &Start, cat: &Path, wait: Duration) -> Result<Option<Vec<u8>>, Outcome> {
    let marker = String::from_utf8_lossy(MARKER);
    let script = format!("printf '%s' '{marker}'; exec {} /proc/self/environ", cat.display());
    let mut cmd = Command::new(&start.shell);
    cmd.args(&start.flags).arg("-c").arg(script);
    cmd.env_clear()
        .env("HOME", &owner.home)
        .env("USER", &owner.name)
        .env("LOGNAME", &owner.name)
        .env("SHELL", &owner.shell)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("TERM", "dumb")
        .current_dir(if owner.home.is_dir() { owner.home.as_path() } else { Path::new("/") })
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0);
    // The user's startup files run at the daemon's starting priority, not its raised one.
    // SAFETY: restore_in_child makes one async-signal-safe call.
    unsafe {
        cmd.pre_exec(super::priority::restore_in_child);
    }
    // SAFETY: getuid/getgid have no preconditions.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    if uid == 0 || uid != owner.uid {
        // As the owner: std drops root's supplementary groups before `setuid`.
        cmd.uid(owner.uid).gid(owner.gid);
    } else if gid != owner.gid {
        cmd.gid(owner.gid);
    }
    let mut child = cmd.spawn().map_err(|e| Outcome::NotStarted(e.to_string()))?;
    let group = child.id() as i32;
    let mut stdout = child.stdout.take().expect("piped");
    // Read without blocking: a process the startup files left in the background may hold
    // the pipe open after the shell has ended.
    // SAFETY: fcntl on a pipe this process owns.
    unsafe {
        let fd = stdout.as_raw_fd();
        libc::fcntl(fd, libc::F_SETFL, libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK);
    }
    let limit = MAX_BYTES as usize + MARKER.len() + (1 << 16);
    let mut out: Vec<u8> = Vec::new();
    let deadline = Instant::now() + wait;
    let mut buf = [0u8; 8192];
    let ended = loop {
        let mut pfd = libc::pollfd { fd: stdout.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut pfd, 1, 10) };
        loop {
            match stdout.read(&mut buf) {
                Ok(0) => break,
                Ok(n) if out.len() < limit => out.extend_from_slice(&buf[..n]),
                Ok(_) => {}
                Err(_) => break,
            }
        }
        if let Ok(Some(status)) = child.try_wait() {
            // Whatever the ended `cat` wrote is in the pipe: read it all.
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 || out.len() >= limit {
                    break;
                }
                out.extend_from_slice(&buf[..n]);
            }
            break Some(status);
        }
        if Instant::now() >= deadline {
            break None;
        }
    };
    // SAFETY: kill(2) of the shell's own process group (its id is the shell's pid).
    unsafe { libc::kill(-group, libc::SIGKILL) };
    let Some(status) = ended else {
        let _ = child.wait();
        return Ok(None);
    };
    let found = out.windows(MARKER.len()).rposition(|w| w == MARKER);
    match found {
        Some(at) if status.success() && out.len() < limit => Ok(Some(out.split_off(at + MARKER.len()))),
        _ => Err(Outcome::NoEnvironment(match (status.code(), status.signal()) {
            (Some(c), _) => format!("exit code {c}"),
            (_, Some(s)) => format!("signal {s}"),
            _ => status.to_string(),
        })),
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::code_places::CodePlace;

    fn me(home: &Path, shell: &str) -> Account {
        // SAFETY: getuid/getgid have no preconditions.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        Account { name: "u".into(), uid, gid, home: home.to_path_buf(), shell: PathBuf::from(shell) }
    }

    fn on_path(o: &Observed, p: &Path) -> bool {
        o.env.places.iter().any(|c| c.path() == p)
    }

    #[test]
    fn a_folder_a_command_substitution_puts_on_path_is_a_code_place() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        std::fs::write(h.join(".bashrc"), "echo welcome back\nexport PATH=\"$(printf %s \"$HOME/tools\")/bin:$PATH\"\nexport EDITOR=\"$HOME/ed/bin/vi\"\n").unwrap();
        let o = observe(&me(h, "/bin/sh"), &[], WAIT);
        assert!(o.runs.iter().any(|(s, out, _)| s.shell.ends_with("bash") && s.flags == ["-i"] && matches!(out, Outcome::Read(_))), "{:?}", o.runs);
        assert!(on_path(&o, &h.join("tools/bin")), "{:?}", o.env.places);
        assert!(o.env.places.iter().any(|c| matches!(c, CodePlace::Program(p) if p == &h.join("ed/bin/vi"))), "{:?}", o.env.places);
    }

    #[test]
    fn the_login_shell_runs_as_a_login_shell_and_reads_the_profile() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        std::fs::write(h.join(".profile"), "PATH=\"$(echo \"$HOME\")/prof/bin:$PATH\"; export PATH\n").unwrap();
        let o = observe(&me(h, "/bin/sh"), &[], WAIT);
        assert_eq!(o.runs.len(), 1, "no other shell has startup files here: {:?}", o.runs);
        assert_eq!(o.runs[0].0.flags, ["-l", "-i"]);
        assert!(on_path(&o, &h.join("prof/bin")), "{:?}", o.env.places);
    }

    #[test]
    fn a_shell_that_hangs_is_killed_at_the_bound_and_adds_nothing() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let pidfile = h.join("pid");
        std::fs::write(h.join(".bashrc"), format!("export PATH=\"$HOME/late/bin:$PATH\"\nsleep 60 & echo $! > {}\nwait\n", pidfile.display())).unwrap();
        let o = observe(&me(h, "/nonexistent/shell"), &[], Duration::from_millis(500));
        assert_eq!(o.runs.len(), 1, "{:?}", o.runs);
        assert_eq!(o.runs[0].1, Outcome::TimedOut);
        assert!(!on_path(&o, &h.join("late/bin")));
        let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
        // The background `sleep` was in the shell's process group: killed with it.
        let gone = (0..200).any(|_| {
            std::thread::sleep(Duration::from_millis(10));
            // SAFETY: signal 0 only checks that the process exists.
            (unsafe { libc::kill(pid, 0) }) != 0 || std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "))
        });
        assert!(gone, "the startup file's background process outlived the run");
    }

    #[test]
    fn a_shell_that_prints_no_environment_adds_nothing() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        std::fs::write(h.join(".bashrc"), "export PATH=\"$HOME/x/bin:$PATH\"\nexit 3\n").unwrap();
        let o = observe(&me(h, ""), &[], WAIT);
        assert_eq!(o.runs.len(), 1, "{:?}", o.runs);
        assert_eq!(o.runs[0].1, Outcome::NoEnvironment("exit code 3".into()));
        assert!(o.env.places.is_empty());
    }

    #[test]
    fn the_environment_is_remembered_until_forgotten() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        // `~/.bashrc` sources a file of its own, which only the configuration watch follows.
        std::fs::write(h.join(".bashrc"), ". \"$HOME/paths.sh\"\n").unwrap();
        std::fs::write(h.join("paths.sh"), "export PATH=\"$(echo \"$HOME\")/one/bin:$PATH\"\n").unwrap();
        let owner = me(h, "");
        let on = |env: &UserEnvironment, p: &str| env.places.iter().any(|c| c.path() == h.join(p));
        assert!(on(&remembered(&owner, &[], WAIT), "one/bin"));
        std::fs::write(h.join("paths.sh"), "export PATH=\"$(echo \"$HOME\")/two/bin:$PATH\"\n").unwrap();
        let again = remembered(&owner, &[], WAIT);
        assert!(on(&again, "one/bin") && !on(&again, "two/bin"), "not run again before it is forgotten");
        forget(owner.uid);
        let fresh = remembered(&owner, &[], WAIT);
        assert!(on(&fresh, "two/bin") && !on(&fresh, "one/bin"), "run again once forgotten");
        // A change to a startup file itself runs them again with no forgetting.
        std::fs::write(h.join("paths.sh"), "export PATH=\"$(echo \"$HOME\")/three/bin:$PATH\"\n").unwrap();
        std::fs::write(h.join(".bashrc"), ". \"$HOME/paths.sh\"\n# changed\n").unwrap();
        assert!(on(&remembered(&owner, &[], WAIT), "three/bin"), "a changed ~/.bashrc is run again");
    }

    #[test]
    fn no_shell_runs_for_an_account_that_cannot_log_in_and_has_no_startup_files() {
        let home = tempfile::tempdir().unwrap();
        assert!(starts(&me(home.path(), "/usr/sbin/nologin")).is_empty());
        assert!(starts(&me(home.path(), "")).is_empty());
    }
}
