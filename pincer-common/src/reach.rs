//! Layouts of session containment against reach into other processes and
//! sockets (`pincer-ebpf/src/reach.bpf.c`). Like the crate's own, the
//! constants and map names are written only here (the build script of
//! `pincer-ebpf` generates them into C) and the structs' C twins in
//! `pincer-ebpf/src/pincer.h` are checked against [`LAYOUTS`].
//!
//! A denial here is reported as a [`MissEvent`](crate::MissEvent) with
//! [`EVENT_FLAG_REACH`] set and `access` 0; its fields then mean:
//!
//! | hook | `ino` | `dev` | `parent_ino` | `root_ino` | `name` |
//! | --- | --- | --- | --- | --- | --- |
//! | process hooks, [`HOOK_PROC_WRITE`] | target process id | signal, ptrace mode, nice, ioprio or resource | target's session (0: none) | 0 | target's `comm` |
//! | [`HOOK_FILE_SETOWN`] | the owner's number in the caller's PID namespace | `fcntl` or `ioctl` command | 0 | kind (1 process, 2 process group, 3 named in memory) | |
//! | [`HOOK_MQUEUE`] | queue inode | queue device | creating session (0: none) | access asked (read: an open; delete: `mq_unlink`) | the queue's name |
//! | [`HOOK_KEY_TO_PARENT`] | keyring serial | the parent's pid | 0 | 0 | |
//! | [`HOOK_IPC_PERMISSION`], [`HOOK_IPC_CTL`] | IPC id | access flag or command | IPC key | creating session (0: outside) | |
//! | [`HOOK_UNIX_STREAM_CONNECT`], [`HOOK_UNIX_MAY_SEND`] | socket file inode (0: abstract) | socket file device | creating session (0: outside) | 0 | bound name (`@` for abstract); `root_dev` its length, `parent_dev` the socket file's owner uid ([`UNIX_OWNER_ANY`]: no file) |
//! | [`HOOK_UNIX_INBOUND`] | as above | as above | the socket's session (also `session`) | 0 | as above |
//! | [`HOOK_SOCKET_CONNECT`], [`HOOK_SOCKET_SENDMSG`] | port | protocol (6 TCP, 17 UDP) | address bytes 0..8 | address bytes 8..16 | |
//! | [`HOOK_SOCKET_BIND`] | port | protocol (6 TCP, 17 UDP) | 0 | 0 | |
//! | [`HOOK_SOCKET_SHARE`] | option (`SO_REUSEADDR` 2, `SO_REUSEPORT` 15) | protocol (17 UDP, 6 TCP) | 0 | 0 | |
//! | [`HOOK_KEY_PERMISSION`] | key serial | permission asked (`KEY_NEED_*`) | creating session (0: outside) | 0 | |
//! | [`HOOK_PTY_OPEN`] | terminal inode | terminal device | 0 | 0 | the terminal's name in `/dev/pts` |
//! | [`HOOK_CGROUP_WRITE`] | file inode | cgroupfs device | access bits asked | 0 | the file's name |
//!
//! Addresses are IPv6 bytes (IPv4 as `::ffff:a.b.c.d`), stored into the two
//! `u64` fields in memory order (read them back with `to_ne_bytes`).

use crate::{Field, Layout};

