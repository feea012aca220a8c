//! `#[repr(C)]` layouts shared with the BPF LSM program in `pincer-ebpf`.
//!
//! This crate is the single source of truth for everything that crosses the
//! kernel/userspace boundary: map keys and values, access bits and the miss
//! event record. The C header `pincer-ebpf/src/pincer.h` mirrors it; both sides
//! assert sizes and offsets (`const` asserts here, `_Static_assert` there), so
//! drift fails the build. No `bool`, no enums and no implicit padding: every
//! hole is an explicit `_pad` field.
//!
//! Device numbers are the kernel's *internal* `dev_t` (`super_block.s_dev`,
//! `major << 20 | minor`), not the userspace `st_dev` encoding: use
//! [`kernel_dev`] to convert.
#![no_std]

pub mod reach;

/// Access bit: open a file for reading (exec counts as read).
pub const ACCESS_READ: u32 = 1 << 0;
/// Access bit: open a file for writing, or truncate it.
pub const ACCESS_WRITE: u32 = 1 << 1;
/// Access bit: create an entry (file, directory, symlink, hard link) in a directory.
pub const ACCESS_CREATE: u32 = 1 << 2;
/// Access bit: unlink a file, remove a directory, or rename an entry away.
pub const ACCESS_DELETE: u32 = 1 << 3;
/// Access bit: read a directory's entries (open a directory for reading).
pub const ACCESS_LIST: u32 = 1 << 4;
/// Marker bit set by the kernel on exact grants it recorded for an object the
/// session created itself under a `create` grant (it carries read and write).
pub const ACCESS_CREATED_BY_SESSION: u32 = 1 << 31;
/// Every access bit a grant may carry.
pub const ACCESS_ALL: u32 = ACCESS_READ | ACCESS_WRITE | ACCESS_CREATE | ACCESS_DELETE | ACCESS_LIST;

/// Hook id in [`MissEvent::hook`]: `file_open`.
pub const HOOK_FILE_OPEN: u32 = 1;
/// Hook id: `inode_create`.
pub const HOOK_INODE_CREATE: u32 = 2;
/// Hook id: `inode_mkdir`.
pub const HOOK_INODE_MKDIR: u32 = 3;
/// Hook id: `inode_symlink`.
pub const HOOK_INODE_SYMLINK: u32 = 4;
/// Hook id: `inode_link` (the new name's directory lacks `create`).
pub const HOOK_INODE_LINK: u32 = 5;
/// Hook id: `inode_link` (the linked object lacks `read`).
pub const HOOK_INODE_LINK_SOURCE: u32 = 6;
/// Hook id: `inode_unlink`.
pub const HOOK_INODE_UNLINK: u32 = 7;
/// Hook id: `inode_rmdir`.
pub const HOOK_INODE_RMDIR: u32 = 8;
/// Hook id: `inode_rename` (the moved object lacks `delete`).
pub const HOOK_INODE_RENAME_FROM: u32 = 9;
/// Hook id: `inode_rename` (the new directory lacks `create`).
pub const HOOK_INODE_RENAME_TO: u32 = 10;
/// Hook id: `inode_rename` (an existing target that would be replaced lacks `delete`).
pub const HOOK_INODE_RENAME_OVER: u32 = 11;
/// Hook id: `inode_setattr` with a size change (truncate).
pub const HOOK_INODE_SETATTR: u32 = 12;

/// Event flag: the walk up the dentries ran out of its bound before it found
/// a protected root or the filesystem root, so the access was denied.
pub const EVENT_FLAG_WALK_EXHAUSTED: u32 = 1 << 0;
/// Event flag: [`MissEvent::path`] was cut short (more components than fit).
pub const EVENT_FLAG_PATH_TRUNCATED: u32 = 1 << 1;
/// Event flag: the object has several hard links, so only an exact grant
/// (not a subtree grant) could have allowed it.
pub const EVENT_FLAG_MULTI_LINK: u32 = 1 << 2;

/// How many `d_parent` steps the kernel walk takes at most (object included).
pub const MAX_WALK_DEPTH: u32 = 32;
/// How many cgroup ancestor levels are checked for a registered session.
pub const MAX_CGROUP_LEVELS: u32 = 16;
/// Bytes of [`MissEvent::name`].
pub const EVENT_NAME_LEN: usize = 256;
/// Bytes of [`MissEvent::path`].
pub const EVENT_PATH_LEN: usize = 1024;

