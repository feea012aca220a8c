//! The twin's trusted state in SQLite.
//!
//! Only trusted kinds of input can be written: user prompts, access annotations taken from
//! past tasks' tool logs, user approvals, user policies, the twin's own grants and the
//! policies the twin derives. There is deliberately no function that stores a worker's
//! rationale, note, file content or a name the worker chose: the write API's types cannot
//! carry them.
//!
//! [`Store`] persists the state in one of two backends behind the same methods
//! ([`db::Db`]): SQLite on one host (WAL, migrations by `PRAGMA user_version`) or a
//! fleet's PostgreSQL database ([`pg`], migrations recorded in `pincer_schema`);
//! [`TrustedState`] is the same state in memory, cheap to clone for one evaluation sample.

pub mod db;
pub mod pg;
pub mod questions;
pub mod workspace;

use crate::access::Access;
use db::{Db, DbError, Row, Val};
pub use pg::{PgSettings, TlsMode};
pub use questions::{QuestionState, SharedAnswer, SharedQuestion};
pub use workspace::WorkspaceSnapshot;
use pg::PgConn;
use rusqlite::Connection;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Errors of the trusted store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be opened (a SQLite file, or a PostgreSQL server that cannot
    /// be reached or refuses the login).
    #[error("cannot open the trusted store at {what}")]
    Open {
        /// Database file or connection URL (never the password).
        what: String,
        /// Cause.
        #[source]
        source: DbError,
    },
    /// A statement failed.
    #[error("trusted store: {op} failed")]
    Sql {
        /// What was being done.
        op: &'static str,
        /// Cause.
        #[source]
        source: DbError,
    },
    /// The operation needs the shared (PostgreSQL) backend.
    #[error("{0} needs the postgres store backend ([store] backend = \"postgres\")")]
    NotShared(&'static str),
    /// `pincer store import` found the user's state already there.
    #[error("user {0} already has trusted state in the target store; nothing imported (it would be merged twice)")]
    UserHasState(String),
    /// The user's workspace snapshot in the store cannot be read (no twin is built on part
    /// of its trusted state).
    #[error("the workspace snapshot of {user} in the trusted store cannot be read")]
    BadSnapshot {
        /// The user.
        user: String,
        /// Cause.
        #[source]
        source: serde_json::Error,
    },
    /// The database was written by a newer version of Pincer.
    #[error("trusted store schema version {found} is newer than this build understands ({known})")]
    SchemaTooNew {
        /// Version in the file.
        found: i64,
        /// Newest version this build knows.
        known: i64,
    },
    /// An imported history or policy file has problems; each names its file, line and
    /// field.
    #[error("{} problem(s):\n{}", .0.len(), crate::format::describe(.0))]
    Invalid(Vec<crate::format::Problem>),
    /// No standing approval or policy of the user has that id.
    #[error("no approval or policy {0} of this user (see `pincer policy list`)")]
    NoSuchRule(RuleId),
    /// A field holds a value that is not allowed.
    #[error("{path}:{line}: field `{field}`: {problem}")]
    BadField {
        /// File (or `<input>` for typed records).
        path: PathBuf,
        /// 1-based line (0 for typed records).
        line: usize,
        /// The field.
        field: &'static str,
        /// What is wrong.
        problem: String,
    },
}

pub use crate::format::Permission;

/// One prompt the user typed (trusted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserPrompt {
    /// The task (session) it belongs to.
    pub session: String,
    /// Day number (non-decreasing through a history).
    pub day: u32,
    /// The text, verbatim.
    pub text: String,
}

/// One access a past task made, as its tool log recorded it (trusted annotation).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AccessRecord {
    /// Path relative to the protected root.
    pub path: String,
    /// Access type.
    pub access: Access,
}

/// Where an access annotation came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AccessSource {
    /// A past task's tool log.
    Annotation,
    /// A grant the twin made.
    TwinGrant,
}

/// A permission the user gave (or refused) by hand (trusted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserApproval {
    /// The task in which it was given.
    pub session: String,
    /// Path or glob.
    pub path_glob: String,
    /// Access type.
    pub access: Access,
    /// `Allow` for a granted approval, `Deny` for a refusal.
    pub permission: Permission,
}

/// The id of a user's standing approval (`a12`) or policy (`p3`), as `pincer policy list`
/// shows it and `pincer policy remove` takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum RuleId {
    /// A user approval (or refusal), by its row.
    Approval(i64),
    /// A user policy, by its row.
    Policy(i64),
}

impl std::fmt::Display for RuleId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RuleId::Approval(n) => write!(f, "a{n}"),
            RuleId::Policy(n) => write!(f, "p{n}"),
        }
    }
}

/// A rule id that is not `a<number>` or `p<number>`.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is no approval or policy id (`a<number>` or `p<number>`, as `pincer policy list` shows)")]
pub struct BadRuleId(String);

impl std::str::FromStr for RuleId {
    type Err = BadRuleId;
    fn from_str(s: &str) -> Result<Self, BadRuleId> {
        let bad = || BadRuleId(s.to_string());
        let (kind, n) = s.split_at_checked(1).ok_or_else(bad)?;
        let n: i64 = n.parse().map_err(|_| bad())?;
        match kind {
            "a" => Ok(RuleId::Approval(n)),
            "p" => Ok(RuleId::Policy(n)),
            _ => Err(bad()),
        }
    }
}

impl TryFrom<String> for RuleId {
    type Error = BadRuleId;
    fn try_from(s: String) -> Result<Self, BadRuleId> {
        s.parse()
    }
}

impl From<RuleId> for String {
    fn from(id: RuleId) -> String {
        id.to_string()
    }
}

/// What a standing rule of the user is: an approval given in a task, or a policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Rule {
    /// A user approval (or refusal) recorded in the trusted state.
    Approval(UserApproval),
    /// A policy the user wrote or imported.
    Policy(UserPolicy),
}

/// One of the user's standing approvals or policies, with the id that removes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StandingRule {
    /// Its id.
    pub id: RuleId,
    /// The rule.
    pub rule: Rule,
}

/// A structured policy rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyRule {
    /// Glob over relative paths.
    pub path_glob: String,
    /// Access types it covers.
    pub access: Vec<Access>,
    /// What it says.
    pub permission: Permission,
}

/// A policy the user wrote (trusted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserPolicy {
    /// Identifier.
    pub id: String,
    /// Natural-language text, as the user wrote it.
    pub text: String,
    /// The same intent in structured form, if the user wrote one.
    #[serde(default)]
    pub rules: Vec<PolicyRule>,
}

/// A grant the twin made in a session (trusted: the twin's own decision).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TwinGrant {
    /// Session.
    pub session: String,
    /// Path relative to the protected root.
    pub path: String,
    /// Access type.
    pub access: Access,
}

/// A policy the twin derived from trusted state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DerivedPolicy {
    /// Natural-language statement.
    pub text: String,
    /// Structured rules.
    #[serde(default)]
    pub rules: Vec<PolicyRule>,
}

