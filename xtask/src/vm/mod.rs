//! `cargo xtask vm-test` and `cargo xtask bench`: privileged programs run in a QEMU
//! VM (TCG) on Debian kernels with BPF in the LSM list.
//!
//! The programs are built on the host (`cargo test -p pincer-tests --release --no-run`),
//! packed with busybox-static and their shared libraries into an initramfs, and run by its
//! `/init` as real root; the results are read back from the serial console.

pub mod console;
pub mod cpio;
pub mod hostfs;
pub mod initramfs;
pub mod kernels;
pub mod qemu;

use anyhow::{bail, Context, Result};
use initramfs::Program;
use kernels::{Kernel, KernelSpec};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Options shared by every command that boots the VM.
#[derive(clap::Args, Debug, Clone)]
pub struct VmOptions {
    /// Kernel to boot (`6.1` or `6.12`); repeat for several. Default: all for vm-test.
    #[arg(long = "kernel", value_name = "VERSION")]
    pub kernels: Vec<String>,
    /// Seconds after which a VM is killed and counted as failed.
    #[arg(long, default_value_t = 2400)]
    pub timeout: u64,
    /// Write the console only to the log under `target/vm/logs/`; print the failing part.
    #[arg(long)]
    pub quiet: bool,
    /// vm-test only: run just this test program (`enforce`, `contain_files`, ...); repeat
    /// for several. Default: every test program.
    #[arg(long = "only", value_name = "PROGRAM")]
    pub only: Vec<String>,
    /// vm-test only: run just the tests whose names contain this (libtest's filter, given
    /// to every test program); repeat for several. Default: every test.
    #[arg(long = "filter", value_name = "SUBSTRING")]
    pub filter: Vec<String>,
    /// vm-test only: VMs run at once (each on its own host thread). Default: the host's
    /// CPUs.
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Environment variables for every test program in the VMs (set by `cargo xtask bench
    /// agents`, not on the command line).
    #[arg(skip)]
    pub env: Vec<(String, String)>,
}

/// Test programs that run a second time on two vCPUs (`vm-test` on every kernel): the walk
/// cache's sequence-count and lock paths race only when the guest has more than one CPU.
pub const TWO_CPU_PROGRAMS: &[&str] = &["enforce_stale"];

/// Test programs that run only on the newest kernel of a `vm-test` run, unless `--only`
/// names them; each costs minutes of emulated CPU, for kernel paths that other programs
/// cover on every kernel. `e2e_replay` checks the twin's decisions on the corpus against the
/// harness's, through grants and refusals that `enforce`, `e2e_session` and `redteam` check
/// on every kernel. (The three agents run on every kernel: on 6.1 each first touch is
/// denied and retried, a path of its own.)
pub const NEWEST_KERNEL_ONLY: &[&str] = &["e2e_replay"];

/// Test programs that get a VM of their own, one per group and kernel, so the longest runs
/// spread over the VMs that run at once instead of queueing in one VM per kernel. The
/// groups come in the order their VMs start (longest first).
pub const OWN_VM_GROUPS: &[&[&str]] = &[&["agent_codex", "agent_gemini"], &["agent_claude"], &["e2e_replay"]];

/// The workspace root (the parent of `xtask/`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask is inside the workspace").to_owned()
}

/// Cargo's target directory: `$CARGO_TARGET_DIR` or `<workspace>/target`.
fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() {
                dir
            } else {
                std::env::current_dir().unwrap_or_else(|_| workspace_root()).join(dir)
            }
        }
        None => workspace_root().join("target"),
    }
}

/// The kernel cache, shared by every target directory of the checkout.
fn kernel_cache() -> PathBuf {
    workspace_root().join("target").join("vm").join("kernels")
}

/// Per-run files (initramfs, logs) under the target directory.
fn run_dir() -> Result<PathBuf> {
    let dir = target_dir().join("vm");
    std::fs::create_dir_all(dir.join("logs")).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

/// One executable from cargo's JSON messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// The target's name (`vm_smoke`, `pincer-bench-open`).
    pub name: String,
    /// The target's first kind (`test`, `lib`, `bin`).
    pub kind: String,
    /// Whether it is a test harness build.
    pub test: bool,
    /// The executable's path.
    pub executable: PathBuf,
}

/// Parses `--message-format=json` output into the executables it produced.
pub fn parse_artifacts(json: &str) -> Vec<Artifact> {
    let mut out: Vec<Artifact> = Vec::new();
    for line in json.lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        if msg["reason"] != "compiler-artifact" {
            continue;
        }
        let Some(exe) = msg["executable"].as_str() else { continue };
        let artifact = Artifact {
            name: msg["target"]["name"].as_str().unwrap_or_default().to_owned(),
            kind: msg["target"]["kind"][0].as_str().unwrap_or_default().to_owned(),
            test: msg["profile"]["test"].as_bool().unwrap_or(false),
            executable: PathBuf::from(exe),
        };
        if !out.iter().any(|a| a.executable == artifact.executable) {
            out.push(artifact);
        }
    }
    out
}