shared_consts! {
    /// Hook id: `task_kill` (a signal to a process outside the session).
    HOOK_TASK_KILL: u32 = 32;
    /// Hook id: `ptrace_access_check` (ptrace attach, `/proc/PID/mem`, `environ`,
    /// `process_vm_readv`, `pidfd_getfd`, ...).
    HOOK_PTRACE_ACCESS_CHECK: u32 = 33;
    /// Hook id: `ptrace_traceme` (a tracer outside the session).
    HOOK_PTRACE_TRACEME: u32 = 34;
    /// Hook id: `task_setnice`.
    HOOK_TASK_SETNICE: u32 = 35;
    /// Hook id: `task_setioprio`.
    HOOK_TASK_SETIOPRIO: u32 = 36;
    /// Hook id: `task_setscheduler`.
    HOOK_TASK_SETSCHEDULER: u32 = 37;
    /// Hook id: `task_movememory` (`move_pages`, `migrate_pages`).
    HOOK_TASK_MOVEMEMORY: u32 = 38;
    /// Hook id: `file_open` of another process's `/proc/PID/` file for writing.
    HOOK_PROC_WRITE: u32 = 39;
    /// Hook id: `ipc_permission` (SysV object made outside the session).
    HOOK_IPC_PERMISSION: u32 = 40;
    /// Hook id: `shm_shmctl`, `msg_queue_msgctl` or `sem_semctl`.
    HOOK_IPC_CTL: u32 = 41;
    /// Hook id: `unix_stream_connect`.
    HOOK_UNIX_STREAM_CONNECT: u32 = 42;
    /// Hook id: `unix_may_send` (datagram send or connect).
    HOOK_UNIX_MAY_SEND: u32 = 43;
    /// Hook id: `socket_connect` to a port on this host.
    HOOK_SOCKET_CONNECT: u32 = 44;
    /// Hook id: `socket_sendmsg` with an address on this host (UDP `sendto`).
    HOOK_SOCKET_SENDMSG: u32 = 45;
    /// Hook id: `unix_stream_connect` or `unix_may_send` of a process outside
    /// every session to a Unix socket a session created (the session would
    /// serve, and read, what an outside tool sends to a name it expects).
    /// The event's `session` is the socket's session, `pid` and `uid` the
    /// outside caller's.
    HOOK_UNIX_INBOUND: u32 = 46;
    /// Hook id: `key_permission` (a key or keyring the session did not create:
    /// the user's keyrings and their keys).
    HOOK_KEY_PERMISSION: u32 = 47;
    /// Hook id: `file_open` of a pseudo-terminal (`/dev/pts/N`) that is neither
    /// the task's controlling terminal nor one its session created.
    HOOK_PTY_OPEN: u32 = 48;
    /// Hook id: a write, creation, removal or attribute change of a cgroup v2
    /// file or directory outside the session's own cgroup (`cgroup.procs`,
    /// `cgroup.kill`, `cgroup.freeze` of the user's delegated cgroups act on
    /// processes outside the session); always refused.
    HOOK_CGROUP_WRITE: u32 = 49;
    /// Hook id: `socket_bind` of an inet port that a socket outside every session
    /// holds, on any address or family (the session would take the clients that
    /// reach that service through the other address or family: `localhost`
    /// resolves to both).
    HOOK_SOCKET_BIND: u32 = 50;
    /// Hook id: `socket_setsockopt` of `SO_REUSEADDR` or `SO_REUSEPORT` on a session's
    /// UDP socket, or of `SO_REUSEPORT` on its TCP socket. With it on both sockets, the
    /// kernel shares a UDP port between a session's socket and the user's, and picks a
    /// port the user holds for the session's port-0 bind (or its first datagram); and a
    /// TCP listener of the user's started later joins the session's port, whose
    /// listener then takes part of its clients: the session would receive what the
    /// user's clients send to the user's service.
    HOOK_SOCKET_SHARE: u32 = 51;
    /// Hook id: `task_setrlimit` (`prlimit` on a process outside the session).
    HOOK_TASK_SETRLIMIT: u32 = 52;
    /// Hook id: `file_fcntl` (`F_SETOWN`, `F_SETOWN_EX`) or `file_ioctl` (`FIOSETOWN`,
    /// `SIOCSPGRP`) naming an owner of a file's signals other than the caller itself:
    /// the kernel would send that process `SIGIO`, `SIGURG` or the file's `F_SETSIG`
    /// signal on the file's behalf, past `task_kill`. `F_SETOWN_EX`, `FIOSETOWN` and
    /// `SIOCSPGRP` are refused unread (the kernel reads their owner from the caller's
    /// memory after the hook). `ino` is the number asked for, `dev` the command,
    /// `root_ino` the kind (1 process, 2 process group, 3 named in memory).
    HOOK_FILE_SETOWN: u32 = 53;
    /// Hook id: `file_open` or `inode_unlink` (`mq_open`, `open` of
    /// `/dev/mqueue/NAME`, `mq_unlink`) of a POSIX message queue the session did not
    /// make: the user's queue, whose messages a descriptor would take. `ino` the queue's
    /// inode, `dev` its device, `parent_ino` the session that made it (0: none),
    /// `root_ino` the access asked (read: an open; delete), `name` the queue's name.
    HOOK_MQUEUE: u32 = 54;
    /// Hook id: `key_permission` of a link of the caller's own session keyring when its
    /// parent is outside the session (`KEYCTL_SESSION_TO_PARENT` would make the keyring
    /// the parent's, a process of the user's). `ino` the keyring's serial, `dev` the
    /// parent's pid.
    HOOK_KEY_TO_PARENT: u32 = 55;
    /// [`PortKey::session`] of a port bound by a socket outside every session, counted
    /// by the kernel from the bind to the socket's end (address and family 0: the
    /// port on every address).
    PORT_OUTSIDE: u64 = u64::MAX;
    /// [`PortKey::session`] of a port that a socket outside every session held when the
    /// programs were attached (read from `/proc/net` by the daemon, dropped once no
    /// socket holds it).
    PORT_OUTSIDE_SEEN: u64 = u64::MAX - 1;

    /// Event flag: a reach denial (the table in the module docs applies).
    EVENT_FLAG_REACH: u32 = 1 << 8;
    /// [`UNIX_NAMES`](map_names::UNIX_NAMES) value: any owner of the socket file.
    UNIX_OWNER_ANY: u32 = u32::MAX;
    /// Bytes of a Unix socket name (`sun_path`).
    UNIX_NAME_LEN: usize = 108;
}

