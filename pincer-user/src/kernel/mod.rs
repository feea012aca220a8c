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
//! The logic that edits the maps is written once against [`Table`] (module `table`):
//! over the program's BPF maps here, over [`MemoryMaps`] in host tests (this host's
//! kernel may refuse LSM programs), so the daemon's host tests run the shipped code.
//! Loading, attaching, pinning, the miss ring buffer and the cache's kernel addresses
//! are kernel-only.
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
//! - Files a session creates by `open(O_CREAT)` get an exact read/write/delete
//!   grant marked `ACCESS_CREATED_BY_SESSION`; directories, symlinks and nodes it
//!   makes get an exact grant of every access, marked the same (`fexit/vfs_mkdir`,
//!   `vfs_symlink`, `vfs_mknod`): on the object, not beneath it, so what another
//!   process later puts in a directory the session made is not the session's.
//! - A grant on a protected root (exact or subtree) does not reach the hidden
//!   entries directly in it (the home's dotfiles and dot-directories): each needs
//!   a grant on itself or inside it.
//!   Changing an object's mode, owner, times or xattrs needs `write`; making a
//!   FIFO, device node or bound Unix socket needs `create`; an fd received by
//!   `SCM_RIGHTS` or `pidfd_getfd` is checked like an open with its mode.
//! - Open paths ([`Enforcer::add_open`]) grant their bits to every session on
//!   the object and everything beneath it.
//! - Never-grantable objects ([`Enforcer::add_never`]) and names
//!   ([`Enforcer::add_never_name`], for entries that may not exist yet) deny
//!   their bits on the object and everything beneath it, whatever is granted,
//!   in shadow sessions too; such misses carry `EVENT_FLAG_NEVER`.
//! - Protection is found by walking up the dentries (at most `MAX_WALK_DEPTH`
//!   steps; running out denies). The walk crosses mount points: for opens and
//!   received fds through the file's own mount, for the inode hooks (which get
//!   no mount) through the first mount of the object's superblock. A regular
//!   file of the task's uid with several hard links whose walk meets no root is
//!   protected too (it may be linked under a root).
//! - An inode that is gone for good (no links left, its filesystem being
//!   unmounted, or an in-memory filesystem's inode being freed) takes its
//!   grants, open and never entries and root with it, so an object that reuses
//!   its number gets none of them.
//! - The walk's result is cached per directory (and a file's own entries per
//!   file) in inode storage, and used only while three stamps are unchanged: a
//!   policy generation this enforcer renews after every change that can narrow
//!   a verdict ([`Enforcer::renew_policy`]), and the kernel's `rename_lock` and
//!   `mount_lock` sequences, whose addresses it reads from `/proc/kallsyms`
//!   (without them nothing is cached). The cache only ever allows.
//! - [`SessionFlags::shadow`] sessions get every miss reported but allowed
//!   (except never-grantable ones); sessions may create user namespaces only
//!   with [`SessionFlags::allow_userns`]; `TIOCSTI`/`TIOCLINUX` are refused.
//! - Reach (module `reach`, `pincer-ebpf/src/reach.bpf.c`): a gated task
//!   reaches only its own session's processes (signals, ptrace access,
//!   `/proc/PID/` writes), SysV objects, Unix sockets and ports on this host,
//!   plus the sockets and ports [`ReachConfig`] and the `allow_*` methods list;
//!   keys and keyrings only its session created; pseudo-terminals only its
//!   controlling one or those its session made. A process outside every
//!   session cannot reach a Unix socket a session created unless listed
//!   ([`Enforcer::allow_session_server`]).

mod anchor;
mod event;
pub mod hold;
pub mod kfunc;
mod reach;
mod table;

pub use event::{Events, Hook, KernelEvent, Miss};
pub use reach::{abstract_name_key, local_routes, path_name_key, AddressWatch, HostPort, LocalRoute, Proto, Reach, ReachConfig, ReachDenial};
pub use table::{BpfTable, MemoryMaps, MemoryTable, Table};

use table::BoxTable;

