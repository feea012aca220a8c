//! Benchmark: the daemon's decision pipeline under load, with the real BPF LSM (run as
//! root in the VM by `cargo xtask bench daemon`).
//!
//! Each load (`--sessions`, default `1,32`: one session, then 32) runs on a daemon of its
//! own. A real `pincer daemon` (offline decider, `on_miss = "decide"`) imports a corpus
//! persona's trusted history, policies and workspace snapshot, so its twin grants what the
//! persona's past tasks and rules allow. Then N sessions are
//! opened at once, each with its own copy of the persona's workspace, and each gets a
//! worker: this program again (`worker` mode), started inside the session's cgroup as an
//! unprivileged user. After a common start signal every worker runs `--rounds` rounds of
//!
//! - one tool request over the socket protocol, as `pincer request` makes it (a fresh
//!   connection, one `request` line, one `decision` line), for a file its task covers,
//!   followed by an open of that file to check the grant reached the kernel;
//! - one kernel miss: an open of another such file that nothing has granted. Where the
//!   kernel holds misses (Linux 6.12) the open waits for the twin's decision and returns
//!   once the grant is in; elsewhere it is denied with `EACCES` and reported, and the
//!   worker retries (after 1 ms, doubling up to 32 ms) until the daemon's implicit grant
//!   lets the open through, or 5 s pass.
//!
//! Printed as figures (no figure is asserted): decisions per second (the daemon's own
//! request counters over the time all workers took), the tool request's round trip p50/p99,
//! first touch → the open that succeeded p50/p99 (the held open itself, or the retry), how
//! many first touches were held and opened on their first try, the retries needed (0 when
//! every miss is held), the daemon's own time per decision and per hold (the `latency_ms`
//! of its audit entries), and the daemon's peak resident set (`VmHWM` of
//! `/proc/PID/status`). With `--perf`, a `perf record` of the whole guest during each
//! load says where the CPU went. Each retry that still finds no grant is another miss; the daemon
//! skips those whose grant is already in, and drops events when its ring buffer is full
//! (the open stays denied). The counts of opens, misses seen and decisions are printed
//! beside the figures.

use clap::{Args, Parser, Subcommand};
use pincer::daemon::protocol::{call_line, Call, Reply, ReplyLine, SessionInfo, SessionMode};
use pincer::daemon::worker::{self, Namespaces, WorkerSpec};
use pincer::workload::{miss_file, source_text, tool_file, PROMPT, RATIONALE};
use pincer::Access;
use pincer_tests::profile::Profile;
use pincer_tests::worker::{call, chown_tree, copy_dir, Daemon, DaemonSettings};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

/// How long a worker retries a denied open before it counts the miss as never granted.
const RETRY_LIMIT: Duration = Duration::from_secs(5);
/// First and longest pause between retries of a denied open.
const RETRY_FIRST: Duration = Duration::from_millis(1);
const RETRY_MAX: Duration = Duration::from_millis(32);

/// `pincer-bench-daemon`: the benchmark, or (internally) one of its workers.
#[derive(Parser)]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    mode: Option<Mode>,
    #[command(flatten)]
    bench: BenchArgs,
}

#[derive(Subcommand)]
enum Mode {
    /// One session's worker (started by the benchmark inside the session's cgroup).
    Worker(WorkerArgs),
}

/// Settings of the benchmark.
#[derive(Args)]
struct BenchArgs {
    /// The `pincer` binary (daemon and CLI).
    #[arg(long)]
    pincer: Option<PathBuf>,
    /// The corpus persona whose history, policies and workspace the twin learns from.
    #[arg(long, default_value = "/corpus/software-dev")]
    persona: PathBuf,
    /// Loads to run, each on a daemon of its own: this many concurrent sessions, each with
    /// one worker (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = [1, 32])]
    sessions: Vec<usize>,
    /// Rounds per worker (one tool request and one kernel miss each), at least: a load of
    /// fewer sessions runs more rounds, so that each load has `--sessions`' largest count
    /// times this many first touches (enough for a p99).
    #[arg(long, default_value_t = 10)]
    rounds: usize,
    /// Sample the whole guest with `perf record` during each load and print where its CPU
    /// went.
    #[arg(long)]
    perf: bool,
    /// The unprivileged user who owns the sessions and runs the workers.
    #[arg(long, default_value_t = 1000)]
    uid: u32,
    /// The daemon's niceness (`nice` of its configuration), one load each in turn
    /// (comma-separated, e.g. `0,-10` to compare the daemon run as the sessions' equal with
    /// the default).
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true, default_values_t = [pincer::daemon::config::Config::default().nice])]
    nice: Vec<i32>,
    /// Threads each worker keeps busy on the CPU through its rounds (a session that builds
    /// or tests while it touches files); 0: the workers only make their requests.
    #[arg(long, default_value_t = 0)]
    busy: usize,
}

