//! The tables the enforcer edits, behind one small trait: in the kernel the BPF maps of
//! the loaded program (pinned in bpffs), on the host maps in memory. The enforcer's map
//! logic (sessions, roots, grants, open and never entries, the never-directory counts,
//! the state and the policy generation, the reach lists) is written once against
//! [`Table`], so host tests run the code that ships; only loading, attaching, pinning,
//! the miss ring buffer and the cache's kernel addresses stay kernel-only.
//!
//! [`MemoryMaps`] holds one in-memory table per map; an enforcer over them
//! ([`MemoryMaps::enforcer`]) edits them as the kernel one edits its pins, and the
//! accessors read back what it wrote.

use super::{access_bit, name_key, Enforcer, KernelError, ObjectId, Scope, SessionFlags};
use crate::access::Access;
use aya::maps::lpm_trie::{Key as LpmKey, LpmTrie};
use aya::maps::{Array, HashMap, MapData, MapError};
use aya::Pod;
use pincer_common::reach::{HostAddrKey, PortKey, UnixNameKey};
use pincer_common::{map_names, CreateNameKey, Generation, GrantKey, NameKey, ObjectKey, SessionKey, SessionValue, State, VacatedKey};
use std::ffi::OsStr;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};

/// A key-value table of the enforcer: a BPF map, or one in memory. Errors name the map.
pub trait Table<K, V>: Send + Sync {
    /// The map's name (as in [`pincer_common::map_names`]).
    fn name(&self) -> &'static str;
    /// The value under `key` (`None` if absent).
    fn get(&self, key: &K) -> Result<Option<V>, KernelError>;
    /// Stores `value` under `key`, replacing an earlier one.
    fn insert(&mut self, key: K, value: V) -> Result<(), KernelError>;
    /// Removes the entry of `key`; an absent one is not an error. Arrays refuse.
    fn remove(&mut self, key: &K) -> Result<(), KernelError>;
    /// Every key present (for an array, every index).
    fn keys(&self) -> Result<Vec<K>, KernelError>;
}

/// A boxed table, as the enforcer holds each of its maps.
pub(super) type BoxTable<K, V> = Box<dyn Table<K, V>>;

fn map_op(op: &'static str, map: &'static str, source: MapError) -> KernelError {
    KernelError::MapOp { op, map, source: Box::new(source) }
}

/// What deleting from an array gives (as the kernel's `EINVAL`).
fn array_remove(map: &'static str) -> KernelError {
    map_op("remove", map, MapError::IoError(std::io::Error::from_raw_os_error(libc::EINVAL)))
}

/// A map of the loaded program (or opened from its pin) as a [`Table`]: a `HashMap` or
/// an `Array` (keyed by index).
pub struct BpfTable<M> {
    name: &'static str,
    map: M,
}

impl<M> BpfTable<M> {
    /// The map `map`, named `name` in errors.
    pub fn new(name: &'static str, map: M) -> Self {
        Self { name, map }
    }
}

impl<K: Pod + Send + Sync, V: Pod + Send + Sync> Table<K, V> for BpfTable<HashMap<MapData, K, V>> {
    fn name(&self) -> &'static str {
        self.name
    }
    fn get(&self, key: &K) -> Result<Option<V>, KernelError> {
        match self.map.get(key, 0) {
            Ok(v) => Ok(Some(v)),
            Err(MapError::KeyNotFound) => Ok(None),
            Err(source) => Err(map_op("lookup", self.name, source)),
        }
    }
    fn insert(&mut self, key: K, value: V) -> Result<(), KernelError> {
        self.map.insert(key, value, 0).map_err(|source| map_op("insert", self.name, source))
    }
    fn remove(&mut self, key: &K) -> Result<(), KernelError> {
        match self.map.remove(key) {
            Ok(()) | Err(MapError::KeyNotFound) => Ok(()),
            Err(MapError::SyscallError(e)) if e.io_error.raw_os_error() == Some(libc::ENOENT) => Ok(()),
            Err(source) => Err(map_op("remove", self.name, source)),
        }
    }
    fn keys(&self) -> Result<Vec<K>, KernelError> {
        self.map.keys().collect::<Result<Vec<K>, MapError>>().map_err(|source| map_op("iterate", self.name, source))
    }
}

impl<V: Pod + Send + Sync> Table<u32, V> for BpfTable<Array<MapData, V>> {
    fn name(&self) -> &'static str {
        self.name
    }
    fn get(&self, index: &u32) -> Result<Option<V>, KernelError> {
        match self.map.get(index, 0) {
            Ok(v) => Ok(Some(v)),
            Err(MapError::OutOfBounds { .. }) => Ok(None),
            Err(source) => Err(map_op("lookup", self.name, source)),
        }
    }
    fn insert(&mut self, index: u32, value: V) -> Result<(), KernelError> {
        self.map.set(index, value, 0).map_err(|source| map_op("update", self.name, source))
    }
    fn remove(&mut self, _: &u32) -> Result<(), KernelError> {
        Err(array_remove(self.name))
    }
    fn keys(&self) -> Result<Vec<u32>, KernelError> {
        Ok((0..self.map.len()).collect())
    }
}

