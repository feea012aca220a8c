//! The digital twin: it holds the user's trusted state, makes each session's pre-committed
//! policy at the first prompt, and decides requests by the conjunction of three votes.
//!
//! - Vote 1 sees trusted context and the sanitized request only ([`Vote1Input`]).
//! - Vote 2 adds the resource's content, the worker's rationale and the session's earlier
//!   requests (and, for [`Variant::PincerP2`], the pre-committed policy).
//! - Vote 3 checks the pre-committed policy; uncovered requests are denied.
//!
//! A grant needs all three, so no untrusted text can on its own turn a denial into a grant.
//! Notes from the worker are never accepted: there is no function that takes one. Requests
//! denied repeatedly while the worker keeps asking become questions for the user; the user's
//! answer is recorded as a trusted approval.
//!
//! What the votes look at lives in submodules: [`knowledge`] (the sanitized trusted state and
//! a session's view of it), [`content`] (detectors) and [`secrets`] (credentials by structure),
//! [`provenance`] (fingerprints of protected
//! content), [`text`] (words, BM25, learned intent), [`policy`] (vote 3) and [`votes`] (the
//! offline votes). The backends that make votes 1 and 2 are in [`crate::decider`].

pub mod content;
pub mod knowledge;
pub mod policy;
pub mod provenance;
pub mod secrets;
pub mod rules;
pub mod text;
pub mod vote;
pub mod votes;

pub use content::{content_findings, injection_findings, Finding, FindingKind};
pub use knowledge::{Knowledge, SanRule, SessionView};
pub use policy::{PolicyEntry, PrecommittedPolicy};
pub use provenance::{Provenance, ProvenanceHit};

use crate::access::Access;
use vote::{Carried, Decider, DeciderError, EarlierRequest, Mechanism, PolicyAnswer, PolicyInput, RuleOrigin, TokenUsage, TrustedText, Verdict, Vote1Input, Vote2Input, VoteOutcome};
use crate::sanitize::{SanitizedPath, Sanitizer};
use crate::store::{check_rel_path, Permission, Store, StoreError, TrustedState, TwinGrant, UserApproval, UserPrompt};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Arc;

/// Errors of the twin.
#[derive(Debug, thiserror::Error)]
pub enum TwinError {
    /// No session of that name is open.
    #[error("no open session {0:?}")]
    UnknownSession(String),
    /// A session of that name is open or already in the trusted state.
    #[error("session {0:?} already exists")]
    SessionExists(String),
    /// A prompt was empty.
    #[error("empty prompt")]
    EmptyPrompt,
    /// No pending question has that id.
    #[error("no pending question {0}")]
    NoSuchQuestion(u64),
    /// The trusted store refused a write.
    #[error("trusted store")]
    Store(#[from] StoreError),
}

/// Which Pincer variant the twin runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Variant {
    /// Votes 1, 2, 3 as in the paper.
    Pincer,
    /// Vote 2 also sees the pre-committed policy.
    PincerP2,
}

/// Settings of the twin.
#[derive(Debug, Clone)]
pub struct TwinConfig {
    /// Variant.
    pub variant: Variant,
    /// Denials of the same request in a session after which a further ask becomes a question
    /// for the user.
    pub escalate_after: u32,
}

impl Default for TwinConfig {
    fn default() -> Self {
        TwinConfig { variant: Variant::Pincer, escalate_after: 2 }
    }
}

/// A worker's request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Path relative to the protected root (untrusted: the worker chose it).
    pub path: String,
    /// Access type.
    pub access: Access,
    /// The worker's rationale (untrusted).
    pub rationale: Option<String>,
    /// The resource's current content, if it exists (untrusted).
    pub content: Option<Vec<u8>>,
    /// Whether the resource (or a folder on the way to it) is kept more private than its
    /// folder: its mode gives its group and others nothing where the folder's gives them
    /// something (trusted: read by the kernel and the daemon, not said by the worker). It
    /// is granted only on the user's word: an answer, an approval, a rule of a policy.
    pub kept_private: bool,
}

/// What the twin (or any evaluated defense) decided about a request. The daemon's
/// [`crate::daemon::protocol::RequestOutcome`] extends it with what the user's answer, its
/// absence or a refusal made of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Granted for the rest of the session.
    Grant,
    /// Denied.
    Deny,
    /// Sent to the user as a pending question ([`Decision::question`]).
    Escalate,
}

/// One vote's verdict and reason, kept for the audit (the daemon's audit log and
/// `pincer eval --audit` write it as is).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct VoteRecord {
    /// Verdict.
    pub verdict: Verdict,
    /// Reason.
    pub reason: String,
    /// The mechanism the verdict rests on, where the decider knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mechanism: Option<Mechanism>,
}

/// A decision with its three votes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    /// Outcome.
    pub outcome: Outcome,
    /// The question the user is asked, when the outcome is [`Outcome::Escalate`].
    pub question: Option<u64>,
    /// Votes 1, 2, 3.
    pub votes: [VoteRecord; 3],
    /// Tokens the votes used.
    pub tokens: TokenUsage,
}

impl Decision {
    /// True if granted.
    pub fn granted(&self) -> bool {
        self.outcome == Outcome::Grant
    }

    /// A denial before (or without) any vote: each vote says why.
    pub fn rejected(reason: String) -> Self {
        let v = VoteRecord { verdict: Verdict::Deny, reason, mechanism: Some(Mechanism::Rejected) };
        Decision { outcome: Outcome::Deny, question: None, votes: [v.clone(), v.clone(), v], tokens: TokenUsage::default() }
    }
}

/// A question for the user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Question {
    /// Id.
    pub id: u64,
    /// Session.
    pub session: String,
    /// The requested path.
    pub path: String,
    /// Access.
    pub access: Access,
    /// Why the user is asked.
    pub reason: String,
}

/// The numbering of questions for the user. Twins that share one (the daemon's twins, one
/// per user) never give two questions the same id, so the id a twin gives is the id the
/// user answers.
#[derive(Debug, Clone)]
pub struct QuestionIds(Arc<std::sync::atomic::AtomicU64>);

