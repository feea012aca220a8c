//! `pincer bench fleet`: a fleet under load, as separate daemon processes. Each host is a
//! `pincer bench fleet-daemon` process with its own configuration, socket, state folder and
//! audit spool, serving the daemon's own code ([`crate::daemon::run_unenforced`]: the
//! socket server, the actor, the twins, the store, the spool and its shipper, the fleet's
//! listener) over the enforcer's maps in memory, because the kernel of a build machine
//! refuses LSM programs. Each session's worker is a `pincer bench fleet-worker` process
//! that asks for its accesses over the socket; the daemon places it in its session by the
//! cgroup named in its environment (in place of `/proc/PID/cgroup`). The same run measures
//! the hosts over SQLite (a file per host) and over the configuration's PostgreSQL (one
//! database): decisions/s, decide p50/p99 as each worker sees it (the round trip of its
//! request), and audit rows/s.

use super::{percentile, synthetic_state, Rng, DIRS, NOUNS, SUBS, VERBS};
use crate::daemon::client::Client;
use crate::daemon::config::{Config, StoreBackend, StoreConfig};
use crate::daemon::peer::{CgroupLookup, PeerError};
use crate::daemon::protocol::{RequestOutcome, SessionInfo};
use crate::daemon::{Call, Reply};
use crate::store::{AuditQuery, HistoryRecord};
use crate::Access;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The environment variable that names a bench worker's session cgroup.
const CGROUP_VAR: &str = "PINCER_BENCH_CGROUP";

/// Files per folder and noun of the synthetic workspace (`{noun}_{k}.txt`).
const FILES_PER_NOUN: u64 = 3;

/// Places a caller by the cgroup its environment names ([`CGROUP_VAR`]); any other caller
/// is outside every session.
fn environ_lookup(outside: PathBuf) -> CgroupLookup {
    Arc::new(move |pid| {
        use std::os::unix::ffi::OsStrExt;
        let env = std::fs::read(format!("/proc/{pid}/environ")).map_err(|source| PeerError::ReadCgroup { pid, source })?;
        let key = format!("{CGROUP_VAR}=");
        for var in env.split(|b| *b == 0) {
            if let Some(v) = var.strip_prefix(key.as_bytes()) {
                return Ok(PathBuf::from(std::ffi::OsStr::from_bytes(v)));
            }
        }
        Ok(outside.clone())
    })
}

/// `pincer bench fleet-daemon --config FILE`: one host of the bench.
pub fn daemon(config: &Path) -> anyhow::Result<()> {
    let config = Config::load(Some(config))?;
    let outside = config.state_dir.join("outside");
    let maps = crate::kernel::MemoryMaps::default();
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(crate::daemon::run_unenforced(config, maps.enforcer(), environ_lookup(outside)))?;
    Ok(())
}

/// The request a worker makes: a file (or for `list` a folder, for `create` a new file) of
/// the synthetic workspace.
fn pick(rng: &mut Rng) -> (String, Access) {
    let dir = format!("{}/{}", rng.pick(DIRS), rng.pick(SUBS));
    match rng.next() % 5 {
        0 => (dir, Access::List),
        4 => (format!("{dir}/{}_new{}.txt", rng.pick(NOUNS), rng.next() % FILES_PER_NOUN), Access::Create),
        n => {
            let access = [Access::Read, Access::Write, Access::Read][(n - 1) as usize];
            (format!("{dir}/{}_{}.txt", rng.pick(NOUNS), rng.next() % FILES_PER_NOUN), access)
        }
    }
}

