//! The audit log: every decision, refusal and session event appended as one JSON line, and
//! a broadcast of new entries for `pincer log --follow`.

use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use tokio::sync::broadcast;

use super::protocol::RequestOutcome;
use crate::decider::TokenUsage;
use crate::access::Access;
use crate::shown::Shown;

/// Errors of the audit log.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The log could not be opened or created.
    #[error("cannot open audit log {path}")]
    Open {
        /// The audit log's path (`audit_log` in the configuration).
        path: PathBuf,
        /// The I/O error the file system gave.
        #[source]
        source: std::io::Error,
    },
    /// An entry could not be written.
    #[error("cannot append to audit log {path}")]
    Write {
        /// The audit log's path (`audit_log` in the configuration).
        path: PathBuf,
        /// The I/O error the file system gave.
        #[source]
        source: std::io::Error,
    },
    /// The log could not be read back.
    #[error("cannot read audit log {path}")]
    Read {
        /// The audit log's path (`audit_log` in the configuration).
        path: PathBuf,
        /// The I/O error the file system gave.
        #[source]
        source: std::io::Error,
    },
}

/// What an audit entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    /// A request (explicit or from a kernel miss) was decided.
    Decision,
    /// A call was refused for its caller.
    Refusal,
    /// A session started.
    SessionStart,
    /// A session ended.
    SessionEnd,
    /// A session was resumed after a daemon restart.
    SessionResume,
    /// A user prompt arrived.
    Prompt,
    /// The user answered a question.
    Answer,
    /// A worker's wait for the user timed out (denied).
    EscalationTimeout,
    /// A kernel miss was recorded only (`on_miss = "record"`), or could not be decided.
    Miss,
    /// Trusted history was imported.
    Import,
    /// The user removed a standing approval or policy.
    RuleRemoved,
    /// A shadow session's accesses became trusted history.
    ShadowHistory,
    /// A kernel miss's hold ended: how long the worker's access waited and whether the
    /// decision granted it.
    Hold,
    /// The user's configuration changed while the session ran: the places it names as code
    /// were read again and protected.
    ConfigReread,
    /// A process of the session held a way to write (a descriptor open for writing, a
    /// shared writable mapping) on a place the user's configuration came to name as code,
    /// opened before: it was ended ([`super::revoke`]).
    WriterEnded,
}

/// One vote as audited: the twin's record of it (verdict, reason, mechanism).
pub use crate::twin::VoteRecord as AuditVote;

/// Where a request came from, as audited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The request tool (`pincer request`, the MCP tool) of a session's worker.
    Tool,
    /// An access the kernel denied (an implicit request).
    Miss,
    /// A request step of an evaluation sample, replayed by `pincer eval`.
    Replay,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Source::Tool => "tool",
            Source::Miss => "miss",
            Source::Replay => "replay",
        })
    }
}

/// The request an entry is about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditRequest {
    /// Path relative to its protected root, as the twin saw it.
    pub path: String,
    /// What the worker asked to do with it.
    pub access: Access,
    /// Where the request came from: the request tool or a kernel miss.
    pub source: Source,
    /// The kernel hook that denied, for a miss.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook: Option<crate::kernel::Hook>,
    /// The worker's rationale, if any (untrusted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rationale: Option<String>,
    /// The requesting process's id (the tool's socket peer, or the task the kernel denied);
    /// none for a replayed request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The requesting process's uid; none for a replayed request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
}

/// Where in an evaluation a replayed decision was made (`pincer eval --audit`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEval {
    /// The persona id.
    pub persona: String,
    /// The defense that decided.
    pub defense: crate::eval::DefenseName,
    /// The run (0-based; `--runs N` replays each persona N times).
    pub run: usize,
    /// The sample id.
    pub sample: String,
    /// Attack or utility.
    pub kind: crate::eval::corpus::SampleKind,
    /// The attack class, for attacks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attack: Option<crate::eval::corpus::AttackType>,
    /// The session's index within the sample (the last one is the task under test).
    pub session: usize,
    /// The step's index within the session.
    pub step: usize,
    /// Whether this request is the sample's monitored access.
    pub monitored: bool,
}

/// The caller of a refused call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditCaller {
    /// The caller's process id (from `SO_PEERCRED`).
    pub pid: u32,
    /// The caller's uid (from `SO_PEERCRED`).
    pub uid: u32,
    /// The caller's cgroup directory (from `/proc/PID/cgroup`), which places it inside or
    /// outside a session.
    pub cgroup: PathBuf,
}