impl Default for QuestionIds {
    fn default() -> Self {
        QuestionIds(Arc::new(std::sync::atomic::AtomicU64::new(1)))
    }
}

impl QuestionIds {
    /// The next id (ids start at 1).
    pub fn next(&self) -> u64 {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// Numbers the next questions after `last` (ids an earlier daemon gave stay its own).
    pub fn continue_after(&self, last: u64) {
        self.0.fetch_max(last.saturating_add(1), std::sync::atomic::Ordering::Relaxed);
    }
}

/// How far a user's approval reaches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalScope {
    /// The request it answers only: the twin keeps no approval and no grant from it.
    Once,
    /// The rest of the session: later requests of the same resource and access are approved;
    /// nothing is recorded in the trusted state.
    Session,
    /// The session, and recorded as a user approval in the trusted state, which licenses the
    /// resource for later tasks like this one (until `pincer policy remove`).
    #[default]
    Always,
}

/// A user's answer in an open session, with its reach.
#[derive(Debug, Clone)]
struct SessionApproval {
    approval: UserApproval,
    scope: ApprovalScope,
    question: u64,
}

/// What a denial, a question and an approval of `access` on `path` stand for: the request
/// itself; for creating an entry, creating such a name (hidden or not) in its folder. The
/// kernel grants a creation by folder, and a worker that makes temporary names (`git`'s
/// objects, an editor's swap files) asks again under another name after each denial: its
/// denials are of one need, which reaches the user as one question once repeated.
fn ask_key(path: &str, access: Access) -> (String, Access) {
    if access == Access::Create {
        let (folder, hidden) = created_in(path);
        let kind = if hidden { ".*" } else { "*" };
        return (if folder.is_empty() { kind.to_string() } else { format!("{folder}/{kind}") }, access);
    }
    (path.to_string(), access)
}

/// The folder a create of `path` makes its entry in (empty at the root), and whether the
/// entry's name is hidden: what the kernel grants a creation by.
pub fn created_in(path: &str) -> (&str, bool) {
    let p = path.trim_end_matches('/');
    let (folder, name) = p.rsplit_once('/').unwrap_or(("", p));
    (folder, name.starts_with('.'))
}

impl SessionApproval {
    /// Whether this is the user's approval of what a request stands for (its
    /// [`ask_key`]).
    fn allows(&self, asked: &(String, Access)) -> bool {
        self.approval.permission == Permission::Allow && ask_key(&self.approval.path_glob, self.approval.access) == *asked
    }
}

fn answer_source(question: u64) -> String {
    format!("the user's answer to question {question}")
}

/// What starting a session produced.
#[derive(Debug, Clone)]
pub struct SessionStart {
    /// The pre-committed policy's entries (empty if generation failed).
    pub policy: PrecommittedPolicy,
    /// Tokens used to generate it.
    pub tokens: TokenUsage,
}

/// What votes 1 and 2 of one request see, owned (a copy of the session's view and earlier
/// requests as they were when it was made), so that the votes can be cast away from the twin
/// and the twin decides other requests meanwhile. Made by [`Twin::ballot`]; its votes go
/// back to [`Twin::conclude`].
pub struct Ballot {
    decider: Arc<dyn Decider>,
    knowledge: Arc<Knowledge>,
    view: Arc<SessionView>,
    path: SanitizedPath,
    access: Access,
    raw_path: String,
    content: Option<Vec<u8>>,
    rationale: Option<String>,
    earlier: Arc<Vec<EarlierRequest>>,
    policy: Option<PrecommittedPolicy>,
    /// Whether vote 3 allowed the request when the ballot was made (a tier hint only:
    /// [`Twin::conclude`] checks vote 3 again). Made for a costly decider only.
    precommitted: bool,
    /// Whether the user approved this request in the session when the ballot was made. Made
    /// for a costly decider only.
    user_approved: bool,
}

impl std::fmt::Debug for Ballot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ballot").field("decider", &self.decider.name()).field("access", &self.access).finish_non_exhaustive()
    }
}

impl Ballot {
    /// Casts votes 1 and 2. Neither sees the other's verdict (vote 2's input holds vote 1's
    /// input, not its outcome), so they run concurrently; each is a deny on a decider error.
    ///
    /// A costly decider ([`Decider::costly`]) is asked in tiers. The offline votes come
    /// first, and their denials stand: a request no grant can come of (vote 1 or vote 3
    /// denies, or vote 2 does without the user's approval) is settled without the model. An
    /// allow is settled without the model only when offline vote 1 rests on evidence no
    /// untrusted context can make: an explicit rule of the user's for this object and
    /// access, the user's answer in this session, or a grant already made in this session.
    /// Everything else goes to the model as well, and each vote is the conjunction of its
    /// offline and its model verdict, so the model can only turn an allow into a deny.
    pub async fn cast(self) -> Votes {
        if self.decider.costly() {
            return self.cast_tiered().await;
        }
        let (v1_in, v2_in) = self.inputs();
        let (v1, v2) = tokio::join!(self.decider.vote1(&v1_in), self.decider.vote2(&v2_in));
        Votes { v1, v2, injection: self.injection(), carried: self.carried() }
    }
}

impl Ballot {
    /// The two votes' inputs, borrowed from the ballot (vote 2's holds vote 1's).
    fn inputs(&self) -> (Vote1Input<'_>, Vote2Input<'_>) {
        let v1 = Vote1Input { knowledge: &self.knowledge, session: &self.view, path: &self.path, access: self.access };
        let v2 = Vote2Input {
            v1,
            raw_path: &self.raw_path,
            content: self.content.as_deref(),
            rationale: self.rationale.as_deref(),
            earlier: &self.earlier,
            policy: self.policy.as_ref(),
        };
        (v1, v2)
    }

    async fn cast_tiered(self) -> Votes {
        let (v1_in, v2_in) = self.inputs();
        match self.offline_tier() {
            Tier::Settled(votes) => votes,
            Tier::Model(o1, o2) => {
                let (m1, m2) = tokio::join!(self.decider.vote1(&v1_in), self.decider.vote2(&v2_in));
                Votes { v1: both(o1, m1), v2: both(o2, m2), injection: self.injection(), carried: self.carried() }
            }
        }
    }

