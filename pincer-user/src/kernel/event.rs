//! Decoding of the ring buffer's records (file misses and reach denials), and the async
//! event stream.

use super::{access_types, KernelError, ObjectId, ReachDenial};
use crate::access::Access;
use aya::maps::{MapData, RingBuf};
use pincer_common::reach::ReachEvent;
use pincer_common::{MissEvent, EVENT_RECORD_MISS, EVENT_RECORD_REACH};
use std::path::{Path, PathBuf};
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
    /// The hook that denied.
    pub hook: Hook,
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
    /// The hold the denied thread waits in until the daemon has decided ([`super::hold`]),
    /// or 0 when it was denied at once.
    pub hold: u32,
}

impl Miss {
    /// The miss the kernel reports when process `pid` (of `uid`, in session `session`) is
    /// refused a read of file `rel` under root `root`: the file's, its folder's and the
    /// root's objects as they are on disk now. For a daemon driven without the kernel
    /// (host tests, `pincer bench pipeline`).
    pub fn read_under(root: &Path, rel: &str, session: u64, uid: u32, pid: u32) -> Result<Miss, KernelError> {
        let path = root.join(rel);
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let (Some(name), Some(folder)) = (name, path.parent()) else {
            return Err(KernelError::Stat { path, source: std::io::Error::other("not a file under the root") });
        };
        let (root_id, file, parent) = (ObjectId::of_path(root)?, ObjectId::of_path(&path)?, ObjectId::of_path(folder)?);
        Ok(Miss {
            session,
            pid,
            uid,
            access: vec![Access::Read],
            access_bits: pincer_common::ACCESS_READ,
            hook: Hook::FileOpen,
            dev: file.dev,
            ino: file.ino,
            parent_dev: parent.dev,
            parent_ino: parent.ino,
            root_dev: root_id.dev,
            root_ino: root_id.ino,
            name,
            relative_path: PathBuf::from(rel),
            flags: 0,
            hold: 0,
        })
    }

    /// Whether the walk up the dentries ran out of its bound (then
    /// `relative_path` is the deepest part only and the root is unknown).
    pub fn walk_exhausted(&self) -> bool {
        self.flags & pincer_common::EVENT_FLAG_WALK_EXHAUSTED != 0
    }

    /// Whether the kernel ran out of room for the path (then `relative_path` holds only
    /// the components nearest the object, not the whole path under the root).
    pub fn path_truncated(&self) -> bool {
        self.flags & pincer_common::EVENT_FLAG_PATH_TRUNCATED != 0
    }

    /// Whether the object (for a creation, its directory) belongs to the session's user
    /// outside every protected root: gated by its owner, with no root to name it by.
    pub fn owned_outside_roots(&self) -> bool {
        self.flags & pincer_common::EVENT_FLAG_OWNED != 0
    }

    /// Whether the object, or a folder on the way to it, is kept more private than the
    /// folder it is in (`EVENT_FLAG_KEPT_PRIVATE`): no grant on a folder above reaches it.
    pub fn kept_private(&self) -> bool {
        self.flags & pincer_common::EVENT_FLAG_KEPT_PRIVATE != 0
    }

    /// Whether the access is never grantable (a never-grantable object, directory
    /// or name, or terminal injection): no grant or approval can allow it, so it
    /// is to be audited, not decided.
    pub fn never(&self) -> bool {
        self.flags & pincer_common::EVENT_FLAG_NEVER != 0
    }

    /// The object a grant of `access` goes on, which the kernel looks for when a held miss
    /// ends: for `create`, the directory the new name goes into; otherwise the object itself.
    pub fn target(&self, access: Access) -> super::ObjectId {
        if access == Access::Create {
            super::ObjectId { dev: self.parent_dev, ino: self.parent_ino }
        } else {
            super::ObjectId { dev: self.dev, ino: self.ino }
        }
    }

    /// Whether the session is in shadow mode and the kernel allowed this miss.
    pub fn shadow_allowed(&self) -> bool {
        self.flags & pincer_common::EVENT_FLAG_SHADOW != 0
    }

