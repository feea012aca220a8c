//! What the daemon needs from the kernel enforcer, as a trait: the real [`Enforcer`] in the
//! shipped daemon, an in-memory [`MemoryEnforcer`] in host tests (this host's kernel refuses
//! LSM programs, so the decision and permission logic is tested against the trait and the
//! kernel behaviour in the VM).

use crate::access::Access;
use crate::kernel::{Enforcer, KernelError, ObjectId, Scope, SessionFlags};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::sync::{Arc, Mutex};

/// The enforcer operations the daemon uses.
pub trait Enforce: Send + Sync + 'static {
    /// Gates a session's cgroup with its mode flags.
    fn register_session(&mut self, cgroup_id: u64, flags: SessionFlags) -> Result<(), KernelError>;
    /// Protects a directory.
    fn add_root(&mut self, id: ObjectId) -> Result<(), KernelError>;
    /// Grants one access type on an object to a session.
    fn grant(&mut self, session: u64, id: ObjectId, scope: Scope, access: Access) -> Result<(), KernelError>;
    /// Whether a session already holds an exact grant of `access` on an object (the kernel's
    /// grant map is the one owner of grants; the daemon asks it).
    fn holds(&self, session: u64, id: ObjectId, access: Access) -> Result<bool, KernelError>;
    /// Takes one access type on an object back from a session.
    fn revoke(&mut self, session: u64, id: ObjectId, scope: Scope, access: Access) -> Result<(), KernelError>;
    /// Deletes every grant of a session and stops gating it; returns the grants removed.
    fn revoke_session(&mut self, session: u64) -> Result<usize, KernelError>;
    /// Opens an object (and its subtree) for the access bits to every session.
    fn add_open(&mut self, id: ObjectId, bits: u32) -> Result<(), KernelError>;
    /// Makes the access bits on an object (and its subtree) never grantable.
    fn add_never(&mut self, id: ObjectId, bits: u32) -> Result<(), KernelError>;
    /// Makes the access bits on the name `name` in directory `dir` never grantable.
    fn add_never_name(&mut self, dir: ObjectId, name: &OsStr, bits: u32) -> Result<(), KernelError>;
}

impl Enforce for Enforcer {
    fn register_session(&mut self, cgroup_id: u64, flags: SessionFlags) -> Result<(), KernelError> {
        Enforcer::register_session_with(self, cgroup_id, flags)
    }
    fn add_root(&mut self, id: ObjectId) -> Result<(), KernelError> {
        Enforcer::add_root_id(self, id)
    }
    fn grant(&mut self, session: u64, id: ObjectId, scope: Scope, access: Access) -> Result<(), KernelError> {
        Enforcer::grant(self, session, id, scope, access)
    }
    fn holds(&self, session: u64, id: ObjectId, access: Access) -> Result<bool, KernelError> {
        Ok(Enforcer::granted_bits(self, session, id, Scope::Exact)? & crate::kernel::access_bit(access) != 0)
    }
    fn revoke(&mut self, session: u64, id: ObjectId, scope: Scope, access: Access) -> Result<(), KernelError> {
        Enforcer::revoke(self, session, id, scope, access)
    }
    fn revoke_session(&mut self, session: u64) -> Result<usize, KernelError> {
        Enforcer::revoke_session(self, session, false)
    }
    fn add_open(&mut self, id: ObjectId, bits: u32) -> Result<(), KernelError> {
        Enforcer::add_open(self, id, bits)
    }
    fn add_never(&mut self, id: ObjectId, bits: u32) -> Result<(), KernelError> {
        Enforcer::add_never(self, id, bits)
    }
    fn add_never_name(&mut self, dir: ObjectId, name: &OsStr, bits: u32) -> Result<(), KernelError> {
        Enforcer::add_never_name(self, dir, name, bits)
    }
}

