//! Decider backends behind one trait: the offline decider (deterministic, no model, the
//! default; it serves the twin's offline votes in [`crate::twin::votes`]) and chat-model
//! deciders (OpenAI-compatible, Anthropic). The votes' inputs and verdicts are defined here
//! because every backend speaks them; what the votes look at lives in [`crate::twin`].
//!
//! The inputs of the votes are types. [`Vote1Input`] holds only trusted text
//! ([`TrustedText`], which only this crate can make from trusted state), sanitized paths
//! and access types: it cannot hold an unsanitized untrusted string. [`Vote2Input`] adds the
//! untrusted context (content, rationale, the raw name, the session's earlier requests).
//! [`PolicyInput`] feeds the pre-committed policy of vote 3 and sees raw names.

pub mod llm;
pub mod offline;

use serde::Serialize;

pub use crate::twin::vote::{
    Decider, DeciderError, EarlierRequest, Mechanism, PolicyAnswer, PolicyInput, RuleOrigin, Section, TokenUsage, TrustedText, Verdict, Vote1Input, Vote2Input, VoteOutcome,
};

pub use llm::{AnthropicChat, ChatAnswer, ChatConfig, ChatModel, LlmDecider, OpenAiChat};
pub use offline::OfflineDecider;

/// A decider over an OpenAI-compatible chat-completions endpoint.
pub type OpenAiDecider = LlmDecider<OpenAiChat>;
/// A decider over the Anthropic Messages API.
pub type AnthropicDecider = LlmDecider<AnthropicChat>;

/// Which decider backend makes the votes: the daemon's `[decider] backend`, `pincer eval
/// --decider`, and the backend named in evaluation reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// Deterministic, no model.
    Offline,
    /// An OpenAI-compatible chat-completions endpoint.
    #[serde(rename = "openai")]
    #[value(name = "openai")]
    OpenAi,
    /// The Anthropic Messages API.
    Anthropic,
}

impl Backend {
    /// The backend's name in configuration, reports and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Offline => "offline",
            Backend::OpenAi => "openai",
            Backend::Anthropic => "anthropic",
        }
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