/// Settings of one worker.
#[derive(Args)]
struct WorkerArgs {
    /// The daemon's socket.
    #[arg(long)]
    socket: PathBuf,
    /// The session's workspace (its protected root).
    #[arg(long)]
    root: PathBuf,
    /// Rounds to run.
    #[arg(long)]
    rounds: usize,
    /// Threads kept busy on the CPU while the rounds run.
    #[arg(long, default_value_t = 0)]
    busy: usize,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.mode {
        Some(Mode::Worker(w)) => run_worker(&w),
        None => run_bench(&cli.bench),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pincer-bench-daemon: {e}");
            ExitCode::FAILURE
        }
    }
}

// ---------------------------------------------------------------- the worker

/// One tool request as `pincer request` makes it; returns whether it was granted.
fn tool_request(socket: &Path, path: &Path) -> Result<bool, String> {
    let mut s = UnixStream::connect(socket).map_err(|e| format!("connect {}: {e}", socket.display()))?;
    let path = path.to_str().ok_or("non-UTF-8 path")?.to_string();
    let line = call_line(Call::Request { path, access: Access::Read, reason: Some(RATIONALE.into()), session: None });
    s.write_all(line.as_bytes()).map_err(|e| format!("send: {e}"))?;
    let mut reply = String::new();
    BufReader::new(&s).read_line(&mut reply).map_err(|e| format!("read reply: {e}"))?;
    match serde_json::from_str::<ReplyLine>(reply.trim()).map_err(|e| format!("bad reply {reply:?}: {e}"))?.reply {
        Reply::Decision { granted, .. } => Ok(granted),
        other => Err(format!("unexpected reply {other:?}")),
    }
}

/// `open(O_RDONLY)` then close: 0 or the errno.
fn open_errno(path: &Path) -> i32 {
    match std::fs::File::open(path) {
        Ok(_) => 0,
        Err(e) => e.raw_os_error().unwrap_or(-1),
    }
}

/// Runs the worker's rounds after the start signal (a line on stdin), printing one line
/// per measurement: `T <granted> <opened> <ns>` and `M <first errno> <retried ok> <ns> <opens>`.
fn run_worker(w: &WorkerArgs) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "READY").and_then(|()| out.flush()).map_err(|e| e.to_string())?;
    let mut go = String::new();
    std::io::stdin().read_line(&mut go).map_err(|e| e.to_string())?;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let spinners: Vec<_> = (0..w.busy)
        .map(|_| {
            let done = done.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            })
        })
        .collect();
    let mut lines = Vec::with_capacity(2 * w.rounds);
    for k in 0..w.rounds {
        let file = w.root.join(tool_file(k));
        let start = Instant::now();
        let granted = tool_request(&w.socket, &file)?;
        let ns = start.elapsed().as_nanos();
        let opened = granted && open_errno(&file) == 0;
        lines.push(format!("T {} {} {ns}", u8::from(granted), u8::from(opened)));

        let file = w.root.join(miss_file(k));
        let start = Instant::now();
        let first = open_errno(&file);
        let (mut ok, mut opens, mut pause) = (first == 0, 1u32, RETRY_FIRST);
        while !ok && first == libc::EACCES && start.elapsed() < RETRY_LIMIT {
            std::thread::sleep(pause);
            pause = (pause * 2).min(RETRY_MAX);
            opens += 1;
            ok = open_errno(&file) == 0;
        }
        lines.push(format!("M {first} {} {} {opens}", u8::from(ok), start.elapsed().as_nanos()));
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in spinners {
        let _ = t.join();
    }
    for l in lines {
        writeln!(out, "{l}").map_err(|e| e.to_string())?;
    }
    Ok(())
}

