//! The replay engine: runs a persona's samples against one defense, exactly as the corpus
//! format says, and counts the metrics.

use crate::access::Access;
use crate::eval::corpus::{same_path, AttackType, Persona, SampleKind, Sample, Step};
use crate::eval::defense::{Defense, RequestView, Outcome};
use crate::eval::metrics::Counts;
use crate::eval::workspace::Workspace;
use crate::daemon::audit::{AuditEntry, AuditEval, AuditLog, AuditRequest, Event, Source};
use std::time::Instant;

/// Where a replay writes one audit line per decision of a defense that votes: the log (the
/// daemon's format) and which run of the evaluation this replay is.
#[derive(Debug, Clone, Copy)]
pub struct AuditSink<'a> {
    /// The log.
    pub log: &'a AuditLog,
    /// The run (0-based).
    pub run: usize,
    /// The decider backend the defenses vote with.
    pub backend: crate::decider::Backend,
}

impl AuditSink<'_> {
    /// Appends the line of one decided request step; a failed write is logged, never fatal.
    #[allow(clippy::too_many_arguments)]
    fn decision(&self, defense: &dyn Defense, persona: &Persona, sample: &Sample, (session, step): (usize, usize), view: &RequestView<'_>, monitored: bool, outcome: Outcome, start: Instant) {
        let Some(votes) = defense.last_votes() else { return };
        let mut e = AuditEntry::new(Event::Decision);
        e.session = Some(format!("{}/{session}", sample.id));
        e.request = Some(AuditRequest {
            path: view.path.to_string(),
            access: view.access,
            source: Source::Replay,
            hook: None,
            rationale: view.rationale.map(str::to_string),
            pid: None,
            uid: None,
        });
        e.outcome = Some(outcome.into());
        e.votes = votes.to_vec();
        e.decider = Some(self.backend.to_string());
        e.latency_ms = Some(start.elapsed().as_secs_f64() * 1000.0);
        e.eval = Some(AuditEval {
            persona: persona.id.clone(),
            defense: defense.name(),
            run: self.run,
            sample: sample.id.clone(),
            kind: sample.kind,
            attack: sample.attack,
            session,
            step,
            monitored,
        });
        self.log.record(&e);
    }
}

/// What happened to one request step of a replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepOutcome {
    /// Its `needs` were not all granted, so the worker never made it.
    NotRequested,
    /// The defense answered.
    Decided(Outcome),
    /// A note, passed to the defense.
    Note,
}

/// The result of replaying one sample.
#[derive(Debug, Clone)]
pub struct SampleResult {
    /// The sample id.
    pub id: String,
    /// Attack or utility.
    pub kind: SampleKind,
    /// The attack class.
    pub attack: Option<AttackType>,
    /// Whether the monitored access was requested in some session.
    pub requested: bool,
    /// Whether the monitored access was granted in some session.
    pub granted: bool,
    /// Requests answered with an escalation to the user.
    pub escalations: u64,
    /// Each session's step outcomes.
    pub steps: Vec<Vec<StepOutcome>>,
}

/// The content a defense that sees content gets for a request: a file's bytes, or a
/// directory's entry names one per line.
fn content_of(ws: &Workspace, path: &str, access: Access) -> Option<Vec<u8>> {
    match access {
        Access::Create => None,
        Access::List => ws.is_dir(path).then(|| ws.list(path).join("\n").into_bytes()),
        _ => ws.content(path).map(<[u8]>::to_vec),
    }
}

/// Replays one sample against `defense`: a fresh copy of the workspace with the setup applied,
/// sessions in order, `needs` honoured, notes passed on, granted creates and deletes applied.
/// With `audit`, each decision of a defense that votes is written to its log.
pub async fn replay_sample(defense: &mut dyn Defense, persona: &Persona, sample: &Sample, audit: Option<AuditSink<'_>>) -> SampleResult {
    let mut ws = persona.workspace.clone();
    for op in &sample.setup {
        // The loader has checked that every op applies.
        let _ = ws.apply(op);
    }
    defense.begin_sample(sample.day).await;
    let mut requested = false;
    let mut granted = false;
    let mut escalations = 0;
    let mut steps = Vec::with_capacity(sample.sessions.len());
    for (si, session) in sample.sessions.iter().enumerate() {
        let tree = ws.tree();
        defense.start_session(&session.prompt, &tree).await;
        let mut outcomes: Vec<StepOutcome> = Vec::with_capacity(session.steps.len());
        for (ti, step) in session.steps.iter().enumerate() {
            let outcome = match step {
                Step::Note(text) => {
                    defense.note(text).await;
                    StepOutcome::Note
                }
                Step::Request(r) => {
                    let ready = r.needs.iter().all(|&i| matches!(outcomes.get(i), Some(StepOutcome::Decided(Outcome::Grant))));
                    if !ready {
                        StepOutcome::NotRequested
                    } else {
                        let content = content_of(&ws, &r.path, r.access);
                        let view = RequestView { path: &r.path, access: r.access, rationale: r.rationale.as_deref(), content: content.as_deref() };
                        let start = Instant::now();
                        let verdict = defense.decide(&view).await;
                        let is_monitored = same_path(&r.path, &sample.monitored.path) && r.access == sample.monitored.access;
                        if let Some(a) = audit {
                            a.decision(&*defense, persona, sample, (si, ti), &view, is_monitored, verdict, start);
                        }
                        if is_monitored {
                            requested = true;
                        }
                        tracing::debug!(sample = %sample.id, defense = defense.name().as_str(), path = %r.path, access = %r.access, monitored = is_monitored, outcome = ?verdict, "replayed request");
                        match verdict {
                            Outcome::Grant => {
                                if is_monitored {
                                    granted = true;
                                }
                                match r.access {
                                    Access::Create if !ws.exists(&r.path) && ws.parent_exists(&r.path) => ws.create(&r.path),
                                    Access::Delete => ws.remove(&r.path),
                                    _ => {}
                                }
                            }
                            Outcome::Escalate => escalations += 1,
                            Outcome::Deny => {}
                        }
                        StepOutcome::Decided(verdict)
                    }
                }
            };
            outcomes.push(outcome);
        }
        defense.end_session().await;
        steps.push(outcomes);
    }
    SampleResult { id: sample.id.clone(), kind: sample.kind, attack: sample.attack, requested, granted, escalations, steps }
}

/// Replays every sample of `persona` against `defense` and counts the figures, writing each
/// decision to `audit` if given.
pub async fn replay_persona(defense: &mut dyn Defense, persona: &Persona, audit: Option<AuditSink<'_>>, mut progress: impl FnMut()) -> (Counts, Vec<SampleResult>) {
    let start_tokens = defense.tokens();
    let mut counts = Counts::default();
    let mut results = Vec::with_capacity(persona.samples.len());
    for sample in &persona.samples {
        let r = replay_sample(defense, persona, sample, audit).await;
        counts.add(&r);
        results.push(r);
        progress();
    }
    counts.tokens = defense.tokens().since(&start_tokens);
    (counts, results)
}

