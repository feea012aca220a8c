//! Chat-model deciders: an OpenAI-compatible chat-completions client (vLLM, llama.cpp
//! server, Ollama, OpenAI) and an Anthropic Messages client, both on reqwest with rustls,
//! and [`LlmDecider`], which asks either for the three votes' answers as strict JSON.
//!
//! Every failure (timeout, HTTP error, 429, refusal, truncated or unparsable answer) is a
//! deny whose reason names the cause; tokens are counted per call.

use super::{Decider, DeciderError, PolicyAnswer, PolicyInput, Section, TokenUsage, Verdict, Vote1Input, Vote2Input, VoteOutcome};
use crate::twin::knowledge::{Knowledge, SIMILAR_K};
use crate::twin::PolicyEntry;
use serde::Deserialize;
use serde_json::{json, Value};
use std::time::Duration;

/// The prompt of vote 1.
pub const VOTE1_PROMPT: &str = include_str!("../../prompts/vote1.md");
/// The prompt of vote 2.
pub const VOTE2_PROMPT: &str = include_str!("../../prompts/vote2.md");
/// The prompt of vote 1 over several requests of one session ([`vote1_batch_prompt`]).
pub const VOTE1_BATCH_PROMPT: &str = include_str!("../../prompts/vote1_batch.md");
/// The prompt of the pre-committed policy generation.
pub const POLICY_PROMPT: &str = include_str!("../../prompts/policy.md");

/// A model's answer to one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatAnswer {
    /// The text of the answer.
    pub text: String,
    /// Input tokens the provider counted.
    pub input_tokens: u64,
    /// Output tokens the provider counted.
    pub output_tokens: u64,
    /// Of the input tokens, those the provider served from its prompt cache.
    pub cached_tokens: u64,
}

/// A prompt in sections: the system prompt, then the parts of the user message in order.
/// The system prompt and the first `stable` parts are the same for every call of one kind
/// over one user's trusted state, so a provider's prompt cache can keep them; the rest
/// varies from call to call and comes last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    /// The system prompt.
    pub system: String,
    /// The user message's parts, each with its section.
    pub parts: Vec<(Section, String)>,
    /// How many leading parts form the stable prefix.
    pub stable: usize,
}

impl Prompt {
    /// A prompt of a system prompt and one user message of one section, nothing stable.
    pub fn plain(system: &str, section: Section, user: String) -> Self {
        Prompt { system: system.to_string(), parts: vec![(section, user)], stable: 0 }
    }

    /// The user message as sent: the parts joined.
    pub fn user(&self) -> String {
        self.parts.iter().map(|(_, t)| t.as_str()).collect()
    }

    /// The user message's stable prefix and the rest.
    pub fn split(&self) -> (String, String) {
        let k = self.stable.min(self.parts.len());
        (self.parts[..k].iter().map(|(_, t)| t.as_str()).collect(), self.parts[k..].iter().map(|(_, t)| t.as_str()).collect())
    }

    /// The characters of each section (system prompt included), in [`Section::ALL`]'s order.
    pub fn section_chars(&self) -> [u64; Section::COUNT] {
        let mut n = [0u64; Section::COUNT];
        n[Section::Instructions as usize] += self.system.chars().count() as u64;
        for (s, t) in &self.parts {
            n[*s as usize] += t.chars().count() as u64;
        }
        n
    }

    /// The usage of one answered call: the provider's counts, with the input tokens shared
    /// out over the sections by their length.
    pub fn usage(&self, ans: &ChatAnswer) -> TokenUsage {
        let chars = self.section_chars();
        let total: u64 = chars.iter().sum();
        let mut sections = [0u64; Section::COUNT];
        if total > 0 {
            for (out, c) in sections.iter_mut().zip(chars) {
                *out = (ans.input_tokens as u128 * c as u128 / total as u128) as u64;
            }
            // What rounding down left goes to the longest section, so the sections add up.
            let rest = ans.input_tokens - sections.iter().sum::<u64>();
            let longest = (0..chars.len()).max_by_key(|&i| chars[i]).unwrap_or(0);
            sections[longest] += rest;
        }
        TokenUsage { input: ans.input_tokens, output: ans.output_tokens, calls: 1, cached: ans.cached_tokens, sections }
    }
}

/// A JSON object written key by key in a chosen order, each key's member in a prompt
/// section (serde_json's own objects sort their keys, which would put the request in the
/// middle of the stable parts).
#[derive(Debug, Default)]
pub struct JsonParts {
    parts: Vec<(Section, String)>,
}

impl JsonParts {
    /// An empty object.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `"key": value` in `section`.
    pub fn add(mut self, section: Section, key: &str, value: &Value) -> Self {
        let open = if self.parts.is_empty() { "{" } else { "," };
        self.parts.push((section, format!("{open}{}:{value}", Value::from(key))));
        self
    }

    /// Adds `"key": [item, ...]`, each item's parts in their own sections, the list in
    /// `section`.
    pub fn add_list(mut self, section: Section, key: &str, items: Vec<Vec<(Section, String)>>) -> Self {
        let open = if self.parts.is_empty() { "{" } else { "," };
        self.parts.push((section, format!("{open}{}:[", Value::from(key))));
        for (i, item) in items.into_iter().enumerate() {
            if i > 0 {
                self.parts.push((section, ",".into()));
            }
            self.parts.extend(item);
        }
        self.parts.push((section, "]".into()));
        self
    }

    /// The parts, the object closed (`{}` when empty).
    pub fn finish(mut self) -> Vec<(Section, String)> {
        match self.parts.last_mut() {
            Some((_, t)) => t.push('}'),
            None => self.parts.push((Section::Request, "{}".into())),
        }
        self.parts
    }
}