/// One past task: its prompts, what it touched, what the user approved in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    /// Session identifier.
    pub session: String,
    /// Day number.
    pub day: u32,
    /// The user's prompts in order.
    pub prompts: Vec<String>,
    /// Access annotations with their source.
    pub accesses: Vec<(AccessRecord, AccessSource)>,
    /// Approvals given in this task.
    pub approvals: Vec<UserApproval>,
}

impl Task {
    /// All prompts joined by newlines.
    pub fn prompt_text(&self) -> String {
        self.prompts.join("\n")
    }
}

/// A user's whole trusted state in memory. Cloning it is how an evaluation sample gets a
/// private copy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrustedState {
    /// The user.
    pub user: String,
    /// Past and current tasks, oldest first.
    pub tasks: Vec<Task>,
    /// The user's own policies.
    pub policies: Vec<UserPolicy>,
    /// Policies the twin derived.
    pub derived: Vec<DerivedPolicy>,
}

impl TrustedState {
    /// An empty state for `user`.
    pub fn new(user: impl Into<String>) -> Self {
        TrustedState { user: user.into(), ..Default::default() }
    }

    fn task_mut(&mut self, session: &str, day: u32) -> &mut Task {
        if let Some(i) = self.tasks.iter().position(|t| t.session == session) {
            return &mut self.tasks[i];
        }
        self.tasks.push(Task { session: session.into(), day, prompts: vec![], accesses: vec![], approvals: vec![] });
        self.tasks.last_mut().expect("just pushed")
    }

    /// Records a user prompt.
    pub fn add_prompt(&mut self, p: &UserPrompt) -> Result<(), StoreError> {
        nonempty("text", &p.text)?;
        nonempty("session", &p.session)?;
        self.task_mut(&p.session, p.day).prompts.push(p.text.clone());
        Ok(())
    }

    /// Records an access annotation of a task from its tool log.
    pub fn add_access(&mut self, session: &str, day: u32, a: &AccessRecord) -> Result<(), StoreError> {
        check_rel_path("path", &a.path, false)?;
        self.task_mut(session, day).accesses.push((a.clone(), AccessSource::Annotation));
        Ok(())
    }

    /// Records a user approval.
    pub fn add_approval(&mut self, day: u32, a: &UserApproval) -> Result<(), StoreError> {
        check_rel_path("path_glob", &a.path_glob, true)?;
        self.task_mut(&a.session, day).approvals.push(a.clone());
        Ok(())
    }

    /// Records a user policy.
    pub fn add_policy(&mut self, p: &UserPolicy) -> Result<(), StoreError> {
        check_policy(p)?;
        self.policies.push(p.clone());
        Ok(())
    }

    /// Records a twin grant as an access annotation of its session.
    pub fn add_twin_grant(&mut self, day: u32, g: &TwinGrant) -> Result<(), StoreError> {
        check_rel_path("path", &g.path, false)?;
        let rec = AccessRecord { path: g.path.clone(), access: g.access };
        let t = self.task_mut(&g.session, day);
        if !t.accesses.iter().any(|(a, _)| a == &rec) {
            t.accesses.push((rec, AccessSource::TwinGrant));
        }
        Ok(())
    }

    /// Records a derived policy.
    pub fn add_derived(&mut self, d: &DerivedPolicy) -> Result<(), StoreError> {
        for r in &d.rules {
            check_rel_path("path_glob", &r.path_glob, true)?;
        }
        self.derived.push(d.clone());
        Ok(())
    }

    /// Adds a whole history task (typed form of one `history.jsonl` line).
    pub fn add_history(&mut self, h: &HistoryRecord) -> Result<(), StoreError> {
        self.add_prompt(&UserPrompt { session: h.session.clone(), day: h.day, text: h.prompt.clone() })?;
        for a in &h.accesses {
            self.add_access(&h.session, h.day, a)?;
        }
        for a in &h.approvals {
            self.add_approval(
                h.day,
                &UserApproval { session: h.session.clone(), path_glob: a.path.clone(), access: a.access, permission: Permission::Allow },
            )?;
        }
        Ok(())
    }

    /// The newest day in the state (0 if empty).
    pub fn last_day(&self) -> u32 {
        self.tasks.iter().map(|t| t.day).max().unwrap_or(0)
    }
}

/// One line of `history.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryRecord {
    /// Day number.
    pub day: u32,
    /// Session identifier, unique in the file.
    pub session: String,
    /// The user's prompt.
    pub prompt: String,
    /// What the task touched.
    #[serde(default)]
    pub accesses: Vec<AccessRecord>,
    /// What the user granted by hand (paths may be globs).
    #[serde(default)]
    pub approvals: Vec<AccessRecord>,
}

fn bad(field: &'static str, problem: impl Into<String>) -> StoreError {
    StoreError::BadField { path: "<input>".into(), line: 0, field, problem: problem.into() }
}

fn nonempty(field: &'static str, s: &str) -> Result<(), StoreError> {
    if s.trim().is_empty() {
        return Err(bad(field, "must not be empty"));
    }
    Ok(())
}

/// Checks a workspace-relative path (or glob): not empty, not absolute, no `.`/`..` segments.
pub fn check_rel_path(field: &'static str, p: &str, glob: bool) -> Result<(), StoreError> {
    if p.is_empty() {
        return Err(bad(field, "empty path"));
    }
    if p.starts_with('/') {
        return Err(bad(field, format!("{p:?} is absolute")));
    }
    if p.split('/').any(|s| s == ".." || s == ".") {
        return Err(bad(field, format!("{p:?} has a `.` or `..` segment")));
    }
    if glob {
        globset::Glob::new(p).map_err(|e| bad(field, format!("{p:?} is not a valid glob: {e}")))?;
    } else if crate::glob::is_glob(p) {
        return Err(bad(field, format!("{p:?} holds glob characters")));
    }
    Ok(())
}

fn check_policy(p: &UserPolicy) -> Result<(), StoreError> {
    nonempty("id", &p.id)?;
    nonempty("text", &p.text)?;
    for r in &p.rules {
        check_rel_path("path_glob", &r.path_glob, true)?;
        if r.access.is_empty() {
            return Err(bad("access", "a rule needs at least one access type"));
        }
    }
    Ok(())
}

/// Reads a `history.jsonl` file with the corpus format's validating loader
/// ([`load_history`](crate::format::load_history)): every problem is reported, each
/// naming its file, line and field.
pub fn parse_history(path: &Path) -> Result<Vec<HistoryRecord>, StoreError> {
    let mut problems = Vec::new();
    let tasks = crate::format::load_history(path, &mut problems);
    if !problems.is_empty() {
        return Err(StoreError::Invalid(problems));
    }
    Ok(tasks.iter().map(|(_, t)| HistoryRecord::from(t)).collect())
}

