//! Questions across a fleet: a question escalated on one host is published in the shared
//! database, so the user can list and answer it from any host; the asking host hears the
//! answer (`NOTIFY pincer_answer` with its host name) and applies it to the waiting worker.
//!
//! A row goes `open` (published by the asking host) → `answered` (by another host, with
//! the answer) → `closed` (applied by the asking host, or answered, ended or dropped
//! there). Each step is one conditional `UPDATE`, so two hosts answering at once cannot
//! both win, and an answer is applied once. PostgreSQL only: a single host answers its own
//! questions.

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
    /// The question's id on this host.
    pub id: u64,
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
    /// Answered on host `by`; the asking host applies it.
    Answered {
        /// The host it was answered on.
        by: String,
    },
    /// Applied, answered on the asking host, or dropped.
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

fn question(r: &Row) -> Result<SharedQuestion, StoreError> {
    Ok(SharedQuestion {
        host: r.text(0),
        id: r.int(1) as u64,
        user: r.text(2),
        session: r.text(3),
        path: r.text(4),
        access: super::parse_access(&r.text(5))?,
        reason: r.text(6),
        votes: r.text(7),
        waiting: r.int(8) != 0,
    })
}

impl Store {
    /// Drops every question `host` published before (a daemon starting again: its questions
    /// and their waiting workers are gone, and it numbers questions from 1 again).
    pub fn drop_questions(&self, host: &str) -> Result<u64, StoreError> {
        shared_only(&self.db)?;
        self.db.exec("DELETE FROM question WHERE host = ?1", &[host.into()]).map_err(sql("drop the host's questions"))
    }

    /// Publishes an open question of its host (again, if it was asked again).
    pub fn publish_question(&self, q: &SharedQuestion) -> Result<(), StoreError> {
        shared_only(&self.db)?;
        self.db
            .exec(
                r#"INSERT INTO question (host, id, "user", session, path, access, reason, votes, waiting, asked_ms, state)
                   VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 'open')
                   ON CONFLICT (host, id) DO UPDATE SET "user" = excluded."user", session = excluded.session, path = excluded.path,
                     access = excluded.access, reason = excluded.reason, votes = excluded.votes, waiting = excluded.waiting,
                     asked_ms = excluded.asked_ms, state = 'open', answer = NULL, scope = NULL, answered_by = NULL, answered_ms = NULL"#,
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
                ],
            )
            .map_err(sql("publish a question"))?;
        Ok(())
    }

    /// The open questions of every host, `user`'s only unless `None` (root), oldest first.
    pub fn open_questions(&self, user: Option<&str>) -> Result<Vec<SharedQuestion>, StoreError> {
        shared_only(&self.db)?;
        let r = self.db.query(
            r#"SELECT host, id, "user", session, path, access, reason, votes, waiting FROM question
               WHERE state = 'open' AND (?1 = '' OR "user" = ?1) ORDER BY asked_ms, host, id"#,
            &[user.unwrap_or("").into()],
        );
        super::rows("list the fleet's questions", r, question)
    }

    /// Where question `id` of `host` stands (`None`: it was never published).
    pub fn question_state(&self, host: &str, id: u64) -> Result<Option<QuestionState>, StoreError> {
        shared_only(&self.db)?;
        let r =
            self.db.query("SELECT state, answered_by FROM question WHERE host = ?1 AND id = ?2", &[host.into(), id_val(id)]).map_err(sql("read a question"))?;
        Ok(r.first().map(|r| match r.text(0).as_str() {
            "open" => QuestionState::Open,
            "answered" => QuestionState::Answered { by: r.text(1) },
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

    /// Takes the answers other hosts gave to `host`'s questions, closing them: each answer
    /// is returned once.
    pub fn take_answers(&self, host: &str) -> Result<Vec<SharedAnswer>, StoreError> {
        shared_only(&self.db)?;
        let r = self
            .db
            .query("UPDATE question SET state = 'closed' WHERE host = ?1 AND state = 'answered' RETURNING id, answer, scope, answered_by", &[host.into()]);
        super::rows("take the answers given on other hosts", r, |r| {
            Ok(SharedAnswer { id: r.int(0) as u64, approve: r.text(1) == "approve", scope: r.text(2), by: r.text(3) })
        })
    }
}