    /// The offline votes of a costly decider's tiers: settled (an offline denial, or an
    /// allow on trusted evidence), or the offline verdicts the model's are to be joined to.
    fn offline_tier(&self) -> Tier {
        let (v1_in, v2_in) = self.inputs();
        let o1 = votes::vote1_offline(&v1_in).0;
        let o2 = votes::vote2_offline(&v2_in, self.policy.is_some());
        let allow = |v: &VoteOutcome| v.verdict == Verdict::Allow;
        let could_grant = allow(&o1) && ((allow(&o2) && self.precommitted) || self.user_approved);
        if !could_grant || trusted_allow(&o1) {
            Tier::Settled(Votes { v1: o1, v2: o2, injection: self.injection(), carried: self.carried() })
        } else {
            Tier::Model(o1, o2)
        }
    }

    /// Whether this ballot is worth casting in a [`Batch`] with others of its session: its
    /// decider is costly ([`Decider::costly`]), so requests decided together cost fewer
    /// calls. An offline decider's ballots are cast one by one, each seeing the one before.
    pub fn batches(&self) -> bool {
        self.decider.costly()
    }

    /// This request as the session's later requests see it (vote 2's earlier requests)
    /// while its own decision is not made yet: not granted.
    fn pending(&self) -> EarlierRequest {
        EarlierRequest { path: self.raw_path.clone(), access: self.access, granted: false, injection: self.injection(), carried: Carried::default() }
    }

    /// Whether the request's rationale or content holds injection language: scanned with the
    /// votes, away from the twin, and carried to [`Twin::conclude`] in [`Votes`].
    fn injection(&self) -> bool {
        injection_in(self.rationale.as_deref(), self.content.as_deref())
    }

    /// What the request's content carries into the session if it is granted: a read's
    /// findings and mentions ([`Carried::of`]); nothing for other accesses, whose content
    /// does not reach the worker.
    fn carried(&self) -> Carried {
        match (&self.content, self.access) {
            (Some(c), Access::Read) => Carried::of(&self.path, c, self.knowledge.policies.iter().any(|p| !p.content.is_empty())),
            _ => Carried::default(),
        }
    }
}

/// Where a costly decider's offline tier leaves a request.
enum Tier {
    /// The offline votes settle it.
    Settled(Votes),
    /// The model's votes 1 and 2 are to be joined to these offline ones.
    Model(VoteOutcome, VoteOutcome),
}

/// Most requests of one session decided in one [`Batch`].
pub const BATCH_MAX: usize = 8;

/// Ballots of requests of one session that arrived together, cast together: each request
/// still gets its own votes, but those that need a costly decider's model share one call
/// for vote 1 ([`Decider::vote1_batch`]); vote 2, which reads untrusted content, is asked
/// per request.
///
/// The ballots are made one after the other from the same session with no
/// [`Twin::conclude`] between them, so they see the same trusted state; none sees the
/// others' grants (each is decided as if the others were denied, which can only deny more),
/// and vote 2 of each sees the requests before it in the batch among the session's earlier
/// requests, not granted, with the injection language found in their rationale or content
/// (so content read earlier in the batch taints the requests after it as it would one by
/// one). Their votes go back to [`Twin::conclude`] in order.
#[derive(Debug)]
pub struct Batch(Vec<Ballot>);

impl Batch {
    /// The batch of `ballots`, in the order the requests arrived.
    pub fn new(mut ballots: Vec<Ballot>) -> Self {
        // The last request is no earlier request of any other in the batch.
        let before_last = ballots.len().saturating_sub(1);
        let pending: Vec<EarlierRequest> = ballots[..before_last].iter().map(Ballot::pending).collect();
        for (i, b) in ballots.iter_mut().enumerate().skip(1) {
            Arc::make_mut(&mut b.earlier).extend(pending[..i].iter().cloned());
        }
        Batch(ballots)
    }

    /// How many requests the batch holds.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the batch holds no request.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Casts votes 1 and 2 of every request, in order. With a costly decider the offline
    /// tiers of [`Ballot::cast`] settle what they can for each request on its own; the rest
    /// go to the model: vote 1 of all of them in one call (its input is trusted and
    /// sanitized only), vote 2 in a call per request, concurrently (its input holds the
    /// request's untrusted content and rationale, which must not reach the prompt that
    /// decides another request). Each request's vote is still the conjunction of its offline
    /// and its model verdict (a verdict missing from the model's answer, or a failed call,
    /// is a deny). Otherwise each ballot is cast on its own.
    pub async fn cast(self) -> Vec<Votes> {
        let Batch(ballots) = self;
        let Some(decider) = ballots.first().map(|b| b.decider.clone()) else { return vec![] };
        if ballots.len() == 1 || !decider.costly() {
            let mut out = Vec::with_capacity(ballots.len());
            for b in ballots {
                out.push(b.cast().await);
            }
            return out;
        }
        let tiers: Vec<Tier> = ballots.iter().map(Ballot::offline_tier).collect();
        let asked: Vec<usize> = tiers.iter().enumerate().filter(|(_, t)| matches!(t, Tier::Model(..))).map(|(i, _)| i).collect();
        let (mut m1, mut m2) = (Vec::new(), Vec::new());
        if !asked.is_empty() {
            let inputs: Vec<(Vote1Input<'_>, Vote2Input<'_>)> = asked.iter().map(|&i| ballots[i].inputs()).collect();
            let v1s: Vec<Vote1Input<'_>> = inputs.iter().map(|(v1, _)| *v1).collect();
            let v2s: Vec<Vote2Input<'_>> = inputs.iter().map(|(_, v2)| *v2).collect();
            (m1, m2) = if asked.len() == 1 {
                let (a, b) = tokio::join!(decider.vote1(&v1s[0]), decider.vote2(&v2s[0]));
                (vec![a], vec![b])
            } else {
                // Vote 2 reads each request's untrusted content: one prompt per request, so
                // that no request's content is in the prompt that decides another.
                tokio::join!(decider.vote1_batch(&v1s), futures_util::future::join_all(v2s.iter().map(|v| decider.vote2(v))))
            };
        }
        let (mut m1, mut m2) = (m1.into_iter(), m2.into_iter());
        let missing = || VoteOutcome::deny("the decider gave no verdict for this request (fail closed)").by(Mechanism::DeciderError);
        tiers
            .into_iter()
            .zip(&ballots)
            .map(|(t, ballot)| match t {
                Tier::Settled(votes) => votes,
                Tier::Model(o1, o2) => {
                    let (a, b) = (m1.next().unwrap_or_else(missing), m2.next().unwrap_or_else(missing));
                    Votes { v1: both(o1, a), v2: both(o2, b), injection: ballot.injection(), carried: ballot.carried() }
                }
            })
            .collect()
    }
}