/// Runs a cargo build with JSON messages (diagnostics rendered on stderr).
fn cargo_json(args: &[&str]) -> Result<Vec<Artifact>> {
    let out = Command::new(cargo())
        .args(args)
        .arg("--message-format=json-render-diagnostics")
        .current_dir(workspace_root())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running cargo {}", args.join(" ")))?;
    if !out.status.success() {
        bail!("cargo {} failed", args.join(" "));
    }
    Ok(parse_artifacts(&String::from_utf8_lossy(&out.stdout)))
}

/// The VM name of a test executable: integration tests by name, others by kind and name.
fn program_name(a: &Artifact) -> String {
    if a.kind == "test" {
        a.name.clone()
    } else {
        format!("{}-{}", a.kind, a.name)
    }
}

/// Builds every test executable of `pincer-tests`; also returns the crate's binaries
/// (helpers the tests start through `CARGO_BIN_EXE_<name>`).
pub fn build_tests() -> Result<(Vec<Program>, Vec<PathBuf>)> {
    let artifacts = cargo_json(&["test", "-p", "pincer-tests", "--release", "--no-run"])?;
    let helpers: Vec<PathBuf> = artifacts
        .iter()
        .filter(|a| !a.test && a.kind == "bin")
        .map(|a| a.executable.clone())
        .collect();
    let programs: Vec<Program> = artifacts
        .iter()
        .filter(|a| a.test)
        .map(|a| Program {
            name: program_name(a),
            host_path: a.executable.clone(),
            args: vec!["--test-threads=1".into()],
        })
        .collect();
    if programs.is_empty() {
        bail!("`cargo test -p pincer-tests --no-run` produced no test executables");
    }
    Ok((programs, helpers))
}

/// Resolves `--kernel` values (default: every kernel) and fetches them.
pub fn fetch_kernels(labels: &[String], default: &[KernelSpec]) -> Result<Vec<Kernel>> {
    let mut specs: Vec<KernelSpec> = if labels.is_empty() {
        default.to_vec()
    } else {
        labels.iter().map(|l| kernels::spec(l)).collect::<Result<_, _>>()?
    };
    // Oldest first, as in KERNELS, whatever order `--kernel` gave them in.
    specs.sort_by_key(|s| kernels::KERNELS.iter().position(|k| k.label == s.label));
    specs.dedup_by_key(|s| s.label);
    let mut fetcher = kernels::Fetcher::new(kernel_cache())?;
    let mut out = Vec::new();
    for s in &specs {
        let k = fetcher.get(s).with_context(|| format!("fetching the {} kernel", s.label))?;
        eprintln!(
            "xtask: kernel {} ({}): {}",
            k.release,
            k.package,
            kernels::REQUIRED_CONFIG.iter().map(|o| format!("{o}=y")).collect::<Vec<_>>().join(" ")
        );
        out.push(k);
    }
    Ok(out)
}

/// What to show on the terminal while a VM runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Echo {
    /// Every console line.
    All,
    /// Nothing (everything goes to the log).
    Nothing,
    /// Only what the programs print (for benchmarks).
    ProgramOutput,
}

/// Whether `line`, just fed to `t`, reaches the terminal under `echo`.
fn shown(echo: Echo, line: &str, t: &console::Transcript) -> bool {
    match echo {
        Echo::All => true,
        Echo::Nothing => false,
        Echo::ProgramOutput => {
            let inside_program = t.binaries.last().is_some_and(|b| b.exit_code.is_none());
            let is_marker = [console::BEGIN, console::RESULT, console::DONE].iter().any(|m| line.contains(m));
            (inside_program && !is_marker) || line.contains(console::KERNEL)
        }
    }
}

/// Outcome of running programs on one kernel.
struct KernelRun {
    job: VmJob,
    run: qemu::Run,
    log: PathBuf,
    passed: bool,
}

/// One VM of a `vm-test` or `bench` run: a kernel, its vCPUs, and the programs it runs.
#[derive(Debug, Clone)]
struct VmJob {
    kernel: Kernel,
    cpus: u8,
    /// The programs this VM runs (all of the initramfs's, or a `pincer.only=` subset).
    names: Vec<String>,
    /// Whether the init gets `pincer.only=` (a subset of the initramfs's programs).
    subset: bool,
    /// Whether the guest gets the host's root (hostfs.rs): one virtiofsd per VM.
    share_host: bool,
    /// The [`OWN_VM_GROUPS`] group this VM runs, if it runs one (it names the VM).
    group: Option<String>,
    /// Environment variables the init exports to every program (`pincer.env.NAME=VALUE`).
    env: Vec<(String, String)>,
}

