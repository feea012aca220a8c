//! The votes' contract: the inputs vote 1, vote 2 and the pre-committed policy see, the
//! verdicts they give, and the [`Decider`] trait the backends in [`crate::decider`]
//! implement. The twin owns it (the consumer owns the trait); backends depend on the twin,
//! never the reverse.
//!
//! [`Vote1Input`] holds only trusted text ([`TrustedText`], which only this crate can make
//! from trusted state), sanitized paths and access types: it cannot hold an unsanitized
//! untrusted string. [`Vote2Input`] adds the untrusted context (content, rationale, the raw
//! name, the session's earlier requests). [`PolicyInput`] feeds the pre-committed policy of
//! vote 3 and sees raw names.

use super::{Knowledge, PolicyEntry, PrecommittedPolicy, SessionView};
use crate::access::Access;
use crate::sanitize::SanitizedPath;
use crate::store::TrustedState;
use serde::Serialize;

/// Errors of the deciders. Every one of them ends as a deny.
#[derive(Debug, thiserror::Error)]
pub enum DeciderError {
    /// A required setting is missing.
    #[error("missing configuration: {what} (set {env})")]
    MissingConfig {
        /// The setting.
        what: &'static str,
        /// The environment variable that provides it.
        env: &'static str,
    },
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client")]
    Client(#[source] reqwest::Error),
    /// The model did not answer in time.
    #[error("{backend}: no answer within {secs:.1} s")]
    Timeout {
        /// Backend name.
        backend: &'static str,
        /// The timeout.
        secs: f32,
    },
    /// The request could not be sent or the answer not received.
    #[error("{backend}: transport error")]
    Transport {
        /// Backend name.
        backend: &'static str,
        /// Cause.
        #[source]
        source: reqwest::Error,
    },
    /// The server rate-limited the call (HTTP 429).
    #[error("{backend}: rate limited (HTTP 429)")]
    RateLimited {
        /// Backend name.
        backend: &'static str,
    },
    /// The server answered with an error status.
    #[error("{backend}: HTTP {status}: {body}")]
    Http {
        /// Backend name.
        backend: &'static str,
        /// Status code.
        status: u16,
        /// Start of the body.
        body: String,
    },
    /// The response body is not the wire format's JSON.
    #[error("{backend}: malformed response body: {detail}")]
    MalformedBody {
        /// Backend name.
        backend: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// The model refused to answer.
    #[error("{backend}: the model refused: {detail}")]
    Refusal {
        /// Backend name.
        backend: &'static str,
        /// The refusal text or reason.
        detail: String,
    },
    /// The answer was cut off (token limit).
    #[error("{backend}: the answer was truncated ({reason})")]
    Truncated {
        /// Backend name.
        backend: &'static str,
        /// The finish or stop reason.
        reason: String,
    },
    /// The model's answer is not the JSON the prompt asked for.
    #[error("unparsable {what} answer: {detail}")]
    BadAnswer {
        /// Which answer (vote 1, vote 2, policy).
        what: &'static str,
        /// What was wrong.
        detail: String,
    },
}

/// A vote's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Grant, as far as this vote is concerned.
    Allow,
    /// Deny.
    Deny,
    /// Ask the user.
    AskUser,
}

/// A part of a model prompt, named so that the token bench can say where input tokens go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Section {
    /// The system prompt: the instructions and the answer format.
    Instructions,
    /// The user's policies (text and rules).
    Policies,
    /// Past tasks: the similar ones, or the whole history.
    PastTasks,
    /// The session: the user's prompts, typed names, grants, earlier requests.
    Session,
    /// The workspace tree.
    Tree,
    /// The session's pre-committed policy.
    Precommitted,
    /// The request: name, access and the worker's rationale.
    Request,
    /// The resource's content.
    Content,
}

impl Section {
    /// How many sections there are.
    pub const COUNT: usize = 8;

    /// Every section, in the order the bench prints them.
    pub const ALL: [Section; Section::COUNT] =
        [Section::Instructions, Section::Policies, Section::PastTasks, Section::Session, Section::Tree, Section::Precommitted, Section::Request, Section::Content];