/// One line of the audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// The entry's unique id (random, 128 bits): the shared audit stores each id once, so
    /// an entry shipped again after a crash is not doubled.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// The host whose daemon wrote it (a fleet's shared audit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Milliseconds since the Unix epoch.
    pub time_ms: u64,
    /// What happened.
    pub event: Event,
    /// The session, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The session owner's uid (used to show owners only their own entries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_uid: Option<u32>,
    /// Whose entry it is in a fleet's shared audit: the owner's fleet identity
    /// ([`super::users::Identities`]), stamped by the spool (row-level security matches it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The request decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<AuditRequest>,
    /// What became of the request (or `refused` for a refusal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<RequestOutcome>,
    /// Votes 1, 2, 3.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub votes: Vec<AuditVote>,
    /// The decider backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decider: Option<String>,
    /// Tokens used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<TokenUsage>,
    /// Time the decision took, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<f64>,
    /// For a hold: how long its thread had waited, in milliseconds, when the daemon took up
    /// its miss (the rest of `latency_ms` is the decision and the answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen_ms: Option<f64>,
    /// The question id, for escalations and answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<u64>,
    /// The caller, for refusals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<AuditCaller>,
    /// Free detail (a refusal's reason, a prompt, a summary).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// For a decision replayed by `pincer eval --audit`: persona, sample and step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eval: Option<AuditEval>,
}

impl AuditEntry {
    /// An entry of `event` stamped now, other fields empty.
    pub fn new(event: Event) -> Self {
        let time_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
        let mut id = [0u8; 16];
        if getrandom::fill(&mut id).is_err() {
            // Unique enough for one host: the time and a process-wide counter.
            static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            id[..8].copy_from_slice(&time_ms.to_le_bytes());
            id[8..].copy_from_slice(&N.fetch_add(1, std::sync::atomic::Ordering::Relaxed).to_le_bytes());
        }
        AuditEntry {
            id: hex::encode(id),
            host: None,
            time_ms,
            event,
            session: None,
            owner_uid: None,
            user: None,
            request: None,
            outcome: None,
            votes: vec![],
            decider: None,
            tokens: None,
            latency_ms: None,
            seen_ms: None,
            question: None,
            caller: None,
            detail: None,
            eval: None,
        }
    }

    /// One line for people: time, session, event, request and outcome (what came from a
    /// session shown escaped, [`Shown`]).
    pub fn human(&self) -> String {
        let mut s = format!("{:>13} {:?}", self.time_ms, self.event);
        if let Some(h) = &self.host {
            s.push_str(&format!(" @{}", Shown(h)));
        }
        if let Some(sess) = &self.session {
            s.push_str(&format!(" [{}]", Shown(sess)));
        }
        if let Some(r) = &self.request {
            match r.pid {
                Some(pid) => s.push_str(&format!(" {} {} ({}, pid {pid})", r.access, Shown(&r.path), r.source)),
                None => s.push_str(&format!(" {} {} ({})", r.access, Shown(&r.path), r.source)),
            }
        }
        if let Some(o) = &self.outcome {
            s.push_str(&format!(" -> {o}"));
        }
        if let Some(q) = self.question {
            s.push_str(&format!(" question {q}"));
        }
        if let Some(d) = &self.detail {
            s.push_str(&format!(": {}", Shown(d)));
        }
        for (i, v) in self.votes.iter().enumerate() {
            s.push_str(&format!("\n    vote {}: {:?}: {}", i + 1, v.verdict, Shown(&v.reason)));
        }
        s
    }
}

impl From<crate::twin::Outcome> for RequestOutcome {
    /// The twin's own outcome, as audited where no kernel grant follows (`pincer eval`).
    fn from(o: crate::twin::Outcome) -> Self {
        match o {
            crate::twin::Outcome::Grant => RequestOutcome::Grant,
            crate::twin::Outcome::Deny => RequestOutcome::Deny,
            crate::twin::Outcome::Escalate => RequestOutcome::Escalate,
        }
    }
}

/// The append-only audit log.
pub struct AuditLog {
    path: PathBuf,
    file: Mutex<std::fs::File>,
    tx: broadcast::Sender<AuditEntry>,
    /// Set when the log is the spool of a fleet's shared audit.
    fleet: std::sync::OnceLock<Fleet>,
}

