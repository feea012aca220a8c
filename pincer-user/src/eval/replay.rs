//! The replay engine: runs a persona's samples against one defense, exactly as the corpus
//! format says, and counts the metrics.

use crate::access::Access;
use crate::eval::corpus::{same_path, AttackType, Persona, SampleKind, Sample, Step};
use crate::eval::defense::{Defense, RequestView, Outcome};
use crate::eval::metrics::Counts;
use crate::eval::workspace::Workspace;

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
pub async fn replay_sample(defense: &mut dyn Defense, persona: &Persona, sample: &Sample) -> SampleResult {
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
    for session in &sample.sessions {
        let tree = ws.tree();
        defense.start_session(&session.prompt, &tree).await;
        let mut outcomes: Vec<StepOutcome> = Vec::with_capacity(session.steps.len());
        for step in &session.steps {
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
                        let verdict = defense.decide(&view).await;
                        let is_monitored = same_path(&r.path, &sample.monitored.path) && r.access == sample.monitored.access;
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

/// Replays every sample of `persona` against `defense` and counts the figures.
pub async fn replay_persona(defense: &mut dyn Defense, persona: &Persona, mut progress: impl FnMut()) -> (Counts, Vec<SampleResult>) {
    let start_tokens = defense.tokens();
    let mut counts = Counts::default();
    let mut results = Vec::with_capacity(persona.samples.len());
    for sample in &persona.samples {
        let r = replay_sample(defense, persona, sample).await;
        counts.add(&r);
        results.push(r);
        progress();
    }
    counts.tokens = defense.tokens().since(&start_tokens);
    (counts, results)
}