/// Whether a request's rationale or content holds injection language, as its later
/// requests' vote 2 is told. A rationale that mentions the user's approval is not by itself
/// an injection; the content's words are read as instructions whatever they claim.
fn injection_in(rationale: Option<&str>, content: Option<&[u8]>) -> bool {
    rationale.is_some_and(|r| injection_findings(r).iter().any(|f| !f.is_authority_claim())) || content.is_some_and(|c| !injection_findings(&String::from_utf8_lossy(c)).is_empty())
}

/// Whether an offline vote 1 allows on evidence that no untrusted context can make: an
/// explicit rule of the user's policies for this object and access, the user's answer in
/// this session, or a grant this session already holds.
fn trusted_allow(v: &VoteOutcome) -> bool {
    v.verdict == Verdict::Allow
        && matches!(v.mechanism, Some(Mechanism::Rule { origin: RuleOrigin::Policy | RuleOrigin::Answer }) | Some(Mechanism::GrantedInSession))
}

/// The conjunction of an offline vote that allows and the model's vote: the model's deny or
/// question stands (a failed call is a deny); an allow keeps the offline mechanism and gives
/// both reasons.
fn both(offline: VoteOutcome, model: VoteOutcome) -> VoteOutcome {
    if model.verdict == Verdict::Allow && offline.verdict == Verdict::Allow {
        VoteOutcome { verdict: Verdict::Allow, reason: format!("{}; model: {}", offline.reason, model.reason), mechanism: offline.mechanism, tokens: model.tokens }
    } else if offline.verdict != Verdict::Allow {
        VoteOutcome { tokens: model.tokens, ..offline }
    } else {
        VoteOutcome { reason: format!("model: {}", model.reason), ..model }
    }
}

/// Votes 1 and 2 of one request, as [`Ballot::cast`] gives them.
#[derive(Debug, Clone, PartialEq)]
pub struct Votes {
    /// Vote 1.
    pub v1: VoteOutcome,
    /// Vote 2.
    pub v2: VoteOutcome,
    /// Whether the request's rationale or content holds injection language (scanned with
    /// the votes), as the session's later requests' vote 2 is told.
    pub injection: bool,
    /// What the request's content carries into the session if it is granted (a read's).
    pub carried: Carried,
}

/// What a session's pre-committed policy is made from, owned, so that the decider can make
/// it away from the twin ([`Twin::open_session`] gives it, [`Twin::commit_policy`] takes
/// what it made).
pub struct PolicyDraft {
    decider: Arc<dyn Decider>,
    prompt: String,
    workspace_tree: Vec<String>,
    state: Arc<TrustedState>,
    similar: Vec<(usize, f32)>,
    knowledge: Arc<Knowledge>,
}

impl std::fmt::Debug for PolicyDraft {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyDraft").field("decider", &self.decider.name()).field("tree", &self.workspace_tree.len()).finish_non_exhaustive()
    }
}

impl PolicyDraft {
    /// Asks the decider for the policy; a costly decider's twin makes it offline, from the
    /// same trusted input (the model is asked per request where the offline votes cannot
    /// settle it, see [`Ballot::cast`]).
    pub async fn make(self) -> Result<PolicyAnswer, DeciderError> {
        let input = PolicyInput { prompt: &self.prompt, workspace_tree: &self.workspace_tree, state: &self.state, similar: &self.similar, knowledge: &self.knowledge };
        if self.decider.costly() {
            return Ok(PolicyAnswer { entries: votes::policy_offline(&input), tokens: TokenUsage::default() });
        }
        self.decider.policy(&input).await
    }
}

#[derive(Debug)]
struct Session {
    day: u32,
    prompts: Vec<String>,
    /// Shared with the ballots made from it (each decision would otherwise copy every
    /// grant and request of the session so far); changed by copy on write.
    view: Arc<SessionView>,
    policy: PrecommittedPolicy,
    /// False until [`Twin::commit_policy`]: the session's requests are denied before any vote.
    policy_ready: bool,
    grants: Vec<(String, Access)>,
    /// Grants made on the strength of the user's answer: the answer (if it lasts) is the
    /// trusted record of them, so removing it leaves no history that grants them again.
    answered: std::collections::HashSet<(String, Access)>,
    approvals: Vec<SessionApproval>,
    /// Shared with the ballots, as `view` is.
    earlier: Arc<Vec<EarlierRequest>>,
    denials: HashMap<(String, Access), u32>,
    /// Bytes of paths kept for denied requests, in `earlier` and `denials`, bounded by
    /// [`DENIED_KEPT_BYTES`].
    denied_kept: usize,
}

/// How many bytes of paths a session's denied requests keep in the twin at most (in its
/// record of earlier requests and its count of denials by path). A denied request without
/// injection language carries nothing the votes read later, and is kept only for its
/// path's count (an escalation after repeated denials) and a shadow session's record of
/// what it touched: past the bound a new path is neither kept nor counted, so it is denied
/// and never asked, and a session cannot grow the daemon by what it asks.
const DENIED_KEPT_BYTES: usize = 1 << 20;

/// How many of a session's questions wait for the user at once at most: past them a
/// request that would be asked is denied (a session cannot fill the user's
/// `pincer pending`).
pub const QUESTIONS_PER_SESSION: usize = 16;