/// The host address trie, keyed by prefix: a key is the prefix itself (exact, not the
/// longest match), as the enforcer adds and removes whole prefixes.
impl Table<HostAddrKey, u32> for BpfTable<LpmTrie<MapData, [u8; 16], u32>> {
    fn name(&self) -> &'static str {
        self.name
    }
    fn get(&self, key: &HostAddrKey) -> Result<Option<u32>, KernelError> {
        match self.map.get(&LpmKey::new(key.prefixlen, key.addr), 0) {
            Ok(v) => Ok(Some(v)),
            Err(MapError::KeyNotFound) => Ok(None),
            Err(source) => Err(map_op("lookup", self.name, source)),
        }
    }
    fn insert(&mut self, key: HostAddrKey, value: u32) -> Result<(), KernelError> {
        self.map.insert(&LpmKey::new(key.prefixlen, key.addr), value, 0).map_err(|source| map_op("insert", self.name, source))
    }
    fn remove(&mut self, key: &HostAddrKey) -> Result<(), KernelError> {
        match self.map.remove(&LpmKey::new(key.prefixlen, key.addr)) {
            Ok(()) | Err(MapError::KeyNotFound) => Ok(()),
            Err(MapError::SyscallError(e)) if e.io_error.raw_os_error() == Some(libc::ENOENT) => Ok(()),
            Err(source) => Err(map_op("remove", self.name, source)),
        }
    }
    fn keys(&self) -> Result<Vec<HostAddrKey>, KernelError> {
        self.map
            .keys()
            .map(|k| k.map(|k| HostAddrKey { prefixlen: k.prefix_len(), addr: k.data() }))
            .collect::<Result<Vec<_>, MapError>>()
            .map_err(|source| map_op("iterate", self.name, source))
    }
}

/// The entries of a [`MemoryTable`] and its injected failure.
#[derive(Debug)]
struct Entries<K, V> {
    map: std::collections::HashMap<K, V>,
    /// An array: its slots always exist, none is removed or added.
    array: bool,
    /// The next insert or remove fails (once).
    fail_next_change: bool,
}

/// A table in memory with a BPF map's semantics (insert creates or replaces, removing an
/// absent key succeeds, an array's slots always exist). Clones share the entries, as
/// every process that opens a pinned map shares it.
#[derive(Debug)]
pub struct MemoryTable<K, V> {
    name: &'static str,
    entries: Arc<Mutex<Entries<K, V>>>,
}

impl<K, V> Clone for MemoryTable<K, V> {
    fn clone(&self) -> Self {
        Self { name: self.name, entries: self.entries.clone() }
    }
}

impl<K: Eq + Hash, V> MemoryTable<K, V> {
    /// An empty hash table named `name`.
    pub fn hash(name: &'static str) -> Self {
        let entries = Entries { map: Default::default(), array: false, fail_next_change: false };
        Self { name, entries: Arc::new(Mutex::new(entries)) }
    }

