//! Decoding of miss events from the ring buffer, and the async miss stream.

use super::{access_types, KernelError};
use crate::access::Access;
use aya::maps::{MapData, RingBuf};
use pincer_common::MissEvent;
use std::path::PathBuf;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// One access the kernel denied because no grant covered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Miss {
    /// The session (cgroup id) whose task was denied.
    pub session: u64,
    /// Process id (thread-group id) of the task.
    pub pid: u32,
    /// Real uid of the task.
    pub uid: u32,
    /// The access types that were missing.
    pub access: Vec<Access>,
    /// The raw missing access bits.
    pub access_bits: u32,
    /// Name of the hook that denied (`file_open`, `inode_unlink`, ...).
    pub hook: &'static str,
    /// Kernel device of the object (0 if it does not exist yet).
    pub dev: u32,
    /// Inode of the object (0 if it does not exist yet, e.g. on create).
    pub ino: u64,
    /// Kernel device of the parent directory.
    pub parent_dev: u32,
    /// Inode of the parent directory.
    pub parent_ino: u64,
    /// Kernel device of the protected root (0 if the walk ran out of bound).
    pub root_dev: u32,
    /// Inode of the protected root (0 if the walk ran out of bound).
    pub root_ino: u64,
    /// The object's own name (lossy UTF-8).
    pub name: String,
    /// The object's path relative to the protected root (components lossy UTF-8).
    pub relative_path: PathBuf,
    /// `EVENT_FLAG_*` bits from the kernel.
    pub flags: u32,
}

impl Miss {
    /// Whether the walk up the dentries ran out of its bound (then
    /// `relative_path` is the deepest part only and the root is unknown).
    pub fn walk_exhausted(&self) -> bool {
        self.flags & pincer_common::EVENT_FLAG_WALK_EXHAUSTED != 0
    }

    /// Whether the access is never grantable (a never-grantable object, directory
    /// or name, or terminal injection): no grant or approval can allow it, so it
    /// is to be audited, not decided.
    pub fn never(&self) -> bool {
        self.flags & pincer_common::EVENT_FLAG_NEVER != 0
    }

    /// Whether the session is in shadow mode and the kernel allowed this miss.
    pub fn shadow_allowed(&self) -> bool {
        self.flags & pincer_common::EVENT_FLAG_SHADOW != 0
    }

    /// Decodes one ring buffer record.
    pub fn decode(bytes: &[u8]) -> Result<Self, KernelError> {
        let expected = std::mem::size_of::<MissEvent>();
        if bytes.len() < expected {
            return Err(KernelError::ShortEvent { len: bytes.len(), expected });
        }
        // SAFETY: the length was checked and `MissEvent` is plain old data
        // (every bit pattern valid); the read is unaligned-safe.
        let e: MissEvent = unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast()) };
        let name = c_str(&e.name);
        let mut components: Vec<String> = Vec::new();
        let mut rest = &e.path[..];
        for _ in 0..e.depth {
            let Some(end) = rest.iter().position(|b| *b == 0) else { break };
            components.push(String::from_utf8_lossy(&rest[..end]).into_owned());
            rest = &rest[end + 1..];
        }
        let relative_path = components.iter().rev().collect::<PathBuf>();
        Ok(Self {
            session: e.session,
            pid: e.pid,
            uid: e.uid,
            access: access_types(e.access),
            access_bits: e.access,
            hook: hook_name(e.hook),
            dev: e.dev,
            ino: e.ino,
            parent_dev: e.parent_dev,
            parent_ino: e.parent_ino,
            root_dev: e.root_dev,
            root_ino: e.root_ino,
            name,
            relative_path,
            flags: e.flags,
        })
    }
}

