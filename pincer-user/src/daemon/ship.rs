//! Ships a host's audit spool (its append-only audit log) to the fleet's shared audit.
//!
//! The spool is the source of truth on the host: every entry is on disk before the daemon
//! answers for it. This thread reads the spool from the offset it last shipped, stores
//! complete lines in one transaction (an id already stored is skipped), and only then
//! records the new offset (`<audit log>.shipped`, replaced atomically). A crash between
//! the two ships those lines again, and the unique ids keep them from being doubled: every
//! entry arrives exactly once, whenever the database is reachable again.

use super::audit::AuditEntry;
use super::users::Identities;
use crate::store::{AuditRow, Store, StoreSpec};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

/// How long the shipper waits for an append before it looks at the spool anyway (and how
/// soon it retries an unreachable database).
pub const SHIP_EVERY: Duration = Duration::from_millis(200);

/// Lines stored in one transaction at most.
pub const SHIP_BATCH: usize = 500;

/// Where the shipped offset of the spool at `log` is kept.
pub fn offset_path(log: &Path) -> PathBuf {
    let mut p = log.as_os_str().to_owned();
    p.push(".shipped");
    PathBuf::from(p)
}

/// The offset shipped so far (0 if none was recorded).
pub fn shipped_offset(log: &Path) -> u64 {
    std::fs::read_to_string(offset_path(log)).ok().and_then(|t| t.trim().parse().ok()).unwrap_or(0)
}

fn record_offset(log: &Path, off: u64) -> std::io::Result<()> {
    use std::io::Write;
    let path = offset_path(log);
    let tmp = path.with_extension("shipped.tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(off.to_string().as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, &path)
}

/// The rows of the complete lines of `log` after `from`, and the offset after the last
/// line read. A line that does not parse is passed over (with a warning): it was never an
/// entry (a line cut short by a crash, closed when the log was opened again).
fn pending(log: &Path, from: u64, ids: &Identities) -> std::io::Result<(Vec<AuditRow>, u64)> {
    let host = ids.host().unwrap_or("localhost");
    let mut f = std::fs::File::open(log)?;
    f.seek(SeekFrom::Start(from))?;
    let mut buf = Vec::new();
    f.take(8 << 20).read_to_end(&mut buf)?;
    let mut out = Vec::new();
    let mut off = from;
    for line in buf.split_inclusive(|b| *b == b'\n') {
        if line.last() != Some(&b'\n') || out.len() >= SHIP_BATCH {
            break;
        }
        let at = off;
        off += line.len() as u64;
        let text = String::from_utf8_lossy(&line[..line.len() - 1]);
        if text.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<AuditEntry>(&text) {
            Ok(mut e) => {
                if e.id.is_empty() {
                    // An entry written before the host joined a fleet: its place in this
                    // host's spool is its id.
                    e.id = format!("{host}:{at}");
                }
                let host = e.host.clone().unwrap_or_else(|| host.to_string());
                // An entry spooled before it carried its user: its owner's identity now.
                let user = e.user.clone().or_else(|| e.owner_uid.map(|uid| ids.of_uid(uid)));
                let event = serde_json::to_value(e.event).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
                let entry = serde_json::to_string(&AuditEntry { host: Some(host.clone()), ..e.clone() }).expect("audit entries serialize");
                out.push(AuditRow { id: e.id, time_ms: e.time_ms as i64, host, session: e.session, user, event, entry });
            }
            Err(err) => tracing::warn!(offset = at, error = %err, "the audit spool has a line that is no entry; passed over"),
        }
    }
    Ok((out, off))
}

/// Ships what the spool at `log` of the host `ids` names holds now; returns the rows newly
/// stored.
pub fn ship_once(log: &Path, store: &Store, ids: &Identities) -> Result<u64, ShipError> {
    let mut total = 0;
    loop {
        let from = shipped_offset(log);
        let (rows, end) = pending(log, from, ids).map_err(ShipError::Spool)?;
        if end == from {
            return Ok(total);
        }
        if !rows.is_empty() {
            total += store.insert_audit(&rows).map_err(ShipError::Store)?;
        }
        record_offset(log, end).map_err(ShipError::Spool)?;
    }
}

/// Why a shipping round stopped.
#[derive(Debug, thiserror::Error)]
pub enum ShipError {
    /// The spool could not be read or its offset recorded.
    #[error("audit spool")]
    Spool(#[source] std::io::Error),
    /// The shared audit could not be written (the database is away).
    #[error("shared audit")]
    Store(#[source] crate::store::StoreError),
}

/// Starts the shipper of the spool at `log` on a thread of its own; it ships after each
/// wake-up on `woken` and every [`SHIP_EVERY`], and ends (after a last round) when the
/// log that wakes it is dropped.
pub fn start(log: PathBuf, spec: StoreSpec, ids: Identities, woken: Receiver<()>) -> std::io::Result<()> {
    std::thread::Builder::new().name("pincer-audit-ship".into()).spawn(move || {
        let mut store: Option<Store> = None;
        let mut warned = false;
        loop {
            let last = matches!(woken.recv_timeout(SHIP_EVERY), Err(RecvTimeoutError::Disconnected));
            if store.is_none() {
                store = spec.open().ok();
            }
            if let Some(st) = &store {
                match ship_once(&log, st, &ids) {
                    Ok(_) => warned = false,
                    Err(e) => {
                        if !warned {
                            tracing::warn!(error = %super::error::chain(&e), "audit entries stay in the spool until the shared audit is reachable");
                        }
                        warned = true;
                    }
                }
            }
            if last {
                return;
            }
        }
    })?;
    Ok(())
}