impl VmJob {
    /// A VM on `kernel` with `cpus` vCPUs for `names`, sharing the host's root.
    fn new(kernel: &Kernel, cpus: u8, names: Vec<String>, subset: bool) -> VmJob {
        VmJob { kernel: kernel.clone(), cpus, names, subset, share_host: true, group: None, env: Vec::new() }
    }

    /// How this VM is named in output and logs: the kernel, the vCPUs if more than one, and
    /// its group if it runs one.
    fn label(&self) -> String {
        let mut label = self.kernel.release.clone();
        if self.cpus > 1 {
            label.push_str(&format!(" ({} vCPUs)", self.cpus));
        }
        if let Some(g) = &self.group {
            label.push_str(&format!(" [{g}]"));
        }
        label
    }

    /// The label as a file name (logs, virtiofsd's folder): no spaces or brackets.
    fn file_label(&self) -> String {
        let mut name = format!("{}-{}cpu", self.kernel.release, self.cpus);
        if let Some(g) = &self.group {
            name.push('-');
            name.push_str(&g.replace(['+', ' '], "-"));
        }
        name
    }
}

/// The VMs of a `vm-test` run of the programs `names` on `kernels` (oldest first): per
/// kernel, one VM per [`OWN_VM_GROUPS`] group that has programs there and one for the rest;
/// [`NEWEST_KERNEL_ONLY`] programs only on the last kernel unless `only` (the programs were
/// named); then the [`TWO_CPU_PROGRAMS`] again on two vCPUs. Ordered longest first: the
/// kernels' other programs (newest kernel first), the groups, the two-vCPU runs.
fn plan(kernels: &[Kernel], names: &[String], only: bool) -> Vec<VmJob> {
    let mut rest_jobs = Vec::new();
    let mut group_jobs = Vec::new();
    for (i, kernel) in kernels.iter().enumerate().rev() {
        let newest = i + 1 == kernels.len();
        let here: Vec<String> =
            names.iter().filter(|n| newest || only || !NEWEST_KERNEL_ONLY.contains(&n.as_str())).cloned().collect();
        let mut rest = here.clone();
        for group in OWN_VM_GROUPS {
            let part: Vec<String> = here.iter().filter(|n| group.contains(&n.as_str())).cloned().collect();
            if part.is_empty() || part.len() == rest.len() {
                continue;
            }
            rest.retain(|n| !part.contains(n));
            let label = part.join("+");
            let mut job = VmJob::new(kernel, 1, part, true);
            job.group = Some(label);
            group_jobs.push(job);
        }
        if !rest.is_empty() {
            let subset = rest.len() < names.len();
            rest_jobs.push(VmJob::new(kernel, 1, rest, subset));
        }
    }
    let mut jobs = rest_jobs;
    jobs.append(&mut group_jobs);
    let two_cpu: Vec<String> = names.iter().filter(|n| TWO_CPU_PROGRAMS.contains(&n.as_str())).cloned().collect();
    if !two_cpu.is_empty() {
        jobs.extend(kernels.iter().map(|k| VmJob::new(k, 2, two_cpu.clone(), true)));
    }
    jobs
}

fn run_on(job: &VmJob, initrd: &Path, opts: &VmOptions, echo: Echo, clock: qemu::GuestClock, prefix: &str) -> Result<KernelRun> {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let log = run_dir()?.join("logs").join(format!("{}-{stamp}.log", job.file_label()));
    let how = match clock {
        qemu::GuestClock::Host => "TCG".to_string(),
        qemu::GuestClock::Instructions { shift } => format!("TCG, guest clock by instructions: -icount shift={shift},sleep=off"),
    };
    eprintln!("xtask: booting {} ({how}; console log {})", job.label(), log.display());
    let mut machine = qemu::Machine { clock, cpus: job.cpus, ..qemu::Machine::new(&job.kernel.vmlinuz, initrd) };
    // The host's root for real programs (hostfs.rs): one virtiofsd per VM, stopped when it ends.
    let virtiofsd = if job.share_host { Some(hostfs::Virtiofsd::start(&run_dir()?, &job.file_label())?) } else { None };
    machine.hostfs = virtiofsd.as_ref().map(|v| v.socket.as_path());
    if job.subset {
        machine.append.push(format!("{}={}", initramfs::ONLY_PARAM, job.names.join(",")));
    }
    for (name, value) in &job.env {
        machine.append.push(format!("{}{name}={value}", initramfs::ENV_PARAM));
    }
    let run = qemu::boot(&machine, Duration::from_secs(opts.timeout), &log, |line, t| {
        if shown(echo, line, t) {
            println!("{prefix}{}", console::clean(line));
        }
    })?;
    let passed = !run.timed_out && run.transcript.passed(&job.names);
    Ok(KernelRun { job: job.clone(), run, log, passed })
}