    fn lock(&self) -> MutexGuard<'_, Entries<K, V>> {
        // A test that panicked while holding the lock leaves consistent entries.
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes the next insert or remove fail as a kernel map error would (once), to test
    /// what the daemon does when the kernel refuses a change.
    pub fn fail_next_change(&self) {
        self.lock().fail_next_change = true;
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    /// Whether the table has no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every entry, in no particular order.
    pub fn entries(&self) -> Vec<(K, V)>
    where
        K: Clone,
        V: Clone,
    {
        self.lock().map.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// Fails once if a failure was injected.
    fn check_change(entries: &mut Entries<K, V>, op: &'static str, name: &'static str) -> Result<(), KernelError> {
        if std::mem::take(&mut entries.fail_next_change) {
            return Err(map_op(op, name, MapError::IoError(std::io::Error::from_raw_os_error(libc::EIO))));
        }
        Ok(())
    }
}

impl<V: Default> MemoryTable<u32, V> {
    /// An array named `name` of `len` zeroed slots.
    pub fn array(name: &'static str, len: u32) -> Self {
        let map = (0..len).map(|i| (i, V::default())).collect();
        Self { name, entries: Arc::new(Mutex::new(Entries { map, array: true, fail_next_change: false })) }
    }
}

impl<K: Eq + Hash + Clone + Send, V: Clone + Send> Table<K, V> for MemoryTable<K, V> {
    fn name(&self) -> &'static str {
        self.name
    }
    fn get(&self, key: &K) -> Result<Option<V>, KernelError> {
        Ok(self.lock().map.get(key).cloned())
    }
    fn insert(&mut self, key: K, value: V) -> Result<(), KernelError> {
        let mut e = self.lock();
        let op = if e.array { "update" } else { "insert" };
        Self::check_change(&mut e, op, self.name)?;
        if e.array && !e.map.contains_key(&key) {
            // As the kernel answers an update past an array's end.
            return Err(map_op(op, self.name, MapError::IoError(std::io::Error::from_raw_os_error(libc::E2BIG))));
        }
        e.map.insert(key, value);
        Ok(())
    }
    fn remove(&mut self, key: &K) -> Result<(), KernelError> {
        let mut e = self.lock();
        Self::check_change(&mut e, "remove", self.name)?;
        if e.array {
            return Err(array_remove(self.name));
        }
        e.map.remove(key);
        Ok(())
    }
    fn keys(&self) -> Result<Vec<K>, KernelError> {
        Ok(self.lock().map.keys().cloned().collect())
    }
}

/// Every map the enforcer edits, in memory (host tests: this host's kernel refuses BPF
/// LSM programs). Clones share the tables, as pins are shared: an enforcer made by
/// [`MemoryMaps::enforcer`] after a daemon restart sees what the one before wrote.
#[derive(Debug, Clone)]
pub struct MemoryMaps {
    /// Gated sessions by cgroup id.
    pub sessions: MemoryTable<SessionKey, SessionValue>,
    /// Protected roots.
    pub roots: MemoryTable<ObjectKey, u32>,
    /// Exact grants.
    pub exact: MemoryTable<GrantKey, u32>,
    /// Subtree grants.
    pub subtree: MemoryTable<GrantKey, u32>,
    /// Open paths.
    pub open: MemoryTable<ObjectKey, u32>,
    /// Never-grantable objects.
    pub never: MemoryTable<ObjectKey, u32>,
    /// Never-grantable names.
    pub never_names: MemoryTable<NameKey, u32>,
    /// Directories holding never-grantable names, with how many.
    pub never_dirs: MemoryTable<ObjectKey, u32>,
    /// The reserved names a `mkdir` may make, with the template the new directory gets.
    pub never_carry: MemoryTable<NameKey, u64>,
    /// The names where a folder of the user's stood until a session removed or moved it,
    /// with the inode number of what left.
    pub vacated: MemoryTable<VacatedKey, u64>,
    /// The single names sessions were given `create` for, by directory.
    pub create_names: MemoryTable<CreateNameKey, u32>,
    /// The state (slot 0).
    pub state: MemoryTable<u32, State>,
    /// The policy generation and the cache's kernel addresses (slot 0).
    pub generation: MemoryTable<u32, Generation>,
    /// Ports held against sessions on this host (listed, or held outside every session).
    pub ports: MemoryTable<PortKey, u32>,
    /// The ports sessions bound.
    pub own_ports: MemoryTable<PortKey, u32>,
    /// This host's addresses.
    pub host_addrs: MemoryTable<HostAddrKey, u32>,
    /// Reachable Unix socket files.
    pub unix_files: MemoryTable<ObjectKey, u32>,
    /// Reachable Unix socket names.
    pub unix_names: MemoryTable<UnixNameKey, u32>,
    /// Session servers' names outside processes may reach.
    pub unix_served: MemoryTable<UnixNameKey, u32>,
}

impl Default for MemoryMaps {
    fn default() -> Self {
        use pincer_common::reach::map_names as reach;
        Self {
            sessions: MemoryTable::hash(map_names::SESSIONS),
            roots: MemoryTable::hash(map_names::ROOTS),
            exact: MemoryTable::hash(map_names::EXACT),
            subtree: MemoryTable::hash(map_names::SUBTREE),
            open: MemoryTable::hash(map_names::OPEN),
            never: MemoryTable::hash(map_names::NEVER),
            never_names: MemoryTable::hash(map_names::NEVER_NAMES),
            never_dirs: MemoryTable::hash(map_names::NEVER_DIRS),
            never_carry: MemoryTable::hash(map_names::NEVER_CARRY),
            vacated: MemoryTable::hash(map_names::VACATED),
            create_names: MemoryTable::hash(map_names::CREATE_NAMES),
            state: MemoryTable::array(map_names::STATE, 1),
            generation: MemoryTable::array(map_names::GENERATION, 1),
            ports: MemoryTable::hash(reach::PORTS),
            own_ports: MemoryTable::hash(reach::OWN_PORTS),
            host_addrs: MemoryTable::hash(reach::HOST_ADDRS),
            unix_files: MemoryTable::hash(reach::UNIX_FILES),
            unix_names: MemoryTable::hash(reach::UNIX_NAMES),
            unix_served: MemoryTable::hash(reach::UNIX_SERVED),
        }
    }
}

fn read<K: Eq + Hash + Clone + Send, V: Clone + Send>(t: &MemoryTable<K, V>, key: &K) -> Option<V> {
    Table::get(t, key).unwrap_or(None)
}

impl MemoryMaps {
    /// An enforcer over these tables: the shipped map logic, without a kernel (no misses,
    /// no pins, no walk cache addresses).
    pub fn enforcer(&self) -> Enforcer {
        Enforcer::over_tables(
            super::FileMaps {
                sessions: Box::new(self.sessions.clone()),
                roots: Box::new(self.roots.clone()),
                exact: Box::new(self.exact.clone()),
                subtree: Box::new(self.subtree.clone()),
                open: Box::new(self.open.clone()),
                never: Box::new(self.never.clone()),
                never_names: Box::new(self.never_names.clone()),
                never_dirs: Box::new(self.never_dirs.clone()),
                never_carry: Box::new(self.never_carry.clone()),
                vacated: Box::new(self.vacated.clone()),
                create_names: Box::new(self.create_names.clone()),
                state: Box::new(self.state.clone()),
                generation: Box::new(self.generation.clone()),
            },
            super::reach::ReachMaps {
                ports: Box::new(self.ports.clone()),
                own_ports: Box::new(self.own_ports.clone()),
                host_addrs: Box::new(self.host_addrs.clone()),
                unix_files: Box::new(self.unix_files.clone()),
                unix_names: Box::new(self.unix_names.clone()),
                unix_served: Box::new(self.unix_served.clone()),
            },
        )
    }

    /// The access bits (`ACCESS_*`) `session` holds on `id` in the grant map of `scope`
    /// (0 if none).
    pub fn granted_bits(&self, session: u64, id: ObjectId, scope: Scope) -> u32 {
        let table = match scope {
            Scope::Exact => &self.exact,
            Scope::Subtree => &self.subtree,
        };
        read(table, &GrantKey { session, ino: id.ino, dev: id.dev, _pad: 0 }).unwrap_or(0)
    }

    /// Whether `session` holds an exact grant of `access` on `id`.
    pub fn has(&self, session: u64, id: ObjectId, access: Access) -> bool {
        self.granted_bits(session, id, Scope::Exact) & access_bit(access) != 0
    }