/// A chat model: one system prompt, one user message, one answer.
#[async_trait::async_trait]
pub trait ChatModel: Send + Sync {
    /// Backend name for reports.
    fn backend(&self) -> &'static str;
    /// Sends one exchange.
    async fn complete(&self, system: &str, user: &str) -> Result<ChatAnswer, DeciderError>;
    /// Sends one exchange of a prompt in sections (a client that can mark the stable prefix
    /// for the provider's cache does so).
    async fn ask(&self, prompt: &Prompt) -> Result<ChatAnswer, DeciderError> {
        self.complete(&prompt.system, &prompt.user()).await
    }
    /// The tally of this model's calls and failures, if it keeps one.
    fn failures(&self) -> Option<&Failures> {
        None
    }
}

#[async_trait::async_trait]
impl<T: ChatModel + ?Sized> ChatModel for std::sync::Arc<T> {
    fn backend(&self) -> &'static str {
        (**self).backend()
    }
    async fn complete(&self, system: &str, user: &str) -> Result<ChatAnswer, DeciderError> {
        (**self).complete(system, user).await
    }
    async fn ask(&self, prompt: &Prompt) -> Result<ChatAnswer, DeciderError> {
        (**self).ask(prompt).await
    }
    fn failures(&self) -> Option<&Failures> {
        (**self).failures()
    }
}

/// How many model calls were made and failed, and the first failure (endpoint and cause).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FailureSummary {
    /// Calls made.
    pub calls: u64,
    /// Of which failed (no usable answer: transport error, timeout, HTTP status, bad body).
    pub failed: u64,
    /// The first failure: the endpoint and the error with its causes.
    pub first: Option<String>,
}

impl FailureSummary {
    /// Whether calls were made and every one failed.
    pub fn all_failed(&self) -> bool {
        self.calls > 0 && self.failed == self.calls
    }
}

impl std::fmt::Display for FailureSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} of {} model calls failed", self.failed, self.calls)?;
        if let Some(first) = &self.first {
            write!(f, "; first error: {first}")?;
        }
        Ok(())
    }
}

#[derive(Debug, Default)]
struct Tally {
    summary: FailureSummary,
    /// Log once per burst: the first failure at once, then a summary at most this often.
    log_every: Option<Duration>,
    last_log: Option<std::time::Instant>,
    since_log: u64,
}

impl Tally {
    /// Counts one failure at `now`; returns the line to log, if this one is to be logged.
    fn fail(&mut self, now: std::time::Instant, what: String) -> Option<String> {
        self.summary.calls += 1;
        self.summary.failed += 1;
        if self.summary.first.is_none() {
            self.summary.first = Some(what.clone());
        }
        let every = self.log_every?;
        self.since_log += 1;
        match self.last_log {
            Some(t) if now.duration_since(t) < every => None,
            Some(_) => {
                let line = format!("{} model calls failed in the last {} s (latest: {what}); {} failed in all", self.since_log, every.as_secs(), self.summary.failed);
                self.last_log = Some(now);
                self.since_log = 0;
                Some(line)
            }
            None => {
                self.last_log = Some(now);
                self.since_log = 0;
                Some(format!("model call failed: {what} (further failures are summarized at most every {} s)", every.as_secs()))
            }
        }
    }
}

/// A shared tally of model calls and their failures: commands that call a model report it,
/// and the daemon logs failures once per burst instead of once per request. Failures stay
/// denials; the tally only says so.
#[derive(Debug, Clone, Default)]
pub struct Failures(std::sync::Arc<std::sync::Mutex<Tally>>);

impl Failures {
    /// A tally that only counts.
    pub fn new() -> Self {
        Self::default()
    }

    /// A tally that also logs (`tracing` error): the first failure of a burst at once, then
    /// at most one summary every `every`.
    pub fn logging(every: Duration) -> Self {
        Failures(std::sync::Arc::new(std::sync::Mutex::new(Tally { log_every: Some(every), ..Tally::default() })))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Tally> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Counts a call that got an answer.
    pub fn answered(&self) {
        self.lock().summary.calls += 1;
    }

    /// Counts a failed call to `endpoint`.
    pub fn failed(&self, endpoint: &str, e: &DeciderError) {
        let mut what = format!("{endpoint}: {e}");
        let mut cause = std::error::Error::source(e);
        while let Some(c) = cause {
            what.push_str(&format!(": {c}"));
            cause = c.source();
        }
        let line = self.lock().fail(std::time::Instant::now(), what);
        if let Some(line) = line {
            tracing::error!("{line}");
        }
    }

    /// The counts so far.
    pub fn summary(&self) -> FailureSummary {
        self.lock().summary.clone()
    }

    fn note<T>(&self, endpoint: &str, r: &Result<T, DeciderError>) {
        match r {
            Ok(_) => self.answered(),
            Err(e) => self.failed(endpoint, e),
        }
    }
}

/// Connection settings of a chat backend.
#[derive(Debug, Clone)]
pub struct ChatConfig {
    /// Base URL (for OpenAI-compatible servers, up to and including `/v1`).
    pub base_url: String,
    /// API key, if the server needs one.
    pub api_key: Option<String>,
    /// Model name.
    pub model: String,
    /// Timeout of one call.
    pub timeout: Duration,
    /// Answer length limit in tokens.
    pub max_tokens: u32,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Default call timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

impl ChatConfig {
    /// The settings of a model backend from the daemon's `[decider]` values (`endpoint`,
    /// `model`, `api_key_env`, `timeout`; an empty value means the default), with the
    /// environment as override: `OPENAI_BASE_URL` or `ANTHROPIC_BASE_URL`, `PINCER_MODEL`.
    /// The API key is read from the variable `api_key_env` names (default `OPENAI_API_KEY`
    /// or `ANTHROPIC_API_KEY`); Anthropic needs one, and both need a model name.
    pub fn resolve(backend: super::Backend, endpoint: &str, model: &str, api_key_env: &str, timeout: Duration) -> Result<Self, DeciderError> {
        let (url_env, default_url, key_env) = match backend {
            super::Backend::Anthropic => ("ANTHROPIC_BASE_URL", "https://api.anthropic.com", "ANTHROPIC_API_KEY"),
            super::Backend::OpenAi | super::Backend::Offline => ("OPENAI_BASE_URL", "https://api.openai.com/v1", "OPENAI_API_KEY"),
        };
        let named = |v: &str| Some(v.to_string()).filter(|v| !v.trim().is_empty());
        let key = env(if api_key_env.is_empty() { key_env } else { api_key_env });
        if backend == super::Backend::Anthropic && key.is_none() {
            let env = if api_key_env.is_empty() { "ANTHROPIC_API_KEY" } else { "the variable named by decider.api_key_env" };
            return Err(DeciderError::MissingConfig { what: "API key", env });
        }
        Ok(ChatConfig {
            base_url: env(url_env).or_else(|| named(endpoint)).unwrap_or_else(|| default_url.into()),
            api_key: key,
            model: env("PINCER_MODEL").or_else(|| named(model)).ok_or(DeciderError::MissingConfig { what: "model name", env: "PINCER_MODEL" })?,
            timeout,
            max_tokens: 1024,
        })
    }

