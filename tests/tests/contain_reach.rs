//! Session containment, reach into other processes and sockets, tried as an
//! attacker would against the real BPF LSM (run inside the VM as root).
//!
//! Outside every session run real processes of the same uid 1000 as the
//! attacker: a victim holding a secret (open fd, environment, memory), and
//! deputy servers that answer whoever connects (Unix pathname and abstract
//! sockets, stream and datagram, loopback TCP and UDP), and a SysV shared
//! memory segment. Each route is first shown open to an ungated process of the
//! same uid (so the kernel's own checks let it through and only the hook can
//! stop it), then blocked for a gated one, while the same thing inside the
//! session still works.

use pincer::kernel::{Hook, HostPort, Proto, Reach, ReachDenial};
use pincer_tests::*;
use std::ffi::CString;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

const UID: u32 = 1000;
const EPERM: i32 = libc::EPERM;
/// The fd number the victim keeps its secret file open at.
const SECRET_FD: i32 = 77;
/// A value in the victim's memory (same address in every fork of this test).
static SECRET_WORD: u64 = 0x5ec2_e7ba_d0c0_ffee;

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(-1)
}

fn rc(r: i64) -> i32 {
    if r < 0 {
        errno()
    } else {
        0
    }
}

/// Drops to `UID` (and joins `cgroup` first, if any); returns false on failure.
fn enter(cgroup: Option<&CString>) -> bool {
    // SAFETY: plain syscalls.
    unsafe {
        if let Some(procs) = cgroup {
            let fd = libc::open(procs.as_ptr(), libc::O_WRONLY);
            if fd < 0 || libc::write(fd, b"0\n".as_ptr().cast(), 2) != 2 {
                return false;
            }
            libc::close(fd);
        }
        if libc::setresgid(UID, UID, UID) != 0 || libc::setresuid(UID, UID, UID) != 0 {
            return false;
        }
        // A uid change makes a process non-dumpable, which would keep its own
        // uid out (and give its /proc files to root): be an ordinary process.
        libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) == 0
    }
}

/// Moves a forked child's report pipe end `fd` above every fd its work may claim (the
/// victim dup2s its secret to `SECRET_FD`, which may be the pipe's number); the new fd,
/// or -1.
fn lift(fd: i32) -> i32 {
    // SAFETY: fcntl/close on the child's own descriptor.
    unsafe {
        let high = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 512);
        libc::close(fd);
        high
    }
}

/// Runs `f` in a forked child as `UID`, inside `cgroup` if given, and returns
/// the results it reports (0 or an errno each).
fn attacker(cgroup: Option<&Path>, f: impl FnOnce() -> Vec<i32>) -> Vec<i32> {
    let procs = cgroup.map(|c| CString::new(c.join("cgroup.procs").as_os_str().as_bytes()).unwrap());
    let mut fds = [0; 2];
    // SAFETY: pipe/fork; the child runs `f` and leaves with `_exit`.
    unsafe {
        assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
        let pid = libc::fork();
        assert!(pid >= 0, "fork");
        if pid == 0 {
            libc::close(fds[0]);
            let report = lift(fds[1]);
            if report < 0 || !enter(procs.as_ref()) {
                libc::_exit(101);
            }
            for r in f() {
                libc::write(report, (&r as *const i32).cast(), 4);
            }
            libc::_exit(0);
        }
        let (out, status) = child_results(fds, pid);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "attacker failed to start ({status:#x})");
        out
    }
}

/// A process of `UID` outside every session, killed when dropped.
struct Outside {
    pid: i32,
    /// What its setup reported (a port, an id).
    value: i64,
}

impl Outside {
    /// Forks a child that drops to `UID`, runs `setup` (its value is reported
    /// back once it is ready) and then `serve` until killed.
    fn start(setup: impl FnOnce() -> i64, serve: impl FnOnce(i64)) -> Self {
        Self::start_in(None, setup, serve)
    }

    /// [`Outside::start`], but inside the session whose cgroup is `cgroup`
    /// (a gated server), if given.
    fn start_in(cgroup: Option<&Path>, setup: impl FnOnce() -> i64, serve: impl FnOnce(i64)) -> Self {
        let procs = cgroup.map(|c| CString::new(c.join("cgroup.procs").as_os_str().as_bytes()).unwrap());
        let mut fds = [0; 2];
        // SAFETY: pipe/fork; the child never returns.
        unsafe {
            assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
            let pid = libc::fork();
            assert!(pid >= 0, "fork");
            if pid == 0 {
                libc::close(fds[0]);
                let report = lift(fds[1]);
                if report < 0 || !enter(procs.as_ref()) {
                    libc::_exit(101);
                }
                let v = setup();
                libc::write(report, (&v as *const i64).cast(), 8);
                libc::close(report);
                serve(v);
                libc::_exit(0);
            }
            libc::close(fds[1]);
            let mut v = 0i64;
            if libc::read(fds[0], (&mut v as *mut i64).cast(), 8) != 8 {
                let mut status = 0;
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
                panic!("outside process did not start (wait status {status:#x})");
            }
            libc::close(fds[0]);
            assert!(v >= 0, "outside process setup failed: errno {}", -v);
            Self { pid, value: v }
        }
    }

    /// A deputy of `UID` outside every session serving the Unix socket `name`
    /// (a path, or `@` and an abstract name) of `kind` (stream: every
    /// connection gets "obeyed"; datagram: received and forgotten).
    fn unix(name: &str, kind: i32) -> Self {
        Self::unix_in(None, name, kind)
    }

    /// [`Outside::unix`], served from inside the session of `cgroup`, if given.
    fn unix_in(cgroup: Option<&Path>, name: &str, kind: i32) -> Self {
        let name = name.to_string();
        let serve = if kind == libc::SOCK_STREAM { serve_stream } else { serve_dgram };
        Self::start_in(cgroup, move || unix_server(&name, kind), serve)
    }

    /// A deputy serving `ip:port` (0: the kernel picks) over TCP or UDP; its
    /// port is [`Outside::port`].
    fn inet(ip: IpAddr, port: u16, kind: i32) -> Self {
        let serve = if kind == libc::SOCK_STREAM { serve_stream } else { serve_dgram };
        Self::start(move || inet_server(ip, port, kind), move |v| serve(v >> 16))
    }

