//! Starting a worker: inside its session's cgroup, as an unprivileged user, with
//! `no_new_privs`, so nothing it runs can regain privileges or leave the session; and, as
//! a second wall behind the kernel hooks, in its own IPC namespace (the user's SysV objects
//! and POSIX message queues cannot even be named) and its own PID namespace with `/proc`
//! remounted (the user's processes cannot be named).
//!
//! Only stdio crosses into the session (every other inherited descriptor is closed at
//! exec), and the command gets a session keyring of its own (made inside the session, so
//! the kernel lets it use it while the user's keyrings stay out of reach).
//!
//! With a PID namespace the worker starts as `pincer session-init` (hidden subcommand,
//! [`session_init`]): three processes, as `bwrap --unshare-pid` does it:
//! - the *keeper*, the process `pincer run` waits on, outside the new namespace: it forks
//!   the init and then waits for it, forwarding the signals sent to it;
//! - the *init*, pid 1 of the new namespace: it makes the mount namespace private, mounts
//!   `/proc` for the new namespace, drops to the user, forks the command, forwards the
//!   signals sent to it, reaps every orphan and exits with the command's status;
//! - the command itself.
//!
//! The worker starts a session of its own (`setsid`): the terminal `pincer run` was started
//! from is not its controlling terminal, so `/dev/tty` does not reach what the user types
//! there, and none of its signals reach the session. If one of the worker's streams is a
//! terminal (the pseudo-terminal `pincer run` gives it), that becomes its controlling
//! terminal. All three processes stay in that session and process group: the command is in
//! its terminal's foreground group and gets `SIGINT`, `SIGTSTP` and `SIGWINCH` from it
//! directly, so the keeper and the init forward only the signals a process sends with
//! `kill` (`pincer run` passing on its own).

use serde::{Deserialize, Serialize};
use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// The hidden `pincer` subcommand that runs [`session_init`].
pub const INIT_SUBCOMMAND: &str = "session-init";

/// Exit status of the keeper or init when the command cannot be started.
pub const EXIT_CANNOT_START: i32 = 127;

/// Errors preparing a worker.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// No command was given.
    #[error("no command given to run")]
    NoCommand,
    /// A path or argument holds a NUL byte.
    #[error("{what} holds a NUL byte")]
    Nul {
        /// Which value.
        what: &'static str,
    },
    /// The worker would run as root.
    #[error("the worker must not run as root: name an unprivileged user with --user")]
    Root,
    /// More mounts lie inside a read-write open path than a layer carries over.
    #[error("more than {MAX_INSIDE} mounts lie inside {}: its layer cannot carry them over", path.display())]
    TooManyMounts {
        /// The open path.
        path: PathBuf,
    },
}

/// Which namespaces of its own a session gets (`[containment]` `pid_namespace`,
/// `ipc_namespace`). Both default to on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Namespaces {
    /// A PID namespace with `/proc` remounted, under a small init.
    pub pid: bool,
    /// An IPC namespace (SysV objects and POSIX message queues).
    pub ipc: bool,
}

impl Default for Namespaces {
    fn default() -> Self {
        Namespaces { pid: true, ipc: true }
    }
}

/// What to start.
#[derive(Debug, Clone)]
pub struct WorkerSpec {
    /// The session's cgroup directory.
    pub cgroup: PathBuf,
    /// User id to run as (not 0).
    pub uid: u32,
    /// Group id to run as.
    pub gid: u32,
    /// Program and arguments.
    pub command: Vec<String>,
    /// Extra environment.
    pub env: Vec<(String, String)>,
    /// The session's own namespaces.
    pub namespaces: Namespaces,
    /// The session's layers, bound over the read-write open paths in a mount namespace of
    /// the worker's own.
    pub layers: Vec<super::layers::LayerMount>,
}