    /// Decodes one `miss_event` record.
    pub fn decode(bytes: &[u8]) -> Result<Self, KernelError> {
        let e: MissEvent = read_record(bytes, "miss_event")?;
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
            hook: Hook::from_id(e.hook),
            dev: e.dev,
            ino: e.ino,
            parent_dev: e.parent_dev,
            parent_ino: e.parent_ino,
            root_dev: e.root_dev,
            root_ino: e.root_ino,
            name,
            relative_path,
            flags: e.flags,
            hold: if e.flags & pincer_common::EVENT_FLAG_HELD != 0 { e.hold } else { 0 },
        })
    }
}

/// One record of the kernel's event ring buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelEvent {
    /// A file access no grant covered (`pincer.bpf.c`).
    Miss(Miss),
    /// An action on something outside the session, refused by containment (`reach.bpf.c`).
    Reach(ReachDenial),
}

impl KernelEvent {
    /// Decodes one ring buffer record by its kind (its first field, `EVENT_RECORD_*`).
    pub fn decode(bytes: &[u8]) -> Result<Self, KernelError> {
        let Some(head) = bytes.get(..4) else {
            return Err(KernelError::ShortEvent { kind: "record", len: bytes.len(), expected: 4 });
        };
        match u32::from_ne_bytes(head.try_into().expect("four bytes")) {
            EVENT_RECORD_MISS => Miss::decode(bytes).map(KernelEvent::Miss),
            EVENT_RECORD_REACH => ReachDenial::decode(bytes).map(KernelEvent::Reach),
            record => Err(KernelError::UnknownEvent { record, len: bytes.len() }),
        }
    }

    /// The session (cgroup id) the event is about.
    pub fn session(&self) -> u64 {
        match self {
            KernelEvent::Miss(m) => m.session,
            KernelEvent::Reach(r) => r.session,
        }
    }

    /// The hook that denied.
    pub fn hook(&self) -> Hook {
        match self {
            KernelEvent::Miss(m) => m.hook,
            KernelEvent::Reach(r) => r.hook,
        }
    }

    /// The file miss, if this is one.
    pub fn miss(self) -> Option<Miss> {
        match self {
            KernelEvent::Miss(m) => Some(m),
            KernelEvent::Reach(_) => None,
        }
    }

    /// The reach denial, if this is one.
    pub fn reach(self) -> Option<ReachDenial> {
        match self {
            KernelEvent::Reach(r) => Some(r),
            KernelEvent::Miss(_) => None,
        }
    }
}

/// A record of `T`'s layout read from `bytes`, which must hold at least its size.
pub(super) fn read_record<T: RingRecord>(bytes: &[u8], kind: &'static str) -> Result<T, KernelError> {
    let expected = std::mem::size_of::<T>();
    if bytes.len() < expected {
        return Err(KernelError::ShortEvent { kind, len: bytes.len(), expected });
    }
    // SAFETY: the length was checked, and `T` is a `RingRecord`: `repr(C)` plain old data
    // (integers and byte arrays, every bit pattern valid); the read is unaligned-safe.
    Ok(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast()) })
}

/// A `repr(C)` record of the ring buffer made only of integers and byte arrays, so any
/// bytes of its size are one.
pub(super) trait RingRecord: Copy {}
impl RingRecord for MissEvent {}
impl RingRecord for ReachEvent {}