    /// The port an [`Outside::inet`] deputy serves.
    fn port(&self) -> u16 {
        (self.value & 0xffff) as u16
    }

    fn alive(&self) -> bool {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).unwrap_or_default();
        // State is the field after the parenthesised comm.
        let state = stat.rsplit(") ").next().and_then(|r| r.chars().next());
        matches!(state, Some('S') | Some('R'))
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        // SAFETY: kills and reaps the child this test started.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
        }
    }
}

/// A victim: holds a secret file open at `SECRET_FD`, a secret in its environment.
fn victim(dir: &Path) -> Outside {
    let secret = dir.join("secret.txt");
    write_file(&secret, "the user's secret");
    let path = CString::new(secret.as_os_str().as_bytes()).unwrap();
    Outside::start(
        move || {
            // SAFETY: plain syscalls.
            unsafe {
                let fd = libc::open(path.as_ptr(), libc::O_RDONLY);
                if fd < 0 || libc::dup2(fd, SECRET_FD) < 0 {
                    return -i64::from(errno());
                }
            }
            std::env::set_var("VICTIM_TOKEN", "hunter2");
            std::hint::black_box(&SECRET_WORD);
            0
        },
        |_| loop {
            // SAFETY: waits for a signal.
            unsafe { libc::pause() };
        },
    )
}

/// A gated child of the attacker (same session): pauses until killed.
fn own_child() -> i32 {
    // SAFETY: fork; the child only pauses.
    unsafe {
        let pid = libc::fork();
        if pid == 0 {
            loop {
                libc::pause();
            }
        }
        pid
    }
}

fn reap(pid: i32) {
    // SAFETY: kills and reaps a child of the calling process.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
    }
}

fn open_errno(path: &str, flags: i32) -> i32 {
    let c = CString::new(path).unwrap();
    // SAFETY: plain syscalls.
    unsafe {
        let fd = libc::open(c.as_ptr(), flags | libc::O_CLOEXEC);
        if fd < 0 {
            return errno();
        }
        libc::close(fd);
        0
    }
}

fn ptrace_attach(pid: i32) -> i32 {
    // SAFETY: attach, wait for the stop, detach.
    unsafe {
        if libc::ptrace(libc::PTRACE_ATTACH, pid, 0, 0) < 0 {
            return errno();
        }
        libc::waitpid(pid, std::ptr::null_mut(), libc::__WALL);
        libc::ptrace(libc::PTRACE_DETACH, pid, 0, 0);
        0
    }
}

fn vm_read(pid: i32) -> i32 {
    let mut word = 0u64;
    let local = libc::iovec { iov_base: (&mut word as *mut u64).cast(), iov_len: 8 };
    let remote = libc::iovec { iov_base: (&SECRET_WORD as *const u64).cast_mut().cast(), iov_len: 8 };
    // SAFETY: reads 8 bytes into `word`.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    if n < 0 {
        errno()
    } else if word == SECRET_WORD {
        0
    } else {
        -1
    }
}

fn pidfd_getfd(pid: i32, fd: i32) -> i32 {
    // SAFETY: raw syscalls on integers.
    unsafe {
        let pidfd = libc::syscall(libc::SYS_pidfd_open, pid, 0);
        if pidfd < 0 {
            return errno();
        }
        let got = libc::syscall(libc::SYS_pidfd_getfd, pidfd as i32, fd, 0);
        let r = if got < 0 { errno() } else { 0 };
        if got >= 0 {
            libc::close(got as i32);
        }
        libc::close(pidfd as i32);
        r
    }
}

fn kill(pid: i32, sig: i32) -> i32 {
    // SAFETY: sends a signal.
    rc(unsafe { libc::kill(pid, sig) } as i64)
}

/// Lets ptrace reach any process of the same uid (Yama would otherwise stop a
/// non-descendant attach by itself, and the test would not show the hook).
fn yama_off() {
    let _ = std::fs::write("/proc/sys/kernel/yama/ptrace_scope", "0");
}


/// Every reach denial waiting in the stream (file misses left out).
fn drain(events: &mut pincer::kernel::Events) -> Vec<ReachDenial> {
    std::iter::from_fn(|| events.try_next()).filter_map(|e| e.expect("event decodes").reach()).collect()
}

/// The next reach denial in the stream (file misses passed over); panics if none is there.
fn next_reach(events: &mut pincer::kernel::Events) -> ReachDenial {
    loop {
        if let Some(r) = events.try_next().expect("a reach denial").expect("event decodes").reach() {
            return r;
        }
    }
}

/// A session with the reach hooks, and a scratch directory outside every root.
struct Session {
    te: TestEnforcer,
    cg: TestCgroup,
    dir: PathBuf,
}

impl Session {
    fn new(name: &str) -> Self {
        pincer_tests::loopback_up();
        let mut te = TestEnforcer::shared();
        let cg = TestCgroup::new(name);
        te.get().register_session(cg.id).expect("register session");
        let dir = fresh_dir(name);
        // SAFETY: chown of a directory this test made.
        let c = CString::new(dir.as_os_str().as_bytes()).unwrap();
        assert_eq!(unsafe { libc::chown(c.as_ptr(), UID, UID) }, 0);
        // The session's own working directory (as its scratch is): the user's objects are
        // gated wherever they lie, and these tests are about reach, not files.
        let id = pincer::kernel::ObjectId::of_path(&dir).expect("stat the session's directory");
        for a in pincer::Access::ALL {
            te.get().grant(cg.id, id, pincer::kernel::Scope::Subtree, a).expect("grant the session's directory");
        }
        Self { te, cg, dir }
    }

    fn gated(&self, f: impl FnOnce() -> Vec<i32>) -> Vec<i32> {
        attacker(Some(&self.cg.path), f)
    }
}

fn ungated(f: impl FnOnce() -> Vec<i32>) -> Vec<i32> {
    attacker(None, f)
}

