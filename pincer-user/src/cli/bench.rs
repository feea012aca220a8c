//! `pincer bench decide`: latency of a full three-vote decision of the offline decider (or
//! of the model `--decider` names, at the endpoint of `--config`'s `[decider]`) over
//! synthetic histories of several sizes (p50, p99), as wall-clock time and as the thread's
//! CPU time (which leaves out the time the thread waited for a core on a loaded machine).

use clap::{Args, Subcommand};
use crate::decider::OfflineDecider;
use crate::sanitize::{SecretKey, Sanitizer};
use crate::store::{AccessRecord, AuditRow, HistoryRecord, Permission, PolicyRule, Store, StoreSpec, TrustedState, UserPolicy};
use crate::twin::{Prepared, Request, Twin, TwinConfig, Variant};
use crate::Access;
use std::process::ExitCode;

mod fleet;
mod pipeline;
use std::sync::Arc;
use std::time::Instant;

/// Benchmarks.
#[derive(Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    what: What,
}

#[derive(Subcommand)]
enum What {
    /// Latency of a full three-vote offline decision at several history sizes.
    Decide {
        /// History sizes (number of past prompts).
        #[arg(long, value_delimiter = ',', default_value = "60,5000")]
        history: Vec<usize>,
        /// Decisions measured per history size.
        #[arg(long, default_value_t = 2000)]
        iterations: usize,
        /// Also decide as the daemon does over these stores (`sqlite`, `postgres`), the twin
        /// built from the state read back from each and the store checked before every
        /// decision; prints each store's figures and the ratio to SQLite.
        #[arg(long, value_delimiter = ',')]
        store: Vec<BenchStore>,
        /// Configuration whose `[store]` names the PostgreSQL database (for `--store postgres`)
        /// and whose `[decider]` gives the model's endpoint (the environment overrides it).
        #[arg(long)]
        config: Option<std::path::PathBuf>,
        /// The decider backend (default offline; a model's settings come from `--config`'s
        /// `[decider]`, or the environment as for `pincer eval`).
        #[arg(long, value_enum, default_value = "offline")]
        decider: crate::decider::Backend,
        /// Audit rows written to each store's audit for the rows/s figure.
        #[arg(long, default_value_t = 20000)]
        audit_rows: usize,
    },
    /// A fleet under load: `--daemons` daemon processes at once (each with its own
    /// configuration, socket, state and audit spool), each serving `--sessions` sessions
    /// whose workers (a process each) make their requests over its socket, over SQLite (a
    /// file per host) and the configuration's PostgreSQL in the same run: decisions/s,
    /// decide p50/p99 and their ratio to SQLite, audit rows/s. The daemons run over the
    /// enforcer's maps in memory (nothing is enforced: a benchmark only).
    Fleet {
        /// Daemons at once.
        #[arg(long, default_value_t = 8)]
        daemons: usize,
        /// Open sessions per daemon.
        #[arg(long, default_value_t = 32)]
        sessions: usize,
        /// Requests per session.
        #[arg(long, default_value_t = 20)]
        decisions: usize,
        /// History size of the user's trusted state (past tasks).
        #[arg(long, default_value_t = 60)]
        history: usize,
        /// Configuration whose `[store]` names the PostgreSQL database.
        #[arg(long)]
        config: Option<std::path::PathBuf>,
    },
    /// The daemon's CPU time per decision on the host: its actor over the enforcer's maps in
    /// memory, taught from a persona as `cargo xtask bench daemon` teaches the daemon,
    /// `--sessions` sessions each making `--rounds` tool requests and kernel misses at once.
    Pipeline {
        /// The corpus persona (default: `software-dev` of the corpus found as `pincer eval`
        /// finds it).
        #[arg(long)]
        persona: Option<std::path::PathBuf>,
        /// Concurrent sessions.
        #[arg(long, default_value_t = 32)]
        sessions: usize,
        /// Rounds per session (one tool request and one kernel miss each).
        #[arg(long, default_value_t = 20)]
        rounds: usize,
        /// Worker threads of the daemon's runtime.
        #[arg(long, default_value_t = 1)]
        threads: usize,
        /// The kinds of decision to make (both by default; one alone, e.g. to profile it).
        #[arg(long, value_enum, value_delimiter = ',', default_value = "tool,miss")]
        kinds: Vec<pipeline::Kind>,
    },
    /// One daemon of `pincer bench fleet` (over maps in memory: it enforces nothing).
    #[command(hide = true)]
    FleetDaemon {
        /// Its configuration.
        #[arg(long)]
        config: std::path::PathBuf,
    },
    /// One session's worker of `pincer bench fleet`.
    #[command(hide = true)]
    FleetWorker {
        /// The daemon's socket.
        #[arg(long)]
        socket: std::path::PathBuf,
        /// The session's workspace.
        #[arg(long)]
        ws: std::path::PathBuf,
        /// Requests to make.
        #[arg(long)]
        count: usize,
        /// Seed of the requests' choice.
        #[arg(long)]
        seed: u64,
    },
}

