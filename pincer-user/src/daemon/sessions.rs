//! The open sessions: what the daemon keeps of each (owner, cgroup, protected roots,
//! prompts, counters), their persistence in `sessions.json` so a restarted daemon resumes
//! them, and the cgroup and root bookkeeping of creating and ending one.

use super::protocol::{Counters, SessionInfo, SessionMode};
use super::resolve::Root;
use crate::access::Access;
use crate::kernel::ObjectId;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Why a session's roots or cgroup could not be set up, or `sessions.json` not used.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// `sessions.json` could not be read or written.
    #[error("cannot use {}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// `sessions.json` could not be parsed.
    #[error("cannot parse {path}: {error}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        error: serde_json::Error,
    },
    /// A protected root does not exist or cannot be examined.
    #[error("protected root {}: {error}", path.display())]
    Root {
        /// The root as given.
        path: PathBuf,
        /// Cause.
        error: std::io::Error,
    },
    /// A protected root is not a directory.
    #[error("protected root {} is not a directory", .0.display())]
    RootNotDir(PathBuf),
    /// `/` was given as a protected root.
    #[error("/ cannot be a protected root (the worker could not run)")]
    RootIsSlash,
    /// The root's object id could not be read.
    #[error("protected root")]
    RootId(#[source] crate::kernel::KernelError),
    /// The session's cgroup could not be created.
    #[error("cannot create cgroup {}: {error}", path.display())]
    Cgroup {
        /// The cgroup directory.
        path: PathBuf,
        /// Cause.
        error: std::io::Error,
    },
    /// The new cgroup's id could not be read.
    #[error("session cgroup")]
    CgroupId(#[source] crate::kernel::KernelError),
}

/// A protected root as persisted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RootRec {
    /// Canonical directory.
    pub path: PathBuf,
    /// Its device (kernel encoding) when the session started.
    pub dev: u32,
    /// Its inode when the session started.
    pub ino: u64,
    /// Prefix of the twin's paths under this root (empty for a session's single root).
    pub label: String,
}

impl RootRec {
    /// The root as [`resolve`](super::resolve) uses it.
    pub fn root(&self) -> Root {
        Root { path: self.path.clone(), id: self.id(), label: self.label.clone() }
    }

    /// The root's object id.
    pub fn id(&self) -> ObjectId {
        ObjectId { dev: self.dev, ino: self.ino }
    }
}

/// Checks and canonicalizes a new session's protected roots and labels them (a single root
/// has no label; several are labelled by their directory names, made unique).
pub fn root_records(roots: &[PathBuf]) -> Result<Vec<RootRec>, SessionError> {
    let mut recs: Vec<RootRec> = Vec::new();
    for r in roots {
        let canon = r.canonicalize().map_err(|error| SessionError::Root { path: r.clone(), error })?;
        if !canon.is_dir() {
            return Err(SessionError::RootNotDir(r.clone()));
        }
        if canon == Path::new("/") {
            return Err(SessionError::RootIsSlash);
        }
        let id = ObjectId::of_path(&canon).map_err(SessionError::RootId)?;
        recs.push(RootRec { path: canon, dev: id.dev, ino: id.ino, label: String::new() });
    }
    if recs.len() > 1 {
        for i in 0..recs.len() {
            let base = recs[i].path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "root".into());
            let taken = recs[..i].iter().any(|r| r.label == base);
            recs[i].label = if taken { format!("{base}-{i}") } else { base };
        }
    }
    Ok(recs)
}

/// Root records for the containment places that exist, labelled `~` (the home) or `@` and
/// the path's segments (`@tmp`, `@run-user-1000`) so they never meet a workspace label;
/// places that are one of the named roots are left out.
pub fn place_records(places: &[PathBuf], home: &Path, named: &[RootRec]) -> Vec<RootRec> {
    let mut out: Vec<RootRec> = Vec::new();
    for p in places {
        let Ok(canon) = p.canonicalize() else { continue };
        let Ok(id) = ObjectId::of_path(&canon) else { continue };
        if named.iter().chain(&out).any(|r| r.dev == id.dev && r.ino == id.ino) {
            continue;
        }
        let label = if p == home {
            "~".to_string()
        } else {
            format!("@{}", canon.to_string_lossy().trim_matches('/').replace('/', "-"))
        };
        out.push(RootRec { path: canon, dev: id.dev, ino: id.ino, label });
    }
    out
}

