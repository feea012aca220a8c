//! Session containment against reach into other processes and sockets: the
//! userspace side of `pincer-ebpf/src/reach.bpf.c`.
//!
//! For a gated task the kernel allows, besides its own session's processes,
//! SysV objects, Unix sockets and bound ports, only what these maps list:
//! - Unix sockets by socket file ([`Enforcer::allow_unix_socket`]), by bound
//!   path with a required owner of the socket file ([`Enforcer::allow_unix_path`];
//!   the daemon's own socket must be root's, so no user can put a socket under
//!   that name, not even in a mount namespace of its own), or by abstract name
//!   ([`Enforcer::allow_abstract_socket`]);
//! - TCP/UDP ports on this host for every session ([`Enforcer::allow_port`]);
//!   "this host" is loopback, the unspecified, broadcast and multicast
//!   addresses and every prefix the kernel's local routes deliver here
//!   ([`Enforcer::refresh_local_routes`]).
//!
//! In the other direction, a process outside every session reaches a Unix
//! socket a session created only under a name listed with
//! [`Enforcer::allow_session_server`], so a session cannot squat a name an
//! outside tool expects. Keys, keyrings and pseudo-terminals are checked
//! without any list (see `reach.bpf.c`).
//!
//! Remote hosts stay reachable: network egress is not gated.

use super::event::{c_str, read_record};
use super::{hash_table, lpm_table, BoxTable, Enforcer, Hook, KernelError, ObjectId};
use aya::maps::Map;
use aya::programs::links::{FdLink, PinnedLink};
use aya::programs::{FEntry, FExit, ProgramError};
use aya::{Btf, Ebpf};
use pincer_common::reach::{
    map_names, HostAddrKey, PortKey, UnixNameKey, PORT_OUTSIDE_SEEN, PROTO_TCP, PROTO_UDP,
    UNIX_NAME_LEN, UNIX_OWNER_ANY,
};
use pincer_common::ObjectKey;
use std::collections::HashSet;
use std::net::{IpAddr, Ipv6Addr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A transport protocol whose ports on this host are gated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Proto {
    /// TCP (and MPTCP).
    Tcp,
    /// UDP (and UDP-Lite).
    Udp,
}

impl Proto {
    /// The protocol number the kernel keys ports by.
    pub fn number(self) -> u16 {
        match self {
            Proto::Tcp => PROTO_TCP,
            Proto::Udp => PROTO_UDP,
        }
    }

    /// The protocol of a kernel protocol number, if gated.
    pub fn from_number(n: u32) -> Option<Self> {
        match u16::try_from(n).ok()? {
            PROTO_TCP => Some(Proto::Tcp),
            PROTO_UDP => Some(Proto::Udp),
            _ => None,
        }
    }
}

/// A port on this host that every session may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct HostPort {
    /// The protocol.
    pub proto: Proto,
    /// The port.
    pub port: u16,
}

/// What sessions may reach beyond their own processes, objects and ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReachConfig {
    /// Unix socket paths every session may connect to while the socket file is
    /// owned by root: the daemon's own socket. Matched by the path the socket
    /// was bound at, so a socket re-created there (a restarted daemon) stays
    /// reachable.
    pub trusted_sockets: Vec<PathBuf>,
    /// Ports on this host every session may reach. Default: DNS (TCP and UDP
    /// port 53, where systemd-resolved's stub listens on 127.0.0.53; binding a
    /// port below 1024 needs privilege, so no user process can serve there).
    pub host_ports: Vec<HostPort>,
}

impl Default for ReachConfig {
    fn default() -> Self {
        Self {
            trusted_sockets: Vec::new(),
            host_ports: vec![HostPort { proto: Proto::Udp, port: 53 }, HostPort { proto: Proto::Tcp, port: 53 }],
        }
    }
}

impl ReachConfig {
    /// The default, trusting the Unix socket at `socket` (the daemon's).
    pub fn with_trusted_socket(socket: &Path) -> Self {
        Self { trusted_sockets: vec![socket.to_path_buf()], ..Self::default() }
    }
}