/// Drops supplementary groups, sets gid and uid and `no_new_privs`. Async-signal-safe.
fn drop_privileges(uid: u32, gid: u32) -> std::io::Result<()> {
    // SAFETY: plain system calls without pointers to Rust data.
    unsafe {
        if libc::setgroups(0, std::ptr::null()) != 0 || libc::setgid(gid) != 0 || libc::setuid(uid) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// `KEYCTL_JOIN_SESSION_KEYRING` (`<linux/keyctl.h>`).
const KEYCTL_JOIN_SESSION_KEYRING: libc::c_long = 1;

/// Joins a new anonymous session keyring, so the caller's keys live in a keyring made
/// inside the session (the kernel counts it as the session's) instead of the user's
/// login keyring, which the session may not touch. A kernel without keys (`ENOSYS`) has
/// nothing to protect. Async-signal-safe.
fn own_session_keyring() -> std::io::Result<()> {
    // SAFETY: keyctl with a NULL name: no pointer to Rust data.
    if unsafe { libc::syscall(libc::SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, std::ptr::null::<libc::c_char>()) } < 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ENOSYS) {
            return Err(e);
        }
    }
    Ok(())
}

/// Makes the worker a session of its own, without the caller's controlling terminal, and
/// takes the first of its streams that is a terminal as its controlling terminal (one
/// already another session's, such as the user's own, is refused by the kernel: the worker
/// then has none). Async-signal-safe.
fn own_terminal_session() -> std::io::Result<()> {
    // SAFETY: setsid, isatty and ioctl on integers.
    unsafe {
        if libc::setsid() < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if let Some(fd) = (0..3).find(|&fd| libc::isatty(fd) == 1) {
            libc::ioctl(fd, libc::TIOCSCTTY, 0);
        }
    }
    Ok(())
}

