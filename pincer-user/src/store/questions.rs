//! Questions across a fleet: a question escalated on one host is published in the shared
//! database, so the user can list and answer it from any host; the asking host hears the
//! answer (`NOTIFY pincer_answer` with its host name), applies it, and acknowledges it in
//! the row, which the answering host waits for.
//!
//! A row goes `open` (published by the asking host) → `answered` (by another host, with
//! the answer) → `closed` with `applied` saying what the asking host did (applied, or why it
//! could not: the question's session ended); or `open` → `closed` without `applied`
//! (answered on the asking host, its session ended, or the host started again). Each step
//! is one conditional `UPDATE`, so two hosts answering at once cannot both win, and an
//! answer is acknowledged once. An answer stays `answered` while the asking host is down or
//! cut off from the database, and is applied when it is back. PostgreSQL only: a single
//! host answers its own questions.

use super::db::{Db, Row, Val};
use super::{sql, Store, StoreError};
use crate::access::Access;

/// The channel the asking host listens on: notified with the host's name when another
/// host answered one of its questions.
pub const ANSWER_CHANNEL: &str = "pincer_answer";

/// A question escalated on one host of a fleet, as the shared store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedQuestion {
    /// The host that asked (its question ids are its own).
    pub host: String,
    /// The id the asking host gave it.
    pub id: u64,
    /// The user it is for (only that user, or root, may answer it).
    pub user: String,
    /// The session on the asking host.
    pub session: String,
    /// The resource, relative to its root.
    pub path: String,
    /// The resource's absolute path on the asking host (to decide it again there).
    pub abs: String,
    /// The access asked for.
    pub access: Access,
    /// Why the user is asked.
    pub reason: String,
    /// The votes of the decision that asked, as the audit's JSON.
    pub votes: String,
    /// Whether a worker waited for the answer when it was asked.
    pub waiting: bool,
}

/// An answer another host gave to one of this host's questions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedAnswer {
    /// The question as it was published.
    pub question: SharedQuestion,
    /// Approved (or denied).
    pub approve: bool,
    /// How far the approval reaches (`once`, `session`, `always`).
    pub scope: String,
    /// The host it was answered on.
    pub by: String,
}

/// Where a question of a host stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuestionState {
    /// Waiting for an answer.
    Open,
    /// Answered on host `by`; the asking host has not applied it yet.
    Answered {
        /// The host it was answered on.
        by: String,
    },
    /// Answered on host `by`, and the asking host acknowledged it: `what` it did (applied,
    /// or why not).
    Applied {
        /// The host it was answered on.
        by: String,
        /// What the asking host did with the answer.
        what: String,
    },
    /// Answered on the asking host, its session ended, or the host started again.
    Closed,
}

fn shared_only(db: &Db) -> Result<(), StoreError> {
    match db {
        Db::Postgres(_) => Ok(()),
        Db::Sqlite(_) => Err(StoreError::NotShared("questions across hosts")),
    }
}