#[test]
fn signals_to_outside_processes_are_denied_and_inside_the_session_allowed() {
    let mut s = Session::new("reach-signal");
    let v = victim(&s.dir);
    let pid = v.pid;
    let rt = runtime();
    let mut misses = rt.block_on(async { s.te.get().events() }).expect("events");
    // Open to an ungated process of the same uid: existence probe.
    assert_eq!(ungated(|| vec![kill(pid, 0)]), vec![0]);
    let r = s.gated(|| {
        let child = own_child();
        let inside = vec![kill(child, libc::SIGSTOP), kill(child, libc::SIGCONT), kill(child, libc::SIGKILL)];
        // SAFETY: reaps the killed child.
        unsafe { libc::waitpid(child, std::ptr::null_mut(), 0) };
        let mut out = vec![kill(pid, libc::SIGSTOP), kill(pid, libc::SIGKILL), kill(pid, 0)];
        out.extend(inside);
        out
    });
    let seen = drain(&mut misses);
    assert_eq!(r, vec![EPERM, EPERM, EPERM, 0, 0, 0], "misses: {seen:?}");
    assert!(v.alive(), "the victim survived and is not stopped");
    let miss = seen.first().expect("a miss for the SIGSTOP");
    assert_eq!(miss.hook, Hook::TaskKill);
    assert_eq!(miss.session, s.cg.id);
    assert_eq!(miss.uid, UID);
    match &miss.reach {
        Reach::Process { pid: target, session, detail, .. } => {
            assert_eq!((*target, *session, *detail), (pid as u32, 0, libc::SIGSTOP as u32));
        }
        other => panic!("expected a process reach, got {other:?}"),
    }
}

#[test]
fn ptrace_proc_mem_environ_vm_readv_and_pidfd_getfd_reach_only_the_session() {
    yama_off();
    let s = Session::new("reach-ptrace");
    let v = victim(&s.dir);
    let pid = v.pid;
    let mem = format!("/proc/{pid}/mem");
    let environ = format!("/proc/{pid}/environ");
    let maps = format!("/proc/{pid}/maps");
    let routes = |pid: i32, mem: &str, environ: &str, maps: &str| {
        vec![
            ptrace_attach(pid),
            open_errno(mem, libc::O_RDONLY),
            open_errno(environ, libc::O_RDONLY),
            open_errno(maps, libc::O_RDONLY),
            vm_read(pid),
            pidfd_getfd(pid, SECRET_FD),
        ]
    };
    assert_eq!(ungated(|| routes(pid, &mem, &environ, &maps)), vec![0; 6], "every route is open without the hook");
    let r = s.gated(|| routes(pid, &mem, &environ, &maps));
    assert_eq!(r, vec![EPERM, EACCES, EACCES, EACCES, EPERM, EPERM]);
    // The same routes on the session's own process work.
    let r = s.gated(|| {
        let mut p = [0; 2];
        // SAFETY: a pipe whose read end the child inherits at SECRET_FD.
        unsafe {
            libc::pipe(p.as_mut_ptr());
            libc::dup2(p[0], SECRET_FD);
        }
        let child = own_child();
        let out = vec![
            ptrace_attach(child),
            open_errno(&format!("/proc/{child}/mem"), libc::O_RDONLY),
            open_errno(&format!("/proc/{child}/environ"), libc::O_RDONLY),
            vm_read(child),
            pidfd_getfd(child, SECRET_FD),
        ];
        reap(child);
        out
    });
    assert_eq!(r, vec![0; 5]);
    assert!(v.alive());
}

#[test]
fn ptrace_traceme_under_an_outside_parent_is_denied() {
    yama_off();
    let s = Session::new("reach-traceme");
    // The gated child's parent is this test, outside every session: asking
    // it to trace hands the session's process to an outside one.
    let procs = CString::new(s.cg.path.join("cgroup.procs").as_os_str().as_bytes()).unwrap();
    let traceme = |gate: Option<&CString>| -> i32 {
        let mut fds = [0; 2];
        // SAFETY: pipe/fork; the child reports PTRACE_TRACEME's result.
        unsafe {
            assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
            let pid = libc::fork();
            if pid == 0 {
                libc::close(fds[0]);
                if !enter(gate) {
                    libc::_exit(101);
                }
                let r = rc(libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0));
                libc::write(fds[1], (&r as *const i32).cast(), 4);
                libc::_exit(0);
            }
            libc::close(fds[1]);
            let mut r = -1i32;
            libc::read(fds[0], (&mut r as *mut i32).cast(), 4);
            libc::close(fds[0]);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
            r
        }
    };
    assert_eq!(traceme(None), 0);
    assert_eq!(traceme(Some(&procs)), EPERM);
}

#[test]
fn writes_to_another_process_proc_files_are_denied() {
    let s = Session::new("reach-proc");
    let v = victim(&s.dir);
    let oom = format!("/proc/{}/oom_score_adj", v.pid);
    let coredump = format!("/proc/{}/coredump_filter", v.pid);
    assert_eq!(ungated(|| vec![open_errno(&oom, libc::O_WRONLY), open_errno(&coredump, libc::O_WRONLY)]), vec![0, 0]);
    let r = s.gated(|| {
        let child = own_child();
        let out = vec![
            open_errno(&oom, libc::O_WRONLY),
            open_errno(&coredump, libc::O_WRONLY),
            open_errno(&oom, libc::O_RDONLY),
            open_errno(&format!("/proc/{child}/oom_score_adj"), libc::O_WRONLY),
            open_errno("/proc/self/oom_score_adj", libc::O_WRONLY),
        ];
        reap(child);
        out
    });
    // Reading stays open (everyone may read it); writing only one's own.
    assert_eq!(r, vec![EACCES, EACCES, 0, 0, 0]);
}

fn shmget(key: i32, flags: i32) -> i64 {
    // SAFETY: plain syscall.
    let id = unsafe { libc::shmget(key, 4096, flags) };
    if id < 0 {
        -i64::from(errno())
    } else {
        i64::from(id)
    }
}

fn shmat(id: i32) -> i32 {
    // SAFETY: attaches and detaches a segment.
    unsafe {
        let p = libc::shmat(id, std::ptr::null(), 0);
        if p as isize == -1 {
            return errno();
        }
        libc::shmdt(p);
        0
    }
}

