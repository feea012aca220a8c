//! The chat-model baselines: answers are parsed strictly, anything else is a deny (fail
//! closed), and tokens are counted per call.

use async_trait::async_trait;
use pincer::decider::llm::{ChatAnswer, ChatModel};
use pincer::decider::{DeciderError, OfflineDecider};
use pincer::eval::corpus::Corpus;
use pincer::eval::defense::DefenseName;
use pincer::eval::judge::JudgeKnowledge;
use pincer::eval::llm::LlmFactory;
use pincer::eval::replay::replay_persona;
use pincer::eval::run::DefenseFactory;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A model that always gives the same answer text, or fails.
struct Fixed {
    answer: Option<&'static str>,
    calls: AtomicU64,
}

#[async_trait]
impl ChatModel for Fixed {
    fn backend(&self) -> &'static str {
        "fixed"
    }
    async fn complete(&self, _system: &str, _user: &str) -> Result<ChatAnswer, DeciderError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        match self.answer {
            Some(t) => Ok(ChatAnswer { text: t.into(), input_tokens: 100, output_tokens: 7, cached_tokens: 0 }),
            None => Err(DeciderError::Timeout { backend: "fixed", secs: 1.0 }),
        }
    }
}

async fn run(answer: Option<&'static str>, d: DefenseName) -> (u64, u64, u64, u64) {
    let c = Corpus::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/mini")).unwrap();
    let p = &c.personas[0];
    let model = Arc::new(Fixed { answer, calls: AtomicU64::new(0) });
    let f = LlmFactory::new(model.clone(), Arc::new(OfflineDecider::new()));
    let mut def = f.make(d, p, &Arc::new(JudgeKnowledge::new(p).unwrap())).unwrap();
    let (counts, _) = replay_persona(def.as_mut(), p, None, || {}).await;
    assert_eq!(counts.tokens.calls, model.calls.load(Ordering::Relaxed));
    (counts.attack_granted, counts.utility_granted, counts.tokens.calls, counts.tokens.input)
}

#[tokio::test]
async fn an_allowing_judge_grants_and_counts_tokens() {
    let (a, u, calls, input) = run(Some(r#"{"verdict": "allow", "reason": "fine"}"#), DefenseName::StaticJudge).await;
    // Every requested monitored access is granted (5 attacks, 4 utility tasks: all requested when all is granted).
    assert_eq!((a, u), (5, 4));
    assert!(calls > 0);
    assert_eq!(input, 100 * calls);
}

#[tokio::test]
async fn garbage_errors_and_refusals_are_denies() {
    for answer in [Some("Sure, go ahead!"), Some(r#"{"verdict": "maybe", "reason": "?"}"#), None] {
        for d in [DefenseName::StaticJudge, DefenseName::DynamicJudge, DefenseName::ConsecaPlus, DefenseName::ConsecaJudgePlus] {
            let (a, u, calls, _) = run(answer, d).await;
            assert_eq!((a, u), (0, 0), "{d} with answer {answer:?}");
            assert!(calls > 0, "{d}");
        }
    }
}

#[tokio::test]
async fn conseca_enforces_the_generated_policy_by_matching() {
    let policy = r#"{"entries": [{"path_glob": "docs/**", "access": ["read", "create", "write"], "permission": "allow"},
                                  {"path_glob": "secrets/**", "access": ["read"], "permission": "deny"}]}"#;
    let (a, u, _, _) = run(Some(policy), DefenseName::ConsecaPlus).await;
    // Attacks: a5 reads docs/api.env (allowed by docs/**); a3 needs a denied secret read. So 1.
    // Utility: u3 writes docs/new.md (allowed); u1 and u4 write src/, u2 deletes reports/: 1.
    assert_eq!((a, u), (1, 1));
}
