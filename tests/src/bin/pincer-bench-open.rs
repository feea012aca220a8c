//! Benchmark: nanoseconds per `open`+`close` of one file under five setups,
//! measured in one run (run as root in a VM or on a host with BPF LSM):
//!
//! - (a) no Pincer program loaded;
//! - (b) program loaded, process not in a session;
//! - (c) gated process, exact read grant on the file;
//! - (d) gated process, subtree read grant 8 directory levels above the file;
//! - (e) Landlock-restricted process (no Pincer program loaded) with a read
//!   rule on the same directory 8 levels above.
//!
//! Two more operations the reach hooks touch are measured the same way, each
//! against its own figure with no program loaded:
//!
//! - `connect`+`close` of a Unix stream socket to a listening socket the
//!   sessions are allowed (root's, by its bound path, as the daemon's is):
//!   no program, ungated, gated;
//! - a signal (`kill(pid, 0)`, the permission check without delivery) to a
//!   process of the same session: no program, ungated, gated.
//!
//! The cases are interleaved round by round, so that drift of the machine (a
//! VM's host, other load) hits every case alike: each round measures the cases
//! without the program, then loads and attaches every hook (a fresh load, so
//! nothing of the previous round stays), measures the cases with it, and
//! unloads it. Every sample is one timed run of [`ITERATIONS`] operations in a
//! fresh child process after a warm-up. The report gives, per case, the minimum
//! and the median over the rounds, and the ratios of the minimums (the least
//! disturbed figure of each case); comparing two runs shows how stable they are.

use landlock::{
    path_beneath_rules, Access as _, AccessFs, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, ABI,
};
use pincer::kernel::{Enforcer, EnforcerConfig, ObjectId, ReachConfig, Scope};
use pincer::Access;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// Operations per sample.
const ITERATIONS: u32 = 10_000;
/// Rounds (each round takes one sample of every case).
const ROUNDS: usize = 7;
/// Directory levels between the subtree grant and the file.
const LEVELS: usize = 8;

