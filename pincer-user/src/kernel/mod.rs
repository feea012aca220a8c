//! The kernel side of Pincer in userspace: loads the BPF LSM program from
//! `pincer-ebpf` with aya, pins it, and edits its session, root and grant maps.
//!
//! Enforcement lives in the kernel and is pinned under a bpffs directory
//! (default [`DEFAULT_PIN_DIR`]): if this process dies the hooks and grants stay
//! in force (fail closed), and [`Enforcer::attach_or_reuse`] in a new process
//! re-opens the pinned maps instead of loading a second copy.
//!
//! Needs root, bpffs mounted at `/sys/fs/bpf`, and a kernel with BPF LSM active
//! (`bpf` in `/sys/kernel/security/lsm`, Linux 5.11 or later).
//!
//! Rules the kernel applies (see `pincer-ebpf/src/pincer.bpf.c`):
//! - open: `read` (exec too) or `list` for directories, plus `write`; create,
//!   mkdir, symlink: `create` on the parent; unlink, rmdir: `delete` on the
//!   object; rename: `delete` on the object, `create` on the new parent and
//!   `delete` on a replaced target; link: `create` on the new parent and `read`
//!   on the object; truncate: `write`.
//! - An exact grant covers the object itself; a subtree grant covers the
//!   directory and everything beneath it. Files with more than one hard link
//!   need an exact grant (a subtree grant would otherwise open a secret linked
//!   into a granted directory).
//! - Files a session creates by `open(O_CREAT)` get an exact read/write grant
//!   marked `ACCESS_CREATED_BY_SESSION`; directories it makes do not.
//! - Protection is found by walking up the dentries of the object's own
//!   filesystem (at most `MAX_WALK_DEPTH` levels; running out denies), so a
//!   root protects nothing on other filesystems mounted beneath it, and a file
//!   hard-linked from outside every root is not protected through that name.

mod event;

pub use event::{Hook, Miss, Misses};

use crate::access::Access;
use aya::maps::{HashMap, Map, MapData, MapError, PerCpuArray, RingBuf};
use aya::pin::PinError;
use aya::programs::links::{FdLink, LinkError, PinnedLink};
use aya::programs::{Lsm, ProgramError};
use aya::{Btf, BtfError, Ebpf, EbpfError, EbpfLoader};
use pincer_common::{map_names, GrantKey, RootKey, SessionKey, SessionValue};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Where the program's maps and links are pinned unless configured otherwise.
pub const DEFAULT_PIN_DIR: &str = "/sys/fs/bpf/pincer";
/// Where the kernel lists its active LSMs.
pub const LSM_LIST: &str = "/sys/kernel/security/lsm";
/// Default size of the miss ring buffer in bytes (a power of two, page multiple).
pub const DEFAULT_RINGBUF_BYTES: u32 = 256 * 1024;

