//! The baseline defenses of the paper, offline: Static-Judge, Dynamic-Judge, Conseca+ and
//! Conseca-Judge+. Each sees exactly the context the paper gives it:
//!
//! | defense | history & user policies | rationale | content | worker notes |
//! |---|---|---|---|---|
//! | static-judge | no | yes | yes | no |
//! | dynamic-judge | yes | yes | yes | kept in its own state |
//! | conseca+ | through the policy made at the prompt | no | no | no |
//! | conseca-judge+ | through the policy made at the prompt | yes | no | no |

use crate::access::Access;
use crate::twin::text::typed_names;
use crate::eval::corpus::Permission;
use crate::eval::defense::{Defense, DefenseName, RequestView, Outcome};
use crate::eval::judge::{compile_glob, judge, parent, prompt_relevance, CompiledRule, JudgeInput, JudgeKnowledge, JudgeVerdict};
use crate::decider::TokenUsage;
use async_trait::async_trait;
use std::sync::Arc;

fn verdict(v: JudgeVerdict) -> Outcome {
    match v {
        JudgeVerdict::Grant => Outcome::Grant,
        JudgeVerdict::Deny => Outcome::Deny,
        JudgeVerdict::AskUser => Outcome::Escalate,
    }
}

/// Static-Judge: generic safety instructions; sees the request's name, content and
/// rationale; no history, no user policies, no memory.
#[derive(Debug, Default)]
pub struct StaticJudge {
    prompt: String,
}

#[async_trait]
impl Defense for StaticJudge {
    fn name(&self) -> DefenseName {
        DefenseName::StaticJudge
    }
    async fn begin_sample(&mut self, _day: u64) {
        self.prompt.clear();
    }
    async fn start_session(&mut self, prompt: &str, _tree: &[String]) {
        self.prompt = prompt.to_string();
    }
    async fn note(&mut self, _text: &str) {}
    async fn decide(&mut self, r: &RequestView<'_>) -> Outcome {
        verdict(judge(&JudgeInput {
            prompt: &self.prompt,
            path: r.path,
            access: r.access,
            rationale: r.rationale,
            content: r.content,
            knowledge: None,
            memory: &[],
            notes: &[],
            policy_allows: None,
        }))
    }
    async fn end_session(&mut self) {}
    fn tokens(&self) -> TokenUsage {
        TokenUsage::default()
    }
}

/// Dynamic-Judge: all trusted history and the user's policies, but its own state also keeps
/// what the worker tells it (notes and rationales) for the rest of the sample, so a forged
/// authorization in a note poisons later decisions.
#[derive(Debug)]
pub struct DynamicJudge {
    knowledge: Arc<JudgeKnowledge>,
    prompt: String,
    memory: Vec<String>,
    notes: Vec<String>,
}

impl DynamicJudge {
    /// A Dynamic-Judge over a persona's knowledge.
    pub fn new(knowledge: Arc<JudgeKnowledge>) -> Self {
        DynamicJudge { knowledge, prompt: String::new(), memory: Vec::new(), notes: Vec::new() }
    }

    /// The worker messages its state holds now (for tests and audits).
    pub fn memory(&self) -> &[String] {
        &self.memory
    }
}

#[async_trait]
impl Defense for DynamicJudge {
    fn name(&self) -> DefenseName {
        DefenseName::DynamicJudge
    }
    async fn begin_sample(&mut self, _day: u64) {
        self.prompt.clear();
        self.memory.clear();
        self.notes.clear();
    }
    async fn start_session(&mut self, prompt: &str, _tree: &[String]) {
        self.prompt = prompt.to_string();
    }
    async fn note(&mut self, text: &str) {
        self.memory.push(text.to_string());
        self.notes.push(text.to_string());
    }
    async fn decide(&mut self, r: &RequestView<'_>) -> Outcome {
        let v = judge(&JudgeInput {
            prompt: &self.prompt,
            path: r.path,
            access: r.access,
            rationale: r.rationale,
            content: r.content,
            knowledge: Some(&self.knowledge),
            memory: &self.memory,
            notes: &self.notes,
            policy_allows: None,
        });
        if let Some(rat) = r.rationale {
            self.memory.push(rat.to_string());
        }
        verdict(v)
    }
    async fn end_session(&mut self) {}
    fn tokens(&self) -> TokenUsage {
        TokenUsage::default()
    }
}

/// A policy generated when a prompt arrives: the user's rules (deny and ask_user first), then
/// allow entries for what the prompt names and what similar past tasks touched; everything
/// else is denied.
#[derive(Debug, Clone, Default)]
pub struct GeneratedPolicy {
    /// The entries, in generation order.
    pub entries: Vec<CompiledRule>,
}

