//! The baselines on a chat model (`--decider openai|anthropic`): the same views as the
//! offline baselines, asked of the model with the prompts under `prompts/baselines/`.
//! Every error, timeout or unparsable answer is a deny (fail closed).

use crate::decider::llm::{parse_policy, parse_vote, sectioned, AnthropicChat, ChatConfig, ChatModel, FailureSummary, Failures, LlmDecider, OpenAiChat};
use crate::decider::{Decider, DeciderError, Verdict as Vote};
use crate::twin::PrecommittedPolicy;
use crate::eval::corpus::Persona;
use crate::eval::defense::{Defense, DefenseName, Nanoclaw, RequestView, Outcome};
use crate::eval::judge::JudgeKnowledge;
use crate::decider::TokenUsage;
use crate::eval::run::{Backend, DefenseFactory, RunError};
use async_trait::async_trait;
use serde_json::{json, Value};
use std::sync::Arc;

/// Static-Judge's system prompt.
pub const STATIC_JUDGE_PROMPT: &str = include_str!("../../prompts/baselines/static_judge.md");
/// Dynamic-Judge's system prompt.
pub const DYNAMIC_JUDGE_PROMPT: &str = include_str!("../../prompts/baselines/dynamic_judge.md");
/// Conseca+'s policy generation prompt.
pub const CONSECA_POLICY_PROMPT: &str = include_str!("../../prompts/baselines/conseca_policy.md");
/// Conseca-Judge+'s judge prompt.
pub const CONSECA_JUDGE_PROMPT: &str = include_str!("../../prompts/baselines/conseca_judge.md");

/// Content shown to a model is cut to this many characters.
const CONTENT_LIMIT: usize = 4000;

fn content_text(c: Option<&[u8]>) -> Value {
    match c {
        None => Value::Null,
        Some(b) => {
            let s = String::from_utf8_lossy(b);
            let t: String = s.chars().take(CONTENT_LIMIT).collect();
            if t.len() < s.len() {
                json!(format!("{t}\n[... truncated]"))
            } else {
                json!(t)
            }
        }
    }
}

/// The persona's trusted history and policies as a model sees them.
fn history_json(p: &Persona) -> Value {
    let tasks: Vec<Value> = p
        .history
        .iter()
        .map(|h| {
            json!({
                "day": h.day,
                "prompt": h.prompt,
                "accesses": h.accesses.iter().map(|a| format!("{} {}", a.access, a.path)).collect::<Vec<_>>(),
                "approvals": h.approvals.iter().map(|a| format!("{} {}", a.access.iter().map(|x| x.as_str()).collect::<Vec<_>>().join(","), a.path)).collect::<Vec<_>>(),
            })
        })
        .collect();
    let policies: Vec<Value> = p
        .policies
        .iter()
        .map(|pol| {
            json!({"text": pol.text, "rules": pol.rules.iter().map(|r| json!({"path_glob": r.path_glob, "access": r.access, "permission": r.permission})).collect::<Vec<_>>()})
        })
        .collect();
    json!({"past_tasks": tasks, "user_policies": policies})
}

/// Asks the model for a vote; any failure is a deny.
async fn ask(model: &dyn ChatModel, tokens: &mut TokenUsage, what: &'static str, system: &str, user: &Value) -> Outcome {
    let prompt = sectioned(system, user);
    let answer = model.ask(&prompt).await;
    match answer {
        Err(e) => {
            tokens.calls += 1;
            tracing::warn!("{what}: {e} (denied)");
            Outcome::Deny
        }
        Ok(a) => {
            *tokens += prompt.usage(&a);
            match parse_vote(what, &a.text) {
                Ok((Vote::Allow, _)) => Outcome::Grant,
                Ok((Vote::AskUser, _)) => Outcome::Escalate,
                Ok((Vote::Deny, _)) => Outcome::Deny,
                Err(e) => {
                    tracing::warn!("{what}: {e} (denied)");
                    Outcome::Deny
                }
            }
        }
    }
}

/// Which baseline a [`LlmBaseline`] plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Static,
    Dynamic,
    Conseca,
    ConsecaJudge,
}

/// A baseline on a chat model.
struct LlmBaseline {
    role: Role,
    model: Arc<dyn ChatModel>,
    history: Arc<Value>,
    prompt: String,
    memory: Vec<Value>,
    policy: Option<PrecommittedPolicy>,
    policy_json: Value,
    tokens: TokenUsage,
}

impl LlmBaseline {
    async fn make_policy(&mut self, tree: &[String]) {
        let user = json!({"task": self.prompt, "workspace_tree": tree, "history": *self.history});
        let prompt = sectioned(CONSECA_POLICY_PROMPT, &user);
        let policy = match self.model.ask(&prompt).await {
            Err(e) => {
                self.tokens.calls += 1;
                PrecommittedPolicy::failed(e.to_string())
            }
            Ok(a) => {
                self.tokens += prompt.usage(&a);
                match parse_policy(&a.text) {
                    Ok(entries) => PrecommittedPolicy::new(entries),
                    Err(e) => PrecommittedPolicy::failed(e.to_string()),
                }
            }
        };
        self.policy_json = serde_json::to_value(policy.entries()).unwrap_or(Value::Null);
        self.policy = Some(policy);
    }
}