/// What a reach denial was about, decoded from its [`ReachEvent`](pincer_common::reach::ReachEvent)
/// (see [`pincer_common::reach`] for which fields each hook fills).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// A process outside the session (signal, ptrace, `/proc/PID/` write, ...).
    Process {
        /// Its process id.
        pid: u32,
        /// Its session (0: outside every session).
        session: u64,
        /// Its `comm` (set by the process itself: informative only).
        comm: String,
        /// Signal number, ptrace mode, nice or ioprio value (hook-specific).
        detail: u32,
    },
    /// A file's signals directed at another process or a process group (`F_SETOWN`), an
    /// owner named in the caller's memory (`F_SETOWN_EX`, `FIOSETOWN`, `SIOCSPGRP`), or
    /// the signal sent to the owner chosen (`F_SETSIG`).
    SignalOwner {
        /// The owner's number as given (in the caller's PID namespace; 0 when in memory),
        /// or the signal `F_SETSIG` named.
        owner: u32,
        /// 1 a process, 2 a process group, 3 named in the caller's memory, 4 the signal.
        kind: u32,
        /// The `fcntl` or `ioctl` command.
        command: u32,
    },
    /// A POSIX message queue the session did not make (opened or removed).
    MessageQueue {
        /// Its name.
        name: String,
        /// Its inode in the mqueue filesystem.
        file: ObjectId,
        /// The session that made it (0: made outside every session).
        session: u64,
        /// The access asked (`ACCESS_READ` for an open, `ACCESS_DELETE` for `mq_unlink`).
        access: u32,
    },
    /// The session's keyring handed to a parent outside the session
    /// (`KEYCTL_SESSION_TO_PARENT`), or linked by a task whose parent is outside.
    KeyringToParent {
        /// The keyring's serial number.
        serial: i32,
        /// The parent's process id.
        parent_pid: u32,
    },
    /// A SysV object not created by the session.
    Ipc {
        /// The IPC id.
        id: u32,
        /// The IPC key.
        key: i32,
    },
    /// A Unix socket not created by the session nor allowed; for
    /// [`Hook::UnixInbound`], a session's socket an outside process tried to reach.
    UnixSocket {
        /// The bound name: a path, or `@` and an abstract name.
        name: String,
        /// The socket file (none for abstract sockets).
        file: Option<ObjectId>,
        /// The socket file's owner (none for abstract sockets).
        owner_uid: Option<u32>,
    },
    /// A key or keyring the session did not create (the user's).
    Key {
        /// The key's serial number.
        serial: i32,
        /// The permission asked (the kernel's `enum key_need_perm`: 1 view,
        /// 2 read, 3 write, 4 search, 5 link, 6 setattr, 7 unlink).
        need: u32,
        /// The key's owner uid.
        owner_uid: u32,
        /// The session that created it (0: made outside every session).
        session: u64,
    },
    /// A pseudo-terminal that is not the task's controlling terminal nor one
    /// its session made.
    Terminal {
        /// Its name in its `devpts` (`3` for `/dev/pts/3`).
        name: String,
        /// Its device node.
        file: ObjectId,
    },
    /// A cgroup file or directory outside the session's own cgroup.
    Cgroup {
        /// The file's name.
        name: String,
        /// The file.
        file: ObjectId,
        /// The access bits asked (`ACCESS_*`).
        access: u32,
    },
    /// A session's share of a quota the kernel keeps per uid, which the user's processes
    /// outside share with it, is spent.
    Quota {
        /// Which: [`QUOTA_KEYS`](pincer_common::reach::QUOTA_KEYS), key bytes, a key's
        /// update, inotify and fanotify instances (`QUOTA_*`).
        which: u32,
        /// What the uid's sessions would hold with it (0 for an update).
        would_hold: u32,
        /// The uid.
        uid: u32,
    },
    /// An object a session made in a shared place (`/tmp`, `/var/tmp`, `/dev/shm`) that a
    /// process outside that session opened with `O_CREAT` or followed (a symlink), as its
    /// own: [`Hook::SharedInbound`].
    SharedObject {
        /// Its name.
        name: String,
        /// The object.
        file: ObjectId,
        /// [`SHARED_OPEN_CREATE`](pincer_common::reach::SHARED_OPEN_CREATE) or
        /// [`SHARED_FOLLOW`](pincer_common::reach::SHARED_FOLLOW).
        how: u32,
    },
    /// A lease on a file ([`Hook::FileLease`]).
    Lease {
        /// The file's name.
        name: String,
        /// The file.
        file: ObjectId,
        /// The lease asked (0 read, 1 write).
        kind: u32,
    },
    /// A UDP socket the session asked to share its port (`SO_REUSEADDR`,
    /// `SO_REUSEPORT`), which would let the kernel give it a port the user holds, or a
    /// TCP socket (`SO_REUSEPORT`), whose port a later listener of the user's would join.
    SharedPort {
        /// The socket option (`SO_REUSEADDR` 2, `SO_REUSEPORT` 15).
        option: u32,
        /// The protocol number.
        proto_number: u32,
    },
    /// A port that a socket outside every session holds, which the session tried to bind
    /// on another address or family.
    TakenPort {
        /// The protocol (`None` for an ungated protocol number).
        proto: Option<Proto>,
        /// The protocol number.
        proto_number: u32,
        /// The port.
        port: u16,
    },
    /// A port on this host the session did not bind and that is not allowed.
    HostPort {
        /// The protocol (`None` for an ungated protocol number).
        proto: Option<Proto>,
        /// The protocol number.
        proto_number: u32,
        /// The destination address.
        addr: IpAddr,
        /// The port.
        port: u16,
    },
}

/// A reach denial: a task of a session was refused an action on something outside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReachDenial {
    /// The denied task's session (cgroup id); for [`Hook::UnixInbound`], the session whose
    /// socket a process outside every session tried to reach; for [`Hook::SharedInbound`],
    /// the session that made the object.
    pub session: u64,
    /// The denied task's process id (thread-group id).
    pub pid: u32,
    /// Its real uid.
    pub uid: u32,
    /// The hook that denied.
    pub hook: Hook,
    /// What it was refused.
    pub reach: Reach,
}