    /// OpenAI-compatible settings from `OPENAI_BASE_URL` (default the OpenAI API),
    /// `OPENAI_API_KEY` and `PINCER_MODEL` (required).
    pub fn openai_from_env() -> Result<Self, DeciderError> {
        Self::resolve(super::Backend::OpenAi, "", "", "", DEFAULT_TIMEOUT)
    }

    /// Anthropic settings from `ANTHROPIC_BASE_URL` (default the Anthropic API),
    /// `ANTHROPIC_API_KEY` (required) and `PINCER_MODEL` (required).
    pub fn anthropic_from_env() -> Result<Self, DeciderError> {
        Self::resolve(super::Backend::Anthropic, "", "", "", DEFAULT_TIMEOUT)
    }

    fn client(&self) -> Result<reqwest::Client, DeciderError> {
        reqwest::Client::builder().timeout(self.timeout).use_rustls_tls().build().map_err(DeciderError::Client)
    }
}

async fn send(backend: &'static str, timeout: Duration, rb: reqwest::RequestBuilder) -> Result<Value, DeciderError> {
    let map = |e: reqwest::Error| {
        if e.is_timeout() {
            DeciderError::Timeout { backend, secs: timeout.as_secs_f32() }
        } else {
            DeciderError::Transport { backend, source: e }
        }
    };
    let resp = rb.send().await.map_err(map)?;
    let status = resp.status();
    let body = resp.text().await.map_err(map)?;
    if status.as_u16() == 429 {
        return Err(DeciderError::RateLimited { backend });
    }
    if !status.is_success() {
        return Err(DeciderError::Http { backend, status: status.as_u16(), body: body.chars().take(300).collect() });
    }
    serde_json::from_str(&body).map_err(|e| DeciderError::MalformedBody { backend, detail: e.to_string() })
}

fn malformed(backend: &'static str, what: &str) -> DeciderError {
    DeciderError::MalformedBody { backend, detail: format!("missing {what}") }
}

/// One chat API's wire format: what the shared [`ChatClient`] needs to know to call it.
pub trait ChatApi: std::fmt::Debug + Clone + Send + Sync + 'static {
    /// Backend name for reports and errors.
    const BACKEND: &'static str;
    /// The endpoint's path under the configured base URL.
    const PATH: &'static str;
    /// The call: headers, authentication and JSON body for one exchange.
    fn request(cfg: &ChatConfig, rb: reqwest::RequestBuilder, prompt: &Prompt) -> reqwest::RequestBuilder;
    /// The answer's text and token counts, read from the response body.
    fn answer(v: &Value) -> Result<ChatAnswer, DeciderError>;
}

/// A chat client of one API: its settings, the HTTP client and the tally of its calls.
#[derive(Debug, Clone)]
pub struct ChatClient<A: ChatApi> {
    cfg: ChatConfig,
    http: reqwest::Client,
    failures: Failures,
    api: std::marker::PhantomData<A>,
}

impl<A: ChatApi> ChatClient<A> {
    /// A client with the given settings.
    pub fn new(cfg: ChatConfig) -> Result<Self, DeciderError> {
        Ok(ChatClient { http: cfg.client()?, cfg, failures: Failures::new(), api: std::marker::PhantomData })
    }

    /// Counts calls and failures in `failures` (shared with other clients).
    pub fn with_failures(mut self, failures: Failures) -> Self {
        self.failures = failures;
        self
    }

    fn url(&self) -> String {
        format!("{}{}", self.cfg.base_url.trim_end_matches('/'), A::PATH)
    }

    async fn exchange(&self, prompt: &Prompt) -> Result<ChatAnswer, DeciderError> {
        let rb = A::request(&self.cfg, self.http.post(self.url()), prompt);
        let v = send(A::BACKEND, self.cfg.timeout, rb).await?;
        A::answer(&v)
    }
}

#[async_trait::async_trait]
impl<A: ChatApi> ChatModel for ChatClient<A> {
    fn backend(&self) -> &'static str {
        A::BACKEND
    }

