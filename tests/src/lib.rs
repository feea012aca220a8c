//! Helpers for the VM tests: fresh directories on tmpfs, throw-away enforcers
//! pinned in their own bpffs directory, and gated child processes that run
//! file operations inside a session cgroup and report each result's errno; [`worker`] is
//! the scripted worker that replays corpus sessions under a running daemon.

pub mod agent;
pub mod profile;
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

/// A process of `uid` (moved into the cgroup `cg` first, if given; else outside every
/// session) that keeps what `open` made (a descriptor, or -errno) and runs `serve` on it,
/// until it is dropped: killed and reaped. The user's service or socket as a test needs it.
pub struct HeldProcess {
    pid: i32,
}

impl HeldProcess {
    /// Its process id.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Forks the process; returns it with what `open` gave (after `open` failed, the
    /// process has exited).
    pub fn start(cg: Option<&Path>, uid: u32, open: impl FnOnce() -> i32, serve: impl FnOnce(i32)) -> (Self, i32) {
        let procs = cg.map(|c| CString::new(c.join("cgroup.procs").as_os_str().as_bytes()).unwrap());
        let mut fds = [0; 2];
        // SAFETY: pipe/fork; the child runs `open` and `serve` until killed.
        unsafe {
            assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
            let pid = libc::fork();
            assert!(pid >= 0);
            if pid == 0 {
                libc::close(fds[0]);
                if let Some(p) = &procs {
                    let fd = libc::open(p.as_ptr(), libc::O_WRONLY);
                    libc::write(fd, b"0\n".as_ptr().cast(), 2);
                    libc::close(fd);
                }
                if libc::setresgid(uid, uid, uid) != 0 || libc::setresuid(uid, uid, uid) != 0 {
                    libc::_exit(102);
                }
                let fd = open();
                libc::write(fds[1], (&fd as *const i32).cast(), 4);
                libc::close(fds[1]);
                if fd < 0 {
                    libc::_exit(1);
                }
                serve(fd);
                loop {
                    libc::pause();
                }
            }
            libc::close(fds[1]);
            let mut v = 0i32;
            assert_eq!(libc::read(fds[0], (&mut v as *mut i32).cast(), 4), 4, "the process of uid {uid} did not start");
            libc::close(fds[0]);
            (HeldProcess { pid }, v)
        }
    }
}

impl Drop for HeldProcess {
    fn drop(&mut self) {
        // SAFETY: kills and reaps our child.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
        }
    }
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

/// The uid of the worker in the VM tests (an ordinary user, as the worker is).
pub const WORKER_UID: u32 = 1000;

/// Brings the loopback interface up (the VM's init leaves it down).
pub fn loopback_up() {
    // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS on a local ifreq.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0);
        let mut ifr: libc::ifreq = std::mem::zeroed();
        for (i, b) in b"lo".iter().enumerate() {
            ifr.ifr_name[i] = *b as libc::c_char;
        }
        assert_eq!(libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut ifr), 0, "get lo flags");
        ifr.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        assert_eq!(libc::ioctl(fd, libc::SIOCSIFFLAGS, &ifr), 0, "bring lo up");
        libc::close(fd);
    }
}

/// Gives `path` to the worker's uid (as the user's own files are).
pub fn own(path: &Path) {
    std::os::unix::fs::chown(path, Some(WORKER_UID), Some(WORKER_UID))
        .unwrap_or_else(|e| panic!("chown {}: {e}", path.display()));
}

/// Writes a file owned by the worker's uid, and gives it every directory above it below `/tmp`.
pub fn user_file(path: &Path, contents: &str) {
    write_file(path, contents);
    let mut p = path.to_path_buf();
    own(&p);
    while p.pop() {
        if p.as_os_str().len() <= "/tmp".len() {
            break;
        }
        own(&p);
    }
}

/// Creates a directory (and its parents) and gives it to the worker's uid.
pub fn user_dir(path: &Path) {
    std::fs::create_dir_all(path).unwrap_or_else(|e| panic!("mkdir {}: {e}", path.display()));
    own(path);
}

/// Mounts a new tmpfs on `at` (as root).
pub fn mount_tmpfs(at: &Path) {
    // SAFETY: mount(2) with valid C strings.
    let rc = unsafe { libc::mount(c"tmpfs".as_ptr(), c(at).as_ptr(), c"tmpfs".as_ptr(), 0, std::ptr::null()) };
    assert_eq!(rc, 0, "mount tmpfs on {}: {}", at.display(), std::io::Error::last_os_error());
}