fn main() -> ExitCode {
    match try_main() {
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
    /// `connect`+`close` of a Unix stream socket to the listening socket at the path.
    Connect(&'a libc::sockaddr_un),
    /// `kill(pid, 0)` to a child made for the measurement (in the same cgroup).
    Signal,
}

/// ns per operation of one timed run after a warm-up, measured in this process.
fn measure(op: Op) -> Result<f64, String> {
    let target = match op {
        Op::Signal => Some(paused_child()?),
        _ => None,
    };
    let run = |n: u32| match op {
        Op::Open(file) => open_close(file, n),
        Op::Connect(addr) => connect_close(addr, n),
        Op::Signal => signal(target.unwrap_or(0), n),
    };
    let result = (|| {
        // Warm-up (dentry cache, map entries).
        run(1000)?;
        let start = Instant::now();
        run(ITERATIONS)?;
        Ok(start.elapsed().as_nanos() as f64 / f64::from(ITERATIONS))
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

fn open_close(file: &CString, n: u32) -> Result<(), String> {
    for _ in 0..n {
        // SAFETY: plain syscalls on a valid C string.
        let fd = unsafe { libc::open(file.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
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
fn in_child(cgroup: Option<&Path>, op: Op, setup: impl FnOnce() -> Result<(), String>) -> Result<f64, String> {
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
                measure(op)
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

fn try_main() -> Result<(), String> {
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

    let sock = base.join("allowed.sock");
    let sock_addr = unix_addr(&sock)?;
    let acceptor_pid = acceptor(&sock)?;
    let open = Op::Open(&cfile);
    let connect = Op::Connect(&sock_addr);
    let mut samples = Samples::default();
    let started = Instant::now();
    let result = (|| {
        for r in 1..=ROUNDS {
            let t = Instant::now();
            round(&mut samples, &base, &top, &file, &sock, open, connect)?;
            let load = samples.load_secs.last().copied().unwrap_or(0.0);
            eprintln!("pincer-bench-open: round {r}/{ROUNDS} in {:.1} s (load and attach {load:.1} s)", t.elapsed().as_secs_f64());
        }
        Ok::<_, String>(())
    })();
    stop(acceptor_pid);
    let _ = std::fs::remove_dir_all(&base);
    result?;
    report(&samples, started.elapsed().as_secs_f64());
    Ok(())
}

/// The cases, in the order of a round.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Case {
    OpenNone,
    OpenLandlock,
    ConnectNone,
    SignalNone,
    OpenUngated,
    ConnectUngated,
    SignalUngated,
    ConnectGated,
    SignalGated,
    OpenExact,
    OpenSubtree,
    /// (b) again with BPF run-time statistics on (they add their own cost).
    OpenUngatedStats,
}

const CASES: usize = 12;

/// Every sample of every case.
#[derive(Default)]
struct Samples {
    ns: [Vec<f64>; CASES],
    /// Seconds each load and attach took.
    load_secs: Vec<f64>,
    /// ns per run of the `file_open` program itself for the ungated process (the
    /// kernel's BPF statistics: time inside the program, without the trampoline).
    file_open_prog_ns: Vec<f64>,
    /// The cgroup levels the hooks look up (the state map's mask).
    levels: u32,
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
}

/// One round: every case once, without the program, then with a fresh load of it.
fn round(s: &mut Samples, base: &Path, top: &Path, file: &Path, sock: &Path, open: Op, connect: Op) -> Result<(), String> {
    s.add(Case::OpenNone, in_child(None, open, || Ok(()))?);
    s.add(Case::OpenLandlock, in_child(None, open, || landlock_restrict(top))?);
    s.add(Case::ConnectNone, in_child(None, connect, || Ok(()))?);
    s.add(Case::SignalNone, in_child(None, Op::Signal, || Ok(()))?);

    let pin_dir = PathBuf::from("/sys/fs/bpf").join(format!("pincer-bench-{}", std::process::id()));
    let config =
        EnforcerConfig { pin_dir: pin_dir.clone(), reach: ReachConfig::with_trusted_socket(sock), ..EnforcerConfig::default() };
    let loading = Instant::now();
    let mut enforcer = Enforcer::load(&config).map_err(|e| format!("load enforcer: {e:?}"))?;
    s.load_secs.push(loading.elapsed().as_secs_f64());
    let cgroup = PathBuf::from("/sys/fs/cgroup").join(format!("pincer-bench-{}", std::process::id()));
    std::fs::create_dir(&cgroup).map_err(|e| format!("create {}: {e}", cgroup.display()))?;
    let result = (|| {
        let session = pincer::kernel::cgroup_id(&cgroup).map_err(|e| e.to_string())?;
        enforcer.register_session(session).map_err(|e| e.to_string())?;
        s.levels = enforcer.session_levels().map_err(|e| e.to_string())?;
        enforcer.add_root(base).map_err(|e| e.to_string())?;
        let file_id = ObjectId::of_path(file).map_err(|e| e.to_string())?;
        let top_id = ObjectId::of_path(top).map_err(|e| e.to_string())?;

        s.add(Case::OpenUngated, in_child(None, open, || Ok(()))?);
        s.add(Case::ConnectUngated, in_child(None, connect, || Ok(()))?);
        s.add(Case::SignalUngated, in_child(None, Op::Signal, || Ok(()))?);
        s.add(Case::ConnectGated, in_child(Some(&cgroup), connect, || Ok(()))?);
        s.add(Case::SignalGated, in_child(Some(&cgroup), Op::Signal, || Ok(()))?);
        enforcer.grant(session, file_id, Scope::Exact, Access::Read).map_err(|e| e.to_string())?;
        s.add(Case::OpenExact, in_child(Some(&cgroup), open, || Ok(()))?);
        enforcer.revoke(session, file_id, Scope::Exact, Access::Read).map_err(|e| e.to_string())?;
        enforcer.grant(session, top_id, Scope::Subtree, Access::Read).map_err(|e| e.to_string())?;
        s.add(Case::OpenSubtree, in_child(Some(&cgroup), open, || Ok(()))?);
        let stats = aya::sys::enable_stats(aya::sys::Stats::RunTime).map_err(|e| format!("enable BPF statistics: {e}"))?;
        let before = file_open_stats()?;
        s.add(Case::OpenUngatedStats, in_child(None, open, || Ok(()))?);
        let after = file_open_stats()?;
        drop(stats);
        let runs = after.1.saturating_sub(before.1).max(1);
        s.file_open_prog_ns.push(after.0.saturating_sub(before.0) as f64 / runs as f64);
        Ok::<_, String>(())
    })();
    let _ = enforcer.unpin();
    let _ = std::fs::remove_dir(&cgroup);
    result
}

/// (run time ns, run count) of the newest loaded `pincer_file_open` program (names are
/// cut to 15 bytes by the kernel).
fn file_open_stats() -> Result<(u64, u64), String> {
    let name = &"pincer_file_open"[..15];
    let mut newest: Option<aya::programs::ProgramInfo> = None;
    for info in aya::programs::loaded_programs() {
        let info = info.map_err(|e| format!("list BPF programs: {e}"))?;
        if info.name_as_str() == Some(name) && newest.as_ref().is_none_or(|n| n.id() < info.id()) {
            newest = Some(info);
        }
    }
    let info = newest.ok_or("the pincer_file_open program is not loaded")?;
    Ok((info.run_time().as_nanos() as u64, info.run_count()))
}

fn report(s: &Samples, secs: f64) {
    let mut load = s.load_secs.clone();
    load.sort_by(f64::total_cmp);
    println!(
        "pincer-bench-open: ns per operation over {ROUNDS} interleaved rounds (each: one sample of every case, {ITERATIONS} \
         operations in a fresh process; the program loaded afresh each round, every containment hook attached, median load {:.1} s; \
         {secs:.0} s in all)",
        load[load.len() / 2]
    );
    let rows = |title: &str, base: Case, rows: &[(&str, Case)]| {
        println!("{title}:                                   min ns   median ns   min/min(base)");
        let (b, _) = s.figures(base);
        for (label, case) in rows {
            let (min, median) = s.figures(*case);
            println!("  {label:<40} {min:>10.0} {median:>11.0}   {:>5.3}x", min / b);
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
            ("(b) again, BPF statistics on", Case::OpenUngatedStats),
        ],
    );
    let mut prog = s.file_open_prog_ns.clone();
    prog.sort_by(f64::total_cmp);
    let (a, b) = (s.figures(Case::OpenNone).0, s.figures(Case::OpenUngated).0);
    println!(
        "  (b) - (a) = {:.0} ns per open (minimums); of it, inside the file_open program for the ungated process \
         (BPF statistics): min {:.0} ns, median {:.0} ns per run; the rest is the BPF LSM trampoline and the hook call",
        b - a,
        prog[0],
        prog[prog.len() / 2]
    );
    rows(
        "connect+close to an allowed Unix socket",
        Case::ConnectNone,
        &[("no program loaded", Case::ConnectNone), ("loaded, process not gated", Case::ConnectUngated), ("gated, socket allowed", Case::ConnectGated)],
    );
    rows(
        "signal (kill(pid, 0)) to a process of the same session",
        Case::SignalNone,
        &[("no program loaded", Case::SignalNone), ("loaded, process not gated", Case::SignalUngated), ("gated, target in the session", Case::SignalGated)],
    );
    let min = |c: Case| s.figures(c).0;
    let (a, b, c, d, e) = (min(Case::OpenNone), min(Case::OpenUngated), min(Case::OpenExact), min(Case::OpenSubtree), min(Case::OpenLandlock));
    let met = |ok: bool| if ok { "met" } else { "not met" };
    println!(
        "issue 9 targets (minimums): ungated (b) <= 1.02x [{}], exact (c) <= 1.1x [{}], subtree (d) <= 1.2x [{}], all below Landlock (e) [{}]",
        met(b <= 1.02 * a),
        met(c <= 1.1 * a),
        met(d <= 1.2 * a),
        met(b <= e && c <= e && d <= e)
    );
    println!("session cgroup levels the hooks look up: {:#x} (the session cgroup's level only, unless every level: 0xffffffff)", s.levels);
    println!("note: under QEMU TCG (software emulation) these ratios are indicative only; measure on real hardware with BPF LSM for figures.");
}
