//! Layouts of session containment against reach into other processes and
//! sockets (`pincer-ebpf/src/reach.bpf.c`). Like the crate's own, the
//! constants and map names are written only here (the build script of
//! `pincer-ebpf` generates them into C) and the structs' C twins in
//! `pincer-ebpf/src/pincer.h` are checked against [`LAYOUTS`].
//!
//! A denial here is reported as a [`ReachEvent`] record on the ring buffer (its
//! `record` is [`EVENT_RECORD_REACH`](crate::EVENT_RECORD_REACH)); each hook fills the
//! fields that name what it refused, and leaves the others 0:
//!
//! | hook | fields |
//! | --- | --- |
//! | process hooks, [`HOOK_PROC_WRITE`] | `target_pid`, `target_session`, `detail` (signal, ptrace mode, nice, ioprio or resource), `name` (the target's `comm`) |
//! | [`HOOK_FILE_SETOWN`] | `target_pid` (the owner's number in the caller's PID namespace), `detail` (`fcntl` or `ioctl` command), `owner_kind` (1 process, 2 process group, 3 named in memory, 4 the signal `F_SETSIG` names, in `target_pid`) |
//! | [`HOOK_MQUEUE`] | `ino`, `dev` (the queue), `target_session` (the session that made it; 0: none), `detail` (the access asked: read for an open, delete for `mq_unlink`), `name` (the queue's name) |
//! | [`HOOK_KEY_TO_PARENT`] | `target_id` (the session keyring's serial), `target_pid` (the parent's pid) |
//! | [`HOOK_IPC_PERMISSION`], [`HOOK_IPC_CTL`] | `target_id` (IPC id), `ipc_key`, `detail` (access flag or command), `target_session` |
//! | [`HOOK_UNIX_STREAM_CONNECT`], [`HOOK_UNIX_MAY_SEND`], [`HOOK_UNIX_INBOUND`] | `ino`, `dev` (the socket file; 0: abstract), `target_session`, `target_uid` (the socket file's owner; [`UNIX_OWNER_ANY`]: no file), `name` and `name_len` (the bound name, `@` first for an abstract one) |
//! | [`HOOK_SOCKET_CONNECT`], [`HOOK_SOCKET_SENDMSG`] | `proto` (6 TCP, 17 UDP), `port`, `addr` |
//! | [`HOOK_SOCKET_BIND`] | `proto`, `port` |
//! | [`HOOK_PICKED_PORT`] | `proto`, `port`, `detail` (1 listen, 2 accept, 3 receive) |
//! | [`HOOK_SOCKET_SHARE`] | `proto`, `detail` (the option: `SO_REUSEADDR` 2, `SO_REUSEPORT` 15) |
//! | [`HOOK_KEY_PERMISSION`] | `target_id` (the key's serial), `detail` (`KEY_NEED_*`), `target_session`, `target_uid` (the key's owner) |
//! | [`HOOK_PTY_OPEN`] | `ino`, `dev` (the terminal), `target_session`, `name` (its name in `/dev/pts`) |
//! | [`HOOK_CGROUP_WRITE`] | `ino`, `dev` (the file), `detail` (the access bits asked), `name` |
//! | [`HOOK_QUOTA`] | `detail` (which quota: [`QUOTA_KEYS`], ...), `target_id` (what the uid's sessions would hold), `target_uid` (the uid) |
//! | [`HOOK_FILE_LEASE`] | `ino`, `dev` (the file), `detail` (0 read lease, 1 write lease), `name` |
//! | [`HOOK_SHARED_INBOUND`] | `ino`, `dev` (the object), `target_session` (the session that made it), `detail` ([`SHARED_OPEN_CREATE`] or [`SHARED_FOLLOW`]), `name` (its name) |
//!
//! Addresses are IPv6 bytes in network order (IPv4 as `::ffff:a.b.c.d`).

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
    /// Hook id: `socket_listen` or `socket_accept` of a session's TCP socket, or
    /// `socket_recvmsg` of its unconnected UDP socket, whose port a socket outside every
    /// session holds, on another address or family: a port the kernel picked for the
    /// session (a bind to port 0, a `listen` without a bind, a first datagram), past
    /// `socket_bind`, which refuses such a port only when the session names it. `port`,
    /// `proto`, `detail` (1 listen, 2 accept, 3 receive).
    HOOK_PICKED_PORT: u32 = 56;
    /// Hook id: a session's share of a quota the kernel keeps per uid, which the user's
    /// processes outside share with it, is spent: `key_alloc` of a key past the share of
    /// keys or key bytes (refused, `EDQUOT`), `key_permission` to write (update) a key of
    /// the session's (refused: the kernel would charge the bytes it grows by past the
    /// share, unseen), or a new inotify or fanotify instance past the share of fsnotify
    /// groups (`fsnotify_alloc_group`, which no hook can refuse: the process that made it
    /// is killed, and its instances go with it), or a charge to a count the kernel keeps
    /// per uid against a limit (processes, queued signals, message queue bytes, locked
    /// memory, inotify watches, fanotify marks, pipe pages, epoll watches) that would take
    /// the uid's count past half
    /// the limit. `detail` the quota ([`QUOTA_KEYS`], [`QUOTA_KEY_BYTES`],
    /// [`QUOTA_KEY_UPDATE`], [`QUOTA_NOTIFY`], ..., [`QUOTA_LIMIT_RAISE`]), `target_id`
    /// what the uid's sessions (for the per-uid counts: the uid) would hold with it,
    /// `target_uid` the uid.
    HOOK_QUOTA: u32 = 57;
    /// [`HOOK_QUOTA`] `detail`: keys (`kernel/keys/maxkeys`).
    QUOTA_KEYS: u32 = 1;
    /// [`HOOK_QUOTA`] `detail`: key bytes (`kernel/keys/maxbytes`).
    QUOTA_KEY_BYTES: u32 = 2;
    /// [`HOOK_QUOTA`] `detail`: an update of a key of the session's.
    QUOTA_KEY_UPDATE: u32 = 3;
    /// [`HOOK_QUOTA`] `detail`: inotify and fanotify instances
    /// (`fs/inotify/max_user_instances`).
    QUOTA_NOTIFY: u32 = 4;
    /// [`HOOK_QUOTA`] `detail`: objects a session made in shared places
    /// ([`SHARED_MADE_PER_SESSION`]).
    QUOTA_SHARED_MADE: u32 = 5;
    /// [`HOOK_QUOTA`] `detail`: processes and threads (`task_alloc`, against half the
    /// caller's `RLIMIT_NPROC`; refused with `EAGAIN`).
    QUOTA_PROCESSES: u32 = 6;
    /// [`HOOK_QUOTA`] `detail`: queued signals (`task_kill`, against half the receiver's
    /// `RLIMIT_SIGPENDING`; `EAGAIN`).
    QUOTA_SIGNALS: u32 = 7;
    /// [`HOOK_QUOTA`] `detail`: POSIX message queue bytes (`inode_create` on the mqueue
    /// filesystem, the largest queue counted, against half the caller's
    /// `RLIMIT_MSGQUEUE`; `EMFILE`).
    QUOTA_QUEUE_BYTES: u32 = 8;
    /// [`HOOK_QUOTA`] `detail`: locked shared memory pages (`shm_shmctl` `SHM_LOCK`,
    /// against half the caller's `RLIMIT_MEMLOCK`; `ENOMEM`).
    QUOTA_LOCKED: u32 = 9;
    /// [`HOOK_QUOTA`] `detail`: inotify watches (`path_notify`, against half of
    /// `fs/inotify/max_user_watches`; `ENOSPC`).
    QUOTA_WATCHES: u32 = 10;
    /// [`HOOK_QUOTA`] `detail`: pipe buffer pages (a pipe's inode, `F_SETPIPE_SZ`,
    /// against half of `fs/pipe-user-pages-soft`; `ENFILE`).
    QUOTA_PIPE_PAGES: u32 = 11;
    /// [`HOOK_QUOTA`] `detail`: a session raising its soft limit of one of the four
    /// per-uid rlimits (`task_setrlimit`; `EPERM`); `target_id` is the resource.
    QUOTA_LIMIT_RAISE: u32 = 12;
    /// [`HOOK_QUOTA`] `detail`: epoll watches (`fexit/do_epoll_ctl`, against half of
    /// `fs/epoll/max_user_watches`; no hook refuses one, so the process is killed).
    QUOTA_EPOLL_WATCHES: u32 = 13;
    /// [`HOOK_QUOTA`] `detail`: fanotify marks (`path_notify` from `fanotify_mark`, against
    /// half of `fs/fanotify/max_user_marks` as it is when the mark is made; `ENOSPC`).
    QUOTA_FANOTIFY_MARKS: u32 = 14;
    /// Hook id: `file_open` with `O_CREAT` of an object that exists, or
    /// `inode_follow_link` of a symlink, by a process outside the session that made the
    /// object in a shared place: a world-writable sticky directory (`/tmp`, `/var/tmp`,
    /// `/dev/shm`) or a directory a session made there. The kernel's own
    /// `fs.protected_regular`, `protected_fifos` and `protected_symlinks` refuse the same
    /// to another uid; a session is the user's uid, so the program refuses it in their
    /// place (the user's program would take the session's file for its own, write its
    /// state where the session reads it, or follow the session's link to a file of the
    /// user's). The event's `session` is the object's session, `pid` and `uid` the
    /// caller's.
    HOOK_SHARED_INBOUND: u32 = 58;
    /// Hook id: `file_fcntl` `F_SETLEASE` (a read or write lease) by a session: every
    /// other process that opens (write lease) or writes (read lease) the file would wait
    /// for the session, up to `fs.lease-break-time` each time. `ino`, `dev` (the file),
    /// `detail` (the lease asked: 0 read, 1 write), `name`.
    HOOK_FILE_LEASE: u32 = 59;
    /// [`HOOK_SHARED_INBOUND`] `detail`: an open with `O_CREAT` of the object.
    SHARED_OPEN_CREATE: u32 = 1;
    /// [`HOOK_SHARED_INBOUND`] `detail`: a follow of the symlink.
    SHARED_FOLLOW: u32 = 2;
    /// Objects one session may have made in shared places at once (of
    /// [`SHARED_MADE_MAX`]): past them its next creation there is refused (`EDQUOT`),
    /// so no session fills the record for the others.
    SHARED_MADE_PER_SESSION: u32 = 4096;
    /// Objects sessions made in shared places that the kernel records at once; an object
    /// that cannot be recorded is not made.
    SHARED_MADE_MAX: u32 = 32768;
    /// [`PortKey::session`] of a port bound by a socket outside every session, counted
    /// by the kernel from the bind to the socket's end (address and family 0: the
    /// port on every address).
    PORT_OUTSIDE: u64 = u64::MAX;
    /// [`PortKey::session`] of a port that a socket outside every session held when the
    /// programs were attached (read from `/proc/net` by the daemon, dropped once no
    /// socket holds it).
    PORT_OUTSIDE_SEEN: u64 = u64::MAX - 1;

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
    /// `HASH` [`PortKey`](super::PortKey) → `u32` (sockets holding it; non-zero for listed
    /// ports): the ports held against sessions, listed (session 0) or held outside every
    /// session ([`PORT_OUTSIDE`](super::PORT_OUTSIDE), [`PORT_OUTSIDE_SEEN`](super::PORT_OUTSIDE_SEEN)).
    /// No session writes here, so none can fill it.
    pub const PORTS: &str = "pincer_ports";
    /// `HASH` [`PortKey`](super::PortKey) → `u32` (sockets holding it): the ports sessions
    /// bound, each under its session (kernel-written; userspace forgets a session's).
    pub const OWN_PORTS: &str = "pincer_own_ports";
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
    /// `HASH` `u64` key address → the creating session, the uid and the bytes its share
    /// was charged (kernel-internal; pinned only).
    pub const KEYS: &str = "pincer_keys";
    /// `HASH` `u32` uid → what that uid's sessions together hold of the kernel's per-user
    /// quotas: keys, key bytes, fsnotify groups (kernel-internal; pinned only).
    pub const QUOTAS: &str = "pincer_quotas";
    /// `HASH` `u64` address of a session's fsnotify group → the uid it is counted to
    /// (kernel-internal; pinned only).
    pub const NOTIFY_GROUPS: &str = "pincer_notify_groups";
    /// `HASH` `u64` address of a pseudo-terminal's slave `tty_struct` → creating
    /// session (kernel-internal; pinned only).
    pub const TTYS: &str = "pincer_ttys";
    /// `TASK_STORAGE` scratch space for one name key per task (kernel-internal; pinned
    /// only): a per-CPU slot could be rewritten by another task that preempts the one
    /// building its key, between the key's writing and its lookup.
    pub const NAME_SCRATCH: &str = "pincer_name_scratch";
    /// Every map of the reach block, in a fixed order.
    pub const ALL: [&str; 13] = [SOCKS, PORTS, OWN_PORTS, HOST_ADDRS, UNIX_FILES, UNIX_NAMES, UNIX_SERVED, IPC, KEYS, TTYS, NAME_SCRATCH, QUOTAS, NOTIFY_GROUPS];
    /// The C macro naming each map (`#define MAP_SOCKS pincer_socks`).
    pub const C_MACROS: [(&str, &str); 13] = [
        ("MAP_SOCKS", SOCKS),
        ("MAP_PORTS", PORTS),
        ("MAP_OWN_PORTS", OWN_PORTS),
        ("MAP_HOST_ADDRS", HOST_ADDRS),
        ("MAP_UNIX_FILES", UNIX_FILES),
        ("MAP_UNIX_NAMES", UNIX_NAMES),
        ("MAP_UNIX_SERVED", UNIX_SERVED),
        ("MAP_IPC", IPC),
        ("MAP_KEYS", KEYS),
        ("MAP_TTYS", TTYS),
        ("MAP_NAME_SCRATCH", NAME_SCRATCH),
        ("MAP_QUOTAS", QUOTAS),
        ("MAP_NOTIFY_GROUPS", NOTIFY_GROUPS),
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

shared_struct! {
    /// One reach denial, as pushed by the kernel on the ring buffer: a task of a session
    /// refused an action on a process, socket, key, terminal or cgroup file outside it.
    /// Which fields a hook fills is in the module docs; the rest are 0.
    #[derive(Clone, Copy)]
    pub struct ReachEvent as "reach_event" {
        /// [`EVENT_RECORD_REACH`](crate::EVENT_RECORD_REACH).
        pub record: u32,
        /// Which hook denied (`HOOK_*`).
        pub hook: u32,
        /// The session (cgroup id) of the denied task; for [`HOOK_UNIX_INBOUND`], the
        /// session whose socket a process outside every session tried to reach.
        pub session: u64,
        /// The session that made the target (a process's, an IPC object's, a socket's,
        /// a key's, a terminal's); 0: made outside every session.
        pub target_session: u64,
        /// Inode of the target's file (a socket file, a terminal, a cgroup file), or 0.
        pub ino: u64,
        /// Kernel device of that file (see [`kernel_dev`](crate::kernel_dev)), or 0.
        pub dev: u32,
        /// Thread-group id (process id) of the denied task.
        pub pid: u32,
        /// Real uid of the denied task.
        pub uid: u32,
        /// The target process's id (for `F_SETOWN`, the owner's number as given).
        pub target_pid: u32,
        /// The IPC id or the key's serial.
        pub target_id: u32,
        /// The owner uid of the key or of the Unix socket file.
        pub target_uid: u32,
        /// A number the hook names: a signal, ptrace mode, nice or ioprio value, resource,
        /// `fcntl` or `ioctl` command, IPC access flag or command, `KEY_NEED_*`, socket
        /// option, or access bits.
        pub detail: u32,
        /// The SysV IPC key (its bits; the kernel's `key_t` is signed).
        pub ipc_key: u32,
        /// The protocol number (6 TCP, 17 UDP).
        pub proto: u32,
        /// For `F_SETOWN`: the kind of owner named (1 process, 2 process group, 3 named in memory).
        pub owner_kind: u32,
        /// The port, host byte order.
        pub port: u16,
        /// Bytes of a Unix socket's bound name (`sun_path` as bound).
        pub name_len: u16,
        /// Explicit padding, always zero.
        pub _pad: u32,
        /// The destination address as IPv6 bytes, network order (IPv4 as `::ffff:a.b.c.d`).
        pub addr: [u8; 16],
        /// A name the hook gives (NUL-terminated): a process's `comm`, a socket's bound
        /// name, a terminal's or a cgroup file's name.
        pub name: [u8; crate::EVENT_NAME_LEN],
    }
}

/// Every layout of the reach block shared with C (checked against `pincer.h`
/// like [`LAYOUTS`](crate::LAYOUTS)).
pub const LAYOUTS: [Layout; 4] = [PortKey::LAYOUT, HostAddrKey::LAYOUT, UnixNameKey::LAYOUT, ReachEvent::LAYOUT];

const _: () = crate::assert_no_padding(&LAYOUTS);

#[cfg(feature = "user")]
mod pod {
    // SAFETY: `repr(C)` integers and byte arrays with explicit padding: every
    // bit pattern is valid.
    unsafe impl aya::Pod for super::PortKey {}
    unsafe impl aya::Pod for super::HostAddrKey {}
    unsafe impl aya::Pod for super::UnixNameKey {}
}