fn c_str(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// The hook name for a `HOOK_*` id (`"unknown"` for an id this build does not know).
pub fn hook_name(id: u32) -> &'static str {
    use pincer_common::*;
    match id {
        HOOK_FILE_OPEN => "file_open",
        HOOK_INODE_CREATE => "inode_create",
        HOOK_INODE_MKDIR => "inode_mkdir",
        HOOK_INODE_SYMLINK => "inode_symlink",
        HOOK_INODE_LINK => "inode_link",
        HOOK_INODE_LINK_SOURCE => "inode_link(source)",
        HOOK_INODE_UNLINK => "inode_unlink",
        HOOK_INODE_RMDIR => "inode_rmdir",
        HOOK_INODE_RENAME_FROM => "inode_rename(from)",
        HOOK_INODE_RENAME_TO => "inode_rename(to)",
        HOOK_INODE_RENAME_OVER => "inode_rename(over)",
        HOOK_INODE_SETATTR => "inode_setattr",
        HOOK_INODE_SETXATTR => "inode_setxattr",
        HOOK_INODE_REMOVEXATTR => "inode_removexattr",
        HOOK_INODE_SET_ACL => "inode_set_acl",
        HOOK_INODE_REMOVE_ACL => "inode_remove_acl",
        HOOK_INODE_MKNOD => "inode_mknod",
        HOOK_FILE_RECEIVE => "file_receive",
        HOOK_FILE_IOCTL => "file_ioctl",
        HOOK_USERNS_CREATE => "userns_create",
        _ => "unknown",
    }
}

/// The async stream of misses, read from the ring buffer with tokio.
pub struct Misses {
    ring: AsyncFd<RingBuf<MapData>>,
}

impl std::fmt::Debug for Misses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Misses").finish_non_exhaustive()
    }
}

impl Misses {
    pub(super) fn new(ring: RingBuf<MapData>) -> Result<Self, KernelError> {
        // SAFETY: the ring buffer owns its map fd and is never replaced or
        // closed while the `AsyncFd` owns it.
        let ring = unsafe { AsyncFd::register_with_interest(ring, Interest::READABLE) }
            .map_err(|e| KernelError::Poll(e.into()))?;
        Ok(Self { ring })
    }

    /// A miss already in the buffer, without waiting.
    pub fn try_next(&mut self) -> Option<Result<Miss, KernelError>> {
        let ring = self.ring.get_mut();
        ring.next().map(|item| Miss::decode(&item))
    }

    /// Waits for the next miss.
    pub async fn next(&mut self) -> Result<Miss, KernelError> {
        loop {
            if let Some(miss) = self.try_next() {
                return miss;
            }
            let mut guard = self.ring.readable_mut().await.map_err(KernelError::Poll)?;
            if let Some(item) = guard.get_inner_mut().next() {
                return Miss::decode(&item);
            }
            guard.clear_ready();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pincer_common::*;

    fn event(path: &[&str]) -> MissEvent {
        let mut e = MissEvent {
            session: 7,
            ino: 11,
            parent_ino: 10,
            root_ino: 2,
            pid: 42,
            uid: 1000,
            dev: 5,
            parent_dev: 5,
            root_dev: 5,
            access: ACCESS_READ | ACCESS_WRITE,
            hook: HOOK_FILE_OPEN,
            flags: 0,
            depth: path.len() as u32,
            _pad: 0,
            name: [0; EVENT_NAME_LEN],
            path: [0; EVENT_PATH_LEN],
        };
        let mut off = 0;
        for c in path {
            e.path[off..off + c.len()].copy_from_slice(c.as_bytes());
            off += c.len() + 1;
        }
        e.name[..path[0].len()].copy_from_slice(path[0].as_bytes());
        e
    }

    fn bytes(e: &MissEvent) -> Vec<u8> {
        // SAFETY: MissEvent is repr(C) plain data.
        unsafe { std::slice::from_raw_parts((e as *const MissEvent).cast::<u8>(), std::mem::size_of::<MissEvent>()) }
            .to_vec()
    }

    #[test]
    fn decode_reverses_components_into_relative_path() {
        let miss = Miss::decode(&bytes(&event(&["notes.txt", "docs", "a"]))).unwrap();
        assert_eq!(miss.relative_path, PathBuf::from("a/docs/notes.txt"));
        assert_eq!(miss.name, "notes.txt");
        assert_eq!(miss.access, vec![Access::Read, Access::Write]);
        assert_eq!(miss.hook, "file_open");
        assert_eq!((miss.pid, miss.uid, miss.session), (42, 1000, 7));
    }

    #[test]
    fn decode_rejects_short_record() {
        let err = Miss::decode(&[0u8; 16]).unwrap_err();
        assert!(matches!(err, KernelError::ShortEvent { len: 16, .. }));
    }

    #[test]
    fn access_bits_round_trip() {
        for a in Access::ALL {
            assert_eq!(access_types(super::super::access_bit(a)), vec![a]);
        }
    }
}
