//! Questions across a fleet's hosts (the PostgreSQL store, [`crate::store::questions`]).
//!
//! ```text
//! host A: escalate → questions (memory) + publish (row `open`)        worker waits on A
//! host B: pending  → its own questions + the fleet's open rows of the caller's user
//!         approve --host A → row `answered` (only if still open, and the caller's)
//!                           → NOTIFY pincer_answer 'A'
//!                           → B's reply waits (bounded) for A's acknowledgement
//! host A: listener → the answered rows → settle, as if answered on A → row `closed`,
//!                    `applied` saying what A did (B's reply reports it)
//! ```
//!
//! An answer given on A closes A's row first, so a later answer from B finds nothing open;
//! an answer from B that A has not applied yet makes A's own answer fail, naming B. An
//! answer given while A is down (or cut off from the database) stays `answered`; when A is
//! back (its daemon started again, or its listener reconnected) it applies it if the
//! question's session is still open there, deciding the request again with it, and else
//! acknowledges that it expired, with nothing granted or recorded. Each answer is
//! acknowledged once, and an `always` approval already in the trusted state (A stopped
//! between applying and acknowledging) is not recorded again. Fail closed: without the
//! database nothing is published or answered elsewhere, and a worker whose answer cannot
//! arrive is denied when its wait runs out.

use super::audit::{AuditEntry, Event};
use super::core::{CallResult, Core};
use super::error::{chain, CallError};
use super::peer::Peer;
use super::pipeline::{Origin, PipelineRequest};
use super::protocol::{ApprovalScope, QuestionInfo, Reply, RequestOutcome};
use super::questions::Waiting;
use super::resolve;
use crate::store::{QuestionState, SharedAnswer, SharedQuestion, StoreSpec};
use std::time::Duration;

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

/// How often the answering host looks whether the asking host acknowledged the answer.
const APPLIED_POLL: Duration = Duration::from_millis(50);

/// Waits (at most `wait`) for `host` to acknowledge the answer this host gave to its
/// question `question` (`answered` says which answer), and says what became of it: applied
/// (or expired) there, or not yet (the host may be down or cut off from the database; it
/// applies the answer when it is back). Polls the row outside the actor, on a connection
/// of its own.
pub(super) async fn await_applied(spec: StoreSpec, host: String, question: u64, answered: String, wait: Duration) -> Reply {
    let h = host.clone();
    let seen = tokio::task::spawn_blocking(move || -> Result<QuestionState, crate::store::StoreError> {
        let store = spec.open()?;
        let deadline = std::time::Instant::now() + wait;
        loop {
            let state = store.question_state(&h, question)?.unwrap_or(QuestionState::Closed);
            if !matches!(state, QuestionState::Answered { .. }) || std::time::Instant::now() >= deadline {
                return Ok(state);
            }
            std::thread::sleep(APPLIED_POLL);
        }
    })
    .await;
    let head = format!("question {question} of host {host} {answered}");
    match seen {
        Ok(Ok(QuestionState::Applied { what, .. })) => Reply::Answered { applied: true, message: format!("{head}; {host} acknowledged it: {what}") },
        Ok(Ok(QuestionState::Answered { .. })) => Reply::Answered {
            applied: false,
            message: format!(
                "{head} and recorded, but {host} has NOT applied it yet (within {} s; it may be down or cut off from the database): \
                 it applies it when it is back if the question's session is still open there, else it records that the question expired",
                wait.as_secs()
            ),
        },
        Ok(Ok(_)) => Reply::Answered { applied: false, message: format!("{head} and recorded, but {host} closed the question without acknowledging the answer") },
        Ok(Err(e)) => Reply::Answered { applied: false, message: format!("{head} and recorded; whether {host} applied it cannot be checked: {}", chain(&e)) },
        Err(e) => Reply::Answered { applied: false, message: format!("{head} and recorded; whether {host} applied it cannot be checked: {e}") },
    }
}