/// Unmounts the filesystem mounted on `at` (as root).
pub fn umount(at: &Path) {
    // SAFETY: umount(2) with a valid C string.
    let rc = unsafe { libc::umount(c(at).as_ptr()) };
    assert_eq!(rc, 0, "umount {}: {}", at.display(), std::io::Error::last_os_error());
}

/// Where the VM's one shared copy of the program is pinned: loaded, verified and attached
/// by the first test that asks for it, then reused by every later test and daemon of the
/// same boot, which isolate themselves by session, cgroup, root and map entries instead of
/// loading their own copy (each load verifies every hook: about 10 s under TCG).
pub const SHARED_PIN_DIR: &str = "/sys/fs/bpf/pincer-shared";

/// An enforcer for one test: either the VM's shared program ([`TestEnforcer::shared`]),
/// whose entries the test removes when it drops the enforcer, or a copy of its own pinned
/// under its own bpffs directory ([`TestEnforcer::load`]), unpinned (enforcement removed)
/// when dropped.
pub struct TestEnforcer {
    /// The enforcer.
    pub enforcer: Option<Enforcer>,
    /// Its pin directory.
    pub pin_dir: PathBuf,
    shared: bool,
}

impl TestEnforcer {
    /// The VM's shared program (loaded on first use), with every policy entry checked
    /// empty first: an entry a previous test left behind fails this test, naming it.
    /// The misses a previous test left in the ring buffer are drained.
    pub fn shared() -> Self {
        let pin_dir = PathBuf::from(SHARED_PIN_DIR);
        assert_clean(&pin_dir);
        // Before the enforcer opens the ring buffer: a reader starts where the consumer was.
        drain_misses(&pin_dir);
        let config = EnforcerConfig { pin_dir: pin_dir.clone(), ..EnforcerConfig::default() };
        let enforcer = Enforcer::attach_or_reuse(&config).unwrap_or_else(|e| panic!("attach the shared enforcer: {}", error_chain(&e)));
        Self { enforcer: Some(enforcer), pin_dir, shared: true }
    }

    /// Loads, on purpose, a fresh copy of the program pinned under
    /// `/sys/fs/bpf/<name>-<unique>` (for tests of loading, pinning and detaching).
    pub fn load(name: &str) -> Self {
        Self::load_with_ring(name, pincer::kernel::DEFAULT_RINGBUF_BYTES)
    }

    /// Like [`TestEnforcer::load`] with a ring buffer of `ringbuf_bytes`.
    pub fn load_with_ring(name: &str, ringbuf_bytes: u32) -> Self {
        let pin_dir = PathBuf::from("/sys/fs/bpf").join(unique(name));
        let config = EnforcerConfig { pin_dir: pin_dir.clone(), ringbuf_bytes, ..EnforcerConfig::default() };
        let enforcer = Enforcer::load(&config).unwrap_or_else(|e| panic!("load enforcer: {}", error_chain(&e)));
        Self { enforcer: Some(enforcer), pin_dir, shared: false }
    }

    /// The enforcer.
    pub fn get(&mut self) -> &mut Enforcer {
        self.enforcer.as_mut().expect("enforcer present")
    }
}

impl Drop for TestEnforcer {
    fn drop(&mut self) {
        drop(self.enforcer.take());
        if self.shared {
            clear_policy(&self.pin_dir);
        } else {
            let _ = pincer::kernel::remove_pin_dir(&self.pin_dir);
        }
    }
}

/// The entries a test or daemon writes into the program's maps, per map: sessions, roots,
/// grants, open paths, never entries, and the reach lists (Unix sockets, ports listed for
/// every session, host addresses). Entries the kernel keeps for live objects (sockets,
/// SysV objects, keys) go with their objects and are not counted.
pub fn policy_entries(pin_dir: &Path) -> Vec<(&'static str, usize)> {
    policy_maps(pin_dir, false)
}

