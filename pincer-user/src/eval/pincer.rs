//! Pincer and Pincer-P2 under evaluation: the digital twin behind the [`Defense`] interface.
//!
//! Each sample gets a fresh twin over a private copy of the persona's trusted state (the
//! history's prompts, access annotations and approvals, and the user's policies), cloned from
//! one [`Prepared`] state: the history is sanitized and indexed once per defense, not once
//! per sample. Within the
//! sample the twin's own mechanism carries state from one session to the next: the user's
//! prompts and the grants it made. Worker notes are dropped: the twin has no way to take one.

use crate::decider::{Decider, Mechanism, OfflineDecider, Verdict};
use crate::eval::corpus::Persona;
use crate::eval::defense::{Defense, DefenseName, RequestView};
use crate::decider::TokenUsage;
use crate::eval::run::RunError;
use crate::sanitize::{Sanitizer, SecretKey};
use crate::store::{HistoryRecord, TrustedState, UserPolicy};
use crate::twin::{Outcome, Prepared, Request, Twin, TwinConfig, Variant, VoteRecord};
use async_trait::async_trait;
use std::sync::Arc;

/// Builds a persona's trusted state from its history and policies (the trusted parts of the
/// corpus only), converted as `pincer import` converts them.
pub fn trusted_state(p: &Persona) -> Result<TrustedState, crate::store::StoreError> {
    let mut s = TrustedState::new(p.user.clone().unwrap_or_else(|| p.id.clone()));
    for h in &p.history {
        s.add_history(&HistoryRecord::from(h))?;
    }
    for pol in &p.policies {
        s.add_policy(&UserPolicy::from(pol))?;
    }
    Ok(s)
}

/// The twin as an evaluated defense.
pub struct PincerDefense {
    name: DefenseName,
    prepared: Prepared,
    decider: Arc<dyn Decider>,
    twin: Option<Twin>,
    sample: u64,
    session: Option<String>,
    sessions: usize,
    tokens: TokenUsage,
    /// The votes of the last decision (none before the first, or when no session was open).
    last: Option<[VoteRecord; 3]>,
}

impl PincerDefense {
    /// A Pincer (or Pincer-P2) over a persona's trusted state and a decider. The sanitizer key
    /// is drawn fresh; no decider ever sees it. The persona's pristine workspace stands for
    /// the workspace as it was when the user imported their policies: the twin reads its tree
    /// and fingerprints its protected files from it, before any sample's setup runs.
    pub fn new(name: DefenseName, persona: &Persona, decider: Arc<dyn Decider>) -> Result<Self, RunError> {
        let setup = |reason: String| RunError::Setup { persona: persona.id.clone(), defense: name, reason };
        let state = trusted_state(persona).map_err(|e| setup(format!("trusted state: {e}")))?;
        let key = SecretKey::generate().map_err(|e| setup(format!("sanitizer key: {e}")))?;
        let ws = &persona.workspace;
        let prepared = Prepared::new(state, Sanitizer::new(key)).with_workspace(&ws.tree(), |p| ws.content(p));
        Ok(PincerDefense { name, prepared, decider, twin: None, sample: 0, session: None, sessions: 0, tokens: TokenUsage::default(), last: None })
    }

    /// The twin of the current sample (for tests and audits).
    pub fn twin(&self) -> Option<&Twin> {
        self.twin.as_ref()
    }

    fn variant(&self) -> Variant {
        if self.name == DefenseName::PincerP2 {
            Variant::PincerP2
        } else {
            Variant::Pincer
        }
    }
}

#[async_trait]
impl Defense for PincerDefense {
    fn name(&self) -> DefenseName {
        self.name
    }
    async fn begin_sample(&mut self, day: u64) {
        let config = TwinConfig { variant: self.variant(), ..TwinConfig::default() };
        let mut twin = Twin::from_prepared(&self.prepared, self.decider.clone(), config);
        twin.set_day(day.min(u32::MAX as u64) as u32);
        self.twin = Some(twin);
        self.sample += 1;
        self.sessions = 0;
        self.session = None;
    }
    async fn start_session(&mut self, prompt: &str, tree: &[String]) {
        let Some(twin) = self.twin.as_mut() else { return };
        let name = format!("eval-{}-{}", self.sample, self.sessions);
        self.sessions += 1;
        match twin.start_session(&name, prompt, tree).await {
            Ok(start) => {
                self.tokens += start.tokens;
                self.session = Some(name);
            }
            Err(e) => {
                // No session: every request of it is denied.
                tracing::warn!("twin session could not start: {e}");
                self.session = None;
            }
        }
    }
    async fn note(&mut self, _text: &str) {
        // The twin takes no messages from the worker.
    }
    async fn decide(&mut self, r: &RequestView<'_>) -> Outcome {
        let (Some(twin), Some(session)) = (self.twin.as_mut(), self.session.as_deref()) else {
            let v = VoteRecord { verdict: Verdict::Deny, reason: "no open session (it could not start)".into(), mechanism: Some(Mechanism::Rejected) };
            self.last = Some([v.clone(), v.clone(), v]);
            return Outcome::Deny;
        };
        let req = Request { path: r.path.to_string(), access: r.access, rationale: r.rationale.map(str::to_string), content: r.content.map(<[u8]>::to_vec), kept_private: false };
        let d = twin.decide(session, &req).await;
        tracing::debug!(defense = self.name.as_str(), path = %req.path, access = %req.access, outcome = ?d.outcome, votes = ?d.votes, "twin decision");
        self.tokens += d.tokens;
        self.last = Some(d.votes);
        d.outcome
    }
    async fn end_session(&mut self) {
        if let (Some(twin), Some(session)) = (self.twin.as_mut(), self.session.take()) {
            if let Err(e) = twin.end_session(&session) {
                tracing::warn!("twin session could not end: {e}");
            }
        }
    }
    fn tokens(&self) -> TokenUsage {
        self.tokens
    }
    fn last_votes(&self) -> Option<&[VoteRecord]> {
        self.last.as_ref().map(|v| v.as_slice())
    }
}

/// The twin with the offline decider, for one persona.
pub fn offline(name: DefenseName, persona: &Persona) -> Result<Box<dyn Defense>, RunError> {
    Ok(Box::new(PincerDefense::new(name, persona, Arc::new(OfflineDecider::new()))?))
}

/// The twin on a given decider (a chat-model decider), for one persona.
pub fn with_decider(name: DefenseName, persona: &Persona, decider: Arc<dyn Decider>) -> Result<Box<dyn Defense>, RunError> {
    Ok(Box::new(PincerDefense::new(name, persona, decider)?))
}