pub(super) fn c_str(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// The LSM hook (and, for hooks that check two objects, which side) that denied a miss,
/// decoded from the event's `HOOK_*` id. Serialized by its name (`file_open`,
/// `inode_rename(from)`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Hook {
    /// `file_open`: read, write or list of an existing object.
    #[serde(rename = "file_open")]
    FileOpen,
    /// `inode_create`: a new file in a directory.
    #[serde(rename = "inode_create")]
    InodeCreate,
    /// `inode_mkdir`: a new directory.
    #[serde(rename = "inode_mkdir")]
    InodeMkdir,
    /// `inode_symlink`: a new symbolic link.
    #[serde(rename = "inode_symlink")]
    InodeSymlink,
    /// `inode_link`: the new name of a hard link.
    #[serde(rename = "inode_link")]
    InodeLink,
    /// `inode_link`: the object a hard link is made to.
    #[serde(rename = "inode_link(source)")]
    InodeLinkSource,
    /// `inode_unlink`: removal of a file.
    #[serde(rename = "inode_unlink")]
    InodeUnlink,
    /// `inode_rmdir`: removal of a directory.
    #[serde(rename = "inode_rmdir")]
    InodeRmdir,
    /// `inode_rename`: the object moved away.
    #[serde(rename = "inode_rename(from)")]
    InodeRenameFrom,
    /// `inode_rename`: the directory it moves into.
    #[serde(rename = "inode_rename(to)")]
    InodeRenameTo,
    /// `inode_rename`: an object the rename replaces.
    #[serde(rename = "inode_rename(over)")]
    InodeRenameOver,
    /// `inode_setattr`: truncation, mode, owner or times.
    #[serde(rename = "inode_setattr")]
    InodeSetattr,
    /// `inode_setxattr`: setting an extended attribute (needs write).
    #[serde(rename = "inode_setxattr")]
    InodeSetxattr,
    /// `inode_removexattr`: removing an extended attribute (needs write).
    #[serde(rename = "inode_removexattr")]
    InodeRemovexattr,
    /// `inode_set_acl`: setting a POSIX ACL (needs write; Linux 6.2+).
    #[serde(rename = "inode_set_acl")]
    InodeSetAcl,
    /// `inode_remove_acl`: removing a POSIX ACL (needs write; Linux 6.2+).
    #[serde(rename = "inode_remove_acl")]
    InodeRemoveAcl,
    /// `inode_mknod`: a FIFO, device node or bound Unix socket (needs create).
    #[serde(rename = "inode_mknod")]
    InodeMknod,
    /// `file_receive`: an fd received by `SCM_RIGHTS` or `pidfd_getfd`, checked like an open.
    #[serde(rename = "file_receive")]
    FileReceive,
    /// `file_ioctl`: terminal injection (`TIOCSTI`, `TIOCLINUX`), never allowed; inode flag
    /// changes (`FS_IOC_SETFLAGS`, `FS_IOC_FSSETXATTR`) need write.
    #[serde(rename = "file_ioctl")]
    FileIoctl,
    /// `userns_create`: a new user namespace without the session's permission.
    #[serde(rename = "userns_create")]
    UsernsCreate,
    /// `path_notify`: an inotify, fanotify or dnotify watch (needs read, or list on a directory).
    #[serde(rename = "path_notify")]
    PathNotify,
    /// `inode_getattr`: `stat` of a never-grantable object.
    #[serde(rename = "inode_getattr")]
    InodeGetattr,
    /// `inode_getxattr`: an extended attribute of a never-grantable object.
    #[serde(rename = "inode_getxattr")]
    InodeGetxattr,
    /// `inode_listxattr`: the extended attribute names of a never-grantable object.
    #[serde(rename = "inode_listxattr")]
    InodeListxattr,
    /// `inode_readlink`: the target of a never-grantable symlink.
    #[serde(rename = "inode_readlink")]
    InodeReadlink,
    /// `file_lock`: a lock or lease taken through a descriptor not open for writing (needs write).
    #[serde(rename = "file_lock")]
    FileLock,
    /// `task_kill`: a signal to a task outside the session.
    #[serde(rename = "task_kill")]
    TaskKill,
    /// `ptrace_access_check`: ptrace, `/proc/PID/mem`, `environ`, `process_vm_readv`, `pidfd_getfd` of a task outside the session.
    #[serde(rename = "ptrace_access_check")]
    PtraceAccessCheck,
    /// `ptrace_traceme`: a tracer outside the session.
    #[serde(rename = "ptrace_traceme")]
    PtraceTraceme,
    /// `task_setnice`: the priority of a task outside the session.
    #[serde(rename = "task_setnice")]
    TaskSetnice,
    /// `task_setioprio`: the I/O priority of a task outside the session.
    #[serde(rename = "task_setioprio")]
    TaskSetioprio,
    /// `task_setscheduler`: the scheduling of a task outside the session.
    #[serde(rename = "task_setscheduler")]
    TaskSetscheduler,
    /// `task_movememory`: the memory placement of a task outside the session.
    #[serde(rename = "task_movememory")]
    TaskMovememory,
    /// `task_setrlimit`: the resource limits of a task outside the session (`prlimit`).
    #[serde(rename = "task_setrlimit")]
    TaskSetrlimit,
    /// `file_fcntl` or `file_ioctl` naming another process or a process group as the
    /// owner of a file's signals (`F_SETOWN`, `F_SETOWN_EX`, `FIOSETOWN`, `SIOCSPGRP`).
    #[serde(rename = "file_setown")]
    FileSetown,
    /// `file_open` or `inode_unlink` of a POSIX message queue the session did not make
    /// (`mq_open`, `/dev/mqueue/NAME`, `mq_unlink`).
    #[serde(rename = "mqueue")]
    Mqueue,
    /// `key_permission`: a link of the session keyring of a task whose parent is outside
    /// the session (`KEYCTL_SESSION_TO_PARENT`).
    #[serde(rename = "key_to_parent")]
    KeyToParent,
    /// `file_open` of another process's `/proc/PID` file for writing.
    #[serde(rename = "file_open(proc)")]
    ProcWrite,
    /// `ipc_permission`: a SysV IPC object the session did not create.
    #[serde(rename = "ipc_permission")]
    IpcPermission,
    /// `*_ctl` of a SysV IPC object the session did not create.
    #[serde(rename = "ipc_ctl")]
    IpcCtl,
    /// `unix_stream_connect`: a stream socket outside the session.
    #[serde(rename = "unix_stream_connect")]
    UnixStreamConnect,
    /// `unix_may_send`: a datagram socket outside the session.
    #[serde(rename = "unix_may_send")]
    UnixMaySend,
    /// `socket_connect`: a port of this host the session did not bind.
    #[serde(rename = "socket_connect")]
    SocketConnect,
    /// `socket_sendmsg`: a datagram to a port of this host the session did not bind.
    #[serde(rename = "socket_sendmsg")]
    SocketSendmsg,
    /// `socket_bind` of a port that a socket outside every session holds on another
    /// address or family.
    #[serde(rename = "socket_bind")]
    SocketBind,
    /// `socket_listen` or `socket_accept` of a TCP socket, or `socket_recvmsg` of an
    /// unconnected UDP socket, whose port, picked by the kernel for the session, a socket
    /// outside every session holds on another address or family.
    #[serde(rename = "picked_port")]
    PickedPort,
    /// `socket_setsockopt` of `SO_REUSEADDR` or `SO_REUSEPORT` on a UDP socket, or of
    /// `SO_REUSEPORT` on a TCP socket (a port shared with the user's sockets).
    #[serde(rename = "socket_setsockopt")]
    SocketShare,
    /// `unix_stream_connect` or `unix_may_send` of a process outside every session to a
    /// Unix socket a session created.
    #[serde(rename = "unix_connect(inbound)")]
    UnixInbound,
    /// `file_open` with `O_CREAT` of an object, or `inode_follow_link` of a symlink, that
    /// a session made in a shared place (`/tmp`, `/var/tmp`, `/dev/shm`), by a process
    /// outside that session.
    #[serde(rename = "shared_object(inbound)")]
    SharedInbound,
    /// `file_fcntl` `F_SETLEASE`: a lease, which would make the user's processes wait on
    /// the session.
    #[serde(rename = "file_lease")]
    FileLease,
    /// `key_permission`: a key or keyring the session did not create.
    #[serde(rename = "key_permission")]
    KeyPermission,
    /// `file_open` of a pseudo-terminal that is not the task's own.
    #[serde(rename = "file_open(pty)")]
    PtyOpen,
    /// A write, creation, removal or attribute change of a cgroup file outside the
    /// session's own cgroup.
    #[serde(rename = "cgroup_write")]
    CgroupWrite,
    /// A session's share of a quota the kernel keeps per uid (keys, key bytes, inotify
    /// and fanotify instances) is spent.
    #[serde(rename = "quota")]
    Quota,
    /// A `HOOK_*` id this build does not know.
    #[serde(rename = "unknown")]
    Unknown,
}