/// Starts a session of uid 1000 on `ws` with `pincer` `run` (first prompt `prompt`) against
/// the daemon at `socket`, its worker a shell that prints its `TMPDIR` and sleeps
/// (its cgroups under `/sys/fs/cgroup/NAME`, one other than `not`): `pincer run`, the
/// session's scratch (`TMPDIR`), cgroup and id; `None` if `pincer run` ended first.
pub fn run_session(pincer: &str, prompt: &str, name: &str, ws: &Path, socket: &Path, env: &[(&str, String)], not: Option<&Path>) -> Option<(std::process::Child, PathBuf, PathBuf, u64)> {
    let mut run = std::process::Command::new(pincer)
        .args(["run", "--root", ws.to_str().unwrap(), "--user", "1000", "--prompt", prompt, "--"])
        .args(["/bin/sh", "-c", "echo \"TMPDIR=$TMPDIR\"; exec /bin/sleep 86400"])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("PINCER_SOCKET", socket)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("pincer run");
    use std::io::BufRead;
    let mut out = std::io::BufReader::new(run.stdout.take().unwrap());
    let mut line = String::new();
    let scratch = loop {
        line.clear();
        if out.read_line(&mut line).unwrap() == 0 {
            let _ = run.wait();
            return None;
        }
        if let Some(t) = line.trim().strip_prefix("TMPDIR=") {
            break PathBuf::from(t);
        }
    };
    let parent = PathBuf::from("/sys/fs/cgroup").join(name);
    let cg = std::fs::read_dir(&parent)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_dir() && Some(p.as_path()) != not)
        .unwrap_or_else(|| panic!("no session cgroup under {}", parent.display()));
    let id = pincer::kernel::cgroup_id(&cg).unwrap();
    Some((run, scratch, cg, id))
}

/// Stops a test's `pincer daemon` (SIGTERM, then waits for it) and clears what it left in
/// the shared program's maps ([`clear_policy`]), so the next test starts clean.
pub fn stop_daemon(daemon: &mut std::process::Child) {
    // SAFETY: kill(2) on the caller's own child.
    unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) };
    let _ = daemon.wait();
    clear_policy(std::path::Path::new(SHARED_PIN_DIR));
}

/// Removes every entry [`policy_entries`] counts from the program pinned at `pin_dir`
/// (nothing if it is not pinned there) and renews the policy generation, so no cached
/// verdict outlives them.
pub fn clear_policy(pin_dir: &Path) {
    if !Enforcer::pinned_complete(pin_dir) {
        return;
    }
    policy_maps(pin_dir, true);
    let mut enforcer = Enforcer::reuse(pin_dir).unwrap_or_else(|e| panic!("reopen {}: {}", pin_dir.display(), error_chain(&e)));
    enforcer.renew_policy().unwrap_or_else(|e| panic!("renew the policy generation: {}", error_chain(&e)));
}

/// Panics, naming each map and its count, if the program pinned at `pin_dir` holds
/// policy entries (a previous test did not clean up after itself).
pub fn assert_clean(pin_dir: &Path) {
    if !Enforcer::pinned_complete(pin_dir) {
        return;
    }
    let left: Vec<String> = policy_entries(pin_dir).iter().filter(|(_, n)| *n > 0).map(|(m, n)| format!("{m}: {n}")).collect();
    assert!(left.is_empty(), "the shared enforcer at {} holds entries a previous test left behind: {}", pin_dir.display(), left.join(", "));
}