/// Map names, written once (the C program defines maps with these names).
pub mod map_names {
    /// `HASH` [`SessionKey`](super::SessionKey) → [`SessionValue`](super::SessionValue).
    pub const SESSIONS: &str = "pincer_sessions";
    /// `HASH` [`RootKey`](super::RootKey) → `u32` (non-zero).
    pub const ROOTS: &str = "pincer_roots";
    /// `HASH` [`GrantKey`](super::GrantKey) → `u32` access bits (exact object).
    pub const EXACT: &str = "pincer_exact";
    /// `HASH` [`GrantKey`](super::GrantKey) → `u32` access bits (directory subtree).
    pub const SUBTREE: &str = "pincer_subtree";
    /// `RINGBUF` of [`MissEvent`](super::MissEvent).
    pub const EVENTS: &str = "pincer_events";
    /// `PERCPU_ARRAY` of one `u64`: events dropped because the ring buffer was full.
    pub const DROPS: &str = "pincer_drops";
    /// Every map, in a fixed order.
    pub const ALL: [&str; 6] = [SESSIONS, ROOTS, EXACT, SUBTREE, EVENTS, DROPS];
}

/// Converts a userspace `(major, minor)` device pair to the kernel's internal
/// `dev_t` that the BPF program sees in `super_block.s_dev`.
pub const fn kernel_dev(major: u32, minor: u32) -> u32 {
    (major << 20) | (minor & 0xfffff)
}

/// Key of the session map: a cgroup v2 id (the cgroup directory's inode number).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SessionKey {
    /// The cgroup id.
    pub cgroup_id: u64,
}

/// Value of the session map.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SessionValue {
    /// Non-zero while the session is active.
    pub active: u32,
    /// Explicit padding, always zero.
    pub _pad: u32,
}

/// Key of the protected-root map: a directory by device and inode.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RootKey {
    /// Inode number of the root directory.
    pub ino: u64,
    /// Kernel-internal device number (see [`kernel_dev`]).
    pub dev: u32,
    /// Explicit padding, always zero.
    pub _pad: u32,
}

/// Key of the exact and subtree grant maps: `(session, dev, ino)`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct GrantKey {
    /// The session's cgroup id.
    pub session: u64,
    /// Inode number of the object (exact) or of the directory (subtree).
    pub ino: u64,
    /// Kernel-internal device number (see [`kernel_dev`]).
    pub dev: u32,
    /// Explicit padding, always zero.
    pub _pad: u32,
}

/// One denied access, as pushed by the kernel on the ring buffer.
///
/// `path` holds the components from the object up to (not including) the
/// protected root, **in reverse order**, each terminated by a NUL byte
/// (`"file\0dir\0"` for `<root>/dir/file`). For creation hooks the first
/// component is the new name. Userspace reverses it to get the path relative
/// to the root identified by `root_dev`/`root_ino`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct MissEvent {
    /// The session's cgroup id.
    pub session: u64,
    /// Inode of the object (0 when it does not exist yet, e.g. on create).
    pub ino: u64,
    /// Inode of the object's parent directory.
    pub parent_ino: u64,
    /// Inode of the protected root the object lies under (0 if the walk ran out).
    pub root_ino: u64,
    /// Thread-group id (process id) of the task.
    pub pid: u32,
    /// Real uid of the task.
    pub uid: u32,
    /// Device of the object.
    pub dev: u32,
    /// Device of the parent directory.
    pub parent_dev: u32,
    /// Device of the protected root.
    pub root_dev: u32,
    /// The missing access bits (`ACCESS_*`).
    pub access: u32,
    /// Which hook denied (`HOOK_*`).
    pub hook: u32,
    /// `EVENT_FLAG_*` bits.
    pub flags: u32,
    /// Number of components written into `path`.
    pub depth: u32,
    /// Explicit padding, always zero.
    pub _pad: u32,
    /// The object's own name (NUL-terminated).
    pub name: [u8; EVENT_NAME_LEN],
    /// Reverse NUL-separated components up to the root (see the type docs).
    pub path: [u8; EVENT_PATH_LEN],
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<SessionKey>() == 8);
    assert!(size_of::<SessionValue>() == 8);
    assert!(size_of::<RootKey>() == 16);
    assert!(offset_of!(RootKey, dev) == 8);
    assert!(size_of::<GrantKey>() == 24);
    assert!(offset_of!(GrantKey, ino) == 8);
    assert!(offset_of!(GrantKey, dev) == 16);
    assert!(offset_of!(MissEvent, pid) == 32);
    assert!(offset_of!(MissEvent, access) == 52);
    assert!(offset_of!(MissEvent, hook) == 56);
    assert!(offset_of!(MissEvent, depth) == 64);
    assert!(offset_of!(MissEvent, name) == 72);
    assert!(offset_of!(MissEvent, path) == 72 + EVENT_NAME_LEN);
    assert!(size_of::<MissEvent>() == 72 + EVENT_NAME_LEN + EVENT_PATH_LEN);
};

#[cfg(feature = "user")]
mod pod {
    // SAFETY: all types are `repr(C)`, made only of integers and byte arrays,
    // with explicit padding fields, so every bit pattern is valid.
    unsafe impl aya::Pod for super::SessionKey {}
    unsafe impl aya::Pod for super::SessionValue {}
    unsafe impl aya::Pod for super::RootKey {}
    unsafe impl aya::Pod for super::GrantKey {}
    unsafe impl aya::Pod for super::MissEvent {}
}