impl ReachDenial {
    /// Decodes one `reach_event` record.
    pub fn decode(bytes: &[u8]) -> Result<Self, KernelError> {
        let e: pincer_common::reach::ReachEvent = read_record(bytes, "reach_event")?;
        let hook = Hook::from_id(e.hook);
        let name = c_str(&e.name);
        let file = ObjectId { dev: e.dev, ino: e.ino };
        let reach = match hook {
            Hook::IpcPermission | Hook::IpcCtl => Reach::Ipc { id: e.target_id, key: e.ipc_key as i32 },
            Hook::UnixStreamConnect | Hook::UnixMaySend | Hook::UnixInbound => Reach::UnixSocket {
                name,
                file: (e.ino != 0).then_some(file),
                owner_uid: (e.target_uid != pincer_common::reach::UNIX_OWNER_ANY).then_some(e.target_uid),
            },
            Hook::SocketConnect | Hook::SocketSendmsg => {
                let v6 = Ipv6Addr::from(e.addr);
                let addr = v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(IpAddr::V6(v6));
                Reach::HostPort { proto: Proto::from_number(e.proto), proto_number: e.proto, addr, port: e.port }
            }
            Hook::SocketShare => Reach::SharedPort { option: e.detail, proto_number: e.proto },
            Hook::SocketBind | Hook::PickedPort => Reach::TakenPort { proto: Proto::from_number(e.proto), proto_number: e.proto, port: e.port },
            Hook::KeyPermission => Reach::Key { serial: e.target_id as i32, need: e.detail, owner_uid: e.target_uid, session: e.target_session },
            Hook::PtyOpen => Reach::Terminal { name, file },
            Hook::CgroupWrite => Reach::Cgroup { name, file, access: e.detail },
            Hook::Quota => Reach::Quota { which: e.detail, would_hold: e.target_id, uid: e.target_uid },
            Hook::SharedInbound => Reach::SharedObject { name, file, how: e.detail },
            Hook::FileLease => Reach::Lease { name, file, kind: e.detail },
            Hook::FileSetown => Reach::SignalOwner { owner: e.target_pid, kind: e.owner_kind, command: e.detail },
            Hook::Mqueue => Reach::MessageQueue { name, file, session: e.target_session, access: e.detail },
            Hook::KeyToParent => Reach::KeyringToParent { serial: e.target_id as i32, parent_pid: e.target_pid },
            _ => Reach::Process { pid: e.target_pid, session: e.target_session, comm: name, detail: e.detail },
        };
        Ok(Self { session: e.session, pid: e.pid, uid: e.uid, hook, reach })
    }
}


/// The reach maps userspace edits, each a [`Table`](super::Table).
pub(super) struct ReachMaps {
    pub(super) ports: BoxTable<PortKey, u32>,
    pub(super) own_ports: BoxTable<PortKey, u32>,
    pub(super) host_addrs: BoxTable<HostAddrKey, u32>,
    pub(super) unix_files: BoxTable<ObjectKey, u32>,
    pub(super) unix_names: BoxTable<UnixNameKey, u32>,
    pub(super) unix_served: BoxTable<UnixNameKey, u32>,
}

impl ReachMaps {
    /// The program's reach maps, each got from `open` (the loaded object, or its pin).
    pub(super) fn bpf(open: &mut impl FnMut(&'static str) -> Result<Map, KernelError>) -> Result<Self, KernelError> {
        Ok(Self {
            ports: hash_table(map_names::PORTS, open(map_names::PORTS)?)?,
            own_ports: hash_table(map_names::OWN_PORTS, open(map_names::OWN_PORTS)?)?,
            host_addrs: lpm_table(map_names::HOST_ADDRS, open(map_names::HOST_ADDRS)?)?,
            unix_files: hash_table(map_names::UNIX_FILES, open(map_names::UNIX_FILES)?)?,
            unix_names: hash_table(map_names::UNIX_NAMES, open(map_names::UNIX_NAMES)?)?,
            unix_served: hash_table(map_names::UNIX_SERVED, open(map_names::UNIX_SERVED)?)?,
        })
    }

    /// Forgets the ports a session bound (its sockets' own records go when they close).
    pub(super) fn revoke_session(&mut self, session: u64) -> Result<(), KernelError> {
        if session == 0 {
            return Ok(());
        }
        for key in self.own_ports.keys()?.into_iter().filter(|k| k.session == session) {
            self.own_ports.remove(&key)?;
        }
        Ok(())
    }
}

/// Whether a tracing program of the reach block runs at a kernel function's
/// entry or exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Trace {
    /// `fentry`: before the function (its arguments are still intact).
    Entry,
    /// `fexit`: after the function returned (its result is known).
    Exit,
}

/// Loads and attaches the reach block's `fexit` and `fentry` programs, pinned
/// under `links_dir`.
pub(super) fn attach_tracing(ebpf: &mut Ebpf, btf: &Btf, links_dir: &Path) -> Result<Vec<PinnedLink>, KernelError> {
    let programs = pincer_ebpf::REACH_FEXIT
        .iter()
        .map(|p| (Trace::Exit, p))
        .chain(pincer_ebpf::REACH_FENTRY.iter().map(|p| (Trace::Entry, p)));
    let mut links = Vec::new();
    for (trace, &(name, function)) in programs {
        let hook = function;
        if pincer_ebpf::OPTIONAL_TRACES.contains(&function) && !kernel_has_function(btf, function) {
            tracing::info!(program = name, function, "this kernel has no such function; skipped");
            continue;
        }
        let program = ebpf.program_mut(name).ok_or(KernelError::MissingProgram { name })?;
        let program_err = |op: &'static str| move |source: ProgramError| KernelError::Program { op, name, hook, source: source.into() };
        let link: FdLink = match trace {
            Trace::Exit => {
                let prog: &mut FExit = program.try_into().map_err(program_err("convert"))?;
                prog.load(function, btf).map_err(program_err("load"))?;
                let id = prog.attach().map_err(program_err("attach"))?;
                prog.take_link(id).map_err(program_err("take link of"))?.into()
            }
            Trace::Entry => {
                let prog: &mut FEntry = program.try_into().map_err(program_err("convert"))?;
                prog.load(function, btf).map_err(program_err("load"))?;
                let id = prog.attach().map_err(program_err("attach"))?;
                prog.take_link(id).map_err(program_err("take link of"))?.into()
            }
        };
        let path = links_dir.join(trace_pin_name(trace, function));
        let pinned = link.pin(&path).map_err(|source| KernelError::Pin { path, source: source.into() })?;
        links.push(pinned);
    }
    Ok(links)
}

/// Whether the kernel's BTF has the function `name` (a tracing program can attach to it).
pub(super) fn kernel_has_function(btf: &Btf, name: &str) -> bool {
    btf.id_by_type_name_kind(name, aya_obj::btf::BtfKind::Func).is_ok()
}