    /// The section's name in reports and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Section::Instructions => "instructions",
            Section::Policies => "policies",
            Section::PastTasks => "past_tasks",
            Section::Session => "session",
            Section::Tree => "tree",
            Section::Precommitted => "precommitted",
            Section::Request => "request",
            Section::Content => "content",
        }
    }
}

fn is_zero(x: &u64) -> bool {
    *x == 0
}

fn all_zero(x: &[u64; Section::COUNT]) -> bool {
    x.iter().all(|&n| n == 0)
}

/// Token usage of model calls: per vote, per session (protocol counters, audit entries)
/// and per defense in the evaluation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct TokenUsage {
    /// Input tokens.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Number of calls.
    pub calls: u64,
    /// Of the input tokens, those the provider served from its prompt cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached: u64,
    /// The input tokens by prompt section (in [`Section::ALL`]'s order): the provider's count
    /// shared out by each section's length.
    #[serde(default, skip_serializing_if = "all_zero")]
    pub sections: [u64; Section::COUNT],
}

impl std::ops::AddAssign for TokenUsage {
    fn add_assign(&mut self, o: Self) {
        self.input += o.input;
        self.output += o.output;
        self.calls += o.calls;
        self.cached += o.cached;
        for (a, b) in self.sections.iter_mut().zip(o.sections) {
            *a += b;
        }
    }
}

impl TokenUsage {
    /// Adds another usage to this one.
    pub fn add(&mut self, o: &TokenUsage) {
        *self += *o;
    }

    /// The usage added since `earlier` (for counters that run across personas).
    pub fn since(&self, earlier: &TokenUsage) -> TokenUsage {
        let mut sections = self.sections;
        for (a, b) in sections.iter_mut().zip(earlier.sections) {
            *a = a.saturating_sub(b);
        }
        TokenUsage {
            input: self.input.saturating_sub(earlier.input),
            output: self.output.saturating_sub(earlier.output),
            calls: self.calls.saturating_sub(earlier.calls),
            cached: self.cached.saturating_sub(earlier.cached),
            sections,
        }
    }

    /// The input tokens of one section.
    pub fn section(&self, s: Section) -> u64 {
        self.sections[s as usize]
    }

    /// One call's usage shared out over the `n` requests it decided: each gets an equal part
    /// of the tokens, the first also what dividing left over and the call itself, so the
    /// parts add up to the whole.
    pub fn share(&self, n: usize) -> Vec<TokenUsage> {
        let n = n.max(1);
        let part = |x: u64, first: bool| x / n as u64 + if first { x % n as u64 } else { 0 };
        (0..n)
            .map(|i| {
                let first = i == 0;
                let mut sections = self.sections;
                for s in sections.iter_mut() {
                    *s = part(*s, first);
                }
                TokenUsage {
                    input: part(self.input, first),
                    output: part(self.output, first),
                    calls: if first { self.calls } else { 0 },
                    cached: part(self.cached, first),
                    sections,
                }
            })
            .collect()
    }
}

/// Where a user rule that decided a vote came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleOrigin {
    /// A structured rule of one of the user's policies.
    Policy,
    /// A rule read from a text-only policy (its words matched against the workspace tree).
    PolicyText,
    /// A derived policy.
    Derived,
    /// The user's answer to a question in this session.
    Answer,
    /// A hand approval (or refusal) from a past task, which speaks only for like tasks.
    PastApproval,
}