/// Protocol number of TCP in [`PortKey::proto`] (MPTCP counts as TCP).
pub const PROTO_TCP: u16 = 6;
/// Protocol number of UDP in [`PortKey::proto`] (UDP-Lite counts as UDP).
pub const PROTO_UDP: u16 = 17;

/// Map names of the reach block, written once: the C program names its maps
/// with the macros of [`C_MACROS`](map_names::C_MACROS) (`MAP_SOCKS`, ...).
pub mod map_names {
    /// `HASH` `u64` socket address → owner (kernel-internal; pinned only).
    pub const SOCKS: &str = "pincer_socks";
    /// `HASH` [`PortKey`](super::PortKey) → `u32` (sockets holding it; non-zero for listed ports).
    pub const PORTS: &str = "pincer_ports";
    /// `LPM_TRIE` [`HostAddrKey`](super::HostAddrKey) → `u32`: the destinations this
    /// host's kernel delivers locally (its local routes).
    pub const HOST_ADDRS: &str = "pincer_host_addrs";
    /// `HASH` [`ObjectKey`](crate::ObjectKey) of a socket file → `u32`: sockets every session may reach.
    pub const UNIX_FILES: &str = "pincer_unix_files";
    /// `HASH` [`UnixNameKey`](super::UnixNameKey) → `u32` required owner uid of the socket
    /// file, or [`UNIX_OWNER_ANY`](super::UNIX_OWNER_ANY).
    pub const UNIX_NAMES: &str = "pincer_unix_names";
    /// `HASH` [`UnixNameKey`](super::UnixNameKey) → `u32` (non-zero): names under which a
    /// session's socket may be reached by processes outside every session.
    pub const UNIX_SERVED: &str = "pincer_unix_served";
    /// `HASH` `u64` SysV object address → creating session (kernel-internal; pinned only).
    pub const IPC: &str = "pincer_ipc";
    /// `HASH` `u64` key address → creating session (kernel-internal; pinned only).
    pub const KEYS: &str = "pincer_keys";
    /// `HASH` `u64` address of a pseudo-terminal's slave `tty_struct` → creating
    /// session (kernel-internal; pinned only).
    pub const TTYS: &str = "pincer_ttys";
    /// `PERCPU_ARRAY` scratch space for one name key (kernel-internal; pinned only).
    pub const NAME_SCRATCH: &str = "pincer_name_scratch";
    /// Every map of the reach block, in a fixed order.
    pub const ALL: [&str; 10] = [SOCKS, PORTS, HOST_ADDRS, UNIX_FILES, UNIX_NAMES, UNIX_SERVED, IPC, KEYS, TTYS, NAME_SCRATCH];
    /// The C macro naming each map (`#define MAP_SOCKS pincer_socks`).
    pub const C_MACROS: [(&str, &str); 10] = [
        ("MAP_SOCKS", SOCKS),
        ("MAP_PORTS", PORTS),
        ("MAP_HOST_ADDRS", HOST_ADDRS),
        ("MAP_UNIX_FILES", UNIX_FILES),
        ("MAP_UNIX_NAMES", UNIX_NAMES),
        ("MAP_UNIX_SERVED", UNIX_SERVED),
        ("MAP_IPC", IPC),
        ("MAP_KEYS", KEYS),
        ("MAP_TTYS", TTYS),
        ("MAP_NAME_SCRATCH", NAME_SCRATCH),
    ];
}