impl Hook {
    /// The hook for a `HOOK_*` id ([`Hook::Unknown`] for an id this build does not know).
    pub fn from_id(id: u32) -> Self {
        use pincer_common::reach::*;
        use pincer_common::*;
        match id {
            HOOK_FILE_OPEN => Hook::FileOpen,
            HOOK_INODE_CREATE => Hook::InodeCreate,
            HOOK_INODE_MKDIR => Hook::InodeMkdir,
            HOOK_INODE_SYMLINK => Hook::InodeSymlink,
            HOOK_INODE_LINK => Hook::InodeLink,
            HOOK_INODE_LINK_SOURCE => Hook::InodeLinkSource,
            HOOK_INODE_UNLINK => Hook::InodeUnlink,
            HOOK_INODE_RMDIR => Hook::InodeRmdir,
            HOOK_INODE_RENAME_FROM => Hook::InodeRenameFrom,
            HOOK_INODE_RENAME_TO => Hook::InodeRenameTo,
            HOOK_INODE_RENAME_OVER => Hook::InodeRenameOver,
            HOOK_INODE_SETATTR => Hook::InodeSetattr,
            HOOK_INODE_SETXATTR => Hook::InodeSetxattr,
            HOOK_INODE_REMOVEXATTR => Hook::InodeRemovexattr,
            HOOK_INODE_SET_ACL => Hook::InodeSetAcl,
            HOOK_INODE_REMOVE_ACL => Hook::InodeRemoveAcl,
            HOOK_INODE_MKNOD => Hook::InodeMknod,
            HOOK_FILE_RECEIVE => Hook::FileReceive,
            HOOK_FILE_IOCTL => Hook::FileIoctl,
            HOOK_USERNS_CREATE => Hook::UsernsCreate,
            HOOK_PATH_NOTIFY => Hook::PathNotify,
            HOOK_INODE_GETATTR => Hook::InodeGetattr,
            HOOK_INODE_GETXATTR => Hook::InodeGetxattr,
            HOOK_INODE_LISTXATTR => Hook::InodeListxattr,
            HOOK_INODE_READLINK => Hook::InodeReadlink,
            HOOK_FILE_LOCK => Hook::FileLock,
            HOOK_TASK_KILL => Hook::TaskKill,
            HOOK_PTRACE_ACCESS_CHECK => Hook::PtraceAccessCheck,
            HOOK_PTRACE_TRACEME => Hook::PtraceTraceme,
            HOOK_TASK_SETNICE => Hook::TaskSetnice,
            HOOK_TASK_SETIOPRIO => Hook::TaskSetioprio,
            HOOK_TASK_SETSCHEDULER => Hook::TaskSetscheduler,
            HOOK_TASK_MOVEMEMORY => Hook::TaskMovememory,
            HOOK_TASK_SETRLIMIT => Hook::TaskSetrlimit,
            HOOK_FILE_SETOWN => Hook::FileSetown,
            HOOK_MQUEUE => Hook::Mqueue,
            HOOK_KEY_TO_PARENT => Hook::KeyToParent,
            HOOK_PROC_WRITE => Hook::ProcWrite,
            HOOK_IPC_PERMISSION => Hook::IpcPermission,
            HOOK_IPC_CTL => Hook::IpcCtl,
            HOOK_UNIX_STREAM_CONNECT => Hook::UnixStreamConnect,
            HOOK_UNIX_MAY_SEND => Hook::UnixMaySend,
            HOOK_SOCKET_CONNECT => Hook::SocketConnect,
            HOOK_SOCKET_SENDMSG => Hook::SocketSendmsg,
            HOOK_SOCKET_BIND => Hook::SocketBind,
            HOOK_PICKED_PORT => Hook::PickedPort,
            HOOK_SOCKET_SHARE => Hook::SocketShare,
            HOOK_UNIX_INBOUND => Hook::UnixInbound,
            HOOK_KEY_PERMISSION => Hook::KeyPermission,
            HOOK_PTY_OPEN => Hook::PtyOpen,
            HOOK_CGROUP_WRITE => Hook::CgroupWrite,
            HOOK_QUOTA => Hook::Quota,
            HOOK_SHARED_INBOUND => Hook::SharedInbound,
            HOOK_FILE_LEASE => Hook::FileLease,
            _ => Hook::Unknown,
        }
    }