/// Runs `jobs` on at most `parallel` VMs at once, started in the order given (put the
/// longest first), and returns their results in the same order. With more than one VM at a time, each console
/// line shown is prefixed with its VM's label.
fn run_all(jobs: &[VmJob], parallel: usize, initrd: &Path, opts: &VmOptions, echo: Echo, clock: qemu::GuestClock) -> Vec<Result<KernelRun>> {
    let parallel = parallel.clamp(1, jobs.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: std::sync::Mutex<Vec<Option<Result<KernelRun>>>> = std::sync::Mutex::new(jobs.iter().map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..parallel {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some(job) = jobs.get(i) else { return };
                let prefix = if parallel > 1 { format!("[{}] ", job.label()) } else { String::new() };
                let r = run_on(job, initrd, opts, echo, clock, &prefix);
                results.lock().expect("results lock")[i] = Some(r);
            });
        }
    });
    results.into_inner().expect("results lock").into_iter().map(|r| r.expect("every job ran")).collect()
}

/// Prints why a run failed, with the failing programs' output when it was not streamed.
fn report_failure(r: &KernelRun, streamed: bool) {
    let names = &r.job.names;
    let t = &r.run.transcript;
    if r.run.timed_out {
        eprintln!("  the VM was killed after {} s (QEMU: {})", r.run.elapsed.as_secs(), r.run.status);
    }
    for p in t.problems(names) {
        eprintln!("  {p}");
    }
    if !streamed {
        for b in t.binaries.iter().filter(|b| !b.ok()) {
            eprintln!("  ---- output of {} (last 200 lines) ----", b.name);
            for line in b.output.iter().rev().take(200).rev() {
                eprintln!("  | {line}");
            }
        }
        if t.binaries.is_empty() || !t.done {
            if let Ok(text) = std::fs::read_to_string(&r.log) {
                eprintln!("  ---- end of the console ----");
                let lines: Vec<&str> = text.lines().collect();
                for line in &lines[lines.len().saturating_sub(40)..] {
                    eprintln!("  | {}", console::clean(line));
                }
            }
        }
    }
    eprintln!("  console log: {}", r.log.display());
}

/// What a failed libtest binary's output says failed: each failing test's `---- NAME
/// stdout ----` header and its panic message (at most `per_test` lines from the panic on).
fn failure_summary(output: &[String], per_test: usize) -> Vec<String> {
    let mut out = Vec::new();
    let (mut in_test, mut kept) = (false, None::<usize>);
    for line in output {
        let line = console::clean(line);
        let l = line.trim();
        if l.starts_with("---- ") && l.ends_with(" stdout ----") {
            out.push(l.to_string());
            (in_test, kept) = (true, None);
        } else if in_test && l == "failures:" {
            break;
        } else if in_test {
            if kept.is_none() && l.contains("panicked at") {
                kept = Some(0);
            }
            if let Some(n) = kept.as_mut().filter(|n| **n < per_test) {
                out.push(l.to_string());
                *n += 1;
            }
        }
    }
    out
}