    async fn complete(&self, system: &str, user: &str) -> Result<ChatAnswer, DeciderError> {
        self.ask(&Prompt::plain(system, Section::Request, user.to_string())).await
    }

    async fn ask(&self, prompt: &Prompt) -> Result<ChatAnswer, DeciderError> {
        let r = self.exchange(prompt).await;
        self.failures.note(&self.url(), &r);
        r
    }

    fn failures(&self) -> Option<&Failures> {
        Some(&self.failures)
    }
}

/// The OpenAI-compatible chat-completions API.
#[derive(Debug, Clone, Copy)]
pub struct OpenAiApi;

impl ChatApi for OpenAiApi {
    const BACKEND: &'static str = "openai";
    const PATH: &'static str = "/chat/completions";

    fn request(cfg: &ChatConfig, rb: reqwest::RequestBuilder, prompt: &Prompt) -> reqwest::RequestBuilder {
        // OpenAI-compatible servers cache prompt prefixes on their own: the stable parts
        // come first, so nothing needs marking.
        let body = json!({
            "model": cfg.model,
            "temperature": 0,
            "max_tokens": cfg.max_tokens,
            "response_format": {"type": "json_object"},
            "messages": [{"role": "system", "content": prompt.system}, {"role": "user", "content": prompt.user()}],
        });
        let rb = rb.json(&body);
        match &cfg.api_key {
            Some(k) => rb.bearer_auth(k),
            None => rb,
        }
    }

    fn answer(v: &Value) -> Result<ChatAnswer, DeciderError> {
        const B: &str = OpenAiApi::BACKEND;
        let choice = v.get("choices").and_then(|c| c.get(0)).ok_or_else(|| malformed(B, "choices[0]"))?;
        let msg = choice.get("message").ok_or_else(|| malformed(B, "choices[0].message"))?;
        if let Some(r) = msg.get("refusal").and_then(Value::as_str) {
            return Err(DeciderError::Refusal { backend: B, detail: r.chars().take(200).collect() });
        }
        match choice.get("finish_reason").and_then(Value::as_str) {
            Some("length") => return Err(DeciderError::Truncated { backend: B, reason: "length".into() }),
            Some("content_filter") => return Err(DeciderError::Refusal { backend: B, detail: "content_filter".into() }),
            _ => {}
        }
        let text = msg.get("content").and_then(Value::as_str).ok_or_else(|| malformed(B, "choices[0].message.content"))?;
        let usage = v.get("usage");
        let n = |k: &str| usage.and_then(|u| u.get(k)).and_then(Value::as_u64).unwrap_or(0);
        let cached = usage.and_then(|u| u.pointer("/prompt_tokens_details/cached_tokens")).and_then(Value::as_u64).unwrap_or(0);
        Ok(ChatAnswer { text: text.to_string(), input_tokens: n("prompt_tokens"), output_tokens: n("completion_tokens"), cached_tokens: cached })
    }
}

/// The Anthropic Messages API.
#[derive(Debug, Clone, Copy)]
pub struct AnthropicApi;

impl ChatApi for AnthropicApi {
    const BACKEND: &'static str = "anthropic";
    const PATH: &'static str = "/v1/messages";

    fn request(cfg: &ChatConfig, rb: reqwest::RequestBuilder, prompt: &Prompt) -> reqwest::RequestBuilder {
        // The system prompt and the stable parts of the user message are marked as the
        // prefix the provider caches (`cache_control`); the varying rest comes after.
        let cache = json!({"type": "ephemeral"});
        let (stable, rest) = prompt.split();
        let mut content = Vec::new();
        if !stable.is_empty() {
            content.push(json!({"type": "text", "text": stable, "cache_control": cache}));
        }
        if !rest.is_empty() || content.is_empty() {
            content.push(json!({"type": "text", "text": rest}));
        }
        let body = json!({
            "model": cfg.model,
            "max_tokens": cfg.max_tokens,
            "temperature": 0,
            "system": [{"type": "text", "text": prompt.system, "cache_control": cache}],
            "messages": [{"role": "user", "content": content}],
        });
        let rb = rb.header("anthropic-version", "2023-06-01").json(&body);
        match &cfg.api_key {
            Some(k) => rb.header("x-api-key", k),
            None => rb,
        }
    }

    fn answer(v: &Value) -> Result<ChatAnswer, DeciderError> {
        const B: &str = AnthropicApi::BACKEND;
        match v.get("stop_reason").and_then(Value::as_str) {
            Some("max_tokens") => return Err(DeciderError::Truncated { backend: B, reason: "max_tokens".into() }),
            Some("refusal") => return Err(DeciderError::Refusal { backend: B, detail: "stop_reason refusal".into() }),
            _ => {}
        }
        let content = v.get("content").and_then(Value::as_array).ok_or_else(|| malformed(B, "content"))?;
        let text: String = content.iter().filter(|c| c.get("type").and_then(Value::as_str) == Some("text")).filter_map(|c| c.get("text").and_then(Value::as_str)).collect();
        if text.is_empty() {
            return Err(malformed(B, "a text block in content"));
        }
        let usage = v.get("usage");
        let n = |k: &str| usage.and_then(|u| u.get(k)).and_then(Value::as_u64).unwrap_or(0);
        // Anthropic counts cached input apart from `input_tokens`: written to the cache in
        // this call, or read from it.
        let (written, read) = (n("cache_creation_input_tokens"), n("cache_read_input_tokens"));
        Ok(ChatAnswer { text, input_tokens: n("input_tokens") + written + read, output_tokens: n("output_tokens"), cached_tokens: read })
    }
}

/// An OpenAI-compatible chat-completions client.
pub type OpenAiChat = ChatClient<OpenAiApi>;

/// An Anthropic Messages API client.
pub type AnthropicChat = ChatClient<AnthropicApi>;

