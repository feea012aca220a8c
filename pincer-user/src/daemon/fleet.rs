//! Questions across a fleet's hosts (the PostgreSQL store, [`crate::store::questions`]).
//!
//! ```text
//! host A: escalate → questions (memory) + publish (row `open`)        worker waits on A
//! host B: pending  → its own questions + the fleet's open rows of the caller's user
//!         approve --host A → row `answered` (only if still open, and the caller's)
//!                           → NOTIFY pincer_answer 'A'
//! host A: listener → take the answers (rows `closed`) → settle, as if answered on A
//! ```
//!
//! An answer given on A closes A's row first, so a later answer from B finds nothing open;
//! an answer from B that A has not taken yet makes A's own answer fail, naming B. Fail
//! closed: without the database nothing is published or answered elsewhere, and a worker
//! whose answer cannot arrive is denied when its wait runs out.

use super::audit::{AuditEntry, Event};
use super::core::{CallResult, Core};
use super::error::{chain, CallError};
use super::peer::Peer;
use super::pipeline::Origin;
use super::protocol::{ApprovalScope, QuestionInfo, Reply, RequestOutcome};
use super::users;
use crate::store::{QuestionState, SharedQuestion};

fn scope_name(scope: ApprovalScope) -> &'static str {
    match scope {
        ApprovalScope::Once => "once",
        ApprovalScope::Session => "session",
        ApprovalScope::Always => "always",
    }
}

fn scope_of(name: &str) -> Option<ApprovalScope> {
    match name {
        "once" => Some(ApprovalScope::Once),
        "session" => Some(ApprovalScope::Session),
        "always" => Some(ApprovalScope::Always),
        _ => None,
    }
}

impl Core {
    /// Drops the questions this host published in an earlier life (a daemon starting: their
    /// workers are gone, and question ids start again at 1).
    pub(super) fn drop_fleet_questions(&mut self) {
        let Some(host) = self.host.clone() else { return };
        if let Err(e) = self.twins.store().drop_questions(&host) {
            tracing::warn!(host, error = %chain(&e), "cannot drop this host's earlier questions from the fleet's store");
        }
    }

    /// Publishes question `q` of this host, so the user can answer it from any host. A
    /// question that cannot be published is answered on this host only.
    pub(super) fn publish_question(&mut self, q: u64) {
        let Some(host) = self.host.clone() else { return };
        let Some(info) = self.question_info(q) else { return };
        let Some(w) = self.questions.get(q) else { return };
        let shared = SharedQuestion {
            host,
            id: q,
            user: w.user.clone(),
            session: info.session,
            path: info.path,
            access: info.access,
            reason: info.reason,
            votes: serde_json::to_string(&info.votes).unwrap_or_else(|_| "[]".into()),
            waiting: matches!(w.origin, Origin::Tool { .. }),
        };
        if let Err(e) = self.twins.store().publish_question(&shared) {
            tracing::warn!(question = q, error = %chain(&e), "cannot publish the question to the fleet; it is answered on this host only");
        }
    }

    /// Closes this host's question `q` in the fleet's store (its session ended).
    pub(super) fn close_fleet_question(&mut self, q: u64) {
        let Some(host) = self.host.clone() else { return };
        if let Err(e) = self.twins.store().close_question(&host, q) {
            tracing::warn!(question = q, error = %chain(&e), "cannot close the question in the fleet's store");
        }
    }

    /// Before question `q` is answered on this host: its row is closed, so no other host
    /// answers it too. Refused if another host answered it first (that answer is applied),
    /// or if the store cannot be reached (nothing is answered on a state that may be stale).
    pub(super) fn claim_fleet_question(&mut self, q: u64) -> Result<(), CallError> {
        let Some(host) = self.host.clone() else { return Ok(()) };
        let st = self.twins.store();
        if st.close_question(&host, q)? {
            return Ok(());
        }
        match st.question_state(&host, q)? {
            Some(QuestionState::Answered { by }) => Err(CallError::AnsweredElsewhere { question: q, by }),
            // Never published (the store was away when it was asked): this host's alone.
            _ => Ok(()),
        }
    }

    /// The open questions of the fleet's other hosts that `peer` may answer (root: every
    /// user's; others: their own user's, matched by name across hosts).
    pub(super) fn fleet_pending(&mut self, peer: &Peer) -> Result<Vec<QuestionInfo>, CallError> {
        let Some(host) = self.host.clone() else { return Ok(vec![]) };
        let user = (peer.uid != 0).then(|| users::by_uid(peer.uid).name);
        let rows = self.twins.store().open_questions(user.as_deref())?;
        Ok(rows
            .into_iter()
            .filter(|r| r.host != host)
            .map(|r| QuestionInfo {
                id: r.id,
                session: r.session,
                path: r.path,
                access: r.access,
                reason: r.reason,
                waiting: r.waiting,
                votes: serde_json::from_str(&r.votes).unwrap_or_default(),
                host: Some(r.host),
            })
            .collect())
    }

    /// Answers question `q` of another host of the fleet: recorded in the shared store (only
    /// if it is still open and the caller's), audited here, applied by the asking host.
    pub(super) fn answer_elsewhere(&mut self, peer: &Peer, host: &str, q: u64, approve: bool, scope: ApprovalScope) -> Result<CallResult, CallError> {
        let me = self.host.clone().ok_or(CallError::NotFleet)?;
        let user = (peer.uid != 0).then(|| users::by_uid(peer.uid).name);
        let session = self
            .twins
            .store()
            .answer_question(host, q, user.as_deref(), approve, scope_name(scope), &me)?
            .ok_or_else(|| CallError::NoFleetQuestion { host: host.to_string(), question: q })?;
        let mut e = AuditEntry::new(Event::Answer);
        e.session = Some(session);
        e.owner_uid = Some(peer.uid);
        e.question = Some(q);
        e.outcome = Some(if approve { RequestOutcome::UserApproved } else { RequestOutcome::UserDenied });
        e.detail = Some(format!("answer to question {q} of host {host}, given here ({}); {host} applies it", scope_name(scope)));
        self.audit.record(&e);
        let how = if approve { format!("approved ({})", scope_name(scope)) } else { "denied".to_string() };
        Ok(CallResult::Now(Reply::Ok { message: format!("question {q} of host {host} {how}; {host} applies the answer to its waiting request") }))
    }

    /// Applies the answers other hosts gave to this host's questions (each is taken once).
    /// A question no longer waiting here (its session ended) is passed over.
    pub(super) async fn apply_fleet_answers(&mut self) {
        let Some(host) = self.host.clone() else { return };
        let answers = match self.twins.store().take_answers(&host) {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %chain(&e), "cannot take the answers given on other hosts");
                return;
            }
        };
        for a in answers {
            if self.questions.get(a.id).is_none() {
                tracing::info!(question = a.id, by = a.by, "an answer from another host to a question no longer waiting here");
                continue;
            }
            let Some(scope) = scope_of(&a.scope) else {
                // Nothing is granted on an answer this build cannot read; the worker's wait
                // runs out and it is denied.
                tracing::warn!(question = a.id, by = a.by, scope = a.scope, "an answer from another host with an unknown scope; not applied");
                continue;
            };
            if let Err(e) = self.settle(a.id, a.approve, scope, Some(&a.by)).await {
                tracing::warn!(question = a.id, by = a.by, error = %chain(&e), "cannot apply an answer given on another host");
            }
        }
    }
}