/// An open session as the daemon keeps it (persisted in `sessions.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    /// Session id (`s-` and ten hex digits).
    pub id: String,
    /// The uid that owns it.
    pub owner_uid: u32,
    /// The twin's user name for the owner.
    pub user: String,
    /// Its cgroup directory.
    pub cgroup: PathBuf,
    /// The cgroup's id (the kernel's session key).
    pub cgroup_id: u64,
    /// Protected roots.
    pub roots: Vec<RootRec>,
    /// The user's prompts, first one first.
    pub prompts: Vec<String>,
    /// Entries of the pre-committed policy.
    pub policy_entries: usize,
    /// Counters so far.
    pub counters: Counters,
    /// The twin's grants of this session as of the last write of `sessions.json` (the twin
    /// owns them; this copy only carries them across a daemon restart).
    #[serde(default)]
    pub grants: Vec<(String, Access)>,
    /// Places gated like roots around the workspace (the owner's home, `/tmp`, ...): their
    /// misses are decided like any other, but they are not part of the workspace tree.
    #[serde(default)]
    pub places: Vec<RootRec>,
    /// The session's scratch directory (`TMPDIR`), removed when it ends.
    #[serde(default)]
    pub scratch: Option<PathBuf>,
    /// Its layers over the read-write open paths, removed when it ends.
    #[serde(default)]
    pub layers: Option<super::layers::Layers>,
    /// Enforcing or shadow.
    #[serde(default)]
    pub mode: SessionMode,
    /// Whether the session may create user namespaces.
    #[serde(default)]
    pub allow_userns: bool,
    /// The namespaces of its own the worker is started in.
    #[serde(default)]
    pub namespaces: super::worker::Namespaces,
}

impl Session {
    /// The session as the protocol reports it.
    pub fn info(&self) -> SessionInfo {
        SessionInfo {
            session: self.id.clone(),
            owner_uid: self.owner_uid,
            user: self.user.clone(),
            cgroup: self.cgroup.clone(),
            cgroup_id: self.cgroup_id,
            roots: self.roots.iter().map(|r| r.path.clone()).collect(),
            policy_entries: self.policy_entries,
            counters: self.counters.clone(),
            scratch: self.scratch.clone(),
            layers: self.layers.as_ref().map(|l| l.mounts.clone()).unwrap_or_default(),
            mode: self.mode,
            namespaces: self.namespaces,
        }
    }

    /// Its named roots (the workspace).
    pub fn roots(&self) -> Vec<Root> {
        self.roots.iter().map(RootRec::root).collect()
    }

    /// Every gated root: the named roots first (the nearest root wins in the kernel's
    /// walk, and a request names the first root that holds it), then the places.
    pub fn all_roots(&self) -> Vec<Root> {
        self.roots.iter().chain(&self.places).map(RootRec::root).collect()
    }

    /// The root records of [`Session::all_roots`].
    pub fn all_root_recs(&self) -> impl Iterator<Item = &RootRec> {
        self.roots.iter().chain(&self.places)
    }

    /// The kernel's flags for the session.
    pub fn flags(&self) -> crate::kernel::SessionFlags {
        crate::kernel::SessionFlags { shadow: self.mode == SessionMode::Shadow, allow_userns: self.allow_userns }
    }
}

/// The open sessions by id, and the file they are persisted in.
#[derive(Debug)]
pub struct Sessions {
    file: PathBuf,
    open: BTreeMap<String, Session>,
}