shared_struct! {
    /// Key of the port map: an address and port on this host a session may reach, as it
    /// was bound (a session owns the exact address, port and family it bound, not the port
    /// on every address).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct PortKey as "port_key" {
        /// The session that bound it, 0 for a port every session may reach, or
        /// [`PORT_OUTSIDE`] / [`PORT_OUTSIDE_SEEN`] for a port held outside every session.
        pub session: u64,
        /// Port, host byte order.
        pub port: u16,
        /// [`PROTO_TCP`] or [`PROTO_UDP`].
        pub proto: u16,
        /// 4 or 6, or 0 for both (an IPv6 wildcard bind that takes IPv4 too, or a
        /// listed port).
        pub family: u16,
        /// Explicit padding, always zero.
        pub _pad: u16,
        /// The bound address as IPv6 bytes (IPv4 as `::ffff:a.b.c.d`); all zero for a
        /// wildcard bind or a listed port.
        pub addr: [u8; 16],
    }
}

shared_struct! {
    /// Key of the host address map (a longest-prefix-match trie): a prefix of IPv6
    /// addresses (IPv4 as `::ffff:a.b.c.d`, its prefix length counted from bit 0 of
    /// the mapped form, so 96 + the IPv4 length).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct HostAddrKey as "host_addr_key" {
        /// Leading bits of `addr` that the prefix fixes (128 for one address).
        pub prefixlen: u32,
        /// The address bytes, network order.
        pub addr: [u8; 16],
    }
}

shared_struct! {
    /// Key of the Unix name maps: the name a socket was bound to.
    ///
    /// A pathname socket's name is its `sun_path` as given to `bind` with the
    /// terminating NUL; an abstract one starts with a NUL byte. Bytes past `len`
    /// are zero.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct UnixNameKey as "unix_name_key" {
        /// Bytes of `name` in use.
        pub len: u32,
        /// The name.
        pub name: [u8; UNIX_NAME_LEN],
    }
}

/// Every layout of the reach block shared with C (checked against `pincer.h`
/// like [`LAYOUTS`](crate::LAYOUTS)).
pub const LAYOUTS: [Layout; 3] = [PortKey::LAYOUT, HostAddrKey::LAYOUT, UnixNameKey::LAYOUT];

const _: () = crate::assert_no_padding(&LAYOUTS);

#[cfg(feature = "user")]
mod pod {
    // SAFETY: `repr(C)` integers and byte arrays with explicit padding: every
    // bit pattern is valid.
    unsafe impl aya::Pod for super::PortKey {}
    unsafe impl aya::Pod for super::HostAddrKey {}
    unsafe impl aya::Pod for super::UnixNameKey {}
}
