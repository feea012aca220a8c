//! Running an evaluation: every persona against every chosen defense, `runs` times.

use crate::eval::baselines::{ConsecaJudgePlus, ConsecaPlus, DynamicJudge, StaticJudge};
use crate::eval::corpus::{Corpus, Persona};
use crate::eval::defense::{Defense, DefenseName, Nanoclaw};
use crate::eval::judge::{JudgeError, JudgeKnowledge};
use crate::eval::metrics::Counts;
use crate::daemon::audit::AuditLog;
use crate::eval::replay::{replay_persona, AuditSink};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Errors of an evaluation run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The persona's history or policies could not be turned into a defense's knowledge.
    #[error("persona {persona}: {source}")]
    Knowledge {
        /// The persona.
        persona: String,
        /// The cause.
        #[source]
        source: JudgeError,
    },
    /// A defense could not be set up for a persona.
    #[error("persona {persona}: cannot set up {defense}: {reason}")]
    Setup {
        /// The persona.
        persona: String,
        /// The defense.
        defense: DefenseName,
        /// Why.
        reason: String,
    },
    /// `--runs` must be at least 1.
    #[error("the number of runs must be at least 1")]
    NoRuns,
}

pub use crate::decider::Backend;

/// One persona under one defense: the counts of each run.
#[derive(Debug, Clone)]
pub struct Row {
    /// The persona id.
    pub persona: String,
    /// The defense.
    pub defense: DefenseName,
    /// Each run's counts.
    pub runs: Vec<Counts>,
}

/// The outcome of an evaluation.
#[derive(Debug, Clone)]
pub struct Evaluation {
    /// The corpus folder as given.
    pub corpus: String,
    /// The backend.
    pub backend: Backend,
    /// Runs per persona and defense.
    pub runs: usize,
    /// One row per persona and defense, personas outer, defenses in the order asked.
    pub rows: Vec<Row>,
    /// Wall-clock time of the whole evaluation.
    pub elapsed: Duration,
}

/// Builds the defenses of one persona. Implementations choose the decider backend.
pub trait DefenseFactory {
    /// Makes a fresh defense for a persona.
    fn make(&self, name: DefenseName, persona: &Persona, knowledge: &Arc<JudgeKnowledge>) -> Result<Box<dyn Defense>, RunError>;
}

/// The offline defenses: the baselines on the offline judge and Pincer on the offline decider.
#[derive(Debug, Default)]
pub struct OfflineFactory;

impl DefenseFactory for OfflineFactory {
    fn make(&self, name: DefenseName, persona: &Persona, knowledge: &Arc<JudgeKnowledge>) -> Result<Box<dyn Defense>, RunError> {
        Ok(match name {
            DefenseName::Nanoclaw => Box::new(Nanoclaw),
            DefenseName::StaticJudge => Box::new(StaticJudge::default()),
            DefenseName::DynamicJudge => Box::new(DynamicJudge::new(knowledge.clone())),
            DefenseName::ConsecaPlus => Box::new(ConsecaPlus::new(knowledge.clone())),
            DefenseName::ConsecaJudgePlus => Box::new(ConsecaJudgePlus::new(knowledge.clone())),
            DefenseName::Pincer | DefenseName::PincerP2 => crate::eval::pincer::offline(name, persona)?,
        })
    }
}

/// Replays the corpus against each defense `runs` times, on `threads` worker threads that
/// drive the defenses' futures on `handle`'s runtime. `progress` is called after every sample
/// replayed. With `audit`, every decision of Pincer and Pincer-P2 is appended to that log.
#[allow(clippy::too_many_arguments)]
pub fn run(
    handle: &tokio::runtime::Handle,
    corpus: &Corpus,
    label: &str,
    backend: Backend,
    defenses: &[DefenseName],
    runs: usize,
    factory: &(dyn DefenseFactory + Sync),
    progress: &(dyn Fn() + Sync),
    threads: usize,
    audit: Option<&AuditLog>,
) -> Result<Evaluation, RunError> {
    if runs == 0 {
        return Err(RunError::NoRuns);
    }
    let start = Instant::now();
    let mut knowledge = Vec::with_capacity(corpus.personas.len());
    for persona in &corpus.personas {
        knowledge.push(Arc::new(JudgeKnowledge::new(persona).map_err(|source| RunError::Knowledge { persona: persona.id.clone(), source })?));
    }
    // One job per persona, defense and run, in report order.
    let jobs: Vec<(usize, DefenseName, usize)> =
        (0..corpus.personas.len()).flat_map(|p| defenses.iter().flat_map(move |&d| (0..runs).map(move |r| (p, d, r)))).collect();
    let results: Mutex<Vec<Option<Result<Counts, RunError>>>> = Mutex::new((0..jobs.len()).map(|_| None).collect());
    // The twin's jobs are the longest: start them first so the threads finish together.
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&i| !matches!(jobs[i].1, DefenseName::Pincer | DefenseName::PincerP2));
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, jobs.len().max(1)) {
            scope.spawn(|| {
                while let Some(&i) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let (p, d, run) = jobs[i];
                    let persona = &corpus.personas[p];
                    let sink = audit.map(|log| AuditSink { log, run, backend });
                    let r = factory
                        .make(d, persona, &knowledge[p])
                        .map(|mut defense| handle.block_on(replay_persona(defense.as_mut(), persona, sink, progress)).0);
                    results.lock().expect("no worker panics while holding the lock")[i] = Some(r);
                }
            });
        }
    });
    let mut rows: Vec<Row> = Vec::new();
    for ((p, d, _), r) in jobs.into_iter().zip(results.into_inner().expect("workers have finished")) {
        let counts = r.expect("every job ran")?;
        let persona = &corpus.personas[p].id;
        match rows.last_mut() {
            Some(row) if row.persona == *persona && row.defense == d => row.runs.push(counts),
            _ => rows.push(Row { persona: persona.clone(), defense: d, runs: vec![counts] }),
        }
    }
    Ok(Evaluation { corpus: label.to_string(), backend, runs, rows, elapsed: start.elapsed() })
}

/// The number of samples one run replays (for a progress bar).
pub fn total_samples(corpus: &Corpus, defenses: usize, runs: usize) -> u64 {
    corpus.personas.iter().map(|p| p.samples.len() as u64).sum::<u64>() * defenses as u64 * runs as u64
}