/// Errors of the kernel enforcer; each names the operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// The LSM list could not be read (securityfs not mounted, or no LSM support).
    #[error("cannot read {path} to check for BPF LSM (is securityfs mounted at /sys/kernel/security?)")]
    ReadLsmList {
        /// The file read.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// BPF LSM is not active in this kernel.
    #[error(
        "BPF LSM is not active (active LSMs: {found:?}); boot with `lsm=<current list>,bpf` on the kernel \
         command line (e.g. add it to GRUB_CMDLINE_LINUX and run update-grub) on a kernel built with CONFIG_BPF_LSM=y"
    )]
    BpfLsmDisabled {
        /// The LSM list the kernel reported.
        found: String,
    },
    /// The kernel's BTF could not be read (needed to attach LSM programs).
    #[error("cannot read kernel BTF from /sys/kernel/btf/vmlinux (needs CONFIG_DEBUG_INFO_BTF=y)")]
    Btf(#[source] Box<BtfError>),
    /// The BPF object could not be loaded (maps created, relocations applied).
    #[error("cannot load the Pincer BPF object")]
    LoadObject(#[source] Box<EbpfError>),
    /// The BPF object lacks a program it should hold.
    #[error("BPF object has no program {name}")]
    MissingProgram {
        /// Program name.
        name: &'static str,
    },
    /// A program of the object could not be loaded (verifier) or attached.
    #[error("cannot {op} BPF program {name} (hook {hook})")]
    Program {
        /// `load` or `attach`.
        op: &'static str,
        /// Program name.
        name: &'static str,
        /// LSM hook name.
        hook: &'static str,
        /// The underlying error.
        #[source]
        source: Box<ProgramError>,
    },
    /// A link could not be converted, pinned or opened from its pin.
    #[error("cannot {op} link {path}")]
    Link {
        /// What was done.
        op: &'static str,
        /// The pin path.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: Box<LinkError>,
    },
    /// Pinning an object on bpffs failed.
    #[error("cannot pin {path} (is bpffs mounted at /sys/fs/bpf?)")]
    Pin {
        /// The pin path.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: Box<PinError>,
    },
    /// Creating, listing or removing the pin directory failed.
    #[error("cannot {op} pin directory {path}")]
    PinDir {
        /// What was done.
        op: &'static str,
        /// The directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The BPF object lacks a map it should hold.
    #[error("BPF object has no map {name}")]
    MissingMap {
        /// Map name.
        name: &'static str,
    },
    /// A map could not be opened (from the object or its pin) or has the wrong type.
    #[error("cannot open map {name}")]
    OpenMap {
        /// Map name.
        name: &'static str,
        /// The underlying error.
        #[source]
        source: Box<MapError>,
    },
    /// A map lookup, insert or delete failed.
    #[error("cannot {op} in map {map}")]
    MapOp {
        /// What was done (`insert`, `remove`, `lookup`, `iterate`).
        op: &'static str,
        /// Map name.
        map: &'static str,
        /// The underlying error.
        #[source]
        source: Box<MapError>,
    },
    /// A path given as a root or grant target could not be examined.
    #[error("cannot stat {path}")]
    Stat {
        /// The path.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The ring buffer size is not a power of two multiple of the page size.
    #[error("ring buffer size {bytes} is not a power of two of at least 4096 bytes")]
    RingBufSize {
        /// The requested size.
        bytes: u32,
    },
    /// The miss stream was already taken (there is one reader).
    #[error("the miss stream was already taken from this enforcer")]
    MissesTaken,
    /// Registering the ring buffer with tokio, or polling it, failed.
    #[error("cannot poll the miss ring buffer")]
    Poll(#[source] std::io::Error),
    /// A record on the ring buffer is shorter than a miss event.
    #[error("ring buffer record of {len} bytes is shorter than a miss event ({expected} bytes)")]
    ShortEvent {
        /// Bytes received.
        len: usize,
        /// Bytes expected.
        expected: usize,
    },
    /// A grant or revoke named no access type.
    #[error("no access bits given (expected some of ACCESS_READ..ACCESS_LIST, got {bits:#x})")]
    NoAccess {
        /// The bits given.
        bits: u32,
    },
}

/// How the enforcer loads and where it pins.
#[derive(Debug, Clone)]
pub struct EnforcerConfig {
    /// bpffs directory holding `maps/` and `links/` (default [`DEFAULT_PIN_DIR`]).
    pub pin_dir: PathBuf,
    /// Size of the miss ring buffer in bytes, used when loading afresh.
    pub ringbuf_bytes: u32,
}

impl Default for EnforcerConfig {
    fn default() -> Self {
        Self { pin_dir: PathBuf::from(DEFAULT_PIN_DIR), ringbuf_bytes: DEFAULT_RINGBUF_BYTES }
    }
}

/// A filesystem object as the kernel keys it: kernel-internal device number and inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ObjectId {
    /// Kernel-internal `dev_t` (`major << 20 | minor`).
    pub dev: u32,
    /// Inode number.
    pub ino: u64,
}

impl ObjectId {
    /// The object a path names now (symlinks followed).
    pub fn of_path(path: &Path) -> Result<Self, KernelError> {
        let meta = std::fs::metadata(path).map_err(|source| KernelError::Stat { path: path.to_path_buf(), source })?;
        let dev = meta.dev();
        Ok(Self { dev: pincer_common::kernel_dev(libc::major(dev), libc::minor(dev)), ino: meta.ino() })
    }
}

/// Which grant map a grant goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// The object itself only (for a directory: `list` it, `create` direct children).
    Exact,
    /// The directory and everything beneath it.
    Subtree,
}

/// The id of a cgroup v2 (the inode number of its directory), as sessions are keyed.
pub fn cgroup_id(cgroup_dir: &Path) -> Result<u64, KernelError> {
    std::fs::metadata(cgroup_dir)
        .map(|m| m.ino())
        .map_err(|source| KernelError::Stat { path: cgroup_dir.to_path_buf(), source })
}

/// The kernel access bit of an access type.
pub fn access_bit(access: Access) -> u32 {
    match access {
        Access::Read => pincer_common::ACCESS_READ,
        Access::Write => pincer_common::ACCESS_WRITE,
        Access::Create => pincer_common::ACCESS_CREATE,
        Access::Delete => pincer_common::ACCESS_DELETE,
        Access::List => pincer_common::ACCESS_LIST,
    }
}

/// The access types set in a bit mask.
pub fn access_types(bits: u32) -> Vec<Access> {
    Access::ALL.into_iter().filter(|a| bits & access_bit(*a) != 0).collect()
}

/// Fails unless `bpf` is among the kernel's active LSMs.
pub fn check_bpf_lsm() -> Result<(), KernelError> {
    let found = std::fs::read_to_string(LSM_LIST)
        .map_err(|source| KernelError::ReadLsmList { path: PathBuf::from(LSM_LIST), source })?;
    lsm_list_has_bpf(&found)
}

/// Fails unless the comma-separated LSM list `found` names `bpf`.
pub fn lsm_list_has_bpf(found: &str) -> Result<(), KernelError> {
    if found.trim().split(',').any(|lsm| lsm == "bpf") {
        Ok(())
    } else {
        Err(KernelError::BpfLsmDisabled { found: found.trim().to_string() })
    }
}

/// The loaded (or re-opened) Pincer LSM program and its maps.
///
/// Dropping it leaves enforcement in force (links and maps are pinned); call
/// [`Enforcer::unpin`] to remove enforcement.
pub struct Enforcer {
    pin_dir: PathBuf,
    sessions: HashMap<MapData, SessionKey, SessionValue>,
    roots: HashMap<MapData, RootKey, u32>,
    exact: HashMap<MapData, GrantKey, u32>,
    subtree: HashMap<MapData, GrantKey, u32>,
    drops: PerCpuArray<MapData, u64>,
    events: Option<RingBuf<MapData>>,
    _links: Vec<PinnedLink>,
    _ebpf: Option<Ebpf>,
}

impl std::fmt::Debug for Enforcer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Enforcer").field("pin_dir", &self.pin_dir).finish_non_exhaustive()
    }
}