/// Reads and discards every miss queued in the ring buffer pinned at `pin_dir` (nothing if
/// no program is pinned there). A reader opened afterwards starts after them.
pub fn drain_misses(pin_dir: &Path) {
    if !Enforcer::pinned_complete(pin_dir) {
        return;
    }
    let path = pin_dir.join("maps").join(pincer_common::map_names::EVENTS);
    let data = aya::maps::MapData::from_pin(&path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let mut ring = aya::maps::RingBuf::try_from(aya::maps::Map::from_map_data(data).expect("ring buffer map")).expect("ring buffer");
    while ring.next().is_some() {}
}

/// Counts (and with `clear` removes) the policy entries of each map.
fn policy_maps(pin_dir: &Path, clear: bool) -> Vec<(&'static str, usize)> {
    use pincer_common::reach::{map_names as r, PortKey, UnixNameKey};
    use pincer_common::{map_names as m, GrantKey, NameKey, ObjectKey, SessionKey, SessionValue, VacatedKey};
    let maps = pin_dir.join("maps");
    vec![
        (m::SESSIONS, entries::<SessionKey, SessionValue>(&maps, m::SESSIONS, clear, every)),
        (m::ROOTS, entries::<ObjectKey, u32>(&maps, m::ROOTS, clear, every)),
        (m::EXACT, entries::<GrantKey, u32>(&maps, m::EXACT, clear, every)),
        (m::SUBTREE, entries::<GrantKey, u32>(&maps, m::SUBTREE, clear, every)),
        (m::OPEN, entries::<ObjectKey, u32>(&maps, m::OPEN, clear, every)),
        (m::NEVER, entries::<ObjectKey, u32>(&maps, m::NEVER, clear, every)),
        (m::NEVER_NAMES, entries::<NameKey, u32>(&maps, m::NEVER_NAMES, clear, every)),
        (m::NEVER_DIRS, entries::<ObjectKey, u32>(&maps, m::NEVER_DIRS, clear, every)),
        (m::NEVER_CARRY, entries::<NameKey, u64>(&maps, m::NEVER_CARRY, clear, every)),
        (m::VACATED, entries::<VacatedKey, u64>(&maps, m::VACATED, clear, every)),
        (r::UNIX_FILES, entries::<ObjectKey, u32>(&maps, r::UNIX_FILES, clear, every)),
        (r::UNIX_NAMES, entries::<UnixNameKey, u32>(&maps, r::UNIX_NAMES, clear, every)),
        (r::UNIX_SERVED, entries::<UnixNameKey, u32>(&maps, r::UNIX_SERVED, clear, every)),
        (r::HOST_ADDRS, trie_entries(&maps, r::HOST_ADDRS, clear)),
        // Ports listed for every session; a session's own bound ports go with their sockets.
        (r::PORTS, entries::<PortKey, u32>(&maps, r::PORTS, clear, |k: &PortKey| k.session == 0)),
    ]
}

/// Picks every key.
fn every<K>(_: &K) -> bool {
    true
}

/// The map `name` pinned under `maps`.
fn pinned(maps: &Path, name: &str) -> aya::maps::Map {
    let path = maps.join(name);
    let data = aya::maps::MapData::from_pin(&path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    aya::maps::Map::from_map_data(data).unwrap_or_else(|e| panic!("map {name}: {e}"))
}

/// The keys of the hash map `name` under `maps` for which `pick` holds, removed if `clear`.
fn entries<K: aya::Pod, V: aya::Pod>(maps: &Path, name: &str, clear: bool, pick: impl Fn(&K) -> bool) -> usize {
    let mut map = aya::maps::HashMap::<_, K, V>::try_from(pinned(maps, name)).unwrap_or_else(|e| panic!("hash map {name}: {e}"));
    let keys: Vec<K> = map.keys().collect::<Result<_, _>>().unwrap_or_else(|e| panic!("list {name}: {e}"));
    let keys: Vec<K> = keys.into_iter().filter(|k| pick(k)).collect();
    if clear {
        for k in &keys {
            // A key already gone is removed (as the enforcer's tables take it): iterating a
            // hash map the kernel changes meanwhile (ports bound and freed outside every
            // session) may list a key twice.
            match map.remove(k) {
                Ok(()) | Err(aya::maps::MapError::KeyNotFound) => {}
                Err(aya::maps::MapError::SyscallError(e)) if e.io_error.raw_os_error() == Some(libc::ENOENT) => {}
                Err(e) => panic!("remove an entry of {name}: {e}"),
            }
        }
    }
    keys.len()
}

/// The prefixes of the host address trie `name` under `maps`, removed if `clear`.
fn trie_entries(maps: &Path, name: &str, clear: bool) -> usize {
    let mut map = aya::maps::lpm_trie::LpmTrie::<_, [u8; 16], u32>::try_from(pinned(maps, name)).unwrap_or_else(|e| panic!("trie {name}: {e}"));
    let keys: Vec<_> = map.keys().collect::<Result<_, _>>().unwrap_or_else(|e| panic!("list {name}: {e}"));
    if clear {
        for k in &keys {
            map.remove(k).unwrap_or_else(|e| panic!("remove an entry of {name}: {e}"));
        }
    }
    keys.len()
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
    /// `chmod(path, 0o640)` (a mode that keeps nothing more private than its folder).
    Chmod(PathBuf),
    /// `chown(path, own uid, own gid)` (allowed to the owner by the usual checks).
    Chown(PathBuf),
    /// `utimensat(path)` with explicit times.
    Utimes(PathBuf),
    /// `setxattr(path, name, "v")`.
    SetXattr(PathBuf, String),
    /// `removexattr(path, name)`.
    RemoveXattr(PathBuf, String),
    /// `mkfifo(path, 0o600)`.
    Mkfifo(PathBuf),
    /// `bind` a Unix stream socket to the path.
    BindUnix(PathBuf),
    /// `setsid`, open a new pty as controlling terminal and push one byte into
    /// its input with `TIOCSTI`.
    Tiocsti,
    /// `TIOCLINUX` on a new pty (`EINVAL` there when allowed: no VT).
    Tioclinux,
    /// `unshare(CLONE_NEWUSER)`.
    UnshareUser,
    /// Open the path read-only and send the fd over the Unix socket (inherited fd) with `SCM_RIGHTS`.
    SendFd(i32, PathBuf),
    /// Receive one message on the Unix socket (inherited fd) and read from the fd
    /// it carries: 0 if an fd arrived and was readable, `EACCES` if the fd was
    /// refused (`MSG_CTRUNC`, no fd), another errno otherwise.
    RecvFdRead(i32),
    /// `pidfd_open(pid)` then `pidfd_getfd` of its fd number and a read from it.
    PidfdGetfd(i32, i32),
    /// `statx(path)` (not following a final symlink).
    Stat(PathBuf),
    /// `inotify_add_watch(path, IN_ALL_EVENTS)` on a new inotify instance.
    Watch(PathBuf),
    /// Open the path read-only, then `FS_IOC_SETFLAGS` with the flags it has plus
    /// `FS_NODUMP_FL` (a flag the owner may set).
    SetFlags(PathBuf),
    /// Open the path read-only (a directory too), then `ioctl` with the command and a
    /// zeroed argument buffer of 256 bytes: 0 or the errno.
    Ioctl(PathBuf, u32),
    /// Open the path `O_WRONLY` and write the bytes (`open_close` only opens).
    WriteBytes(PathBuf, Vec<u8>),
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

fn xattr(path: &CString, name: &str, remove: bool) -> i32 {
    let name = CString::new(name).expect("xattr name without NUL");
    // SAFETY: plain syscalls on valid C strings and a valid value buffer.
    unsafe {
        if remove {
            ok_or_errno(libc::removexattr(path.as_ptr(), name.as_ptr()))
        } else {
            ok_or_errno(libc::setxattr(path.as_ptr(), name.as_ptr(), b"v".as_ptr().cast(), 1, 0))
        }
    }
}

fn bind_unix(path: &Path) -> i32 {
    // SAFETY: socket/bind/close with a zeroed, filled sockaddr_un.
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return errno();
        }
        let mut addr: libc::sockaddr_un = std::mem::zeroed();
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        let bytes = path.as_os_str().as_bytes();
        assert!(bytes.len() < addr.sun_path.len(), "socket path too long");
        for (i, b) in bytes.iter().enumerate() {
            addr.sun_path[i] = *b as libc::c_char;
        }
        let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
        let rc = ok_or_errno(libc::bind(fd, (&addr as *const libc::sockaddr_un).cast(), len));
        libc::close(fd);
        rc
    }
}

/// A new pty: `(master, slave)`; with `ctty` the caller becomes a session
/// leader and the slave its controlling terminal. Mounts devpts at `/dev/pts`
/// first if needed (the VM's init does not).
fn new_pty(ctty: bool) -> Result<(i32, i32), i32> {
    // SAFETY: plain syscalls on valid C strings and integer out-parameters.
    unsafe {
        if ctty && libc::setsid() < 0 {
            return Err(errno());
        }
        let master = libc::open(c"/dev/ptmx".as_ptr(), libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        if master < 0 {
            return Err(errno());
        }
        let mut unlock: libc::c_int = 0;
        let mut n: libc::c_uint = 0;
        if libc::ioctl(master, libc::TIOCSPTLCK, &mut unlock) < 0 || libc::ioctl(master, libc::TIOCGPTN, &mut n) < 0 {
            return Err(errno());
        }
        let name = CString::new(format!("/dev/pts/{n}")).expect("pts name");
        let flags = if ctty { libc::O_RDWR } else { libc::O_RDWR | libc::O_NOCTTY };
        let slave = libc::open(name.as_ptr(), flags | libc::O_CLOEXEC);
        if slave < 0 {
            return Err(errno());
        }
        Ok((master, slave))
    }
}

/// Mounts devpts at `/dev/pts` unless a pty can already be made (as root, before gating).
pub fn ensure_devpts() {
    if std::path::Path::new("/dev/pts/ptmx").exists() {
        return;
    }
    std::fs::create_dir_all("/dev/pts").expect("mkdir /dev/pts");
    // SAFETY: mount(2) with valid C strings.
    let rc = unsafe {
        libc::mount(c"devpts".as_ptr(), c"/dev/pts".as_ptr(), c"devpts".as_ptr(), 0, c"ptmxmode=0666,mode=0620".as_ptr().cast())
    };
    assert_eq!(rc, 0, "mount devpts: {}", std::io::Error::last_os_error());
}

fn tty_ioctl(request: libc::c_ulong, ctty: bool) -> i32 {
    // Closing the controlling terminal hangs up its session leader (this child).
    // SAFETY: setting a signal disposition to SIG_IGN.
    unsafe { libc::signal(libc::SIGHUP, libc::SIG_IGN) };
    let (master, slave) = match new_pty(ctty) {
        Ok(fds) => fds,
        Err(e) => return e,
    };
    let mut byte: u8 = if request == libc::TIOCLINUX { 0 } else { b'x' };
    // SAFETY: ioctl with a valid one-byte argument buffer; close of own fds.
    unsafe {
        let rc = ok_or_errno(libc::ioctl(slave, request, &mut byte));
        libc::close(slave);
        libc::close(master);
        rc
    }
}

/// Sends descriptor `fd` over the Unix socket `sock` (`SCM_RIGHTS`, one byte of data):
/// 0, or the errno.
pub fn send_fd(sock: i32, fd: i32) -> i32 {
    // SAFETY: sendmsg with a correctly sized control buffer built by the CMSG macros.
    unsafe {
        let mut data = [b'f'];
        let mut iov = libc::iovec { iov_base: data.as_mut_ptr().cast(), iov_len: 1 };
        let space = libc::CMSG_SPACE(std::mem::size_of::<i32>() as u32) as usize;
        let mut control = vec![0u8; space];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<i32>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<i32>(), fd);
        if libc::sendmsg(sock, &msg, 0) < 0 {
            errno()
        } else {
            0
        }
    }
}

/// Opens `path` for reading and sends the descriptor over `sock` ([`send_fd`]).
fn send_path_fd(sock: i32, path: &CString) -> i32 {
    // SAFETY: open/close of a descriptor this process owns.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return errno();
        }
        let rc = send_fd(sock, fd);
        libc::close(fd);
        rc
    }
}