/// The pin name of the link of the tracing program at `function`.
pub(super) fn trace_pin_name(trace: Trace, function: &str) -> String {
    match trace {
        Trace::Exit => format!("fexit_{function}"),
        Trace::Entry => format!("fentry_{function}"),
    }
}

/// The name key of a Unix socket bound at `path` (with its terminating NUL).
pub fn path_name_key(path: &Path) -> Result<UnixNameKey, KernelError> {
    let bytes = path.as_os_str().as_bytes();
    if bytes.is_empty() || bytes.contains(&0) || bytes.len() + 1 > UNIX_NAME_LEN {
        return Err(KernelError::UnixName { name: path.display().to_string() });
    }
    let mut key = UnixNameKey { len: bytes.len() as u32 + 1, name: [0; UNIX_NAME_LEN] };
    key.name[..bytes.len()].copy_from_slice(bytes);
    Ok(key)
}

/// The name key of the abstract Unix socket `name` (without the leading NUL).
pub fn abstract_name_key(name: &[u8]) -> Result<UnixNameKey, KernelError> {
    if name.is_empty() || name.len() + 1 > UNIX_NAME_LEN {
        return Err(KernelError::UnixName { name: format!("@{}", String::from_utf8_lossy(name)) });
    }
    let mut key = UnixNameKey { len: name.len() as u32 + 1, name: [0; UNIX_NAME_LEN] };
    key.name[1..=name.len()].copy_from_slice(name);
    Ok(key)
}

/// The host-address key of the one address `addr` (IPv4 as `::ffff:a.b.c.d`).
pub fn host_addr_key(addr: IpAddr) -> HostAddrKey {
    let v6 = match addr {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    };
    HostAddrKey { prefixlen: 128, addr: v6.octets() }
}

/// The key under which [`Enforcer::seed_outside_ports`] holds `port`.
fn outside_seen_key(port: HostPort) -> PortKey {
    PortKey { session: PORT_OUTSIDE_SEEN, port: port.port, proto: port.proto.number(), ..Default::default() }
}

/// A netlink subscription to this host's address and route changes (`RTMGRP_IPV4_IFADDR`,
/// `RTMGRP_IPV6_IFADDR`, `RTMGRP_IPV4_ROUTE`, `RTMGRP_IPV6_ROUTE`): the daemon reads the
/// local routes again on each, so an address or local route added after it started is
/// gated like the others.
#[derive(Debug)]
pub struct AddressWatch {
    fd: tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>,
}

impl AddressWatch {
    /// Subscribes (needs a tokio runtime).
    pub fn new() -> std::io::Result<Self> {
        use std::os::fd::AsRawFd;
        const RTMGRP_IPV4_IFADDR: u32 = 0x10;
        const RTMGRP_IPV6_IFADDR: u32 = 0x100;
        const RTMGRP_IPV4_ROUTE: u32 = 0x40;
        const RTMGRP_IPV6_ROUTE: u32 = 0x400;
        let fd = route_socket(libc::SOCK_NONBLOCK)?;
        // SAFETY: plain bind(2) on a zeroed sockaddr_nl we own.
        unsafe {
            let mut sa: libc::sockaddr_nl = std::mem::zeroed();
            sa.nl_family = libc::AF_NETLINK as u16;
            sa.nl_groups = RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE;
            let len = std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t;
            if libc::bind(fd.as_raw_fd(), (&sa as *const libc::sockaddr_nl).cast(), len) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // SAFETY: the socket is owned by the `AsyncFd` and never closed or replaced
            // while it is registered.
            let fd = tokio::io::unix::AsyncFd::register_with_interest(
                fd,
                tokio::io::Interest::READABLE,
            )?;
            Ok(Self { fd })
        }
    }

    /// Waits until at least one address change (or a lost one: the socket overran) has
    /// been announced, and takes every pending announcement.
    pub async fn changed(&mut self) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        loop {
            let mut guard = self.fd.readable().await?;
            let mut got = false;
            loop {
                let mut buf = [0u8; 8192];
                // SAFETY: recv into a buffer we own, non-blocking.
                let n = unsafe {
                    libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0)
                };
                if n >= 0 {
                    got = true;
                    continue;
                }
                let e = std::io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EAGAIN) => break,
                    // Announcements were lost: the list must be read again all the same.
                    Some(libc::ENOBUFS) => got = true,
                    _ => return Err(e),
                }
            }
            guard.clear_ready();
            if got {
                return Ok(());
            }
        }
    }
}

/// A destination prefix this host's kernel delivers to itself: a `local`, `broadcast` or
/// `anycast` route of its routing tables (as `ip route show table local` lists them). An
/// address on an interface adds one for itself; on a loopback interface, one for its
/// whole prefix (127.0.0.0/8, or any address put on `lo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LocalRoute {
    /// The prefix's first address.
    pub addr: IpAddr,
    /// Leading bits of `addr` the prefix fixes (32 or 128: one address).
    pub prefix_len: u8,
}

impl From<IpAddr> for LocalRoute {
    /// The route of the one address `addr`.
    fn from(addr: IpAddr) -> Self {
        Self { addr, prefix_len: if addr.is_ipv4() { 32 } else { 128 } }
    }
}

impl LocalRoute {
    /// The key of this prefix in the host address trie (IPv4 in its `::ffff:` form, bits
    /// past the prefix cleared).
    pub fn key(&self) -> HostAddrKey {
        let max = if self.addr.is_ipv4() { 32 } else { 128 };
        let len = u32::from(self.prefix_len.min(max)) + (128 - max as u32);
        let mut key = host_addr_key(self.addr);
        key.prefixlen = len;
        let mut bits = u128::from_be_bytes(key.addr);
        if len < 128 {
            bits &= !(u128::MAX >> len);
        }
        key.addr = bits.to_be_bytes();
        key
    }