/// Extracts the single JSON object of an answer; a fenced code block around it is accepted,
/// any other text is not.
pub fn parse_json_answer(what: &'static str, text: &str) -> Result<Value, DeciderError> {
    let t = text.trim();
    let t = t.strip_prefix("```json").or_else(|| t.strip_prefix("```")).map(|s| s.trim_end().strip_suffix("```").unwrap_or(s)).unwrap_or(t);
    let v: Value = serde_json::from_str(t.trim()).map_err(|e| DeciderError::BadAnswer { what, detail: e.to_string() })?;
    if !v.is_object() {
        return Err(DeciderError::BadAnswer { what, detail: "not a JSON object".into() });
    }
    Ok(v)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VoteJson {
    verdict: Verdict,
    reason: String,
}

/// Parses a vote answer `{"verdict": "allow"|"deny"|"ask_user", "reason": "..."}`.
pub fn parse_vote(what: &'static str, text: &str) -> Result<(Verdict, String), DeciderError> {
    let v = parse_json_answer(what, text)?;
    let j: VoteJson = serde_json::from_value(v).map_err(|e| DeciderError::BadAnswer { what, detail: e.to_string() })?;
    Ok((j.verdict, j.reason))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ItemVoteJson {
    #[serde(rename = "item")]
    _item: u64,
    verdict: Verdict,
    reason: String,
}

/// Parses a vote answer over `n` numbered requests, `{"verdicts": [{"item": 1..=n,
/// "verdict", "reason"}, ...]}`, into one result per request in order. An answer that is not
/// such an object fails as a whole; within it, a request whose entry is missing, garbled
/// (its number readable, the rest not) or given more than once gets an error of its own,
/// and an entry whose number is unreadable or out of range speaks for no request.
pub fn parse_batch_votes(what: &'static str, text: &str, n: usize) -> Result<Vec<Result<(Verdict, String), DeciderError>>, DeciderError> {
    let v = parse_json_answer(what, text)?;
    let obj = v.as_object().ok_or_else(|| DeciderError::BadAnswer { what, detail: "not a JSON object".into() })?;
    if obj.len() != 1 {
        return Err(DeciderError::BadAnswer { what, detail: "the answer must hold `verdicts` and nothing else".into() });
    }
    let list = obj.get("verdicts").and_then(Value::as_array).ok_or_else(|| DeciderError::BadAnswer { what, detail: "no `verdicts` list".into() })?;
    let bad = |detail: String| Err(DeciderError::BadAnswer { what, detail });
    let mut out: Vec<Option<Result<(Verdict, String), DeciderError>>> = (0..n).map(|_| None).collect();
    let mut seen = vec![0u32; n];
    for entry in list {
        let Some(i) = entry.get("item").and_then(Value::as_u64).and_then(|k| usize::try_from(k).ok()).filter(|k| (1..=n).contains(k)).map(|k| k - 1) else {
            continue;
        };
        seen[i] += 1;
        out[i] = Some(match serde_json::from_value::<ItemVoteJson>(entry.clone()) {
            Ok(j) => Ok((j.verdict, j.reason)),
            Err(e) => bad(format!("item {}: {e}", i + 1)),
        });
    }
    Ok(out
        .into_iter()
        .zip(seen)
        .enumerate()
        .map(|(i, (r, times))| match (r, times) {
            (_, 0) | (None, _) => bad(format!("no verdict for item {}", i + 1)),
            (_, t) if t > 1 => bad(format!("item {} answered {t} times", i + 1)),
            (Some(r), _) => r,
        })
        .collect())
}

#[derive(Deserialize)]
struct PolicyJson {
    entries: Vec<PolicyEntry>,
}

/// Parses a policy answer `{"entries": [{path_glob, access, operations, permission, rationale}]}`.
pub fn parse_policy(text: &str) -> Result<Vec<PolicyEntry>, DeciderError> {
    let v = parse_json_answer("policy", text)?;
    let j: PolicyJson = serde_json::from_value(v).map_err(|e| DeciderError::BadAnswer { what: "policy", detail: e.to_string() })?;
    Ok(j.entries)
}

/// How many similar past tasks a vote-1 prompt shows.
const PROMPT_SIMILAR: usize = 3;
/// Content shown to vote 2 is cut to this many characters (the offline detectors have read
/// all of it).
const PROMPT_CONTENT: usize = 3000;

/// The standing compaction of the user's policies: one line per policy, its text and its
/// rules (sanitized globs), in the trusted state's order. It depends on the trusted state
/// only, so it is the same for every call until the policies change, and heads the user
/// message as its stable prefix.
pub fn standing_policies(k: &Knowledge) -> Value {
    let line = |p: &crate::twin::knowledge::PolicyView| {
        let mut l = format!("{}: {}", p.id.as_str(), p.text.as_str());
        for r in &p.rules {
            let access: Vec<&str> = r.access.iter().map(|a| a.as_str()).collect();
            l.push_str(&format!(" | {} {} {}", r.permission.as_str(), access.join(","), r.glob));
        }
        l
    };
    json!(k.policies.iter().map(line).collect::<Vec<_>>())
}

/// The standing compaction of the user's past tasks: every folder they used (sanitized),
/// with the access types used in it and how many tasks did. Derived from the trusted
/// history alone and the same for every call until a task is added.
pub fn standing_workspace(k: &Knowledge) -> Value {
    let mut dirs: std::collections::BTreeMap<String, (std::collections::BTreeSet<crate::access::Access>, u32)> = std::collections::BTreeMap::new();
    for t in &k.tasks {
        let mut seen = std::collections::HashSet::new();
        for (p, a, _) in &t.accesses {
            let dir = if p.is_dir() { Some(p.clone()) } else { p.parent() };
            let Some(dir) = dir else { continue };
            let e = dirs.entry(dir.to_string()).or_default();
            e.0.insert(*a);
            if seen.insert(dir) {
                e.1 += 1;
            }
        }
    }
    let lines: Vec<String> = dirs
        .into_iter()
        .map(|(d, (access, n))| format!("{} {} {n}", if d.is_empty() { "." } else { d.as_str() }, access.iter().map(|a| a.as_str()).collect::<Vec<_>>().join(",")))
        .collect();
    json!(lines)
}

/// The entries of a pre-committed policy that concern `path`: those whose glob's literal
/// folder is the path's or one of its parents, or lies under the path.
fn entries_near<'a>(entries: &'a [crate::twin::PolicyEntry], path: &str) -> Vec<&'a crate::twin::PolicyEntry> {
    entries
        .iter()
        .filter(|e| {
            let lit = e.path_glob.split(['*', '?', '[', '{']).next().unwrap_or("");
            let dir = &lit[..lit.rfind('/').map_or(0, |i| i + 1)];
            path.starts_with(dir) || lit.starts_with(path)
        })
        .collect()
}