/// Marks every descriptor above stdio close-on-exec: only stdin, stdout and stderr
/// cross into the session (a descriptor `pincer run` inherited from the user's shell or
/// IDE would otherwise give the worker a file no hook checks). Close-on-exec rather
/// than closed, so the pipe through which the spawner learns of a failed exec stays.
/// Async-signal-safe.
fn keep_only_stdio() -> std::io::Result<()> {
    // SAFETY: close_range on integers (Linux 5.11+).
    if unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// A command that, between fork and exec, joins the cgroup (writing `0`, "this process",
/// to `cgroup.procs`), unshares the session's namespaces and marks every descriptor but
/// stdio close-on-exec; then, without a PID namespace, drops supplementary groups, sets
/// gid and uid and sets `no_new_privs` and joins a session keyring of its own before
/// running the command; with one, runs [`session_init`] (still root: it mounts `/proc`
/// and drops privileges itself). Any failure there aborts the start.
pub fn command(spec: &WorkerSpec) -> Result<tokio::process::Command, WorkerError> {
    let (prog, args) = spec.command.split_first().ok_or(WorkerError::NoCommand)?;
    if spec.uid == 0 {
        return Err(WorkerError::Root);
    }
    let procs = CString::new(spec.cgroup.join("cgroup.procs").as_os_str().as_bytes()).map_err(|_| WorkerError::Nul { what: "the cgroup path" })?;
    let (uid, gid, ns) = (spec.uid, spec.gid, spec.namespaces);
    let mut cmd = if ns.pid {
        // The running `pincer` binary, whatever happened to its path since it started.
        let mut c = tokio::process::Command::new("/proc/self/exe");
        c.arg0("pincer").arg(INIT_SUBCOMMAND).arg(format!("--uid={uid}")).arg(format!("--gid={gid}")).arg("--").arg(prog).args(args);
        c
    } else {
        let mut c = tokio::process::Command::new(prog);
        c.args(args);
        c
    };
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    let mut flags = 0;
    if ns.ipc {
        flags |= libc::CLONE_NEWIPC;
    }
    if ns.pid {
        flags |= libc::CLONE_NEWPID | libc::CLONE_NEWNS;
    }
    let binds = LayerBinds::new(&spec.layers)?;
    if !binds.is_empty() {
        flags |= libc::CLONE_NEWNS;
    }
    // SAFETY: the closure only makes async-signal-safe system calls (setpriority, open, write, close,
    // unshare, mount, open_tree, mount_setattr, move_mount, close_range, setgroups, setgid,
    // setuid, prctl, keyctl) on data prepared before the fork.
    unsafe {
        cmd.pre_exec(move || {
            super::priority::restore_in_child()?;
            own_terminal_session()?;
            let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let ok = libc::write(fd, b"0".as_ptr().cast(), 1) == 1;
            let err = std::io::Error::last_os_error();
            libc::close(fd);
            if !ok {
                return Err(err);
            }
            if flags != 0 && libc::unshare(flags) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            binds.apply()?;
            keep_only_stdio()?;
            if ns.pid {
                Ok(())
            } else {
                drop_privileges(uid, gid)?;
                own_session_keyring()
            }
        });
    }
    Ok(cmd)
}

/// `open_tree` flags, `mount_setattr` attributes and `move_mount` flags (`<linux/mount.h>`).
const OPEN_TREE_CLONE: libc::c_uint = 1;
const AT_RECURSIVE: libc::c_uint = 0x8000;
const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
const MOVE_MOUNT_T_EMPTY_PATH: libc::c_uint = 0x40;

/// `struct mount_attr` (`<linux/mount.h>`).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// One layer to bind, prepared before the fork.
struct LayerBind {
    /// Where the daemon mounted the layer.
    source: CString,
    /// The user's directory it goes over.
    target: CString,
    /// That directory's device (user-space encoding) and inode, as the daemon made the
    /// layer over it.
    lower: (libc::dev_t, u64),
    /// The mount points under `target`, outermost first.
    inside: Vec<CString>,
}

/// The layers to bind in the worker's mount namespace: each layer over its path, and the
/// mounts that lay inside the path carried over on top of it, read-only (an overlay's lower
/// layer does not include them; a writable one carried over would let the session write the
/// user's objects there). Every path is the user's, who may replace any part of it by a
/// symlink at any time: each is opened without following one, the layer's target must be
/// the very directory the daemon made the layer over, and the mounts go onto what was
/// opened.
struct LayerBinds {
    binds: Vec<LayerBind>,
    /// The working directory, entered again once the layers are in place.
    cwd: CString,
}

/// The most mounts carried over inside one layer's path.
const MAX_INSIDE: usize = 16;

impl LayerBinds {
    fn new(layers: &[super::layers::LayerMount]) -> Result<Self, WorkerError> {
        let c = |p: &std::path::Path, what| CString::new(p.as_os_str().as_bytes()).map_err(|_| WorkerError::Nul { what });
        let cwd = c(&std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")), "the working directory")?;
        if layers.is_empty() {
            return Ok(LayerBinds { binds: Vec::new(), cwd });
        }
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let points: Vec<PathBuf> = mounts.lines().filter_map(|l| l.split(' ').nth(4)).map(|p| PathBuf::from(unescape_mountinfo(p))).collect();
        let mut binds = Vec::new();
        for l in layers {
            let mut inside: Vec<&PathBuf> = points.iter().filter(|p| p.starts_with(&l.target) && **p != l.target).collect();
            inside.sort_by_key(|p| p.components().count());
            inside.dedup();
            // Outermost only: a recursive clone brings the mounts beneath it.
            let mut outer: Vec<&PathBuf> = Vec::new();
            for p in inside {
                if !outer.iter().any(|o| p.starts_with(o)) {
                    outer.push(p);
                }
            }
            if outer.len() > MAX_INSIDE {
                return Err(WorkerError::TooManyMounts { path: l.target.clone() });
            }
            let (major, minor) = ((l.lower.dev >> 20) as libc::c_uint, (l.lower.dev & 0xfffff) as libc::c_uint);
            binds.push(LayerBind {
                source: c(&l.source, "a layer path")?,
                target: c(&l.target, "a layer path")?,
                lower: (libc::makedev(major, minor), l.lower.ino),
                inside: outer.into_iter().map(|p| c(p, "a mount point")).collect::<Result<_, _>>()?,
            });
        }
        Ok(LayerBinds { binds, cwd })
    }

    fn is_empty(&self) -> bool {
        self.binds.is_empty()
    }

    /// In the child, in its new mount namespace: nothing propagates back to the user's
    /// namespace, then each layer goes over its path, and the working directory is entered
    /// again (the one inherited is the user's directory under the layer). Async-signal-safe.
    fn apply(&self) -> std::io::Result<()> {
        use super::layers::open_no_symlinks;
        if self.binds.is_empty() {
            return Ok(());
        }
        let err = || Err(std::io::Error::last_os_error());
        // SAFETY: system calls on NUL-terminated strings prepared before the fork, on stack
        // buffers, and on descriptors this function opens (each closed at exec).
        unsafe {
            if libc::mount(std::ptr::null(), c"/".as_ptr(), std::ptr::null(), libc::MS_REC | libc::MS_SLAVE, std::ptr::null()) != 0 {
                return err();
            }
            for b in &self.binds {
                let target = open_no_symlinks(libc::AT_FDCWD, &b.target, libc::O_PATH | libc::O_DIRECTORY);
                if target < 0 {
                    return err();
                }
                let mut st: libc::stat = std::mem::zeroed();
                if libc::fstat(target, &mut st) != 0 {
                    return err();
                }
                if (st.st_dev, st.st_ino) != b.lower {
                    // Not the directory the layer was made over.
                    return Err(std::io::Error::from_raw_os_error(libc::ESTALE));
                }
                let mut trees = [-1; MAX_INSIDE];
                for (i, p) in b.inside.iter().enumerate() {
                    let at = open_no_symlinks(libc::AT_FDCWD, p, libc::O_PATH);
                    if at < 0 {
                        return err();
                    }
                    let fd = libc::syscall(libc::SYS_open_tree, at, c"".as_ptr(), OPEN_TREE_CLONE | AT_RECURSIVE | libc::AT_EMPTY_PATH as libc::c_uint | libc::O_CLOEXEC as libc::c_uint);
                    if fd < 0 {
                        return err();
                    }
                    trees[i] = fd as libc::c_int;
                    let attr = MountAttr { attr_set: MOUNT_ATTR_RDONLY, attr_clr: 0, propagation: 0, userns_fd: 0 };
                    if libc::syscall(libc::SYS_mount_setattr, trees[i], c"".as_ptr(), libc::AT_EMPTY_PATH as libc::c_uint | AT_RECURSIVE, &attr as *const MountAttr, std::mem::size_of::<MountAttr>()) != 0 {
                        return err();
                    }
                }
                let layer = libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, b.source.as_ptr(), OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint);
                if layer < 0 {
                    return err();
                }
                if libc::syscall(libc::SYS_move_mount, layer as libc::c_int, c"".as_ptr(), target, c"".as_ptr(), MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0 {
                    return err();
                }
                for (i, p) in b.inside.iter().enumerate() {
                    let at = open_no_symlinks(libc::AT_FDCWD, p, libc::O_PATH | libc::O_DIRECTORY);
                    if at < 0 || libc::syscall(libc::SYS_move_mount, trees[i], c"".as_ptr(), at, c"".as_ptr(), MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0 {
                        return err();
                    }
                }
            }
            if libc::chdir(self.cwd.as_ptr()) != 0 && libc::chdir(c"/".as_ptr()) != 0 {
                return err();
            }
        }
        Ok(())
    }
}

/// A mount point as `/proc/self/mountinfo` writes it, with its octal escapes (`\040`)
/// decoded.
fn unescape_mountinfo(field: &str) -> std::ffi::OsString {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    std::os::unix::ffi::OsStringExt::from_vec(out)
}

/// Why the session's init could not start the command.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// A system call failed.
    #[error("{what}")]
    Sys {
        /// What was being done.
        what: &'static str,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// An argument holds a NUL byte.
    #[error("{what} holds a NUL byte")]
    Nul {
        /// Which value.
        what: &'static str,
    },
    /// No command was given.
    #[error("no command given to run")]
    NoCommand,
    /// Not started by `pincer run` (root, in a fresh PID namespace).
    #[error("pincer {INIT_SUBCOMMAND} is started by pincer run only (as root, in a new PID namespace)")]
    NotInNewNamespace,
}

fn sys(what: &'static str) -> InitError {
    InitError::Sys { what, source: std::io::Error::last_os_error() }
}

/// Exit code for a wait status: the exit code, or 128 + the signal that killed it.
fn exit_code(status: libc::c_int) -> i32 {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        EXIT_CANNOT_START
    }
}

/// Whether a signal was sent by a process (`kill`, `sigqueue`, `tgkill`) rather than by
/// the kernel for the terminal (`^C`, `^Z`, window size) or a child.
fn sent_by_a_process(info: &libc::siginfo_t) -> bool {
    info.si_code <= 0
}

/// All signals blocked, to be taken one by one with `sigwaitinfo`; returns the old mask.
fn block_all_signals() -> Result<libc::sigset_t, InitError> {
    // SAFETY: sigset_t is plain data, initialised by sigfillset / sigprocmask.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        if libc::sigprocmask(libc::SIG_SETMASK, &all, &mut old) != 0 {
            return Err(sys("blocking signals"));
        }
        Ok(old)
    }
}