    /// Whether `addr` lies in this prefix.
    pub fn contains(&self, addr: IpAddr) -> bool {
        let k = self.key();
        let a = u128::from_be_bytes(host_addr_key(addr).addr);
        let mask = if k.prefixlen == 0 { 0 } else { u128::MAX << (128 - k.prefixlen) };
        a & mask == u128::from_be_bytes(k.addr)
    }
}

/// A new rtnetlink socket (`NETLINK_ROUTE`, close-on-exec, with `flags` added to its type).
fn route_socket(flags: libc::c_int) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: socket(2) whose descriptor the OwnedFd takes.
    unsafe {
        let raw = libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC | flags, libc::NETLINK_ROUTE);
        if raw < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(std::os::fd::OwnedFd::from_raw_fd(raw))
    }
}

/// This host's local routes (see [`LocalRoute`]), read from the kernel's routing tables
/// over rtnetlink (every table, both families).
pub fn local_routes() -> Result<Vec<LocalRoute>, KernelError> {
    dump_local_routes().map_err(KernelError::HostAddresses)
}

/// Asks the kernel for every route (`RTM_GETROUTE` dump) and keeps the local ones.
fn dump_local_routes() -> std::io::Result<Vec<LocalRoute>> {
    use std::os::fd::AsRawFd;
    const RTM_NEWROUTE: u16 = 24;
    const RTM_GETROUTE: u16 = 26;
    const NLMSG_ERROR: u16 = 2;
    const NLMSG_DONE: u16 = 3;
    const NLM_F_REQUEST: u16 = 1;
    const NLM_F_DUMP: u16 = 0x300;
    const RTN_LOCAL: u8 = 2;
    const RTN_BROADCAST: u8 = 3;
    const RTN_ANYCAST: u8 = 4;
    const RTA_DST: u16 = 1;
    const HDR: usize = 16; // struct nlmsghdr
    const RTMSG: usize = 12; // struct rtmsg
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("rtnetlink route dump: {what}"));
    let fd = route_socket(0)?;
    let seq: u32 = 1;
    let mut req = [0u8; HDR + RTMSG];
    req[0..4].copy_from_slice(&((HDR + RTMSG) as u32).to_ne_bytes());
    req[4..6].copy_from_slice(&RTM_GETROUTE.to_ne_bytes());
    req[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    req[8..12].copy_from_slice(&seq.to_ne_bytes());
    req[HDR] = libc::AF_UNSPEC as u8;
    // SAFETY: sendto(2) of a buffer we own to the kernel (a zeroed sockaddr_nl).
    let sent = unsafe {
        let mut sa: libc::sockaddr_nl = std::mem::zeroed();
        sa.nl_family = libc::AF_NETLINK as u16;
        libc::sendto(
            fd.as_raw_fd(),
            req.as_ptr().cast(),
            req.len(),
            0,
            (&sa as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if sent < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // SAFETY: recv(2) into a buffer we own.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        let msgs = &buf[..n as usize];
        let mut off = 0;
        while off + HDR <= msgs.len() {
            let len = u32::from_ne_bytes(msgs[off..off + 4].try_into().expect("4 bytes")) as usize;
            let kind = u16::from_ne_bytes(msgs[off + 4..off + 6].try_into().expect("2 bytes"));
            if len < HDR || off + len > msgs.len() {
                return Err(bad("a message overruns its datagram"));
            }
            let body = &msgs[off + HDR..off + len];
            match kind {
                NLMSG_DONE => {
                    out.sort();
                    out.dedup();
                    return Ok(out);
                }
                NLMSG_ERROR => {
                    let code = body.get(..4).map(|b| i32::from_ne_bytes(b.try_into().expect("4 bytes"))).unwrap_or(-libc::EIO);
                    if code != 0 {
                        return Err(std::io::Error::from_raw_os_error(-code));
                    }
                }
                RTM_NEWROUTE if body.len() >= RTMSG => {
                    let (family, dst_len, kind) = (body[0], body[1], body[7]);
                    if matches!(kind, RTN_LOCAL | RTN_BROADCAST | RTN_ANYCAST) {
                        let mut dst = None;
                        let mut a = RTMSG;
                        while a + 4 <= body.len() {
                            let alen = u16::from_ne_bytes([body[a], body[a + 1]]) as usize;
                            let atype = u16::from_ne_bytes([body[a + 2], body[a + 3]]);
                            if alen < 4 || a + alen > body.len() {
                                return Err(bad("an attribute overruns its route"));
                            }
                            if atype == RTA_DST {
                                dst = Some(&body[a + 4..a + alen]);
                            }
                            a += (alen + 3) & !3;
                        }
                        let addr = match (i32::from(family), dst) {
                            (libc::AF_INET, Some(d)) if d.len() == 4 => IpAddr::from(<[u8; 4]>::try_from(d).expect("4 bytes")),
                            (libc::AF_INET6, Some(d)) if d.len() == 16 => IpAddr::from(<[u8; 16]>::try_from(d).expect("16 bytes")),
                            (libc::AF_INET, None) => IpAddr::from([0u8; 4]),
                            (libc::AF_INET6, None) => IpAddr::from([0u8; 16]),
                            _ => return Err(bad("a route's destination does not fit its family")),
                        };
                        out.push(LocalRoute { addr, prefix_len: dst_len });
                    }
                }
                _ => {}
            }
            off += (len + 3) & !3;
        }
    }
}

/// The TCP ports listening and the UDP ports bound on this host now, on any address and
/// family, as `/proc/net` lists them in the caller's network namespace.
pub fn held_ports() -> Result<HashSet<HostPort>, KernelError> {
    const TCP_LISTEN: &str = "0A";
    const UDP_UNCONNECTED: &str = "07";
    let tables = [
        ("/proc/net/tcp", Proto::Tcp, TCP_LISTEN),
        ("/proc/net/tcp6", Proto::Tcp, TCP_LISTEN),
        ("/proc/net/udp", Proto::Udp, UDP_UNCONNECTED),
        ("/proc/net/udp6", Proto::Udp, UDP_UNCONNECTED),
    ];
    let mut out = HashSet::new();
    for (path, proto, state) in tables {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            // A kernel without IPv6 has no tcp6 or udp6 table.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && path.ends_with('6') => continue,
            Err(source) => return Err(KernelError::HostSockets { path, source }),
        };
        out.extend(parse_socket_table(&text, state).into_iter().map(|port| HostPort { proto, port }));
    }
    Ok(out)
}

/// The local ports of the rows of a `/proc/net/{tcp,udp}[6]` table in `state` (two hex
/// digits); rows that do not parse are skipped.
fn parse_socket_table(text: &str, state: &str) -> Vec<u16> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let mut cols = line.split_whitespace();
            let local = cols.nth(1)?;
            let st = cols.nth(1)?;
            let port = u16::from_str_radix(local.rsplit(':').next()?, 16).ok()?;
            (st.eq_ignore_ascii_case(state) && port != 0).then_some(port)
        })
        .collect()
}