/// `cargo xtask vm-test`: the test executables of `pincer-tests` on every kernel.
pub fn vm_test(opts: &VmOptions) -> Result<()> {
    crate::deps::ensure(&crate::deps::all())?;
    let (mut programs, helpers) = crate::phase::timed("build VM tests", build_tests)?;
    if !opts.only.is_empty() {
        if let Some(unknown) = opts.only.iter().find(|o| !programs.iter().any(|p| &p.name == *o)) {
            let known: Vec<&str> = programs.iter().map(|p| p.name.as_str()).collect();
            bail!("--only {unknown}: no such test program (known: {})", known.join(", "));
        }
        programs.retain(|p| opts.only.contains(&p.name));
    }
    for p in &mut programs {
        p.args.extend(opts.filter.iter().cloned());
    }
    let names: Vec<String> = programs.iter().map(|p| p.name.clone()).collect();
    let initrd = run_dir()?.join(format!("initramfs-tests-{}.cpio", std::process::id()));
    crate::phase::timed("initramfs", || -> Result<()> {
        initramfs::build(&programs, &helpers, Path::new(initramfs::BUSYBOX), &initrd)?;
        // The shipped corpus, for the tests that replay its samples (`PINCER_CORPUS` in the VM).
        let mut corpus = cpio::Archive::new();
        initramfs::add_tree(&mut corpus, &workspace_root().join("corpus"), initramfs::VM_CORPUS)?;
        initramfs::append(&initrd, &corpus)?;
        Ok(())
    })?;
    let size = std::fs::metadata(&initrd).with_context(|| format!("reading {}", initrd.display()))?.len();
    eprintln!("xtask: initramfs {} ({:.1} MiB): {}", initrd.display(), size as f64 / 1048576.0, names.join(", "));
    let kernels = crate::phase::timed("kernels", || fetch_kernels(&opts.kernels, kernels::KERNELS));
    let kernels = match kernels {
        Ok(k) => k,
        Err(e) => {
            let _ = std::fs::remove_file(&initrd);
            return Err(e);
        }
    };
    // The host's root, read-only, for tests that run real programs (hostfs.rs), with the
    // pinned agents (agents.rs) under /opt/agents.
    let agents = crate::phase::timed("agents", crate::agents::ensure_all);
    if let Err(e) = agents.and_then(|agents| hostfs::archive(&kernels, &agents)).and_then(|a| Ok(initramfs::append(&initrd, &a)?)) {
        let _ = std::fs::remove_file(&initrd);
        return Err(e.context("adding the host-root setup to the initramfs"));
    }
    let echo = if opts.quiet { Echo::Nothing } else { Echo::All };
    let mut jobs = plan(&kernels, &names, !opts.only.is_empty());
    for job in &mut jobs {
        job.env.extend(opts.env.iter().cloned());
    }
    let parallel = opts.jobs.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1));
    eprintln!("xtask: {} VMs, {} at a time", jobs.len(), parallel.clamp(1, jobs.len()));
    let started = std::time::Instant::now();
    let results = run_all(&jobs, parallel, &initrd, opts, echo, qemu::GuestClock::Host);
    crate::phase::record(format!("VMs ({} at a time)", parallel.clamp(1, jobs.len())), started.elapsed());
    let _ = std::fs::remove_file(&initrd);
    let mut failed = 0;
    let mut failures = Vec::new();
    let (mut total_passed, mut total_failed) = (0, 0);
    for (job, r) in jobs.iter().zip(results) {
        // A VM that could not run is a failed one; the others are still reported.
        let r = match r {
            Ok(r) => r,
            Err(e) => {
                failed += 1;
                println!("vm-test {}: FAIL (the VM did not run: {e:#})", job.label());
                continue;
            }
        };
        let t = &r.run.transcript;
        total_passed += t.tests_passed();
        total_failed += t.tests_failed();
        let verdict = if r.passed { "PASS" } else { "FAIL" };
        crate::phase::record(format!("  VM {}", r.job.label()), r.run.elapsed);
        println!(
            "vm-test {}: {verdict} ({} binaries, {} tests{}) in {:.1} s",
            r.job.label(),
            t.binaries.iter().filter(|b| b.ok()).count(),
            t.tests_passed(),
            if t.tests_failed() > 0 { format!(", {} failed", t.tests_failed()) } else { String::new() },
            r.run.elapsed.as_secs_f64(),
        );
        for b in &t.binaries {
            let took = b.took.map(|d| format!("{:.1} s", d.as_secs_f64())).unwrap_or_else(|| "did not finish".into());
            println!("  {:<24} {took:>10}  {} passed{}", b.name, b.passed, if b.failed > 0 { format!(", {} failed", b.failed) } else { String::new() });
        }
        if !r.passed {
            failed += 1;
            report_failure(&r, !opts.quiet);
            for b in t.binaries.iter().filter(|b| !b.ok()) {
                failures.push(format!("{} {}:", r.job.label(), b.name));
                failures.extend(failure_summary(&b.output, 12).into_iter().map(|l| format!("  {l}")));
            }
        }
    }
    println!("vm-test: {total_passed} passed, {total_failed} failed in {:.1} s", started.elapsed().as_secs_f64());
    if failed > 0 {
        // What failed comes last, after the tables, so the tail of a long streamed run says it.
        bail!("vm-test failed on {failed} of {} VMs{}", jobs.len(), failures.iter().map(|l| format!("\n  {l}")).collect::<String>());
    }
    Ok(())
}

/// The real agents' test programs, which `cargo xtask bench agents` runs.
pub const AGENT_PROGRAMS: &[&str] = &["agent_claude", "agent_codex", "agent_gemini"];

/// The variable that asks the agents' tests for an ungated run of each task (the baseline
/// of the wall-time ratio); `vm-test` leaves it unset, so CI does not pay for it.
pub const AGENT_BASELINE_ENV: &str = "PINCER_AGENT_BASELINE";
/// The variable that asks the agents' tests to profile each run of a task with the host's
/// `perf` (the shared host root shows it to the guest).
pub const AGENT_PERF_ENV: &str = "PINCER_AGENT_PERF";