/// `pincer bench fleet-worker`: one session's worker. Waits for a line on stdin, makes
/// `count` requests of the workspace at `ws` over `socket`, and prints each round trip
/// (microseconds) on one line, then the outcomes.
pub fn worker(socket: &Path, ws: &Path, count: usize, seed: u64) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    let (times, outcomes) = rt.block_on(async {
        let mut c = Client::connect(socket).await?;
        // The connection is placed in its session by its first call.
        match c.call(Call::Status { session: None }).await? {
            Reply::Session(_) => {}
            other => anyhow::bail!("the worker is not in its session: {other:?}"),
        }
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ seed.wrapping_mul(0x1000_0001));
        let mut times = Vec::with_capacity(count);
        let mut outcomes = [0usize; 4];
        for _ in 0..count {
            let (rel, access) = pick(&mut rng);
            let call = Call::Request { path: ws.join(&rel).to_string_lossy().into(), access, reason: Some("Needed to finish the task.".into()), session: None };
            let start = Instant::now();
            let r = c.call(call).await?;
            times.push(start.elapsed().as_secs_f64() * 1e6);
            let i = match r {
                Reply::Decision { granted: true, .. } => 0,
                Reply::Decision { outcome: RequestOutcome::Escalate | RequestOutcome::Timeout, .. } => 2,
                Reply::Decision { .. } => 1,
                _ => 3,
            };
            outcomes[i] += 1;
        }
        Ok((times, outcomes))
    })?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", times.iter().map(|t| format!("{t:.1}")).collect::<Vec<_>>().join(" "))?;
    writeln!(out, "{}", outcomes.map(|n| n.to_string()).join(" "))?;
    Ok(())
}

/// The synthetic workspace every host's sessions work in: every folder of the synthetic
/// history with its files.
fn workspace(dir: &Path) -> anyhow::Result<PathBuf> {
    for d in DIRS {
        for s in SUBS {
            let sub = dir.join(d).join(s);
            std::fs::create_dir_all(&sub)?;
            for n in NOUNS {
                for k in 0..FILES_PER_NOUN {
                    std::fs::write(sub.join(format!("{n}_{k}.txt")), format!("notes about the {n}\n"))?;
                }
            }
        }
    }
    Ok(dir.canonicalize()?)
}

/// The synthetic user's history and policies, as `pincer import` sends them.
fn import_call(history: usize) -> anyhow::Result<Call> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ history as u64);
    let st = synthetic_state(history, &mut rng);
    let mut h = String::new();
    for t in &st.tasks {
        let accesses = t.accesses.iter().map(|(a, _)| a.clone()).collect();
        h += &serde_json::to_string(&HistoryRecord { day: t.day, session: t.session.clone(), prompt: t.prompt_text(), accesses, approvals: vec![] })?;
        h.push('\n');
    }
    let mut p = String::new();
    for pol in &st.policies {
        p += &serde_json::to_string(pol)?;
        p.push('\n');
    }
    Ok(Call::Import { history: h, policies: p, uid: None, workspace: None })
}

/// One host: its daemon process and configuration.
struct Host {
    config: Config,
    daemon: Child,
}

impl Drop for Host {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.daemon.id() as i32, libc::SIGTERM) };
        let _ = self.daemon.wait();
    }
}

