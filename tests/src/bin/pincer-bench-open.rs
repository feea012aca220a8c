//! Benchmark: nanoseconds per `open`+`close` of one file under five setups,
//! measured in one run (run as root in a VM or on a host with BPF LSM):
//!
//! - (a) no Pincer program loaded;
//! - (b) program loaded, process not in a session;
//! - (c) gated process, exact read grant on the file;
//! - (d) gated process, subtree read grant 8 directory levels above the file;
//! - (e) Landlock-restricted process (no Pincer program loaded) with a read
//!   rule on the same directory 8 levels above;
//! - (c) and (d) again with never-grantable entries present, as a daemon
//!   always has them (`~/.ssh` and the like): one object elsewhere, one
//!   name in the root and the default `**/` rules as never patterns, which
//!   make every gated walk go up to the top of the filesystem, look up each
//!   level's name in its directory and read each level's own name;
//! - (f) (d) with never-grantable entries, but each operation opens a file
//!   not opened before (in the same directory, after the policy changed): the
//!   kernel's per-file verdict cache is cold, so this is the cost of a first
//!   open, where the others repeat an open of one file.
//!
//! - (g) seccomp user notification used only as a pause, the way Linux 6.1
//!   could hold an access (no Pincer program loaded): every `openat` of the
//!   process stops in a supervisor thread, which answers
//!   `SECCOMP_USER_NOTIF_FLAG_CONTINUE` at once. A classic BPF filter cannot
//!   read the grant maps, so a granted open would pay this too: this is what
//!   deciding a miss in the syscall would cost every open on 6.1.
//!
//! Two more operations the reach hooks touch are measured the same way, each
//! against its own figure with no program loaded:
//!
//! - `connect`+`close` of a Unix stream socket to a listening socket the
//!   sessions are allowed (root's, by its bound path, as the daemon's is):
//!   no program, ungated, gated;
//! - a signal (`kill(pid, 0)`, the permission check without delivery) to a
//!   process of the same session: no program, ungated, gated;
//! - `open(O_WRONLY)`+`close` of the file: no program, gated with an exact
//!   write grant, and again with the never entries and the never patterns
//!   present (a write checks the never patterns, from their cache once the
//!   directory was walked; a read does not);
//! - `statx` of each file of (f)'s directory in turn (what `ls -l` of a large
//!   directory does), no program and gated with never-grantable entries
//!   present (the stat hook looks for them on every stat in a session): of
//!   as many files never opened nor looked at since the load (the first
//!   look), and of (f)'s files after (f) opened them (a file looked at again).
//!
//! The cases are interleaved round by round, so that drift of the machine (a
//! VM's host, other load) hits every case alike: each round measures the cases
//! without the program, then loads and attaches every hook (a fresh load, so
//! nothing of the previous round stays), measures the cases with it, and
//! unloads it. The next round's baselines wait until the unloaded programs are
//! gone: the kernel detaches and frees them in workers after the last pin and
//! descriptor go, and a baseline taken at once ran with programs still attached.
//! Every sample is one timed run of `--iterations` operations in a
//! fresh child process after a warm-up. The report gives, per case, the minimum
//! and the median over the rounds, the ratio of the minimums (the least
//! disturbed figure of each case) and the median of the per-round ratios to
//! the round's own baseline; comparing two runs shows how stable they are.
//!
//! Under `cargo xtask bench open` the guest's clock counts instructions by
//! default (QEMU `-icount shift=N,sleep=off`, passed here as `--icount-shift
//! N`): then a guest nanosecond is 2^-N guest instructions of work, whatever
//! else the host runs, and the ratios are ratios of instructions executed in
//! the guest, not of wall time on hardware (where memory and cache behaviour
//! weigh differently). With `--wall-clock` they are TCG wall time.
//!
//! With BPF run-time statistics on (separate samples, as they add their own
//! cost), every Pincer program that runs during the open cases is listed with
//! its runs per operation and its time per run: what each open (and a stat of
//! a file looked at again) pays inside the programs, apart from the trampoline
//! and the hook calls.

use clap::Parser;
use landlock::{
    path_beneath_rules, Access as _, AccessFs, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, ABI,
};
use pincer::kernel::{Enforcer, EnforcerConfig, ObjectId, ReachConfig, Scope};
use pincer::Access;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Directory levels between the subtree grant and the file.
const LEVELS: usize = 8;
/// Operations of the warm-up before each timed run.
const WARM_UP: u32 = 1000;

/// `pincer-bench-open`: the cost of the hooks on open, connect and signal.
#[derive(Parser, Clone, Copy)]
struct Settings {
    /// Rounds (each round takes one sample of every case, with a fresh load).
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,
    /// Operations per sample.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..))]
    iterations: u32,
    /// The guest's clock counts instructions (QEMU `-icount shift=N`): one guest
    /// instruction is 2^N ns of guest time. Only labels the figures.
    #[arg(long, value_name = "N")]
    icount_shift: Option<u8>,
    /// In the last round, also run the gated exact-grant open and the gated stat of
    /// opened files under `perf record` of the whole guest (separate runs, after the
    /// measured ones) and print where their instructions went, by symbol: the Pincer
    /// programs, the helpers and kfuncs they call, the trampolines and the hook. The open
    /// with no program loaded is profiled too, in the first round (nothing loaded yet) and
    /// in the last: a later round's baseline must run none of Pincer's programs.
    #[arg(long)]
    perf: bool,
}