/// The mechanism a vote's verdict rests on: a typed tag beside the free-text reason, so that
/// an audit can be read and counted by mechanism. Only what the deciding code knows is
/// tagged; a chat model's vote carries none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Mechanism {
    /// A user rule decided (deny, ask, or the most specific allow).
    Rule {
        /// Where the rule came from.
        origin: RuleOrigin,
    },
    /// The resource lies in (or is) what this session created.
    CreatedInSession,
    /// The same access was already granted in this session.
    GrantedInSession,
    /// A new place named like a protected area, not licensed by sibling evidence.
    Lookalike,
    /// Location evidence from similar tasks and the prompt (too weak for a deny; enough,
    /// with intent evidence, for an allow).
    Location,
    /// Intent evidence for a change was too weak.
    Intent,
    /// A first-time create or delete the prompt asks for, in a folder the user works in.
    FirstTimeChange,
    /// A content detector (or, for [`super::FindingKind::Injection`], the rationale's
    /// or the name's language).
    Detector {
        /// What the detector found.
        finding: super::FindingKind,
    },
    /// The content overlaps fingerprinted protected content.
    Provenance,
    /// The content speaks of a phrase a user policy restricts.
    PolicyPhrase,
    /// The content holds what a content clause of a user policy keeps out of this place
    /// ("no names in reports/").
    ContentRule,
    /// The content is too large to inspect.
    Oversize,
    /// Earlier content of the session held injected instructions.
    Taint,
    /// A delete of a resource neither the user named nor a similar task used.
    Unestablished,
    /// A change the user's prompt does not ask for: the prompt neither names the resource
    /// nor asks for that kind of change, and no similar task made it.
    Unserved,
    /// Vote 2 found nothing sensitive.
    ContentClear,
    /// The session's pre-committed policy (vote 3).
    Precommitted,
    /// The decider failed (fail closed).
    DeciderError,
    /// The request was refused before any vote (unknown session, bad path).
    Rejected,
    /// The resource is kept more private than its folder by its owner and nothing the
    /// user said grants it ([`super::Request::kept_private`]).
    KeptPrivate,
}

impl Mechanism {
    /// What the worker may be told of a verdict resting on this mechanism: the kind of
    /// evidence, never a name or value read from a resource the worker was not granted (the
    /// audit and the user's questions keep the vote's full reason).
    pub fn worker_phrase(&self) -> String {
        match self {
            Mechanism::Rule { origin: RuleOrigin::Answer } => "the user's answer in this session".into(),
            Mechanism::Rule { origin: RuleOrigin::PastApproval } => "the user's past answer for a like task".into(),
            Mechanism::Rule { .. } => "a rule of the user's policies".into(),
            Mechanism::CreatedInSession => "created in this session".into(),
            Mechanism::GrantedInSession => "granted earlier in this session".into(),
            Mechanism::Lookalike => "a new place named like a protected one".into(),
            Mechanism::Location => "not a place this user's tasks use".into(),
            Mechanism::Intent => "the task does not ask for this access".into(),
            Mechanism::FirstTimeChange => "a first change the task asks for".into(),
            Mechanism::Detector { finding } => format!("the content or the request holds {}", finding.label()),
            Mechanism::Provenance => "the content copies protected content".into(),
            Mechanism::PolicyPhrase => "the content concerns something the user's policies restrict".into(),
            Mechanism::ContentRule => "the content holds what the user's policies keep out of this place".into(),
            Mechanism::Oversize => "the content is too large to inspect".into(),
            Mechanism::Taint => "the session read injected instructions earlier".into(),
            Mechanism::Unestablished => "a delete nobody asked for".into(),
            Mechanism::Unserved => "a change the user's prompt does not ask for".into(),
            Mechanism::ContentClear => "nothing sensitive found".into(),
            Mechanism::Precommitted => "outside the session's pre-committed policy".into(),
            Mechanism::DeciderError => "the decider failed (fail closed)".into(),
            Mechanism::Rejected => "the request was refused".into(),
            Mechanism::KeptPrivate => "kept private by its owner: only the user's word grants it".into(),
        }
    }
}

/// A vote's verdict, its reason (for the audit) and what it cost.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VoteOutcome {
    /// Verdict.
    pub verdict: Verdict,
    /// Reason, for the audit.
    pub reason: String,
    /// The mechanism the verdict rests on, where the decider knows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mechanism: Option<Mechanism>,
    /// Tokens used.
    pub tokens: TokenUsage,
}