/// What a [`MemoryEnforcer`] holds.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct MemoryState {
    /// Gated sessions.
    pub sessions: BTreeSet<u64>,
    /// Their flags.
    pub session_flags: BTreeMap<u64, SessionFlags>,
    /// Open objects → access bits.
    pub open: BTreeMap<(u32, u64), u32>,
    /// Never-grantable objects → access bits.
    pub never: BTreeMap<(u32, u64), u32>,
    /// Never-grantable names (directory, name) → access bits.
    pub never_names: BTreeMap<(u32, u64, OsString), u32>,
    /// Protected roots.
    pub roots: BTreeSet<(u32, u64)>,
    /// Grants: (session, dev, ino, exact?) → access types.
    pub grants: BTreeMap<(u64, u32, u64, bool), BTreeSet<Access>>,
    /// When set, taking back a single grant fails as a kernel map error would.
    pub refuse_revoke: bool,
}

/// An enforcer that only records what it is told, for host tests of the daemon's logic.
/// It enforces nothing; the shipped `pincer daemon` never uses it.
#[derive(Debug, Default, Clone)]
pub struct MemoryEnforcer {
    /// The recorded state, shared with the test.
    pub state: Arc<Mutex<MemoryState>>,
}

impl MemoryEnforcer {
    /// Whether `session` holds `access` on `id` (exactly).
    pub fn has(&self, session: u64, id: ObjectId, access: Access) -> bool {
        let s = self.state.lock().expect("memory enforcer lock");
        s.grants.get(&(session, id.dev, id.ino, true)).is_some_and(|a| a.contains(&access))
    }

    /// Number of grant entries of `session`.
    pub fn grant_count(&self, session: u64) -> usize {
        self.state.lock().expect("memory enforcer lock").grants.keys().filter(|k| k.0 == session).count()
    }
}

impl Enforce for MemoryEnforcer {
    fn register_session(&mut self, cgroup_id: u64, flags: SessionFlags) -> Result<(), KernelError> {
        let mut s = self.state.lock().expect("memory enforcer lock");
        s.sessions.insert(cgroup_id);
        s.session_flags.insert(cgroup_id, flags);
        Ok(())
    }
    fn add_root(&mut self, id: ObjectId) -> Result<(), KernelError> {
        self.state.lock().expect("memory enforcer lock").roots.insert((id.dev, id.ino));
        Ok(())
    }
    fn grant(&mut self, session: u64, id: ObjectId, scope: Scope, access: Access) -> Result<(), KernelError> {
        let mut s = self.state.lock().expect("memory enforcer lock");
        s.grants.entry((session, id.dev, id.ino, scope == Scope::Exact)).or_default().insert(access);
        Ok(())
    }
    fn holds(&self, session: u64, id: ObjectId, access: Access) -> Result<bool, KernelError> {
        Ok(self.has(session, id, access))
    }
    fn revoke(&mut self, session: u64, id: ObjectId, scope: Scope, access: Access) -> Result<(), KernelError> {
        let mut s = self.state.lock().expect("memory enforcer lock");
        if s.refuse_revoke {
            return Err(KernelError::MapOp { op: "remove", map: "GRANTS", source: Box::new(aya::maps::MapError::KeyNotFound) });
        }
        let key = (session, id.dev, id.ino, scope == Scope::Exact);
        if let Some(a) = s.grants.get_mut(&key) {
            a.remove(&access);
            if a.is_empty() {
                s.grants.remove(&key);
            }
        }
        Ok(())
    }
    fn revoke_session(&mut self, session: u64) -> Result<usize, KernelError> {
        let mut s = self.state.lock().expect("memory enforcer lock");
        let before = s.grants.len();
        s.grants.retain(|k, _| k.0 != session);
        s.sessions.remove(&session);
        s.session_flags.remove(&session);
        Ok(before - s.grants.len())
    }
    fn add_open(&mut self, id: ObjectId, bits: u32) -> Result<(), KernelError> {
        *self.state.lock().expect("memory enforcer lock").open.entry((id.dev, id.ino)).or_default() |= bits;
        Ok(())
    }
    fn add_never(&mut self, id: ObjectId, bits: u32) -> Result<(), KernelError> {
        *self.state.lock().expect("memory enforcer lock").never.entry((id.dev, id.ino)).or_default() |= bits;
        Ok(())
    }
    fn add_never_name(&mut self, dir: ObjectId, name: &OsStr, bits: u32) -> Result<(), KernelError> {
        *self.state.lock().expect("memory enforcer lock").never_names.entry((dir.dev, dir.ino, name.to_owned())).or_default() |= bits;
        Ok(())
    }
}