impl Sessions {
    /// No open sessions yet; persisted in `state_dir/sessions.json`.
    pub fn new(state_dir: &Path) -> Self {
        Sessions { file: state_dir.join("sessions.json"), open: BTreeMap::new() }
    }

    /// The sessions an earlier daemon left in `sessions.json` (none if there is no file).
    pub fn load_persisted(&self) -> Result<Vec<Session>, SessionError> {
        let text = match std::fs::read_to_string(&self.file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
            Err(source) => return Err(SessionError::File { path: self.file.clone(), source }),
        };
        serde_json::from_str(&text).map_err(|error| SessionError::Parse { path: self.file.clone(), error })
    }

    /// Writes the open sessions to `sessions.json` (atomically, by rename); `grants` gives
    /// each session's grants as its twin holds them. A failure is logged: the sessions
    /// stay open and gated, only a restart would lose them.
    pub fn persist(&mut self, grants: impl Fn(&Session) -> Vec<(String, Access)>) {
        for s in self.open.values_mut() {
            s.grants = grants(s);
        }
        let tmp = self.file.with_extension("json.tmp");
        let list: Vec<&Session> = self.open.values().collect();
        let text = serde_json::to_string_pretty(&list).expect("sessions serialize");
        if let Err(e) = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, &self.file)) {
            tracing::error!(file = %self.file.display(), error = %e, "cannot persist open sessions");
        }
    }

    /// Adds an open session.
    pub fn insert(&mut self, s: Session) {
        self.open.insert(s.id.clone(), s);
    }

    /// Removes a session.
    pub fn remove(&mut self, id: &str) -> Option<Session> {
        self.open.remove(id)
    }

    /// A session by id.
    pub fn get(&self, id: &str) -> Option<&Session> {
        self.open.get(id)
    }

    /// A session by id, to change.
    pub fn get_mut(&mut self, id: &str) -> Option<&mut Session> {
        self.open.get_mut(id)
    }

    /// The session whose cgroup id is `cgroup_id` (the kernel's session key).
    pub fn by_cgroup_id(&self, cgroup_id: u64) -> Option<&Session> {
        self.open.values().find(|s| s.cgroup_id == cgroup_id)
    }

    /// The session whose cgroup holds `cgroup` (a process's cgroup, maybe nested deeper).
    pub fn containing(&self, cgroup: &Path) -> Option<&Session> {
        self.open.values().find(|s| cgroup.starts_with(&s.cgroup))
    }

    /// Every open session, by id.
    pub fn iter(&self) -> impl Iterator<Item = &Session> {
        self.open.values()
    }
}

/// A fresh session id: `s-` and ten random hex digits.
pub fn new_session_id() -> String {
    let mut b = [0u8; 5];
    if getrandom::fill(&mut b).is_err() {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        b.copy_from_slice(&t.to_le_bytes()[..5]);
    }
    format!("s-{}", hex::encode(b))
}

/// Creates a session's cgroup under `parent` and returns its id.
pub fn create_cgroup(parent: &Path, cgroup: &Path) -> Result<u64, SessionError> {
    std::fs::create_dir_all(parent)
        .and_then(|()| std::fs::create_dir(cgroup))
        .map_err(|error| SessionError::Cgroup { path: cgroup.into(), error })?;
    crate::kernel::cgroup_id(cgroup).map_err(|e| {
        let _ = remove_cgroup(cgroup);
        SessionError::CgroupId(e)
    })
}