fn maps_dir(pin_dir: &Path) -> PathBuf {
    pin_dir.join("maps")
}

fn links_dir(pin_dir: &Path) -> PathBuf {
    pin_dir.join("links")
}

fn typed<T>(name: &'static str, map: Map) -> Result<T, KernelError>
where
    T: TryFrom<Map, Error = MapError>,
{
    T::try_from(map).map_err(|source| KernelError::OpenMap { name, source: source.into() })
}

impl Enforcer {
    /// Re-attaches to the enforcement pinned under `config.pin_dir` if it is
    /// complete (every link pinned), otherwise removes any partial leftovers
    /// and loads, attaches and pins afresh.
    pub fn attach_or_reuse(config: &EnforcerConfig) -> Result<Self, KernelError> {
        check_bpf_lsm()?;
        if Self::pinned_complete(&config.pin_dir) {
            return Self::reuse(&config.pin_dir);
        }
        if config.pin_dir.exists() {
            tracing::warn!(dir = %config.pin_dir.display(), "removing incomplete pinned enforcement");
            remove_pin_dir(&config.pin_dir)?;
        }
        Self::load(config)
    }

    /// Whether a complete pinned enforcement exists under `pin_dir`.
    pub fn pinned_complete(pin_dir: &Path) -> bool {
        let links = links_dir(pin_dir);
        let maps = maps_dir(pin_dir);
        let hooks = pincer_ebpf::PROGRAMS.iter().map(|(_, hook)| *hook);
        let mut hooks: Vec<&str> = hooks.collect();
        hooks.dedup();
        hooks.iter().all(|hook| links.join(hook).exists())
            && map_names::ALL.iter().all(|name| maps.join(name).exists())
    }

    /// Loads the program, attaches every hook and pins maps and links under
    /// `config.pin_dir` (which must not exist yet).
    pub fn load(config: &EnforcerConfig) -> Result<Self, KernelError> {
        check_bpf_lsm()?;
        let bytes = config.ringbuf_bytes;
        if bytes < 4096 || !bytes.is_power_of_two() {
            return Err(KernelError::RingBufSize { bytes });
        }
        let btf = Btf::from_sys_fs().map_err(|e| KernelError::Btf(e.into()))?;
        let mut ebpf = EbpfLoader::new()
            .btf(Some(&btf))
            .map_max_entries(map_names::EVENTS, bytes)
            .load(pincer_ebpf::PINCER_BPF)
            .map_err(|e| KernelError::LoadObject(e.into()))?;

        let pin_dir = config.pin_dir.clone();
        for dir in [&pin_dir, &maps_dir(&pin_dir), &links_dir(&pin_dir)] {
            std::fs::create_dir_all(dir)
                .map_err(|source| KernelError::PinDir { op: "create", path: dir.clone(), source })?;
        }
        let result = Self::attach_all(&mut ebpf, &btf, &pin_dir);
        let links = match result {
            Ok(links) => links,
            Err(e) => {
                let _ = remove_pin_dir(&pin_dir);
                return Err(e);
            }
        };
        for name in map_names::ALL {
            let map = ebpf.map(name).ok_or(KernelError::MissingMap { name })?;
            let path = maps_dir(&pin_dir).join(name);
            map.pin(&path).map_err(|source| KernelError::Pin { path, source: source.into() })?;
        }
        let take = |ebpf: &mut Ebpf, name: &'static str| ebpf.take_map(name).ok_or(KernelError::MissingMap { name });
        let sessions = typed(map_names::SESSIONS, take(&mut ebpf, map_names::SESSIONS)?)?;
        let roots = typed(map_names::ROOTS, take(&mut ebpf, map_names::ROOTS)?)?;
        let exact = typed(map_names::EXACT, take(&mut ebpf, map_names::EXACT)?)?;
        let subtree = typed(map_names::SUBTREE, take(&mut ebpf, map_names::SUBTREE)?)?;
        let drops = typed(map_names::DROPS, take(&mut ebpf, map_names::DROPS)?)?;
        let events = typed(map_names::EVENTS, take(&mut ebpf, map_names::EVENTS)?)?;
        tracing::info!(dir = %pin_dir.display(), "Pincer LSM loaded, attached and pinned");
        Ok(Self {
            pin_dir,
            sessions,
            roots,
            exact,
            subtree,
            drops,
            events: Some(events),
            _links: links,
            _ebpf: Some(ebpf),
        })
    }

    fn attach_all(ebpf: &mut Ebpf, btf: &Btf, pin_dir: &Path) -> Result<Vec<PinnedLink>, KernelError> {
        let mut links = Vec::new();
        let mut done_hooks: Vec<&'static str> = Vec::new();
        for (name, hook) in pincer_ebpf::PROGRAMS {
            if done_hooks.contains(&hook) {
                continue;
            }
            let program = ebpf.program_mut(name).ok_or(KernelError::MissingProgram { name })?;
            let lsm: &mut Lsm = program
                .try_into()
                .map_err(|source: ProgramError| KernelError::Program { op: "convert", name, hook, source: source.into() })?;
            if let Err(source) = lsm.load(hook, btf) {
                // A hook with two signature variants: the next entry is the
                // fallback for the same hook.
                let has_fallback = pincer_ebpf::PROGRAMS.iter().filter(|(_, h)| *h == hook).count() > 1
                    && pincer_ebpf::PROGRAMS.iter().position(|(n, _)| *n == name)
                        < pincer_ebpf::PROGRAMS.iter().rposition(|(_, h)| *h == hook);
                if has_fallback {
                    tracing::debug!(program = name, hook, error = %source, "variant refused, trying the next one");
                    continue;
                }
                return Err(KernelError::Program { op: "load", name, hook, source: source.into() });
            }
            let link_id = lsm.attach().map_err(|source| KernelError::Program { op: "attach", name, hook, source: source.into() })?;
            let link = lsm.take_link(link_id).map_err(|source| KernelError::Program { op: "take link of", name, hook, source: source.into() })?;
            let path = links_dir(pin_dir).join(hook);
            let fd_link = FdLink::from(link);
            let pinned = fd_link.pin(&path).map_err(|source| KernelError::Pin { path, source: source.into() })?;
            links.push(pinned);
            done_hooks.push(hook);
        }
        Ok(links)
    }

    /// Opens the maps and links pinned under `pin_dir` by an earlier process.
    pub fn reuse(pin_dir: &Path) -> Result<Self, KernelError> {
        let open = |name: &'static str| -> Result<Map, KernelError> {
            let data = MapData::from_pin(maps_dir(pin_dir).join(name))
                .map_err(|source| KernelError::OpenMap { name, source: source.into() })?;
            Map::from_map_data(data).map_err(|source| KernelError::OpenMap { name, source: source.into() })
        };
        let mut links = Vec::new();
        let dir = links_dir(pin_dir);
        let entries =
            std::fs::read_dir(&dir).map_err(|source| KernelError::PinDir { op: "list", path: dir.clone(), source })?;
        for entry in entries {
            let path = entry.map_err(|source| KernelError::PinDir { op: "list", path: dir.clone(), source })?.path();
            let link = PinnedLink::from_pin(&path)
                .map_err(|source| KernelError::Link { op: "open pinned", path: path.clone(), source: source.into() })?;
            links.push(link);
        }
        tracing::info!(dir = %pin_dir.display(), links = links.len(), "re-attached to pinned Pincer LSM");
        Ok(Self {
            pin_dir: pin_dir.to_path_buf(),
            sessions: typed(map_names::SESSIONS, open(map_names::SESSIONS)?)?,
            roots: typed(map_names::ROOTS, open(map_names::ROOTS)?)?,
            exact: typed(map_names::EXACT, open(map_names::EXACT)?)?,
            subtree: typed(map_names::SUBTREE, open(map_names::SUBTREE)?)?,
            drops: typed(map_names::DROPS, open(map_names::DROPS)?)?,
            events: Some(typed(map_names::EVENTS, open(map_names::EVENTS)?)?),
            _links: links,
            _ebpf: None,
        })
    }

    /// The bpffs directory this enforcer is pinned under.
    pub fn pin_dir(&self) -> &Path {
        &self.pin_dir
    }

    /// Gates the cgroup `cgroup_id` and every cgroup beneath it.
    pub fn register_session(&mut self, cgroup_id: u64) -> Result<(), KernelError> {
        let value = SessionValue { active: 1, _pad: 0 };
        self.sessions
            .insert(SessionKey { cgroup_id }, value, 0)
            .map_err(|source| KernelError::MapOp { op: "insert", map: map_names::SESSIONS, source: source.into() })
    }

    /// Stops gating a session (its grants stay until [`Enforcer::revoke_session`]).
    pub fn remove_session(&mut self, cgroup_id: u64) -> Result<(), KernelError> {
        remove_if_present(&mut self.sessions, &SessionKey { cgroup_id }, map_names::SESSIONS)
    }

    /// Ends a session: deletes every exact and subtree grant it holds, including
    /// those recorded for objects it created, and stops gating it. Leaves its
    /// cgroup gated if `keep_gated` (e.g. while the worker is being killed).
    pub fn revoke_session(&mut self, cgroup_id: u64, keep_gated: bool) -> Result<usize, KernelError> {
        let mut removed = 0;
        for (map, name) in [(&mut self.exact, map_names::EXACT), (&mut self.subtree, map_names::SUBTREE)] {
            let keys = map
                .keys()
                .collect::<Result<Vec<GrantKey>, MapError>>()
                .map_err(|source| KernelError::MapOp { op: "iterate", map: name, source: source.into() })?;
            for key in keys.into_iter().filter(|k| k.session == cgroup_id) {
                remove_if_present(map, &key, name)?;
                removed += 1;
            }
        }
        if !keep_gated {
            self.remove_session(cgroup_id)?;
        }
        Ok(removed)
    }

    /// Protects the directory at `path` (and everything beneath it, on the same filesystem).
    pub fn add_root(&mut self, path: &Path) -> Result<ObjectId, KernelError> {
        let id = ObjectId::of_path(path)?;
        self.add_root_id(id)?;
        Ok(id)
    }

    /// Protects the directory `id`.
    pub fn add_root_id(&mut self, id: ObjectId) -> Result<(), KernelError> {
        self.roots
            .insert(RootKey { ino: id.ino, dev: id.dev, _pad: 0 }, 1, 0)
            .map_err(|source| KernelError::MapOp { op: "insert", map: map_names::ROOTS, source: source.into() })
    }

    /// Stops protecting the directory `id`.
    pub fn remove_root_id(&mut self, id: ObjectId) -> Result<(), KernelError> {
        remove_if_present(&mut self.roots, &RootKey { ino: id.ino, dev: id.dev, _pad: 0 }, map_names::ROOTS)
    }

    /// Adds one access type to a session's grant on `id` (takes effect on the next access).
    pub fn grant(&mut self, session: u64, id: ObjectId, scope: Scope, access: Access) -> Result<(), KernelError> {
        self.grant_bits(session, id, scope, access_bit(access))
    }

    /// Adds `bits` (`ACCESS_*`) to a session's grant on `id`.
    pub fn grant_bits(&mut self, session: u64, id: ObjectId, scope: Scope, bits: u32) -> Result<(), KernelError> {
        let bits = bits & pincer_common::ACCESS_ALL;
        if bits == 0 {
            return Err(KernelError::NoAccess { bits });
        }
        let key = GrantKey { session, ino: id.ino, dev: id.dev, _pad: 0 };
        let (map, name) = self.grant_map(scope);
        let old = lookup(map, &key, name)?.unwrap_or(0);
        map.insert(key, old | bits, 0).map_err(|source| KernelError::MapOp { op: "insert", map: name, source: source.into() })
    }

    /// Removes one access type from a session's grant on `id` (takes effect on the next access).
    pub fn revoke(&mut self, session: u64, id: ObjectId, scope: Scope, access: Access) -> Result<(), KernelError> {
        self.revoke_bits(session, id, scope, access_bit(access))
    }

    /// Removes `bits` from a session's grant on `id`; the entry goes when none is left.
    pub fn revoke_bits(&mut self, session: u64, id: ObjectId, scope: Scope, bits: u32) -> Result<(), KernelError> {
        if bits & pincer_common::ACCESS_ALL == 0 {
            return Err(KernelError::NoAccess { bits });
        }
        let key = GrantKey { session, ino: id.ino, dev: id.dev, _pad: 0 };
        let (map, name) = self.grant_map(scope);
        let Some(old) = lookup(map, &key, name)? else { return Ok(()) };
        let left = old & !bits;
        if left & pincer_common::ACCESS_ALL == 0 {
            remove_if_present(map, &key, name)
        } else {
            map.insert(key, left, 0).map_err(|source| KernelError::MapOp { op: "insert", map: name, source: source.into() })
        }
    }

    /// The access bits a session holds on `id` in one grant map (0 if none).
    pub fn granted_bits(&self, session: u64, id: ObjectId, scope: Scope) -> Result<u32, KernelError> {
        let key = GrantKey { session, ino: id.ino, dev: id.dev, _pad: 0 };
        let (map, name) = match scope {
            Scope::Exact => (&self.exact, map_names::EXACT),
            Scope::Subtree => (&self.subtree, map_names::SUBTREE),
        };
        Ok(lookup(map, &key, name)?.unwrap_or(0))
    }

    fn grant_map(&mut self, scope: Scope) -> (&mut HashMap<MapData, GrantKey, u32>, &'static str) {
        match scope {
            Scope::Exact => (&mut self.exact, map_names::EXACT),
            Scope::Subtree => (&mut self.subtree, map_names::SUBTREE),
        }
    }

    /// Misses dropped because the ring buffer was full, summed over CPUs.
    pub fn drops(&self) -> Result<u64, KernelError> {
        let values = self
            .drops
            .get(&0, 0)
            .map_err(|source| KernelError::MapOp { op: "lookup", map: map_names::DROPS, source: source.into() })?;
        Ok(values.iter().sum())
    }

    /// Takes the stream of misses (one reader per enforcer). Must be called
    /// inside a tokio runtime.
    pub fn misses(&mut self) -> Result<Misses, KernelError> {
        let ring = self.events.take().ok_or(KernelError::MissesTaken)?;
        Misses::new(ring)
    }

    /// Removes the pins: enforcement ends once this enforcer is dropped.
    pub fn unpin(self) -> Result<(), KernelError> {
        let dir = self.pin_dir.clone();
        drop(self);
        remove_pin_dir(&dir)
    }
}

