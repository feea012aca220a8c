//! The model-backed twin's cost and its tiers, on the shipped corpus with the token bench's
//! counting model: Pincer stays within its token budget, a model's deny always stands, the
//! tiers never grant what the offline twin denies, and without the model's consent only
//! trusted evidence grants.

use async_trait::async_trait;
use pincer::decider::{Decider, LlmDecider, Mechanism, RuleOrigin, TokenUsage};
use pincer::eval::corpus::{Corpus, Persona};
use pincer::eval::defense::{Defense, DefenseName, Outcome, RequestView};
use pincer::eval::fake::CountingModel;
use pincer::eval::replay::{replay_persona, SampleResult, StepOutcome};
use pincer::twin::VoteRecord;
use std::path::Path;
use std::sync::Arc;

fn shipped() -> Corpus {
    Corpus::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus")).unwrap()
}

/// A defense that keeps every decision's outcome and votes.
struct Watched {
    inner: Box<dyn Defense>,
    seen: Vec<(Outcome, Vec<VoteRecord>)>,
}

#[async_trait]
impl Defense for Watched {
    fn name(&self) -> DefenseName {
        self.inner.name()
    }
    async fn begin_sample(&mut self, day: u64) {
        self.inner.begin_sample(day).await
    }
    async fn start_session(&mut self, prompt: &str, tree: &[String]) {
        self.inner.start_session(prompt, tree).await
    }
    async fn note(&mut self, text: &str) {
        self.inner.note(text).await
    }
    async fn decide(&mut self, r: &RequestView<'_>) -> Outcome {
        let o = self.inner.decide(r).await;
        self.seen.push((o, self.inner.last_votes().map(<[VoteRecord]>::to_vec).unwrap_or_default()));
        o
    }
    async fn end_session(&mut self) {
        self.inner.end_session().await
    }
    fn tokens(&self) -> TokenUsage {
        self.inner.tokens()
    }
}

async fn replay(name: DefenseName, p: &Persona, decider: Arc<dyn Decider>) -> (Vec<SampleResult>, Vec<(Outcome, Vec<VoteRecord>)>, u64, TokenUsage) {
    let inner = pincer::eval::pincer::with_decider(name, p, decider).unwrap();
    let mut w = Watched { inner, seen: vec![] };
    let (counts, results) = replay_persona(&mut w, p, None, || {}).await;
    (results, w.seen, counts.decisions, counts.tokens)
}

fn counting(deny_share: f64) -> Arc<dyn Decider> {
    Arc::new(LlmDecider::new(Arc::new(CountingModel::denying(deny_share))))
}

fn model_denied(votes: &[VoteRecord]) -> bool {
    votes.iter().any(|v| v.reason.starts_with("model: "))
}

#[tokio::test]
async fn pincer_on_the_counting_model_stays_within_its_token_budget() {
    let c = shipped();
    for name in [DefenseName::Pincer, DefenseName::PincerP2] {
        let (mut decisions, mut tokens) = (0, TokenUsage::default());
        for p in &c.personas {
            let (_, _, d, t) = replay(name, p, counting(0.0)).await;
            decisions += d;
            tokens += t;
        }
        let per = |x: u64| x as f64 / decisions as f64;
        println!("{name}: {decisions} decisions, {:.2} calls, {:.0} tokens in per decision, {:.1}% cached", per(tokens.calls), per(tokens.input), 100.0 * tokens.cached as f64 / tokens.input as f64);
        assert!(decisions > 1000, "{name}: the replay decides the corpus's requests");
        assert!(per(tokens.calls) <= 1.0, "{name}: at most one model call per decision");
        assert!(per(tokens.input) <= 2000.0, "{name}: at most 2,000 prompt tokens per decision");
        assert!(tokens.cached as f64 >= 0.75 * tokens.input as f64, "{name}: at least 75% of prompt tokens in a cached prefix");
        assert_eq!(tokens.sections.iter().sum::<u64>().abs_diff(tokens.input) * 100 / tokens.input.max(1), 0, "the sections share out the input tokens");
    }
}

#[tokio::test]
async fn a_model_deny_stands_and_the_tiers_never_grant_what_the_offline_twin_denies() {
    let c = shipped();
    let (mut model_denies, mut model_grants) = (0, 0);
    for p in &c.personas {
        let (offline, _, _, _) = replay(DefenseName::Pincer, p, Arc::new(pincer::decider::OfflineDecider::new())).await;
        let (tiered, seen, _, tokens) = replay(DefenseName::Pincer, p, counting(0.4)).await;
        assert!(tokens.calls > 0, "{}: the model is asked", p.id);
        for (o, votes) in &seen {
            if model_denied(votes) {
                model_denies += 1;
                assert_ne!(*o, Outcome::Grant, "{}: a model's deny became a grant: {votes:?}", p.id);
            } else if *o == Outcome::Grant && votes.iter().any(|v| v.reason.contains("; model: ")) {
                model_grants += 1;
            }
        }
        for (a, b) in offline.iter().zip(&tiered) {
            assert_eq!(a.id, b.id);
            for (sa, sb) in a.steps.iter().zip(&b.steps) {
                for (i, (x, y)) in sa.iter().zip(sb).enumerate() {
                    if let (StepOutcome::Decided(x), StepOutcome::Decided(Outcome::Grant)) = (x, y) {
                        assert_eq!(*x, Outcome::Grant, "{} step {i}: granted on the model, not by the offline twin", a.id);
                    }
                }
            }
        }
    }
    assert!(model_denies > 0 && model_grants > 0, "the bench exercised both ({model_denies} model denies, {model_grants} model-backed grants)");
}

#[tokio::test]
async fn without_the_models_consent_only_trusted_evidence_grants() {
    let c = shipped();
    let mut grants = 0;
    for p in &c.personas {
        let (_, seen, _, _) = replay(DefenseName::Pincer, p, counting(1.0)).await;
        for (o, votes) in seen.iter().filter(|(o, _)| *o == Outcome::Grant) {
            grants += 1;
            let m = votes[0].mechanism;
            assert!(
                matches!(m, Some(Mechanism::Rule { origin: RuleOrigin::Policy | RuleOrigin::Answer }) | Some(Mechanism::GrantedInSession)),
                "{}: {o:?} without the model rests on {m:?}: {votes:?}",
                p.id
            );
        }
    }
    assert!(grants > 0, "explicit allow rules still grant without a model call");
}
