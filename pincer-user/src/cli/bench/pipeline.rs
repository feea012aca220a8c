//! `pincer bench pipeline`: the daemon's CPU cost per decision on the host, without the
//! kernel. The daemon's own actor ([`Core`]) runs over the enforcer's maps in memory
//! ([`MemoryMaps`]) on a runtime of its own, its twin taught as `cargo xtask bench daemon`
//! teaches the real daemon (the persona's history, policies and workspace snapshot), and
//! `--sessions` sessions are opened with that bench's prompt, each over its own copy of the
//! workspace. Every session then runs `--rounds` rounds of one tool request (the `request`
//! call as the socket server hands it to the actor) and one kernel miss (a [`Miss`] as the
//! ring buffer's reader hands it over, waited for by polling the grant maps), all sessions
//! at once, on files under `projects/ledger/src` nothing has granted.
//!
//! Printed per kind (figures only, nothing asserted): decisions/s and the daemon's CPU time
//! per decision, the sum over the daemon runtime's threads of their time on a CPU
//! (`/proc/self/task/*/schedstat`), so the driver's own work is left out. Left out as well:
//! the socket server (framing, JSON, the peer's cgroup lookup) and the kernel's side.

use crate::daemon::audit::AuditLog;
use crate::daemon::config::Config;
use crate::daemon::core::{CallResult, Cmd, Core, CoreDeps};
use crate::daemon::peer::Peer;
use crate::daemon::protocol::SessionMode;
use crate::daemon::{Call, Reply};
use crate::decider::OfflineDecider;
use crate::kernel::{MemoryMaps, Miss};
use crate::sanitize::{Sanitizer, SecretKey};
use crate::workload::{copy_dir, miss_file, source_text, tool_file, PROMPT, RATIONALE};
use crate::Access;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

/// The name of the daemon runtime's threads, whose CPU time is counted.
const DAEMON_THREAD: &str = "pincer-bench-d";
/// The process id the bench's misses name.
const MISS_PID: u32 = 4242;
/// How long a session waits for a miss's grant before it counts the miss as not granted.
const MISS_WAIT: Duration = Duration::from_secs(5);

/// Nanoseconds the daemon runtime's threads have spent on a CPU so far.
fn daemon_cpu_ns() -> u64 {
    let mut total = 0;
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 0 };
    for t in tasks.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if !comm.trim_end().starts_with(DAEMON_THREAD) {
            continue;
        }
        let stat = std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
        total += stat.split_whitespace().next().and_then(|n| n.parse::<u64>().ok()).unwrap_or(0);
    }
    total
}

/// One call to the actor from `peer`.
async fn call(tx: &mpsc::Sender<Cmd>, peer: &Peer, call: Call) -> anyhow::Result<Reply> {
    let (reply, rx) = oneshot::channel();
    tx.send(Cmd::Call { peer: peer.clone(), call, reply }).await.map_err(|_| anyhow::anyhow!("the actor ended"))?;
    match rx.await?.map_err(|e| anyhow::anyhow!("{e}"))? {
        CallResult::Now(r) => Ok(r),
        CallResult::Wait { question, .. } => Ok(Reply::Decision { granted: false, outcome: crate::daemon::protocol::RequestOutcome::Escalate, reason: "asked the user".into(), question: Some(question) }),
        other => anyhow::bail!("unexpected answer {other:?}"),
    }
}

/// A kind of decision the bench makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// Tool requests.
    Tool,
    /// Kernel misses.
    Miss,
}

/// What one kind of decision measured.
#[derive(Default)]
struct Tally {
    decisions: usize,
    granted: usize,
    wall: Duration,
    cpu_ns: u64,
}

impl Tally {
    fn print(&self, what: &str) {
        let n = self.decisions.max(1) as f64;
        println!(
            "{what:<14} {:>6} {:>8} {:>12.0} {:>14.1}",
            self.decisions,
            self.granted,
            self.decisions as f64 / self.wall.as_secs_f64(),
            self.cpu_ns as f64 / 1e3 / n
        );
    }
}