#[test]
fn sysv_shared_memory_of_outside_processes_is_denied() {
    let s = Session::new("reach-shm");
    let key = 0x5e55_0001 + std::process::id() as i32;
    let seg = Outside::start(move || shmget(key, libc::IPC_CREAT | libc::IPC_EXCL | 0o600), |_| loop {
        // SAFETY: waits for a signal.
        unsafe { libc::pause() };
    });
    let id = seg.value as i32;
    let stat = |id: i32| {
        let mut ds: libc::shmid_ds = unsafe { std::mem::zeroed() };
        // SAFETY: IPC_STAT into a local buffer.
        rc(unsafe { libc::shmctl(id, libc::IPC_STAT, &mut ds) } as i64)
    };
    assert_eq!(ungated(|| vec![shmat(id), (shmget(key, 0) < 0) as i32, stat(id)]), vec![0, 0, 0]);
    let r = s.gated(|| {
        let own = shmget(libc::IPC_PRIVATE, libc::IPC_CREAT | 0o600) as i32;
        let out = vec![
            shmat(id),
            (-shmget(key, 0)) as i32,
            stat(id),
            // SAFETY: IPC_RMID of the outside segment.
            rc(unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) } as i64),
            shmat(own),
            stat(own),
            // SAFETY: removes the session's own segment.
            rc(unsafe { libc::shmctl(own, libc::IPC_RMID, std::ptr::null_mut()) } as i64),
        ];
        out
    });
    assert_eq!(r, vec![EACCES, EACCES, EACCES, EACCES, 0, 0, 0]);
    // The outside segment is still there.
    assert_eq!(ungated(|| vec![shmat(id)]), vec![0]);
    // SAFETY: removes the segment this test made.
    unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) };
}

/// A `sockaddr_un` for a path, or for an abstract name (`@` prefix).
fn unix_addr(name: &str) -> (libc::sockaddr_un, libc::socklen_t) {
    // SAFETY: sockaddr_un is plain data.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as u16;
    let (bytes, start) = match name.strip_prefix('@') {
        Some(rest) => (rest.as_bytes(), 1),
        None => (name.as_bytes(), 0),
    };
    for (i, b) in bytes.iter().enumerate() {
        a.sun_path[start + i] = *b as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + start + bytes.len() + usize::from(start == 0);
    (a, len as libc::socklen_t)
}

/// Binds (and for streams listens on) a Unix socket; returns the fd or -errno.
fn unix_server(name: &str, kind: i32) -> i64 {
    let (a, len) = unix_addr(name);
    // SAFETY: socket/bind/listen on a local address.
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, kind, 0);
        if fd < 0 || libc::bind(fd, (&a as *const libc::sockaddr_un).cast(), len) < 0 {
            return -i64::from(errno());
        }
        if kind == libc::SOCK_STREAM && libc::listen(fd, 16) < 0 {
            return -i64::from(errno());
        }
        i64::from(fd)
    }
}

/// Serves a stream socket: every connection gets "obeyed".
fn serve_stream(fd: i64) {
    loop {
        // SAFETY: accept/write/close on the listening fd.
        unsafe {
            let c = libc::accept(fd as i32, std::ptr::null_mut(), std::ptr::null_mut());
            if c >= 0 {
                libc::write(c, b"obeyed\n".as_ptr().cast(), 7);
                libc::close(c);
            }
        }
    }
}

/// Serves a datagram socket: receives and forgets.
fn serve_dgram(fd: i64) {
    let mut buf = [0u8; 256];
    loop {
        // SAFETY: recv into a local buffer.
        unsafe { libc::recv(fd as i32, buf.as_mut_ptr().cast(), buf.len(), 0) };
    }
}

fn unix_connect(name: &str, kind: i32) -> i32 {
    let (a, len) = unix_addr(name);
    // SAFETY: socket/connect/close.
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, kind, 0);
        let r = rc(libc::connect(fd, (&a as *const libc::sockaddr_un).cast(), len) as i64);
        libc::close(fd);
        r
    }
}

fn unix_sendto(name: &str) -> i32 {
    let (a, len) = unix_addr(name);
    // SAFETY: socket/sendto/close.
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM, 0);
        let r = libc::sendto(fd, b"x".as_ptr().cast(), 1, 0, (&a as *const libc::sockaddr_un).cast(), len);
        let r = rc(r as i64);
        libc::close(fd);
        r
    }
}

#[test]
fn unix_sockets_of_outside_processes_are_denied_own_and_allowed_ones_reachable() {
    let mut s = Session::new("reach-unix");
    let tag = format!("pincer-deputy-{}", std::process::id());
    let path = s.dir.join("deputy.sock").to_string_lossy().into_owned();
    let dgram_path = s.dir.join("deputy-dgram.sock").to_string_lossy().into_owned();
    let abstract_name = format!("@{tag}");
    let abstract_dgram = format!("@{tag}-dgram");
    let _deputies = [
        Outside::unix(&path, libc::SOCK_STREAM),
        Outside::unix(&dgram_path, libc::SOCK_DGRAM),
        Outside::unix(&abstract_name, libc::SOCK_STREAM),
        Outside::unix(&abstract_dgram, libc::SOCK_DGRAM),
    ];
    let routes = || {
        vec![
            unix_connect(&path, libc::SOCK_STREAM),
            unix_connect(&abstract_name, libc::SOCK_STREAM),
            unix_sendto(&dgram_path),
            unix_sendto(&abstract_dgram),
            unix_connect(&dgram_path, libc::SOCK_DGRAM),
        ]
    };
    assert_eq!(ungated(routes), vec![0; 5], "the deputies answer an ungated caller");
    let rt = runtime();
    let mut misses = rt.block_on(async { s.te.get().events() }).expect("events");
    assert_eq!(s.gated(routes), vec![EACCES; 5]);
    let miss = next_reach(&mut misses);
    assert_eq!(miss.hook, Hook::UnixStreamConnect);
    match miss.reach {
        Reach::UnixSocket { name, file, .. } => {
            assert_eq!(name, path);
            assert_eq!(file, Some(pincer::kernel::ObjectId::of_path(Path::new(&path)).unwrap()));
        }
        other => panic!("expected a unix reach, got {other:?}"),
    }
    let miss = next_reach(&mut misses);
    assert_eq!(miss.reach, Reach::UnixSocket { name: abstract_name.clone(), file: None, owner_uid: None });

    // The session's own sockets, pathname and abstract, stream and datagram.
    let own = s.dir.join("own.sock").to_string_lossy().into_owned();
    let own_abstract = format!("@{tag}-own");
    let own_dgram = format!("@{tag}-own-dgram");
    let r = s.gated(|| {
        let a = unix_server(&own, libc::SOCK_STREAM);
        let b = unix_server(&own_abstract, libc::SOCK_STREAM);
        let c = unix_server(&own_dgram, libc::SOCK_DGRAM);
        if a < 0 || b < 0 || c < 0 {
            return vec![-1];
        }
        vec![unix_connect(&own, libc::SOCK_STREAM), unix_connect(&own_abstract, libc::SOCK_STREAM), unix_sendto(&own_dgram)]
    });
    assert_eq!(r, vec![0, 0, 0]);

    // Allowed by socket file, and by abstract name.
    let file = pincer::kernel::ObjectId::of_path(Path::new(&path)).unwrap();
    s.te.get().allow_unix_socket(file).unwrap();
    s.te.get().allow_abstract_socket(&abstract_dgram.as_bytes()[1..]).unwrap();
    assert_eq!(s.gated(routes), vec![0, EACCES, EACCES, 0, EACCES]);
}