/// The next signal, with its sender.
fn next_signal() -> libc::siginfo_t {
    // SAFETY: sigset_t and siginfo_t are plain data filled by the kernel.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        let mut info: libc::siginfo_t = std::mem::zeroed();
        while libc::sigwaitinfo(&all, &mut info) < 0 {}
        info
    }
}

/// `pincer session-init --uid U --gid G -- COMMAND...`: runs as the keeper (see the module
/// doc) in the caller, forks the session's init as pid 1 of the PID namespace the caller
/// unshared, and returns the exit code for the keeper: the command's.
pub fn session_init(uid: u32, gid: u32, command: &[String]) -> Result<i32, InitError> {
    if command.is_empty() {
        return Err(InitError::NoCommand);
    }
    if uid == 0 {
        return Err(InitError::NotInNewNamespace);
    }
    let argv: Vec<CString> = command.iter().map(|a| CString::new(a.as_bytes())).collect::<Result<_, _>>().map_err(|_| InitError::Nul { what: "the command" })?;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(InitError::NotInNewNamespace);
    }
    let old_mask = block_all_signals()?;
    // SAFETY: this process is single-threaded (nothing started a thread before the
    // subcommand ran), so the child may run ordinary code after fork.
    let init = unsafe { libc::fork() };
    if init < 0 {
        return Err(sys("forking the session's init"));
    }
    if init == 0 {
        // SAFETY: _exit ends the child without running the parent's destructors.
        unsafe { libc::_exit(run_init(uid, gid, &argv, &old_mask)) };
    }
    drop_privileges(uid, gid).map_err(|source| InitError::Sys { what: "dropping privileges", source })?;
    loop {
        let info = next_signal();
        if info.si_signo == libc::SIGCHLD {
            let mut status = 0;
            // SAFETY: waitpid on our only child.
            let r = unsafe { libc::waitpid(init, &mut status, libc::WNOHANG) };
            if r == init {
                return Ok(exit_code(status));
            }
            continue;
        }
        if sent_by_a_process(&info) {
            // SAFETY: kill of our own child.
            unsafe { libc::kill(init, info.si_signo) };
        }
    }
}