/// The digital twin.
pub struct Twin {
    state: Arc<TrustedState>,
    knowledge: Arc<Knowledge>,
    sanitizer: Sanitizer,
    decider: Arc<dyn Decider>,
    config: TwinConfig,
    sessions: HashMap<String, Session>,
    pending: Vec<Question>,
    questions: QuestionIds,
    store: Option<Store>,
    day: u32,
}

impl std::fmt::Debug for Twin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Twin").field("user", &self.state.user).field("decider", &self.decider.name()).field("config", &self.config).finish()
    }
}

/// A trusted state together with its sanitized knowledge, built once and cloned into many
/// twins (one per evaluation sample) without sanitizing the history again.
#[derive(Clone)]
pub struct Prepared {
    state: Arc<TrustedState>,
    knowledge: Arc<Knowledge>,
    sanitizer: Sanitizer,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared").field("user", &self.state.user).field("tasks", &self.state.tasks.len()).finish()
    }
}

impl Prepared {
    /// Sanitizes and indexes `state`.
    pub fn new(state: TrustedState, sanitizer: Sanitizer) -> Self {
        let knowledge = Arc::new(Knowledge::build(&state, &sanitizer));
        Prepared { state: Arc::new(state), knowledge, sanitizer }
    }

    /// The trusted state.
    pub fn state(&self) -> &TrustedState {
        &self.state
    }

    /// Adds what the user's workspace, as it is when the user imports or refreshes their
    /// policies, tells the twin: rules read from text-only policies against its tree, the
    /// known tree (for lookalike places) and fingerprints of the protected files' content.
    /// Call it only with a workspace the worker has not had access to since.
    pub fn with_workspace<'a>(mut self, tree: &[String], content: impl Fn(&str) -> Option<&'a [u8]>) -> Self {
        Arc::make_mut(&mut self.knowledge).add_workspace(&self.state, &self.sanitizer, tree, content);
        self
    }

    /// The sanitized knowledge deciders see.
    pub fn knowledge(&self) -> &Knowledge {
        &self.knowledge
    }
}

impl Twin {
    /// A twin over a trusted state. The sanitizer's key stays inside the twin.
    pub fn new(state: TrustedState, sanitizer: Sanitizer, decider: Arc<dyn Decider>, config: TwinConfig) -> Self {
        Self::from_prepared(&Prepared::new(state, sanitizer), decider, config)
    }

    /// A twin over a private copy of a prepared state (cheap: nothing is sanitized or copied
    /// until the twin's own history grows, when its first finished session copies it).
    pub fn from_prepared(p: &Prepared, decider: Arc<dyn Decider>, config: TwinConfig) -> Self {
        let day = p.state.last_day();
        Twin {
            state: p.state.clone(),
            knowledge: p.knowledge.clone(),
            sanitizer: p.sanitizer.clone(),
            decider,
            config,
            sessions: HashMap::new(),
            pending: vec![],
            questions: QuestionIds::default(),
            store: None,
            day,
        }
    }

    /// Writes every trusted change through to `store` as well (prompts, grants, approvals).
    pub fn with_store(mut self, store: Store) -> Self {
        self.store = Some(store);
        self
    }

    /// Numbers questions from `ids` (shared with other twins) instead of its own count.
    pub fn with_question_ids(mut self, ids: QuestionIds) -> Self {
        self.questions = ids;
        self
    }

    /// The store the twin writes through to, if any.
    pub fn store(&self) -> Option<&Store> {
        self.store.as_ref()
    }

    /// Sets the day number recorded with new sessions.
    pub fn set_day(&mut self, day: u32) {
        self.day = day;
    }

    /// The trusted state (finished sessions included).
    pub fn state(&self) -> &TrustedState {
        &self.state
    }

    /// The sanitized knowledge deciders see.
    pub fn knowledge(&self) -> &Knowledge {
        &self.knowledge
    }

    /// The pre-committed policy of an open session.
    pub fn policy(&self, session: &str) -> Option<&PrecommittedPolicy> {
        self.sessions.get(session).map(|s| &s.policy)
    }

    /// Pending questions for the user.
    pub fn pending(&self) -> &[Question] {
        &self.pending
    }

    /// Opens a session with the user's first prompt: records the prompt as trusted and makes
    /// the pre-committed policy (vote 3) from the prompt, the workspace tree and the trusted
    /// state. A failed generation leaves an empty policy (everything denied) and says why.
    /// It is [`Twin::open_session`], [`PolicyDraft::make`] and [`Twin::commit_policy`] in one.
    pub async fn start_session(&mut self, session: &str, prompt: &str, workspace_tree: &[String]) -> Result<SessionStart, TwinError> {
        let draft = self.open_session(session, prompt, workspace_tree)?;
        let made = draft.make().await;
        self.commit_policy(session, made)
    }

    /// Opens a session with the user's first prompt (recorded as trusted) whose pre-committed
    /// policy is not made yet: until [`Twin::commit_policy`] gives it one, every request of
    /// the session is denied before any vote (fail closed). Returns what the policy is made
    /// from, owned, so that it can be made without the twin ([`PolicyDraft::make`]).
    pub fn open_session(&mut self, session: &str, prompt: &str, workspace_tree: &[String]) -> Result<PolicyDraft, TwinError> {
        if prompt.trim().is_empty() {
            return Err(TwinError::EmptyPrompt);
        }
        if self.sessions.contains_key(session) || self.state.tasks.iter().any(|t| t.session == session) {
            return Err(TwinError::SessionExists(session.to_string()));
        }
        if let Some(st) = &self.store {
            st.add_prompt(&self.state.user, &UserPrompt { session: session.into(), day: self.day, text: prompt.into() })?;
        }
        let mut view = SessionView::default();
        view.add_prompt(prompt, &self.knowledge, &self.sanitizer);
        let draft = PolicyDraft {
            decider: self.decider.clone(),
            prompt: prompt.to_string(),
            workspace_tree: workspace_tree.to_vec(),
            state: self.state.clone(),
            similar: view.similar.clone(),
            knowledge: self.knowledge.clone(),
        };
        self.sessions.insert(
            session.to_string(),
            Session {
                day: self.day,
                prompts: vec![prompt.to_string()],
                view: Arc::new(view),
                policy: PrecommittedPolicy::failed("the pre-committed policy is not made yet".into()),
                policy_ready: false,
                grants: vec![],
                answered: Default::default(),
                approvals: vec![],
                earlier: Arc::default(),
                denials: HashMap::new(),
                denied_kept: 0,
            },
        );
        Ok(draft)
    }