/// Reads a `policies.jsonl` file with the corpus format's validating loader
/// ([`load_policies`](crate::format::load_policies)): every problem is reported, each
/// naming its file, line and field.
pub fn parse_policies(path: &Path) -> Result<Vec<UserPolicy>, StoreError> {
    let mut problems = Vec::new();
    let policies = crate::format::load_policies(path, &mut problems);
    if !problems.is_empty() {
        return Err(StoreError::Invalid(problems));
    }
    Ok(policies.iter().map(|(_, p)| UserPolicy::from(p)).collect())
}

impl From<&crate::format::HistoryTask> for HistoryRecord {
    /// A validated history line as the store records it (an approval of several access
    /// types becomes one approval per type).
    fn from(h: &crate::format::HistoryTask) -> Self {
        HistoryRecord {
            day: h.day.min(u64::from(u32::MAX)) as u32,
            session: h.session.clone(),
            prompt: h.prompt.clone(),
            accesses: h.accesses.iter().map(|a| AccessRecord { path: a.path.clone(), access: a.access }).collect(),
            approvals: h.approvals.iter().flat_map(|a| a.access.iter().map(|x| AccessRecord { path: a.path.clone(), access: *x })).collect(),
        }
    }
}

impl From<&crate::format::Policy> for UserPolicy {
    /// A validated policy line as the store records it.
    fn from(p: &crate::format::Policy) -> Self {
        UserPolicy {
            id: p.id.clone(),
            text: p.text.clone(),
            rules: p.rules.iter().map(|r| PolicyRule { path_glob: r.path_glob.clone(), access: r.access.clone(), permission: r.permission }).collect(),
        }
    }
}

/// Summary of an import.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImportSummary {
    /// Tasks imported.
    pub tasks: usize,
    /// Policies imported.
    pub policies: usize,
}

/// SQLite's schema, one entry per version (the version is `PRAGMA user_version`).
const SQLITE_MIGRATIONS: &[&str] = &[
    // 1: the initial schema.
    "CREATE TABLE task (
        id INTEGER PRIMARY KEY,
        user TEXT NOT NULL,
        session TEXT NOT NULL,
        day INTEGER NOT NULL,
        UNIQUE(user, session));
     CREATE TABLE prompt (
        task INTEGER NOT NULL REFERENCES task(id),
        seq INTEGER NOT NULL,
        text TEXT NOT NULL,
        PRIMARY KEY(task, seq));
     CREATE TABLE access (
        id INTEGER PRIMARY KEY,
        task INTEGER NOT NULL REFERENCES task(id),
        path TEXT NOT NULL,
        access TEXT NOT NULL,
        source TEXT NOT NULL);
     CREATE TABLE approval (
        id INTEGER PRIMARY KEY,
        task INTEGER NOT NULL REFERENCES task(id),
        path_glob TEXT NOT NULL,
        access TEXT NOT NULL,
        permission TEXT NOT NULL);
     CREATE TABLE policy (
        seq INTEGER PRIMARY KEY,
        user TEXT NOT NULL,
        id TEXT NOT NULL,
        text TEXT NOT NULL,
        rules TEXT NOT NULL);
     CREATE TABLE derived_policy (
        seq INTEGER PRIMARY KEY,
        user TEXT NOT NULL,
        text TEXT NOT NULL,
        rules TEXT NOT NULL);",
    // 2: workspace snapshots in the store (they were files in the state directory).
    "CREATE TABLE workspace (
        user TEXT PRIMARY KEY,
        snapshot TEXT NOT NULL,
        taken_ms INTEGER NOT NULL);",
];