// ---------------------------------------------------------------- the benchmark

/// The value of `field` (in kB) in `/proc/PID/status`.
fn status_kb(pid: u32, field: &str) -> Result<u64, String> {
    let path = format!("/proc/{pid}/status");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("read {path}: {e}"))?;
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .ok_or_else(|| format!("{path} has no {field}"))
}

/// The nearest-rank percentile `p` (0..=100) of sorted values.
fn percentile(sorted: &[u128], p: u32) -> Option<u128> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (sorted.len() * p as usize).div_ceil(100).max(1);
    Some(sorted[rank - 1])
}

fn ms(ns: Option<u128>) -> String {
    ns.map(|n| format!("{:.2} ms", n as f64 / 1e6)).unwrap_or_else(|| "n/a".into())
}

/// What the workers measured.
#[derive(Default)]
struct Measured {
    /// Tool request round trips (ns), granted or not.
    round_trips: Vec<u128>,
    tool_granted: usize,
    tool_opened: usize,
    /// First touch → the open that succeeded (ns): the held open itself, or the retry
    /// after the grant.
    miss_to_open: Vec<u128>,
    /// First touches that succeeded on their first try (the kernel held them).
    held_ok: usize,
    misses: usize,
    miss_not_denied: usize,
    miss_never_granted: usize,
    opens: u64,
}

impl Measured {
    fn add(&mut self, line: &str) -> Result<(), String> {
        let f: Vec<&str> = line.split_whitespace().collect();
        let bad = || format!("unreadable worker line {line:?}");
        let num = |i: usize| f.get(i).and_then(|v| v.parse::<u128>().ok()).ok_or_else(bad);
        match f.first() {
            Some(&"T") => {
                self.round_trips.push(num(3)?);
                self.tool_granted += usize::from(num(1)? == 1);
                self.tool_opened += usize::from(num(2)? == 1);
            }
            Some(&"M") => {
                self.misses += 1;
                if num(1)? == 0 {
                    self.held_ok += 1;
                    self.miss_to_open.push(num(3)?);
                } else if num(1)? != libc::EACCES as u128 {
                    self.miss_not_denied += 1;
                } else if num(2)? == 1 {
                    self.miss_to_open.push(num(3)?);
                } else {
                    self.miss_never_granted += 1;
                }
                self.opens += num(4)? as u64;
            }
            _ => return Err(bad()),
        }
        Ok(())
    }
}

fn run_bench(a: &BenchArgs) -> Result<(), String> {
    let pincer = a.pincer.clone().ok_or("name the pincer binary with --pincer")?;
    let most = a.sessions.iter().copied().max().unwrap_or(0);
    if a.sessions.contains(&0) || most == 0 || a.rounds == 0 {
        return Err("--sessions and --rounds must be at least 1".into());
    }
    for &n in &a.sessions {
        for &nice in &a.nice {
            run_load(a, &pincer, &Load { sessions: n, rounds: (a.rounds * most).div_ceil(n), nice })?;
        }
    }
    Ok(())
}

/// One load: its sessions, the rounds each session's worker runs, and the daemon's niceness.
struct Load {
    sessions: usize,
    rounds: usize,
    nice: i32,
}