/// A store `pincer bench decide --store` measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum BenchStore {
    /// A SQLite file in a temporary folder.
    Sqlite,
    /// The configuration's PostgreSQL database (`[store] backend = "postgres"`).
    Postgres,
}

/// A small deterministic generator (xorshift64*), so runs are comparable.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[(self.next() % xs.len() as u64) as usize]
    }
}

const VERBS: &[&str] = &["fix", "add", "summarize", "refactor", "explain", "update", "review", "delete", "rename", "document", "test", "draft"];
const NOUNS: &[&str] = &[
    "parser", "lexer", "cache", "router", "schema", "config", "report", "invoice", "ledger", "queue", "scheduler", "client", "server", "index",
    "notes", "memo", "letter", "brief", "summary", "budget", "timeline", "export", "import", "logger", "metrics", "session", "token", "search",
];
const DIRS: &[&str] = &["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"];
const SUBS: &[&str] = &["src", "tests", "docs", "notes", "drafts", "data"];

fn synthetic_state(n: usize, rng: &mut Rng) -> TrustedState {
    let mut st = TrustedState::new("bench");
    for i in 0..n {
        let (v, a, b) = (rng.pick(VERBS), rng.pick(NOUNS), rng.pick(NOUNS));
        let dir = format!("{}/{}", rng.pick(DIRS), rng.pick(SUBS));
        let mut accesses = vec![AccessRecord { path: format!("{dir}/"), access: Access::List }];
        for _ in 0..(2 + rng.next() % 4) {
            let f = format!("{dir}/{}_{}.txt", rng.pick(NOUNS), rng.next() % 20);
            accesses.push(AccessRecord { path: f.clone(), access: Access::Read });
            if matches!(v, "fix" | "add" | "refactor" | "update" | "rename" | "draft") {
                accesses.push(AccessRecord { path: f, access: Access::Write });
            }
        }
        let rec = HistoryRecord { day: (i / 10) as u32, session: format!("h{i}"), prompt: format!("{v} the {a} {b} in {dir}"), accesses, approvals: vec![] };
        st.add_history(&rec).expect("synthetic history is valid");
    }
    for (i, d) in DIRS.iter().take(3).enumerate() {
        st.add_policy(&UserPolicy {
            id: format!("p{i}"),
            text: format!("Never touch {d}/data/."),
            rules: vec![PolicyRule { path_glob: format!("{d}/data/**"), access: Access::ALL.to_vec(), permission: Permission::Deny }],
        })
        .expect("synthetic policy is valid");
    }
    st
}

/// The calling thread's CPU time in microseconds (`CLOCK_THREAD_CPUTIME_ID`).
fn thread_cpu_us() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant Linux supports.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return f64::NAN;
    }
    ts.tv_sec as f64 * 1e6 + ts.tv_nsec as f64 / 1e3
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Latency summary of one run: p50, p99, mean (microseconds).
#[derive(Debug, Clone, Copy)]
struct Summary {
    p50: f64,
    p99: f64,
    mean: f64,
}