impl Enforcer {
    /// Lets every session connect to the Unix socket whose socket file is `id`.
    pub fn allow_unix_socket(&mut self, id: ObjectId) -> Result<(), KernelError> {
        self.reach.unix_files.insert(ObjectKey { ino: id.ino, dev: id.dev, _pad: 0 }, 1)
    }

    /// Lets every session connect to a Unix socket bound at `path` (exactly
    /// as given to `bind`) while its socket file is owned by `owner` (any
    /// owner if `None`).
    pub fn allow_unix_path(&mut self, path: &Path, owner: Option<u32>) -> Result<(), KernelError> {
        let key = path_name_key(path)?;
        self.insert_unix_name(key, owner.unwrap_or(UNIX_OWNER_ANY))
    }

    /// Lets every session connect to the abstract Unix socket `name` (without
    /// the leading NUL). Abstract names have no owner: whoever holds the name
    /// is reached.
    pub fn allow_abstract_socket(&mut self, name: &[u8]) -> Result<(), KernelError> {
        let key = abstract_name_key(name)?;
        self.insert_unix_name(key, UNIX_OWNER_ANY)
    }

    /// Lets processes outside every session connect or send to a Unix socket a
    /// session bound under `name` (a key from [`path_name_key`] or
    /// [`abstract_name_key`]): a server the user runs inside a session on
    /// purpose. Unlisted, a session's sockets serve only sessions' own
    /// processes, so a session cannot take a name an outside tool expects.
    pub fn allow_session_server(&mut self, name: UnixNameKey) -> Result<(), KernelError> {
        self.reach.unix_served.insert(name, 1)
    }

    fn insert_unix_name(&mut self, key: UnixNameKey, owner: u32) -> Result<(), KernelError> {
        self.reach.unix_names.insert(key, owner)
    }

    /// Lets every session reach `port` on this host.
    pub fn allow_port(&mut self, port: HostPort) -> Result<(), KernelError> {
        let key = PortKey { session: 0, port: port.port, proto: port.proto.number(), ..Default::default() };
        self.reach.ports.insert(key, 1)
    }

    /// Whether a session may reach `port` on some address of this host now: listed for
    /// every session, or bound by the session itself on some address (`session` 0: listed
    /// only). The kernel checks the exact address too.
    pub fn port_reachable(&self, session: u64, port: HostPort) -> Result<bool, KernelError> {
        let of = |k: &PortKey| k.port == port.port && k.proto == port.proto.number();
        let listed = self.reach.ports.keys()?.iter().any(|k| k.session == 0 && of(k));
        Ok(listed || (session != 0 && self.reach.own_ports.keys()?.iter().any(|k| k.session == session && of(k))))
    }

    /// Holds against sessions' binds the ports that sockets outside every session hold
    /// now (read from `/proc/net`): the kernel counts only binds made after its programs
    /// were attached. Ports a session bound are left to it.
    pub fn seed_outside_ports(&mut self) -> Result<(), KernelError> {
        let held = held_ports()?;
        let sessions: HashSet<(u16, u16)> = self.reach.own_ports.keys()?.iter().map(|k| (k.port, k.proto)).collect();
        for p in held {
            if !sessions.contains(&(p.port, p.proto.number())) {
                self.reach.ports.insert(outside_seen_key(p), 1)?;
            }
        }
        Ok(())
    }

    /// Frees the ports held by [`Enforcer::seed_outside_ports`] that no socket holds any
    /// more (a port bound outside since then is counted by the kernel itself).
    pub fn prune_outside_ports(&mut self) -> Result<(), KernelError> {
        let seen: Vec<PortKey> = self.reach.ports.keys()?.into_iter().filter(|k| k.session == PORT_OUTSIDE_SEEN).collect();
        if seen.is_empty() {
            return Ok(());
        }
        let held = held_ports()?;
        for key in seen {
            let Some(proto) = Proto::from_number(u32::from(key.proto)) else { continue };
            if !held.contains(&HostPort { proto, port: key.port }) {
                self.reach.ports.remove(&key)?;
            }
        }
        Ok(())
    }