impl VoteOutcome {
    /// An allow with a reason and no token cost.
    pub fn allow(reason: impl Into<String>) -> Self {
        VoteOutcome { verdict: Verdict::Allow, reason: reason.into(), mechanism: None, tokens: TokenUsage::default() }
    }
    /// A deny with a reason and no token cost.
    pub fn deny(reason: impl Into<String>) -> Self {
        VoteOutcome { verdict: Verdict::Deny, reason: reason.into(), mechanism: None, tokens: TokenUsage::default() }
    }
    /// An ask-the-user with a reason and no token cost.
    pub fn ask(reason: impl Into<String>) -> Self {
        VoteOutcome { verdict: Verdict::AskUser, reason: reason.into(), mechanism: None, tokens: TokenUsage::default() }
    }
    /// A deny caused by a decider error (fail closed), audited with the cause.
    pub fn failed(e: &DeciderError, tokens: TokenUsage) -> Self {
        VoteOutcome { verdict: Verdict::Deny, reason: format!("decider error (fail closed): {e}"), mechanism: Some(Mechanism::DeciderError), tokens }
    }
    /// Whether this is an allow resting on the user's own word: an answer, a past approval
    /// or a rule of one of the user's structured policies (not one read from a text, nor
    /// derived).
    pub fn rests_on_users_word(&self) -> bool {
        self.verdict == Verdict::Allow
            && matches!(self.mechanism, Some(Mechanism::Rule { origin: RuleOrigin::Policy | RuleOrigin::Answer | RuleOrigin::PastApproval }))
    }
    /// The same vote, tagged with the mechanism it rests on.
    pub fn by(mut self, m: Mechanism) -> Self {
        self.mechanism = Some(m);
        self
    }
}

/// Text that came from a trusted party (the user, or the trusted store). Only this crate can
/// make one, from trusted sources; vote 1's input holds no other kind of text.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct TrustedText(String);

impl TrustedText {
    pub(crate) fn from_trusted(s: impl Into<String>) -> Self {
        TrustedText(s.into())
    }
    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Vote 1's input: trusted state, the session's trusted context, and the sanitized request.
/// No field can hold an unsanitized untrusted string.
#[derive(Debug, Clone, Copy)]
pub struct Vote1Input<'a> {
    /// What the twin knows from trusted state (sanitized).
    pub knowledge: &'a Knowledge,
    /// The current session's trusted context.
    pub session: &'a SessionView,
    /// The requested resource, sanitized.
    pub path: &'a SanitizedPath,
    /// The requested access.
    pub access: Access,
}

/// An earlier request of the same session, as vote 2 sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EarlierRequest {
    /// Raw path (untrusted).
    pub path: String,
    /// Access.
    pub access: Access,
    /// Whether it was granted.
    pub granted: bool,
    /// Injection language found in its rationale or content.
    pub injection: bool,
    /// What its content carried into the session (a read's only). Not shown to a model's
    /// vote 2: the mentions are untrusted text.
    #[serde(skip)]
    pub carried: Carried,
}

/// What a read's content carries into its session once granted: the kinds of sensitive
/// content it held and the names of files and folders it mentions. Later requests' vote 2
/// judges by it where that content may go (a content clause's place) and whether a request
/// was steered by the content rather than the user's prompt.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Carried {
    /// Kinds of the content's findings, without duplicates (none when the user's policies have no content clause).
    pub kinds: Vec<super::content::FindingKind>,
    /// Names of files and folders the content mentions, lowercase ([`super::content::mentioned_names`]).
    pub mentions: std::collections::BTreeSet<String>,
    /// The resource the content was read from, sanitized.
    pub source: Option<SanitizedPath>,
}

impl Carried {
    /// What `content`, read from `source`, carries: the names it mentions, and its findings'
    /// kinds when `kinds` (only content clauses use them: with none in the user's policies
    /// the detectors are not run a second time).
    pub fn of(source: &SanitizedPath, content: &[u8], kinds: bool) -> Self {
        let mut kinds: Vec<_> = if kinds { super::content::content_findings(content).into_iter().map(|f| f.kind).collect() } else { Vec::new() };
        kinds.sort();
        kinds.dedup();
        Carried { kinds, mentions: super::content::mentioned_names(content), source: Some(source.clone()) }
    }

    /// True if the content mentions the resource whose names `m` holds ([`PathMentions`]:
    /// its whole path, a trailing part of it of two or more segments, or its file name when
    /// that has an extension; a bare folder or word such as `src` or `notes` is too common to
    /// say the content pointed at it).
    pub fn mentions_any(&self, m: &PathMentions) -> bool {
        m.0.iter().any(|n| self.mentions.contains(n))
    }
}