/// Decisions as the daemon makes them over `store`: the synthetic state written into the
/// store and read back, the twin writing through to it, the store checked before each
/// decision.
async fn decide_over(store: Store, n: usize, iterations: usize) -> anyhow::Result<Summary> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ n as u64);
    let user = format!("bench-{}-{n}-{}", std::process::id(), std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_millis());
    store.import_state(&user, &synthetic_state(n, &mut rng))?;
    let prepared = Prepared::new(store.load_state(&user)?, Sanitizer::new(SecretKey::from_bytes([3; 32])));
    let tree: Vec<String> = DIRS.iter().flat_map(|d| SUBS.iter().map(move |s| format!("{d}/{s}/"))).collect();
    let mut twin = Twin::from_prepared(&prepared, Arc::new(OfflineDecider::new()), TwinConfig { variant: Variant::Pincer, escalate_after: 2 }).with_store(store);
    let mut times = Vec::with_capacity(iterations);
    for i in 0..iterations {
        if i % 20 == 0 {
            let prompt = format!("{} the {} {} in {}/{}", rng.pick(VERBS), rng.pick(NOUNS), rng.pick(NOUNS), rng.pick(DIRS), rng.pick(SUBS));
            twin.start_session(&format!("bench-{i}"), &prompt, &tree).await?;
        }
        let req = Request {
            path: format!("{}/{}/{}_{}.txt", rng.pick(DIRS), rng.pick(SUBS), rng.pick(NOUNS), rng.next() % 20),
            access: [Access::Read, Access::Write, Access::Create, Access::List, Access::Delete][(rng.next() % 5) as usize],
            rationale: Some("Needed to finish the task.".into()),
            content: Some(b"fn main() { println!(\"hello\"); }\n".to_vec()),
            kept_private: false,
        };
        let start = Instant::now();
        twin.store().map(|s| s.ping()).transpose()?;
        let d = twin.decide(&format!("bench-{}", i - i % 20), &req).await;
        times.push(start.elapsed().as_secs_f64() * 1e6);
        std::hint::black_box(d);
    }
    times.sort_by(f64::total_cmp);
    Ok(Summary { p50: percentile(&times, 0.5), p99: percentile(&times, 0.99), mean: times.iter().sum::<f64>() / times.len() as f64 })
}

/// Audit entries appended per second to a host's log: as a single host writes it, or, with
/// `spool` naming the fleet's store, as a fleet's spool (each entry flushed with
/// `fdatasync` before the append returns, shipped by its thread meanwhile).
fn append_rate(spool: Option<&StoreSpec>, rows: usize) -> anyhow::Result<f64> {
    use crate::daemon::audit::{AuditEntry, AuditLog, Event};
    let dir = tempfile::tempdir()?;
    let log = AuditLog::open(&dir.path().join("audit.jsonl"))?;
    if let Some(spec) = spool {
        log.spool_for(spec.clone(), crate::daemon::users::Identities::fleet("bench".into(), Default::default()))?;
    }
    let start = Instant::now();
    for _ in 0..rows {
        log.append(&AuditEntry::new(Event::Decision))?;
    }
    Ok(rows as f64 / start.elapsed().as_secs_f64())
}

/// Rows per second stored into the shared audit in the shipper's batches.
fn ship_rate(spec: &StoreSpec, rows: usize) -> anyhow::Result<f64> {
    let store = spec.open()?;
    let start = Instant::now();
    let run = format!("{}-{}", std::process::id(), std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_nanos());
    for chunk in (0..rows).collect::<Vec<_>>().chunks(crate::daemon::ship::SHIP_BATCH) {
        let batch: Vec<AuditRow> = chunk
            .iter()
            .map(|i| AuditRow {
                id: format!("bench-{run}-{i}"),
                time_ms: 0,
                host: "bench".into(),
                session: Some("bench".into()),
                user: Some("bench".into()),
                event: "decision".into(),
                entry: "{\"event\":\"decision\",\"time_ms\":0}".into(),
            })
            .collect();
        store.insert_audit(&batch)?;
    }
    Ok(rows as f64 / start.elapsed().as_secs_f64())
}