#[test]
fn a_trusted_socket_path_is_reachable_only_while_root_owns_the_socket() {
    let mut s = Session::new("reach-trusted");
    let trusted = s.dir.join("daemon.sock");
    let forged = s.dir.join("forged.sock");
    // Root's socket (like the daemon's), started by this test as root.
    let root_fd = unix_server(&trusted.to_string_lossy(), libc::SOCK_STREAM);
    assert!(root_fd >= 0);
    // Connectable by every user, as the daemon makes its socket.
    std::fs::set_permissions(&trusted, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
    let _deputy = Outside::unix(&forged.to_string_lossy(), libc::SOCK_STREAM);
    s.te.get().allow_unix_path(&trusted, Some(0)).unwrap();
    s.te.get().allow_unix_path(&forged, Some(0)).unwrap();
    let (t, f) = (trusted.to_string_lossy().into_owned(), forged.to_string_lossy().into_owned());
    let routes = || vec![unix_connect(&t, libc::SOCK_STREAM), unix_connect(&f, libc::SOCK_STREAM)];
    assert_eq!(ungated(routes), vec![0, 0]);
    let rt = runtime();
    let mut misses = rt.block_on(async { s.te.get().events() }).expect("events");
    let r = s.gated(routes);
    // The listener need not accept for connect to succeed (backlog).
    let seen = drain(&mut misses);
    assert_eq!(r, vec![0, EACCES], "a user's socket under a trusted name stays unreachable; misses: {seen:?}");
    assert_eq!(seen.len(), 1);
    assert!(matches!(seen[0].reach, Reach::UnixSocket { owner_uid: Some(UID), .. }), "the denial names the socket file's owner: {seen:?}");
    // SAFETY: closes the test's listener.
    unsafe { libc::close(root_fd as i32) };
}

fn inet_addr(ip: IpAddr, port: u16) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain data and large enough for both families.
    unsafe {
        let mut ss: libc::sockaddr_storage = std::mem::zeroed();
        match ip {
            IpAddr::V4(v4) => {
                let sin = &mut *(&mut ss as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in>();
                sin.sin_family = libc::AF_INET as u16;
                sin.sin_port = port.to_be();
                sin.sin_addr.s_addr = u32::from(v4).to_be();
                (ss, std::mem::size_of::<libc::sockaddr_in>() as u32)
            }
            IpAddr::V6(v6) => {
                let sin6 = &mut *(&mut ss as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in6>();
                sin6.sin6_family = libc::AF_INET6 as u16;
                sin6.sin6_port = port.to_be();
                sin6.sin6_addr.s6_addr = v6.octets();
                (ss, std::mem::size_of::<libc::sockaddr_in6>() as u32)
            }
        }
    }
}

fn family(ip: IpAddr) -> i32 {
    if ip.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    }
}

/// Binds `ip:port` (port 0: the kernel picks), listens for TCP; returns
/// `fd << 16 | port` or -errno. With `ask`, learns the port by getsockname.
fn inet_server(ip: IpAddr, port: u16, kind: i32) -> i64 {
    let (a, len) = inet_addr(ip, port);
    // SAFETY: socket/bind/listen/getsockname on local buffers.
    unsafe {
        let fd = libc::socket(family(ip), kind, 0);
        let one: i32 = 1;
        libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, (&one as *const i32).cast(), 4);
        if fd < 0 || libc::bind(fd, (&a as *const libc::sockaddr_storage).cast(), len) < 0 {
            return -i64::from(errno());
        }
        if kind == libc::SOCK_STREAM && libc::listen(fd, 16) < 0 {
            return -i64::from(errno());
        }
        let mut got: libc::sockaddr_storage = std::mem::zeroed();
        let mut glen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        if libc::getsockname(fd, (&mut got as *mut libc::sockaddr_storage).cast(), &mut glen) < 0 {
            return -i64::from(errno());
        }
        let p = u16::from_be((*(&got as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>()).sin_port);
        (i64::from(fd) << 16) | i64::from(p)
    }
}

fn tcp_connect(ip: IpAddr, port: u16) -> i32 {
    let (a, len) = inet_addr(ip, port);
    // SAFETY: socket/connect/close.
    unsafe {
        let fd = libc::socket(family(ip), libc::SOCK_STREAM, 0);
        let r = rc(libc::connect(fd, (&a as *const libc::sockaddr_storage).cast(), len) as i64);
        libc::close(fd);
        r
    }
}

/// TCP connect from an IPv6 socket (v4-mapped destinations included).
fn tcp6_connect(ip: Ipv6Addr, port: u16) -> i32 {
    let (a, len) = inet_addr(IpAddr::V6(ip), port);
    // SAFETY: socket/connect/close.
    unsafe {
        let fd = libc::socket(libc::AF_INET6, libc::SOCK_STREAM, 0);
        let r = rc(libc::connect(fd, (&a as *const libc::sockaddr_storage).cast(), len) as i64);
        libc::close(fd);
        r
    }
}

fn udp_sendto(ip: IpAddr, port: u16) -> i32 {
    let (a, len) = inet_addr(ip, port);
    // SAFETY: socket/sendto/close.
    unsafe {
        let fd = libc::socket(family(ip), libc::SOCK_DGRAM, 0);
        let r = libc::sendto(fd, b"x".as_ptr().cast(), 1, 0, (&a as *const libc::sockaddr_storage).cast(), len);
        let r = rc(r as i64);
        libc::close(fd);
        r
    }
}

fn udp_connect(ip: IpAddr, port: u16) -> i32 {
    let (a, len) = inet_addr(ip, port);
    // SAFETY: socket/connect/close.
    unsafe {
        let fd = libc::socket(family(ip), libc::SOCK_DGRAM, 0);
        let r = rc(libc::connect(fd, (&a as *const libc::sockaddr_storage).cast(), len) as i64);
        libc::close(fd);
        r
    }
}

const LO: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

#[test]
fn loopback_ports_of_outside_processes_are_denied_own_and_listed_ones_reachable() {
    let mut s = Session::new("reach-inet");
    let tcp = Outside::inet(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0, libc::SOCK_STREAM);
    let udp = Outside::inet(LO, 0, libc::SOCK_DGRAM);
    let (tp, up) = (tcp.port(), udp.port());
    let mapped = Ipv4Addr::LOCALHOST.to_ipv6_mapped();
    let routes = move || {
        vec![
            tcp_connect(LO, tp),
            tcp_connect(IpAddr::V4(Ipv4Addr::new(127, 1, 2, 3)), tp),
            tcp_connect(IpAddr::V4(Ipv4Addr::UNSPECIFIED), tp),
            tcp6_connect(mapped, tp),
            udp_sendto(LO, up),
            udp_connect(LO, up),
        ]
    };
    assert_eq!(ungated(routes), vec![0; 6], "the deputies answer an ungated caller");
    let rt = runtime();
    let mut misses = rt.block_on(async { s.te.get().events() }).expect("events");
    assert_eq!(s.gated(routes), vec![EACCES; 6]);
    let miss = next_reach(&mut misses);
    assert_eq!(miss.hook, Hook::SocketConnect);
    assert_eq!(miss.reach, Reach::HostPort { proto: Some(Proto::Tcp), proto_number: 6, addr: LO, port: tp });
    for _ in 0..3 {
        next_reach(&mut misses);
    }
    let miss = next_reach(&mut misses);
    assert_eq!(miss.hook, Hook::SocketSendmsg);
    assert_eq!(miss.reach, Reach::HostPort { proto: Some(Proto::Udp), proto_number: 17, addr: LO, port: up });

    // Ports the session bound itself: by explicit port (recorded after the
    // bind succeeded), or picked by the kernel and asked with getsockname.
    let r = s.gated(|| {
        let t = inet_server(LO, 0, libc::SOCK_STREAM);
        let u = inet_server(LO, 0, libc::SOCK_DGRAM);
        let fixed_port = 40000 + (std::process::id() % 20000) as u16;
        let f = inet_server(IpAddr::V6(Ipv6Addr::UNSPECIFIED), fixed_port, libc::SOCK_STREAM);
        // An outside process holds tp: the session binds it on no address or family
        // (refused before the kernel's own EADDRINUSE), and the refusal records nothing.
        let stolen = inet_server(LO, tp, libc::SOCK_STREAM);
        let other_family = inet_server(IpAddr::V6(Ipv6Addr::LOCALHOST), tp, libc::SOCK_STREAM);
        if t < 0 || u < 0 || f < 0 {
            return vec![-1];
        }
        vec![
            tcp_connect(LO, (t & 0xffff) as u16),
            udp_sendto(LO, (u & 0xffff) as u16),
            tcp_connect(IpAddr::V6(Ipv6Addr::LOCALHOST), fixed_port),
            tcp_connect(LO, fixed_port),
            if stolen < 0 { (-stolen) as i32 } else { 0 },
            if other_family < 0 { (-other_family) as i32 } else { 0 },
            tcp_connect(LO, tp),
        ]
    });
    assert_eq!(r, vec![0, 0, 0, 0, EACCES, EACCES, EACCES]);

    // Listed ports (DNS is listed by default), and remote hosts stay reachable.
    s.te.get().allow_port(HostPort { proto: Proto::Tcp, port: tp }).unwrap();
    let r = s.gated(move || {
        vec![
            tcp_connect(LO, tp),
            udp_sendto(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 53)), 53),
            udp_sendto(LO, up),
            udp_sendto(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)), up),
        ]
    });
    assert_eq!(r[..3], [0, 0, EACCES]);
    assert_ne!(r[3], EACCES, "a remote address is not gated");
}