    /// Makes the kernel's set of this host's local routes (whose ports are gated like
    /// loopback's) exactly `routes`.
    pub fn set_local_routes(&mut self, routes: &[LocalRoute]) -> Result<(), KernelError> {
        let want: HashSet<HostAddrKey> = routes.iter().map(LocalRoute::key).collect();
        let have = self.reach.host_addrs.keys()?;
        for key in have.iter().filter(|k| !want.contains(k)) {
            self.reach.host_addrs.remove(key)?;
        }
        for key in want {
            self.reach.host_addrs.insert(key, 1)?;
        }
        Ok(())
    }

    /// Reads this host's local routes and hands them to the kernel (call again when
    /// they change: [`AddressWatch`]).
    pub fn refresh_local_routes(&mut self) -> Result<(), KernelError> {
        let routes = local_routes()?;
        self.set_local_routes(&routes)
    }

    /// Applies `config`: trusted sockets (owned by root), listed ports and this
    /// host's addresses. Idempotent.
    pub fn apply_reach(&mut self, config: &ReachConfig) -> Result<(), KernelError> {
        for socket in &config.trusted_sockets {
            self.allow_unix_path(socket, Some(0))?;
        }
        for port in &config.host_ports {
            self.allow_port(*port)?;
        }
        self.seed_outside_ports()?;
        self.refresh_local_routes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_key_keeps_the_terminating_nul_and_abstract_key_the_leading_one() {
        let k = path_name_key(Path::new("/run/pincer/pincer.sock")).unwrap();
        assert_eq!(k.len as usize, "/run/pincer/pincer.sock".len() + 1);
        assert_eq!(&k.name[..4], b"/run");
        assert_eq!(k.name[k.len as usize - 1], 0);
        let a = abstract_name_key(b"deputy").unwrap();
        assert_eq!((a.len, a.name[0], &a.name[1..7]), (7, 0, &b"deputy"[..]));
        assert!(a.name[7..].iter().all(|b| *b == 0));
    }

    #[test]
    fn names_that_do_not_fit_sun_path_are_refused_with_the_name() {
        let long = PathBuf::from(format!("/{}", "x".repeat(107)));
        let e = path_name_key(&long).unwrap_err().to_string();
        assert!(e.contains("xxx"), "{e}");
        assert!(path_name_key(Path::new("")).is_err());
        assert!(abstract_name_key(b"").is_err());
        assert!(abstract_name_key(&[b'a'; 107]).is_ok());
        assert!(abstract_name_key(&[b'a'; 108]).is_err());
    }

    #[test]
    fn ipv4_host_addresses_are_keyed_v4_mapped() {
        let k = host_addr_key("10.0.2.15".parse().unwrap());
        assert_eq!(k.addr, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 2, 15]);
        assert_eq!(host_addr_key("::1".parse().unwrap()).addr[15], 1);
    }

    #[test]
    fn default_config_lets_dns_through_and_trusts_no_socket() {
        let c = ReachConfig::default();
        assert!(c.trusted_sockets.is_empty());
        assert!(c.host_ports.contains(&HostPort { proto: Proto::Udp, port: 53 }));
        assert!(c.host_ports.contains(&HostPort { proto: Proto::Tcp, port: 53 }));
        let t = ReachConfig::with_trusted_socket(Path::new("/run/pincer/pincer.sock"));
        assert_eq!(t.trusted_sockets, vec![PathBuf::from("/run/pincer/pincer.sock")]);
    }

    /// A reach record of `hook` from session 9, its fields set by `fill`.
    fn reach_event(hook: u32, fill: impl FnOnce(&mut pincer_common::reach::ReachEvent)) -> ReachDenial {
        let mut e = pincer_common::reach::ReachEvent {
            record: pincer_common::EVENT_RECORD_REACH,
            hook,
            session: 9,
            target_session: 0,
            ino: 0,
            dev: 0,
            pid: 42,
            uid: 1000,
            target_pid: 0,
            target_id: 0,
            target_uid: 0,
            detail: 0,
            ipc_key: 0,
            proto: 0,
            owner_kind: 0,
            port: 0,
            name_len: 0,
            _pad: 0,
            addr: [0; 16],
            name: [0; pincer_common::EVENT_NAME_LEN],
        };
        e.name[..4].copy_from_slice(b"sshd");
        fill(&mut e);
        // SAFETY: ReachEvent is repr(C) plain data.
        let bytes = unsafe {
            std::slice::from_raw_parts((&e as *const pincer_common::reach::ReachEvent).cast::<u8>(), std::mem::size_of_val(&e))
        };
        match super::super::KernelEvent::decode(bytes).unwrap() {
            super::super::KernelEvent::Reach(r) => r,
            other => panic!("a reach record decoded as {other:?}"),
        }
    }