async fn bench_stores(stores: &[BenchStore], config: Option<&std::path::Path>, history: &[usize], iterations: usize, audit_rows: usize) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut specs = Vec::new();
    for &s in stores {
        specs.push(match s {
            BenchStore::Sqlite => StoreSpec::Sqlite(dir.path().join("bench.db")),
            BenchStore::Postgres => {
                let spec = crate::daemon::config::Config::load(config)?.store_spec();
                anyhow::ensure!(spec.is_shared(), "--store postgres needs a configuration whose [store] backend is \"postgres\" (--config FILE)");
                spec
            }
        });
    }
    println!("\ndecisions as the daemon makes them (store checked, twin writing through), {iterations} per size");
    println!("{:>8} {:>9} {:>10} {:>10} {:>10} {:>14}", "history", "store", "p50 us", "p99 us", "mean us", "p99 vs sqlite");
    for &n in history {
        let mut base: Option<Summary> = None;
        for (&which, spec) in stores.iter().zip(&specs) {
            let s = decide_over(spec.open()?, n, iterations).await?;
            let ratio = match (which, base) {
                (BenchStore::Sqlite, _) => {
                    base = Some(s);
                    "1.00x".to_string()
                }
                (_, Some(b)) => format!("{:.2}x", s.p99 / b.p99),
                (_, None) => "-".to_string(),
            };
            println!("{n:>8} {:>9} {:>10.1} {:>10.1} {:>10.1} {:>14}", format!("{which:?}").to_lowercase(), s.p50, s.p99, s.mean, ratio);
        }
    }
    println!("\naudit ({audit_rows} entries)");
    for (&which, spec) in stores.iter().zip(&specs) {
        match which {
            BenchStore::Sqlite => println!("{:>12.0} entries/s  sqlite: appended to the host's log (one host)", append_rate(None, audit_rows)?),
            BenchStore::Postgres => {
                println!("{:>12.0} entries/s  postgres: appended to the spool, each flushed (fdatasync), shipped meanwhile", append_rate(Some(spec), audit_rows)?);
                println!("{:>12.0} rows/s     postgres: stored into the shared audit in batches of {}", ship_rate(spec, audit_rows)?, crate::daemon::ship::SHIP_BATCH);
            }
        }
    }
    Ok(())
}

/// The decider `bench decide` measures: offline, or a model at the configured endpoint.
fn bench_decider(backend: crate::decider::Backend, config: Option<&std::path::Path>) -> anyhow::Result<Arc<dyn crate::decider::Decider>> {
    use crate::decider::{AnthropicChat, Backend, ChatConfig, LlmDecider, OpenAiChat};
    let chat = || -> anyhow::Result<ChatConfig> {
        Ok(match config {
            Some(p) => crate::daemon::config::Config::load(Some(p))?.decider.chat(backend)?,
            None => ChatConfig::resolve(backend, "", "", "", crate::decider::llm::DEFAULT_TIMEOUT)?,
        })
    };
    Ok(match backend {
        Backend::Offline => Arc::new(OfflineDecider::new()),
        Backend::OpenAi => Arc::new(LlmDecider::new(OpenAiChat::new(chat()?)?)),
        Backend::Anthropic => Arc::new(LlmDecider::new(AnthropicChat::new(chat()?)?)),
    })
}