    /// Whether `session` holds `access` on `id` by an exact or a subtree grant on `id` itself.
    pub fn has_any_scope(&self, session: u64, id: ObjectId, access: Access) -> bool {
        (self.granted_bits(session, id, Scope::Exact) | self.granted_bits(session, id, Scope::Subtree)) & access_bit(access) != 0
    }

    /// The number of grant entries (exact and subtree) of `session`.
    pub fn grant_count(&self, session: u64) -> usize {
        [&self.exact, &self.subtree].iter().map(|t| t.entries().iter().filter(|(k, _)| k.session == session).count()).sum()
    }

    /// The flags `cgroup_id` is gated with (`None`: not gated).
    pub fn session(&self, cgroup_id: u64) -> Option<SessionFlags> {
        read(&self.sessions, &SessionKey { cgroup_id }).map(|v| SessionFlags {
            shadow: v.flags & pincer_common::SESSION_FLAG_SHADOW != 0,
            allow_userns: v.flags & pincer_common::SESSION_FLAG_ALLOW_USERNS != 0,
        })
    }

    /// Whether `id` is a protected root.
    pub fn is_root(&self, id: ObjectId) -> bool {
        read(&self.roots, &id.key()).is_some()
    }

    /// The open path bits of `id` (`None`: not an open path).
    pub fn open_bits(&self, id: ObjectId) -> Option<u32> {
        read(&self.open, &id.key())
    }

    /// The never-grantable bits of `id` (`None`: no never entry).
    pub fn never_bits(&self, id: ObjectId) -> Option<u32> {
        read(&self.never, &id.key())
    }

    /// The never-grantable bits of the entry `name` of `dir` (`None`: no such never name,
    /// or a name the kernel key cannot hold).
    pub fn never_name_bits(&self, dir: ObjectId, name: &OsStr) -> Option<u32> {
        read(&self.never_names, &name_key(dir, name).ok()?)
    }

    /// The template a `mkdir` of the reserved name `name` in `dir` (a directory or a
    /// template) gives the new directory.
    pub fn never_carry(&self, dir: ObjectId, name: &OsStr) -> Option<u64> {
        read(&self.never_carry, &name_key(dir, name).ok()?)
    }

    /// How many never-grantable names the directory `dir` holds, as the kernel's
    /// never-directory mark counts them (`None`: not marked).
    pub fn never_dir_count(&self, dir: ObjectId) -> Option<u32> {
        read(&self.never_dirs, &dir.key())
    }

    /// The state the kernel reads (never entry counts, session levels).
    pub fn state(&self) -> State {
        read(&self.state, &0).unwrap_or_default()
    }