    /// The hook's name as the kernel and the audit log spell it.
    pub fn name(self) -> &'static str {
        match self {
            Hook::FileOpen => "file_open",
            Hook::InodeCreate => "inode_create",
            Hook::InodeMkdir => "inode_mkdir",
            Hook::InodeSymlink => "inode_symlink",
            Hook::InodeLink => "inode_link",
            Hook::InodeLinkSource => "inode_link(source)",
            Hook::InodeUnlink => "inode_unlink",
            Hook::InodeRmdir => "inode_rmdir",
            Hook::InodeRenameFrom => "inode_rename(from)",
            Hook::InodeRenameTo => "inode_rename(to)",
            Hook::InodeRenameOver => "inode_rename(over)",
            Hook::InodeSetattr => "inode_setattr",
            Hook::InodeSetxattr => "inode_setxattr",
            Hook::InodeRemovexattr => "inode_removexattr",
            Hook::InodeSetAcl => "inode_set_acl",
            Hook::InodeRemoveAcl => "inode_remove_acl",
            Hook::InodeMknod => "inode_mknod",
            Hook::FileReceive => "file_receive",
            Hook::FileIoctl => "file_ioctl",
            Hook::UsernsCreate => "userns_create",
            Hook::PathNotify => "path_notify",
            Hook::InodeGetattr => "inode_getattr",
            Hook::InodeGetxattr => "inode_getxattr",
            Hook::InodeListxattr => "inode_listxattr",
            Hook::InodeReadlink => "inode_readlink",
            Hook::FileLock => "file_lock",
            Hook::TaskKill => "task_kill",
            Hook::PtraceAccessCheck => "ptrace_access_check",
            Hook::PtraceTraceme => "ptrace_traceme",
            Hook::TaskSetnice => "task_setnice",
            Hook::TaskSetioprio => "task_setioprio",
            Hook::TaskSetscheduler => "task_setscheduler",
            Hook::TaskMovememory => "task_movememory",
            Hook::TaskSetrlimit => "task_setrlimit",
            Hook::FileSetown => "file_setown",
            Hook::Mqueue => "mqueue",
            Hook::KeyToParent => "key_to_parent",
            Hook::ProcWrite => "file_open(proc)",
            Hook::IpcPermission => "ipc_permission",
            Hook::IpcCtl => "ipc_ctl",
            Hook::UnixStreamConnect => "unix_stream_connect",
            Hook::UnixMaySend => "unix_may_send",
            Hook::SocketConnect => "socket_connect",
            Hook::SocketSendmsg => "socket_sendmsg",
            Hook::SocketBind => "socket_bind",
            Hook::PickedPort => "picked_port",
            Hook::SocketShare => "socket_setsockopt",
            Hook::UnixInbound => "unix_connect(inbound)",
            Hook::KeyPermission => "key_permission",
            Hook::PtyOpen => "file_open(pty)",
            Hook::CgroupWrite => "cgroup_write",
            Hook::Quota => "quota",
            Hook::SharedInbound => "shared_object(inbound)",
            Hook::FileLease => "file_lease",
            Hook::Unknown => "unknown",
        }
    }

    /// Whether the hook runs with a folder or the object locked (creations, removals,
    /// renames, attribute changes): a thread held there keeps the lock while it waits.
    pub fn holds_lock(self) -> bool {
        !matches!(self, Hook::FileOpen | Hook::FileReceive)
    }

    /// Whether the hook's object is always a directory (`mkdir`, `rmdir`). A `file_open`
    /// miss names a directory when its access is `list`.
    pub fn object_is_dir(self) -> bool {
        matches!(self, Hook::InodeMkdir | Hook::InodeRmdir)
    }
}