async fn bench_decide(history: &[usize], iterations: usize, decider: Arc<dyn crate::decider::Decider>) -> anyhow::Result<()> {
    println!("{} decider, full three-vote decision (twin.decide), {iterations} decisions per size", decider.name());
    println!("wall: elapsed time; cpu: the thread's CPU time (excludes waiting for a core)");
    println!("{:>8} {:>10} {:>10} {:>10} {:>10} {:>12} {:>12}", "history", "p50 us", "p99 us", "mean us", "max us", "cpu p50 us", "cpu p99 us");
    for &n in history {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ n as u64);
        let prepared = Prepared::new(synthetic_state(n, &mut rng), Sanitizer::new(SecretKey::from_bytes([3; 32])));
        let tree: Vec<String> = DIRS.iter().flat_map(|d| SUBS.iter().map(move |s| format!("{d}/{s}/"))).collect();
        let mut times = Vec::with_capacity(iterations);
        let mut cpu = Vec::with_capacity(iterations);
        // Warm up: the detectors' patterns compile on first use.
        crate::twin::content_findings(b"warm up");
        crate::twin::injection_findings("warm up");
        let mut twin: Option<Twin> = None;
        for i in 0..iterations {
            // A fresh session (untimed) every 20 decisions keeps the session small and the
            // history at its nominal size.
            if i % 20 == 0 {
                let mut t = Twin::from_prepared(&prepared, decider.clone(), TwinConfig { variant: Variant::Pincer, escalate_after: 2 });
                let prompt = format!("{} the {} {} in {}/{}", rng.pick(VERBS), rng.pick(NOUNS), rng.pick(NOUNS), rng.pick(DIRS), rng.pick(SUBS));
                t.start_session("bench", &prompt, &tree).await?;
                twin = Some(t);
            }
            let t = twin.as_mut().expect("set above");
            let access = [Access::Read, Access::Write, Access::Create, Access::List, Access::Delete][(rng.next() % 5) as usize];
            let req = Request {
                path: format!("{}/{}/{}_{}.txt", rng.pick(DIRS), rng.pick(SUBS), rng.pick(NOUNS), rng.next() % 20),
                access,
                rationale: Some("Needed to finish the task.".into()),
                content: Some(b"fn main() { println!(\"hello\"); }\n// notes about the parser\n".to_vec()),
                kept_private: false,
            };
            let start = Instant::now();
            let c0 = thread_cpu_us();
            let d = t.decide("bench", &req).await;
            cpu.push(thread_cpu_us() - c0);
            times.push(start.elapsed().as_secs_f64() * 1e6);
            std::hint::black_box(d);
        }
        times.sort_by(f64::total_cmp);
        cpu.sort_by(f64::total_cmp);
        let mean = times.iter().sum::<f64>() / times.len() as f64;
        println!(
            "{n:>8} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>12.1} {:>12.1}",
            percentile(&times, 0.5),
            percentile(&times, 0.99),
            mean,
            times[times.len() - 1],
            percentile(&cpu, 0.5),
            percentile(&cpu, 0.99)
        );
    }
    Ok(())
}

/// Runs a benchmark.
pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    match args.what {
        What::Decide { history, iterations, store, config, decider, audit_rows } => {
            anyhow::ensure!(iterations > 0, "--iterations must be at least 1");
            anyhow::ensure!(!history.is_empty(), "--history needs at least one size");
            let decider = bench_decider(decider, config.as_deref())?;
            rt.block_on(bench_decide(&history, iterations, decider))?;
            if !store.is_empty() {
                rt.block_on(bench_stores(&store, config.as_deref(), &history, iterations, audit_rows))?;
            }
        }
        What::Fleet { daemons, sessions, decisions, history, config } => {
            anyhow::ensure!(daemons > 0 && sessions > 0 && decisions > 0, "--daemons, --sessions and --decisions must be at least 1");
            fleet::bench(daemons, sessions, decisions, history, config.as_deref())?;
        }
        What::Pipeline { persona, sessions, rounds, threads, kinds } => {
            anyhow::ensure!(sessions > 0 && rounds > 0 && threads > 0, "--sessions, --rounds and --threads must be at least 1");
            let persona = match persona {
                Some(p) => p,
                None => super::eval::default_corpus().map(|c| c.join("software-dev")).ok_or_else(|| anyhow::anyhow!("no corpus/ folder found; pass --persona DIR"))?,
            };
            pipeline::bench(&persona, sessions, rounds, threads, &kinds)?;
        }
        What::FleetDaemon { config } => fleet::daemon(&config)?,
        What::FleetWorker { socket, ws, count, seed } => fleet::worker(&socket, &ws, count, seed)?,
    }
    Ok(ExitCode::SUCCESS)
}