    /// Gives a session opened by [`Twin::open_session`] the pre-committed policy made from
    /// its draft; a failed generation leaves an empty policy (everything denied) and says why.
    pub fn commit_policy(&mut self, session: &str, made: Result<PolicyAnswer, DeciderError>) -> Result<SessionStart, TwinError> {
        let s = self.sessions.get_mut(session).ok_or_else(|| TwinError::UnknownSession(session.into()))?;
        let (policy, tokens) = match made {
            Ok(ans) => (PrecommittedPolicy::new(ans.entries), ans.tokens),
            Err(e) => {
                tracing::warn!(session, error = %e, "pre-committed policy generation failed; the session's requests will be denied");
                (PrecommittedPolicy::failed(format!("policy generation failed: {e}")), TokenUsage::default())
            }
        };
        s.policy = policy.clone();
        s.policy_ready = true;
        Ok(SessionStart { policy, tokens })
    }

    /// A later prompt of the user in an open session (trusted). The pre-committed policy
    /// stays as it was made at the first prompt.
    pub async fn prompt(&mut self, session: &str, prompt: &str) -> Result<(), TwinError> {
        if prompt.trim().is_empty() {
            return Err(TwinError::EmptyPrompt);
        }
        let s = self.sessions.get_mut(session).ok_or_else(|| TwinError::UnknownSession(session.into()))?;
        if let Some(st) = &self.store {
            st.add_prompt(&self.state.user, &UserPrompt { session: session.into(), day: s.day, text: prompt.into() })?;
        }
        s.prompts.push(prompt.to_string());
        Arc::make_mut(&mut s.view).add_prompt(prompt, &self.knowledge, &self.sanitizer);
        Ok(())
    }

    /// Decides a request. Never fails into a grant: an unknown session, a bad path or a
    /// decider error is a deny whose reasons say why. It is [`Twin::ballot`],
    /// [`Ballot::cast`] and [`Twin::conclude`] in one.
    pub async fn decide(&mut self, session: &str, req: &Request) -> Decision {
        match self.ballot(session, req) {
            Ok(ballot) => {
                let votes = ballot.cast().await;
                self.conclude(session, req, votes)
            }
            Err(rejected) => rejected,
        }
    }

    /// What votes 1 and 2 of a request see, owned, so that they can be cast without the twin
    /// ([`Ballot::cast`]); or the denial of a request refused before any vote (an unknown
    /// session, one whose pre-committed policy is not made yet, a bad path).
    pub fn ballot(&self, session: &str, req: &Request) -> Result<Ballot, Decision> {
        let Some(s) = self.sessions.get(session) else {
            return Err(Decision::rejected(format!("no open session {session:?}")));
        };
        if !s.policy_ready {
            return Err(Decision::rejected("the session's pre-committed policy is not made yet (fail closed)".into()));
        }
        if let Err(e) = check_rel_path("path", &req.path, false) {
            return Err(Decision::rejected(format!("bad request path: {e}")));
        }
        let p2 = self.config.variant == Variant::PincerP2;
        // The tier hints serve a costly decider's offline tier only ([`Ballot::offline_tier`]).
        let costly = self.decider.costly();
        let precommitted = costly && {
            let created: Vec<String> = s.grants.iter().filter(|(_, a)| *a == Access::Create).map(|(p, _)| p.clone()).collect();
            s.policy.check_in_session(&req.path, req.access, &created).verdict == Verdict::Allow
        };
        let asked = ask_key(&req.path, req.access);
        let user_approved = costly && s.approvals.iter().any(|a| a.allows(&asked));
        Ok(Ballot {
            decider: self.decider.clone(),
            knowledge: self.knowledge.clone(),
            view: s.view.clone(),
            path: self.sanitizer.path(&req.path),
            access: req.access,
            raw_path: req.path.clone(),
            content: req.content.clone(),
            rationale: req.rationale.clone(),
            earlier: s.earlier.clone(),
            policy: if p2 { Some(s.policy.clone()) } else { None },
            precommitted,
            user_approved,
        })
    }