use crate::access::Access;
use aya::maps::{Array, HashMap, Map, MapData, MapError, PerCpuArray, RingBuf};
use aya::pin::PinError;
use aya::programs::links::{FdLink, LinkError, PinnedLink};
use aya::programs::{Lsm, ProgramError};
use aya::{Btf, BtfError, Ebpf, EbpfError, EbpfLoader};
use pincer_common::{map_names, CreateNameKey, Generation, GrantKey, NameKey, ObjectKey, SessionKey, SessionValue, State, VacatedKey};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The `file_open` program that holds a miss until the daemon answers.
const HELD_FILE_OPEN: &str = "pincer_file_open_held";
/// How the names of the held (sleepable) program variants end.
const HELD_SUFFIX: &str = "_held";

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
    /// The object's calls to kernel functions could not be resolved.
    #[error("cannot resolve the BPF object's kernel function calls")]
    Kfunc(#[from] kfunc::KfuncError),
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
    /// The event stream was already taken (there is one reader).
    #[error("the event stream was already taken from this enforcer")]
    EventsTaken,
    /// Registering the ring buffer with tokio, or polling it, failed.
    #[error("cannot poll the event ring buffer")]
    Poll(#[source] std::io::Error),
    /// A record on the ring buffer is shorter than its kind's layout.
    #[error("ring buffer record of {len} bytes is shorter than a {kind} ({expected} bytes)")]
    ShortEvent {
        /// The record's kind (`miss_event`, `reach_event`, or `record` when even the
        /// kind does not fit).
        kind: &'static str,
        /// Bytes received.
        len: usize,
        /// Bytes expected.
        expected: usize,
    },
    /// A record on the ring buffer is of a kind this build does not know.
    #[error("ring buffer record of {len} bytes is of unknown kind {record}")]
    UnknownEvent {
        /// The record's first field (`EVENT_RECORD_*`).
        record: u32,
        /// Bytes received.
        len: usize,
    },
    /// A Unix socket name does not fit `sun_path` (or is empty or holds a NUL).
    #[error("Unix socket name {name:?} is empty, holds a NUL byte or does not fit the 107 bytes of sun_path")]
    UnixName {
        /// The name given.
        name: String,
    },
    /// This host's interface addresses could not be listed.
    #[error("cannot read this host's local routes (rtnetlink)")]
    HostAddresses(#[source] std::io::Error),
    /// The sockets of this host could not be read from `/proc/net`.
    #[error("cannot read this host's sockets from {path}")]
    HostSockets {
        /// The file that could not be read.
        path: &'static str,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// More directory names than the kernel's never patterns can tell apart.
    #[error("never pattern directory {name:?}: at most {max} different directory names may head `**/DIR/NAME` rules")]
    PatternWords {
        /// The directory name that did not fit.
        name: String,
        /// How many the kernel tells apart.
        max: u32,
    },
    /// A never-grantable name is empty, holds `/` or NUL, or is too long for the kernel key.
    #[error("never-grantable name {name:?} must be one path component of 1 to {max} bytes without `/` or NUL")]
    BadName {
        /// The name given (lossy UTF-8).
        name: String,
        /// The longest name the kernel key holds.
        max: usize,
    },
    /// A fresh policy generation could not be drawn from the kernel's random source.
    #[error("cannot read a fresh policy generation from /dev/urandom")]
    Random(#[source] std::io::Error),
    /// A kernel-only part (the miss stream) was asked of an enforcer in memory.
    #[error("an enforcer in memory has no {what}")]
    InMemory {
        /// What was asked for.
        what: &'static str,
    },
    /// A grant or revoke named no access type.
    #[error("no access bits given (expected some of ACCESS_READ..ACCESS_LIST, got {bits:#x})")]
    NoAccess {
        /// The bits given.
        bits: u32,
    },
    /// A name given `create` is empty, holds a `/` or a NUL byte, is `.` or `..`, or is
    /// longer than a filesystem allows.
    #[error("cannot grant create of the name {name:?}: not one entry's name of at most 255 bytes")]
    EntryName {
        /// The name given (lossy).
        name: String,
    },
    /// A session holds [`NAMED_CREATES_PER_SESSION`] named `create` grants already.
    #[error("session {session} holds {limit} named create grants already; no more are given")]
    NamedCreatesSpent {
        /// The session's cgroup id.
        session: u64,
        /// The bound.
        limit: u32,
    },
}

/// How the enforcer loads and where it pins.
#[derive(Debug, Clone)]
pub struct EnforcerConfig {
    /// bpffs directory holding `maps/` and `links/` (default [`DEFAULT_PIN_DIR`]).
    pub pin_dir: PathBuf,
    /// Size of the miss ring buffer in bytes, used when loading afresh.
    pub ringbuf_bytes: u32,
    /// What sessions may reach beyond their own processes and sockets.
    pub reach: ReachConfig,
    /// Attach the held variants (`file_open`, and the file creations, removals and renames
    /// within one directory) where the kernel accepts them (false: the plain ones, so a miss is
    /// always denied at once).
    pub held_programs: bool,
}

impl Default for EnforcerConfig {
    fn default() -> Self {
        Self { pin_dir: PathBuf::from(DEFAULT_PIN_DIR), ringbuf_bytes: DEFAULT_RINGBUF_BYTES, reach: ReachConfig::default(), held_programs: true }
    }
}

/// A filesystem object as the kernel keys it: kernel-internal device number and inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
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
        Ok(Self::of_metadata(&meta))
    }

    /// The object `meta` describes (from `stat`, `lstat` or an open file's `fstat`).
    pub fn of_metadata(meta: &std::fs::Metadata) -> Self {
        let dev = meta.dev();
        Self { dev: pincer_common::kernel_dev(libc::major(dev), libc::minor(dev)), ino: meta.ino() }
    }
}

impl ObjectId {
    fn key(self) -> ObjectKey {
        ObjectKey { ino: self.ino, dev: self.dev, _pad: 0 }
    }
}

/// How the kernel treats a session, stored with it in the session map.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SessionFlags {
    /// Shadow mode: misses are reported but allowed, except never-grantable
    /// ones (and terminal injection, which is always refused).
    pub shadow: bool,
    /// The session may create user namespaces (denied by default).
    pub allow_userns: bool,
}

impl SessionFlags {
    /// Enforcing, no user namespaces: what [`Enforcer::register_session`] uses.
    pub const ENFORCING: Self = Self { shadow: false, allow_userns: false };

    /// The `SESSION_FLAG_*` bits.
    pub fn bits(self) -> u32 {
        let mut bits = 0;
        if self.shadow {
            bits |= pincer_common::SESSION_FLAG_SHADOW;
        }
        if self.allow_userns {
            bits |= pincer_common::SESSION_FLAG_ALLOW_USERNS;
        }
        bits
    }
}

/// The kernel key of the entry `name` in directory `dir`.
fn name_key(dir: ObjectId, name: &OsStr) -> Result<NameKey, KernelError> {
    let bytes = name.as_bytes();
    let max = pincer_common::NEVER_NAME_LEN - 2;
    if bytes.is_empty() || bytes.len() > max || bytes.contains(&b'/') || bytes.contains(&0) {
        return Err(KernelError::BadName { name: name.to_string_lossy().into_owned(), max });
    }
    let mut key = NameKey { ino: dir.ino, dev: dir.dev, _pad: 0, name: [0; pincer_common::NEVER_NAME_LEN] };
    key.name[..bytes.len()].copy_from_slice(bytes);
    Ok(key)
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

/// The level of the cgroup v2 `cgroup_id` below `/sys/fs/cgroup` (the root is 0), found
/// by opening the cgroup by its id (`open_by_handle_at`, root only); `None` if it cannot
/// be found there (then every level is looked up).
fn cgroup_level(cgroup_id: u64) -> Option<u32> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    const CGROUP_ROOT: &str = "/sys/fs/cgroup";
    /// `struct file_handle` of a kernfs node: its 64-bit id.
    #[repr(C)]
    struct KernfsHandle {
        handle_bytes: u32,
        handle_type: i32,
        id: u64,
    }
    const FILEID_KERNFS: i32 = 0xfe;
    let mount = std::fs::File::open(CGROUP_ROOT).ok()?;
    let mut handle = KernfsHandle { handle_bytes: 8, handle_type: FILEID_KERNFS, id: cgroup_id };
    // SAFETY: open_by_handle_at with a valid handle buffer; the fd is owned below.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_by_handle_at,
            mount.as_raw_fd(),
            (&mut handle as *mut KernfsHandle).cast::<libc::c_void>(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: fd was just opened and is not owned elsewhere.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let path = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
    let rel = path.strip_prefix(CGROUP_ROOT).ok()?;
    // The directory found must be the cgroup itself.
    (std::fs::metadata(&path).ok()?.ino() == cgroup_id).then(|| rel.components().count() as u32)
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

/// The maps of the file-gating block the enforcer edits, each a [`Table`]: BPF maps in
/// the kernel, [`MemoryMaps`] on the host.
struct FileMaps {
    sessions: BoxTable<SessionKey, SessionValue>,
    roots: BoxTable<ObjectKey, u32>,
    exact: BoxTable<GrantKey, u32>,
    subtree: BoxTable<GrantKey, u32>,
    open: BoxTable<ObjectKey, u32>,
    never: BoxTable<ObjectKey, u32>,
    never_names: BoxTable<NameKey, u32>,
    never_dirs: BoxTable<ObjectKey, u32>,
    never_carry: BoxTable<NameKey, u64>,
    vacated: BoxTable<VacatedKey, u64>,
    create_names: BoxTable<CreateNameKey, u32>,
    state: BoxTable<u32, State>,
    generation: BoxTable<u32, Generation>,
}

/// A hash map of the program as a boxed [`Table`].
fn hash_table<K, V>(name: &'static str, map: Map) -> Result<BoxTable<K, V>, KernelError>
where
    K: aya::Pod + Send + Sync + 'static,
    V: aya::Pod + Send + Sync + 'static,
{
    let map: HashMap<MapData, K, V> = typed(name, map)?;
    Ok(Box::new(BpfTable::new(name, map)))
}

/// The host address trie of the program as a boxed [`Table`] keyed by prefix.
fn lpm_table(name: &'static str, map: Map) -> Result<BoxTable<pincer_common::reach::HostAddrKey, u32>, KernelError> {
    let map: aya::maps::lpm_trie::LpmTrie<MapData, [u8; 16], u32> = typed(name, map)?;
    Ok(Box::new(BpfTable::new(name, map)))
}

/// An array of the program as a boxed [`Table`] keyed by index.
fn array_table<V: aya::Pod + Send + Sync + 'static>(name: &'static str, map: Map) -> Result<BoxTable<u32, V>, KernelError> {
    let map: Array<MapData, V> = typed(name, map)?;
    Ok(Box::new(BpfTable::new(name, map)))
}

impl FileMaps {
    /// The program's maps, each got from `open` (the loaded object, or its pin).
    fn bpf(open: &mut impl FnMut(&'static str) -> Result<Map, KernelError>) -> Result<Self, KernelError> {
        Ok(Self {
            sessions: hash_table(map_names::SESSIONS, open(map_names::SESSIONS)?)?,
            roots: hash_table(map_names::ROOTS, open(map_names::ROOTS)?)?,
            exact: hash_table(map_names::EXACT, open(map_names::EXACT)?)?,
            subtree: hash_table(map_names::SUBTREE, open(map_names::SUBTREE)?)?,
            open: hash_table(map_names::OPEN, open(map_names::OPEN)?)?,
            never: hash_table(map_names::NEVER, open(map_names::NEVER)?)?,
            never_names: hash_table(map_names::NEVER_NAMES, open(map_names::NEVER_NAMES)?)?,
            never_dirs: hash_table(map_names::NEVER_DIRS, open(map_names::NEVER_DIRS)?)?,
            never_carry: hash_table(map_names::NEVER_CARRY, open(map_names::NEVER_CARRY)?)?,
            vacated: hash_table(map_names::VACATED, open(map_names::VACATED)?)?,
            create_names: hash_table(map_names::CREATE_NAMES, open(map_names::CREATE_NAMES)?)?,
            state: array_table(map_names::STATE, open(map_names::STATE)?)?,
            generation: array_table(map_names::GENERATION, open(map_names::GENERATION)?)?,
        })
    }
}

/// What only a program loaded into the kernel (or re-opened from its pins) has.
struct Kernel {
    pin_dir: PathBuf,
    drops: PerCpuArray<MapData, u64>,
    events: Option<RingBuf<MapData>>,
    hold: Array<MapData, u32>,
    _links: Vec<PinnedLink>,
    _ebpf: Option<Ebpf>,
}

/// The Pincer LSM program's maps and the logic that edits them: over the BPF maps of the
/// loaded (or re-opened) program ([`Enforcer::load`], [`Enforcer::reuse`],
/// [`Enforcer::attach_or_reuse`]), or over [`MemoryMaps`] in host tests
/// ([`MemoryMaps::enforcer`]), with the same code.
///
/// Dropping a kernel one leaves enforcement in force (links and maps are pinned); call
/// [`Enforcer::unpin`] to remove enforcement.
pub struct Enforcer {
    maps: FileMaps,
    reach: reach::ReachMaps,
    /// `None` for an enforcer in memory.
    kernel: Option<Kernel>,
    /// Inside [`Enforcer::batch`]: whether a state sync is owed at its end.
    deferred: Option<bool>,
    /// Named `create` grants inserted per session since this enforcer started
    /// ([`Enforcer::grant_create_name`]), bounded by [`NAMED_CREATES_PER_SESSION`].
    named_creates: std::collections::HashMap<u64, u32>,
}

/// Named `create` grants one session may be given (of the map's 65,536), so no session
/// fills [`map_names::CREATE_NAMES`] for the others; past them a new name is not granted.
pub const NAMED_CREATES_PER_SESSION: u32 = 8192;

/// The top bit of a [`kept_key`]: no cgroup id has it.
const KEPT_SESSIONS: u64 = 1 << 63;

/// The marks a session's exact entry `bits` leaves for the owner's later sessions
/// ([`Enforcer::keep_made`]): a folder it made at a new name is one an earlier session made
/// ([`pincer_common::ACCESS_MADE_EARLIER`], which moves as the session's own and takes no
/// hidden name freely), with whether it holds hidden entries a session made
/// ([`pincer_common::ACCESS_HOLDS_HIDDEN`]); one in the user's place stays the user's place
/// ([`pincer_common::ACCESS_USERS_PLACE`]). Never an access bit, never
/// [`pincer_common::ACCESS_CREATED_BY_SESSION`]: what an earlier session made gives a later
/// one nothing it would not have in a folder of the user's.
fn kept_marks(bits: u32) -> u32 {
    use pincer_common::{ACCESS_CREATED_BY_SESSION, ACCESS_HOLDS_HIDDEN, ACCESS_MADE_EARLIER, ACCESS_USERS_PLACE};
    let mut marks = bits & (ACCESS_HOLDS_HIDDEN | ACCESS_USERS_PLACE | ACCESS_MADE_EARLIER);
    if bits & (ACCESS_CREATED_BY_SESSION | ACCESS_USERS_PLACE) == ACCESS_CREATED_BY_SESSION {
        marks |= ACCESS_MADE_EARLIER;
    }
    marks
}

/// Objects' marks and vacated names kept for one owner from the sessions that ended
/// ([`Enforcer::keep_made`]), each: past it, an ended session's further ones are not kept.
/// Half of [`pincer_common::VACATED_PER_SESSION`], so a session given them all still has
/// half its own share of vacated names.
pub const KEPT_PER_OWNER: usize = pincer_common::VACATED_PER_SESSION as usize / 2;

/// The session-map key under which the marks and vacated names of `owner_uid`'s ended
/// sessions are kept ([`Enforcer::keep_made`]). No cgroup has this id and its entry is
/// inactive, so no process is ever in it; it is in the session map so that the kernel
/// drops its entries for an object when the object is gone for good (`forget_grants`), as
/// it does a session's, and a reused inode number inherits nothing.
pub fn kept_key(owner_uid: u32) -> u64 {
    KEPT_SESSIONS | owner_uid as u64
}

/// What [`Enforcer::keep_made`] and [`Enforcer::carry_kept`] wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Kept {
    /// Objects' marks written.
    pub marks: usize,
    /// Vacated names written.
    pub vacated: usize,
    /// Entries not written for want of room ([`KEPT_PER_OWNER`], a session's share of
    /// vacated names).
    pub dropped: usize,
}

impl std::fmt::Debug for Enforcer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Enforcer").field("pin_dir", &self.pin_dir()).finish_non_exhaustive()
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

/// The key of `name`'s named `create` grant in `dir`: one entry's name (no `/`, no NUL,
/// not `.` or `..`) shorter than [`pincer_common::CREATE_NAME_LEN`], NUL-padded.
fn create_name_key(session: u64, dir: ObjectId, name: &OsStr) -> Result<CreateNameKey, KernelError> {
    let bytes = name.as_bytes();
    let one_entry = !bytes.is_empty() && bytes != b"." && bytes != b".." && !bytes.iter().any(|&b| b == b'/' || b == 0);
    if !one_entry || bytes.len() >= pincer_common::CREATE_NAME_LEN {
        return Err(KernelError::EntryName { name: name.to_string_lossy().into_owned() });
    }
    let mut key = CreateNameKey { session, ino: dir.ino, dev: dir.dev, _pad: 0, name: [0; pincer_common::CREATE_NAME_LEN] };
    key.name[..bytes.len()].copy_from_slice(bytes);
    Ok(key)
}

/// The one slot of a single-entry array (state, generation).
fn slot<V>(table: &dyn Table<u32, V>) -> Result<V, KernelError> {
    table.get(&0)?.ok_or_else(|| KernelError::MapOp {
        op: "lookup",
        map: table.name(),
        source: Box::new(MapError::OutOfBounds { index: 0, max_entries: 0 }),
    })
}


/// What a uid's sessions may hold together of the quotas the kernel keeps per uid and
/// shares with the user's processes outside every session: half of each limit, so the
/// user keeps the other half however many sessions run. (The four counts the kernel
/// checks against a process's own resource limits take half of the caller's limit in
/// the kernel program itself.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaShares {
    /// Keys (`/proc/sys/kernel/keys/maxkeys`, 200 by default).
    pub keys: u32,
    /// Bytes of keys (`/proc/sys/kernel/keys/maxbytes`, 20,000 by default).
    pub key_bytes: u32,
    /// inotify and fanotify instances (`/proc/sys/fs/inotify/max_user_instances`, 128 by
    /// default).
    pub notify: u32,
    /// The uid's inotify watches (`/proc/sys/fs/inotify/max_user_watches`), counted with
    /// the user's own.
    pub watches: u32,
    /// The uid's pipe buffer pages (`/proc/sys/fs/pipe-user-pages-soft`, 16,384 by
    /// default), counted with the user's own; 0 when the kernel sets no limit.
    pub pipe_pages: u32,
    /// The uid's epoll watches (`/proc/sys/fs/epoll/max_user_watches`), counted with the
    /// user's own.
    pub epoll_watches: u64,
}

/// The per-uid limits [`QuotaShares`] takes half of, as the kernel's sysctls give them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaLimits {
    /// `kernel/keys/maxkeys`.
    pub maxkeys: u32,
    /// `kernel/keys/maxbytes`.
    pub maxbytes: u32,
    /// `fs/inotify/max_user_instances`.
    pub instances: u32,
    /// `fs/inotify/max_user_watches`.
    pub watches: u32,
    /// `fs/pipe-user-pages-soft` (0: no limit).
    pub pipe_pages: u32,
    /// `fs/epoll/max_user_watches`.
    pub epoll_watches: u64,
}

impl QuotaShares {
    /// The shares of this kernel's limits as they are now (the defaults where one cannot
    /// be read).
    pub fn of_kernel() -> Self {
        let limit = |path: &str, default: u32| std::fs::read_to_string(path).ok().and_then(|t| t.trim().parse::<u32>().ok()).unwrap_or(default);
        Self::of_limits(QuotaLimits {
            maxkeys: limit("/proc/sys/kernel/keys/maxkeys", 200),
            maxbytes: limit("/proc/sys/kernel/keys/maxbytes", 20_000),
            instances: limit("/proc/sys/fs/inotify/max_user_instances", 128),
            watches: limit("/proc/sys/fs/inotify/max_user_watches", 8192),
            pipe_pages: limit("/proc/sys/fs/pipe-user-pages-soft", 16_384),
            epoll_watches: std::fs::read_to_string("/proc/sys/fs/epoll/max_user_watches").ok().and_then(|t| t.trim().parse::<u64>().ok()).unwrap_or(100_000),
        })
    }

    /// Half of each limit (at least 1; a pipe limit of 0, none, stays 0).
    pub fn of_limits(l: QuotaLimits) -> Self {
        Self {
            keys: (l.maxkeys / 2).max(1),
            key_bytes: (l.maxbytes / 2).max(1),
            notify: (l.instances / 2).max(1),
            watches: (l.watches / 2).max(1),
            pipe_pages: if l.pipe_pages == 0 { 0 } else { (l.pipe_pages / 2).max(1) },
            epoll_watches: (l.epoll_watches / 2).max(1),
        }
    }
}

impl Enforcer {
    /// An enforcer over `maps` and `reach` without a kernel program.
    fn over_tables(maps: FileMaps, reach: reach::ReachMaps) -> Self {
        Self { maps, reach, kernel: None, deferred: None, named_creates: Default::default() }
    }

    /// Re-attaches to the enforcement pinned under `config.pin_dir` if it is
    /// complete (every link pinned), otherwise removes any partial leftovers
    /// and loads, attaches and pins afresh.
    pub fn attach_or_reuse(config: &EnforcerConfig) -> Result<Self, KernelError> {
        check_bpf_lsm()?;
        if Self::pinned_complete(&config.pin_dir) {
            let mut enforcer = Self::reuse(&config.pin_dir)?;
            enforcer.apply_reach(&config.reach)?;
            return Ok(enforcer);
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
        // Optional hooks may be missing on this kernel, and a hook with only a held
        // program (path_mkdir) is skipped where the kernel refuses it; maps are pinned
        // only after every hook was attached or skipped, so complete maps imply that.
        let all = || pincer_ebpf::PROGRAMS.iter().chain(&pincer_ebpf::REACH_PROGRAMS);
        let held_only = |h: &str| all().filter(|(_, hook)| *hook == h).all(|(name, _)| name.ends_with(HELD_SUFFIX));
        let hooks = all().map(|(_, hook)| *hook);
        let mut hooks: Vec<String> = hooks.filter(|h| !pincer_ebpf::OPTIONAL_HOOKS.contains(h) && !held_only(h)).map(String::from).collect();
        hooks.dedup();
        // Optional traces may be missing on this kernel.
        let traced = pincer_ebpf::REACH_FEXIT.iter().filter(|(_, f)| !pincer_ebpf::OPTIONAL_TRACES.contains(f));
        hooks.extend(traced.map(|(_, f)| reach::trace_pin_name(reach::Trace::Exit, f)));
        hooks.extend(pincer_ebpf::REACH_FENTRY.iter().map(|(_, f)| reach::trace_pin_name(reach::Trace::Entry, f)));
        hooks.iter().all(|hook| links.join(hook).exists())
            && map_names::ALL.iter().chain(&pincer_common::reach::map_names::ALL).all(|name| maps.join(name).exists())
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
        let object = kfunc::resolve_for(pincer_ebpf::PINCER_BPF, &btf)?;
        let rdonly_cast = u32::from(kfunc::has_rdonly_cast(&btf));
        let shares = QuotaShares::of_kernel();
        let mut ebpf = EbpfLoader::new()
            .btf(Some(&btf))
            .override_global("HAVE_RDONLY_CAST", &rdonly_cast, true)
            .override_global("KEYS_SHARE", &shares.keys, true)
            .override_global("KEY_BYTES_SHARE", &shares.key_bytes, true)
            .override_global("NOTIFY_SHARE", &shares.notify, true)
            .override_global("WATCHES_SHARE", &shares.watches, true)
            .override_global("PIPE_PAGES_SHARE", &shares.pipe_pages, true)
            .override_global("EPOLL_WATCHES_SHARE", &shares.epoll_watches, true)
            .map_max_entries(map_names::EVENTS, bytes)
            // aya has no type for task storage (`map_names::CREATE_KEY` and
            // `reach::map_names::NAME_SCRATCH`, the program's own scratch); they are
            // created and pinned as any map.
            .allow_unsupported_maps()
            .load(&object)
            .map_err(|e| KernelError::LoadObject(e.into()))?;

        let pin_dir = config.pin_dir.clone();
        for dir in [&pin_dir, &maps_dir(&pin_dir), &links_dir(&pin_dir)] {
            std::fs::create_dir_all(dir)
                .map_err(|source| KernelError::PinDir { op: "create", path: dir.clone(), source })?;
        }
        let result = Self::attach_all(&mut ebpf, &btf, &pin_dir, config.held_programs);
        let (links, held) = match result {
            Ok(attached) => attached,
            Err(e) => {
                let _ = remove_pin_dir(&pin_dir);
                return Err(e);
            }
        };
        for name in map_names::ALL.into_iter().chain(pincer_common::reach::map_names::ALL) {
            let map = ebpf.map(name).ok_or(KernelError::MissingMap { name })?;
            let path = maps_dir(&pin_dir).join(name);
            map.pin(&path).map_err(|source| KernelError::Pin { path, source: source.into() })?;
        }
        let mut take = |name: &'static str| ebpf.take_map(name).ok_or(KernelError::MissingMap { name });
        let maps = FileMaps::bpf(&mut take)?;
        let reach = reach::ReachMaps::bpf(&mut take)?;
        let drops = typed(map_names::DROPS, take(map_names::DROPS)?)?;
        let events = typed(map_names::EVENTS, take(map_names::EVENTS)?)?;
        let mut hold: Array<MapData, u32> = typed(map_names::HOLD, take(map_names::HOLD)?)?;
        hold.set(pincer_common::HOLD_SLOT_HELD_ATTACHED, u32::from(held), 0)
            .map_err(|e| KernelError::MapOp { op: "update", map: map_names::HOLD, source: Box::new(e) })?;
        tracing::info!(dir = %pin_dir.display(), held_file_open = held, "Pincer LSM loaded, attached and pinned");
        let kernel = Kernel { pin_dir, drops, events: Some(events), hold, _links: links, _ebpf: Some(ebpf) };
        let mut enforcer = Self { maps, reach, kernel: Some(kernel), deferred: None, named_creates: Default::default() };
        enforcer.start_cache()?;
        enforcer.apply_reach(&config.reach)?;
        Ok(enforcer)
    }

    /// Attaches every hook; also says whether `file_open` got its held variant.
    fn attach_all(ebpf: &mut Ebpf, btf: &Btf, pin_dir: &Path, try_held: bool) -> Result<(Vec<PinnedLink>, bool), KernelError> {
        let mut links = Vec::new();
        let mut held = false;
        let mut done_hooks: Vec<&'static str> = Vec::new();
        for (name, hook) in pincer_ebpf::PROGRAMS.into_iter().chain(pincer_ebpf::REACH_PROGRAMS) {
            if done_hooks.contains(&hook) || (name.ends_with(HELD_SUFFIX) && !try_held) {
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
                    if name.ends_with(HELD_SUFFIX) {
                        let missing = kfunc::missing(btf);
                        tracing::info!(program = name, ?missing, error = %source, "held {hook} refused by this kernel; its misses are denied at once");
                    }
                    tracing::debug!(program = name, hook, error = %source, "variant refused, trying the next one");
                    continue;
                }
                if name.ends_with(HELD_SUFFIX) {
                    // A hold beside a plain program on another hook: without it the
                    // misses are denied at once.
                    tracing::info!(program = name, hook, error = %source, "held {hook} refused by this kernel; its misses are denied at once");
                    done_hooks.push(hook);
                    continue;
                }
                if pincer_ebpf::OPTIONAL_HOOKS.contains(&hook) && !kernel_has_lsm_hook(btf, hook) {
                    tracing::info!(program = name, hook, "this kernel has no such LSM hook; skipped");
                    done_hooks.push(hook);
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
            held |= name == HELD_FILE_OPEN;
            if name.ends_with(HELD_SUFFIX) {
                tracing::info!(program = name, hook, "held variant attached: this hook's misses wait for the decision");
            }
        }
        links.extend(reach::attach_tracing(ebpf, btf, &links_dir(pin_dir))?);
        Ok((links, held))
    }

    /// Opens the maps and links pinned under `pin_dir` by an earlier process.
    pub fn reuse(pin_dir: &Path) -> Result<Self, KernelError> {
        let mut open = |name: &'static str| -> Result<Map, KernelError> {
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
        let maps = FileMaps::bpf(&mut open)?;
        let reach = reach::ReachMaps::bpf(&mut open)?;
        let kernel = Kernel {
            pin_dir: pin_dir.to_path_buf(),
            drops: typed(map_names::DROPS, open(map_names::DROPS)?)?,
            events: Some(typed(map_names::EVENTS, open(map_names::EVENTS)?)?),
            hold: typed(map_names::HOLD, open(map_names::HOLD)?)?,
            _links: links,
            _ebpf: None,
        };
        Ok(Self { maps, reach, kernel: Some(kernel), deferred: None, named_creates: Default::default() })
    }

    /// Whether the attached `file_open` holds misses (the kernel accepted its held
    /// variant); `false` for an enforcer without a kernel program.
    pub fn holds_misses(&self) -> bool {
        let Some(k) = &self.kernel else { return false };
        k.hold.get(&pincer_common::HOLD_SLOT_HELD_ATTACHED, 0).is_ok_and(|v| v == 1)
    }

    /// Names the hold anchor (its thread-group id) and how many threads of one session may
    /// wait in a hold at once; a `tgid` or `per_session` of 0 stops holding misses: each is
    /// then denied at once as on a kernel without the held `file_open`.
    pub fn set_hold_anchor(&mut self, tgid: u32, per_session: u32) -> Result<(), KernelError> {
        let Some(k) = &mut self.kernel else { return Ok(()) };
        let set = |hold: &mut aya::maps::Array<MapData, u32>, slot, value| {
            hold.set(slot, value, 0).map_err(|e| KernelError::MapOp { op: "update", map: map_names::HOLD, source: Box::new(e) })
        };
        // The share first: an anchor is never named without a bound.
        set(&mut k.hold, pincer_common::HOLD_SLOT_PER_SESSION, per_session)?;
        set(&mut k.hold, pincer_common::HOLD_SLOT_ANCHOR, tgid)
    }

    /// The bpffs directory this enforcer is pinned under (`None` for one in memory).
    pub fn pin_dir(&self) -> Option<&Path> {
        self.kernel.as_ref().map(|k| k.pin_dir.as_path())
    }

    /// Gates the cgroup `cgroup_id` and every cgroup beneath it (enforcing, no
    /// user namespaces).
    pub fn register_session(&mut self, cgroup_id: u64) -> Result<(), KernelError> {
        self.register_session_with(cgroup_id, SessionFlags::ENFORCING)
    }

    /// Gates the cgroup `cgroup_id` and every cgroup beneath it with `flags`
    /// (registering again replaces the flags).
    pub fn register_session_with(&mut self, cgroup_id: u64, flags: SessionFlags) -> Result<(), KernelError> {
        // The hooks look up only the levels in the state: this one goes in first.
        let level_bit = match cgroup_level(cgroup_id) {
            Some(level) if level < pincer_common::MAX_CGROUP_LEVELS => 1u32 << level,
            _ => pincer_common::SESSION_LEVELS_ALL,
        };
        let mut state = self.current_state()?;
        if state.session_levels | level_bit != state.session_levels {
            state.session_levels |= level_bit;
            self.write_state(state)?;
        }
        // Ports listed at attach whose sockets are gone are free to sessions again.
        if let Err(e) = self.prune_outside_ports() {
            tracing::warn!(error = %e, "cannot prune the ports held outside sessions at attach; they stay held");
        }
        let key = SessionKey { cgroup_id };
        // The kernel's counts (the session's held threads, its vacated names) stay as they are.
        let kept = self.maps.sessions.get(&key)?.unwrap_or_default();
        self.maps.sessions.insert(key, SessionValue { active: 1, flags: flags.bits(), ..kept })
    }

    /// Stops gating a session (its grants stay until [`Enforcer::revoke_session`]).
    pub fn remove_session(&mut self, cgroup_id: u64) -> Result<(), KernelError> {
        self.maps.sessions.remove(&SessionKey { cgroup_id })
    }

    /// Keeps, before session `cgroup_id` of `owner_uid` ends ([`Enforcer::revoke_session`]),
    /// what it made and vacated, for the owner's later sessions ([`Enforcer::carry_kept`])
    /// and for the owner's sessions open now (`open`, given it at once): the marks of its
    /// folders' exact entries ([`kept_marks`]: its new folders, those holding hidden entries
    /// it made first, and its folders in the user's place) and the names of the user's folders it removed
    /// or moved away. Without them a folder one session filled with hidden configuration
    /// would be a folder of the user's to the next, which could move it to the name of the
    /// user's folder the first one removed. Bounded by [`KEPT_PER_OWNER`] for each kind.
    pub fn keep_made(&mut self, cgroup_id: u64, owner_uid: u32, open: &[u64]) -> Result<Kept, KernelError> {
        let kept = kept_key(owner_uid);
        let key = SessionKey { cgroup_id: kept };
        if self.maps.sessions.get(&key)?.is_none() {
            self.maps.sessions.insert(key, SessionValue::default())?;
        }
        let mut done = Kept::default();
        let exact = self.maps.exact.keys()?;
        let mut marks = exact.iter().filter(|k| k.session == kept).count();
        // Its folders (the kernel gives a folder the session makes `create` with the mark,
        // a file it makes read, write and delete; marks alone were carried from the ones
        // kept), those holding hidden entries first.
        let mut folders = Vec::new();
        for k in exact.iter().filter(|k| k.session == cgroup_id) {
            let Some(bits) = self.maps.exact.get(k)? else { continue };
            let made = bits & (pincer_common::ACCESS_CREATED_BY_SESSION | pincer_common::ACCESS_USERS_PLACE | pincer_common::ACCESS_MADE_EARLIER) != 0;
            let folder = bits & (pincer_common::ACCESS_CREATE | pincer_common::ACCESS_HOLDS_HIDDEN | pincer_common::ACCESS_USERS_PLACE | pincer_common::ACCESS_MADE_EARLIER) != 0 || bits & pincer_common::ACCESS_ALL == 0;
            if made && folder {
                folders.push((*k, bits));
            }
        }
        folders.sort_by_key(|(_, bits)| bits & pincer_common::ACCESS_HOLDS_HIDDEN == 0);
        for (k, bits) in folders {
            let to = GrantKey { session: kept, ..k };
            let old = self.maps.exact.get(&to)?;
            if old.is_none() && marks >= KEPT_PER_OWNER {
                done.dropped += 1;
                continue;
            }
            marks += usize::from(old.is_none());
            self.maps.exact.insert(to, old.unwrap_or(0) | kept_marks(bits))?;
            done.marks += 1;
        }
        let vacated = self.maps.vacated.keys()?;
        let mut names = vacated.iter().filter(|k| k.session == kept).count();
        for k in vacated.iter().filter(|k| k.session == cgroup_id) {
            let Some(left) = self.maps.vacated.get(k)? else { continue };
            let to = VacatedKey { session: kept, ..*k };
            let old = self.maps.vacated.get(&to)?;
            if old.is_none() && names >= KEPT_PER_OWNER {
                done.dropped += 1;
                continue;
            }
            names += usize::from(old.is_none());
            self.maps.vacated.insert(to, left)?;
            done.vacated += 1;
        }
        for &other in open.iter().filter(|&&o| o != cgroup_id) {
            self.carry_kept(other, owner_uid)?;
        }
        Ok(done)
    }

    /// Gives session `cgroup_id` what `owner_uid`'s ended sessions made and vacated
    /// ([`Enforcer::keep_made`]), before any of its processes runs: their folders are not
    /// the user's to it, and the names they vacated are the user's places. The vacated
    /// names count in the session's share of them (`VACATED_PER_SESSION`).
    pub fn carry_kept(&mut self, cgroup_id: u64, owner_uid: u32) -> Result<Kept, KernelError> {
        let kept = kept_key(owner_uid);
        let mut done = Kept::default();
        // An owner none of whose sessions has ended yet has no record: the maps are not walked.
        if self.maps.sessions.get(&SessionKey { cgroup_id: kept })?.is_none() {
            return Ok(done);
        }
        let skey = SessionKey { cgroup_id };
        let Some(value) = self.maps.sessions.get(&skey)? else { return Ok(done) };
        for k in self.maps.exact.keys()?.into_iter().filter(|k| k.session == kept) {
            let Some(marks) = self.maps.exact.get(&k)? else { continue };
            let to = GrantKey { session: cgroup_id, ..k };
            let old = self.maps.exact.get(&to)?.unwrap_or(0);
            if old | marks != old {
                self.maps.exact.insert(to, old | marks)?;
                done.marks += 1;
            }
        }
        for k in self.maps.vacated.keys()?.into_iter().filter(|k| k.session == kept) {
            let Some(left) = self.maps.vacated.get(&k)? else { continue };
            let to = VacatedKey { session: cgroup_id, ..k };
            if self.maps.vacated.get(&to)?.is_some() {
                continue;
            }
            if value.vacated + done.vacated as u32 >= pincer_common::VACATED_PER_SESSION {
                done.dropped += 1;
                continue;
            }
            self.maps.vacated.insert(to, left)?;
            done.vacated += 1;
        }
        if done.vacated > 0 {
            // The kernel's counts as they are now (its threads may have vacated names meanwhile).
            let now = self.maps.sessions.get(&skey)?.unwrap_or(value);
            self.maps.sessions.insert(skey, SessionValue { vacated: now.vacated + done.vacated as u32, ..now })?;
        }
        if done.marks + done.vacated > 0 {
            self.renew_policy()?;
        }
        Ok(done)
    }

    /// Ends a session: deletes every exact and subtree grant it holds, including
    /// those recorded for objects it created, and the ports it bound, and stops
    /// gating it. Leaves its cgroup gated if `keep_gated` (e.g. while the worker
    /// is being killed).
    pub fn revoke_session(&mut self, cgroup_id: u64, keep_gated: bool) -> Result<usize, KernelError> {
        let mut removed = 0;
        for map in [&mut self.maps.exact, &mut self.maps.subtree] {
            for key in map.keys()?.into_iter().filter(|k| k.session == cgroup_id) {
                map.remove(&key)?;
                removed += 1;
            }
        }
        // Removed after the grants: until then no new folder of the session's takes
        // hidden entries at the names it vacated.
        for key in self.maps.vacated.keys()?.into_iter().filter(|k| k.session == cgroup_id) {
            self.maps.vacated.remove(&key)?;
        }
        for key in self.maps.create_names.keys()?.into_iter().filter(|k| k.session == cgroup_id) {
            self.maps.create_names.remove(&key)?;
        }
        self.named_creates.remove(&cgroup_id);
        // A cached file verdict holds exact grants too: any removal renews.
        if removed > 0 {
            self.renew_policy()?;
        }
        self.reach.revoke_session(cgroup_id)?;
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
        self.maps.roots.insert(id.key(), 1)?;
        self.renew_policy()
    }

    /// Stops protecting the directory `id`.
    pub fn remove_root_id(&mut self, id: ObjectId) -> Result<(), KernelError> {
        self.maps.roots.remove(&id.key())?;
        self.renew_policy()
    }

    /// Makes `id` an open path: every session holds `bits` (`ACCESS_*`, replacing
    /// earlier ones) on it and, for a directory, on everything beneath it
    /// (files with several hard links only through their own entry).
    pub fn add_open(&mut self, id: ObjectId, bits: u32) -> Result<(), KernelError> {
        let bits = bits & pincer_common::ACCESS_ALL;
        if bits == 0 {
            return Err(KernelError::NoAccess { bits });
        }
        self.maps.open.insert(id.key(), bits)?;
        self.renew_policy()
    }

    /// Removes the open path `id`.
    pub fn remove_open(&mut self, id: ObjectId) -> Result<(), KernelError> {
        self.maps.open.remove(&id.key())?;
        self.renew_policy()
    }

    /// Makes `bits` (`ACCESS_*`, replacing earlier ones) never grantable on `id`
    /// and everything beneath it, for every session and in every mode;
    /// [`NEVER_PINNED`](pincer_common::NEVER_PINNED) in `bits` pins `id` itself
    /// (no removal or rename in a session), and
    /// [`NEVER_HIDDEN`](pincer_common::NEVER_HIDDEN) makes the walk treat it as a
    /// hidden entry (a grant above it does not reach it).
    pub fn add_never(&mut self, id: ObjectId, bits: u32) -> Result<(), KernelError> {
        let bits = bits & (pincer_common::ACCESS_ALL | pincer_common::NEVER_PINNED | pincer_common::NEVER_HIDDEN);
        if bits == 0 {
            return Err(KernelError::NoAccess { bits });
        }
        self.maps.never.insert(id.key(), bits)?;
        self.sync_state()
    }

    /// Runs `f` with the state sync of every never-entry change it makes deferred to its end,
    /// done once (also when `f` fails): a session's seeds, hundreds of entries, read the
    /// maps' keys once instead of once per entry. Until the sync the kernel may not read the
    /// new entries yet; a session's own entries go in before it is gated.
    pub fn batch<T, E: From<KernelError>>(&mut self, f: impl FnOnce(&mut Self) -> Result<T, E>) -> Result<T, E> {
        let outer = self.deferred.replace(false);
        let result = f(self);
        let owed = std::mem::replace(&mut self.deferred, outer) == Some(true);
        if owed {
            self.sync_state()?;
        }
        result
    }

    /// Removes the never-grantable entry of `id`.
    pub fn remove_never(&mut self, id: ObjectId) -> Result<(), KernelError> {
        self.maps.never.remove(&id.key())?;
        self.sync_state()
    }

    /// Makes `bits` (`ACCESS_*`, replacing earlier ones) never grantable on the
    /// entry `name` of directory `dir` and everything beneath it, whether it
    /// exists yet or not (so it cannot be created either when `bits` holds
    /// `ACCESS_CREATE`); [`NEVER_RESERVED`](pincer_common::NEVER_RESERVED) in `bits`
    /// reserves the name (see [`Enforcer::add_never_carry`]). `dir` may be a template
    /// (`dev` [`NEVER_CARRY_DEV`](pincer_common::NEVER_CARRY_DEV), `ino` its id): the
    /// entry is then what a directory made under a reserved name gets.
    pub fn add_never_name(&mut self, dir: ObjectId, name: &OsStr, bits: u32) -> Result<(), KernelError> {
        let bits = bits & (pincer_common::ACCESS_ALL | pincer_common::NEVER_RESERVED);
        if bits == 0 {
            return Err(KernelError::NoAccess { bits });
        }
        let key = name_key(dir, name)?;
        // The directory is marked first: the kernel reads names only in marked ones.
        // A template is no directory: the kernel copies its names when it makes one.
        if dir.dev != pincer_common::NEVER_CARRY_DEV && self.maps.never_names.get(&key)?.is_none() {
            let held = self.maps.never_dirs.get(&dir.key())?.unwrap_or(0);
            self.maps.never_dirs.insert(dir.key(), held.saturating_add(1))?;
        }
        self.maps.never_names.insert(key, bits)?;
        self.sync_state()
    }

    /// Lets a `mkdir` make the reserved name `name` of `dir` (an entry with
    /// [`NEVER_RESERVED`](pincer_common::NEVER_RESERVED), in a directory or a template):
    /// the kernel gives the new directory, whoever makes it, the names of template
    /// `template` (its entries under [`NEVER_CARRY_DEV`](pincer_common::NEVER_CARRY_DEV),
    /// and their own carries) before anything can be made in it. Every other way to
    /// make the name stays refused.
    pub fn add_never_carry(&mut self, dir: ObjectId, name: &OsStr, template: u64) -> Result<(), KernelError> {
        let key = name_key(dir, name)?;
        self.maps.never_carry.insert(key, template)?;
        self.renew_policy()
    }

    /// Removes the carry of the reserved name `name` in `dir` (a `mkdir` of it is then
    /// refused like every other way to make it).
    pub fn remove_never_carry(&mut self, dir: ObjectId, name: &OsStr) -> Result<(), KernelError> {
        self.maps.never_carry.remove(&name_key(dir, name)?)?;
        self.renew_policy()
    }

    /// Removes the never-grantable entry of `name` in `dir`.
    pub fn remove_never_name(&mut self, dir: ObjectId, name: &OsStr) -> Result<(), KernelError> {
        let key = name_key(dir, name)?;
        if self.maps.never_names.get(&key)?.is_none() {
            return Ok(());
        }
        self.maps.never_names.remove(&key)?;
        // The directory's mark goes with its last name, unless the kernel gave it a
        // template's names (those it keeps: they are not userspace's to count).
        let carried = pincer_common::NEVER_DIR_CARRIED;
        match self.maps.never_dirs.get(&dir.key())? {
            Some(held) if held & !carried > 1 => self.maps.never_dirs.insert(dir.key(), held - 1)?,
            Some(held) if held & carried != 0 => self.maps.never_dirs.insert(dir.key(), carried)?,
            Some(_) => self.maps.never_dirs.remove(&dir.key())?,
            None => {}
        }
        self.sync_state()
    }

    /// Makes `bits` (`ACCESS_*`, added to earlier ones) never grantable on every entry
    /// named `name`, and everything beneath it, in any directory or, with `dir`, in any
    /// directory named `dir`: a `**/name` or `**/dir/name` rule, which the kernel
    /// matches on the names an access actually reaches, whenever they appeared. Inside a
    /// directory the session made the rule does not apply (what a session made is its
    /// own to fill: `git init` and `git clone` in a session write `.git/hooks`). A
    /// directory named `dir` is pinned (not removed or renamed in a session), so the
    /// session cannot rename it away, fill it and rename it back.
    pub fn add_never_pattern(&mut self, dir: Option<&OsStr>, name: &OsStr, bits: u32) -> Result<(), KernelError> {
        use pincer_common::{NEVER_PAIR_DEV, NEVER_PATTERN_DEV, NEVER_PATTERN_MASK_SHIFT, NEVER_PATTERN_WORDS, NEVER_PATTERN_WORD_SHIFT};
        let bits = bits & pincer_common::ACCESS_ALL;
        if bits == 0 {
            return Err(KernelError::NoAccess { bits });
        }
        let entry_key = name_key(ObjectId { dev: NEVER_PATTERN_DEV, ino: 0 }, name)?;
        let entry = self.maps.never_names.get(&entry_key)?.unwrap_or(0);
        // The state first: from then on checks that need these bits read names (no
        // entry matches yet).
        let mut state = self.current_state()?;
        if state.never_patterns & bits != bits {
            state.never_patterns |= bits | pincer_common::ACCESS_DELETE;
            self.write_state(state)?;
        }
        let Some(dir) = dir else {
            self.maps.never_names.insert(entry_key, entry | bits)?;
            return self.sync_state();
        };
        let dir_key = name_key(ObjectId { dev: NEVER_PATTERN_DEV, ino: 0 }, dir)?;
        let dir_value = self.maps.never_names.get(&dir_key)?.unwrap_or(0);
        let word = match (dir_value >> NEVER_PATTERN_WORD_SHIFT) & 0xff {
            0 => {
                let used = self
                    .maps
                    .never_names
                    .keys()?
                    .into_iter()
                    .filter(|k| k.dev == NEVER_PATTERN_DEV)
                    .filter_map(|k| self.maps.never_names.get(&k).ok().flatten())
                    .map(|v| (v >> NEVER_PATTERN_WORD_SHIFT) & 0xff)
                    .max()
                    .unwrap_or(0);
                if used >= NEVER_PATTERN_WORDS {
                    return Err(KernelError::PatternWords { name: dir.to_string_lossy().into_owned(), max: NEVER_PATTERN_WORDS });
                }
                used + 1
            }
            w => w,
        };
        // The pair's bits, then the entry's mask, then the directory's word: each entry
        // the kernel reads names one that is already there.
        let pair_key = name_key(ObjectId { dev: NEVER_PAIR_DEV, ino: u64::from(word) }, name)?;
        let pair = self.maps.never_names.get(&pair_key)?.unwrap_or(0);
        self.maps.never_names.insert(pair_key, pair | bits)?;
        let entry = self.maps.never_names.get(&entry_key)?.unwrap_or(0);
        self.maps.never_names.insert(entry_key, entry | 1 << (NEVER_PATTERN_MASK_SHIFT + word - 1))?;
        let dir_value = self.maps.never_names.get(&dir_key)?.unwrap_or(0);
        let pinned = pincer_common::NEVER_PATTERN_PINNED;
        self.maps.never_names.insert(dir_key, dir_value | word << NEVER_PATTERN_WORD_SHIFT | pinned)?;
        self.sync_state()
    }

    /// Tells the kernel how many never entries exist (with none, its walk may
    /// stop once a grant covers the access).
    fn sync_state(&mut self) -> Result<(), KernelError> {
        if let Some(owed) = self.deferred.as_mut() {
            *owed = true;
            return Ok(());
        }
        let count = |r: usize| u32::try_from(r).unwrap_or(u32::MAX);
        let objects = self.maps.never.keys()?.len();
        let names = self.maps.never_names.keys()?;
        // The access bits some never pattern has: checks that need none of them skip
        // the kernel's pattern walk.
        let mut patterns = 0;
        for k in names.iter().filter(|k| k.dev == pincer_common::NEVER_PATTERN_DEV || k.dev == pincer_common::NEVER_PAIR_DEV) {
            let v = self.maps.never_names.get(k)?.unwrap_or(0);
            patterns |= v & pincer_common::ACCESS_ALL;
            if k.dev == pincer_common::NEVER_PATTERN_DEV && v & pincer_common::NEVER_PATTERN_PINNED != 0 {
                patterns |= pincer_common::ACCESS_DELETE;
            }
        }
        let state = State {
            never_objects: count(objects),
            never_names: count(names.len()),
            never_patterns: patterns,
            ..self.current_state()?
        };
        self.write_state(state)?;
        self.renew_policy()
    }

    /// Turns the walk cache on: writes the kernel addresses of the two
    /// sequences it is checked against and a first policy generation. Without
    /// the addresses (`/proc/kallsyms` unreadable or without data symbols) the
    /// cache stays off and every check walks the live maps.
    fn start_cache(&mut self) -> Result<(), KernelError> {
        let symbols = std::fs::read_to_string(KALLSYMS).unwrap_or_default();
        let rename_seq_addr = kallsyms_address(&symbols, "rename_lock").unwrap_or(0);
        let mount_seq_addr = kallsyms_address(&symbols, "mount_lock").unwrap_or(0);
        if rename_seq_addr == 0 || mount_seq_addr == 0 {
            tracing::warn!(file = KALLSYMS, "rename_lock or mount_lock not listed: the kernel walk cache stays off");
        }
        let generation = Generation { policy: fresh_generation()?, rename_seq_addr, mount_seq_addr };
        self.maps.generation.insert(0, generation)
    }

    /// Writes a fresh policy generation: every walk result the kernel cached
    /// before is no longer used. Called after every change that can narrow
    /// what the walk allows (grants added need none: the cache only allows).
    pub fn renew_policy(&mut self) -> Result<(), KernelError> {
        let current = slot(&*self.maps.generation)?;
        let generation = Generation { policy: fresh_generation()?, ..current };
        self.maps.generation.insert(0, generation)
    }

    /// The cgroup levels the hooks look up for a session (bit `L`: level `L`;
    /// [`pincer_common::SESSION_LEVELS_ALL`]: every level; 0: none registered yet).
    pub fn session_levels(&self) -> Result<u32, KernelError> {
        Ok(self.current_state()?.session_levels)
    }

    /// The state map's entry.
    fn current_state(&self) -> Result<State, KernelError> {
        slot(&*self.maps.state)
    }

    fn write_state(&mut self, state: State) -> Result<(), KernelError> {
        self.maps.state.insert(0, state)
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
        let map = self.grant_map(scope);
        let old = map.get(&key)?.unwrap_or(0);
        map.insert(key, old | bits)
    }

    /// Gives a session `create` of the single name `name` in directory `dir`: the name's
    /// entry in [`map_names::CREATE_NAMES`] and the directory's exact grant marked
    /// `ACCESS_NAMED_CREATE`. What a decision on a new entry gives: `notes.md` there, not
    /// `Cargo.toml`, `go.work` or `.envrc` beside it. Where the directory's grant did not
    /// carry the mark yet (its first name, or a directory whose inode was freed, which
    /// took the mark with it, and reused), names left of the session there are dropped.
    pub fn grant_create_name(&mut self, session: u64, dir: ObjectId, name: &OsStr) -> Result<(), KernelError> {
        let key = create_name_key(session, dir, name)?;
        let grant = GrantKey { session, ino: dir.ino, dev: dir.dev, _pad: 0 };
        let old = self.maps.exact.get(&grant)?.unwrap_or(0);
        if old & pincer_common::ACCESS_NAMED_CREATE == 0 {
            let stale = self.maps.create_names.keys()?.into_iter().filter(|k| k.session == session && k.ino == dir.ino && k.dev == dir.dev);
            for k in stale.collect::<Vec<_>>() {
                self.maps.create_names.remove(&k)?;
            }
        }
        if self.maps.create_names.get(&key)?.is_none() {
            let count = self.named_creates.entry(session).or_default();
            if *count >= NAMED_CREATES_PER_SESSION {
                return Err(KernelError::NamedCreatesSpent { session, limit: NAMED_CREATES_PER_SESSION });
            }
            self.maps.create_names.insert(key, 1)?;
            *count += 1;
        }
        self.maps.exact.insert(grant, old | pincer_common::ACCESS_NAMED_CREATE)
    }

    /// Gives a session every access on the directory `id` and beneath it as its own place
    /// (its scratch): a subtree grant marked `ACCESS_CREATED_BY_SESSION`, inside which the
    /// kernel's never patterns do not apply (`git init` there writes `.git/config`).
    pub fn grant_own_place(&mut self, session: u64, id: ObjectId) -> Result<(), KernelError> {
        let key = GrantKey { session, ino: id.ino, dev: id.dev, _pad: 0 };
        let map = self.grant_map(Scope::Subtree);
        let old = map.get(&key)?.unwrap_or(0);
        map.insert(key, old | pincer_common::ACCESS_ALL | pincer_common::ACCESS_CREATED_BY_SESSION)
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
        let map = self.grant_map(scope);
        let Some(old) = map.get(&key)? else { return Ok(()) };
        let left = old & !bits;
        if left & pincer_common::ACCESS_ALL == 0 {
            map.remove(&key)?;
        } else {
            map.insert(key, left)?;
        }
        // Cached walks hold subtree grants, and cached file verdicts exact ones.
        self.renew_policy()
    }

    /// The access bits a session holds on `id` in one grant map (0 if none).
    pub fn granted_bits(&self, session: u64, id: ObjectId, scope: Scope) -> Result<u32, KernelError> {
        let key = GrantKey { session, ino: id.ino, dev: id.dev, _pad: 0 };
        let map = match scope {
            Scope::Exact => &self.maps.exact,
            Scope::Subtree => &self.maps.subtree,
        };
        Ok(map.get(&key)?.unwrap_or(0))
    }

    /// Whether a session holds an exact grant of `access` on `id` (the grant map is the
    /// one owner of grants; the daemon asks it).
    pub fn holds(&self, session: u64, id: ObjectId, access: Access) -> Result<bool, KernelError> {
        Ok(self.granted_bits(session, id, Scope::Exact)? & access_bit(access) != 0)
    }

    /// [`Enforcer::holds`] as the kernel checks a new entry: `create` of `name` (the new
    /// entry's, given for `create`) is held by a grant of that name
    /// ([`Enforcer::grant_create_name`]), or by `create` on the folder for a visible name;
    /// a hidden name (`hidden_name`) takes a grant on the folder only in a folder the
    /// session made at a new name (not the user's place: `ACCESS_USERS_PLACE`).
    pub fn holds_for_name(&self, session: u64, id: ObjectId, access: Access, name: Option<&OsStr>) -> Result<bool, KernelError> {
        let bits = self.granted_bits(session, id, Scope::Exact)?;
        let (Access::Create, Some(name)) = (access, name) else { return Ok(bits & access_bit(access) != 0) };
        let own_new_folder = bits & pincer_common::ACCESS_CREATED_BY_SESSION != 0 && bits & pincer_common::ACCESS_USERS_PLACE == 0;
        let hidden = name.as_bytes().first() == Some(&b'.');
        if bits & pincer_common::ACCESS_CREATE != 0 && (!hidden || own_new_folder) {
            return Ok(true);
        }
        if bits & pincer_common::ACCESS_NAMED_CREATE == 0 {
            return Ok(false);
        }
        Ok(match create_name_key(session, id, name) {
            Ok(key) => self.maps.create_names.get(&key)?.is_some(),
            Err(_) => false,
        })
    }

    fn grant_map(&mut self, scope: Scope) -> &mut BoxTable<GrantKey, u32> {
        match scope {
            Scope::Exact => &mut self.maps.exact,
            Scope::Subtree => &mut self.maps.subtree,
        }
    }

    /// Misses dropped because the ring buffer was full, summed over CPUs (0 in memory,
    /// where there is no ring buffer).
    pub fn drops(&self) -> Result<u64, KernelError> {
        let Some(kernel) = &self.kernel else { return Ok(0) };
        let values = kernel
            .drops
            .get(&0, 0)
            .map_err(|source| KernelError::MapOp { op: "lookup", map: map_names::DROPS, source: source.into() })?;
        Ok(values.iter().sum())
    }

    /// Takes the stream of the kernel's events, file misses and reach denials (one
    /// reader per enforcer). Must be called inside a tokio runtime.
    pub fn events(&mut self) -> Result<Events, KernelError> {
        let kernel = self.kernel.as_mut().ok_or(KernelError::InMemory { what: "event stream" })?;
        let ring = kernel.events.take().ok_or(KernelError::EventsTaken)?;
        Events::new(ring)
    }

    /// Removes the pins: enforcement ends once this enforcer is dropped (nothing to do
    /// for one in memory).
    pub fn unpin(self) -> Result<(), KernelError> {
        let Some(dir) = self.pin_dir().map(Path::to_path_buf) else { return Ok(()) };
        drop(self);
        remove_pin_dir(&dir)
    }
}

/// The kernel's symbol table (addresses are shown to root only).
const KALLSYMS: &str = "/proc/kallsyms";

/// The address of data symbol `name` in a `/proc/kallsyms` text, if listed
/// with a non-zero address (zeros mean the addresses are hidden).
fn kallsyms_address(symbols: &str, name: &str) -> Option<u64> {
    symbols.lines().find_map(|line| {
        let mut fields = line.split_ascii_whitespace();
        let (addr, kind, sym) = (fields.next()?, fields.next()?, fields.next()?);
        let data = matches!(kind, "D" | "d" | "B" | "b");
        let addr = u64::from_str_radix(addr, 16).ok()?;
        (sym == name && data && addr != 0 && fields.next().is_none()).then_some(addr)
    })
}

/// A policy generation no earlier one equals (64 random bits), so writers in
/// several processes need not agree on a counter.
fn fresh_generation() -> Result<u64, KernelError> {
    use std::io::Read;
    let mut bytes = [0u8; 8];
    std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes)).map_err(KernelError::Random)?;
    Ok(u64::from_ne_bytes(bytes))
}

/// Whether the kernel's BTF has the BPF LSM attach point of `hook`.
fn kernel_has_lsm_hook(btf: &Btf, hook: &str) -> bool {
    btf.id_by_type_name_kind(&format!("bpf_lsm_{hook}"), aya_obj::btf::BtfKind::Func).is_ok()
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
    fn a_uids_sessions_get_half_of_each_per_uid_limit_and_no_share_of_no_limit() {
        let l = QuotaLimits { maxkeys: 200, maxbytes: 20_000, instances: 128, watches: 8192, pipe_pages: 16_384, epoll_watches: 200_000 };
        assert_eq!(QuotaShares::of_limits(l), QuotaShares { keys: 100, key_bytes: 10_000, notify: 64, watches: 4096, pipe_pages: 8192, epoll_watches: 100_000 });
        let tiny = QuotaShares::of_limits(QuotaLimits { maxkeys: 1, maxbytes: 1, instances: 1, watches: 1, pipe_pages: 0, epoll_watches: 1 });
        assert_eq!((tiny.keys, tiny.watches), (1, 1), "a share is never 0, which would refuse every charge");
        assert_eq!(tiny.pipe_pages, 0, "no pipe limit in the kernel: the program checks none");
    }

    #[test]
    fn kallsyms_addresses_are_read_for_data_symbols_only() {
        let text = "ffffffff81000000 T _text\n\
                    ffffffff82a0b4c0 D rename_lock\n\
                    ffffffff82a0b500 d mount_lock\n\
                    ffffffffc0000000 t mount_lock\t[some_module]\n";
        assert_eq!(kallsyms_address(text, "rename_lock"), Some(0xffff_ffff_82a0_b4c0));
        assert_eq!(kallsyms_address(text, "mount_lock"), Some(0xffff_ffff_82a0_b500));
        assert_eq!(kallsyms_address(text, "_text"), None, "text symbols are not data");
        let hidden = "0000000000000000 D rename_lock\n";
        assert_eq!(kallsyms_address(hidden, "rename_lock"), None, "hidden addresses read as unknown");
    }

    #[test]
    fn lsm_list_without_bpf_names_the_fix() {
        let err = lsm_list_has_bpf("lockdown,capability,landlock,yama,apparmor\n").unwrap_err();
        assert!(matches!(err, KernelError::BpfLsmDisabled { ref found } if found.ends_with("apparmor")));
        assert!(err.to_string().contains("lsm="), "error tells how to enable BPF LSM: {err}");
        assert!(lsm_list_has_bpf("lockdown,capability,bpf\n").is_ok());
        assert!(lsm_list_has_bpf("bpfx,capability").is_err());
    }

    #[test]
    fn never_names_must_be_one_short_component() {
        let dir = ObjectId { dev: 1, ino: 2 };
        let key = name_key(dir, OsStr::new("config")).unwrap();
        assert_eq!(&key.name[..7], b"config\0");
        assert!(key.name[6..].iter().all(|b| *b == 0));
        for bad in ["", "a/b", "a\0b"] {
            assert!(matches!(name_key(dir, OsStr::new(bad)), Err(KernelError::BadName { .. })), "{bad:?}");
        }
        let long = "x".repeat(pincer_common::NEVER_NAME_LEN - 1);
        let err = name_key(dir, OsStr::new(&long)).unwrap_err();
        assert!(err.to_string().contains("62 bytes"), "{err}");
        assert!(name_key(dir, OsStr::new(&long[..62])).is_ok());
    }

    #[test]
    fn session_flags_map_to_kernel_bits() {
        assert_eq!(SessionFlags::ENFORCING.bits(), 0);
        let all = SessionFlags { shadow: true, allow_userns: true };
        assert_eq!(all.bits(), pincer_common::SESSION_FLAG_SHADOW | pincer_common::SESSION_FLAG_ALLOW_USERNS);
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