fn read_one(fd: i32) -> i32 {
    let mut buf = [0u8; 64];
    // SAFETY: read into a valid buffer; close of an fd this process owns.
    unsafe {
        let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        let rc = if n < 0 { errno() } else { 0 };
        libc::close(fd);
        rc
    }
}

/// Receives a descriptor sent with [`send_fd`] on `sock` (close-on-exec): the descriptor,
/// or the errno: `EACCES` when the message came without it because the kernel refused to
/// install it (`MSG_CTRUNC`), `ENOMSG` when none was sent.
pub fn recv_fd(sock: i32) -> Result<i32, i32> {
    // SAFETY: recvmsg with a correctly sized control buffer; CMSG macros walk it.
    unsafe {
        let mut data = [0u8; 1];
        let mut iov = libc::iovec { iov_base: data.as_mut_ptr().cast(), iov_len: 1 };
        let space = libc::CMSG_SPACE(std::mem::size_of::<i32>() as u32) as usize;
        let mut control = vec![0u8; space];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        if libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC) < 0 {
            return Err(errno());
        }
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null() || (*cmsg).cmsg_type != libc::SCM_RIGHTS {
            return Err(if msg.msg_flags & libc::MSG_CTRUNC != 0 { libc::EACCES } else { libc::ENOMSG });
        }
        Ok(std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<i32>()))
    }
}

