//! Layouts of session containment against reach into other processes and
//! sockets (`pincer-ebpf/src/reach.bpf.c`), mirrored by the reach block of
//! `pincer-ebpf/src/pincer.h`.
//!
//! A denial here is reported as a [`MissEvent`](crate::MissEvent) with
//! [`EVENT_FLAG_REACH`] set and `access` 0; its fields then mean:
//!
//! | hook | `ino` | `dev` | `parent_ino` | `root_ino` | `name` |
//! | --- | --- | --- | --- | --- | --- |
//! | process hooks, [`HOOK_PROC_WRITE`] | target process id | signal, ptrace mode, nice or ioprio | target's session (0: none) | 0 | target's `comm` |
//! | [`HOOK_IPC_PERMISSION`], [`HOOK_IPC_CTL`] | IPC id | access flag or command | IPC key | creating session (0: outside) | |
//! | [`HOOK_UNIX_STREAM_CONNECT`], [`HOOK_UNIX_MAY_SEND`] | socket file inode (0: abstract) | socket file device | creating session (0: outside) | 0 | bound name (`@` for abstract); `root_dev` its length, `parent_dev` the socket file's owner uid ([`UNIX_OWNER_ANY`]: no file) |
//! | [`HOOK_SOCKET_CONNECT`], [`HOOK_SOCKET_SENDMSG`] | port | protocol (6 TCP, 17 UDP) | address bytes 0..8 | address bytes 8..16 | |
//!
//! Addresses are IPv6 bytes (IPv4 as `::ffff:a.b.c.d`), stored into the two
//! `u64` fields in memory order (read them back with `to_ne_bytes`).

/// Hook id: `task_kill` (a signal to a process outside the session).
pub const HOOK_TASK_KILL: u32 = 32;
/// Hook id: `ptrace_access_check` (ptrace attach, `/proc/PID/mem`, `environ`,
/// `process_vm_readv`, `pidfd_getfd`, ...).
pub const HOOK_PTRACE_ACCESS_CHECK: u32 = 33;
/// Hook id: `ptrace_traceme` (a tracer outside the session).
pub const HOOK_PTRACE_TRACEME: u32 = 34;
/// Hook id: `task_setnice`.
pub const HOOK_TASK_SETNICE: u32 = 35;
/// Hook id: `task_setioprio`.
pub const HOOK_TASK_SETIOPRIO: u32 = 36;
/// Hook id: `task_setscheduler`.
pub const HOOK_TASK_SETSCHEDULER: u32 = 37;
/// Hook id: `task_movememory` (`move_pages`, `migrate_pages`).
pub const HOOK_TASK_MOVEMEMORY: u32 = 38;
/// Hook id: `file_open` of another process's `/proc/PID/` file for writing.
pub const HOOK_PROC_WRITE: u32 = 39;
/// Hook id: `ipc_permission` (SysV object made outside the session).
pub const HOOK_IPC_PERMISSION: u32 = 40;
/// Hook id: `shm_shmctl`, `msg_queue_msgctl` or `sem_semctl`.
pub const HOOK_IPC_CTL: u32 = 41;
/// Hook id: `unix_stream_connect`.
pub const HOOK_UNIX_STREAM_CONNECT: u32 = 42;
/// Hook id: `unix_may_send` (datagram send or connect).
pub const HOOK_UNIX_MAY_SEND: u32 = 43;
/// Hook id: `socket_connect` to a port on this host.
pub const HOOK_SOCKET_CONNECT: u32 = 44;
/// Hook id: `socket_sendmsg` with an address on this host (UDP `sendto`).
pub const HOOK_SOCKET_SENDMSG: u32 = 45;

/// Event flag: a reach denial (the table in the module docs applies).
pub const EVENT_FLAG_REACH: u32 = 1 << 8;
/// [`UNIX_NAMES`](map_names::UNIX_NAMES) value: any owner of the socket file.
pub const UNIX_OWNER_ANY: u32 = u32::MAX;
/// Bytes of a Unix socket name (`sun_path`).
pub const UNIX_NAME_LEN: usize = 108;
/// Protocol number of TCP in [`PortKey::proto`] (MPTCP counts as TCP).
pub const PROTO_TCP: u16 = 6;
/// Protocol number of UDP in [`PortKey::proto`] (UDP-Lite counts as UDP).
pub const PROTO_UDP: u16 = 17;

/// Map names of the reach block, written once.
pub mod map_names {
    /// `HASH` `u64` socket address → owner (kernel-internal; pinned only).
    pub const SOCKS: &str = "pincer_socks";
    /// `HASH` [`PortKey`](super::PortKey) → `u32` (sockets holding it; non-zero for listed ports).
    pub const PORTS: &str = "pincer_ports";
    /// `HASH` [`HostAddrKey`](super::HostAddrKey) → `u32`: this host's own addresses.
    pub const HOST_ADDRS: &str = "pincer_host_addrs";
    /// `HASH` [`ObjectKey`](crate::ObjectKey) of a socket file → `u32`: sockets every session may reach.
    pub const UNIX_FILES: &str = "pincer_unix_files";
    /// `HASH` [`UnixNameKey`](super::UnixNameKey) → `u32` required owner uid of the socket
    /// file, or [`UNIX_OWNER_ANY`](super::UNIX_OWNER_ANY).
    pub const UNIX_NAMES: &str = "pincer_unix_names";
    /// `HASH` `u64` SysV object address → creating session (kernel-internal; pinned only).
    pub const IPC: &str = "pincer_ipc";
    /// `PERCPU_ARRAY` scratch space for one name key (kernel-internal; pinned only).
    pub const NAME_SCRATCH: &str = "pincer_name_scratch";
    /// Every map of the reach block, in a fixed order.
    pub const ALL: [&str; 7] = [SOCKS, PORTS, HOST_ADDRS, UNIX_FILES, UNIX_NAMES, IPC, NAME_SCRATCH];
}

/// Key of the port map: a TCP or UDP port on this host a session may reach.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PortKey {
    /// The session that bound it, or 0 for a port every session may reach.
    pub session: u64,
    /// Port, host byte order.
    pub port: u16,
    /// [`PROTO_TCP`] or [`PROTO_UDP`].
    pub proto: u16,
    /// Explicit padding, always zero.
    pub _pad: u32,
}

/// Key of the host address map: an IPv6 address (IPv4 as `::ffff:a.b.c.d`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct HostAddrKey {
    /// The address bytes, network order.
    pub addr: [u8; 16],
}

/// Key of the Unix name map: the name a socket was bound to.
///
/// A pathname socket's name is its `sun_path` as given to `bind` with the
/// terminating NUL; an abstract one starts with a NUL byte. Bytes past `len`
/// are zero.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UnixNameKey {
    /// Bytes of `name` in use.
    pub len: u32,
    /// The name.
    pub name: [u8; UNIX_NAME_LEN],
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<PortKey>() == 16);
    assert!(offset_of!(PortKey, port) == 8);
    assert!(offset_of!(PortKey, proto) == 10);
    assert!(size_of::<HostAddrKey>() == 16);
    assert!(size_of::<UnixNameKey>() == 112);
};

#[cfg(feature = "user")]
mod pod {
    // SAFETY: `repr(C)` integers and byte arrays with explicit padding: every
    // bit pattern is valid.
    unsafe impl aya::Pod for super::PortKey {}
    unsafe impl aya::Pod for super::HostAddrKey {}
    unsafe impl aya::Pod for super::UnixNameKey {}
}
