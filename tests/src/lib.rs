//! Helpers for the VM tests: fresh directories on tmpfs, throw-away enforcers
//! pinned in their own bpffs directory, and gated child processes that run
//! file operations inside a session cgroup and report each result's errno; [`worker`] is
//! the scripted worker that replays corpus sessions under a running daemon.

pub mod worker;

use pincer::kernel::{Enforcer, EnforcerConfig};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

static COUNTER: AtomicU32 = AtomicU32::new(0);

fn unique(name: &str) -> String {
    format!("{name}-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// A fresh empty directory under `/tmp` (tmpfs in the VM).
pub fn fresh_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from("/tmp").join(unique(name));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    dir
}

/// Writes `contents` to `path`, creating parent directories (as the test harness, ungated).
pub fn write_file(path: &Path, contents: &str) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("create {}: {e}", parent.display()));
    }
    std::fs::write(path, contents).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// An enforcer pinned under its own bpffs directory, unpinned (enforcement
/// removed) when dropped.
pub struct TestEnforcer {
    /// The enforcer.
    pub enforcer: Option<Enforcer>,
    /// Its pin directory.
    pub pin_dir: PathBuf,
}

impl TestEnforcer {
    /// Loads a fresh copy of the program pinned under `/sys/fs/bpf/<name>-<unique>`.
    pub fn load(name: &str) -> Self {
        Self::load_with_ring(name, pincer::kernel::DEFAULT_RINGBUF_BYTES)
    }

    /// Like [`TestEnforcer::load`] with a ring buffer of `ringbuf_bytes`.
    pub fn load_with_ring(name: &str, ringbuf_bytes: u32) -> Self {
        let pin_dir = PathBuf::from("/sys/fs/bpf").join(unique(name));
        let config = EnforcerConfig { pin_dir: pin_dir.clone(), ringbuf_bytes, ..EnforcerConfig::default() };
        let enforcer = Enforcer::load(&config).unwrap_or_else(|e| panic!("load enforcer: {}", error_chain(&e)));
        Self { enforcer: Some(enforcer), pin_dir }
    }

    /// The enforcer.
    pub fn get(&mut self) -> &mut Enforcer {
        self.enforcer.as_mut().expect("enforcer present")
    }
}

impl Drop for TestEnforcer {
    fn drop(&mut self) {
        drop(self.enforcer.take());
        let _ = pincer::kernel::remove_pin_dir(&self.pin_dir);
    }
}

/// An error and its sources, one line.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(src) = cur {
        s.push_str(": ");
        s.push_str(&src.to_string());
        cur = src.source();
    }
    s
}

/// A cgroup v2 made for one test, removed when dropped.
pub struct TestCgroup {
    /// The cgroup directory.
    pub path: PathBuf,
    /// Its id (the session key).
    pub id: u64,
}

impl TestCgroup {
    /// Creates `/sys/fs/cgroup/<name>-<unique>`.
    pub fn new(name: &str) -> Self {
        let path = PathBuf::from("/sys/fs/cgroup").join(unique(name));
        std::fs::create_dir(&path).unwrap_or_else(|e| panic!("create cgroup {}: {e}", path.display()));
        let id = pincer::kernel::cgroup_id(&path).expect("cgroup id");
        Self { path, id }
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.path);
    }
}

/// One file operation a gated child performs.
#[derive(Debug, Clone)]
pub enum Op {
    /// `open(O_RDONLY)` then close.
    Read(PathBuf),
    /// `open(O_WRONLY)` then close.
    Write(PathBuf),
    /// `open(O_RDONLY|O_DIRECTORY)` then `getdents64` then close.
    List(PathBuf),
    /// `open(O_CREAT|O_EXCL|O_WRONLY)` then close.
    Create(PathBuf),
    /// `mkdir`.
    Mkdir(PathBuf),
    /// `unlink`.
    Unlink(PathBuf),
    /// `rmdir`.
    Rmdir(PathBuf),
    /// `rename(from, to)`.
    Rename(PathBuf, PathBuf),
    /// `link(existing, new)`.
    Link(PathBuf, PathBuf),
    /// `symlink(target, linkpath)`.
    Symlink(PathBuf, PathBuf),
    /// `truncate(path, 0)`.
    Truncate(PathBuf),
    /// Run the program at the path with `--list` in a grandchild (0, the
    /// errno of a refused `execve`, or 255 if the program failed).
    Exec(PathBuf),
}

fn c(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes()).expect("path without NUL")
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(-1)
}

fn ok_or_errno(rc: libc::c_int) -> i32 {
    if rc < 0 {
        errno()
    } else {
        0
    }
}