fn lookup<K: aya::Pod>(map: &HashMap<MapData, K, u32>, key: &K, name: &'static str) -> Result<Option<u32>, KernelError> {
    match map.get(key, 0) {
        Ok(v) => Ok(Some(v)),
        Err(MapError::KeyNotFound) => Ok(None),
        Err(source) => Err(KernelError::MapOp { op: "lookup", map: name, source: source.into() }),
    }
}

fn remove_if_present<K: aya::Pod, V: aya::Pod>(
    map: &mut HashMap<MapData, K, V>,
    key: &K,
    name: &'static str,
) -> Result<(), KernelError> {
    match map.remove(key) {
        Ok(()) | Err(MapError::KeyNotFound) => Ok(()),
        Err(MapError::SyscallError(e)) if e.io_error.raw_os_error() == Some(libc::ENOENT) => Ok(()),
        Err(source) => Err(KernelError::MapOp { op: "remove", map: name, source: source.into() }),
    }
}

/// Removes a pin directory (unpinning its maps and links).
pub fn remove_pin_dir(dir: &Path) -> Result<(), KernelError> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(KernelError::PinDir { op: "remove", path: dir.to_path_buf(), source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lsm_list_without_bpf_names_the_fix() {
        let err = lsm_list_has_bpf("lockdown,capability,landlock,yama,apparmor\n").unwrap_err();
        assert!(matches!(err, KernelError::BpfLsmDisabled { ref found } if found.ends_with("apparmor")));
        assert!(err.to_string().contains("lsm="), "error tells how to enable BPF LSM: {err}");
        assert!(lsm_list_has_bpf("lockdown,capability,bpf\n").is_ok());
        assert!(lsm_list_has_bpf("bpfx,capability").is_err());
    }

    #[test]
    fn object_id_uses_kernel_dev_encoding() {
        let id = ObjectId::of_path(Path::new("/")).unwrap();
        let meta = std::fs::metadata("/").unwrap();
        assert_eq!(id.dev >> 20, libc::major(meta.dev()));
        assert_eq!(id.dev & 0xfffff, libc::minor(meta.dev()));
        assert_eq!(id.ino, meta.ino());
    }
}