/// Receives a descriptor on `sock` ([`recv_fd`]) and reads from it: 0, or the errno.
fn recv_fd_read(sock: i32) -> i32 {
    recv_fd(sock).map_or_else(|e| e, read_one)
}

fn pidfd_getfd_read(pid: i32, target: i32) -> i32 {
    // SAFETY: raw pidfd syscalls with integer arguments; close of own fds.
    unsafe {
        let pidfd = libc::syscall(libc::SYS_pidfd_open, pid, 0) as i32;
        if pidfd < 0 {
            return errno();
        }
        let fd = libc::syscall(libc::SYS_pidfd_getfd, pidfd, target, 0) as i32;
        let rc = if fd < 0 { errno() } else { read_one(fd) };
        libc::close(pidfd);
        rc
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
            Op::Chmod(p) => ok_or_errno(libc::chmod(c(p).as_ptr(), 0o640)),
            Op::Chown(p) => ok_or_errno(libc::chown(c(p).as_ptr(), libc::getuid(), libc::getgid())),
            Op::Utimes(p) => {
                let times = [libc::timespec { tv_sec: 1_000_000, tv_nsec: 0 }; 2];
                ok_or_errno(libc::utimensat(libc::AT_FDCWD, c(p).as_ptr(), times.as_ptr(), 0))
            }
            Op::SetXattr(p, name) => xattr(&c(p), name, false),
            Op::RemoveXattr(p, name) => xattr(&c(p), name, true),
            Op::Mkfifo(p) => ok_or_errno(libc::mkfifo(c(p).as_ptr(), 0o600)),
            Op::BindUnix(p) => bind_unix(p),
            Op::Tiocsti => tty_ioctl(libc::TIOCSTI, true),
            Op::Tioclinux => tty_ioctl(libc::TIOCLINUX, false),
            Op::UnshareUser => ok_or_errno(libc::unshare(libc::CLONE_NEWUSER)),
            Op::SendFd(sock, p) => send_path_fd(*sock, &c(p)),
            Op::RecvFdRead(sock) => recv_fd_read(*sock),
            Op::PidfdGetfd(pid, fd) => pidfd_getfd_read(*pid, *fd),
            Op::Stat(p) => {
                let mut stx: libc::statx = std::mem::zeroed();
                ok_or_errno(libc::statx(
                    libc::AT_FDCWD,
                    c(p).as_ptr(),
                    libc::AT_SYMLINK_NOFOLLOW,
                    libc::STATX_BASIC_STATS,
                    &mut stx,
                ))
            }
            Op::Watch(p) => {
                let fd = libc::inotify_init1(libc::IN_CLOEXEC);
                if fd < 0 {
                    return errno();
                }
                let rc = ok_or_errno(libc::inotify_add_watch(
                    fd,
                    c(p).as_ptr(),
                    libc::IN_ALL_EVENTS,
                ));
                libc::close(fd);
                rc
            }
            Op::Ioctl(p, cmd) => {
                let fd = libc::open(c(p).as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return errno();
                }
                let mut arg = [0u8; 256];
                arg[0] = 1; // a version field where the argument has one
                let rc = ok_or_errno(libc::ioctl(fd, *cmd as libc::c_ulong, arg.as_mut_ptr()));
                libc::close(fd);
                rc
            }
            Op::SetFlags(p) => {
                const FS_IOC_GETFLAGS: libc::c_ulong = 0x8008_6601;
                const FS_IOC_SETFLAGS: libc::c_ulong = 0x4008_6602;
                const FS_NODUMP_FL: libc::c_long = 0x40;
                let fd = libc::open(c(p).as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return errno();
                }
                let mut flags: libc::c_long = 0;
                let mut rc = ok_or_errno(libc::ioctl(fd, FS_IOC_GETFLAGS, &mut flags));
                if rc == 0 {
                    flags |= FS_NODUMP_FL;
                    rc = ok_or_errno(libc::ioctl(fd, FS_IOC_SETFLAGS, &flags));
                }
                libc::close(fd);
                rc
            }
            Op::WriteBytes(p, bytes) => {
                let fd = libc::open(c(p).as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return errno();
                }
                let n = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
                let rc = if n < 0 { errno() } else { 0 };
                libc::close(fd);
                rc
            }
        }
    }
}