/// Runs `pincer bench pipeline`.
pub fn bench(persona: &Path, sessions: usize, rounds: usize, daemon_threads: usize, kinds: &[Kind]) -> anyhow::Result<()> {
    let workspace = persona.join("workspace");
    anyhow::ensure!(workspace.is_dir(), "{} is no persona folder (no workspace/)", persona.display());
    let dir = tempfile::tempdir()?;
    let mut config = Config {
        state_dir: dir.path().join("state"),
        socket: dir.path().join("pincer.sock"),
        audit_log: dir.path().join("audit.jsonl"),
        cgroup_parent: dir.path().join("cg"),
        ..Config::default()
    };
    // The session "cgroups" are plain folders here: no limits, no overlay layers, no scratch.
    config.limits = crate::daemon::limits::LimitsConfig::unlimited();
    config.containment.open_paths.retain(|o| o.mode != crate::daemon::contain::OpenMode::ReadWrite);
    config.containment.scratch = false;
    config.on_miss = crate::daemon::OnMiss::Decide;
    crate::twin::content::warm_up();

    let mut roots = Vec::with_capacity(sessions);
    for i in 0..sessions {
        let ws = dir.path().join(format!("ws-{i:03}"));
        copy_dir(&workspace, &ws)?;
        for k in 0..rounds {
            for rel in [tool_file(k), miss_file(k)] {
                std::fs::write(ws.join(&rel), source_text(&rel, k))?;
            }
        }
        roots.push(ws.canonicalize()?);
    }

    let daemon_rt = tokio::runtime::Builder::new_multi_thread().worker_threads(daemon_threads).thread_name(DAEMON_THREAD).enable_all().build()?;
    let maps = MemoryMaps::default();
    let deps = CoreDeps {
        config: config.clone(),
        enforcer: maps.enforcer(),
        decider: Arc::new(OfflineDecider::new()),
        sanitizer: Sanitizer::new(SecretKey::from_bytes([7; 32])),
        audit: Arc::new(AuditLog::open(&config.audit_log)?),
        holds: None,
    };
    let core = daemon_rt.block_on(Core::new(deps))?;
    let (tx, rx) = mpsc::channel(256);
    let actor = daemon_rt.spawn(core.run(rx));

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let outside = Peer { pid: std::process::id(), uid, cgroup: PathBuf::from("/sys/fs/cgroup/user.slice") };
    let (tools, misses) = rt.block_on(async {
        let (history, policies) = (std::fs::read_to_string(persona.join("history.jsonl"))?, std::fs::read_to_string(persona.join("policies.jsonl"))?);
        match call(&tx, &outside, Call::Import { history, policies, uid: None, workspace: Some(workspace.canonicalize()?) }).await? {
            Reply::Ok { .. } => {}
            other => anyhow::bail!("import: {other:?}"),
        }
        let created = Instant::now();
        let mut infos = Vec::with_capacity(sessions);
        for ws in &roots {
            match call(&tx, &outside, Call::CreateSession { owner_uid: uid, roots: vec![ws.clone()], prompt: PROMPT.into(), mode: SessionMode::Enforce }).await? {
                Reply::Session(s) => infos.push(s),
                other => anyhow::bail!("create_session: {other:?}"),
            }
        }
        println!(
            "pincer bench pipeline: {sessions} sessions x {rounds} rounds (1 tool request + 1 kernel miss each), offline decider, persona {}, {daemon_threads} daemon thread(s)",
            persona.display()
        );
        println!("session creation: {:.1} ms each", created.elapsed().as_secs_f64() * 1000.0 / sessions as f64);

        // Tool requests: every session at once, one request after another.
        let mut tools = Tally::default();
        let mut misses = Tally::default();
        if kinds.contains(&Kind::Tool) {
            let (c0, t0) = (daemon_cpu_ns(), Instant::now());
            let mut runs = tokio::task::JoinSet::new();
            for (s, ws) in infos.iter().zip(&roots) {
                let (tx, peer, ws) = (tx.clone(), Peer { pid: 4242, uid, cgroup: s.cgroup.clone() }, ws.clone());
                runs.spawn(async move {
                    let mut granted = 0;
                    for k in 0..rounds {
                        let path = ws.join(tool_file(k)).to_string_lossy().into_owned();
                        if let Reply::Decision { granted: true, .. } = call(&tx, &peer, Call::Request { path, access: Access::Read, reason: Some(RATIONALE.into()), session: None }).await? {
                            granted += 1;
                        }
                    }
                    anyhow::Ok(granted)
                });
            }
            while let Some(r) = runs.join_next().await {
                tools.granted += r??;
            }
            (tools.wall, tools.cpu_ns, tools.decisions) = (t0.elapsed(), daemon_cpu_ns() - c0, sessions * rounds);
        }

        // Kernel misses: every session at once, each miss waited for until its grant is in.
        if kinds.contains(&Kind::Miss) {
            let (c0, t0) = (daemon_cpu_ns(), Instant::now());
            let mut runs = tokio::task::JoinSet::new();
            for (s, ws) in infos.iter().zip(&roots) {
                let (tx, probe, s, ws) = (tx.clone(), maps.enforcer(), s.clone(), ws.clone());
                runs.spawn(async move {
                    let mut granted = 0;
                    for k in 0..rounds {
                        let m = Miss::read_under(&ws, &miss_file(k), s.cgroup_id, s.owner_uid, MISS_PID)?;
                        let target = m.target(Access::Read);
                        tx.send(Cmd::Miss(m)).await.map_err(|_| anyhow::anyhow!("the actor ended"))?;
                        let until = Instant::now() + MISS_WAIT;
                        while Instant::now() < until {
                            if probe.holds_for_name(s.cgroup_id, target, Access::Read, None).unwrap_or(false) {
                                granted += 1;
                                break;
                            }
                            tokio::time::sleep(Duration::from_micros(200)).await;
                        }
                    }
                    anyhow::Ok(granted)
                });
            }
            while let Some(r) = runs.join_next().await {
                misses.granted += r??;
            }
            (misses.wall, misses.cpu_ns, misses.decisions) = (t0.elapsed(), daemon_cpu_ns() - c0, sessions * rounds);
        }

        for s in &infos {
            call(&tx, &outside, Call::EndSession { session: s.session.clone() }).await?;
        }
        anyhow::Ok((tools, misses))
    })?;
    drop(tx);
    daemon_rt.block_on(actor)?;
    println!("daemon cpu: the daemon runtime's threads' time on a CPU (schedstat), per decision");
    println!("{:<14} {:>6} {:>8} {:>12} {:>14}", "kind", "n", "granted", "decisions/s", "cpu us/decision");
    if kinds.contains(&Kind::Tool) {
        tools.print("tool request");
    }
    if kinds.contains(&Kind::Miss) {
        misses.print("kernel miss");
    }
    Ok(())
}