/// Runs one load on a daemon of its own and prints its figures.
fn run_load(a: &BenchArgs, pincer: &Path, l: &Load) -> Result<(), String> {
    let workspace = a.persona.join("workspace");
    if !workspace.is_dir() {
        return Err(format!("{} is no persona folder (no workspace/)", a.persona.display()));
    }
    let dir = pincer_tests::fresh_dir("bench-daemon");
    let daemon = Daemon::start_with(pincer, &dir, &DaemonSettings { on_miss: "decide", escalation_timeout_secs: 5 }, &format!("nice = {}\n", l.nice));
    daemon.import(&a.persona, a.uid);
    let pid = daemon.pid().ok_or("the daemon has no pid")?;
    let rss_idle = status_kb(pid, "VmRSS")?;

    // One workspace copy per session, with the files the rounds use.
    let mut roots = Vec::with_capacity(l.sessions);
    for i in 0..l.sessions {
        let ws = dir.join(format!("ws-{i:03}"));
        copy_dir(&workspace, &ws);
        for k in 0..l.rounds {
            for rel in [tool_file(k), miss_file(k)] {
                std::fs::write(ws.join(&rel), source_text(&rel, k)).map_err(|e| format!("write {rel}: {e}"))?;
            }
        }
        chown_tree(&ws, a.uid);
        roots.push(ws);
    }

    let created = Instant::now();
    let mut sessions: Vec<SessionInfo> = Vec::with_capacity(l.sessions);
    for ws in &roots {
        match call(&daemon.socket, Call::CreateSession { owner_uid: a.uid, roots: vec![ws.clone()], prompt: PROMPT.into(), mode: SessionMode::Enforce })? {
            Reply::Session(s) => sessions.push(s),
            other => return Err(format!("create_session: {other:?}")),
        }
    }
    let create_ms = created.elapsed().as_secs_f64() * 1000.0 / l.sessions as f64;

    let result = load(a, l, &daemon.socket, &sessions, &roots);
    // Every session ends whatever happened: grants revoked, cgroups removed.
    let mut totals = pincer::daemon::protocol::Counters::default();
    for s in &sessions {
        match call(&daemon.socket, Call::EndSession { session: s.session.clone() }) {
            Ok(Reply::Summary { session, .. }) => {
                let c = &session.counters;
                totals.requests += c.requests;
                totals.grants += c.grants;
                totals.denials += c.denials;
                totals.escalations += c.escalations;
                totals.misses += c.misses;
            }
            other => eprintln!("pincer-bench-daemon: end_session {}: {other:?}", s.session),
        }
    }
    let hwm = status_kb(pid, "VmHWM")?;
    let audit = audited(&daemon.dir.join("audit.jsonl"));
    let (elapsed, mut m, profile) = result?;
    let profile = profile.map(|p| p.report(40)).transpose()?;
    drop(daemon);
    let _ = std::fs::remove_dir_all(&dir);

    m.round_trips.sort_unstable();
    m.miss_to_open.sort_unstable();
    let secs = elapsed.as_secs_f64();
    println!(
        "pincer-bench-daemon: {} sessions x {} rounds (1 tool request + 1 kernel miss each), offline decider, daemon at nice {}, {} busy thread(s) per worker, persona {}",
        l.sessions,
        l.rounds,
        l.nice,
        a.busy,
        a.persona.display()
    );
    println!("  load phase                               {secs:>10.2} s (all workers, from the common start to the last exit)");
    println!(
        "  decisions                                {:>10} ({} granted, {} denied, {} escalated; {} tool requests, {} implicit)",
        totals.requests,
        totals.grants,
        totals.denials,
        totals.escalations,
        m.round_trips.len(),
        totals.requests.saturating_sub(m.round_trips.len() as u64)
    );
    println!("  decisions/s                              {:>10.1}", totals.requests as f64 / secs);
    println!(
        "  tool request round trip  p50 {:>11}  p99 {:>11}  ({} requests, {} granted, {} opened after the grant)",
        ms(percentile(&m.round_trips, 50)),
        ms(percentile(&m.round_trips, 99)),
        m.round_trips.len(),
        m.tool_granted,
        m.tool_opened
    );
    println!(
        "  first touch -> open ok   p50 {:>11}  p99 {:>11}  ({} first touches: {} held and opened on the first try, {} opened on a retry, {} never granted in {} s, {} failed otherwise)",
        ms(percentile(&m.miss_to_open, 50)),
        ms(percentile(&m.miss_to_open, 99)),
        m.misses,
        m.held_ok,
        m.miss_to_open.len() - m.held_ok,
        m.miss_never_granted,
        RETRY_LIMIT.as_secs(),
        m.miss_not_denied
    );
    println!("  holds audited                            {:>10} ({} timed out at [hold] max_ms before their decision)", audit.holds, audit.timed_out);
    println!(
        "  daemon: decision (audited)  p50 {:>11}  p99 {:>11}  ({} decisions; from reaching the daemon's actor to the ruling)",
        ms(percentile(&audit.decisions, 50)),
        ms(percentile(&audit.decisions, 99)),
        audit.decisions.len()
    );
    println!(
        "  daemon: hold wait (audited) p50 {:>11}  p99 {:>11}  (the held thread's wait as the hold server saw it)",
        ms(percentile(&audit.hold_waits, 50)),
        ms(percentile(&audit.hold_waits, 99))
    );
    println!(
        "  daemon: miss taken up after p50 {:>11}  p99 {:>11}  (of that wait, before the daemon's actor took up the miss; {} holds)",
        ms(percentile(&audit.seen, 50)),
        ms(percentile(&audit.seen, 99)),
        audit.seen.len()
    );
    println!("  retries needed                           {:>10} (opens after the first touch; 0 when every miss is held)", m.opens - m.misses as u64);
    println!(
        "  kernel misses seen by the daemon         {:>10} (from {} opens by the workers; retries back off {} ms doubling to {} ms)",
        totals.misses,
        m.opens,
        RETRY_FIRST.as_millis(),
        RETRY_MAX.as_millis()
    );
    println!("  session creation (mean, sequential)      {create_ms:>10.2} ms");
    println!("  daemon peak RSS (VmHWM)                  {:>10.1} MiB (VmRSS after import, before the sessions: {:.1} MiB)", hwm as f64 / 1024.0, rss_idle as f64 / 1024.0);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "note: under QEMU TCG (software emulation, {cpus} vCPU(s) shared by the daemon and every worker) these figures are indicative only."
    );
    if let Some(p) = profile {
        print!("{p}");
    }
    Ok(())
}