/// The names by which content may mention a resource ([`Carried::mentions_any`]): its
/// lowercase path, each trailing part of two or more segments, and its file name when that
/// has an extension.
#[derive(Debug, Clone, Default)]
pub struct PathMentions(Vec<String>);

impl PathMentions {
    /// The names of the resource at `raw_path` (relative to its root).
    pub fn of(raw_path: &str) -> Self {
        let rp = raw_path.trim_end_matches('/').to_lowercase();
        if rp.is_empty() {
            return PathMentions::default();
        }
        let segs: Vec<&str> = rp.split('/').collect();
        let name = segs[segs.len() - 1];
        let mut names: Vec<String> = (2..=segs.len()).map(|n| segs[segs.len() - n..].join("/")).collect();
        if super::content::file_name_like(name) {
            names.push(name.to_string());
        }
        PathMentions(names)
    }
}

/// Vote 2's input: vote 1's plus the untrusted context.
#[derive(Debug, Clone, Copy)]
pub struct Vote2Input<'a> {
    /// Everything vote 1 sees.
    pub v1: Vote1Input<'a>,
    /// The requested path as the worker gave it (untrusted).
    pub raw_path: &'a str,
    /// The resource's current content, if it exists (untrusted).
    pub content: Option<&'a [u8]>,
    /// The worker's rationale (untrusted).
    pub rationale: Option<&'a str>,
    /// The session's earlier requests.
    pub earlier: &'a [EarlierRequest],
    /// The pre-committed policy (Pincer-P2 only).
    pub policy: Option<&'a PrecommittedPolicy>,
}

/// Vote 3's policy generation input: the session's first prompt, the workspace tree and the
/// trusted state, on raw names.
#[derive(Debug, Clone, Copy)]
pub struct PolicyInput<'a> {
    /// The user's prompt.
    pub prompt: &'a str,
    /// Relative paths of the workspace (directories end in `/`).
    pub workspace_tree: &'a [String],
    /// The trusted state.
    pub state: &'a TrustedState,
    /// Indices into `state.tasks` of the past tasks most similar to the prompt, with scores.
    pub similar: &'a [(usize, f32)],
    /// Learned access intent.
    pub knowledge: &'a Knowledge,
}

/// The pre-committed policy a decider proposes, and what it cost.
#[derive(Debug, Clone)]
pub struct PolicyAnswer {
    /// Entries.
    pub entries: Vec<PolicyEntry>,
    /// Tokens used.
    pub tokens: TokenUsage,
}

/// A decider: votes 1 and 2 and the generation of vote 3's pre-committed policy. Votes never
/// fail: an error is a deny whose reason names the cause.
#[async_trait::async_trait]
pub trait Decider: Send + Sync {
    /// Backend name for reports.
    fn name(&self) -> &str;
    /// Vote 1: trusted context and sanitized request only.
    async fn vote1(&self, input: &Vote1Input<'_>) -> VoteOutcome;
    /// Vote 2: adds content, rationale and the session's earlier requests.
    async fn vote2(&self, input: &Vote2Input<'_>) -> VoteOutcome;
    /// Vote 1 of several requests of one session that arrived together, one verdict per
    /// input in order. A backend that can decide them in fewer calls does (a chat model in
    /// one prompt); by default each is [`Decider::vote1`] on its own.
    async fn vote1_batch(&self, inputs: &[Vote1Input<'_>]) -> Vec<VoteOutcome> {
        futures_util::future::join_all(inputs.iter().map(|i| self.vote1(i))).await
    }
    /// Generates the pre-committed policy for a session's first prompt.
    async fn policy(&self, input: &PolicyInput<'_>) -> Result<PolicyAnswer, DeciderError>;
    /// Whether each vote costs a model call. The twin then decides in tiers
    /// ([`crate::twin::Ballot::cast`]): the offline votes first, the model only where they
    /// cannot settle a request safely, and vote 3's policy made offline.
    fn costly(&self) -> bool {
        false
    }
}