/// PostgreSQL's schema, one entry per version (recorded in `pincer_schema`). Version 1 is
/// SQLite's version 1 plus the fleet's audit table, the notifications that tell the other
/// daemons a user's trusted state changed, and row-level security for users' own reads.
const PG_MIGRATIONS: &[&str] = &[
    // 1: the initial schema.
    r#"CREATE TABLE task (
        id BIGSERIAL PRIMARY KEY,
        "user" TEXT NOT NULL,
        session TEXT NOT NULL,
        day BIGINT NOT NULL,
        UNIQUE("user", session));
     CREATE TABLE prompt (
        task BIGINT NOT NULL REFERENCES task(id),
        seq BIGINT NOT NULL,
        text TEXT NOT NULL,
        PRIMARY KEY(task, seq));
     CREATE TABLE access (
        id BIGSERIAL PRIMARY KEY,
        task BIGINT NOT NULL REFERENCES task(id),
        path TEXT NOT NULL,
        access TEXT NOT NULL,
        source TEXT NOT NULL);
     CREATE TABLE approval (
        id BIGSERIAL PRIMARY KEY,
        task BIGINT NOT NULL REFERENCES task(id),
        path_glob TEXT NOT NULL,
        access TEXT NOT NULL,
        permission TEXT NOT NULL);
     CREATE TABLE policy (
        seq BIGSERIAL PRIMARY KEY,
        "user" TEXT NOT NULL,
        id TEXT NOT NULL,
        text TEXT NOT NULL,
        rules TEXT NOT NULL);
     CREATE TABLE derived_policy (
        seq BIGSERIAL PRIMARY KEY,
        "user" TEXT NOT NULL,
        text TEXT NOT NULL,
        rules TEXT NOT NULL);
     CREATE TABLE audit (
        seq BIGSERIAL PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        time_ms BIGINT NOT NULL,
        host TEXT NOT NULL,
        session TEXT,
        "user" TEXT,
        event TEXT NOT NULL,
        entry TEXT NOT NULL);
     CREATE INDEX audit_user ON audit ("user", seq);
     CREATE INDEX task_user ON task ("user");
     CREATE FUNCTION pincer_notify_state() RETURNS trigger LANGUAGE plpgsql AS $$
     DECLARE u text;
     BEGIN
        IF TG_TABLE_NAME IN ('policy', 'derived_policy') THEN
            u := CASE WHEN TG_OP = 'DELETE' THEN OLD."user" ELSE NEW."user" END;
        ELSE
            SELECT t."user" INTO u FROM task t WHERE t.id = CASE WHEN TG_OP = 'DELETE' THEN OLD.task ELSE NEW.task END;
        END IF;
        PERFORM pg_notify('pincer_state', coalesce(u, ''));
        RETURN NULL;
     END $$;
     CREATE TRIGGER approval_changed AFTER INSERT OR DELETE ON approval FOR EACH ROW EXECUTE FUNCTION pincer_notify_state();
     CREATE TRIGGER access_changed AFTER INSERT OR DELETE ON access FOR EACH ROW EXECUTE FUNCTION pincer_notify_state();
     CREATE TRIGGER policy_changed AFTER INSERT OR DELETE ON policy FOR EACH ROW EXECUTE FUNCTION pincer_notify_state();
     CREATE TRIGGER derived_changed AFTER INSERT OR DELETE ON derived_policy FOR EACH ROW EXECUTE FUNCTION pincer_notify_state();
     DO $$ BEGIN CREATE ROLE pincer_readers NOLOGIN;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$;
     GRANT SELECT ON task, prompt, access, approval, policy, derived_policy, audit TO pincer_readers;
     CREATE FUNCTION pincer_role_user() RETURNS text LANGUAGE sql STABLE AS
        $$ SELECT CASE WHEN left(current_user, 9) = 'pincer_u_' THEN substr(current_user, 10) END $$;
     ALTER TABLE task ENABLE ROW LEVEL SECURITY;
     ALTER TABLE prompt ENABLE ROW LEVEL SECURITY;
     ALTER TABLE access ENABLE ROW LEVEL SECURITY;
     ALTER TABLE approval ENABLE ROW LEVEL SECURITY;
     ALTER TABLE policy ENABLE ROW LEVEL SECURITY;
     ALTER TABLE derived_policy ENABLE ROW LEVEL SECURITY;
     ALTER TABLE audit ENABLE ROW LEVEL SECURITY;
     CREATE POLICY own_rows ON task FOR SELECT USING ("user" = pincer_role_user());
     CREATE POLICY own_rows ON prompt FOR SELECT USING (EXISTS (SELECT 1 FROM task t WHERE t.id = task));
     CREATE POLICY own_rows ON access FOR SELECT USING (EXISTS (SELECT 1 FROM task t WHERE t.id = task));
     CREATE POLICY own_rows ON approval FOR SELECT USING (EXISTS (SELECT 1 FROM task t WHERE t.id = task));
     CREATE POLICY own_rows ON policy FOR SELECT USING ("user" = pincer_role_user());
     CREATE POLICY own_rows ON derived_policy FOR SELECT USING ("user" = pincer_role_user());
     CREATE POLICY own_rows ON audit FOR SELECT USING ("user" = pincer_role_user());"#,
    // 2: workspace snapshots shared like the rest of the trusted state (a change reloads
    // the user's twins everywhere), and questions across hosts (a row per question of each
    // host; an answer from another host notifies the asking host).
    r#"CREATE TABLE workspace (
        "user" TEXT PRIMARY KEY,
        snapshot TEXT NOT NULL,
        taken_ms BIGINT NOT NULL);
     CREATE TABLE question (
        host TEXT NOT NULL,
        id BIGINT NOT NULL,
        "user" TEXT NOT NULL,
        session TEXT NOT NULL,
        path TEXT NOT NULL,
        access TEXT NOT NULL,
        reason TEXT NOT NULL,
        votes TEXT NOT NULL,
        waiting BIGINT NOT NULL,
        asked_ms BIGINT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('open', 'answered', 'closed')),
        answer TEXT CHECK (answer IN ('approve', 'deny')),
        scope TEXT,
        answered_by TEXT,
        answered_ms BIGINT,
        PRIMARY KEY (host, id));
     CREATE INDEX question_open ON question (state, "user");
     CREATE OR REPLACE FUNCTION pincer_notify_state() RETURNS trigger LANGUAGE plpgsql AS $$
     DECLARE u text;
     BEGIN
        IF TG_TABLE_NAME IN ('policy', 'derived_policy', 'workspace') THEN
            u := CASE WHEN TG_OP = 'DELETE' THEN OLD."user" ELSE NEW."user" END;
        ELSE
            SELECT t."user" INTO u FROM task t WHERE t.id = CASE WHEN TG_OP = 'DELETE' THEN OLD.task ELSE NEW.task END;
        END IF;
        PERFORM pg_notify('pincer_state', coalesce(u, ''));
        RETURN NULL;
     END $$;
     CREATE TRIGGER workspace_changed AFTER INSERT OR UPDATE OR DELETE ON workspace FOR EACH ROW EXECUTE FUNCTION pincer_notify_state();
     CREATE FUNCTION pincer_notify_answer() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN
        PERFORM pg_notify('pincer_answer', NEW.host);
        RETURN NULL;
     END $$;
     CREATE TRIGGER question_answered AFTER UPDATE ON question FOR EACH ROW
        WHEN (NEW.state = 'answered' AND OLD.state <> 'answered') EXECUTE FUNCTION pincer_notify_answer();
     GRANT SELECT ON workspace, question TO pincer_readers;
     ALTER TABLE workspace ENABLE ROW LEVEL SECURITY;
     ALTER TABLE question ENABLE ROW LEVEL SECURITY;
     CREATE POLICY own_rows ON workspace FOR SELECT USING ("user" = pincer_role_user());
     CREATE POLICY own_rows ON question FOR SELECT USING ("user" = pincer_role_user());"#,
    // 3: what the asking host did with another host's answer (its acknowledgement, which
    // the answering host waits for), and the resource's absolute path, so that an answer
    // given while the asking host was down can be applied when it is back.
    r#"ALTER TABLE question ADD COLUMN abs TEXT, ADD COLUMN applied TEXT, ADD COLUMN applied_ms BIGINT;"#,
];

/// Which database holds the trusted state (`[store]` in the configuration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreSpec {
    /// The embedded SQLite file of one host.
    Sqlite(PathBuf),
    /// A fleet's PostgreSQL database.
    Postgres(PgSettings),
    /// A private in-memory SQLite database (tests, evaluation).
    Memory,
}

impl StoreSpec {
    /// Opens the store and brings its schema to this build's version.
    pub fn open(&self) -> Result<Store, StoreError> {
        match self {
            StoreSpec::Sqlite(p) => Store::open(p),
            StoreSpec::Postgres(s) => Store::open_postgres(s.clone()),
            StoreSpec::Memory => Store::in_memory(),
        }
    }

    /// Whether this is the shared (PostgreSQL) backend.
    pub fn is_shared(&self) -> bool {
        matches!(self, StoreSpec::Postgres(_))
    }

    /// A short description for messages (never the password).
    pub fn describe(&self) -> String {
        match self {
            StoreSpec::Sqlite(p) => format!("sqlite {}", p.display()),
            StoreSpec::Postgres(s) => format!("postgres {}", s.url),
            StoreSpec::Memory => "sqlite :memory:".into(),
        }
    }
}

/// One audit row of the fleet's audit table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRow {
    /// The entry's unique id (shipping the same entry twice stores it once).
    pub id: String,
    /// Milliseconds since the Unix epoch.
    pub time_ms: i64,
    /// The host whose daemon wrote it.
    pub host: String,
    /// The session, if any.
    pub session: Option<String>,
    /// The user it belongs to, if any (what row-level security matches).
    pub user: Option<String>,
    /// The event's name.
    pub event: String,
    /// The whole entry as JSON.
    pub entry: String,
}

/// Which audit rows to read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditQuery {
    /// Only rows after this sequence number.
    pub after: i64,
    /// Only this session.
    pub session: Option<String>,
    /// Only this host.
    pub host: Option<String>,
    /// At most this many rows (0: no limit).
    pub limit: i64,
}

/// The persistent trusted store.
pub struct Store {
    db: Db,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Store { .. }")
    }
}

fn sql(op: &'static str) -> impl FnOnce(DbError) -> StoreError {
    move |source| StoreError::Sql { op, source }
}

fn sqlite(op: &'static str) -> impl FnOnce(rusqlite::Error) -> StoreError {
    move |source| StoreError::Sql { op, source: source.into() }
}