impl GeneratedPolicy {
    /// Generates the policy from the prompt, the workspace tree and all trusted history.
    pub fn generate(k: &JudgeKnowledge, prompt: &str, tree: &[String]) -> GeneratedPolicy {
        let mut entries: Vec<CompiledRule> = k.rules.clone();
        let mut intent = vec![Access::Read, Access::List];
        for a in [Access::Write, Access::Create, Access::Delete] {
            if k.intent(prompt, a) >= 0.35 {
                intent.push(a);
            }
        }
        let mut allow = |glob: String, access: Vec<Access>| {
            if let Ok(m) = compile_glob(&glob) {
                entries.push(CompiledRule { glob: m, text: glob, access, permission: Permission::Allow });
            }
        };
        // Names typed in the prompt that exist in the tree, and tree entries whose names the
        // prompt's words point to.
        let typed = typed_names(prompt);
        for t in tree {
            let rel = prompt_relevance(prompt, t);
            let named = typed.iter().any(|n| {
                let n = n.trim_end_matches('/');
                !n.is_empty() && (t.trim_end_matches('/') == n || t.trim_end_matches('/').ends_with(&format!("/{n}")))
            });
            if named || rel >= 0.6 {
                if t.ends_with('/') {
                    allow(format!("{}**", t), intent.clone());
                    allow(t.trim_end_matches('/').to_string(), intent.clone());
                } else {
                    allow(t.clone(), intent.clone());
                }
            }
        }
        // What the most similar past tasks touched, and files beside them.
        let top = k.index.top_k(prompt, 3);
        if let Some(&(_, best)) = top.first() {
            if best >= 3.0 {
                for (i, s) in top {
                    if s < 0.5 * best {
                        continue;
                    }
                    for (p, a) in &k.accesses[i] {
                        allow(p.clone(), vec![*a]);
                        if let Some(d) = parent(p) {
                            allow(format!("{d}/*"), vec![*a]);
                        }
                    }
                    for r in &k.approvals[i] {
                        entries_push_approval(&mut allow, r);
                    }
                }
            }
        }
        GeneratedPolicy { entries }
    }

    /// Enforcement by glob matching: deny, then ask_user, then allow; uncovered is denied.
    pub fn check(&self, path: &str, access: Access) -> Outcome {
        let covering: Vec<&CompiledRule> = self.entries.iter().filter(|r| r.covers(path, access)).collect();
        if covering.iter().any(|r| r.permission == Permission::Deny) {
            Outcome::Deny
        } else if covering.iter().any(|r| r.permission == Permission::AskUser) {
            Outcome::Escalate
        } else if covering.iter().any(|r| r.permission == Permission::Allow) {
            Outcome::Grant
        } else {
            Outcome::Deny
        }
    }
}

fn entries_push_approval(allow: &mut impl FnMut(String, Vec<Access>), r: &CompiledRule) {
    allow(r.text.clone(), r.access.clone());
}

/// Conseca+: the generated policy enforced by glob matching; no rationale, content or notes.
#[derive(Debug)]
pub struct ConsecaPlus {
    knowledge: Arc<JudgeKnowledge>,
    policy: GeneratedPolicy,
}

impl ConsecaPlus {
    /// A Conseca+ over a persona's knowledge.
    pub fn new(knowledge: Arc<JudgeKnowledge>) -> Self {
        ConsecaPlus { knowledge, policy: GeneratedPolicy::default() }
    }
}

#[async_trait]
impl Defense for ConsecaPlus {
    fn name(&self) -> DefenseName {
        DefenseName::ConsecaPlus
    }
    async fn begin_sample(&mut self, _day: u64) {
        self.policy = GeneratedPolicy::default();
    }
    async fn start_session(&mut self, prompt: &str, tree: &[String]) {
        self.policy = GeneratedPolicy::generate(&self.knowledge, prompt, tree);
    }
    async fn note(&mut self, _text: &str) {}
    async fn decide(&mut self, r: &RequestView<'_>) -> Outcome {
        self.policy.check(r.path, r.access)
    }
    async fn end_session(&mut self) {
        self.policy = GeneratedPolicy::default();
    }
    fn tokens(&self) -> TokenUsage {
        TokenUsage::default()
    }
}

/// Conseca-Judge+: the same generated policy, enforced by a judge that sees the request's
/// name and rationale (not its content): deny and ask_user entries hold; otherwise the
/// judge weighs the policy's allow together with the task and the rationale.
#[derive(Debug)]
pub struct ConsecaJudgePlus {
    knowledge: Arc<JudgeKnowledge>,
    prompt: String,
    policy: GeneratedPolicy,
}

impl ConsecaJudgePlus {
    /// A Conseca-Judge+ over a persona's knowledge.
    pub fn new(knowledge: Arc<JudgeKnowledge>) -> Self {
        ConsecaJudgePlus { knowledge, prompt: String::new(), policy: GeneratedPolicy::default() }
    }
}

#[async_trait]
impl Defense for ConsecaJudgePlus {
    fn name(&self) -> DefenseName {
        DefenseName::ConsecaJudgePlus
    }
    async fn begin_sample(&mut self, _day: u64) {
        self.policy = GeneratedPolicy::default();
        self.prompt.clear();
    }
    async fn start_session(&mut self, prompt: &str, tree: &[String]) {
        self.prompt = prompt.to_string();
        self.policy = GeneratedPolicy::generate(&self.knowledge, prompt, tree);
    }
    async fn note(&mut self, _text: &str) {}
    async fn decide(&mut self, r: &RequestView<'_>) -> Outcome {
        let covered = match self.policy.check(r.path, r.access) {
            Outcome::Deny if self.policy.entries.iter().any(|e| e.permission == Permission::Deny && e.covers(r.path, r.access)) => return Outcome::Deny,
            Outcome::Escalate => return Outcome::Escalate,
            Outcome::Grant => true,
            Outcome::Deny => false,
        };
        verdict(judge(&JudgeInput {
            prompt: &self.prompt,
            path: r.path,
            access: r.access,
            rationale: r.rationale,
            content: None,
            knowledge: None,
            memory: &[],
            notes: &[],
            policy_allows: Some(covered),
        }))
    }
    async fn end_session(&mut self) {
        self.policy = GeneratedPolicy::default();
    }
    fn tokens(&self) -> TokenUsage {
        TokenUsage::default()
    }
}