impl Core {
    /// A daemon starting: the questions this host left open in an earlier life are closed
    /// (their workers are gone), new questions are numbered after them, and the answers
    /// other hosts gave while this host was down are applied (or acknowledged as expired).
    /// A host whose earlier questions cannot be read takes no part in questions across the
    /// fleet until it starts again (its ids could meet the earlier ones).
    pub(super) async fn resume_fleet_questions(&mut self) {
        let Some(host) = self.host.clone() else { return };
        match self.twins.store().restart_questions(&host) {
            Ok(last) => self.twins.question_ids().continue_after(last),
            Err(e) => {
                tracing::error!(host, error = %chain(&e), "cannot read this host's earlier questions; its questions are answered on this host only until it starts again");
                self.host = None;
                return;
            }
        }
        self.apply_fleet_answers().await;
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
            abs: w.request.abs.to_string_lossy().into_owned(),
            access: info.access,
            reason: info.reason,
            votes: serde_json::to_string(&info.votes).unwrap_or_else(|_| "[]".into()),
            waiting: matches!(w.origin, Origin::Tool { .. }),
        };
        match self.twins.store().publish_question(&shared) {
            Ok(true) => {}
            Ok(false) => tracing::warn!(question = q, "the fleet's store has a question of this id from an earlier life of this host; this one is answered on this host only"),
            Err(e) => tracing::warn!(question = q, error = %chain(&e), "cannot publish the question to the fleet; it is answered on this host only"),
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
            Some(QuestionState::Answered { by } | QuestionState::Applied { by, .. }) => Err(CallError::AnsweredElsewhere { question: q, by }),
            // Never published (the store was away when it was asked): this host's alone.
            _ => Ok(()),
        }
    }

    /// The open questions of the fleet's other hosts that `peer` may answer (root: every
    /// user's; others: their own fleet identity's, [`super::config::StoreConfig::identity`]).
    pub(super) fn fleet_pending(&mut self, peer: &Peer) -> Result<Vec<QuestionInfo>, CallError> {
        let Some(host) = self.host.clone() else { return Ok(vec![]) };
        let user = (peer.uid != 0).then(|| self.identity(peer.uid));
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
    /// if it is still open and the caller's), audited here; the reply waits for the asking
    /// host to acknowledge it ([`await_applied`]).
    pub(super) fn answer_elsewhere(&mut self, peer: &Peer, host: &str, q: u64, approve: bool, scope: ApprovalScope) -> Result<CallResult, CallError> {
        let me = self.host.clone().ok_or(CallError::NotFleet)?;
        let user = (peer.uid != 0).then(|| self.identity(peer.uid));
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
        let answered = if approve { format!("approved ({})", scope_name(scope)) } else { "denied".to_string() };
        Ok(CallResult::AwaitApplied { host: host.to_string(), question: q, answered })
    }

    /// Applies the answers other hosts gave to this host's questions, and acknowledges each
    /// once with what became of it. An answer that cannot be applied now (the store went
    /// away) stays for the next time (a notification, the listener's reconnection, a start).
    pub(super) async fn apply_fleet_answers(&mut self) {
        let Some(host) = self.host.clone() else { return };
        let answers = match self.twins.store().answered_questions(&host) {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %chain(&e), "cannot read the answers given on other hosts");
                return;
            }
        };
        for a in answers {
            let q = a.question.id;
            let what = match self.apply_answer(&host, &a).await {
                Ok(what) => what,
                Err(e) => {
                    tracing::warn!(question = q, by = a.by, error = %chain(&e), "cannot apply an answer given on another host now; it stays for the next try");
                    continue;
                }
            };
            match self.twins.store().acknowledge_answer(&host, q, &what) {
                Ok(true) => {}
                Ok(false) => tracing::warn!(question = q, by = a.by, "the answer from another host was acknowledged already"),
                Err(e) => tracing::warn!(question = q, by = a.by, error = %chain(&e), "cannot acknowledge an answer given on another host"),
            }
        }
    }

    /// Applies answer `a` to this host's question: to the question waiting here, or, if it
    /// was asked in an earlier life of this daemon, to its session if that is still open
    /// (asked again, then answered); returns what was done, for the acknowledgement. An
    /// answer that cannot apply any more is audited and acknowledged as expired.
    async fn apply_answer(&mut self, host: &str, a: &SharedAnswer) -> Result<String, CallError> {
        let row = &a.question;
        let q = row.id;
        let how = if a.approve { format!("approved ({})", a.scope) } else { "denied".to_string() };
        let Some(scope) = scope_of(&a.scope) else {
            // Nothing is granted on an answer this build cannot read.
            return Ok(self.expired(a, &format!("its scope {:?} is unknown to this build", a.scope)));
        };
        let live = self.questions.get(q).is_some_and(|w| w.session == row.session && w.request.path == row.path && w.request.access == row.access);
        if live {
            let waited = self.questions.get(q).is_some_and(Waiting::has_waiter);
            self.settle(q, a.approve, scope, Some(&a.by)).await?;
            let then = if waited { "the waiting request was decided again with it" } else { "no worker waited for it any more; the session has it" };
            return Ok(format!("{how}, applied on {host}: {then}"));
        }
        // Asked before this daemon started (again): the session must still be open here.
        let Some(s) = self.sessions.get(&row.session).cloned() else {
            return Ok(self.expired(a, &format!("its session {} is no longer open on {host}", row.session)));
        };
        if s.user != row.user || row.abs.is_empty() {
            return Ok(self.expired(a, "the question does not match its session here"));
        }
        let r = match resolve::resolve(&s.all_roots(), &row.abs, row.access) {
            Ok(r) if r.rel == row.path => r,
            Ok(_) => return Ok(self.expired(a, "its resource is no longer where it was asked")),
            Err(e) => return Ok(self.expired(a, &format!("its resource cannot be resolved again ({e})"))),
        };
        let twin = self.twins.get(&s.user).await?;
        if !a.approve && twin.has_approval(&row.session, &row.path, row.access, false) {
            // Applied before, and this host stopped before acknowledging it.
            return Ok(format!("{how}, applied on {host} before it started again"));
        }
        let question = crate::twin::Question { id: q, session: row.session.clone(), path: row.path.clone(), access: row.access, reason: row.reason.clone() };
        twin.ask_again(question).map_err(CallError::Twin)?;
        // An `always` approval already in the trusted state is not recorded twice.
        let scope = if a.approve && scope == ApprovalScope::Always && twin.has_approval(&row.session, &row.path, row.access, true) { ApprovalScope::Session } else { scope };
        let request = PipelineRequest::resolved(row.session.clone(), row.access, r);
        // The worker that asked is gone with the earlier daemon; the session's retry finds
        // the grant.
        let origin = Origin::Tool { peer: Peer { pid: 0, uid: s.owner_uid, cgroup: s.cgroup.clone() }, reason: None };
        let votes = serde_json::from_str(&row.votes).unwrap_or_default();
        self.questions.ask(q, || Waiting { user: s.user.clone(), session: row.session.clone(), request, origin, votes, waiters: vec![] });
        self.settle(q, a.approve, scope, Some(&a.by)).await?;
        Ok(format!("{how}, applied on {host} after it started again: the session's request is decided again with it"))
    }

    /// Audits that answer `a` cannot apply any more (`why`), and says so for the
    /// acknowledgement: nothing was granted or recorded.
    fn expired(&mut self, a: &SharedAnswer, why: &str) -> String {
        let q = a.question.id;
        tracing::info!(question = q, by = a.by, why, "an answer from another host to a question that expired");
        let mut e = AuditEntry::new(Event::Answer);
        e.session = Some(a.question.session.clone());
        e.owner_uid = self.sessions.get(&a.question.session).map(|s| s.owner_uid);
        e.user = Some(a.question.user.clone());
        e.question = Some(q);
        e.detail = Some(format!("answered on host {}, expired: {why}; nothing granted or recorded", a.by));
        self.audit.record(&e);
        format!("expired: {why}; nothing granted or recorded")
    }
}