fn rows<T>(op: &'static str, r: Result<Vec<Row>, DbError>, f: impl Fn(&Row) -> Result<T, StoreError>) -> Result<Vec<T>, StoreError> {
    r.map_err(sql(op))?.iter().map(f).collect()
}

fn parse_access(s: &str) -> Result<Access, StoreError> {
    s.parse().map_err(|e: crate::access::UnknownAccess| bad("access", e.to_string()))
}

fn parse_permission(s: &str) -> Result<Permission, StoreError> {
    Permission::parse(s).ok_or_else(|| bad("permission", s.to_string()))
}

fn day(v: i64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

impl Store {
    /// Opens (creating if needed) the SQLite store at `path`, in WAL mode, and migrates it.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref();
        let conn = Connection::open(path).map_err(|source| StoreError::Open { what: path.display().to_string(), source: source.into() })?;
        conn.pragma_update(None, "journal_mode", "WAL").map_err(sqlite("enable WAL"))?;
        Self::init_sqlite(conn)
    }

    /// An in-memory store (tests, evaluation).
    pub fn in_memory() -> Result<Self, StoreError> {
        let conn = Connection::open_in_memory().map_err(|source| StoreError::Open { what: ":memory:".into(), source: source.into() })?;
        Self::init_sqlite(conn)
    }

    /// Connects to a fleet's PostgreSQL database and migrates it (under an advisory lock, so
    /// daemons starting together migrate once).
    pub fn open_postgres(settings: PgSettings) -> Result<Self, StoreError> {
        let store = Self::connect_postgres(settings)?;
        store.migrate_postgres()?;
        Ok(store)
    }

    /// Connects to a fleet's PostgreSQL database without touching its schema
    /// (`pincer doctor`).
    pub fn connect_postgres(settings: PgSettings) -> Result<Self, StoreError> {
        let what = settings.url.clone();
        let conn = PgConn::open(settings).map_err(|source| StoreError::Open { what, source })?;
        Ok(Store { db: Db::Postgres(conn) })
    }

    /// Whether the database role may create roles and whether it is a superuser
    /// (PostgreSQL only; SQLite has no roles: `(true, false)`).
    pub fn role_rights(&self) -> Result<(bool, bool), StoreError> {
        if !self.is_shared() {
            return Ok((true, false));
        }
        let r = self.db.query("SELECT rolcreaterole::text, rolsuper::text FROM pg_roles WHERE rolname = current_user", &[]).map_err(sql("read the role's rights"))?;
        let r = r.first().ok_or_else(|| bad("role", "the current role is not in pg_roles"))?;
        Ok((r.text(0) == "true", r.text(1) == "true"))
    }

    fn init_sqlite(conn: Connection) -> Result<Self, StoreError> {
        conn.pragma_update(None, "foreign_keys", "ON").map_err(sqlite("enable foreign keys"))?;
        let v: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(sqlite("read schema version"))?;
        let known = SQLITE_MIGRATIONS.len() as i64;
        if v > known {
            return Err(StoreError::SchemaTooNew { found: v, known });
        }
        for (i, m) in SQLITE_MIGRATIONS.iter().enumerate().skip(v as usize) {
            conn.execute_batch(&format!("BEGIN; {m}; PRAGMA user_version = {}; COMMIT;", i + 1)).map_err(sqlite("migrate schema"))?;
        }
        Ok(Store { db: Db::Sqlite(conn) })
    }

    /// Brings the schema to this build's version (`pincer store migrate`; also done by
    /// every open): returns the version before and after.
    pub fn migrate(&self) -> Result<(i64, i64), StoreError> {
        let before = self.schema_version()?;
        if self.is_shared() {
            self.migrate_postgres()?;
        }
        Ok((before, self.schema_version()?))
    }

    fn migrate_postgres(&self) -> Result<(), StoreError> {
        let known = PG_MIGRATIONS.len() as i64;
        self.in_transaction(|s| {
            s.db.batch("SELECT pg_advisory_xact_lock(7165)").map_err(sql("lock the schema"))?;
            s.db.batch("CREATE TABLE IF NOT EXISTS pincer_schema (version BIGINT PRIMARY KEY, applied_ms BIGINT NOT NULL)").map_err(sql("create the schema table"))?;
            let v = s.schema_version()?;
            if v > known {
                return Err(StoreError::SchemaTooNew { found: v, known });
            }
            for (i, m) in PG_MIGRATIONS.iter().enumerate().skip(v as usize) {
                s.db.batch(m).map_err(sql("migrate schema"))?;
                let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0);
                s.db.exec("INSERT INTO pincer_schema (version, applied_ms) VALUES (?1, ?2)", &[Val::Int(i as i64 + 1), Val::Int(now)]).map_err(sql("record schema version"))?;
            }
            Ok(())
        })
    }

    /// The schema version of the open database.
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        if self.is_shared() {
            // A database no daemon has migrated has no version table yet: version 0.
            let t = self.db.query("SELECT to_regclass('pincer_schema')::text", &[]).map_err(sql("read schema version"))?;
            if t.first().and_then(|r| r.opt_text(0)).is_none() {
                return Ok(0);
            }
        }
        let q = match self.db {
            Db::Sqlite(_) => "PRAGMA user_version",
            Db::Postgres(_) => "SELECT COALESCE(MAX(version), 0) FROM pincer_schema",
        };
        let r = self.db.query(q, &[]).map_err(sql("read schema version"))?;
        Ok(r.first().map_or(0, |r| r.int(0)))
    }

    /// The schema version this build brings a database of this backend to.
    pub fn known_version(&self) -> i64 {
        match self.db {
            Db::Sqlite(_) => SQLITE_MIGRATIONS.len() as i64,
            Db::Postgres(_) => PG_MIGRATIONS.len() as i64,
        }
    }

    /// Whether this is the shared (PostgreSQL) backend.
    pub fn is_shared(&self) -> bool {
        matches!(self.db, Db::Postgres(_))
    }

    /// Checks that the database answers (SQLite always does; PostgreSQL by a round trip
    /// unless a statement succeeded within [`pg::CHECK_EVERY`] on a connection still open):
    /// the daemon decides nothing on a trusted state it cannot reach.
    pub fn ping(&self) -> Result<(), StoreError> {
        match &self.db {
            Db::Sqlite(_) => Ok(()),
            Db::Postgres(p) => p.check().map_err(sql("reach the database")),
        }
    }

    fn task_id(&self, user: &str, session: &str, day: u32) -> Result<i64, StoreError> {
        let found = self.db.query(r#"SELECT id FROM task WHERE "user" = ?1 AND session = ?2"#, &[user.into(), session.into()]).map_err(sql("look up task"))?;
        if let Some(r) = found.first() {
            return Ok(r.int(0));
        }
        let r = self
            .db
            .query(r#"INSERT INTO task ("user", session, day) VALUES (?1, ?2, ?3) RETURNING id"#, &[user.into(), session.into(), day.into()])
            .map_err(sql("insert task"))?;
        Ok(r.first().map_or(0, |r| r.int(0)))
    }

    /// Records a user prompt.
    pub fn add_prompt(&self, user: &str, p: &UserPrompt) -> Result<(), StoreError> {
        TrustedState::default().add_prompt(p)?;
        let t = self.task_id(user, &p.session, p.day)?;
        self.db
            .exec("INSERT INTO prompt (task, seq, text) VALUES (?1, (SELECT COUNT(*) FROM prompt WHERE task = ?1), ?2)", &[t.into(), (&p.text).into()])
            .map_err(sql("insert prompt"))?;
        Ok(())
    }

    fn insert_access(&self, user: &str, session: &str, day: u32, a: &AccessRecord, src: AccessSource) -> Result<(), StoreError> {
        check_rel_path("path", &a.path, false)?;
        let t = self.task_id(user, session, day)?;
        let src = match src {
            AccessSource::Annotation => "annotation",
            AccessSource::TwinGrant => "twin_grant",
        };
        self.db
            .exec("INSERT INTO access (task, path, access, source) VALUES (?1, ?2, ?3, ?4)", &[t.into(), (&a.path).into(), a.access.as_str().into(), src.into()])
            .map_err(sql("insert access"))?;
        Ok(())
    }

    /// Records an access annotation from a task's tool log.
    pub fn add_access(&self, user: &str, session: &str, day: u32, a: &AccessRecord) -> Result<(), StoreError> {
        self.insert_access(user, session, day, a, AccessSource::Annotation)
    }

    /// Records a user approval.
    pub fn add_approval(&self, user: &str, day: u32, a: &UserApproval) -> Result<(), StoreError> {
        check_rel_path("path_glob", &a.path_glob, true)?;
        let t = self.task_id(user, &a.session, day)?;
        self.db
            .exec(
                "INSERT INTO approval (task, path_glob, access, permission) VALUES (?1, ?2, ?3, ?4)",
                &[t.into(), (&a.path_glob).into(), a.access.as_str().into(), a.permission.as_str().into()],
            )
            .map_err(sql("insert approval"))?;
        Ok(())
    }

    /// Records a user policy.
    pub fn add_policy(&self, user: &str, p: &UserPolicy) -> Result<(), StoreError> {
        check_policy(p)?;
        let rules = serde_json::to_string(&p.rules).expect("rules serialize");
        self.db
            .exec(r#"INSERT INTO policy ("user", id, text, rules) VALUES (?1, ?2, ?3, ?4)"#, &[user.into(), (&p.id).into(), (&p.text).into(), rules.into()])
            .map_err(sql("insert policy"))?;
        Ok(())
    }

    /// Records a twin grant as an access annotation of its session.
    pub fn add_twin_grant(&self, user: &str, day: u32, g: &TwinGrant) -> Result<(), StoreError> {
        self.insert_access(user, &g.session, day, &AccessRecord { path: g.path.clone(), access: g.access }, AccessSource::TwinGrant)
    }

    /// Records a derived policy.
    pub fn add_derived_policy(&self, user: &str, d: &DerivedPolicy) -> Result<(), StoreError> {
        TrustedState::default().add_derived(d)?;
        let rules = serde_json::to_string(&d.rules).expect("rules serialize");
        self.db
            .exec(r#"INSERT INTO derived_policy ("user", text, rules) VALUES (?1, ?2, ?3)"#, &[user.into(), (&d.text).into(), rules.into()])
            .map_err(sql("insert derived policy"))?;
        Ok(())
    }

    fn add_history_rows(&self, user: &str, h: &HistoryRecord) -> Result<(), StoreError> {
        self.add_prompt(user, &UserPrompt { session: h.session.clone(), day: h.day, text: h.prompt.clone() })?;
        for a in &h.accesses {
            self.add_access(user, &h.session, h.day, a)?;
        }
        for a in &h.approvals {
            self.add_approval(
                user,
                h.day,
                &UserApproval { session: h.session.clone(), path_glob: a.path.clone(), access: a.access, permission: Permission::Allow },
            )?;
        }
        Ok(())
    }

    /// Runs `f` in one transaction: committed if it succeeds, rolled back if it fails.
    pub(crate) fn in_transaction<T, E: From<StoreError>>(&self, f: impl FnOnce(&Self) -> Result<T, E>) -> Result<T, E> {
        self.db.batch("BEGIN").map_err(sql("begin"))?;
        match f(self) {
            Ok(v) => Ok(self.db.batch("COMMIT").map_err(sql("commit")).map(|()| v)?),
            Err(e) => {
                // The original error matters more than a failed rollback.
                let _ = self.db.batch("ROLLBACK");
                Err(e)
            }
        }
    }

    /// Records a whole history task (typed form of one `history.jsonl` line), atomically.
    pub fn add_history(&self, user: &str, h: &HistoryRecord) -> Result<(), StoreError> {
        self.in_transaction(|s| s.add_history_rows(user, h))
    }

    /// Imports a persona's `history.jsonl` and `policies.jsonl` for `user`, in one
    /// transaction. Nothing is written if either file has an error.
    pub fn import_persona(&self, user: &str, history: impl AsRef<Path>, policies: impl AsRef<Path>) -> Result<ImportSummary, StoreError> {
        let hs = parse_history(history.as_ref())?;
        let ps = parse_policies(policies.as_ref())?;
        self.in_transaction(|s| {
            for h in &hs {
                s.add_history_rows(user, h)?;
            }
            for p in &ps {
                s.add_policy(user, p)?;
            }
            Ok(())
        })?;
        Ok(ImportSummary { tasks: hs.len(), policies: ps.len() })
    }

    /// Writes a whole trusted state (as [`Store::load_state`] gave it, from any backend)
    /// for `user`, in one transaction: `pincer store import`. Refused if the user already
    /// has state here (nothing is merged twice).
    pub fn import_state(&self, user: &str, st: &TrustedState) -> Result<ImportSummary, StoreError> {
        self.in_transaction(|s| {
            let here = s.db.query(r#"SELECT COUNT(*) FROM task WHERE "user" = ?1"#, &[user.into()]).map_err(sql("count tasks"))?;
            let policies = s.db.query(r#"SELECT COUNT(*) FROM policy WHERE "user" = ?1"#, &[user.into()]).map_err(sql("count policies"))?;
            if here.first().map_or(0, |r| r.int(0)) + policies.first().map_or(0, |r| r.int(0)) > 0 {
                return Err(StoreError::UserHasState(user.to_string()));
            }
            for t in &st.tasks {
                s.task_id(user, &t.session, t.day)?;
                for p in &t.prompts {
                    s.add_prompt(user, &UserPrompt { session: t.session.clone(), day: t.day, text: p.clone() })?;
                }
                for (a, src) in &t.accesses {
                    s.insert_access(user, &t.session, t.day, a, *src)?;
                }
                for a in &t.approvals {
                    s.add_approval(user, t.day, a)?;
                }
            }
            for p in &st.policies {
                s.add_policy(user, p)?;
            }
            for d in &st.derived {
                s.add_derived_policy(user, d)?;
            }
            Ok(())
        })?;
        Ok(ImportSummary { tasks: st.tasks.len(), policies: st.policies.len() })
    }

    /// The users that have trusted state in this store.
    pub fn users(&self) -> Result<Vec<String>, StoreError> {
        rows("list users", self.db.query(r#"SELECT "user" FROM task UNION SELECT "user" FROM policy ORDER BY 1"#, &[]), |r| Ok(r.text(0)))
    }

    fn approvals(&self, user: &str, op: &'static str) -> Result<Vec<(i64, i64, UserApproval)>, StoreError> {
        rows(
            op,
            self.db.query(
                r#"SELECT a.id, a.task, t.session, a.path_glob, a.access, a.permission FROM approval a JOIN task t ON t.id = a.task
                   WHERE t."user" = ?1 ORDER BY a.id"#,
                &[user.into()],
            ),
            |r| {
                let approval = UserApproval { session: r.text(2), path_glob: r.text(3), access: parse_access(&r.text(4))?, permission: parse_permission(&r.text(5))? };
                Ok((r.int(0), r.int(1), approval))
            },
        )
    }

    fn policies(&self, user: &str, op: &'static str) -> Result<Vec<(i64, UserPolicy)>, StoreError> {
        rows(op, self.db.query(r#"SELECT seq, id, text, rules FROM policy WHERE "user" = ?1 ORDER BY seq"#, &[user.into()]), |r| {
            let rules = serde_json::from_str(&r.text(3)).map_err(|e| bad("rules", e.to_string()))?;
            Ok((r.int(0), UserPolicy { id: r.text(1), text: r.text(2), rules }))
        })
    }

    /// `user`'s standing approvals (and refusals) and policies, each with its id, approvals
    /// first, oldest first.
    pub fn standing(&self, user: &str) -> Result<Vec<StandingRule>, StoreError> {
        let mut out: Vec<StandingRule> =
            self.approvals(user, "list approvals")?.into_iter().map(|(id, _, a)| StandingRule { id: RuleId::Approval(id), rule: Rule::Approval(a) }).collect();
        out.extend(self.policies(user, "list policies")?.into_iter().map(|(seq, p)| StandingRule { id: RuleId::Policy(seq), rule: Rule::Policy(p) }));
        Ok(out)
    }

    /// Removes `user`'s standing approval or policy `id` and returns what it was; an id
    /// of another user's rule is [`StoreError::NoSuchRule`] like one that does not exist.
    pub fn remove_rule(&self, user: &str, id: RuleId) -> Result<StandingRule, StoreError> {
        let found = self.standing(user)?.into_iter().find(|r| r.id == id).ok_or(StoreError::NoSuchRule(id))?;
        let (op, n) = match id {
            RuleId::Approval(n) => ("DELETE FROM approval WHERE id = ?1", n),
            RuleId::Policy(n) => ("DELETE FROM policy WHERE seq = ?1", n),
        };
        self.db.exec(op, &[n.into()]).map_err(sql("remove rule"))?;
        Ok(found)
    }

    /// Loads `user`'s whole trusted state into memory, as one snapshot of the database: the
    /// tasks, prompts, accesses and approvals read are those of one moment, whatever other
    /// hosts of a fleet write meanwhile (PostgreSQL `REPEATABLE READ`; a SQLite read
    /// transaction).
    pub fn load_state(&self, user: &str) -> Result<TrustedState, StoreError> {
        self.in_transaction(|s| {
            if s.is_shared() {
                s.db.batch("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY").map_err(sql("take a snapshot"))?;
            }
            s.load_state_rows(user)
        })
    }

    fn load_state_rows(&self, user: &str) -> Result<TrustedState, StoreError> {
        let mut st = TrustedState::new(user);
        let mut idx: HashMap<i64, usize> = HashMap::new();
        for r in self.db.query(r#"SELECT id, session, day FROM task WHERE "user" = ?1 ORDER BY day, id"#, &[user.into()]).map_err(sql("load tasks"))? {
            idx.insert(r.int(0), st.tasks.len());
            st.tasks.push(Task { session: r.text(1), day: day(r.int(2)), prompts: vec![], accesses: vec![], approvals: vec![] });
        }
        let prompts = self
            .db
            .query(r#"SELECT p.task, p.text FROM prompt p JOIN task t ON t.id = p.task WHERE t."user" = ?1 ORDER BY p.task, p.seq"#, &[user.into()])
            .map_err(sql("load prompts"))?;
        for r in prompts {
            st.tasks[idx[&r.int(0)]].prompts.push(r.text(1));
        }
        let accesses = self
            .db
            .query(r#"SELECT a.task, a.path, a.access, a.source FROM access a JOIN task t ON t.id = a.task WHERE t."user" = ?1 ORDER BY a.id"#, &[user.into()])
            .map_err(sql("load accesses"))?;
        for r in accesses {
            let source = if r.text(3) == "twin_grant" { AccessSource::TwinGrant } else { AccessSource::Annotation };
            st.tasks[idx[&r.int(0)]].accesses.push((AccessRecord { path: r.text(1), access: parse_access(&r.text(2))? }, source));
        }
        for (_, task, a) in self.approvals(user, "load approvals")? {
            st.tasks[idx[&task]].approvals.push(a);
        }
        st.policies = self.policies(user, "load policies")?.into_iter().map(|(_, p)| p).collect();
        st.derived = rows("load derived", self.db.query(r#"SELECT text, rules FROM derived_policy WHERE "user" = ?1 ORDER BY seq"#, &[user.into()]), |r| {
            Ok(DerivedPolicy { text: r.text(0), rules: serde_json::from_str(&r.text(1)).map_err(|e| bad("rules", e.to_string()))? })
        })?;
        Ok(st)
    }

    /// Stores audit rows, once each: a row whose id is already there is skipped, so shipping
    /// the same entries again changes nothing. Returns how many were new. PostgreSQL only.
    pub fn insert_audit(&self, batch: &[AuditRow]) -> Result<u64, StoreError> {
        let Db::Postgres(p) = &self.db else { return Err(StoreError::NotShared("the shared audit")) };
        let batch = batch.to_vec();
        p.run(move |w| {
            let c = w.client()?;
            let mut tx = c.transaction()?;
            let st = tx.prepare(
                r#"INSERT INTO audit (id, time_ms, host, session, "user", event, entry) VALUES ($1, $2, $3, $4, $5, $6, $7)
                   ON CONFLICT (id) DO NOTHING"#,
            )?;
            let mut n = 0;
            for r in &batch {
                n += tx.execute(&st, &[&r.id, &r.time_ms, &r.host, &r.session, &r.user, &r.event, &r.entry])?;
            }
            tx.commit()?;
            Ok(n)
        })
        .map_err(sql("store audit entries"))
    }

    /// Audit rows as `viewer` may see them (`None`: every row, for root), oldest first, as
    /// `(sequence number, entry JSON)`. A user's read runs as the user's database role,
    /// so row-level security, not this query, keeps other users' rows out. PostgreSQL only.
    pub fn read_audit(&self, viewer: Option<&str>, q: &AuditQuery) -> Result<Vec<(i64, String)>, StoreError> {
        let Db::Postgres(p) = &self.db else { return Err(StoreError::NotShared("the shared audit")) };
        let viewer = viewer.map(str::to_string);
        let q = q.clone();
        p.run(move |w| {
            let sql = "SELECT seq, entry FROM audit WHERE seq > $1 AND ($2::text IS NULL OR session = $2) AND ($3::text IS NULL OR host = $3)
                       ORDER BY seq LIMIT CASE WHEN $4::bigint > 0 THEN $4::bigint END";
            fn run<C: postgres::GenericClient>(c: &mut C, sql: &str, q: &AuditQuery) -> Result<Vec<(i64, String)>, postgres::Error> {
                let params: [&(dyn postgres::types::ToSql + Sync); 4] = [&q.after, &q.session, &q.host, &q.limit];
                Ok(c.query(sql, &params)?.iter().map(|r| (r.get(0), r.get(1))).collect())
            }
            match viewer {
                Some(u) => w.as_user(&u, |tx| run(tx, sql, &q)),
                None => Ok(run(w.client()?, sql, &q)?),
            }
        })
        .map_err(sql("read the shared audit"))
    }

    /// Runs `f` on the PostgreSQL connection as `user`'s role (row-level security applies):
    /// what a user's own read sees. PostgreSQL only.
    pub fn as_user<T: Send + 'static>(
        &self,
        user: &str,
        f: impl FnOnce(&mut postgres::Transaction<'_>) -> Result<T, postgres::Error> + Send + 'static,
    ) -> Result<T, StoreError> {
        let Db::Postgres(p) = &self.db else { return Err(StoreError::NotShared("reads as a user's role")) };
        let user = user.to_string();
        p.run(move |w| w.as_user(&user, f)).map_err(sql("read as the user's role"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standing_rules_are_listed_with_ids_and_removed_only_for_their_user() {
        let st = Store::in_memory().unwrap();
        let a = UserApproval { session: "s1".into(), path_glob: "docs/a.md".into(), access: Access::Read, permission: Permission::Allow };
        st.add_approval("ann", 1, &a).unwrap();
        st.add_policy("ann", &UserPolicy { id: "p01".into(), text: "Docs are fine.".into(), rules: vec![] }).unwrap();
        st.add_approval("bob", 1, &UserApproval { session: "s9".into(), ..a.clone() }).unwrap();
        let rules = st.standing("ann").unwrap();
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[0].rule, Rule::Approval(a.clone()));
        let (aid, pid) = (rules[0].id, rules[1].id);
        assert!(matches!((aid, pid), (RuleId::Approval(_), RuleId::Policy(_))));
        // Ids print and parse as `a<n>` / `p<n>`; anything else is an error naming it.
        assert_eq!(aid.to_string().parse::<RuleId>().unwrap(), aid);
        let e = "x3".parse::<RuleId>().unwrap_err().to_string();
        assert!(e.contains("\"x3\""), "{e}");
        assert_eq!(serde_json::to_string(&pid).unwrap(), format!("\"{pid}\""));
        // Another user's rule is not found.
        let bobs = st.standing("bob").unwrap()[0].id;
        assert!(matches!(st.remove_rule("ann", bobs), Err(StoreError::NoSuchRule(_))));
        assert_eq!(st.remove_rule("ann", aid).unwrap().rule, Rule::Approval(a));
        assert!(st.load_state("ann").unwrap().tasks.iter().all(|t| t.approvals.is_empty()));
        st.remove_rule("ann", pid).unwrap();
        assert!(st.standing("ann").unwrap().is_empty());
        assert_eq!(st.standing("bob").unwrap().len(), 1);
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn import_and_reload_roundtrip() {
        let d = tempfile::tempdir().unwrap();
        let h = write(
            d.path(),
            "history.jsonl",
            r#"{"day": 1, "session": "h1", "prompt": "Fix the parser.", "accesses": [{"path": "src/parse.rs", "access": "read"}, {"path": "src/parse.rs", "access": "write"}], "approvals": [{"path": "docs/**", "access": "read"}]}
{"day": 2, "session": "h2", "prompt": "Summarize notes.", "accesses": [{"path": "notes/a.md", "access": "read"}]}
"#,
        );
        let p = write(
            d.path(),
            "policies.jsonl",
            r#"{"id": "p1", "text": "Never read secrets.", "rules": [{"path_glob": "secrets/**", "access": ["read"], "permission": "deny"}]}
{"id": "p2", "text": "Ask before deleting."}
"#,
        );
        let db = d.path().join("state.db");
        let s = Store::open(&db).unwrap();
        assert_eq!(s.import_persona("u", &h, &p).unwrap(), ImportSummary { tasks: 2, policies: 2 });
        s.add_twin_grant("u", 3, &TwinGrant { session: "s9".into(), path: "src/lib.rs".into(), access: Access::Read }).unwrap();
        drop(s);
        let s = Store::open(&db).unwrap();
        assert_eq!(s.schema_version().unwrap(), SQLITE_MIGRATIONS.len() as i64);
        let st = s.load_state("u").unwrap();
        assert_eq!(st.tasks.len(), 3);
        assert_eq!(st.tasks[0].accesses.len(), 2);
        assert_eq!(st.tasks[0].approvals[0].path_glob, "docs/**");
        assert_eq!(st.tasks[2].accesses[0].1, AccessSource::TwinGrant);
        assert_eq!(st.policies[0].rules[0].permission, Permission::Deny);
        assert!(st.policies[1].rules.is_empty());
        assert!(s.load_state("other").unwrap().tasks.is_empty());
    }

    #[test]
    fn bad_lines_name_file_line_and_field() {
        let d = tempfile::tempdir().unwrap();
        let h = write(d.path(), "history.jsonl", "{\"day\": 1, \"session\": \"a\", \"prompt\": \"x\", \"accesses\": [{\"path\": \"../etc/passwd\", \"access\": \"read\"}]}\n");
        let p = write(d.path(), "policies.jsonl", "");
        let s = Store::in_memory().unwrap();
        let e = s.import_persona("u", &h, &p).unwrap_err().to_string();
        assert!(e.contains("history.jsonl:1") && e.contains("path"), "{e}");
        let h = write(d.path(), "history.jsonl", "{\"day\": 1, \"session\": \"a\", \"prompt\": \"x\", \"accesses\": [{\"path\": \"a\", \"access\": \"chmod\"}]}\n");
        let e = s.import_persona("u", &h, &p).unwrap_err().to_string();
        assert!(e.contains("history.jsonl:1"), "{e}");
        assert!(s.load_state("u").unwrap().tasks.is_empty(), "failed import wrote nothing");
    }
}