fn open_close(path: &CString, flags: libc::c_int) -> i32 {
    // SAFETY: plain syscalls on a valid C string.
    unsafe {
        let fd = libc::open(path.as_ptr(), flags | libc::O_CLOEXEC, 0o644);
        if fd < 0 {
            return errno();
        }
        let mut rc = 0;
        if flags & libc::O_DIRECTORY != 0 {
            let mut buf = [0u8; 4096];
            if libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len()) < 0 {
                rc = errno();
            }
        }
        libc::close(fd);
        rc
    }
}

fn exec_status(path: &CString) -> i32 {
    let arg = c"--list";
    let argv = [path.as_ptr(), arg.as_ptr(), std::ptr::null()];
    let envp = [std::ptr::null()];
    // SAFETY: fork/execve/_exit with valid NUL-terminated argument arrays.
    unsafe {
        let pid = libc::fork();
        if pid < 0 {
            return errno();
        }
        if pid == 0 {
            let devnull = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY);
            if devnull >= 0 {
                libc::dup2(devnull, 1);
            }
            libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr());
            libc::_exit(errno());
        }
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
        if !libc::WIFEXITED(status) {
            255
        } else {
            libc::WEXITSTATUS(status)
        }
    }
}

/// Runs one operation; returns 0 or the errno.
pub fn perform(op: &Op) -> i32 {
    // SAFETY: plain syscalls on valid C strings.
    unsafe {
        match op {
            Op::Read(p) => open_close(&c(p), libc::O_RDONLY),
            Op::Write(p) => open_close(&c(p), libc::O_WRONLY),
            Op::List(p) => open_close(&c(p), libc::O_RDONLY | libc::O_DIRECTORY),
            Op::Create(p) => open_close(&c(p), libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY),
            Op::Mkdir(p) => ok_or_errno(libc::mkdir(c(p).as_ptr(), 0o755)),
            Op::Unlink(p) => ok_or_errno(libc::unlink(c(p).as_ptr())),
            Op::Rmdir(p) => ok_or_errno(libc::rmdir(c(p).as_ptr())),
            Op::Rename(a, b) => ok_or_errno(libc::rename(c(a).as_ptr(), c(b).as_ptr())),
            Op::Link(a, b) => ok_or_errno(libc::link(c(a).as_ptr(), c(b).as_ptr())),
            Op::Symlink(a, b) => ok_or_errno(libc::symlink(c(a).as_ptr(), c(b).as_ptr())),
            Op::Truncate(p) => ok_or_errno(libc::truncate(c(p).as_ptr(), 0)),
            Op::Exec(p) => exec_status(&c(p)),
        }
    }
}

/// Forks a child that joins `cgroup` (if any), drops to `uid` (if any), runs
/// `ops` in order and reports each result (0 or errno) over a pipe.
pub fn run_as(cgroup: Option<&Path>, uid: Option<u32>, ops: &[Op]) -> Vec<i32> {
    // Prepare everything that allocates before forking.
    let procs = cgroup.map(|p| c(&p.join("cgroup.procs")));
    let mut fds = [0; 2];
    // SAFETY: pipe/fork/exit syscalls; the child only performs syscalls and
    // writes to the pipe before `_exit`.
    unsafe {
        assert_eq!(libc::pipe(fds.as_mut_ptr()), 0, "pipe");
        let pid = libc::fork();
        assert!(pid >= 0, "fork");
        if pid == 0 {
            libc::close(fds[0]);
            let mut code = 0;
            if let Some(procs) = &procs {
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY);
                if fd < 0 || libc::write(fd, b"0\n".as_ptr().cast(), 2) != 2 {
                    code = 101;
                }
                libc::close(fd);
            }
            if let Some(uid) = uid {
                if libc::setresgid(uid, uid, uid) != 0 || libc::setresuid(uid, uid, uid) != 0 {
                    code = 102;
                }
            }
            if code == 0 {
                for op in ops {
                    let r: i32 = perform(op);
                    libc::write(fds[1], (&r as *const i32).cast(), 4);
                }
            }
            libc::_exit(code);
        }
        libc::close(fds[1]);
        let mut out = Vec::new();
        let mut buf = [0u8; 4];
        while libc::read(fds[0], buf.as_mut_ptr().cast(), 4) == 4 {
            out.push(i32::from_ne_bytes(buf));
        }
        libc::close(fds[0]);
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "gated child failed to set up (status {status:#x}: 101 = join cgroup, 102 = setresuid)"
        );
        assert_eq!(out.len(), ops.len(), "child reported {} of {} results", out.len(), ops.len());
        out
    }
}

/// Runs `ops` in a child inside `cgroup` (as root).
pub fn run_in(cgroup: &TestCgroup, ops: &[Op]) -> Vec<i32> {
    run_as(Some(&cgroup.path), None, ops)
}

/// `EACCES`, the verdict of a miss.
pub const EACCES: i32 = libc::EACCES;

/// A tokio runtime for tests that read misses.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime")
}