#[test]
fn the_host_own_addresses_are_gated_like_loopback() {
    let mut s = Session::new("reach-hostaddr");
    let udp = Outside::inet(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0, libc::SOCK_DGRAM);
    let port = udp.port();
    // An address this VM does not have is remote until the host lists it as its own.
    let addr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7));
    assert_ne!(s.gated(move || vec![udp_sendto(addr, port)]), vec![EACCES]);
    let mut routes = pincer::kernel::local_routes().unwrap();
    routes.push(addr.into());
    s.te.get().set_local_routes(&routes).unwrap();
    assert_eq!(s.gated(move || vec![udp_sendto(addr, port)]), vec![EACCES]);
    s.te.get().refresh_local_routes().unwrap();
    assert_ne!(s.gated(move || vec![udp_sendto(addr, port)]), vec![EACCES]);
}

#[test]
fn processes_outside_sessions_are_untouched() {
    yama_off();
    let s = Session::new("reach-untouched");
    let v = victim(&s.dir);
    let pid = v.pid;
    let path = s.dir.join("d.sock").to_string_lossy().into_owned();
    let _d = Outside::unix(&path, libc::SOCK_STREAM);
    let tcp = Outside::inet(LO, 0, libc::SOCK_STREAM);
    let tp = tcp.port();
    let r = ungated(|| {
        vec![
            kill(pid, 0),
            ptrace_attach(pid),
            vm_read(pid),
            unix_connect(&path, libc::SOCK_STREAM),
            tcp_connect(LO, tp),
            open_errno(&format!("/proc/{pid}/oom_score_adj"), libc::O_WRONLY),
        ]
    });
    assert_eq!(r, vec![0; 6]);
}