/// What the daemon's audit log says of a load.
struct Audited {
    /// Holds (`"event":"hold"`).
    holds: usize,
    /// Holds the bound ended before their decision.
    timed_out: usize,
    /// Each hold's audited wait (ns), sorted.
    hold_waits: Vec<u128>,
    /// How long each held thread had waited when the daemon took up its miss (ns), sorted.
    seen: Vec<u128>,
    /// Each decision's audited latency (ns, from its request or miss reaching the daemon's
    /// actor to its ruling), sorted.
    decisions: Vec<u128>,
}

/// Reads the daemon's audit log.
fn audited(audit: &Path) -> Audited {
    let text = std::fs::read_to_string(audit).unwrap_or_default();
    let entries: Vec<serde_json::Value> = text.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()).collect();
    let field_ns = |e: &serde_json::Value, f: &str| e[f].as_f64().map(|m| (m * 1e6) as u128);
    let ns = |e: &serde_json::Value| field_ns(e, "latency_ms");
    let holds: Vec<&serde_json::Value> = entries.iter().filter(|e| e["event"] == "hold").collect();
    let timed_out = holds.iter().filter(|e| e["detail"].as_str().is_some_and(|d| d.contains("timed out"))).count();
    let mut hold_waits: Vec<u128> = holds.iter().filter_map(|e| ns(e)).collect();
    let mut decisions: Vec<u128> = entries.iter().filter(|e| e["event"] == "decision" || e["event"] == "miss").filter_map(ns).collect();
    let mut seen: Vec<u128> = holds.iter().filter_map(|e| field_ns(e, "seen_ms")).collect();
    hold_waits.sort_unstable();
    decisions.sort_unstable();
    seen.sort_unstable();
    Audited { holds: holds.len(), timed_out, hold_waits, seen, decisions }
}