    /// The current policy generation (the walk cache's stamp).
    pub fn policy_generation(&self) -> u64 {
        read(&self.generation, &0).unwrap_or_default().policy
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{HostPort, Proto};
    use pincer_common::{ACCESS_ALL, ACCESS_CREATE, ACCESS_DELETE, ACCESS_LIST, ACCESS_READ, ACCESS_WRITE};

    const DIR: ObjectId = ObjectId { dev: 0x0080_0001, ino: 100 };
    const FILE: ObjectId = ObjectId { dev: 0x0080_0001, ino: 101 };
    const OTHER: ObjectId = ObjectId { dev: 0x0080_0001, ino: 102 };
    /// Session ids no cgroup has (the level lookup finds none: every level is looked up).
    const S1: u64 = 0x7000_0000_0000_0001;
    const S2: u64 = 0x7000_0000_0000_0002;

    fn name(s: &str) -> &OsStr {
        OsStr::new(s)
    }

    #[test]
    fn open_and_never_bits_replace_earlier_ones_on_the_same_object() {
        let maps = MemoryMaps::default();
        let mut e = maps.enforcer();
        e.add_open(FILE, ACCESS_READ | ACCESS_LIST).unwrap();
        e.add_open(FILE, ACCESS_WRITE).unwrap();
        assert_eq!(maps.open_bits(FILE), Some(ACCESS_WRITE), "a second open entry replaces the first, not ORs");
        e.add_never(FILE, ACCESS_WRITE | ACCESS_DELETE).unwrap();
        e.add_never(FILE, ACCESS_READ).unwrap();
        assert_eq!(maps.never_bits(FILE), Some(ACCESS_READ), "a second never entry replaces the first, not ORs");
        assert_eq!(maps.open_bits(FILE), Some(ACCESS_WRITE), "open and never entries of one object are kept apart");
        e.add_never_name(DIR, name("config"), ACCESS_WRITE | ACCESS_CREATE).unwrap();
        e.add_never_name(DIR, name("config"), ACCESS_DELETE).unwrap();
        assert_eq!(maps.never_name_bits(DIR, name("config")), Some(ACCESS_DELETE), "a never name's bits are replaced too");
        e.remove_open(FILE).unwrap();
        e.remove_never(FILE).unwrap();
        assert_eq!((maps.open_bits(FILE), maps.never_bits(FILE)), (None, None));
        // Bits outside ACCESS_ALL are dropped; none left is refused.
        e.add_open(OTHER, ACCESS_READ | 0x8000_0000).unwrap();
        assert_eq!(maps.open_bits(OTHER), Some(ACCESS_READ));
        assert!(matches!(e.add_never(OTHER, 0x8000_0000), Err(KernelError::NoAccess { .. })));
    }

    #[test]
    fn the_never_directory_mark_counts_the_names_in_it() {
        let maps = MemoryMaps::default();
        let mut e = maps.enforcer();
        e.add_never_name(DIR, name("a"), ACCESS_WRITE).unwrap();
        assert_eq!(maps.never_dir_count(DIR), Some(1));
        e.add_never_name(DIR, name("b"), ACCESS_WRITE).unwrap();
        assert_eq!(maps.never_dir_count(DIR), Some(2), "two names in one directory");
        e.add_never_name(DIR, name("a"), ACCESS_READ).unwrap();
        assert_eq!(maps.never_dir_count(DIR), Some(2), "changing a name's bits does not count it again");
        assert_eq!(maps.state().never_names, 2);
        e.remove_never_name(DIR, name("a")).unwrap();
        assert_eq!(maps.never_dir_count(DIR), Some(1), "the directory stays marked for its other name");
        assert_eq!(maps.never_name_bits(DIR, name("b")), Some(ACCESS_WRITE));
        e.remove_never_name(DIR, name("a")).unwrap();
        assert_eq!(maps.never_dir_count(DIR), Some(1), "removing an absent name changes nothing");
        e.remove_never_name(DIR, name("b")).unwrap();
        assert_eq!(maps.never_dir_count(DIR), None, "the mark goes with the last name");
        assert_eq!(maps.state().never_names, 0);
        assert!(maps.never_names.is_empty() && maps.never_dirs.is_empty());
        assert!(matches!(e.add_never_name(DIR, name("a/b"), ACCESS_READ), Err(KernelError::BadName { .. })));
        assert!(maps.never_dirs.is_empty(), "a refused name marks nothing");
    }

    #[test]
    fn the_state_counts_never_entries() {
        let maps = MemoryMaps::default();
        let mut e = maps.enforcer();
        e.add_never(FILE, ACCESS_WRITE).unwrap();
        e.add_never(OTHER, ACCESS_WRITE).unwrap();
        e.add_never(OTHER, ACCESS_READ).unwrap();
        e.add_never_name(DIR, name("x"), ACCESS_WRITE).unwrap();
        let s = maps.state();
        assert_eq!((s.never_objects, s.never_names), (2, 1));
        e.remove_never(FILE).unwrap();
        e.remove_never_name(DIR, name("x")).unwrap();
        let s = maps.state();
        assert_eq!((s.never_objects, s.never_names), (1, 0));
    }

    #[test]
    fn a_batch_syncs_the_state_once_at_its_end_even_when_it_fails() {
        let maps = MemoryMaps::default();
        let mut e = maps.enforcer();
        let before = maps.policy_generation();
        let r: Result<(), KernelError> = e.batch(|e| {
            e.add_never(FILE, ACCESS_WRITE)?;
            e.add_never_name(DIR, name("x"), ACCESS_WRITE)?;
            // Deferred: the kernel's state and generation are not written yet.
            assert_eq!((maps.state().never_objects, maps.state().never_names), (0, 0));
            assert_eq!(maps.policy_generation(), before);
            e.add_never(OTHER, 0x8000_0000).map(drop)
        });
        assert!(r.is_err());
        let s = maps.state();
        assert_eq!((s.never_objects, s.never_names), (1, 1));
        assert_ne!(maps.policy_generation(), before, "the batch's changes renew the policy generation");
        // Outside a batch, each change syncs at once again.
        e.add_never(OTHER, ACCESS_READ).unwrap();
        assert_eq!(maps.state().never_objects, 2);
    }

    /// Whether `change` writes a new policy generation.
    fn renews(maps: &MemoryMaps, e: &mut Enforcer, change: impl FnOnce(&mut Enforcer) -> Result<(), KernelError>) -> bool {
        let before = maps.policy_generation();
        change(e).unwrap();
        maps.policy_generation() != before
    }

    #[test]
    fn every_narrowing_change_renews_the_policy_generation_and_new_grants_do_not() {
        type Change = Box<dyn FnOnce(&mut Enforcer) -> Result<(), KernelError>>;
        let maps = MemoryMaps::default();
        let mut e = maps.enforcer();
        // (what, whether it must renew, the change), in order. Widening changes need no
        // renewal: the cache only allows, so what it holds stays right.
        let changes: Vec<(&str, bool, Change)> = vec![
            ("an exact grant added", false, Box::new(|e| e.grant(S1, FILE, Scope::Exact, Access::Read))),
            ("a subtree grant added", false, Box::new(|e| e.grant_bits(S1, DIR, Scope::Subtree, ACCESS_ALL))),
            ("another session's grant added", false, Box::new(|e| e.grant(S2, FILE, Scope::Exact, Access::Write))),
            ("a session gated", false, Box::new(|e| e.register_session(S1))),
            ("a subtree grant's bit removed", true, Box::new(|e| e.revoke(S1, DIR, Scope::Subtree, Access::Write))),
            ("an exact grant removed", true, Box::new(|e| e.revoke(S1, FILE, Scope::Exact, Access::Read))),
            ("a session's grants revoked", true, Box::new(|e| e.revoke_session(S2, false).map(drop))),
            ("a root added", true, Box::new(|e| e.add_root_id(DIR))),
            ("a root removed", true, Box::new(|e| e.remove_root_id(DIR))),
            ("an open path added", true, Box::new(|e| e.add_open(DIR, ACCESS_READ | ACCESS_LIST))),
            ("an open path narrowed", true, Box::new(|e| e.add_open(DIR, ACCESS_READ))),
            ("an open path removed", true, Box::new(|e| e.remove_open(DIR))),
            ("a never entry added", true, Box::new(|e| e.add_never(FILE, ACCESS_WRITE))),
            ("a never entry changed", true, Box::new(|e| e.add_never(FILE, ACCESS_WRITE | ACCESS_READ))),
            ("a never entry removed", true, Box::new(|e| e.remove_never(FILE))),
            ("a never name added", true, Box::new(|e| e.add_never_name(DIR, name("n"), ACCESS_CREATE))),
            ("a never name changed", true, Box::new(|e| e.add_never_name(DIR, name("n"), ACCESS_ALL))),
            ("a never name removed", true, Box::new(|e| e.remove_never_name(DIR, name("n")))),
        ];
        let wrong: Vec<String> = changes
            .into_iter()
            .filter_map(|(what, must, change)| {
                let renewed = renews(&maps, &mut e, change);
                (renewed != must).then(|| format!("{what}: {}", if must { "not renewed" } else { "renewed" }))
            })
            .collect();
        assert!(wrong.is_empty(), "{wrong:#?}");
        assert_eq!(maps.granted_bits(S1, FILE, Scope::Exact), 0);
        assert_eq!(maps.grant_count(S2), 0);
    }

    #[test]
    fn grants_add_bits_revokes_take_them_and_sessions_end_with_all_of_them() {
        let maps = MemoryMaps::default();
        let mut e = maps.enforcer();
        e.register_session_with(S1, SessionFlags { shadow: true, allow_userns: false }).unwrap();
        e.register_session(S2).unwrap();
        assert_eq!(maps.session(S1), Some(SessionFlags { shadow: true, allow_userns: false }));
        assert_eq!(maps.state().session_levels, pincer_common::SESSION_LEVELS_ALL, "no cgroup found: every level");
        e.grant(S1, FILE, Scope::Exact, Access::Read).unwrap();
        e.grant(S1, FILE, Scope::Exact, Access::Write).unwrap();
        assert_eq!(maps.granted_bits(S1, FILE, Scope::Exact), ACCESS_READ | ACCESS_WRITE, "grants add bits");
        assert!(e.holds(S1, FILE, Access::Write).unwrap() && !e.holds(S1, FILE, Access::Delete).unwrap());
        e.revoke(S1, FILE, Scope::Exact, Access::Write).unwrap();
        assert_eq!(maps.granted_bits(S1, FILE, Scope::Exact), ACCESS_READ);
        e.grant(S1, DIR, Scope::Subtree, Access::List).unwrap();
        e.grant(S2, FILE, Scope::Exact, Access::Read).unwrap();
        let tcp = |port| HostPort { proto: Proto::Tcp, port };
        e.allow_port(tcp(53)).unwrap();
        // A port the session bound (the kernel records it).
        maps.own_ports.clone().insert(PortKey { session: S1, port: 8080, proto: Proto::Tcp.number(), family: 4, ..Default::default() }, 1).unwrap();
        assert!(e.port_reachable(S1, tcp(8080)).unwrap() && !e.port_reachable(S2, tcp(8080)).unwrap());
        assert_eq!(e.revoke_session(S1, true).unwrap(), 2, "one exact and one subtree entry");
        assert_eq!(maps.grant_count(S1), 0);
        assert!(maps.session(S1).is_some(), "kept gated while asked to");
        assert!(!e.port_reachable(S1, tcp(8080)).unwrap() && e.port_reachable(S1, tcp(53)).unwrap(), "its own port goes, listed ones stay");
        assert_eq!(maps.grant_count(S2), 1, "other sessions keep theirs");
        assert_eq!(e.revoke_session(S1, false).unwrap(), 0);
        assert_eq!(maps.session(S1), None);
    }

    #[test]
    fn a_folder_remade_in_the_users_place_takes_no_hidden_name_and_vacated_names_end_with_the_session() {
        let maps = MemoryMaps::default();
        let mut e = maps.enforcer();
        e.register_session(S1).unwrap();
        e.register_session(S2).unwrap();
        // What the kernel records for a folder the session made (record_made).
        let made = ACCESS_ALL | pincer_common::ACCESS_CREATED_BY_SESSION;
        let mut exact = maps.exact.clone();
        exact.insert(GrantKey { session: S1, ino: DIR.ino, dev: DIR.dev, _pad: 0 }, made).unwrap();
        let (envrc, notes) = (Some(OsStr::new(".envrc")), Some(OsStr::new("notes.md")));
        assert!(e.holds_for_name(S1, DIR, Access::Create, envrc).unwrap(), "a folder made at a new name takes hidden names");
        exact.insert(GrantKey { session: S1, ino: DIR.ino, dev: DIR.dev, _pad: 0 }, made | pincer_common::ACCESS_USERS_PLACE).unwrap();
        assert!(!e.holds_for_name(S1, DIR, Access::Create, envrc).unwrap(), "one remade in the user's place does not");
        assert!(e.holds_for_name(S1, DIR, Access::Create, notes).unwrap(), "visible names it takes");
        e.grant_create_name(S1, DIR, OsStr::new(".envrc")).unwrap();
        assert!(e.holds_for_name(S1, DIR, Access::Create, envrc).unwrap(), "a decided hidden name is granted there as anywhere");
        // Names the kernel recorded as vacated, for two sessions.
        let vacated = |session| VacatedKey { session, ino: DIR.ino, dev: DIR.dev, _pad: 0, name: [0; pincer_common::NEVER_NAME_LEN] };
        let mut table = maps.vacated.clone();
        table.insert(vacated(S1), 1).unwrap();
        table.insert(vacated(S2), 1).unwrap();
        // The kernel's count of them outlives the daemon's rewrite of the session.
        let mut sessions = maps.sessions.clone();
        let key = SessionKey { cgroup_id: S2 };
        let v = sessions.get(&key).unwrap().unwrap();
        sessions.insert(key, SessionValue { vacated: 1, ..v }).unwrap();
        e.register_session_with(S2, SessionFlags { shadow: true, allow_userns: false }).unwrap();
        assert_eq!(sessions.get(&key).unwrap().unwrap().vacated, 1, "registering again keeps the kernel's count");
        e.revoke_session(S1, false).unwrap();
        assert_eq!(table.keys().unwrap(), vec![vacated(S2)], "the ended session's vacated names go, the other's stay");
    }

    #[test]
    fn what_a_session_made_and_vacated_is_kept_for_the_owners_later_and_open_sessions() {
        use crate::kernel::{kept_key, Kept};
        use pincer_common::{ACCESS_CREATED_BY_SESSION as MADE, ACCESS_HOLDS_HIDDEN, ACCESS_MADE_EARLIER as EARLIER, ACCESS_USERS_PLACE};
        let maps = MemoryMaps::default();
        let mut e = maps.enforcer();
        let (later, open, stranger) = (S2, S2 + 100, S2 + 200);
        e.register_session(S1).unwrap();
        e.register_session(open).unwrap();
        e.register_session(stranger).unwrap();
        let id = |ino| ObjectId { dev: DIR.dev, ino };
        let (folder, hidden_holder, file, granted, remade) = (id(101), id(102), id(103), id(104), id(105));
        let gk = |session, o: ObjectId| GrantKey { session, ino: o.ino, dev: o.dev, _pad: 0 };
        let mut exact = maps.exact.clone();
        // What the kernel records: folders the session made, one holding a hidden entry it
        // made, a file it made, a folder it made where the user's stood, a plain grant.
        exact.insert(gk(S1, folder), ACCESS_ALL | MADE).unwrap();
        exact.insert(gk(S1, hidden_holder), ACCESS_ALL | MADE | ACCESS_HOLDS_HIDDEN).unwrap();
        exact.insert(gk(S1, file), ACCESS_READ | ACCESS_WRITE | ACCESS_DELETE | MADE).unwrap();
        exact.insert(gk(S1, remade), ACCESS_ALL | MADE | ACCESS_USERS_PLACE).unwrap();
        e.grant(S1, granted, Scope::Exact, Access::Read).unwrap();
        let mut name = [0u8; pincer_common::NEVER_NAME_LEN];
        name[..3].copy_from_slice(b"api");
        let vk = |session| VacatedKey { session, ino: DIR.ino, dev: DIR.dev, _pad: 0, name };
        maps.vacated.clone().insert(vk(S1), 77).unwrap();

        let kept = e.keep_made(S1, 1000, &[S1, open]).unwrap();
        assert_eq!(kept, Kept { marks: 3, vacated: 1, dropped: 0 }, "its three folders and the one vacated name");
        e.revoke_session(S1, false).unwrap();
        let k = kept_key(1000);
        assert_eq!(maps.sessions.get(&SessionKey { cgroup_id: k }).unwrap().map(|v| v.active), Some(0), "kept under an inactive session entry, which the kernel's forgetting of freed inodes visits");
        assert_eq!(exact.get(&gk(k, file)).unwrap(), None, "a file's entry is not kept");
        assert_eq!(exact.get(&gk(k, granted)).unwrap(), None, "a grant is not kept");
        assert_eq!(exact.get(&gk(k, hidden_holder)).unwrap(), Some(EARLIER | ACCESS_HOLDS_HIDDEN), "marks only: never an access bit, nor the mark of the session's own new folder");
        assert_eq!(exact.get(&gk(k, remade)).unwrap(), Some(ACCESS_USERS_PLACE));
        // The owner's session open meanwhile has them at once; another owner's does not.
        assert_eq!(exact.get(&gk(open, folder)).unwrap(), Some(EARLIER));
        assert_eq!(maps.vacated.get(&vk(open)).unwrap(), Some(77));
        assert_eq!(maps.sessions.get(&SessionKey { cgroup_id: open }).unwrap().unwrap().vacated, 1, "counted in the session's share");
        assert_eq!(exact.get(&gk(stranger, folder)).unwrap(), None);
        // A later session of the owner, before its processes run.
        e.register_session(later).unwrap();
        assert_eq!(e.carry_kept(later, 1000).unwrap(), Kept { marks: 3, vacated: 1, dropped: 0 });
        assert_eq!(exact.get(&gk(later, hidden_holder)).unwrap(), Some(EARLIER | ACCESS_HOLDS_HIDDEN));
        assert!(!e.holds(later, hidden_holder, Access::Read).unwrap(), "the marks grant nothing");
        e.grant(later, folder, Scope::Exact, Access::Create).unwrap();
        assert!(!e.holds_for_name(later, folder, Access::Create, Some(OsStr::new(".envrc"))).unwrap(), "a folder an earlier session made takes no hidden name freely");
        assert!(e.holds_for_name(later, folder, Access::Create, Some(OsStr::new("notes.md"))).unwrap());
        assert_eq!(maps.vacated.get(&vk(later)).unwrap(), Some(77));
        assert_eq!(e.carry_kept(later, 1000).unwrap(), Kept::default(), "given once");
        assert_eq!(e.carry_kept(stranger, 2000).unwrap(), Kept::default(), "another owner has none");
        // Ending the later session keeps them still (and adds nothing twice).
        assert_eq!(e.keep_made(later, 1000, &[]).unwrap(), Kept { marks: 3, vacated: 1, dropped: 0 });
        e.revoke_session(later, false).unwrap();
        assert_eq!(exact.keys().unwrap().iter().filter(|g| g.session == k).count(), 3);
    }

    #[test]
    fn a_create_grant_is_for_its_one_name_and_ends_with_the_session() {
        let maps = MemoryMaps::default();
        let mut e = maps.enforcer();
        e.register_session(S1).unwrap();
        e.register_session(S2).unwrap();
        let holds = |e: &Enforcer, s, n: &str| e.holds_for_name(s, DIR, Access::Create, Some(OsStr::new(n))).unwrap();
        e.grant_create_name(S1, DIR, OsStr::new("notes.md")).unwrap();
        assert!(holds(&e, S1, "notes.md"), "the name decided");
        for other in ["Cargo.toml", "go.work", ".envrc", "notes.md~", "Notes.md", "notes.m"] {
            assert!(!holds(&e, S1, other), "a name beside the decided one: {other}");
        }
        assert!(!holds(&e, S2, "notes.md"), "another session");
        assert!(!e.holds(S1, DIR, Access::Create).unwrap(), "no create on the folder itself");
        e.grant_create_name(S1, DIR, OsStr::new(".envrc")).unwrap();
        assert!(holds(&e, S1, ".envrc") && holds(&e, S1, "notes.md"), "names add up");
        for bad in ["", ".", "..", "a/b", "a\0b"] {
            assert!(matches!(e.grant_create_name(S1, DIR, OsStr::new(bad)), Err(KernelError::EntryName { .. })), "{bad:?}");
        }
        assert!(matches!(e.grant_create_name(S1, DIR, OsStr::new(&"n".repeat(256))), Err(KernelError::EntryName { .. })));
        e.grant_create_name(S1, DIR, OsStr::new(&"n".repeat(255))).unwrap();
        // The kernel drops a freed directory's grants, the mark with them: a directory
        // that reuses the number starts afresh, without the names given before.
        maps.exact.clone().remove(&GrantKey { session: S1, ino: DIR.ino, dev: DIR.dev, _pad: 0 }).unwrap();
        e.grant_create_name(S1, DIR, OsStr::new("new.md")).unwrap();
        assert!(holds(&e, S1, "new.md") && !holds(&e, S1, "notes.md"), "names of the freed directory are gone");
        e.grant_create_name(S2, DIR, OsStr::new("x")).unwrap();
        e.revoke_session(S1, false).unwrap();
        assert_eq!(maps.create_names.keys().unwrap().len(), 1, "the ended session's names go, the other's stay");
        assert!(holds(&e, S2, "x"));
    }

    #[test]
    fn a_session_is_given_a_bounded_number_of_create_names() {
        let maps = MemoryMaps::default();
        let mut e = maps.enforcer();
        for i in 0..super::super::NAMED_CREATES_PER_SESSION {
            e.grant_create_name(S1, DIR, OsStr::new(&format!("f{i}"))).unwrap();
        }
        e.grant_create_name(S1, DIR, OsStr::new("f0")).unwrap();
        assert!(matches!(e.grant_create_name(S1, DIR, OsStr::new("one-more")), Err(KernelError::NamedCreatesSpent { .. })));
        e.grant_create_name(S2, DIR, OsStr::new("one-more")).expect("another session's share");
        e.revoke_session(S1, false).unwrap();
        e.grant_create_name(S1, DIR, OsStr::new("one-more")).expect("a session's count ends with it");
    }

    #[test]
    fn ports_held_outside_at_attach_are_seeded_from_proc_net_and_freed_when_closed() {
        let maps = MemoryMaps::default();
        let mut e = maps.enforcer();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let key = PortKey { session: pincer_common::reach::PORT_OUTSIDE_SEEN, port, proto: Proto::Tcp.number(), ..Default::default() };
        let held = |maps: &MemoryMaps| maps.ports.clone().keys().unwrap().contains(&key);
        e.seed_outside_ports().unwrap();
        assert!(held(&maps), "a listening socket from before the attach holds its port");
        e.prune_outside_ports().unwrap();
        assert!(held(&maps), "still listening: still held");
        drop(listener);
        e.prune_outside_ports().unwrap();
        assert!(!held(&maps), "closed: free to sessions again");
        // A port a session bound is the session's, not held against it.
        let own = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let own_port = own.local_addr().unwrap().port();
        maps.own_ports.clone().insert(PortKey { session: S1, port: own_port, proto: Proto::Tcp.number(), family: 4, ..Default::default() }, 1).unwrap();
        e.seed_outside_ports().unwrap();
        assert!(!maps.ports.clone().keys().unwrap().iter().any(|k| k.port == own_port && k.session == pincer_common::reach::PORT_OUTSIDE_SEEN));
    }

    #[test]
    fn memory_tables_behave_as_bpf_maps() {
        let maps = MemoryMaps::default();
        let mut state = maps.state.clone();
        assert!(Table::remove(&mut state, &0).is_err(), "an array slot cannot be deleted");
        assert!(Table::insert(&mut state, 1, State::default()).is_err(), "nor written out of bounds");
        assert_eq!(Table::keys(&state).unwrap(), vec![0]);
        let mut e = maps.enforcer();
        e.remove_open(FILE).unwrap();
        maps.exact.fail_next_change();
        assert!(matches!(e.grant(S1, FILE, Scope::Exact, Access::Read), Err(KernelError::MapOp { op: "insert", map: map_names::EXACT, .. })));
        e.grant(S1, FILE, Scope::Exact, Access::Read).unwrap();
        assert!(maps.has(S1, FILE, Access::Read), "an injected failure happens once");
        assert!(matches!(e.events(), Err(KernelError::InMemory { .. })));
        assert_eq!((e.drops().unwrap(), e.pin_dir()), (0, None));
    }
}