    /// Completes the decision of `req` with the votes its ballot was given: vote 3 (the
    /// pre-committed policy, or the user's answer in the session), the conjunction, and the
    /// session's grants, denial counts and questions. A session that ended meanwhile gets a
    /// denial and nothing is recorded.
    pub fn conclude(&mut self, session: &str, req: &Request, votes: Votes) -> Decision {
        let Some(s) = self.sessions.get_mut(session) else {
            return Decision::rejected(format!("no open session {session:?}"));
        };
        let Votes { v1, v2, injection, carried } = votes;
        let asked = ask_key(&req.path, req.access);
        let approval = s.approvals.iter().position(|a| a.allows(&asked));
        let user_approved = approval.is_some();
        // An approval for this request only is used up by the decision it is given for.
        let once = approval.filter(|&i| s.approvals[i].scope == ApprovalScope::Once).map(|i| s.approvals.remove(i));
        if let Some(o) = &once {
            let src = answer_source(o.question);
            Arc::make_mut(&mut s.view).approvals.retain(|r| r.source.as_str() != src);
        }
        let v3 = if user_approved {
            VoteOutcome::allow("the user approved this request in this session").by(Mechanism::Rule { origin: RuleOrigin::Answer })
        } else {
            let created: Vec<String> = s.grants.iter().filter(|(_, a)| *a == Access::Create).map(|(p, _)| p.clone()).collect();
            s.policy.check_in_session(&req.path, req.access, &created).by(Mechanism::Precommitted)
        };
        // What its owner keeps more private than its folder goes by the user's word only:
        // vote 3 allows it when the user approved it or a vote's allow rests on a rule the
        // user gave, never on the pre-committed policy's globs or on likeness alone.
        let v3 = if req.kept_private && !user_approved && v3.verdict == Verdict::Allow && ![&v1, &v2].iter().any(|v| v.rests_on_users_word()) {
            VoteOutcome::deny("kept more private than its folder by its owner: granted only on the user's word (an answer, an approval, a rule of a policy)").by(Mechanism::KeptPrivate)
        } else {
            v3
        };
        let mut tokens = v1.tokens;
        tokens += v2.tokens;
        tokens += v3.tokens;
        let votes = [v1, v2, v3];
        let all_allow = votes.iter().all(|v| v.verdict == Verdict::Allow);
        // A user approval stands in for votes 2 and 3, never for vote 1 (which sees the
        // approval in its trusted context).
        let granted = all_allow || (user_approved && votes[0].verdict == Verdict::Allow);
        let key = (req.path.clone(), req.access);
        let mut question = None;
        let outcome = if granted && once.is_some() {
            // Granted for this request only: not one of the session's grants.
            Outcome::Grant
        } else if granted {
            if user_approved {
                s.answered.insert(key.clone());
            }
            s.grants.push(key.clone());
            let sp = self.sanitizer.path(&req.path);
            if req.access == Access::Create {
                Arc::make_mut(&mut s.view).created.push(sp.clone());
            }
            Arc::make_mut(&mut s.view).grants.push((sp, req.access));
            Outcome::Grant
        } else {
            let ask = votes.iter().any(|v| v.verdict == Verdict::AskUser);
            let repeated = match s.denials.get_mut(&asked) {
                Some(n) => {
                    *n += 1;
                    *n > self.config.escalate_after
                }
                None if s.denied_kept + asked.0.len() <= DENIED_KEPT_BYTES => {
                    s.denied_kept += asked.0.len();
                    s.denials.insert(asked.clone(), 1);
                    1 > self.config.escalate_after
                }
                None => false,
            };
            let waiting = self.pending.iter().filter(|q| q.session == session).count();
            let known = self.pending.iter().find(|q| q.session == session && q.access == req.access && ask_key(&q.path, q.access) == asked).map(|q| q.id);
            if (ask || repeated) && (known.is_some() || waiting < QUESTIONS_PER_SESSION) {
                let reason = if ask { "a vote asks the user".to_string() } else { format!("denied {} times while the worker keeps asking", s.denials.get(&asked).map_or(0, |n| n - 1)) };
                let id = match known {
                    Some(id) => id,
                    None => {
                        let id = self.questions.next();
                        self.pending.push(Question { id, session: session.into(), path: req.path.clone(), access: req.access, reason });
                        id
                    }
                };
                question = Some(id);
                Outcome::Escalate
            } else {
                Outcome::Deny
            }
        };
        // A denied request without injection language is kept within the session's bound.
        let keep = outcome == Outcome::Grant || injection || s.denied_kept + req.path.len() <= DENIED_KEPT_BYTES;
        if outcome != Outcome::Grant && !injection && keep {
            s.denied_kept += req.path.len();
        }
        if keep {
            Arc::make_mut(&mut s.earlier).push(EarlierRequest { path: req.path.clone(), access: req.access, granted: outcome == Outcome::Grant, injection, carried: if outcome == Outcome::Grant { carried } else { Carried::default() } });
        }
        let votes = votes.map(|v| VoteRecord { verdict: v.verdict, reason: v.reason, mechanism: v.mechanism });
        Decision { outcome, question, votes, tokens }
    }

    /// The user's answer to a pending question, applied: an approved request is granted when
    /// it is decided again. An answer of scope [`ApprovalScope::Always`] (every refusal is)
    /// is recorded as a trusted approval (or refusal); [`ApprovalScope::Session`] lasts for
    /// the session; [`ApprovalScope::Once`] for the next decision of that request only.
    pub fn answer(&mut self, question: u64, approve: bool, scope: ApprovalScope) -> Result<(), TwinError> {
        let scope = if approve { scope } else { ApprovalScope::Always };
        let i = self.pending.iter().position(|q| q.id == question).ok_or(TwinError::NoSuchQuestion(question))?;
        let q = self.pending.remove(i);
        // What the question stood for: for a create of a visible name, such names in its
        // folder (`D/*`, which the votes read as any one name there). A hidden name is kept
        // as itself: the votes' sanitized globs cannot read `D/.*`, and vote 3 and the
        // kernel's grant take it for the folder's hidden names all the same.
        let asked = ask_key(&q.path, q.access);
        let glob = if q.access == Access::Create && created_in(&q.path).1 { q.path.clone() } else { asked.0.clone() };
        let approval = UserApproval {
            session: q.session.clone(),
            path_glob: glob.clone(),
            access: q.access,
            permission: if approve { Permission::Allow } else { Permission::Deny },
        };
        let lasting = scope == ApprovalScope::Always;
        if let Some(s) = self.sessions.get_mut(&q.session) {
            if let (Some(st), true) = (&self.store, lasting) {
                st.add_approval(&self.state.user, s.day, &approval)?;
            }
            Arc::make_mut(&mut s.view).approvals.push(SanRule {
                glob: self.sanitizer.glob(&glob),
                access: vec![q.access],
                permission: approval.permission,
                source: TrustedText::from_trusted(answer_source(question)),
                inferred: false,
                relative: false,
            });
            s.approvals.push(SessionApproval { approval, scope, question });
            if s.denials.remove(&asked).is_some() {
                s.denied_kept = s.denied_kept.saturating_sub(asked.0.len());
            }
        } else if lasting {
            let day = self.day;
            if let Some(st) = &self.store {
                st.add_approval(&self.state.user, day, &approval)?;
            }
        }
        Ok(())
    }

    /// Asks question `q` again in its open session, so that [`Twin::answer`] applies an
    /// answer given to it before this twin was built (a fleet's daemon that started again,
    /// and the answer another host recorded meanwhile). The question comes from the trusted
    /// store, which only daemons write.
    pub fn ask_again(&mut self, q: Question) -> Result<(), TwinError> {
        if !self.sessions.contains_key(&q.session) {
            return Err(TwinError::UnknownSession(q.session));
        }
        if !self.pending.iter().any(|p| p.id == q.id) {
            self.pending.push(q);
        }
        Ok(())
    }