/// Starts one worker per session, gives the common start signal and collects their lines;
/// returns the time from the signal until the last worker exited.
fn load(a: &BenchArgs, l: &Load, socket: &Path, sessions: &[SessionInfo], roots: &[PathBuf]) -> Result<(Duration, Measured, Option<Profile>), String> {
    let exe = std::env::current_exe().map_err(|e| format!("own executable: {e}"))?;
    let account = pincer::daemon::users::by_uid(a.uid);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    rt.block_on(async {
        let mut children = Vec::with_capacity(sessions.len());
        for (s, ws) in sessions.iter().zip(roots) {
            let spec = WorkerSpec {
                cgroup: s.cgroup.clone(),
                uid: a.uid,
                gid: account.gid,
                command: vec![
                    exe.to_string_lossy().into_owned(),
                    "worker".into(),
                    "--socket".into(),
                    socket.to_string_lossy().into_owned(),
                    "--root".into(),
                    ws.to_string_lossy().into_owned(),
                    "--rounds".into(),
                    l.rounds.to_string(),
                    "--busy".into(),
                    a.busy.to_string(),
                ],
                env: s.scratch.iter().map(|d| ("TMPDIR".to_string(), d.to_string_lossy().into_owned())).collect(),
                // The session's IPC namespace as `pincer run` makes it; no PID namespace, whose
                // init is the `pincer` binary's own subcommand (this is the bench binary).
                namespaces: Namespaces { pid: false, ..s.namespaces },
                layers: s.layers.clone(),
            };
            let mut cmd = worker::command(&spec).map_err(|e| e.to_string())?;
            cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit()).kill_on_drop(true);
            let mut child = cmd.spawn().map_err(|e| format!("start worker {}: {e}", exe.display()))?;
            let stdin = child.stdin.take().ok_or("worker without stdin")?;
            let mut stdout = tokio::io::BufReader::new(child.stdout.take().ok_or("worker without stdout")?);
            let mut ready = String::new();
            stdout.read_line(&mut ready).await.map_err(|e| format!("worker: {e}"))?;
            if ready.trim() != "READY" {
                return Err(format!("worker of session {} did not start: {ready:?}", s.session));
            }
            children.push((child, stdin, stdout));
        }
        // Every worker is waiting for its start signal now: the profile sees the load only.
        let mut profile = if a.perf { Some(Profile::start("bench-daemon")?) } else { None };
        let start = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for (mut child, mut stdin, mut stdout) in children {
            stdin.write_all(b"go\n").await.map_err(|e| format!("start signal: {e}"))?;
            drop(stdin);
            tasks.spawn(async move {
                let mut lines = Vec::new();
                let mut line = String::new();
                while stdout.read_line(&mut line).await.map_err(|e| e.to_string())? > 0 {
                    lines.push(std::mem::take(&mut line));
                }
                let status = child.wait().await.map_err(|e| e.to_string())?;
                if !status.success() {
                    return Err(format!("a worker failed ({status})"));
                }
                Ok::<_, String>((lines, start.elapsed()))
            });
        }
        let mut m = Measured::default();
        let mut last = Duration::ZERO;
        while let Some(done) = tasks.join_next().await {
            let (lines, at) = done.map_err(|e| e.to_string())??;
            last = last.max(at);
            for l in &lines {
                m.add(l)?;
            }
        }
        // The sessions' ends (grants revoked, the twin's history written) are not the load.
        if let Some(p) = profile.as_mut() {
            p.stop();
        }
        Ok((last, m, profile))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<u128> = (1..=100).collect();
        assert_eq!(percentile(&v, 50), Some(50));
        assert_eq!(percentile(&v, 99), Some(99));
        assert_eq!(percentile(&[7], 99), Some(7));
        assert_eq!(percentile(&[], 50), None);
    }

    #[test]
    fn worker_lines_are_counted_by_kind() {
        let mut m = Measured::default();
        for l in ["T 1 1 2000", "T 0 0 3000", &format!("M {} 1 5000 3", libc::EACCES), &format!("M {} 0 9 400", libc::EACCES), "M 0 1 10 1"] {
            m.add(l).unwrap();
        }
        assert_eq!((m.round_trips.len(), m.tool_granted, m.tool_opened), (2, 1, 1));
        assert_eq!((m.misses, m.miss_to_open.clone(), m.miss_never_granted, m.held_ok, m.opens), (3, vec![5000, 10], 1, 1, 404));
        assert!(m.add("X 1").is_err() && m.add("T 1").is_err());
    }
}
