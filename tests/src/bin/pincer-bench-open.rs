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
//! Each figure is the median of several rounds, measured in a fresh child
//! process, and printed with its ratio to (a).

use landlock::{
    path_beneath_rules, Access as _, AccessFs, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, ABI,
};
use pincer::kernel::{Enforcer, EnforcerConfig, ObjectId, Scope};
use pincer::Access;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// Opens per round.
const ITERATIONS: u32 = 20_000;
/// Rounds per setup (the median round is reported).
const ROUNDS: usize = 5;
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

/// ns per open+close of `file`, median over rounds, measured in this process.
fn measure(file: &CString) -> Result<f64, String> {
    let mut rounds = Vec::with_capacity(ROUNDS);
    // Warm-up (dentry cache, map entries).
    open_close(file, 1000)?;
    for _ in 0..ROUNDS {
        let start = Instant::now();
        open_close(file, ITERATIONS)?;
        rounds.push(start.elapsed().as_nanos() as f64 / f64::from(ITERATIONS));
    }
    rounds.sort_by(f64::total_cmp);
    Ok(rounds[ROUNDS / 2])
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
fn in_child(cgroup: Option<&Path>, file: &CString, setup: impl FnOnce() -> Result<(), String>) -> Result<f64, String> {
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
                measure(file)
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

    let a = in_child(None, &cfile, || Ok(()))?;
    let e = in_child(None, &cfile, || landlock_restrict(&top))?;

    let pin_dir = PathBuf::from("/sys/fs/bpf").join(format!("pincer-bench-{}", std::process::id()));
    let config = EnforcerConfig { pin_dir: pin_dir.clone(), ..EnforcerConfig::default() };
    let mut enforcer = Enforcer::load(&config).map_err(|e| format!("load enforcer: {e:?}"))?;
    let cgroup = PathBuf::from("/sys/fs/cgroup").join(format!("pincer-bench-{}", std::process::id()));
    std::fs::create_dir(&cgroup).map_err(|e| format!("create {}: {e}", cgroup.display()))?;
    let result = (|| {
        let session = pincer::kernel::cgroup_id(&cgroup).map_err(|e| e.to_string())?;
        enforcer.register_session(session).map_err(|e| e.to_string())?;
        enforcer.add_root(&base).map_err(|e| e.to_string())?;
        let file_id = ObjectId::of_path(&file).map_err(|e| e.to_string())?;
        let top_id = ObjectId::of_path(&top).map_err(|e| e.to_string())?;

        let b = in_child(None, &cfile, || Ok(()))?;
        enforcer.grant(session, file_id, Scope::Exact, Access::Read).map_err(|e| e.to_string())?;
        let c = in_child(Some(&cgroup), &cfile, || Ok(()))?;
        enforcer.revoke(session, file_id, Scope::Exact, Access::Read).map_err(|e| e.to_string())?;
        enforcer.grant(session, top_id, Scope::Subtree, Access::Read).map_err(|e| e.to_string())?;
        let d = in_child(Some(&cgroup), &cfile, || Ok(()))?;
        Ok::<_, String>((b, c, d))
    })();
    let _ = enforcer.unpin();
    let _ = std::fs::remove_dir(&cgroup);
    let _ = std::fs::remove_dir_all(&base);
    let (b, c, d) = result?;

    println!("pincer-bench-open: ns per open+close, median of {ROUNDS} rounds x {ITERATIONS} opens, one run");
    let rows = [
        ("(a) no program loaded", a),
        ("(b) loaded, process not gated", b),
        ("(c) gated, exact grant", c),
        ("(d) gated, subtree grant 8 levels up", d),
        ("(e) Landlock, rule 8 levels up", e),
    ];
    for (label, ns) in rows {
        println!("{label:<40} {ns:>10.0} ns  {:>5.2}x of (a)", ns / a);
    }
    println!(
        "goal: (c) and (d) no slower than (e) [{}], (c) within 1.3x of (a) [{}]",
        if c <= e && d <= e { "met" } else { "not met" },
        if c <= 1.3 * a { "met" } else { "not met" }
    );
    println!("note: under QEMU TCG (software emulation) these ratios are indicative only; measure on real hardware with BPF LSM for figures.");
    Ok(())
}