/// What a log that spools for the shared audit adds.
struct Fleet {
    ids: super::users::Identities,
    host: String,
    wake: std::sync::mpsc::SyncSender<()>,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLog").field("path", &self.path).finish()
    }
}

impl AuditLog {
    /// Opens (creating it and its directory, mode 0600) the log at `path` for appending.
    pub fn open(path: &Path) -> Result<Self, AuditError> {
        Self::open_with(path, false)
    }

    /// Creates the log at `path` (and its directory, mode 0600), emptying an existing file:
    /// a log of one run only (`pincer eval --audit`).
    pub fn create(path: &Path) -> Result<Self, AuditError> {
        Self::open_with(path, true)
    }

    fn open_with(path: &Path, truncate: bool) -> Result<Self, AuditError> {
        use std::os::unix::fs::OpenOptionsExt;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| AuditError::Open { path: path.into(), source })?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)
            .map_err(|source| AuditError::Open { path: path.into(), source })?;
        if truncate {
            file.set_len(0).map_err(|source| AuditError::Open { path: path.into(), source })?;
        }
        let (tx, _) = broadcast::channel(1024);
        Ok(AuditLog { path: path.into(), file: Mutex::new(file), tx, fleet: std::sync::OnceLock::new() })
    }

    /// Makes this log the spool of the fleet's shared audit in `spec`: every entry is
    /// stamped with the host's name and its owner's fleet identity (`ids`), written and
    /// flushed to disk (`fdatasync`) before `append` returns, and shipped by a thread of
    /// its own ([`super::ship`]) once each, whenever the database is reachable. A line cut
    /// short by a crash is closed first, so the next entry starts on a line of its own.
    pub fn spool_for(&self, spec: crate::store::StoreSpec, ids: super::users::Identities) -> Result<(), AuditError> {
        let host = ids.host().unwrap_or("localhost").to_string();
        let werr = |source| AuditError::Write { path: self.path.clone(), source };
        {
            use std::io::{Read, Seek, SeekFrom};
            let mut f = std::fs::File::open(&self.path).map_err(|source| AuditError::Read { path: self.path.clone(), source })?;
            let len = f.metadata().map_err(werr)?.len();
            if len > 0 {
                let mut last = [0u8; 1];
                f.seek(SeekFrom::End(-1)).and_then(|_| f.read_exact(&mut last)).map_err(werr)?;
                if last[0] != b'\n' {
                    let mut w = self.file.lock().unwrap_or_else(|p| p.into_inner());
                    w.write_all(b"\n").and_then(|()| w.sync_data()).map_err(werr)?;
                }
            }
        }
        let (wake, woken) = std::sync::mpsc::sync_channel(1);
        if self.fleet.set(Fleet { ids: ids.clone(), host, wake }).is_err() {
            return Ok(());
        }
        super::ship::start(self.path.clone(), spec, ids, woken).map_err(werr)
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends an entry (one write per line) and broadcasts it to followers. As a fleet's
    /// spool, the entry is on disk when this returns and the shipper is woken.
    pub fn append(&self, entry: &AuditEntry) -> Result<(), AuditError> {
        let fleet = self.fleet.get();
        let mut entry = entry.clone();
        if let Some(f) = fleet {
            entry.host.get_or_insert_with(|| f.host.clone());
            if entry.user.is_none() {
                entry.user = entry.owner_uid.map(|uid| f.ids.of_uid(uid));
            }
        }
        let mut line = serde_json::to_string(&entry).expect("audit entries serialize");
        line.push('\n');
        {
            let mut f = self.file.lock().unwrap_or_else(|p| p.into_inner());
            f.write_all(line.as_bytes()).map_err(|source| AuditError::Write { path: self.path.clone(), source })?;
            if fleet.is_some() {
                f.sync_data().map_err(|source| AuditError::Write { path: self.path.clone(), source })?;
            }
        }
        if let Some(f) = fleet {
            let _ = f.wake.try_send(());
        }
        let _ = self.tx.send(entry);
        Ok(())
    }

    /// Appends, logging (not returning) a failure: used where the decision must still be
    /// answered (a failed audit never turns a deny into a grant).
    pub fn record(&self, entry: &AuditEntry) {
        if let Err(e) = self.append(entry) {
            tracing::error!(error = %e, "audit write failed");
        }
    }

    /// New entries from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<AuditEntry> {
        self.tx.subscribe()
    }

    /// Every entry in the file (lines that do not parse are skipped with a warning).
    pub fn read_all(&self) -> Result<Vec<AuditEntry>, AuditError> {
        read_entries(&self.path)
    }
}