    /// Whether the user's approval (or refusal, `allow` false) of `access` on `path` given
    /// in `session` is in the trusted state.
    pub fn has_approval(&self, session: &str, path: &str, access: Access, allow: bool) -> bool {
        let permission = if allow { Permission::Allow } else { Permission::Deny };
        self.state.tasks.iter().filter(|t| t.session == session).flat_map(|t| &t.approvals).any(|a| a.path_glob == path && a.access == access && a.permission == permission)
    }

    /// The grants the twin made in an open session, in order (path, access).
    pub fn grants(&self, session: &str) -> &[(String, Access)] {
        self.sessions.get(session).map_or(&[], |s| s.grants.as_slice())
    }

    /// Gives a reopened session back the grants it held before (a daemon restart rebuilds
    /// the session from its prompts): they count as the session's grants again and become
    /// trusted history when it ends.
    pub fn restore_grants(&mut self, session: &str, grants: &[(String, Access)]) -> Result<(), TwinError> {
        let s = self.sessions.get_mut(session).ok_or_else(|| TwinError::UnknownSession(session.into()))?;
        for (path, access) in grants {
            let sp = self.sanitizer.path(path);
            s.grants.push((path.clone(), *access));
            Arc::make_mut(&mut s.view).grants.push((sp.clone(), *access));
            if *access == Access::Create {
                Arc::make_mut(&mut s.view).created.push(sp);
            }
        }
        Ok(())
    }

    /// Ends a session: its prompts, the twin's grants and the user's approvals become trusted
    /// history, and its grants end.
    pub fn end_session(&mut self, session: &str) -> Result<(), TwinError> {
        self.finish(session, false).map(drop)
    }

    /// Ends a shadow session (the kernel let its accesses through): as [`Twin::end_session`],
    /// and every other access the twin decided in it (the kernel's reports and the worker's
    /// requests, whatever the would-be outcome) is recorded as an access of its task, in
    /// the store too, so later twins learn what such a task touches. Returns how many
    /// accesses were recorded besides the grants.
    pub fn end_shadow_session(&mut self, session: &str) -> Result<usize, TwinError> {
        self.finish(session, true)
    }

    fn finish(&mut self, session: &str, shadow: bool) -> Result<usize, TwinError> {
        let s = self.sessions.remove(session).ok_or_else(|| TwinError::UnknownSession(session.into()))?;
        self.pending.retain(|q| q.session != session);
        // The task goes into the store in one transaction: a task of many grants costs one
        // commit (one flush to disk), not one per row, and a failure leaves none of it there.
        let observed = match &self.store {
            Some(st) => st.in_transaction(|st| record_task(Arc::make_mut(&mut self.state), Some(st), session, &s, shadow))?,
            None => record_task(Arc::make_mut(&mut self.state), None, session, &s, shadow)?,
        };
        let state = &self.state;
        let task = state.tasks.iter().find(|t| t.session == session).expect("the session's task was just added");
        Arc::make_mut(&mut self.knowledge).add_task(task, &self.sanitizer);
        for other in self.sessions.values_mut() {
            Arc::make_mut(&mut other.view).refresh(&self.knowledge);
        }
        Ok(observed)
    }

    /// The open sessions' ids.
    pub fn open_sessions(&self) -> impl Iterator<Item = &str> {
        self.sessions.keys().map(String::as_str)
    }

    /// Takes a new trusted state (the user removed an approval or a policy): the finished
    /// tasks and policies of `p` replace the twin's, open sessions keep their prompts,
    /// grants and pre-committed policies, and an answer the user gave in an open session
    /// that `removed` names is dropped. The next decision sees the new state.
    pub fn reload(&mut self, p: &Prepared, removed: Option<&UserApproval>) {
        self.state = p.state.clone();
        self.knowledge = p.knowledge.clone();
        for s in self.sessions.values_mut() {
            if let Some(r) = removed {
                let gone: Vec<u64> = s.approvals.iter().filter(|a| &a.approval == r && a.scope == ApprovalScope::Always).map(|a| a.question).collect();
                s.approvals.retain(|a| !gone.contains(&a.question));
                Arc::make_mut(&mut s.view).approvals.retain(|rule| !gone.iter().any(|q| rule.source.as_str() == answer_source(*q)));
            }
            Arc::make_mut(&mut s.view).refresh(&self.knowledge);
        }
    }

    /// The sanitized form of a path (for audit logs that must not show names).
    pub fn sanitize(&self, path: &str) -> SanitizedPath {
        self.sanitizer.path(path)
    }
}

/// Writes ended session `s` (`session`) into the trusted state, and into `store` when there
/// is one: its prompts, its grants and approvals, and for a shadow session the other
/// accesses it was decided on (returns how many of those).
fn record_task(state: &mut TrustedState, store: Option<&Store>, session: &str, s: &Session, shadow: bool) -> Result<usize, TwinError> {
    for p in &s.prompts {
        state.add_prompt(&UserPrompt { session: session.into(), day: s.day, text: p.clone() })?;
    }
    let mut observed = 0;
    if shadow {
        let mut seen: std::collections::HashSet<(&str, Access)> = s.grants.iter().map(|(p, a)| (p.as_str(), *a)).collect();
        for e in s.earlier.iter() {
            if !seen.insert((e.path.as_str(), e.access)) {
                continue;
            }
            let rec = crate::store::AccessRecord { path: e.path.clone(), access: e.access };
            state.add_access(session, s.day, &rec)?;
            if let Some(st) = store {
                st.add_access(&state.user, session, s.day, &rec)?;
            }
            observed += 1;
        }
    }
    for (path, access) in s.grants.iter().filter(|k| !s.answered.contains(*k)) {
        let g = TwinGrant { session: session.into(), path: path.clone(), access: *access };
        state.add_twin_grant(s.day, &g)?;
        if let Some(st) = store {
            st.add_twin_grant(&state.user, s.day, &g)?;
        }
    }
    for a in s.approvals.iter().filter(|a| a.scope == ApprovalScope::Always) {
        state.add_approval(s.day, &a.approval)?;
    }
    Ok(observed)
}