/// What the request is, sanitized.
fn sanitized_request(inp: &Vote1Input<'_>) -> Value {
    json!({"path": inp.path.to_string(), "access": inp.access})
}

/// The similar past tasks vote 1 is shown: the most similar few, each with its accesses and
/// approvals in the request's top folder (the others only counted).
fn similar_near(inp: &Vote1Input<'_>) -> Value {
    let top = inp.path.tokens().first();
    let near = |p: &crate::sanitize::SanitizedPath| p.tokens().first() == top;
    let tasks: Vec<Value> = inp
        .session
        .similar
        .iter()
        .take(PROMPT_SIMILAR.min(SIMILAR_K))
        .map(|&(i, w)| {
            let t = &inp.knowledge.tasks[i];
            let accesses: Vec<String> = t.accesses.iter().filter(|(p, _, _)| near(p)).map(|(p, a, _)| format!("{a} {p}")).collect();
            let approvals: Vec<String> = t.approvals.iter().map(|r| format!("{} {}", r.access.iter().map(|a| a.as_str()).collect::<Vec<_>>().join(","), r.glob)).collect();
            json!({
                "similarity": (w as f64 * 100.0).round() / 100.0,
                "prompt": t.prompt.as_str(),
                "accesses": accesses,
                "elsewhere": t.accesses.len() - accesses.len(),
                "approvals": approvals,
            })
        })
        .collect();
    json!(tasks)
}

/// The trusted session as the votes see it: the user's prompts, the names typed in them
/// and this session's grants, all sanitized but the prompts.
fn trusted_session(inp: &Vote1Input<'_>) -> Value {
    json!({
        "prompts": inp.session.prompts.iter().map(|p| p.as_str()).collect::<Vec<_>>(),
        "names_in_prompts": inp.session.typed.iter().map(|t| t.to_string()).collect::<Vec<_>>(),
        "granted": inp.session.grants.iter().map(|(p, a)| format!("{a} {p}")).collect::<Vec<_>>(),
    })
}

/// The prompt of vote 1: trusted text and sanitized tokens only. The standing compaction of
/// the policies comes first (the stable prefix), the session, the similar tasks and the
/// request last.
pub fn vote1_prompt(inp: &Vote1Input<'_>) -> Prompt {
    let parts = JsonParts::new()
        .add(Section::Policies, "user_policies", &standing_policies(inp.knowledge))
        .add(Section::PastTasks, "user_folders", &standing_workspace(inp.knowledge))
        .add(Section::Session, "session", &trusted_session(inp))
        .add(Section::PastTasks, "similar_past_tasks", &similar_near(inp))
        .add(Section::Request, "request", &sanitized_request(inp))
        .finish();
    Prompt { system: VOTE1_PROMPT.to_string(), parts, stable: 2 }
}

/// The content vote 2 is shown: cut to [`PROMPT_CONTENT`] characters.
fn shown_content(content: Option<&[u8]>) -> Option<String> {
    content.map(|c| {
        let s = String::from_utf8_lossy(c);
        let t: String = s.chars().take(PROMPT_CONTENT).collect();
        if t.len() < s.len() {
            format!("{t}\n[... cut]")
        } else {
            t
        }
    })
}

/// The prompt of vote 2: the standing policies first, then the session, the request and
/// what is untrusted about it (no past tasks: vote 1 weighs those).
pub fn vote2_prompt(inp: &Vote2Input<'_>) -> Prompt {
    let content = shown_content(inp.content);
    let mut parts = JsonParts::new()
        .add(Section::Policies, "user_policies", &standing_policies(inp.v1.knowledge))
        .add(Section::PastTasks, "user_folders", &standing_workspace(inp.v1.knowledge))
        .add(Section::Session, "session", &trusted_session(&inp.v1));
    if let Some(p) = inp.policy {
        parts = parts.add(Section::Precommitted, "pre_committed_policy", &json!(entries_near(p.entries(), inp.raw_path)));
    }
    let parts = parts
        .add(Section::Request, "request", &sanitized_request(&inp.v1))
        .add(Section::Request, "requested_name", &json!(inp.raw_path))
        .add(Section::Request, "rationale", &json!(inp.rationale))
        .add(Section::Session, "earlier_requests", &json!(inp.earlier))
        .add(Section::Content, "content", &json!(content))
        .finish();
    Prompt { system: VOTE2_PROMPT.to_string(), parts, stable: 2 }
}