#[async_trait]
impl Defense for LlmBaseline {
    fn name(&self) -> DefenseName {
        match self.role {
            Role::Static => DefenseName::StaticJudge,
            Role::Dynamic => DefenseName::DynamicJudge,
            Role::Conseca => DefenseName::ConsecaPlus,
            Role::ConsecaJudge => DefenseName::ConsecaJudgePlus,
        }
    }
    async fn begin_sample(&mut self, _day: u64) {
        self.memory.clear();
        self.policy = None;
        self.prompt.clear();
    }
    async fn start_session(&mut self, prompt: &str, tree: &[String]) {
        self.prompt = prompt.to_string();
        if matches!(self.role, Role::Conseca | Role::ConsecaJudge) {
            self.make_policy(tree).await;
        }
    }
    async fn note(&mut self, text: &str) {
        if self.role == Role::Dynamic {
            self.memory.push(json!({"note": text}));
        }
    }
    async fn decide(&mut self, r: &RequestView<'_>) -> Outcome {
        match self.role {
            Role::Static => {
                let user = json!({"task": self.prompt, "request": {"path": r.path, "access": r.access, "rationale": r.rationale, "content": content_text(r.content)}});
                ask(self.model.as_ref(), &mut self.tokens, "static-judge", STATIC_JUDGE_PROMPT, &user).await
            }
            Role::Dynamic => {
                let user = json!({
                    "task": self.prompt,
                    "request": {"path": r.path, "access": r.access, "rationale": r.rationale, "content": content_text(r.content)},
                    "history": *self.history,
                    "memory": self.memory,
                });
                let v = ask(self.model.as_ref(), &mut self.tokens, "dynamic-judge", DYNAMIC_JUDGE_PROMPT, &user).await;
                if let Some(rat) = r.rationale {
                    self.memory.push(json!({"request": format!("{} {}", r.access, r.path), "rationale": rat}));
                }
                v
            }
            Role::Conseca => match &self.policy {
                Some(p) => match p.check(r.path, r.access).verdict {
                    Vote::Allow => Outcome::Grant,
                    Vote::AskUser => Outcome::Escalate,
                    Vote::Deny => Outcome::Deny,
                },
                None => Outcome::Deny,
            },
            Role::ConsecaJudge => {
                let user = json!({"task": self.prompt, "policy": self.policy_json, "request": {"path": r.path, "access": r.access, "rationale": r.rationale}});
                ask(self.model.as_ref(), &mut self.tokens, "conseca-judge+", CONSECA_JUDGE_PROMPT, &user).await
            }
        }
    }
    async fn end_session(&mut self) {
        self.policy = None;
    }
    fn tokens(&self) -> TokenUsage {
        self.tokens
    }
}

/// Builds the defenses on a chat model.
pub struct LlmFactory {
    model: Arc<dyn ChatModel>,
    twin: Arc<dyn Decider>,
    failures: Failures,
}

impl LlmFactory {
    /// A factory on the backend's settings from the environment (see [`ChatConfig`]).
    pub fn from_env(backend: Backend) -> Result<Self, DeciderError> {
        let cfg = match backend {
            Backend::Anthropic => ChatConfig::anthropic_from_env()?,
            Backend::OpenAi | Backend::Offline => ChatConfig::openai_from_env()?,
        };
        Self::from_chat(backend, cfg)
    }

    /// A factory on `backend` with the given chat settings.
    pub fn from_chat(backend: Backend, cfg: ChatConfig) -> Result<Self, DeciderError> {
        // One tally for the baselines' and the twin's calls.
        let failures = Failures::new();
        let f = failures.clone();
        Ok(match backend {
            Backend::Anthropic => LlmFactory {
                model: Arc::new(AnthropicChat::new(cfg.clone())?.with_failures(f.clone())),
                twin: Arc::new(LlmDecider::new(AnthropicChat::new(cfg)?.with_failures(f))),
                failures,
            },
            Backend::OpenAi | Backend::Offline => LlmFactory {
                model: Arc::new(OpenAiChat::new(cfg.clone())?.with_failures(f.clone())),
                twin: Arc::new(LlmDecider::new(OpenAiChat::new(cfg)?.with_failures(f))),
                failures,
            },
        })
    }

    /// A factory on the token bench's counting fake ([`crate::eval::fake::CountingModel`]),
    /// one for the baselines and the twin.
    pub fn counting() -> Self {
        let model = Arc::new(crate::eval::fake::CountingModel::new());
        LlmFactory::new(model.clone(), Arc::new(LlmDecider::new(model)))
    }

    /// A factory on a given chat model (baselines) and decider (the twin); the model's
    /// tally, if it keeps one, is the factory's.
    pub fn new(model: Arc<dyn ChatModel>, twin: Arc<dyn Decider>) -> Self {
        let failures = model.failures().cloned().unwrap_or_default();
        LlmFactory { model, twin, failures }
    }

    /// How many model calls the defenses made so far and how many failed, with the first
    /// failure.
    pub fn failures(&self) -> FailureSummary {
        self.failures.summary()
    }
}

impl DefenseFactory for LlmFactory {
    fn make(&self, name: DefenseName, persona: &Persona, _knowledge: &Arc<JudgeKnowledge>) -> Result<Box<dyn Defense>, RunError> {
        let role = match name {
            DefenseName::Nanoclaw => return Ok(Box::new(Nanoclaw)),
            DefenseName::StaticJudge => Role::Static,
            DefenseName::DynamicJudge => Role::Dynamic,
            DefenseName::ConsecaPlus => Role::Conseca,
            DefenseName::ConsecaJudgePlus => Role::ConsecaJudge,
            DefenseName::Pincer | DefenseName::PincerP2 => return crate::eval::pincer::with_decider(name, persona, self.twin.clone()),
        };
        Ok(Box::new(LlmBaseline {
            role,
            model: self.model.clone(),
            history: Arc::new(history_json(persona)),
            prompt: String::new(),
            memory: Vec::new(),
            policy: None,
            policy_json: Value::Null,
            tokens: TokenUsage::default(),
        }))
    }
}