/// Starts host `i` of a run in `dir`, over SQLite or over `pg` (with `run`'s user identity).
fn start_host(dir: &Path, i: usize, pg: Option<&StoreConfig>, run: &str) -> anyhow::Result<Host> {
    let home = dir.join(format!("host-{i}"));
    std::fs::create_dir_all(&home)?;
    let mut config = Config {
        state_dir: home.join("state"),
        socket: home.join("pincer.sock"),
        audit_log: home.join("audit.jsonl"),
        cgroup_parent: home.join("cg"),
        ..Config::default()
    };
    config.limits = crate::daemon::limits::LimitsConfig::unlimited();
    config.containment.scratch = false;
    config.containment.scratch_parent = home.clone();
    config.hold.enabled = false;
    // Denials are not asked about; a vote that asks is answered by the shortest wait.
    config.escalation.after_denials = u32::MAX;
    config.escalation.timeout_secs = 1;
    if let Some(pg) = pg {
        config.store = StoreConfig { backend: StoreBackend::Postgres, host: format!("bench-{run}-{i}"), ..pg.clone() };
        config.store.users = [("root".to_string(), format!("fleet-bench-{run}"))].into_iter().collect();
    }
    let file = home.join("pincer.toml");
    std::fs::write(&file, config.to_toml()?)?;
    let log = std::fs::File::create(home.join("daemon.log"))?;
    let daemon = Command::new(std::env::current_exe()?)
        .args(["bench", "fleet-daemon", "--config"])
        .arg(&file)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()?;
    let host = Host { config, daemon };
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::os::unix::net::UnixStream::connect(&host.config.socket).is_err() {
        anyhow::ensure!(Instant::now() < deadline, "host {i}'s daemon did not listen within 60 s (see {})", home.join("daemon.log").display());
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(host)
}

/// The fleet's figures over one backend.
struct Figures {
    decisions_per_s: f64,
    p50: f64,
    p99: f64,
    /// Grants, denials, escalations, errors.
    outcomes: [usize; 4],
    /// Audit rows per second: shipped into the shared audit (PostgreSQL), or appended to
    /// the hosts' logs (SQLite).
    audit_rows_per_s: f64,
}

fn lines(path: &Path) -> usize {
    std::fs::read(path).map(|b| b.iter().filter(|c| **c == b'\n').count()).unwrap_or(0)
}

/// One run: `daemons` daemon processes over SQLite (`pg` none) or PostgreSQL, `sessions`
/// worker processes each, `decisions` requests per worker, all at once.
fn run(pg: Option<&StoreConfig>, dir: &Path, ws: &Path, daemons: usize, sessions: usize, decisions: usize, history: usize) -> anyhow::Result<Figures> {
    let run = format!("{}-{}", std::process::id(), std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_millis());
    let hosts = (0..daemons).map(|i| start_host(dir, i, pg, &run)).collect::<anyhow::Result<Vec<_>>>()?;
    let pids: Vec<String> = hosts.iter().map(|h| h.daemon.id().to_string()).collect();
    println!("{}: daemon processes {}", if pg.is_some() { "postgres" } else { "sqlite" }, pids.join(" "));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let mut rng = Rng(0x5EED ^ history as u64);
    let mut cgroups: Vec<(usize, SessionInfo)> = Vec::new();
    for (i, h) in hosts.iter().enumerate() {
        // One shared state in PostgreSQL; a copy per host in SQLite.
        if pg.is_none() || i == 0 {
            match rt.block_on(crate::daemon::client::call_once(&h.config.socket, import_call(history)?))? {
                Reply::Ok { .. } => {}
                other => anyhow::bail!("import on host {i}: {other:?}"),
            }
        }
        for _ in 0..sessions {
            let prompt = format!("{} the {} {} in {}/{}", rng.pick(VERBS), rng.pick(NOUNS), rng.pick(NOUNS), rng.pick(DIRS), rng.pick(SUBS));
            let call = Call::CreateSession { owner_uid: 0, roots: vec![ws.to_path_buf()], prompt, mode: Default::default() };
            match rt.block_on(crate::daemon::client::call_once(&h.config.socket, call))? {
                Reply::Session(s) => cgroups.push((i, s)),
                other => anyhow::bail!("create_session on host {i}: {other:?}"),
            }
        }
    }
    let mut workers = Vec::new();
    for (k, (i, s)) in cgroups.iter().enumerate() {
        let child = Command::new(std::env::current_exe()?)
            .args(["bench", "fleet-worker", "--socket"])
            .arg(&hosts[*i].config.socket)
            .arg("--ws")
            .arg(ws)
            .args(["--count", &decisions.to_string(), "--seed", &k.to_string()])
            .env(CGROUP_VAR, &s.cgroup)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        workers.push(child);
    }
    let before: usize = hosts.iter().map(|h| lines(&h.config.audit_log)).sum();
    let start = Instant::now();
    for w in &mut workers {
        w.stdin.take().expect("piped").write_all(b"go\n")?;
    }
    let mut times = Vec::new();
    let mut outcomes = [0usize; 4];
    for w in workers {
        let out = w.wait_with_output()?;
        anyhow::ensure!(out.status.success(), "a worker failed: {}", String::from_utf8_lossy(&out.stdout));
        let text = String::from_utf8(out.stdout)?;
        let mut l = text.lines();
        times.extend(l.next().unwrap_or("").split_whitespace().map(str::parse::<f64>).collect::<Result<Vec<_>, _>>()?);
        for (o, n) in outcomes.iter_mut().zip(l.next().unwrap_or("").split_whitespace()) {
            *o += n.parse::<usize>()?;
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let written: usize = hosts.iter().map(|h| lines(&h.config.audit_log)).sum();
    let audit_rows_per_s = match pg {
        None => (written - before) as f64 / elapsed,
        Some(_) => {
            // Every spooled entry of this run's hosts in the shared audit.
            let store = hosts[0].config.store_spec().open()?;
            let mut seen = vec![0usize; hosts.len()];
            let mut after = vec![0i64; hosts.len()];
            let deadline = Instant::now() + Duration::from_secs(120);
            while seen.iter().sum::<usize>() < written {
                anyhow::ensure!(Instant::now() < deadline, "only {} of {written} audit entries reached the shared audit in 120 s", seen.iter().sum::<usize>());
                let mut new = 0;
                for (i, h) in hosts.iter().enumerate() {
                    let q = AuditQuery { after: after[i], host: Some(h.config.store.host.clone()), limit: 10_000, ..Default::default() };
                    let rows = store.read_audit(None, &q)?;
                    after[i] = rows.last().map_or(after[i], |r| r.0);
                    seen[i] += rows.len();
                    new += rows.len();
                }
                if new == 0 {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            (written - before) as f64 / start.elapsed().as_secs_f64()
        }
    };
    drop(hosts);
    times.sort_by(f64::total_cmp);
    Ok(Figures { decisions_per_s: times.len() as f64 / elapsed, p50: percentile(&times, 0.5), p99: percentile(&times, 0.99), outcomes, audit_rows_per_s })
}

/// `pincer bench fleet`: the same fleet over SQLite and over the configuration's
/// PostgreSQL, one after the other.
pub fn bench(daemons: usize, sessions: usize, decisions: usize, history: usize, config: Option<&Path>) -> anyhow::Result<()> {
    let user = Config::load(config)?;
    anyhow::ensure!(user.store_spec().is_shared(), "pincer bench fleet needs a configuration whose [store] backend is \"postgres\" (--config FILE)");
    let dir = tempfile::tempdir()?;
    let ws = workspace(&dir.path().join("ws"))?;
    println!("fleet: {daemons} daemon processes x {sessions} sessions (a worker process each) x {decisions} requests, history {history}");
    println!("decide = a worker's request over its daemon's socket until the reply (store check, three votes, grant, audit)");
    let lite = run(None, &dir.path().join("sqlite"), &ws, daemons, sessions, decisions, history)?;
    let shared = run(Some(&user.store), &dir.path().join("postgres"), &ws, daemons, sessions, decisions, history)?;
    println!("{:<10} {:>12} {:>10} {:>10} {:>10} {:>14}   {}", "store", "decisions/s", "p50 us", "p99 us", "p99 ratio", "audit rows/s", "grant/deny/ask/error");
    for (name, f, audit) in [("sqlite", &lite, "appended"), ("postgres", &shared, "shipped")] {
        let o = f.outcomes;
        println!(
            "{name:<10} {:>12.0} {:>10.1} {:>10.1} {:>9.2}x {:>14}   {}/{}/{}/{}",
            f.decisions_per_s,
            f.p50,
            f.p99,
            f.p99 / lite.p99,
            format!("{:.0} {audit}", f.audit_rows_per_s),
            o[0],
            o[1],
            o[2],
            o[3]
        );
    }
    Ok(())
}