/// Prints why the init failed and returns the exit code.
fn init_failed(e: InitError) -> i32 {
    eprintln!("pincer: session init: {e}{}", std::error::Error::source(&e).map(|s| format!(": {s}")).unwrap_or_default());
    EXIT_CANNOT_START
}

/// The session's init, pid 1 of its PID namespace: returns its exit code.
fn run_init(uid: u32, gid: u32, argv: &[CString], old_mask: &libc::sigset_t) -> i32 {
    // SAFETY: getpid has no preconditions.
    if unsafe { libc::getpid() } != 1 {
        return init_failed(InitError::NotInNewNamespace);
    }
    let none: &CStr = c"none";
    let proc_: &CStr = c"proc";
    let root: &CStr = c"/";
    let proc_dir: &CStr = c"/proc";
    // SAFETY: prctl and mount with constant C strings.
    unsafe {
        // The namespace dies with its keeper.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        // Nothing mounted here reaches the user's mount namespace.
        if libc::mount(none.as_ptr(), root.as_ptr(), std::ptr::null(), libc::MS_REC | libc::MS_PRIVATE, std::ptr::null()) != 0 {
            return init_failed(sys("making the session's mounts private"));
        }
        // A /proc of this PID namespace: the user's processes have no entry in it.
        let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
        if libc::mount(proc_.as_ptr(), proc_dir.as_ptr(), proc_.as_ptr(), flags, std::ptr::null()) != 0 {
            return init_failed(sys("mounting /proc for the session's PID namespace"));
        }
        // The user's POSIX queues are files under the host's `/dev/mqueue` too, where an
        // open() of one gives a descriptor that mq_send and mq_receive accept: mount the
        // session's own queue filesystem (of its IPC namespace) over it, as bubblewrap's
        // `--mqueue` does. Without that directory there is nothing to hide.
        let mqueue: &CStr = c"mqueue";
        let mqueue_dir: &CStr = c"/dev/mqueue";
        let mut st: libc::stat = std::mem::zeroed();
        if libc::stat(mqueue_dir.as_ptr(), &mut st) == 0
            && st.st_mode & libc::S_IFMT == libc::S_IFDIR
            && libc::mount(mqueue.as_ptr(), mqueue_dir.as_ptr(), mqueue.as_ptr(), flags, std::ptr::null()) != 0
        {
            return init_failed(sys("mounting the session's /dev/mqueue"));
        }
    }
    if let Err(source) = drop_privileges(uid, gid) {
        return init_failed(InitError::Sys { what: "dropping privileges", source });
    }
    if let Err(source) = own_session_keyring() {
        return init_failed(InitError::Sys { what: "joining the session's own keyring", source });
    }
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // SAFETY: single-threaded; the child only restores the mask and execs.
    let child = unsafe { libc::fork() };
    if child < 0 {
        return init_failed(sys("forking the command"));
    }
    if child == 0 {
        // SAFETY: restore the caller's signal mask, exec with NUL-terminated argv.
        unsafe {
            libc::sigprocmask(libc::SIG_SETMASK, old_mask, std::ptr::null_mut());
            libc::execvp(ptrs[0], ptrs.as_ptr());
            let e = std::io::Error::last_os_error();
            eprintln!("pincer: cannot run {:?}: {e}", argv[0]);
            libc::_exit(EXIT_CANNOT_START);
        }
    }
    loop {
        let info = next_signal();
        if info.si_signo == libc::SIGCHLD {
            // Reap every zombie of the namespace; the command's end is the session's end.
            loop {
                let mut status = 0;
                // SAFETY: waitpid for any child.
                let r = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
                if r == child {
                    return exit_code(status);
                }
                if r <= 0 {
                    break;
                }
            }
            continue;
        }
        if sent_by_a_process(&info) {
            // SAFETY: kill of our own child.
            unsafe { libc::kill(child, info.si_signo) };
        }
    }
}