/// The prompt of vote 1 over several requests of one session that share their trusted
/// context: the same stable prefix and session as [`vote1_prompt`], then the numbered
/// items, each with what that request's own vote-1 prompt adds (its similar past tasks and
/// the sanitized request), so it holds nothing a single vote-1 prompt of one of them does
/// not: trusted text and sanitized tokens only.
pub fn vote1_batch_prompt(inputs: &[Vote1Input<'_>]) -> Prompt {
    let Some(first) = inputs.first() else { return Prompt::plain(VOTE1_BATCH_PROMPT, Section::Request, "{}".into()) };
    let items = inputs
        .iter()
        .enumerate()
        .map(|(i, inp)| JsonParts::new().add(Section::Request, "item", &json!(i + 1)).add(Section::PastTasks, "similar_past_tasks", &similar_near(inp)).add(Section::Request, "request", &sanitized_request(inp)).finish())
        .collect();
    let parts = JsonParts::new()
        .add(Section::Policies, "user_policies", &standing_policies(first.knowledge))
        .add(Section::PastTasks, "user_folders", &standing_workspace(first.knowledge))
        .add(Section::Session, "session", &trusted_session(first))
        .add_list(Section::Request, "items", items)
        .finish();
    Prompt { system: VOTE1_BATCH_PROMPT.to_string(), parts, stable: 2 }
}

/// The trusted context a vote-1 prompt shows before its request, as it is written: requests
/// whose prefixes are equal can share one prompt.
fn shared_context(inp: &Vote1Input<'_>) -> String {
    format!("{}{}{}", standing_policies(inp.knowledge), standing_workspace(inp.knowledge), trusted_session(inp))
}

/// The inputs in groups (indices, in order) that share their trusted context, so that one
/// prompt over each group tells the model the truth about each of its requests.
fn groups_by_context<'a>(inputs: impl Iterator<Item = &'a Vote1Input<'a>>) -> Vec<Vec<usize>> {
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, inp) in inputs.enumerate() {
        let key = shared_context(inp);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, g)) => g.push(i),
            None => groups.push((key, vec![i])),
        }
    }
    groups.into_iter().map(|(_, g)| g).collect()
}

/// The section of a prompt's JSON member by its key; `None` for an object whose members are
/// sectioned one by one.
pub fn section_of(key: &str) -> Option<Section> {
    Some(match key {
        "user_policies" => Section::Policies,
        "similar_past_tasks" | "past_tasks" => Section::PastTasks,
        "session_prompts" | "names_in_prompts" | "granted_in_session" | "prompt" | "task" | "memory" | "earlier_requests" => Section::Session,
        "workspace_tree" => Section::Tree,
        "pre_committed_policy" | "policy" => Section::Precommitted,
        "content" => Section::Content,
        "untrusted" | "history" | "request" => return None,
        _ => Section::Request,
    })
}

fn json_parts(v: &Value, out: &mut Vec<(Section, String)>, at: Section) {
    let Some(m) = v.as_object() else {
        out.push((at, v.to_string()));
        return;
    };
    out.push((at, "{".into()));
    for (i, (k, x)) in m.iter().enumerate() {
        let key = format!("{}{}:", if i == 0 { "" } else { "," }, Value::from(k.as_str()));
        match section_of(k) {
            Some(sec) => out.push((sec, format!("{key}{x}"))),
            None => {
                out.push((at, key));
                json_parts(x, out, Section::Request);
            }
        }
    }
    out.push((at, "}".into()));
}

/// A prompt of `system` and the JSON object `v` as serde_json writes it, its members in the
/// sections [`section_of`] names, nothing stable.
pub fn sectioned(system: &str, v: &Value) -> Prompt {
    let mut parts = Vec::new();
    json_parts(v, &mut parts, Section::Request);
    Prompt { system: system.to_string(), parts, stable: 0 }
}

/// A decider that asks a chat model for each vote and for the pre-committed policy.
#[derive(Debug, Clone)]
pub struct LlmDecider<M> {
    model: M,
}

impl<M: ChatModel> LlmDecider<M> {
    /// A decider over `model`.
    pub fn new(model: M) -> Self {
        LlmDecider { model }
    }

    /// The chat model (for baselines that reuse the client).
    pub fn model(&self) -> &M {
        &self.model
    }

    async fn vote(&self, what: &'static str, prompt: Prompt) -> VoteOutcome {
        match self.model.ask(&prompt).await {
            Err(e) => {
                let calls = if matches!(e, DeciderError::MissingConfig { .. } | DeciderError::Client(_)) { 0 } else { 1 };
                VoteOutcome::failed(&e, TokenUsage { calls, ..TokenUsage::default() })
            }
            Ok(ans) => {
                let tokens = prompt.usage(&ans);
                match parse_vote(what, &ans.text) {
                    Ok((verdict, reason)) => VoteOutcome { verdict, reason, mechanism: None, tokens },
                    Err(e) => VoteOutcome::failed(&e, tokens),
                }
            }
        }
    }
}

impl<M: ChatModel> LlmDecider<M> {
    /// One call over `n` requests: each gets its own verdict, the call's tokens are shared
    /// out over them ([`TokenUsage::share`]); a failed call, or an answer that cannot be
    /// read as a whole, denies every one, and a request the answer gives no single readable
    /// verdict denies that one.
    async fn vote_batch(&self, what: &'static str, prompt: Prompt, n: usize) -> Vec<VoteOutcome> {
        match self.model.ask(&prompt).await {
            Err(e) => {
                let calls = if matches!(e, DeciderError::MissingConfig { .. } | DeciderError::Client(_)) { 0 } else { 1 };
                TokenUsage { calls, ..TokenUsage::default() }.share(n).into_iter().map(|t| VoteOutcome::failed(&e, t)).collect()
            }
            Ok(ans) => {
                let tokens = prompt.usage(&ans).share(n);
                match parse_batch_votes(what, &ans.text, n) {
                    Err(e) => tokens.into_iter().map(|t| VoteOutcome::failed(&e, t)).collect(),
                    Ok(items) => items
                        .into_iter()
                        .zip(tokens)
                        .map(|(r, t)| match r {
                            Ok((verdict, reason)) => VoteOutcome { verdict, reason, mechanism: None, tokens: t },
                            Err(e) => VoteOutcome::failed(&e, t),
                        })
                        .collect(),
                }
            }
        }
    }