/// `cargo xtask bench agents`: the agents' tests with their ungated baselines, on the newest
/// kernel unless `--kernel` says otherwise; with `perf`, each run of a task is profiled.
pub fn bench_agents(mut opts: VmOptions, perf: bool) -> Result<()> {
    if opts.only.is_empty() {
        opts.only = AGENT_PROGRAMS.iter().map(|p| p.to_string()).collect();
    }
    if opts.kernels.is_empty() {
        opts.kernels = kernels::KERNELS.last().map(|k| vec![k.label.to_string()]).unwrap_or_default();
    }
    opts.env.push((AGENT_BASELINE_ENV.to_string(), "1".to_string()));
    if perf {
        opts.env.push((AGENT_PERF_ENV.to_string(), "1".to_string()));
    }
    vm_test(&opts)
}

/// A benchmark binary of `pincer-tests` that `cargo xtask bench` runs in the VM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bench {
    /// The binary (`tests/src/bin/<name>.rs`).
    pub name: &'static str,
    /// The `cargo xtask bench` subcommand.
    pub command: &'static str,
    /// Whether it starts a real daemon: then the `pincer` binary goes into the VM at its
    /// host path (passed as `--pincer PATH`) and the shipped corpus to [`initramfs::VM_CORPUS`].
    pub daemon: bool,
}

/// `cargo xtask bench open`: open+close cost under the program.
pub const BENCH_OPEN: Bench = Bench { name: "pincer-bench-open", command: "open", daemon: false };

/// The host's `perf`, which `cargo xtask bench daemon --perf` runs in the guest.
pub const PERF: &str = "/usr/bin/perf";

/// `cargo xtask bench daemon`: the daemon's decision pipeline under load.
pub const BENCH_DAEMON: Bench = Bench { name: "pincer-bench-daemon", command: "daemon", daemon: true };

/// How `cargo xtask bench open` clocks the guest.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchClock {
    /// Time the guest by the host's clock (QEMU's default): wall time under TCG, which
    /// the host's other load disturbs. Default: the guest's clock counts instructions.
    #[arg(long)]
    pub wall_clock: bool,
    /// With the instruction clock: each guest instruction advances guest time by 2^N ns
    /// (0: figures in guest ns are guest instructions).
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=10))]
    pub icount_shift: u8,
}

impl BenchClock {
    /// The guest clock these options ask for.
    pub fn guest_clock(&self) -> qemu::GuestClock {
        if self.wall_clock {
            qemu::GuestClock::Host
        } else {
            qemu::GuestClock::Instructions { shift: self.icount_shift }
        }
    }
}

/// The arguments the benchmark binary gets: `--pincer PATH` first for a daemon benchmark,
/// `--icount-shift N` when the guest's clock counts instructions (so the figures say what
/// they measure).
pub fn bench_args(bench: &Bench, pincer: Option<&Path>, clock: qemu::GuestClock, args: &[String]) -> Vec<String> {
    let mut all = Vec::new();
    if let (true, Some(p)) = (bench.daemon, pincer) {
        all.extend(["--pincer".to_string(), p.to_string_lossy().into_owned()]);
    }
    if let qemu::GuestClock::Instructions { shift } = clock {
        all.extend(["--icount-shift".to_string(), shift.to_string()]);
    }
    all.extend(args.iter().cloned());
    all
}