/// The first cgroup at or above `parent` (the directories that exist and hold a
/// `cgroup.procs`), or its `cgroup.procs`, that someone other than root may write, with what
/// is wrong; `None` when only root may write them all (the directories above the cgroup
/// filesystem play no part). Moving a process into a cgroup (`clone3(CLONE_INTO_CGROUP)`, a write of
/// `cgroup.procs`) takes write on the target's `cgroup.procs` and on that of the nearest
/// cgroup above both ends: with the sessions under root's cgroups, no process of a session
/// can leave its cgroup or pull the user's process into it, even where no file hook sees it.
pub fn writable_above(parent: &Path) -> Option<(PathBuf, String)> {
    use std::os::unix::fs::MetadataExt;
    let check = |p: &Path| -> Option<String> {
        let m = std::fs::metadata(p).ok()?;
        if m.uid() != 0 {
            Some(format!("is owned by uid {}", m.uid()))
        } else if m.mode() & 0o022 != 0 {
            Some(format!("is writable by its group or everyone (mode {:o})", m.mode() & 0o7777))
        } else {
            None
        }
    };
    for dir in parent.ancestors() {
        let procs = dir.join("cgroup.procs");
        if !procs.exists() {
            continue;
        }
        if let Some(problem) = check(dir) {
            return Some((dir.to_path_buf(), problem));
        }
        if let Some(problem) = check(&procs) {
            return Some((procs, problem));
        }
    }
    None
}

/// Kills every process left in a cgroup and waits (bounded) for it to empty.
pub async fn empty_cgroup(cgroup: &Path) {
    let kill = cgroup.join("cgroup.kill");
    if kill.is_file() {
        let _ = std::fs::write(&kill, "1");
    } else if let Ok(procs) = std::fs::read_to_string(cgroup.join("cgroup.procs")) {
        for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
            // SAFETY: plain kill(2) on a pid read from the cgroup.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
    for _ in 0..200 {
        match std::fs::read_to_string(cgroup.join("cgroup.procs")) {
            Ok(p) if !p.trim().is_empty() => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
            _ => break,
        }
    }
}

/// Removes a session's (empty) cgroup; one already gone is fine.
pub fn remove_cgroup(cgroup: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir(cgroup) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Makes the state directory 0700 and the files in it 0600: they hold every user's trusted
/// history and prompts, the sanitizer key and the open sessions.
pub fn restrict_state_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let meta = std::fs::symlink_metadata(e.path())?;
        if meta.is_file() && meta.permissions().mode() & 0o077 != 0 {
            std::fs::set_permissions(e.path(), std::fs::Permissions::from_mode(0o600))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_cgroup_parent_below_a_cgroup_others_may_write_is_named() {
        // Directories that are no cgroup (no `cgroup.procs`) play no part, /tmp's mode 1777
        // included.
        let dir = tempfile::tempdir().unwrap();
        let parent = dir.path().join("user.slice/sessions");
        std::fs::create_dir_all(&parent).unwrap();
        assert_eq!(writable_above(&parent), None);
        // A folder that looks like a cgroup and that others may write, as a user's
        // delegated cgroup is, is named, and so is a `cgroup.procs` others may write.
        let slice = dir.path().join("user.slice");
        std::fs::write(slice.join("cgroup.procs"), "").unwrap();
        std::fs::set_permissions(&slice, std::fs::Permissions::from_mode(0o757)).unwrap();
        std::fs::set_permissions(slice.join("cgroup.procs"), std::fs::Permissions::from_mode(0o600)).unwrap();
        let (at, problem) = writable_above(&parent).expect("a cgroup others may write");
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            assert_eq!((at.as_path(), problem.as_str()), (slice.as_path(), "is writable by its group or everyone (mode 757)"));
            std::fs::set_permissions(&slice, std::fs::Permissions::from_mode(0o755)).unwrap();
            assert_eq!(writable_above(&parent), None, "root's, writable by root only");
            std::fs::set_permissions(slice.join("cgroup.procs"), std::fs::Permissions::from_mode(0o666)).unwrap();
            assert_eq!(writable_above(&parent).map(|(at, _)| at), Some(slice.join("cgroup.procs")));
            std::fs::set_permissions(slice.join("cgroup.procs"), std::fs::Permissions::from_mode(0o644)).unwrap();
            std::os::unix::fs::chown(&slice, Some(1000), None).unwrap();
            assert_eq!(writable_above(&parent).map(|(_, p)| p), Some("is owned by uid 1000".to_string()));
        } else {
            assert_eq!(at, slice, "{problem}");
        }
    }
}