impl std::fmt::Display for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The async stream of the kernel's events, read from the ring buffer with tokio.
pub struct Events {
    ring: AsyncFd<RingBuf<MapData>>,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events").finish_non_exhaustive()
    }
}

impl Events {
    pub(super) fn new(ring: RingBuf<MapData>) -> Result<Self, KernelError> {
        // SAFETY: the ring buffer owns its map fd and is never replaced or
        // closed while the `AsyncFd` owns it.
        let ring = unsafe { AsyncFd::register_with_interest(ring, Interest::READABLE) }
            .map_err(|e| KernelError::Poll(e.into()))?;
        Ok(Self { ring })
    }

    /// An event already in the buffer, without waiting.
    pub fn try_next(&mut self) -> Option<Result<KernelEvent, KernelError>> {
        let ring = self.ring.get_mut();
        ring.next().map(|item| KernelEvent::decode(&item))
    }

    /// Waits for the next event.
    pub async fn next(&mut self) -> Result<KernelEvent, KernelError> {
        loop {
            if let Some(event) = self.try_next() {
                return event;
            }
            let mut guard = self.ring.readable_mut().await.map_err(KernelError::Poll)?;
            if let Some(item) = guard.get_inner_mut().next() {
                return KernelEvent::decode(&item);
            }
            guard.clear_ready();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pincer_common::*;

    #[test]
    fn every_hook_id_the_program_reports_decodes_to_its_own_hook() {
        // The ids come from pincer-common's tables, the same the C program is built from.
        let ids = C_CONSTANTS.iter().chain(reach::C_CONSTANTS).filter(|(name, _)| name.starts_with("HOOK_"));
        let mut seen = std::collections::HashSet::new();
        for (name, id) in ids {
            let hook = Hook::from_id(*id as u32);
            assert_ne!(hook, Hook::Unknown, "{name} = {id} has no Hook");
            assert!(seen.insert(hook), "{name} = {id} decodes to {hook}, as another id does");
            let wire = serde_json::to_string(&hook).unwrap();
            assert_eq!(wire, format!("\"{}\"", hook.name()), "{name}: serde and name() disagree");
        }
        assert_eq!(seen.len(), 54, "a new HOOK_* id needs a Hook variant (and this count)");
    }

    fn event(path: &[&str]) -> MissEvent {
        let mut e = MissEvent {
            record: EVENT_RECORD_MISS,
            hook: HOOK_FILE_OPEN,
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
            flags: 0,
            depth: path.len() as u32,
            hold: 0,
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
        assert_eq!(miss.hook, Hook::FileOpen);
        assert_eq!((miss.pid, miss.uid, miss.session), (42, 1000, 7));
    }

    #[test]
    fn hook_ids_decode_to_their_names() {
        assert_eq!(Hook::from_id(HOOK_INODE_RENAME_FROM).name(), "inode_rename(from)");
        assert_eq!(serde_json::to_string(&Hook::from_id(HOOK_INODE_MKDIR)).unwrap(), "\"inode_mkdir\"");
        assert!(Hook::from_id(HOOK_INODE_RMDIR).object_is_dir() && !Hook::from_id(HOOK_FILE_OPEN).object_is_dir());
        assert_eq!(Hook::from_id(9999), Hook::Unknown);
    }

    #[test]
    fn decode_rejects_short_record() {
        let err = Miss::decode(&[0u8; 16]).unwrap_err();
        assert!(matches!(err, KernelError::ShortEvent { len: 16, .. }));
        let mut short = bytes(&event(&["a"]));
        short.truncate(100);
        let err = KernelEvent::decode(&short).unwrap_err();
        assert!(matches!(err, KernelError::ShortEvent { kind: "miss_event", len: 100, .. }), "{err}");
        assert!(matches!(KernelEvent::decode(&[1, 0]), Err(KernelError::ShortEvent { kind: "record", .. })));
    }

    #[test]
    fn records_are_told_apart_by_their_kind() {
        let miss = bytes(&event(&["notes.txt"]));
        assert!(matches!(KernelEvent::decode(&miss), Ok(KernelEvent::Miss(m)) if m.name == "notes.txt"));
        let mut other = miss.clone();
        other[..4].copy_from_slice(&99u32.to_ne_bytes());
        let err = KernelEvent::decode(&other).unwrap_err();
        assert!(matches!(err, KernelError::UnknownEvent { record: 99, .. }), "{err}");
        // A miss record is longer than a reach record: read as a reach it would decode,
        // so the kind, not the length, decides.
        other[..4].copy_from_slice(&EVENT_RECORD_REACH.to_ne_bytes());
        assert!(matches!(KernelEvent::decode(&other), Ok(KernelEvent::Reach(_))));
    }

    #[test]
    fn access_bits_round_trip() {
        for a in Access::ALL {
            assert_eq!(access_types(super::super::access_bit(a)), vec![a]);
        }
    }
}