#[test]
fn session_sockets_do_not_serve_outside_processes_unless_listed() {
    let mut s = Session::new("reach-squat");
    let tag = format!("pincer-squat-{}", std::process::id());
    // Names an outside tool of the user expects to find its own server at:
    // abstract names (no file, no owner: whoever binds first holds them) and a
    // path in a shared place.
    let stream = format!("@{tag}");
    let dgram = format!("@{tag}-dgram");
    let path = s.dir.join("agent.sock").to_string_lossy().into_owned();
    let routes = || vec![unix_connect(&stream, libc::SOCK_STREAM), unix_sendto(&dgram), unix_connect(&dgram, libc::SOCK_DGRAM), unix_connect(&path, libc::SOCK_STREAM)];
    {
        // Served by a process of the user outside every session, the tool reaches them.
        let _servers = [Outside::unix(&stream, libc::SOCK_STREAM), Outside::unix(&dgram, libc::SOCK_DGRAM), Outside::unix(&path, libc::SOCK_STREAM)];
        assert_eq!(ungated(routes), vec![0; 4]);
    }
    std::fs::remove_file(&path).unwrap();
    // The session squats the same names first.
    let cg = Some(s.cg.path.as_path());
    let _squatters = [Outside::unix_in(cg, &stream, libc::SOCK_STREAM), Outside::unix_in(cg, &dgram, libc::SOCK_DGRAM), Outside::unix_in(cg, &path, libc::SOCK_STREAM)];
    let rt = runtime();
    let mut misses = rt.block_on(async { s.te.get().events() }).expect("events");
    let r = ungated(routes);
    let seen = drain(&mut misses);
    assert_eq!(r, vec![EACCES; 4], "an outside tool reaches the session's server; misses: {seen:?}");
    let miss = seen.first().expect("a miss for the stream connect");
    assert_eq!(miss.hook, Hook::UnixInbound);
    assert_eq!(miss.session, s.cg.id, "reported on the squatting session");
    assert_eq!(miss.uid, UID, "by the outside caller");
    assert_eq!(miss.reach, Reach::UnixSocket { name: stream.clone(), file: None, owner_uid: None });
    let last = seen.last().expect("a miss for the path");
    assert_eq!(last.reach, Reach::UnixSocket { name: path.clone(), file: Some(pincer::kernel::ObjectId::of_path(Path::new(&path)).unwrap()), owner_uid: Some(UID) });
    // The session's own processes still reach its servers.
    assert_eq!(s.gated(routes), vec![0; 4]);
    // A listed name is served to outside processes; the others stay closed.
    s.te.get().allow_session_server(pincer::kernel::abstract_name_key(&stream.as_bytes()[1..]).unwrap()).unwrap();
    assert_eq!(ungated(routes), vec![0, EACCES, EACCES, EACCES]);
}

/// `<linux/keyctl.h>`: special keyring ids and the operations used here.
const KEY_SPEC_PROCESS_KEYRING: i32 = -2;
const KEY_SPEC_SESSION_KEYRING: i32 = -3;
const KEY_SPEC_USER_KEYRING: i32 = -4;
const KEY_SPEC_USER_SESSION_KEYRING: i32 = -5;
const KEYCTL_JOIN_SESSION_KEYRING: i64 = 1;
const KEYCTL_DESCRIBE: i64 = 6;
const KEYCTL_SEARCH: i64 = 10;
const KEYCTL_READ: i64 = 11;
const SECRET_KEY: &[u8] = b"the user's token";

fn add_key(desc: &str, payload: &[u8], keyring: i32) -> i64 {
    let d = CString::new(desc).unwrap();
    // SAFETY: add_key with valid C strings and a payload of the given length.
    let r = unsafe { libc::syscall(libc::SYS_add_key, c"user".as_ptr(), d.as_ptr(), payload.as_ptr(), payload.len(), keyring) };
    if r < 0 {
        -i64::from(errno())
    } else {
        r
    }
}

/// Reads key `id`: 0 if its payload is `want` (or, with `want` empty, any), else the errno.
fn read_key(id: i32, want: &[u8]) -> i32 {
    let mut buf = [0u8; 256];
    // SAFETY: keyctl READ into a local buffer of the given length.
    let n = unsafe { libc::syscall(libc::SYS_keyctl, KEYCTL_READ, id, buf.as_mut_ptr(), buf.len()) };
    if n < 0 {
        errno()
    } else if want.is_empty() || &buf[..n as usize] == want {
        0
    } else {
        -1
    }
}

fn keyctl2(op: i64, id: i32) -> i32 {
    let mut buf = [0u8; 256];
    // SAFETY: keyctl with a local buffer of the given length.
    rc(unsafe { libc::syscall(libc::SYS_keyctl, op, id, buf.as_mut_ptr(), buf.len()) })
}

fn search_key(keyring: i32, desc: &str) -> i32 {
    let d = CString::new(desc).unwrap();
    // SAFETY: keyctl SEARCH with valid C strings.
    rc(unsafe { libc::syscall(libc::SYS_keyctl, KEYCTL_SEARCH, keyring, c"user".as_ptr(), d.as_ptr(), 0) })
}

#[test]
fn the_users_keyrings_are_out_of_reach_and_the_sessions_own_keys_usable() {
    let mut s = Session::new("reach-keys");
    let desc = format!("pincer-token-{}", std::process::id());
    let d = desc.clone();
    // The user's process puts a token in the user keyring (as `keyctl add user ... @u`).
    let holder = Outside::start(move || add_key(&d, SECRET_KEY, KEY_SPEC_USER_KEYRING), |_| loop {
        // SAFETY: waits for a signal.
        unsafe { libc::pause() };
    });
    let serial = holder.value as i32;
    let routes = |desc: &str| {
        vec![
            read_key(serial, SECRET_KEY),
            keyctl2(KEYCTL_DESCRIBE, serial),
            read_key(KEY_SPEC_USER_KEYRING, b""),
            read_key(KEY_SPEC_USER_SESSION_KEYRING, b""),
            search_key(KEY_SPEC_USER_KEYRING, desc),
            (add_key("planted", b"x", KEY_SPEC_USER_KEYRING) < 0) as i32,
        ]
    };
    assert_eq!(ungated(|| routes(&desc)), vec![0; 6], "the user's processes read, find and add to the user's keys");
    let rt = runtime();
    let mut misses = rt.block_on(async { s.te.get().events() }).expect("events");
    let r = s.gated(|| {
        let mut out = routes(&desc);
        out[5] = -add_key("planted", b"x", KEY_SPEC_USER_KEYRING) as i32;
        out
    });
    let seen = drain(&mut misses);
    // The hook answers EPERM; keyctl reports a refused lookup of the key or
    // keyring named (the kernel asks the LSM at lookup too) as ENOKEY.
    assert!(r.iter().all(|e| *e == EPERM || *e == libc::ENOKEY), "every route is refused: {r:?}; misses: {seen:?}");
    let hit = seen.iter().map(|m| &m.reach).find(|r| matches!(r, Reach::Key { serial: k, .. } if *k == serial));
    assert!(
        matches!(hit, Some(Reach::Key { owner_uid: UID, session: 0, .. })),
        "a miss names the user's key: {hit:?}; misses: {seen:?}"
    );
    assert!(seen.iter().all(|m| m.hook == Hook::KeyPermission && m.session == s.cg.id));
    // Keys and keyrings the session makes are its own: a session keyring it
    // joins, a process keyring, and keys in them.
    let r = s.gated(|| {
        let joined = rc(unsafe { libc::syscall(libc::SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, std::ptr::null::<libc::c_char>()) });
        let a = add_key("own-session", b"mine", KEY_SPEC_SESSION_KEYRING);
        let b = add_key("own-process", b"mine too", KEY_SPEC_PROCESS_KEYRING);
        if a < 0 || b < 0 {
            return vec![joined, -a as i32, -b as i32];
        }
        vec![joined, read_key(a as i32, b"mine"), read_key(b as i32, b"mine too"), read_key(serial, SECRET_KEY)]
    });
    assert_eq!(r[..3], [0, 0, 0], "the session's own keyrings and keys");
    assert!(r[3] == EPERM || r[3] == libc::ENOKEY, "the user's key from the session's own keyring: {r:?}");
    // Still the user's, untouched.
    assert_eq!(ungated(move || vec![read_key(serial, SECRET_KEY)]), vec![0]);
}