/// The parent's side of a forked child that reports results over the pipe `fds`: closes
/// the write end, reads each `i32` the child writes until it closes the pipe, and waits for
/// the child. Returns the results and the child's wait status.
///
/// # Safety
/// `fds` is the pipe made before the fork (the child writes to `fds[1]`), and `pid` the
/// child; both ends are closed here.
pub unsafe fn child_results(fds: [libc::c_int; 2], pid: libc::pid_t) -> (Vec<i32>, libc::c_int) {
    // SAFETY: the caller's pipe and child, as documented.
    unsafe {
        libc::close(fds[1]);
        let mut out = Vec::new();
        let mut buf = [0u8; 4];
        while libc::read(fds[0], buf.as_mut_ptr().cast(), 4) == 4 {
            out.push(i32::from_ne_bytes(buf));
        }
        libc::close(fds[0]);
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
        (out, status)
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
            let code = enter_child(procs.as_deref(), uid);
            if code == 0 {
                for op in ops {
                    let r: i32 = perform(op);
                    libc::write(fds[1], (&r as *const i32).cast(), 4);
                }
            }
            libc::_exit(code);
        }
        let (out, status) = child_results(fds, pid);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "gated child failed to set up (status {status:#x}: 101 = join cgroup, 102 = setresuid)"
        );
        assert_eq!(out.len(), ops.len(), "child reported {} of {} results", out.len(), ops.len());
        out
    }
}

