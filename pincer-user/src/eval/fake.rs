//! The token bench's model (`pincer eval --decider fake-openai`): a chat model that answers
//! without a network and counts as a provider would, so that the harness can say what each
//! defense's prompts cost. A prompt costs one token per four characters (rounded up); the
//! prompt cache is a provider's prefix cache: prompts are cut into blocks of 512 bytes,
//! a block is served from the cache when the prompt up to its end was sent before, and a
//! cached prefix counts only from 1,024 tokens on (as OpenAI's and Anthropic's caches).
//! Votes are answered with allow, or deny for a chosen share of them (picked by a hash of
//! the prompt, so a replay is repeatable); a request for a policy gets one entry allowing
//! every access, so the replay goes as far as the votes let it.

use crate::decider::llm::{ChatAnswer, ChatModel, Failures, Prompt};
use crate::decider::DeciderError;
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::sync::Mutex;

/// Characters per token.
const CHARS_PER_TOKEN: usize = 4;
/// The cache's block, in characters.
const BLOCK: usize = 512;
/// The shortest prefix a cache serves, in tokens.
const MIN_CACHED_TOKENS: usize = 1024;

/// The counting fake.
#[derive(Debug)]
pub struct CountingModel {
    deny_permille: u32,
    seen: Mutex<HashSet<[u8; 32]>>,
    failures: Failures,
}

impl CountingModel {
    /// A fake that allows every vote.
    pub fn new() -> Self {
        Self::denying(0.0)
    }

    /// A fake that denies `share` (0..=1) of the votes.
    pub fn denying(share: f64) -> Self {
        CountingModel { deny_permille: (share.clamp(0.0, 1.0) * 1000.0).round() as u32, seen: Mutex::new(HashSet::new()), failures: Failures::new() }
    }

    /// Whether the fake denies a vote on this prompt.
    pub fn denies(&self, system: &str, user: &str) -> bool {
        let h = Sha256::new().chain_update(system).chain_update([0]).chain_update(user).finalize();
        (u32::from_le_bytes([h[0], h[1], h[2], h[3]]) % 1000) < self.deny_permille
    }

    /// The characters of `text` a prefix cache serves, and remembers every prefix of it.
    fn cache(&self, text: &str) -> usize {
        let bytes = text.as_bytes();
        let mut h = Sha256::new();
        let mut hashes = Vec::new();
        for chunk in bytes.chunks(BLOCK) {
            h.update(chunk);
            if chunk.len() == BLOCK {
                hashes.push(<[u8; 32]>::from(h.clone().finalize()));
            }
        }
        let mut seen = self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let hit = hashes.iter().take_while(|k| seen.contains(*k)).count() * BLOCK;
        seen.extend(hashes);
        if hit / CHARS_PER_TOKEN >= MIN_CACHED_TOKENS {
            hit
        } else {
            0
        }
    }
}

impl Default for CountingModel {
    fn default() -> Self {
        Self::new()
    }
}

fn tokens(chars: usize) -> u64 {
    chars.div_ceil(CHARS_PER_TOKEN) as u64
}

#[async_trait::async_trait]
impl ChatModel for CountingModel {
    fn backend(&self) -> &'static str {
        "fake-openai"
    }

    async fn complete(&self, system: &str, user: &str) -> Result<ChatAnswer, DeciderError> {
        // The wire order: the system prompt, then the user message.
        let sent = format!("{system}{user}");
        let cached = self.cache(&sent);
        let text = if system.contains("\"entries\"") {
            r#"{"entries": [{"path_glob": "**", "access": ["read", "write", "create", "delete", "list"], "operations": ["any"], "permission": "allow", "rationale": "the bench's fake allows every access"}]}"#
        } else if self.denies(system, user) {
            r#"{"verdict": "deny", "reason": "the bench's fake denies this share of votes"}"#
        } else {
            r#"{"verdict": "allow", "reason": "the bench's fake allows"}"#
        };
        self.failures.answered();
        Ok(ChatAnswer { text: text.into(), input_tokens: tokens(sent.chars().count()), output_tokens: tokens(text.len()), cached_tokens: tokens(cached).min(tokens(sent.chars().count())) })
    }

    async fn ask(&self, prompt: &Prompt) -> Result<ChatAnswer, DeciderError> {
        self.complete(&prompt.system, &prompt.user()).await
    }

    fn failures(&self) -> Option<&Failures> {
        Some(&self.failures)
    }
}
