//! Who is calling: the peer's pid and uid from `SO_PEERCRED`, its cgroup from
//! `/proc/PID/cgroup`, and the session cgroups it may be inside.

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where cgroup v2 is mounted.
pub const CGROUP_MOUNT: &str = "/sys/fs/cgroup";

/// Errors identifying a peer.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// `SO_PEERCRED` failed or gave no pid.
    #[error("cannot read the peer's credentials (SO_PEERCRED)")]
    Cred(#[source] std::io::Error),
    /// The kernel gave no pid for the peer.
    #[error("the peer's credentials carry no process id")]
    NoPid,
    /// `/proc/PID/cgroup` could not be read.
    #[error("cannot read /proc/{pid}/cgroup")]
    ReadCgroup {
        /// The pid.
        pid: u32,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// `/proc/PID/cgroup` has no cgroup v2 line.
    #[error("/proc/{pid}/cgroup has no cgroup v2 (`0::`) line")]
    NoCgroup2 {
        /// The pid.
        pid: u32,
    },
}

/// A caller of the daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// Process id at connect time.
    pub pid: u32,
    /// Effective uid.
    pub uid: u32,
    /// Its cgroup directory (absolute, under [`CGROUP_MOUNT`]).
    pub cgroup: PathBuf,
}

/// Maps a pid to its cgroup directory (replaceable in tests).
pub type CgroupLookup = Arc<dyn Fn(u32) -> Result<PathBuf, PeerError> + Send + Sync>;

/// The cgroup v2 directory of `pid`, from `/proc/PID/cgroup`.
pub fn proc_cgroup(pid: u32) -> Result<PathBuf, PeerError> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).map_err(|source| PeerError::ReadCgroup { pid, source })?;
    parse_proc_cgroup(&text).map(|rel| Path::new(CGROUP_MOUNT).join(rel.trim_start_matches('/'))).ok_or(PeerError::NoCgroup2 { pid })
}

/// The cgroup v2 path (`/a/b`) of a `/proc/PID/cgroup` text.
pub fn parse_proc_cgroup(text: &str) -> Option<String> {
    text.lines().find_map(|l| l.strip_prefix("0::")).map(|s| s.trim().to_string())
}

/// The default lookup: `/proc/PID/cgroup`.
pub fn kernel_lookup() -> CgroupLookup {
    Arc::new(proc_cgroup)
}

/// Identifies the peer of a connected Unix stream.
pub fn identify(stream: &tokio::net::UnixStream, lookup: &CgroupLookup) -> Result<Peer, PeerError> {
    let cred = stream.peer_cred().map_err(PeerError::Cred)?;
    let pid = cred.pid().ok_or(PeerError::NoPid)?;
    let pid = u32::try_from(pid).map_err(|_| PeerError::NoPid)?;
    let cgroup = lookup(pid)?;
    Ok(Peer { pid, uid: cred.uid(), cgroup })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_v2_line() {
        assert_eq!(parse_proc_cgroup("12:cpu:/x\n0::/pincer/s1\n").as_deref(), Some("/pincer/s1"));
        assert_eq!(parse_proc_cgroup("1:name=systemd:/\n"), None);
    }

    #[test]
    fn own_process_has_a_cgroup() {
        let me = std::process::id();
        match proc_cgroup(me) {
            Ok(p) => assert!(p.starts_with(CGROUP_MOUNT)),
            Err(PeerError::NoCgroup2 { .. }) => {} // cgroup v1-only host
            Err(e) => panic!("{e}"),
        }
    }
}