/// In a forked child: joins the cgroup whose `cgroup.procs` is `procs` (if any) and drops
/// to `uid` (if any). Returns the child's exit code so far: 0, 101 (join) or 102 (setresuid).
///
/// # Safety
/// Only syscalls; meant for a child between `fork` and `_exit`.
unsafe fn enter_child(procs: Option<&std::ffi::CStr>, uid: Option<u32>) -> i32 {
    let mut code = 0;
    if let Some(procs) = procs {
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
    code
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

/// Forks one child that joins `cgroup` (if any), drops to `uid` (if any) and runs the
/// stages of `stages` in turn, reporting each result (0 or errno). After stage `i`'s
/// results have arrived, `between(i)` runs here while the child waits, so one and the same
/// process acts before and after a change of state. Returns each stage's results.
pub fn run_staged(
    cgroup: Option<&Path>,
    uid: Option<u32>,
    stages: &[Vec<Op>],
    mut between: impl FnMut(usize),
) -> Vec<Vec<i32>> {
    let procs = cgroup.map(|p| c(&p.join("cgroup.procs")));
    let (mut results, mut go) = ([0; 2], [0; 2]);
    // SAFETY: pipe/fork/read/write/exit syscalls; the child only performs syscalls and
    // writes to its pipe before `_exit`; the parent closes the ends it does not use.
    unsafe {
        assert_eq!(libc::pipe(results.as_mut_ptr()), 0, "pipe");
        assert_eq!(libc::pipe(go.as_mut_ptr()), 0, "pipe");
        let pid = libc::fork();
        assert!(pid >= 0, "fork");
        if pid == 0 {
            libc::close(results[0]);
            libc::close(go[1]);
            let mut code = enter_child(procs.as_deref(), uid);
            if code == 0 {
                for (i, ops) in stages.iter().enumerate() {
                    let mut byte = 0u8;
                    if i > 0 && libc::read(go[0], (&mut byte as *mut u8).cast(), 1) != 1 {
                        code = 103;
                        break;
                    }
                    for op in ops {
                        let r: i32 = perform(op);
                        libc::write(results[1], (&r as *const i32).cast(), 4);
                    }
                }
            }
            libc::_exit(code);
        }
        libc::close(results[1]);
        libc::close(go[0]);
        let mut out = Vec::new();
        for (i, ops) in stages.iter().enumerate() {
            let mut stage = Vec::new();
            let mut buf = [0u8; 4];
            while stage.len() < ops.len() && libc::read(results[0], buf.as_mut_ptr().cast(), 4) == 4 {
                stage.push(i32::from_ne_bytes(buf));
            }
            let complete = stage.len() == ops.len();
            out.push(stage);
            if !complete || i + 1 == stages.len() {
                break;
            }
            // A failed assertion here must not leave the child waiting in its cgroup.
            if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| between(i))) {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
                libc::close(results[0]);
                libc::close(go[1]);
                std::panic::resume_unwind(panic);
            }
            libc::write(go[1], b"g".as_ptr().cast(), 1);
        }
        libc::close(go[1]);
        libc::close(results[0]);
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "staged child failed (status {status:#x}: 101 = join cgroup, 102 = setresuid, 103 = lost the go signal)"
        );
        let got: Vec<usize> = out.iter().map(Vec::len).collect();
        let want: Vec<usize> = stages.iter().map(Vec::len).collect();
        assert_eq!(got, want, "child reported {got:?} of {want:?} results per stage");
        out
    }
}