fn main() -> ExitCode {
    let settings = Settings::parse();
    match try_main(settings) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pincer-bench-open: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One measured operation, run `n` times.
#[derive(Clone, Copy)]
enum Op<'a> {
    /// `open`+`close` of the file.
    Open(&'a CString),
    /// `open`+`close` of each file once, in order (the warm-up takes the first).
    OpenEach(&'a [CString]),
    /// `connect`+`close` of a Unix stream socket to the listening socket at the path.
    Connect(&'a libc::sockaddr_un),
    /// `kill(pid, 0)` to a child made for the measurement (in the same cgroup).
    Signal,
    /// `statx` of each file in turn, round and round.
    StatEach(&'a [CString]),
    /// `open(O_WRONLY)`+`close` of the file.
    OpenWrite(&'a CString),
    /// `pipe2`+`close` of both ends: the pipe's inode is freed at the last close.
    Pipe,
    /// `open(O_CREAT | O_EXCL)`+`close`+`unlink` of a new file at the path: its inode is
    /// freed at the unlink.
    CreateUnlink(&'a CString),
}

/// ns per operation of one timed run of `iterations` after a warm-up, measured in this process.
fn measure(op: Op, iterations: u32) -> Result<f64, String> {
    let target = match op {
        Op::Signal => Some(paused_child()?),
        _ => None,
    };
    let mut next = 0usize;
    let mut run = |n: u32| match op {
        Op::Open(file) => open_close(file, libc::O_RDONLY, n),
        Op::OpenWrite(file) => open_close(file, libc::O_WRONLY, n),
        Op::OpenEach(files) => {
            let end = next + n as usize;
            let slice = files.get(next..end).ok_or("fewer files than operations")?;
            next = end;
            slice.iter().try_for_each(|f| open_close(f, libc::O_RDONLY, 1))
        }
        Op::Connect(addr) => connect_close(addr, n),
        Op::Signal => signal(target.unwrap_or(0), n),
        Op::Pipe => pipe_close(n),
        Op::CreateUnlink(file) => create_unlink(file, n),
        Op::StatEach(files) => (0..n as usize).try_for_each(|i| stat(&files[(next + i) % files.len()])).map(|()| next += n as usize),
    };
    let result = (|| {
        // Warm-up (dentry cache, map entries).
        run(WARM_UP)?;
        let start = Instant::now();
        run(iterations)?;
        Ok(start.elapsed().as_nanos() as f64 / f64::from(iterations))
    })();
    if let Some(pid) = target {
        // SAFETY: kills and reaps the child made above.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
    }
    result
}

fn paused_child() -> Result<i32, String> {
    // SAFETY: fork; the child only pauses until killed.
    unsafe {
        let pid = libc::fork();
        if pid < 0 {
            return Err(format!("fork: {}", std::io::Error::last_os_error()));
        }
        if pid == 0 {
            loop {
                libc::pause();
            }
        }
        Ok(pid)
    }
}

fn signal(pid: i32, n: u32) -> Result<(), String> {
    for _ in 0..n {
        // SAFETY: a permission check on a child of this process.
        if unsafe { libc::kill(pid, 0) } != 0 {
            return Err(format!("kill: {}", std::io::Error::last_os_error()));
        }
    }
    Ok(())
}

fn pipe_close(n: u32) -> Result<(), String> {
    for _ in 0..n {
        let mut fds = [0; 2];
        // SAFETY: pipe2 into a local array, then close of the two ends it made.
        unsafe {
            if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
                return Err(format!("pipe2: {}", std::io::Error::last_os_error()));
            }
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
    }
    Ok(())
}

fn create_unlink(file: &CString, n: u32) -> Result<(), String> {
    for _ in 0..n {
        // SAFETY: plain syscalls on a valid C string; the descriptor is the one just opened.
        unsafe {
            let fd = libc::open(file.as_ptr(), libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC, 0o600);
            if fd < 0 {
                return Err(format!("create: {}", std::io::Error::last_os_error()));
            }
            libc::close(fd);
            if libc::unlink(file.as_ptr()) != 0 {
                return Err(format!("unlink: {}", std::io::Error::last_os_error()));
            }
        }
    }
    Ok(())
}

fn connect_close(addr: &libc::sockaddr_un, n: u32) -> Result<(), String> {
    let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
    for _ in 0..n {
        // SAFETY: socket/connect/close with a valid address.
        unsafe {
            let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            if fd < 0 || libc::connect(fd, (addr as *const libc::sockaddr_un).cast(), len) != 0 {
                return Err(format!("connect: {}", std::io::Error::last_os_error()));
            }
            libc::close(fd);
        }
    }
    Ok(())
}

fn unix_addr(path: &Path) -> Result<libc::sockaddr_un, String> {
    // SAFETY: sockaddr_un is plain data.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as u16;
    let bytes = path.as_os_str().as_bytes();
    if bytes.len() >= a.sun_path.len() {
        return Err(format!("socket path {} is too long", path.display()));
    }
    for (i, b) in bytes.iter().enumerate() {
        a.sun_path[i] = *b as libc::c_char;
    }
    Ok(a)
}

/// A child process listening on the Unix socket at `path`, accepting and
/// closing every connection (kill it by its pid when done).
fn acceptor(path: &Path) -> Result<i32, String> {
    let _ = std::fs::remove_file(path);
    let listener = std::os::unix::net::UnixListener::bind(path).map_err(|e| format!("bind {}: {e}", path.display()))?;
    // SAFETY: fork; the child only accepts and closes.
    unsafe {
        let pid = libc::fork();
        if pid < 0 {
            return Err(format!("fork: {}", std::io::Error::last_os_error()));
        }
        if pid == 0 {
            use std::os::fd::AsRawFd;
            let fd = listener.as_raw_fd();
            loop {
                let c = libc::accept(fd, std::ptr::null_mut(), std::ptr::null_mut());
                if c >= 0 {
                    libc::close(c);
                }
            }
        }
        // The parent's copy of the listener closes here; the child keeps its own.
        drop(listener);
        Ok(pid)
    }
}

fn stop(pid: i32) {
    // SAFETY: kills and reaps a child this benchmark started.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
    }
}

fn stat(file: &CString) -> Result<(), String> {
    // SAFETY: statx into a zeroed struct we own, on a valid C string.
    let rc = unsafe {
        let mut stx: libc::statx = std::mem::zeroed();
        libc::statx(libc::AT_FDCWD, file.as_ptr(), 0, libc::STATX_BASIC_STATS, &mut stx)
    };
    if rc < 0 {
        return Err(format!("statx failed: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// `n` times `open(file, flags | O_CLOEXEC)` and `close`.
fn open_close(file: &CString, flags: i32, n: u32) -> Result<(), String> {
    for _ in 0..n {
        // SAFETY: plain syscalls on a valid C string.
        let fd = unsafe { libc::open(file.as_ptr(), flags | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(format!("open failed: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: fd was just opened.
        unsafe { libc::close(fd) };
    }
    Ok(())
}

/// Runs `setup` then [`measure`] in a forked child (joined to `cgroup` if
/// given) and returns its figure.
fn in_child(
    cgroup: Option<&Path>,
    op: Op,
    iterations: u32,
    setup: impl FnOnce() -> Result<(), String>,
) -> Result<f64, String> {
    let procs = cgroup.map(|c| c.join("cgroup.procs"));
    let mut fds = [0; 2];
    // SAFETY: pipe/fork; the benchmark is single-threaded, so the child may
    // allocate; it leaves with `_exit`.
    unsafe {
        if libc::pipe(fds.as_mut_ptr()) != 0 {
            return Err(format!("pipe: {}", std::io::Error::last_os_error()));
        }
        let pid = libc::fork();
        if pid < 0 {
            return Err(format!("fork: {}", std::io::Error::last_os_error()));
        }
        if pid == 0 {
            libc::close(fds[0]);
            let result = (|| {
                if let Some(procs) = &procs {
                    std::fs::write(procs, "0").map_err(|e| format!("join {}: {e}", procs.display()))?;
                }
                setup()?;
                measure(op, iterations)
            })();
            let code = match result {
                Ok(ns) => {
                    libc::write(fds[1], (&ns as *const f64).cast(), 8);
                    0
                }
                Err(e) => {
                    eprintln!("pincer-bench-open: child: {e}");
                    1
                }
            };
            libc::_exit(code);
        }
        libc::close(fds[1]);
        let mut ns = 0f64;
        let got = libc::read(fds[0], (&mut ns as *mut f64).cast(), 8);
        libc::close(fds[0]);
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
        if got != 8 || !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
            return Err(format!("measuring child failed (status {status:#x})"));
        }
        Ok(ns)
    }
}

/// (g): stops every `openat` of the calling thread in a supervisor thread that answers
/// `SECCOMP_USER_NOTIF_FLAG_CONTINUE` at once (the other threads are not filtered).
fn seccomp_pause() -> Result<(), String> {
    const NR_OFFSET: u32 = 0; // seccomp_data.nr
    let filter = [
        libc::sock_filter { code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16, jt: 0, jf: 0, k: NR_OFFSET },
        libc::sock_filter { code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16, jt: 0, jf: 1, k: libc::SYS_openat as u32 },
        libc::sock_filter { code: (libc::BPF_RET | libc::BPF_K) as u16, jt: 0, jf: 0, k: libc::SECCOMP_RET_USER_NOTIF },
        libc::sock_filter { code: (libc::BPF_RET | libc::BPF_K) as u16, jt: 0, jf: 0, k: libc::SECCOMP_RET_ALLOW },
    ];
    let prog = libc::sock_fprog { len: filter.len() as u16, filter: filter.as_ptr() as *mut _ };
    let (tx, rx) = std::sync::mpsc::channel::<i32>();
    // The supervisor starts before the filter, so it is not filtered itself.
    std::thread::spawn(move || {
        let Ok(listener) = rx.recv() else { return };
        loop {
            // SAFETY: zeroed plain structs filled by the kernel; the fd is the listener.
            unsafe {
                let mut req: libc::seccomp_notif = std::mem::zeroed();
                if libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_RECV, &mut req) != 0 {
                    if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                        continue;
                    }
                    return;
                }
                let mut resp: libc::seccomp_notif_resp = std::mem::zeroed();
                resp.id = req.id;
                resp.flags = libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32;
                libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SEND, &mut resp);
            }
        }
    });
    // SAFETY: the filter outlives the call (the kernel copies it); root may install
    // filters without no_new_privs.
    let listener = unsafe {
        libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, libc::SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog as *const libc::sock_fprog)
    };
    if listener < 0 {
        return Err(format!("seccomp: {}", std::io::Error::last_os_error()));
    }
    tx.send(listener as i32).map_err(|_| "the seccomp supervisor is gone".to_string())
}

fn landlock_restrict(dir: &Path) -> Result<(), String> {
    let abi = ABI::V1;
    let status = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .and_then(|r| r.create())
        .and_then(|r| r.add_rules(path_beneath_rules([dir], AccessFs::from_read(abi))))
        .and_then(|r| r.restrict_self())
        .map_err(|e| format!("landlock: {e}"))?;
    if status.ruleset != RulesetStatus::FullyEnforced {
        return Err(format!("landlock not fully enforced ({:?}); boot with landlock in lsm=", status.ruleset));
    }
    Ok(())
}

fn try_main(set: Settings) -> Result<(), String> {
    let base = PathBuf::from("/tmp").join(format!("pincer-bench-{}", std::process::id()));
    let top = base.join("granted");
    let mut dir = top.clone();
    for level in 1..LEVELS {
        dir = dir.join(format!("l{level}"));
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let file = dir.join("file.txt");
    std::fs::write(&file, "benchmark").map_err(|e| format!("write {}: {e}", file.display()))?;
    // `top` is LEVELS directories above the file: file's parent is level 1.
    debug_assert_eq!(file.ancestors().nth(LEVELS), Some(top.as_path()));
    let cfile = CString::new(file.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
    // (f): as many files beside it as a sample opens, each once.
    let mut each = Vec::with_capacity((WARM_UP + set.iterations) as usize);
    for i in 0..WARM_UP + set.iterations {
        let f = dir.join(format!("each-{i}.txt"));
        std::fs::write(&f, "benchmark").map_err(|e| format!("write {}: {e}", f.display()))?;
        each.push(CString::new(f.as_os_str().as_bytes()).map_err(|e| e.to_string())?);
    }
    // The first stat: as many files again, in a directory beside (f)'s, never opened.
    let stat_dir = dir.with_file_name("stat");
    std::fs::create_dir(&stat_dir).map_err(|e| format!("create {}: {e}", stat_dir.display()))?;
    let mut unopened = Vec::with_capacity(each.len());
    for i in 0..WARM_UP + set.iterations {
        let f = stat_dir.join(format!("stat-{i}.txt"));
        std::fs::write(&f, "benchmark").map_err(|e| format!("write {}: {e}", f.display()))?;
        unopened.push(CString::new(f.as_os_str().as_bytes()).map_err(|e| e.to_string())?);
    }

    let unlinked = CString::new(base.join("unlinked.tmp").as_os_str().as_bytes()).map_err(|e| e.to_string())?;
    let sock = base.join("allowed.sock");
    let sock_addr = unix_addr(&sock)?;
    let acceptor_pid = acceptor(&sock)?;
    let ops = Ops {
        open: Op::Open(&cfile),
        write: Op::OpenWrite(&cfile),
        open_each: Op::OpenEach(&each),
        stat_each: Op::StatEach(&each),
        stat_first: Op::StatEach(&unopened),
        connect: Op::Connect(&sock_addr),
        create_unlink: Op::CreateUnlink(&unlinked),
        iterations: set.iterations,
    };
    let never = base.join("never");
    std::fs::create_dir_all(&never).map_err(|e| format!("create {}: {e}", never.display()))?;
    let paths = Paths { base: &base, top: &top, file: &file, sock: &sock, never: &never };
    let mut samples = Samples::default();
    let started = Instant::now();
    let result = (|| {
        for r in 1..=set.rounds {
            let t = Instant::now();
            samples.profile = set.perf && r == set.rounds;
            samples.profile_baseline = set.perf && (r == 1 || r == set.rounds);
            round(&mut samples, &paths, &ops)?;
            let load = samples.load_secs.last().copied().unwrap_or(0.0);
            eprintln!(
                "pincer-bench-open: round {r}/{} in {:.1} s (load and attach {load:.1} s)",
                set.rounds,
                t.elapsed().as_secs_f64()
            );
        }
        Ok::<_, String>(())
    })();
    stop(acceptor_pid);
    let _ = std::fs::remove_dir_all(&base);
    result?;
    report(&samples, &set, started.elapsed().as_secs_f64());
    for (case, profile) in &samples.profiles {
        println!("perf of {case} ({} operations):\n{profile}", PROFILED_OPS);
    }
    Ok(())
}

/// Operations of a profiled run (`--perf`): enough samples at 1999 Hz of the guest clock.
const PROFILED_OPS: u32 = 200_000;

/// Runs `sample` under `perf record` of the whole guest, if this round profiles, and keeps
/// the report for `case`.
fn profiled(s: &mut Samples, case: &'static str, sample: impl FnOnce() -> Result<f64, String>) -> Result<(), String> {
    if !s.profile {
        return Ok(());
    }
    profile_now(s, case, sample)
}

/// Runs `sample` under `perf record` of the whole guest and keeps the report for `case`.
fn profile_now(s: &mut Samples, case: &'static str, sample: impl FnOnce() -> Result<f64, String>) -> Result<(), String> {
    let profile = pincer_tests::profile::Profile::start(case)?;
    let ran = sample();
    let report = profile.report(40)?;
    ran?;
    s.profiles.push((case, report));
    Ok(())
}

/// The measured operations.
struct Ops<'a> {
    open: Op<'a>,
    /// The same file opened for writing.
    write: Op<'a>,
    /// (f): each of the files once.
    open_each: Op<'a>,
    /// `statx` of (f)'s files in turn.
    stat_each: Op<'a>,
    /// `statx` of as many files in turn, in a directory beside (f)'s, never opened.
    stat_first: Op<'a>,
    connect: Op<'a>,
    /// A new file made and unlinked (in the bench's folder).
    create_unlink: Op<'a>,
    iterations: u32,
}

/// The benchmark's files.
struct Paths<'a> {
    /// The protected root.
    base: &'a Path,
    /// The directory of the subtree grant, [`LEVELS`] above the file.
    top: &'a Path,
    /// The opened file.
    file: &'a Path,
    /// The allowed listening socket.
    sock: &'a Path,
    /// A never-grantable directory beside the granted tree.
    never: &'a Path,
}

/// The cases, in the order of a round.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Case {
    OpenNone,
    OpenLandlock,
    /// (g): seccomp user notification as a pause, no program loaded.
    OpenSeccompPause,
    ConnectNone,
    SignalNone,
    OpenUngated,
    ConnectUngated,
    SignalUngated,
    ConnectGated,
    SignalGated,
    OpenExact,
    OpenSubtree,
    /// (b), (c), (d) again with BPF run-time statistics on (they add their own cost).
    OpenUngatedStats,
    OpenExactStats,
    OpenSubtreeStats,
    /// (c) and (d) with never-grantable entries present.
    OpenExactNever,
    OpenSubtreeNever,
    /// (f): (d) with never entries, a file not opened before each time.
    OpenSubtreeNeverFirst,
    /// (f)'s baseline: the same files, no program loaded.
    OpenEachNone,
    /// `statx` of (f)'s files in turn, no program loaded.
    StatNone,
    /// The same, gated, never-grantable entries present (after (f) opened each file).
    StatGatedNever,
    /// Gated, never entries present: `statx` of files neither opened nor looked at since
    /// the load (what `ls -l` of a directory does the first time).
    StatGatedNeverFirst,
    /// (b), (c), (d) with the plain `file_open` where the held one was attached (the cost
    /// of holding misses for opens that do not miss).
    OpenUngatedPlain,
    OpenExactPlain,
    OpenSubtreePlain,
    /// Open for writing, no program loaded.
    WriteNone,
    /// Open for writing with an exact write grant, no never entries yet.
    WriteExact,
    /// The same with the never entries and never patterns present (a write checks the
    /// patterns; a read does not).
    WriteExactNever,
    /// A pipe made and closed, and a file made and unlinked, outside every session: no
    /// program loaded, loaded with one session open, and with [`MANY_SESSIONS`] open (a
    /// freed inode may have entries of every session to forget).
    PipeNone,
    PipeOne,
    PipeMany,
    UnlinkNone,
    UnlinkOne,
    UnlinkMany,
}

const CASES: usize = 34;

/// The sessions open for [`Case::PipeMany`] and [`Case::UnlinkMany`].
const MANY_SESSIONS: usize = 32;

/// What the programs ran during one case with statistics on: program name →
/// (runs, ns inside the program), summed over the rounds.
type ProgramRuns = std::collections::BTreeMap<String, (u64, u64)>;

/// Every sample of every case.
#[derive(Default)]
struct Samples {
    ns: CaseSamples,
    /// Seconds each load and attach took.
    load_secs: Vec<f64>,
    /// Seconds waited in all for unloaded programs to go ([`detached`]).
    settle_secs: f64,
    /// Per statistics case (ungated, exact, subtree open; stat with never entries): the
    /// programs that ran.
    runs: [ProgramRuns; 4],
    /// Operations measured per statistics case (for runs per operation).
    ops_with_stats: [u64; 4],
    /// The cgroup levels the hooks look up (the state map's mask).
    levels: u32,
    /// Rounds whose load attached the held `file_open` (then the plain cases ran too).
    held_rounds: usize,
    /// Profile this round's exact open and stat (`--perf`, the last round).
    profile: bool,
    /// Whether this round profiles its baseline open too (`--perf`: the first round, before
    /// anything was loaded, and the last), to compare the two.
    profile_baseline: bool,
    /// The profiles taken: (case, report).
    profiles: Vec<(&'static str, String)>,
}

/// The samples of each case, by [`Case`] number (more cases than `Default` derives for).
struct CaseSamples([Vec<f64>; CASES]);

impl Default for CaseSamples {
    fn default() -> Self {
        CaseSamples(std::array::from_fn(|_| Vec::new()))
    }
}

impl std::ops::Index<usize> for CaseSamples {
    type Output = Vec<f64>;
    fn index(&self, i: usize) -> &Vec<f64> {
        &self.0[i]
    }
}

impl std::ops::IndexMut<usize> for CaseSamples {
    fn index_mut(&mut self, i: usize) -> &mut Vec<f64> {
        &mut self.0[i]
    }
}

impl Samples {
    fn add(&mut self, case: Case, ns: f64) {
        self.ns[case as usize].push(ns);
    }

    /// (minimum, median) of a case.
    fn figures(&self, case: Case) -> (f64, f64) {
        let mut v = self.ns[case as usize].clone();
        v.sort_by(f64::total_cmp);
        (v[0], v[v.len() / 2])
    }

    /// The median over the rounds of case / base of the same round.
    fn median_ratio(&self, case: Case, base: Case) -> f64 {
        let mut r: Vec<f64> =
            self.ns[case as usize].iter().zip(&self.ns[base as usize]).map(|(c, b)| c / b).collect();
        r.sort_by(f64::total_cmp);
        r[r.len() / 2]
    }
}

/// One round: every case once, without the program, then with a fresh load of it.
fn round(s: &mut Samples, p: &Paths, ops: &Ops) -> Result<(), String> {
    let n = ops.iterations;
    s.settle_secs += detached()?;
    s.add(Case::OpenNone, in_child(None, ops.open, n, || Ok(()))?);
    if s.profile_baseline {
        let case = if s.load_secs.is_empty() { "(a) no program loaded, nothing loaded yet" } else { "(a) no program loaded, after the earlier rounds' loads" };
        profile_now(s, case, || in_child(None, ops.open, PROFILED_OPS, || Ok(())))?;
    }
    s.add(Case::OpenLandlock, in_child(None, ops.open, n, || landlock_restrict(p.top))?);
    s.add(Case::OpenSeccompPause, in_child(None, ops.open, n, seccomp_pause)?);
    s.add(Case::OpenEachNone, in_child(None, ops.open_each, n, || Ok(()))?);
    s.add(Case::ConnectNone, in_child(None, ops.connect, n, || Ok(()))?);
    s.add(Case::SignalNone, in_child(None, Op::Signal, n, || Ok(()))?);
    s.add(Case::StatNone, in_child(None, ops.stat_each, n, || Ok(()))?);
    s.add(Case::WriteNone, in_child(None, ops.write, n, || Ok(()))?);
    s.add(Case::PipeNone, in_child(None, Op::Pipe, n, || Ok(()))?);
    s.add(Case::UnlinkNone, in_child(None, ops.create_unlink, n, || Ok(()))?);

    let pin_dir = PathBuf::from("/sys/fs/bpf").join(format!("pincer-bench-{}", std::process::id()));
    let config =
        EnforcerConfig { pin_dir: pin_dir.clone(), reach: ReachConfig::with_trusted_socket(p.sock), ..EnforcerConfig::default() };
    let loading = Instant::now();
    let mut enforcer = Enforcer::load(&config).map_err(|e| format!("load enforcer: {e:?}"))?;
    s.load_secs.push(loading.elapsed().as_secs_f64());
    let cgroup = PathBuf::from("/sys/fs/cgroup").join(format!("pincer-bench-{}", std::process::id()));
    std::fs::create_dir(&cgroup).map_err(|e| format!("create {}: {e}", cgroup.display()))?;
    let result = (|| {
        let session = pincer::kernel::cgroup_id(&cgroup).map_err(|e| e.to_string())?;
        enforcer.register_session(session).map_err(|e| e.to_string())?;
        s.levels = enforcer.session_levels().map_err(|e| e.to_string())?;
        enforcer.add_root(p.base).map_err(|e| e.to_string())?;
        let file_id = ObjectId::of_path(p.file).map_err(|e| e.to_string())?;
        let top_id = ObjectId::of_path(p.top).map_err(|e| e.to_string())?;
        let gated = Some(cgroup.as_path());

        s.add(Case::OpenUngated, in_child(None, ops.open, n, || Ok(()))?);
        s.add(Case::ConnectUngated, in_child(None, ops.connect, n, || Ok(()))?);
        s.add(Case::SignalUngated, in_child(None, Op::Signal, n, || Ok(()))?);
        s.add(Case::PipeOne, in_child(None, Op::Pipe, n, || Ok(()))?);
        s.add(Case::UnlinkOne, in_child(None, ops.create_unlink, n, || Ok(()))?);
        s.add(Case::ConnectGated, in_child(gated, ops.connect, n, || Ok(()))?);
        s.add(Case::SignalGated, in_child(gated, Op::Signal, n, || Ok(()))?);
        enforcer.grant(session, file_id, Scope::Exact, Access::Read).map_err(|e| e.to_string())?;
        s.add(Case::OpenExact, in_child(gated, ops.open, n, || Ok(()))?);
        let exact = with_stats(s, 1, n, || in_child(gated, ops.open, n, || Ok(())))?;
        s.add(Case::OpenExactStats, exact);
        profiled(s, "(c) gated, exact grant", || in_child(gated, ops.open, PROFILED_OPS, || Ok(())))?;
        enforcer.grant(session, file_id, Scope::Exact, Access::Write).map_err(|e| e.to_string())?;
        s.add(Case::WriteExact, in_child(gated, ops.write, n, || Ok(()))?);
        enforcer.revoke(session, file_id, Scope::Exact, Access::Write).map_err(|e| e.to_string())?;
        enforcer.revoke(session, file_id, Scope::Exact, Access::Read).map_err(|e| e.to_string())?;
        enforcer.grant(session, top_id, Scope::Subtree, Access::Read).map_err(|e| e.to_string())?;
        s.add(Case::OpenSubtree, in_child(gated, ops.open, n, || Ok(()))?);
        let subtree = with_stats(s, 2, n, || in_child(gated, ops.open, n, || Ok(())))?;
        s.add(Case::OpenSubtreeStats, subtree);
        let ungated = with_stats(s, 0, n, || in_child(None, ops.open, n, || Ok(())))?;
        s.add(Case::OpenUngatedStats, ungated);
        profiled(s, "(b) outside every session", || in_child(None, ops.open, PROFILED_OPS, || Ok(())))?;
        // Never-grantable entries that do not cover the file: an object and a name.
        let never_dir = ObjectId::of_path(p.never).map_err(|e| e.to_string())?;
        let root_id = ObjectId::of_path(p.base).map_err(|e| e.to_string())?;
        enforcer.add_never(never_dir, pincer_common::ACCESS_ALL).map_err(|e| e.to_string())?;
        enforcer
            .add_never_name(root_id, std::ffi::OsStr::new(".ssh"), pincer_common::ACCESS_ALL)
            .map_err(|e| e.to_string())?;
        // And the default `**/` rules as the kernel matches them (never patterns): every
        // walk then reads the name of each level it passes.
        let wcd = pincer_common::ACCESS_WRITE | pincer_common::ACCESS_CREATE | pincer_common::ACCESS_DELETE;
        for (dir, name) in [(Some(".git"), "hooks"), (Some(".git"), "config"), (Some(".claude"), "settings.json"), (None, ".mcp.json"), (Some(".codex"), "config.toml"), (Some(".codex"), "rules"), (Some(".gemini"), "settings.json")] {
            enforcer
                .add_never_pattern(dir.map(std::ffi::OsStr::new), std::ffi::OsStr::new(name), wcd)
                .map_err(|e| e.to_string())?;
        }
        // First, while nothing is cached since the never entries came: every
        // file of (f) is opened for the first time, and files never opened are
        // looked at.
        s.add(Case::StatGatedNeverFirst, in_child(gated, ops.stat_first, n, || Ok(()))?);
        s.add(Case::OpenSubtreeNeverFirst, in_child(gated, ops.open_each, n, || Ok(()))?);
        s.add(Case::OpenSubtreeNever, in_child(gated, ops.open, n, || Ok(()))?);
        s.add(Case::StatGatedNever, in_child(gated, ops.stat_each, n, || Ok(()))?);
        with_stats(s, 3, n, || in_child(gated, ops.stat_each, n, || Ok(())))?;
        profiled(s, "stat, never entries, files opened", || in_child(gated, ops.stat_each, PROFILED_OPS, || Ok(())))?;
        enforcer.revoke(session, top_id, Scope::Subtree, Access::Read).map_err(|e| e.to_string())?;
        enforcer.grant(session, file_id, Scope::Exact, Access::Read).map_err(|e| e.to_string())?;
        s.add(Case::OpenExactNever, in_child(gated, ops.open, n, || Ok(()))?);
        enforcer.grant(session, file_id, Scope::Exact, Access::Write).map_err(|e| e.to_string())?;
        s.add(Case::WriteExactNever, in_child(gated, ops.write, n, || Ok(()))?);
        many_sessions(s, &mut enforcer, &cgroup, ops)
    })();
    let held = enforcer.holds_misses();
    let _ = enforcer.unpin();
    let _ = std::fs::remove_dir(&cgroup);
    result?;
    if held {
        s.held_rounds += 1;
        plain_file_open(s, p, ops)?;
    }
    Ok(())
}

/// [`Case::PipeMany`] and [`Case::UnlinkMany`]: [`MANY_SESSIONS`] sessions open (the
/// round's and more, each a cgroup of its own under `first`'s parent), then the extra
/// ones ended and their cgroups removed.
fn many_sessions(s: &mut Samples, enforcer: &mut Enforcer, first: &Path, ops: &Ops) -> Result<(), String> {
    let n = ops.iterations;
    let (mut made, mut registered) = (Vec::new(), Vec::new());
    let result = (|| {
        for i in 1..MANY_SESSIONS {
            let mut name = first.as_os_str().to_owned();
            name.push(format!("-{i}"));
            let cgroup = PathBuf::from(name);
            std::fs::create_dir(&cgroup).map_err(|e| format!("create {}: {e}", cgroup.display()))?;
            made.push(cgroup.clone());
            let id = pincer::kernel::cgroup_id(&cgroup).map_err(|e| e.to_string())?;
            enforcer.register_session(id).map_err(|e| e.to_string())?;
            registered.push(id);
        }
        s.add(Case::PipeMany, in_child(None, Op::Pipe, n, || Ok(()))?);
        s.add(Case::UnlinkMany, in_child(None, ops.create_unlink, n, || Ok(()))?);
        Ok(())
    })();
    for id in registered {
        let _ = enforcer.remove_session(id);
    }
    for cgroup in made {
        let _ = std::fs::remove_dir(&cgroup);
    }
    result
}

/// (b), (c), (d) again on a fresh load with the plain `file_open` instead of the held one.
fn plain_file_open(s: &mut Samples, p: &Paths, ops: &Ops) -> Result<(), String> {
    let n = ops.iterations;
    s.settle_secs += detached()?;
    let pin_dir = PathBuf::from("/sys/fs/bpf").join(format!("pincer-bench-plain-{}", std::process::id()));
    let config = EnforcerConfig {
        pin_dir,
        reach: ReachConfig::with_trusted_socket(p.sock),
        held_programs: false,
        ..EnforcerConfig::default()
    };
    let mut enforcer = Enforcer::load(&config).map_err(|e| format!("load enforcer: {e:?}"))?;
    let cgroup = PathBuf::from("/sys/fs/cgroup").join(format!("pincer-bench-plain-{}", std::process::id()));
    std::fs::create_dir(&cgroup).map_err(|e| format!("create {}: {e}", cgroup.display()))?;
    let result = (|| {
        let session = pincer::kernel::cgroup_id(&cgroup).map_err(|e| e.to_string())?;
        enforcer.register_session(session).map_err(|e| e.to_string())?;
        enforcer.add_root(p.base).map_err(|e| e.to_string())?;
        let file_id = ObjectId::of_path(p.file).map_err(|e| e.to_string())?;
        let top_id = ObjectId::of_path(p.top).map_err(|e| e.to_string())?;
        let gated = Some(cgroup.as_path());
        s.add(Case::OpenUngatedPlain, in_child(None, ops.open, n, || Ok(()))?);
        enforcer.grant(session, file_id, Scope::Exact, Access::Read).map_err(|e| e.to_string())?;
        s.add(Case::OpenExactPlain, in_child(gated, ops.open, n, || Ok(()))?);
        enforcer.revoke(session, file_id, Scope::Exact, Access::Read).map_err(|e| e.to_string())?;
        enforcer.grant(session, top_id, Scope::Subtree, Access::Read).map_err(|e| e.to_string())?;
        s.add(Case::OpenSubtreePlain, in_child(gated, ops.open, n, || Ok(()))?);
        Ok::<_, String>(())
    })();
    let _ = enforcer.unpin();
    let _ = std::fs::remove_dir(&cgroup);
    result
}

/// Runs `sample` with BPF run-time statistics on and adds what every Pincer
/// program ran meanwhile to statistics case `which` (the warm-up's runs
/// included: `iterations` + 1000 operations).
fn with_stats(s: &mut Samples, which: usize, iterations: u32, sample: impl FnOnce() -> Result<f64, String>) -> Result<f64, String> {
    let stats = aya::sys::enable_stats(aya::sys::Stats::RunTime).map_err(|e| format!("enable BPF statistics: {e}"))?;
    let before = program_stats()?;
    let ns = sample()?;
    let after = program_stats()?;
    drop(stats);
    for (key, (count, time)) in after {
        let (c0, t0) = before.get(&key).copied().unwrap_or((0, 0));
        if count > c0 {
            let name = key.split('#').next().unwrap_or(&key).to_owned();
            let e = s.runs[which].entry(name).or_default();
            e.0 += count - c0;
            e.1 += time.saturating_sub(t0);
        }
    }
    s.ops_with_stats[which] += u64::from(iterations) + 1000;
    Ok(ns)
}

/// The name prefix of every Pincer program (as the kernel lists loaded programs).
const PROGRAM_PREFIX: &str = "pincer_";

/// The longest wait for the previous load's programs to go ([`detached`]).
const SETTLE_MAX: Duration = Duration::from_secs(120);

/// Waits until no Pincer program is loaded any more and returns the seconds waited.
/// Dropping a link's last descriptor or pin detaches its program in a kernel worker a
/// moment later, one link after another, and the program is freed after that: a link whose
/// id is gone may still be on its way out, so only a program that is gone is surely not
/// run. A baseline measured before (a round's first, right after the previous round's
/// unload) ran with programs still attached: `--perf` found `pincer_file_open` in such a
/// baseline, and Landlock's median was 9 % above its minimum.
fn detached() -> Result<f64, String> {
    let start = Instant::now();
    loop {
        let left = aya::programs::loaded_programs()
            .filter(|p| match p {
                Ok(p) => p.name_as_str().is_some_and(|n| n.starts_with(PROGRAM_PREFIX)),
                Err(_) => true,
            })
            .count();
        if left == 0 {
            return Ok(start.elapsed().as_secs_f64());
        }
        if start.elapsed() > SETTLE_MAX {
            return Err(format!("{left} Pincer programs still loaded {} s after the unload", SETTLE_MAX.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// (run count, run time ns) of every loaded Pincer program, by program id with its
/// name (the kernel keeps 15 characters of a name, so two programs may show the same one:
/// `pincer_inode_ge` is `inode_getattr` and `inode_getxattr`; what each id ran is
/// summed under its name in the report). Earlier rounds' programs are unloaded.
fn program_stats() -> Result<ProgramRuns, String> {
    let mut by_id: std::collections::BTreeMap<u32, (String, u64, u64)> = Default::default();
    for info in aya::programs::loaded_programs() {
        let info = info.map_err(|e| format!("list BPF programs: {e}"))?;
        let Some(name) = info.name_as_str().filter(|n| n.starts_with(PROGRAM_PREFIX)) else { continue };
        by_id.insert(info.id(), (name.to_owned(), info.run_count(), info.run_time().as_nanos() as u64));
    }
    Ok(by_id.into_iter().map(|(id, (name, count, time))| (format!("{name}#{id}"), (count, time))).collect())
}

fn report(s: &Samples, set: &Settings, secs: f64) {
    let mut load = s.load_secs.clone();
    load.sort_by(f64::total_cmp);
    let unit = match set.icount_shift {
        None => "ns".to_string(),
        Some(0) => "gi".to_string(),
        Some(_) => "gns".to_string(),
    };
    match set.icount_shift {
        None => println!("pincer-bench-open: clock: the guest's own clock (wall time; under QEMU TCG disturbed by the host's load)"),
        Some(shift) => println!(
            "pincer-bench-open: clock: guest time counts instructions (QEMU -icount shift={shift},sleep=off): 1 guest ns = {} guest \
             instruction(s); figures ({unit}) are guest {} per operation, so the ratios are ratios of work done in the guest, \
             not of wall time on hardware",
            if shift == 0 { "1".to_string() } else { format!("1/{}", 1u32 << shift) },
            if shift == 0 { "instructions" } else { "instruction-time ns" }
        ),
    }
    println!(
        "pincer-bench-open: {unit} per operation over {} interleaved rounds (each: one sample of every case, {} operations in a \
         fresh process; the program loaded afresh each round, every containment hook attached, median load {:.1} s; \
         {secs:.0} s in all; {:.1} s waited for unloaded programs to go before the baselines)",
        set.rounds,
        set.iterations,
        load[load.len() / 2],
        s.settle_secs
    );
    let rows = |title: &str, base: Case, rows: &[(&str, Case)]| {
        println!("{title}:");
        println!("  {:<40} {:>10} {:>11}   {:>13}   {:>17}", "", format!("min {unit}"), format!("median {unit}"), "min/min(base)", "median(case/base)");
        let (b, _) = s.figures(base);
        for (label, case) in rows {
            let (min, median) = s.figures(*case);
            println!(
                "  {label:<40} {min:>10.0} {median:>11.0}   {:>12.3}x   {:>16.3}x",
                min / b,
                s.median_ratio(*case, base)
            );
        }
    };
    rows(
        "open+close of a file",
        Case::OpenNone,
        &[
            ("(a) no program loaded", Case::OpenNone),
            ("(b) loaded, process not gated", Case::OpenUngated),
            ("(c) gated, exact grant", Case::OpenExact),
            ("(d) gated, subtree grant 8 levels up", Case::OpenSubtree),
            ("(e) Landlock, rule 8 levels up", Case::OpenLandlock),
            ("(g) seccomp pause, answered CONTINUE", Case::OpenSeccompPause),
            ("(c) with never-grantable entries", Case::OpenExactNever),
            ("(d) with never-grantable entries", Case::OpenSubtreeNever),
            ("(b) again, BPF statistics on", Case::OpenUngatedStats),
            ("(c) again, BPF statistics on", Case::OpenExactStats),
            ("(d) again, BPF statistics on", Case::OpenSubtreeStats),
        ],
    );
    rows(
        "open+close of a file not opened before (each operation a new file of the same directory)",
        Case::OpenEachNone,
        &[
            ("(f) no program loaded", Case::OpenEachNone),
            ("(f) subtree grant, never entries", Case::OpenSubtreeNeverFirst),
        ],
    );
    let min = |c: Case| s.figures(c).0;
    for (i, (label, case, base, op)) in [
        ("(b) ungated", Case::OpenUngated, Case::OpenNone, "open"),
        ("(c) exact", Case::OpenExact, Case::OpenNone, "open"),
        ("(d) subtree", Case::OpenSubtree, Case::OpenNone, "open"),
        ("stat, never entries", Case::StatGatedNever, Case::StatNone, "stat"),
    ]
    .into_iter()
    .enumerate()
    {
        let ops = s.ops_with_stats[i].max(1) as f64;
        let inside: f64 = s.runs[i].values().map(|(_, t)| *t as f64).sum::<f64>() / ops;
        let progs: Vec<String> = s.runs[i]
            .iter()
            .map(|(name, (count, time))| {
                format!("{name} {:.2} runs/op, {:.0} ns/run", *count as f64 / ops, *time as f64 / (*count).max(1) as f64)
            })
            .collect();
        println!(
            "  {label}: {:.0} {unit} per {op} above its figure with no program (minimums); inside Pincer programs (BPF \
             statistics, guest ns): {inside:.0} per {op} [{}]; the rest is the BPF trampolines, the hook calls and the \
             statistics' own clock reads",
            min(case) - min(base),
            if progs.is_empty() { "none ran".to_string() } else { progs.join("; ") }
        );
    }
    if s.held_rounds == set.rounds as usize {
        rows(
            "open+close with the held file_open (attached, as on this kernel) against the plain one (fresh loads in the same rounds)",
            Case::OpenNone,
            &[
                ("(b) not gated, plain file_open", Case::OpenUngatedPlain),
                ("(b) not gated, held file_open", Case::OpenUngated),
                ("(c) exact grant, plain file_open", Case::OpenExactPlain),
                ("(c) exact grant, held file_open", Case::OpenExact),
                ("(d) subtree grant, plain file_open", Case::OpenSubtreePlain),
                ("(d) subtree grant, held file_open", Case::OpenSubtree),
            ],
        );
        let r = |held: Case, plain: Case| s.figures(held).0 / s.figures(plain).0;
        println!(
            "  held / plain (minimums): (b) {:.3}x, (c) {:.3}x, (d) {:.3}x (what holding misses costs opens that do not miss)",
            r(Case::OpenUngated, Case::OpenUngatedPlain),
            r(Case::OpenExact, Case::OpenExactPlain),
            r(Case::OpenSubtree, Case::OpenSubtreePlain)
        );
    } else {
        println!("the held file_open was not attached on this kernel: every file_open case ran the plain program");
    }
    let (pause, exact) = (s.figures(Case::OpenSeccompPause).0, s.figures(Case::OpenExact).0);
    println!(
        "  (g) seccomp pause / (a): {:.2}x, against (c) exact grant / (a): {:.3}x: a pause in every open is what holding with seccomp would cost opens that do not miss",
        pause / s.figures(Case::OpenNone).0,
        exact / s.figures(Case::OpenNone).0
    );
    rows(
        "open(O_WRONLY)+close of the file (a write checks the never patterns, a read does not)",
        Case::WriteNone,
        &[
            ("no program loaded", Case::WriteNone),
            ("exact write grant", Case::WriteExact),
            ("exact write grant, never entries and patterns", Case::WriteExactNever),
        ],
    );
    {
        let m = |c: Case| s.figures(c).0;
        println!(
            "  never entries add {:.0} gi to a read and {:.0} gi to a write (minimums): the difference, {:.0} gi, is the write's own never-pattern check (the file's name and the directory's cached patterns)",
            m(Case::OpenExactNever) - m(Case::OpenExact),
            m(Case::WriteExactNever) - m(Case::WriteExact),
            (m(Case::WriteExactNever) - m(Case::WriteExact)) - (m(Case::OpenExactNever) - m(Case::OpenExact))
        );
    }
    rows(
        "statx of each file of a directory in turn (ls -l)",
        Case::StatNone,
        &[
            ("no program loaded", Case::StatNone),
            ("gated, never entries, first look", Case::StatGatedNeverFirst),
            ("gated, never entries, files opened", Case::StatGatedNever),
        ],
    );
    rows(
        "connect+close to an allowed Unix socket",
        Case::ConnectNone,
        &[("no program loaded", Case::ConnectNone), ("loaded, process not gated", Case::ConnectUngated), ("gated, socket allowed", Case::ConnectGated)],
    );
    let many = format!("loaded, {MANY_SESSIONS} sessions open");
    rows(
        "pipe2+close outside every session (the pipe's inode is freed at the last close)",
        Case::PipeNone,
        &[("no program loaded", Case::PipeNone), ("loaded, 1 session open", Case::PipeOne), (&many, Case::PipeMany)],
    );
    rows(
        "create+close+unlink of a file outside every session (its inode is freed at the unlink)",
        Case::UnlinkNone,
        &[("no program loaded", Case::UnlinkNone), ("loaded, 1 session open", Case::UnlinkOne), (&many, Case::UnlinkMany)],
    );
    {
        let m = |c: Case| s.figures(c).0;
        let per = |many: Case, one: Case| (m(many) - m(one)) / (MANY_SESSIONS - 1) as f64;
        println!(
            "  each session open beyond the first adds {:.0} gi to a pipe and {:.0} gi to an unlinked file (minimums): a file's inode freed with no link left has its entries forgotten in every session (a pipe's keeps its link count)",
            per(Case::PipeMany, Case::PipeOne),
            per(Case::UnlinkMany, Case::UnlinkOne)
        );
    }
    rows(
        "signal (kill(pid, 0)) to a process of the same session",
        Case::SignalNone,
        &[("no program loaded", Case::SignalNone), ("loaded, process not gated", Case::SignalUngated), ("gated, target in the session", Case::SignalGated)],
    );
    let (a, b, c, d, e) = (min(Case::OpenNone), min(Case::OpenUngated), min(Case::OpenExact), min(Case::OpenSubtree), min(Case::OpenLandlock));
    let met = |ok: bool| if ok { "met" } else { "not met" };
    println!(
        "issue 9 targets (minimums, {}): ungated (b) <= 1.02x [{}], exact (c) <= 1.1x [{}], subtree (d) <= 1.2x [{}], all below Landlock (e) [{}]",
        if set.icount_shift.is_some() { "guest instructions" } else { "wall time" },
        met(b <= 1.02 * a),
        met(c <= 1.1 * a),
        met(d <= 1.2 * a),
        met(b <= e && c <= e && d <= e)
    );
    let (cn, dn) = (min(Case::OpenExactNever), min(Case::OpenSubtreeNever));
    println!(
        "  with never-grantable entries (as a daemon has them): exact {:.3}x [{}], subtree {:.3}x [{}], below Landlock [{}]",
        cn / a,
        met(cn <= 1.1 * a),
        dn / a,
        met(dn <= 1.2 * a),
        met(cn <= e && dn <= e)
    );
    println!("session cgroup levels the hooks look up: {:#x} (the session cgroup's level only, unless every level: 0xffffffff)", s.levels);
    if set.icount_shift.is_none() {
        println!("note: under QEMU TCG (software emulation) wall-time ratios are indicative only; measure on real hardware with BPF LSM for figures.");
    } else {
        println!("note: instruction counts weigh every guest instruction alike (a cache miss costs what an add does); on hardware the ratios differ, measure there for wall time.");
    }
}