/// How many denial entries one session writes a second, sustained ([`DenialBudget`]).
pub const DENIALS_PER_SECOND: f64 = 20.0;

/// How many denial entries one session writes at once before [`DENIALS_PER_SECOND`] holds.
pub const DENIAL_BURST: f64 = 200.0;

/// What one session may write of the audit for its denials: its reach denials,
/// never-grantable, unresolved and recorded-only misses, denied holds, and the decisions
/// that did not grant (a session can cause those as fast as it makes system calls or asks,
/// and the audit is on the host's disk, which the user's processes share; what was let
/// through is always written). Past the budget they are counted, not written one by one, and the next
/// entry written (or the session's end) says how many were not.
#[derive(Debug, Clone)]
pub struct DenialBudget {
    tokens: f64,
    at: std::time::Instant,
    held_back: u64,
}

impl DenialBudget {
    /// A full budget at `now`.
    pub fn new(now: std::time::Instant) -> Self {
        Self { tokens: DENIAL_BURST, at: now, held_back: 0 }
    }

    /// Whether the next denial entry is written at `now`: `Some(n)` with the number of
    /// earlier ones that were not (to say so in it), or `None` (counted).
    pub fn take(&mut self, now: std::time::Instant) -> Option<u64> {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.at = now;
        self.tokens = (self.tokens + elapsed * DENIALS_PER_SECOND).min(DENIAL_BURST);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Some(std::mem::take(&mut self.held_back))
        } else {
            self.held_back += 1;
            None
        }
    }

    /// The denials counted and not yet said (at the session's end).
    pub fn held_back(&self) -> u64 {
        self.held_back
    }
}

/// Reads the entries of an audit log file.
pub fn read_entries(path: &Path) -> Result<Vec<AuditEntry>, AuditError> {
    let text = std::fs::read_to_string(path).map_err(|source| AuditError::Read { path: path.into(), source })?;
    let mut out = Vec::new();
    for (line, e) in crate::jsonl::parse_lines(&text) {
        match e {
            Ok(e) => out.push(e),
            Err(e) => tracing::warn!(line, error = %e, "skipping unreadable audit line"),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A burst of denials is written up to [`DENIAL_BURST`], then [`DENIALS_PER_SECOND`]; the
    /// ones past it are counted and named by the next entry written.
    #[test]
    fn a_sessions_denials_are_written_within_its_budget_and_the_rest_counted() {
        let t0 = std::time::Instant::now();
        let mut b = DenialBudget::new(t0);
        let written = (0..1_000).filter(|_| b.take(t0).is_some()).count();
        assert_eq!(written, DENIAL_BURST as usize);
        assert_eq!(b.held_back(), 1_000 - DENIAL_BURST as u64);
        let later = t0 + std::time::Duration::from_millis(100);
        assert_eq!(b.take(later), Some(1_000 - DENIAL_BURST as u64), "the next entry written names the ones held back");
        assert_eq!(b.take(later), Some(0));
        assert_eq!(b.take(later), None, "0.1 s gave two entries");
    }

    #[test]
    fn entries_append_as_json_lines_and_read_back() {
        let d = tempfile::tempdir().unwrap();
        let log = AuditLog::open(&d.path().join("sub/audit.jsonl")).unwrap();
        let mut rx = log.subscribe();
        let mut e = AuditEntry::new(Event::Decision);
        e.session = Some("s1".into());
        e.outcome = Some(RequestOutcome::Grant);
        e.votes = vec![AuditVote { verdict: crate::decider::Verdict::Allow, reason: "seen before".into(), mechanism: Some(crate::decider::Mechanism::Location) }];
        log.append(&e).unwrap();
        log.append(&AuditEntry::new(Event::Refusal)).unwrap();
        let all = log.read_all().unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0], e);
        assert_eq!(rx.try_recv().unwrap(), e);
        let text = std::fs::read_to_string(log.path()).unwrap();
        assert_eq!(text.lines().count(), 2);
        assert!(text.lines().next().unwrap().contains("\"event\":\"decision\""));
    }
}