fn id_val(id: u64) -> Val {
    Val::Int(i64::try_from(id).unwrap_or(i64::MAX))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// The columns [`question`] reads, in its order.
const QUESTION_COLUMNS: &str = r#"host, id, "user", session, path, access, reason, votes, waiting, COALESCE(abs, '')"#;

fn question(r: &Row) -> Result<SharedQuestion, StoreError> {
    Ok(SharedQuestion {
        host: r.text(0),
        id: r.int(1) as u64,
        user: r.text(2),
        session: r.text(3),
        path: r.text(4),
        abs: r.text(9),
        access: super::parse_access(&r.text(5))?,
        reason: r.text(6),
        votes: r.text(7),
        waiting: r.int(8) != 0,
    })
}

impl Store {
    /// A daemon of `host` starting again: the open questions of its earlier life are closed
    /// (their waiting workers are gone; a worker that asks again is asked again), and the
    /// highest question id it used is returned, so that new questions get new ids. Answers
    /// given while it was down stay, for [`Store::answered_questions`].
    pub fn restart_questions(&self, host: &str) -> Result<u64, StoreError> {
        shared_only(&self.db)?;
        self.db
            .exec("UPDATE question SET state = 'closed', answered_ms = ?2 WHERE host = ?1 AND state = 'open'", &[host.into(), Val::Int(now_ms())])
            .map_err(sql("close the host's earlier questions"))?;
        let r = self.db.query("SELECT COALESCE(MAX(id), 0) FROM question WHERE host = ?1", &[host.into()]).map_err(sql("read the host's question ids"))?;
        Ok(r.first().map_or(0, |r| r.int(0)).max(0) as u64)
    }

    /// Publishes an open question of its host; false if the host's row of that id is there
    /// already (a question of an earlier life of the host, which is never overwritten).
    pub fn publish_question(&self, q: &SharedQuestion) -> Result<bool, StoreError> {
        shared_only(&self.db)?;
        self.db
            .exec(
                r#"INSERT INTO question (host, id, "user", session, path, access, reason, votes, waiting, asked_ms, state, abs)
                   VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 'open', ?11)
                   ON CONFLICT (host, id) DO NOTHING"#,
                &[
                    (&q.host).into(),
                    id_val(q.id),
                    (&q.user).into(),
                    (&q.session).into(),
                    (&q.path).into(),
                    q.access.as_str().into(),
                    (&q.reason).into(),
                    (&q.votes).into(),
                    Val::Int(i64::from(q.waiting)),
                    Val::Int(now_ms()),
                    (&q.abs).into(),
                ],
            )
            .map_err(sql("publish a question"))
            .map(|n| n == 1)
    }

    /// The open questions of every host, `user`'s only unless `None` (root), oldest first.
    pub fn open_questions(&self, user: Option<&str>) -> Result<Vec<SharedQuestion>, StoreError> {
        shared_only(&self.db)?;
        let r = self.db.query(
            &format!(r#"SELECT {QUESTION_COLUMNS} FROM question WHERE state = 'open' AND (?1 = '' OR "user" = ?1) ORDER BY asked_ms, host, id"#),
            &[user.unwrap_or("").into()],
        );
        super::rows("list the fleet's questions", r, question)
    }

    /// Where question `id` of `host` stands (`None`: it was never published).
    pub fn question_state(&self, host: &str, id: u64) -> Result<Option<QuestionState>, StoreError> {
        shared_only(&self.db)?;
        let r = self
            .db
            .query("SELECT state, answered_by, applied FROM question WHERE host = ?1 AND id = ?2", &[host.into(), id_val(id)])
            .map_err(sql("read a question"))?;
        Ok(r.first().map(|r| match (r.text(0).as_str(), r.opt_text(2)) {
            ("open", _) => QuestionState::Open,
            ("answered", _) => QuestionState::Answered { by: r.text(1) },
            (_, Some(what)) => QuestionState::Applied { by: r.text(1), what },
            _ => QuestionState::Closed,
        }))
    }

    /// Answers open question `id` of `host` from host `by`, as `user` (`None`: root, who may
    /// answer anyone's), and returns its session: `None` if there is no such open question
    /// of that user. The asking host is notified and applies it.
    pub fn answer_question(&self, host: &str, id: u64, user: Option<&str>, approve: bool, scope: &str, by: &str) -> Result<Option<String>, StoreError> {
        shared_only(&self.db)?;
        let r = self
            .db
            .query(
                r#"UPDATE question SET state = 'answered', answer = ?1, scope = ?2, answered_by = ?3, answered_ms = ?4
                   WHERE host = ?5 AND id = ?6 AND state = 'open' AND (?7 = '' OR "user" = ?7) RETURNING session"#,
                &[
                    (if approve { "approve" } else { "deny" }).into(),
                    scope.into(),
                    by.into(),
                    Val::Int(now_ms()),
                    host.into(),
                    id_val(id),
                    user.unwrap_or("").into(),
                ],
            )
            .map_err(sql("answer a question"))?;
        Ok(r.first().map(|r| r.text(0)))
    }

    /// Closes open question `id` of `host` (answered there, or its session ended): false if
    /// it was not open (answered on another host meanwhile, or never published).
    pub fn close_question(&self, host: &str, id: u64) -> Result<bool, StoreError> {
        shared_only(&self.db)?;
        let n = self
            .db
            .exec(
                "UPDATE question SET state = 'closed', answered_ms = ?3 WHERE host = ?1 AND id = ?2 AND state = 'open'",
                &[host.into(), id_val(id), Val::Int(now_ms())],
            )
            .map_err(sql("close a question"))?;
        Ok(n == 1)
    }

    /// The answers other hosts gave to `host`'s questions that `host` has not acknowledged
    /// yet (with [`Store::acknowledge_answer`]), oldest first.
    pub fn answered_questions(&self, host: &str) -> Result<Vec<SharedAnswer>, StoreError> {
        shared_only(&self.db)?;
        let r = self.db.query(
            &format!("SELECT {QUESTION_COLUMNS}, answer, scope, answered_by FROM question WHERE host = ?1 AND state = 'answered' ORDER BY answered_ms, id"),
            &[host.into()],
        );
        super::rows("read the answers given on other hosts", r, |r| {
            Ok(SharedAnswer { question: question(r)?, approve: r.text(10) == "approve", scope: r.text(11), by: r.text(12) })
        })
    }

    /// The asking host's acknowledgement of the answer to its question `id`: `what` it did
    /// with it (closing the row). False if it was acknowledged already: each answer is
    /// acknowledged once.
    pub fn acknowledge_answer(&self, host: &str, id: u64, what: &str) -> Result<bool, StoreError> {
        shared_only(&self.db)?;
        let n = self
            .db
            .exec(
                "UPDATE question SET state = 'closed', applied = ?3, applied_ms = ?4 WHERE host = ?1 AND id = ?2 AND state = 'answered'",
                &[host.into(), id_val(id), what.into(), Val::Int(now_ms())],
            )
            .map_err(sql("acknowledge an answer"))?;
        Ok(n == 1)
    }
}