    /// Votes of `inputs` in groups that share their trusted context ([`groups_by_context`]):
    /// one call per group, a group of one asked with the single prompt.
    async fn grouped<'i, I: Sync>(&self, inputs: &'i [I], v1: impl Fn(&'i I) -> &'i Vote1Input<'i>, single: impl Fn(&'i I) -> Prompt, batch: impl Fn(&[&'i I]) -> Prompt, what: &'static str) -> Vec<VoteOutcome> {
        let groups = groups_by_context(inputs.iter().map(&v1));
        let calls = groups.iter().map(|g| {
            let prompt = match g.as_slice() {
                [one] => single(&inputs[*one]),
                _ => batch(&g.iter().map(|&i| &inputs[i]).collect::<Vec<_>>()),
            };
            let n = g.len();
            async move {
                if n == 1 {
                    vec![self.vote(what, prompt).await]
                } else {
                    self.vote_batch(what, prompt, n).await
                }
            }
        });
        let answers = futures_util::future::join_all(calls).await;
        let mut out: Vec<Option<VoteOutcome>> = (0..inputs.len()).map(|_| None).collect();
        for (g, a) in groups.iter().zip(answers) {
            for (&i, v) in g.iter().zip(a) {
                out[i] = Some(v);
            }
        }
        out.into_iter().map(|v| v.unwrap_or_else(|| VoteOutcome::deny("no verdict for this request (fail closed)").by(super::Mechanism::DeciderError))).collect()
    }
}

impl LlmDecider<OpenAiChat> {
    /// An OpenAI-compatible decider configured from the environment.
    pub fn openai_from_env() -> Result<Self, DeciderError> {
        Ok(LlmDecider::new(OpenAiChat::new(ChatConfig::openai_from_env()?)?))
    }
}

impl LlmDecider<AnthropicChat> {
    /// An Anthropic decider configured from the environment.
    pub fn anthropic_from_env() -> Result<Self, DeciderError> {
        Ok(LlmDecider::new(AnthropicChat::new(ChatConfig::anthropic_from_env()?)?))
    }
}

#[async_trait::async_trait]
impl<M: ChatModel> Decider for LlmDecider<M> {
    fn name(&self) -> &str {
        self.model.backend()
    }

    async fn vote1(&self, input: &Vote1Input<'_>) -> VoteOutcome {
        self.vote("vote 1", vote1_prompt(input)).await
    }

    async fn vote2(&self, input: &Vote2Input<'_>) -> VoteOutcome {
        self.vote("vote 2", vote2_prompt(input)).await
    }

    async fn vote1_batch(&self, inputs: &[Vote1Input<'_>]) -> Vec<VoteOutcome> {
        let batch = |items: &[&Vote1Input<'_>]| vote1_batch_prompt(&items.iter().map(|i| **i).collect::<Vec<_>>());
        self.grouped(inputs, |i| i, vote1_prompt, batch, "vote 1").await
    }

    fn costly(&self) -> bool {
        true
    }

    async fn policy(&self, input: &PolicyInput<'_>) -> Result<PolicyAnswer, DeciderError> {
        let similar: Vec<Value> = input
            .similar
            .iter()
            .map(|&(i, w)| {
                let t = &input.state.tasks[i];
                json!({"similarity": w, "prompt": t.prompt_text(), "accesses": t.accesses.iter().map(|(a, _)| a).collect::<Vec<_>>(), "approvals": t.approvals})
            })
            .collect();
        let user = json!({
            "prompt": input.prompt,
            "workspace_tree": input.workspace_tree,
            "similar_past_tasks": similar,
            "user_policies": input.state.policies,
        });
        let prompt = sectioned(POLICY_PROMPT, &user);
        let ans = self.model.ask(&prompt).await?;
        let tokens = prompt.usage(&ans);
        let entries = parse_policy(&ans.text)?;
        Ok(PolicyAnswer { entries, tokens })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_logged_once_per_burst() {
        let mut t = Tally { log_every: Some(Duration::from_secs(60)), ..Tally::default() };
        let t0 = std::time::Instant::now();
        let first = t.fail(t0, "http://127.0.0.1:9/v1/chat/completions: openai: HTTP 500: boom".into()).expect("the first failure is logged");
        assert!(first.contains("127.0.0.1:9") && first.contains("HTTP 500"), "{first}");
        for i in 1..100 {
            assert_eq!(t.fail(t0 + Duration::from_millis(i * 100), "again".into()), None, "failure {i} of the burst is not logged");
        }
        let later = t.fail(t0 + Duration::from_secs(61), "latest".into()).expect("a summary after the interval");
        assert!(later.starts_with("100 model calls failed in the last 60 s") && later.contains("latest"), "{later}");
        let s = &t.summary;
        assert_eq!((s.calls, s.failed), (101, 101));
        assert!(s.first.as_deref().unwrap().contains("HTTP 500"));
        // A counting tally never logs.
        let mut quiet = Tally::default();
        assert_eq!(quiet.fail(t0, "x".into()), None);
    }
}