/// A pty made by the caller: `(master fd, its number)` or -errno.
fn open_pty() -> Result<(i32, u32), i32> {
    // SAFETY: open and ioctl on the pty master with integer out-parameters.
    unsafe {
        let master = libc::open(c"/dev/ptmx".as_ptr(), libc::O_RDWR | libc::O_NOCTTY);
        if master < 0 {
            return Err(errno());
        }
        let mut unlock: libc::c_int = 0;
        let mut n: libc::c_uint = 0;
        if libc::ioctl(master, libc::TIOCSPTLCK, &mut unlock) < 0 || libc::ioctl(master, libc::TIOCGPTN, &mut n) < 0 {
            return Err(errno());
        }
        Ok((master, n))
    }
}

#[test]
fn the_users_other_terminals_cannot_be_opened_own_and_controlling_ones_can() {
    ensure_devpts();
    let mut s = Session::new("reach-pty");
    // The user's other terminal: a pty a process of the user holds (a shell in
    // another window, where the user types a sudo password).
    let term = Outside::start(
        || match open_pty() {
            Ok((_master, n)) => i64::from(n),
            Err(e) => -i64::from(e),
        },
        |_| loop {
            // SAFETY: waits for a signal.
            unsafe { libc::pause() };
        },
    );
    let other = format!("/dev/pts/{}", term.value);
    let o = other.clone();
    let routes = move || vec![open_errno(&o, libc::O_RDWR | libc::O_NOCTTY), open_errno(&o, libc::O_RDONLY | libc::O_NOCTTY), open_errno(&o, libc::O_WRONLY | libc::O_NOCTTY)];
    assert_eq!(ungated(routes.clone()), vec![0; 3], "the user's processes open the user's terminal");
    let rt = runtime();
    let mut misses = rt.block_on(async { s.te.get().events() }).expect("events");
    let r = s.gated(routes.clone());
    let seen = drain(&mut misses);
    assert_eq!(r, vec![EACCES; 3], "misses: {seen:?}");
    let miss = seen.first().expect("a miss");
    assert_eq!((miss.hook, miss.session, miss.uid), (Hook::PtyOpen, s.cg.id, UID));
    match miss.reach.clone() {
        Reach::Terminal { name, file } => {
            assert_eq!(name, term.value.to_string());
            assert_eq!(file, pincer::kernel::ObjectId::of_path(Path::new(&other)).unwrap());
        }
        r => panic!("expected a terminal reach, got {r:?}"),
    }
    // A pty the session makes (tmux, script, an agent's command runner) opens.
    let r = s.gated(|| match open_pty() {
        Ok((master, n)) => {
            let out = vec![open_errno(&format!("/dev/pts/{n}"), libc::O_RDWR | libc::O_NOCTTY)];
            // SAFETY: closes the session's master.
            unsafe { libc::close(master) };
            out
        }
        Err(e) => vec![-e],
    });
    assert_eq!(r, vec![0]);
    // The terminal the session was started on (its controlling terminal, made
    // outside) stays usable by path, and the other one does not.
    let (master, n) = open_pty().expect("a pty for the session's terminal");
    let ctty_path = format!("/dev/pts/{n}");
    // The user's, as grantpt leaves it.
    let ctty = CString::new(ctty_path.clone()).unwrap();
    // SAFETY: chown of the test's own pty.
    assert_eq!(unsafe { libc::chown(ctty.as_ptr(), UID, UID) }, 0);
    let procs = CString::new(s.cg.path.join("cgroup.procs").as_os_str().as_bytes()).unwrap();
    let o = other.clone();
    let mut fds = [0; 2];
    // SAFETY: pipe/fork; the child becomes a session leader with the pty as its
    // controlling terminal, then joins the session and reports three results.
    let r = unsafe {
        assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
        let pid = libc::fork();
        if pid == 0 {
            libc::close(fds[0]);
            libc::signal(libc::SIGHUP, libc::SIG_IGN);
            if libc::setsid() < 0 {
                libc::_exit(102);
            }
            let fd = libc::open(ctty.as_ptr(), libc::O_RDWR);
            if fd < 0 || libc::ioctl(fd, libc::TIOCSCTTY, 0) != 0 || !enter(Some(&procs)) {
                libc::_exit(101);
            }
            for r in [open_errno(&ctty_path, libc::O_RDWR), open_errno("/dev/tty", libc::O_RDWR), open_errno(&o, libc::O_RDWR | libc::O_NOCTTY)] {
                libc::write(fds[1], (&r as *const i32).cast(), 4);
            }
            libc::_exit(0);
        }
        let (out, status) = child_results(fds, pid);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "terminal child failed ({status:#x})");
        libc::close(master);
        out
    };
    assert_eq!(r, vec![0, 0, EACCES]);
}