/// `cargo xtask bench <command>`: runs the benchmark binary in the VM (the newest kernel by
/// default) with the guest clock `clock` and relays what it prints.
/// `profile` is the host's `perf`, packed into the initramfs at the same path for a benchmark
/// that profiles itself (`pincer-bench-daemon --perf`). The VM has `cpus` vCPUs.
pub fn bench(opts: &VmOptions, bench: &Bench, clock: qemu::GuestClock, args: &[String], profile: Option<&Path>, cpus: u8) -> Result<()> {
    let source = workspace_root().join("tests/src/bin").join(format!("{}.rs", bench.name));
    if !source.is_file() {
        bail!("the benchmark binary `{}` does not exist ({} is missing); nothing to run", bench.name, source.display());
    }
    crate::deps::ensure(&crate::deps::all())?;
    let artifacts = cargo_json(&["build", "-p", "pincer-tests", "--release", "--bins"])?;
    let find = |name: &str| {
        artifacts
            .iter()
            .find(|a| a.name == name && a.kind == "bin" && !a.test)
            .map(|a| a.executable.clone())
            .with_context(|| format!("cargo built no `{name}` binary"))
    };
    let exe = find(bench.name)?;
    let pincer = if bench.daemon { Some(find("pincer")?) } else { None };
    let programs =
        vec![Program { name: bench.name.into(), host_path: exe, args: bench_args(bench, pincer.as_deref(), clock, args) }];
    let names = vec![bench.name.to_owned()];
    let initrd = run_dir()?.join(format!("initramfs-bench-{}.cpio", std::process::id()));
    let mut extra: Vec<PathBuf> = pincer.iter().cloned().collect();
    if let Some(perf) = profile {
        extra.push(perf.to_owned());
    }
    initramfs::build(&programs, &extra, Path::new(initramfs::BUSYBOX), &initrd)?;
    if bench.daemon {
        // The daemon's twin learns from a shipped persona (`--persona`, default software-dev).
        let mut corpus = cpio::Archive::new();
        initramfs::add_tree(&mut corpus, &workspace_root().join("corpus"), initramfs::VM_CORPUS)?;
        initramfs::append(&initrd, &corpus)?;
    }
    // One kernel by default (the newest): the figures are comparisons within one run.
    let default = &kernels::KERNELS[kernels::KERNELS.len() - 1..];
    let kernels = fetch_kernels(&opts.kernels, default);
    let mut failed = 0;
    if let Ok(kernels) = &kernels {
        for kernel in kernels {
            match clock {
                qemu::GuestClock::Host => {
                    println!("bench {} on {} (QEMU TCG, wall time: figures are indicative only)", bench.command, kernel.release)
                }
                qemu::GuestClock::Instructions { shift } => println!(
                    "bench {} on {} (QEMU TCG, guest clock by instructions executed: -icount shift={shift},sleep=off)",
                    bench.command, kernel.release
                ),
            }
            let job = VmJob { share_host: false, ..VmJob::new(kernel, cpus.max(1), names.clone(), false) };
            let r = run_on(&job, &initrd, opts, Echo::ProgramOutput, clock, "")?;
            if !r.passed {
                failed += 1;
                println!("bench {} {}: FAIL", bench.command, kernel.release);
                report_failure(&r, false);
            }
        }
    }
    let _ = std::fs::remove_file(&initrd);
    kernels?;
    if failed > 0 {
        bail!("the benchmark failed on {failed} kernel(s)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_binarys_summary_names_each_failed_test_and_its_panic() {
        let out: Vec<String> = [
            "test a ... FAILED", "test b ... ok", "", "failures:", "", "---- a stdout ----", "worker said: 1", "worker said: 2",
            "thread 'a' panicked at tests/tests/x.rs:10:5:", "waits: [900.0]", "note: run with `RUST_BACKTRACE=1`", "", "failures:", "    a", "",
            "test result: FAILED. 1 passed; 1 failed",
        ]
        .iter()
        .map(|l| l.to_string())
        .collect();
        assert_eq!(failure_summary(&out, 2), ["---- a stdout ----", "thread 'a' panicked at tests/tests/x.rs:10:5:", "waits: [900.0]"]);
    }

    fn kernel(label: &str) -> Kernel {
        Kernel {
            label: label.into(),
            package: format!("linux-image-{label}"),
            release: format!("{label}-amd64"),
            deb: PathBuf::new(),
            vmlinuz: PathBuf::new(),
            config: PathBuf::new(),
        }
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn every_program_runs_once_per_kernel_and_the_long_ones_on_vms_of_their_own() {
        let all = names(&["agent_claude", "agent_codex", "agent_gemini", "e2e_replay", "e2e_session", "enforce_stale", "redteam"]);
        let kernels = [kernel("6.1"), kernel("6.12")];
        let jobs = plan(&kernels, &all, false);
        let on = |k: &str, cpus: u8| -> Vec<String> {
            let mut v: Vec<String> =
                jobs.iter().filter(|j| j.kernel.label == k && j.cpus == cpus).flat_map(|j| j.names.clone()).collect();
            v.sort();
            v
        };
        // The newest kernel runs everything once; the older one all but the newest-only replay.
        assert_eq!(on("6.12", 1), all);
        assert_eq!(on("6.1", 1), names(&["agent_claude", "agent_codex", "agent_gemini", "e2e_session", "enforce_stale", "redteam"]));
        assert_eq!(on("6.1", 2), names(&["enforce_stale"]));
        assert_eq!(on("6.12", 2), names(&["enforce_stale"]));
        // Longest first: the kernels' other programs, then the groups, then two vCPUs.
        let labels: Vec<String> = jobs.iter().map(|j| j.label()).collect();
        assert_eq!(
            labels,
            [
                "6.12-amd64",
                "6.1-amd64",
                "6.12-amd64 [agent_codex+agent_gemini]",
                "6.12-amd64 [agent_claude]",
                "6.12-amd64 [e2e_replay]",
                "6.1-amd64 [agent_codex+agent_gemini]",
                "6.1-amd64 [agent_claude]",
                "6.1-amd64 (2 vCPUs)",
                "6.12-amd64 (2 vCPUs)",
            ]
        );
        // Every VM's logs and virtiofsd folder have names of their own.
        let mut files: Vec<String> = jobs.iter().map(|j| j.file_label()).collect();
        files.sort();
        files.dedup();
        assert_eq!(files.len(), jobs.len());
        assert!(jobs.iter().all(|j| j.subset));
    }

    #[test]
    fn named_programs_run_on_every_kernel_asked_for() {
        let jobs = plan(&[kernel("6.1"), kernel("6.12")], &names(&["agent_claude"]), true);
        let kernels: Vec<&str> = jobs.iter().map(|j| j.kernel.label.as_str()).collect();
        assert_eq!(kernels, ["6.12", "6.1"]);
        // A group that is all a kernel runs needs no VM of its own.
        assert!(jobs.iter().all(|j| j.group.is_none() && !j.subset));
        let one = plan(&[kernel("6.1")], &names(&["e2e_replay", "redteam"]), false);
        assert_eq!(one.iter().map(|j| j.names.len()).sum::<usize>(), 2, "a lone kernel is the newest");
    }

    #[test]
    fn cargo_json_gives_test_executables_once() {
        let json = r#"{"reason":"compiler-artifact","target":{"kind":["test"],"name":"vm_smoke"},"profile":{"test":true},"executable":"/t/vm_smoke-1"}
{"reason":"compiler-artifact","target":{"kind":["lib"],"name":"pincer_tests"},"profile":{"test":false},"executable":null}
{"reason":"compiler-artifact","target":{"kind":["lib"],"name":"pincer_tests"},"profile":{"test":true},"executable":"/t/pincer_tests-2"}
{"reason":"compiler-artifact","target":{"kind":["bin"],"name":"pincer-bench-open"},"profile":{"test":false},"executable":"/t/pincer-bench-open"}
{"reason":"compiler-artifact","target":{"kind":["test"],"name":"vm_smoke"},"profile":{"test":true},"executable":"/t/vm_smoke-1"}
{"reason":"build-finished","success":true}
not json"#;
        let a = parse_artifacts(json);
        assert_eq!(a.len(), 3);
        assert_eq!(program_name(&a[0]), "vm_smoke");
        assert_eq!(program_name(&a[1]), "lib-pincer_tests");
        assert!(a[1].test && !a[2].test);
        assert_eq!(a[2].executable, Path::new("/t/pincer-bench-open"));
    }

    #[test]
    fn only_a_daemon_benchmark_gets_the_pincer_binary() {
        let extra = vec!["--rounds".to_string(), "3".into()];
        let p = Path::new("/t/release/pincer");
        let host = qemu::GuestClock::Host;
        assert_eq!(bench_args(&BENCH_DAEMON, Some(p), host, &extra), ["--pincer", "/t/release/pincer", "--rounds", "3"]);
        assert_eq!(bench_args(&BENCH_OPEN, Some(p), host, &extra), ["--rounds", "3"]);
        assert_eq!(bench_args(&BENCH_OPEN, None, host, &[]), Vec::<String>::new());
    }

    #[test]
    fn an_instruction_clock_is_named_to_the_benchmark() {
        let clock = BenchClock { wall_clock: false, icount_shift: 0 }.guest_clock();
        assert_eq!(clock, qemu::GuestClock::Instructions { shift: 0 });
        assert_eq!(bench_args(&BENCH_OPEN, None, clock, &["--rounds".into(), "9".into()]), ["--icount-shift", "0", "--rounds", "9"]);
        assert_eq!(BenchClock { wall_clock: true, icount_shift: 3 }.guest_clock(), qemu::GuestClock::Host);
    }

    #[test]
    fn benchmark_echo_shows_only_the_program_and_the_kernel_line() {
        let mut t = console::Transcript::new();
        let mut shown_lines = Vec::new();
        for line in [
            "SeaBIOS (version 1.16.2)",
            "PINCER-VM-KERNEL 6.12.117 lsm=bpf",
            "PINCER-VM-BEGIN pincer-bench-open",
            "(a) no program: 1500 ns",
            "PINCER-VM-RESULT pincer-bench-open 0",
            "[    2.2] reboot: Power down",
            "PINCER-VM-DONE",
        ] {
            t.feed(line);
            if shown(Echo::ProgramOutput, line, &t) {
                shown_lines.push(line);
            }
        }
        assert_eq!(shown_lines, ["PINCER-VM-KERNEL 6.12.117 lsm=bpf", "(a) no program: 1500 ns"]);
        assert!(!shown(Echo::Nothing, "x", &t) && shown(Echo::All, "x", &t));
    }
}