    #[test]
    fn reach_records_decode_their_target() {
        use pincer_common::reach::*;
        let lo = host_addr_key("127.0.0.53".parse().unwrap()).addr;
        let m = reach_event(HOOK_SOCKET_SENDMSG, |e| (e.port, e.proto, e.addr) = (53, 17, lo));
        assert_eq!((m.hook, m.session, m.pid, m.uid), (Hook::SocketSendmsg, 9, 42, 1000));
        assert_eq!(m.reach, Reach::HostPort { proto: Some(Proto::Udp), proto_number: 17, addr: "127.0.0.53".parse().unwrap(), port: 53 });
        let v6 = host_addr_key("::1".parse().unwrap()).addr;
        let c = reach_event(HOOK_SOCKET_CONNECT, |e| (e.port, e.proto, e.addr) = (8080, 6, v6));
        assert!(matches!(c.reach, Reach::HostPort { addr, port: 8080, .. } if addr == "::1".parse::<IpAddr>().unwrap()));
        let k = reach_event(HOOK_TASK_KILL, |e| (e.target_pid, e.detail, e.target_session) = (1234, 9, 0));
        assert_eq!(k.hook, Hook::TaskKill);
        assert_eq!(k.reach, Reach::Process { pid: 1234, session: 0, comm: "sshd".into(), detail: 9 });
        let key = reach_event(HOOK_KEY_PERMISSION, |e| (e.target_id, e.detail, e.target_uid, e.target_session) = (0x1234_5678, 2, 1000, 5));
        assert_eq!(key.reach, Reach::Key { serial: 0x1234_5678, need: 2, owner_uid: 1000, session: 5 });
        let pty = reach_event(HOOK_PTY_OPEN, |e| (e.ino, e.dev) = (6, 0x1234));
        assert_eq!(pty.hook, Hook::PtyOpen);
        assert_eq!(pty.reach, Reach::Terminal { name: "sshd".into(), file: ObjectId { dev: 0x1234, ino: 6 } });
        let inbound = reach_event(HOOK_UNIX_INBOUND, |e| e.target_uid = UNIX_OWNER_ANY);
        assert_eq!(inbound.reach, Reach::UnixSocket { name: "sshd".into(), file: None, owner_uid: None });
        let file = reach_event(HOOK_UNIX_STREAM_CONNECT, |e| (e.ino, e.dev, e.target_uid) = (5, 6, 1000));
        assert_eq!(file.reach, Reach::UnixSocket { name: "sshd".into(), file: Some(ObjectId { dev: 6, ino: 5 }), owner_uid: Some(1000) });
        let ipc = reach_event(HOOK_IPC_PERMISSION, |e| (e.target_id, e.ipc_key, e.detail) = (7, (-1i32) as u32, 4));
        assert_eq!(ipc.reach, Reach::Ipc { id: 7, key: -1 });
        let own = reach_event(HOOK_FILE_SETOWN, |e| (e.target_pid, e.owner_kind, e.detail) = (77, 1, 8));
        assert_eq!(own.reach, Reach::SignalOwner { owner: 77, kind: 1, command: 8 });
        let cg = reach_event(HOOK_CGROUP_WRITE, |e| (e.ino, e.dev, e.detail) = (3, 4, pincer_common::ACCESS_WRITE));
        assert!(matches!(cg.reach, Reach::Cgroup { ref name, access, .. } if name == "sshd" && access == pincer_common::ACCESS_WRITE));
        let bind = reach_event(HOOK_SOCKET_BIND, |e| (e.port, e.proto) = (8080, 6));
        assert_eq!(bind.reach, Reach::TakenPort { proto: Some(Proto::Tcp), proto_number: 6, port: 8080 });
        let mq = reach_event(HOOK_MQUEUE, |e| (e.ino, e.dev, e.target_session, e.detail) = (8, 9, 0, pincer_common::ACCESS_DELETE));
        assert_eq!(mq.reach, Reach::MessageQueue { name: "sshd".into(), file: ObjectId { dev: 9, ino: 8 }, session: 0, access: pincer_common::ACCESS_DELETE });
        let parent = reach_event(HOOK_KEY_TO_PARENT, |e| (e.target_id, e.target_pid) = (55, 1200));
        assert_eq!(parent.reach, Reach::KeyringToParent { serial: 55, parent_pid: 1200 });
        let quota = reach_event(pincer_common::reach::HOOK_QUOTA, |e| (e.detail, e.target_id, e.target_uid) = (pincer_common::reach::QUOTA_NOTIFY, 65, 1000));
        assert_eq!(quota.hook, Hook::Quota);
        assert_eq!(quota.reach, Reach::Quota { which: pincer_common::reach::QUOTA_NOTIFY, would_hold: 65, uid: 1000 });
        let share = reach_event(HOOK_SOCKET_SHARE, |e| (e.detail, e.proto) = (15, 6));
        assert_eq!(share.reach, Reach::SharedPort { option: 15, proto_number: 6 });
    }

    #[test]
    fn socket_tables_give_the_ports_in_the_state_asked() {
        let tcp = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1
   1: 0100007F:A2C4 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 2 1
   2: 00000000000000000000000001000000:0016 00000000000000000000000000000000:0000 0A 0 0 0 0 0 3
   3: garbage
";
        assert_eq!(parse_socket_table(tcp, "0A"), vec![8080, 22]);
        assert_eq!(parse_socket_table(tcp, "01"), vec![0xA2C4]);
    }

    #[test]
    fn local_routes_include_loopbacks_prefix() {
        let routes = local_routes().unwrap();
        let lo = routes.iter().find(|r| r.contains("127.0.0.1".parse().unwrap())).expect("127.0.0.0/8");
        assert!(lo.contains("127.9.8.7".parse().unwrap()), "{routes:?}");
        assert!(!routes.iter().any(|r| r.contains("192.0.2.1".parse().unwrap())), "{routes:?}");
    }

    #[test]
    fn a_routes_key_is_its_prefix_in_the_mapped_form() {
        let r = LocalRoute { addr: "198.18.79.61".parse().unwrap(), prefix_len: 24 };
        let k = r.key();
        assert_eq!(k.prefixlen, 96 + 24);
        assert_eq!(k.addr, host_addr_key("198.18.79.0".parse().unwrap()).addr);
        assert!(r.contains("198.18.79.77".parse().unwrap()));
        assert!(!r.contains("198.18.80.1".parse().unwrap()));
        let one = LocalRoute::from("::1".parse::<IpAddr>().unwrap());
        assert_eq!(one.key(), host_addr_key("::1".parse().unwrap()));
    }
}
