// SPDX-License-Identifier: GPL-2.0
/* Pincer BPF LSM: no reach into other processes, no deputies.
 *
 * #included at the end of pincer.bpf.c (it uses its maps and helpers). For a
 * gated task (one whose cgroup, or an ancestor, is a registered session):
 * - signals, ptrace and everything that checks ptrace access (/proc/PID/mem,
 *   environ, maps, fd, process_vm_readv, pidfd_getfd, kcmp), nice, ioprio,
 *   scheduler and page moves, resource limits (prlimit), writes to /proc/PID/
 *   files, and PTRACE_TRACEME reach only tasks of the same session;
 * - a file's signals (SIGIO, SIGURG, F_SETSIG's) are directed only at the
 *   caller itself (F_SETOWN), never by an owner read from memory;
 * - SysV shared memory, message queues and semaphores are usable only when a
 *   task of the same session created them;
 * - Unix sockets (pathname and abstract, stream and datagram) are reachable
 *   only when a task of the same session created the listening or receiving
 *   socket, or the socket file is allowed (MAP_UNIX_FILES), or its bound
 *   name is allowed (MAP_UNIX_NAMES, optionally only when the socket file
 *   has a given owner: the daemon's socket must be root's);
 * - TCP/UDP to an address that reaches this host (127.0.0.0/8, ::1, 0.0.0.0,
 *   ::, v4-mapped forms, broadcast and multicast, and every prefix the
 *   kernel's local routes deliver here, in MAP_HOST_ADDRS) reach only ports the same session bound
 *   itself (recorded after a successful bind, or when a listening or UDP
 *   socket reports its port) or ports listed for every session (session 0);
 * - a session cannot bind a TCP/UDP port that a socket outside every session
 *   holds, on any address or family (it would take that service's clients);
 * - a process outside every session cannot connect or send to a Unix socket a
 *   session created (the session would serve, and read, what an outside tool
 *   sends to a name it expects) unless the name is listed (MAP_UNIX_SERVED);
 * - keys and keyrings are usable only when the same session created them (the
 *   user's keyrings and keys are not);
 * - a pseudo-terminal slave opens only if it is the task's controlling
 *   terminal or its session opened the pty's master.
 * Remote hosts stay reachable: network egress is not gated here.
 * Each denial is reported on the ring buffer as a reach_event record (pincer.h). */

#include <bpf/bpf_endian.h>

#define EPERM 1
#define ENOMEM 12
#define AF_UNSPEC 0
#define AF_UNIX 1
#define AF_INET 2
#define AF_INET6 10
#define IPPROTO_ICMP 1
#define IPPROTO_TCP 6
#define IPPROTO_UDP 17
#define IPPROTO_ICMPV6 58
#define IPPROTO_UDPLITE 136
#define IPPROTO_MPTCP 262
#define SOCK_DGRAM 2
#define SOL_SOCKET 1
#define SO_REUSEADDR 2
#define SO_REUSEPORT 15
#define TCP_ESTABLISHED 1
#define TCP_LISTEN 10
#define PTRACE_MODE_NOAUDIT 0x04
#define PTS_FIRST_INO 3 /* devpts: 1 is its root, 2 ptmx, N + 3 the pty N */
#define KEY_ALLOC_NOT_IN_QUOTA 0x0002
#define KEY_ALLOC_UID_KEYRING 0x0010
#define UNIX_PATH_MAX 108
#define F_SETOWN 8
#define F_SETOWN_EX 15
#define F_SETSIG 10
#define F_SET_RW_HINT 1036 /* F_LINUX_SPECIFIC_BASE + 12: the inode's write hint */
#define F_OWNER_TID 0
#define F_OWNER_PID 1
#define F_OWNER_PGRP 2
#define OWNER_IN_MEMORY 3 /* an owner named in the caller's memory, not read */
#define OWNER_SIGNAL 4 /* the signal sent to whoever owns the file's signals */
#define FIOSETOWN 0x8901
#define FIOASYNC 0x5452
#define F_SETFL 4
#define F_SETLEASE 1024
#define FASYNC 020000 /* O_ASYNC */
#define SIGIO 29
#define SIOCSPGRP 0x8902
#define MQUEUE_MAGIC 0x19800202
#define KEY_NEED_WRITE 3 /* enum key_need_perm */
#define KEY_NEED_LINK 5
#define FSNOTIFY_GROUP_USER 0x01 /* a group a process asked for (inotify, fanotify) */
#define SIGKILL 9
#define EAGAIN 11
#define ENOSPC 28
#define ENFILE 23
#define F_SETPIPE_SZ 1031 /* F_LINUX_SPECIFIC_BASE + 7 */
#define SHM_LOCK 11
#define PIPEFS_MAGIC 0x50495045
#define RLIMIT_NPROC 6
#define RLIMIT_MEMLOCK 8
#define RLIMIT_SIGPENDING 11
#define RLIMIT_MSGQUEUE 12
#define RLIM_INFINITY (~0UL)
#define PAGE_SHIFT 12
#define PIPE_DEF_BUFFERS 16
#define EPOLL_CTL_ADD 1
#define EMFILE 24
#define MAX_USERNS_LEVELS 33 /* the kernel nests at most 32 user namespaces */

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

/* struct hlist_node comes from vfs.h. */
struct hlist_head {
	struct hlist_node *first;
};

struct kernfs_node {
	struct kernfs_node *parent;
	__u64 id;
};

struct cgroup {
	struct kernfs_node *kn;
};

struct css_set {
	struct cgroup *dfl_cgrp;
};

struct tty_struct {
	struct tty_struct *link;
};

struct tty_file_private {
	struct tty_struct *tty;
};

struct rlimit {
	unsigned long rlim_cur;
	unsigned long rlim_max;
};

struct signal_struct {
	struct tty_struct *tty;
	struct rlimit rlim[16];
};

struct pid;

struct key;

/* atomic_long_t (a struct of one counter, as CO-RE matches it). */
typedef struct {
	long counter;
} atomic_long_t;

struct user_namespace;

/* A uid's counts in a user namespace; each is charged to the namespace's
 * creator's counts too, up to the initial namespace's (ns->ucounts NULL). */
struct ucounts {
	struct user_namespace *ns;
	atomic_long_t ucount[1];
	atomic_long_t rlimit[1];
};

struct user_namespace {
	struct ucounts *ucounts;
	long ucount_max[1];
};

struct percpu_counter {
	__s64 count;
};

struct user_struct {
	atomic_long_t pipe_bufs;
	struct percpu_counter epoll_watches;
};

struct cred {
	struct key *session_keyring;
	struct ucounts *ucounts;
	struct user_struct *user;
};

struct ipc_namespace {
	unsigned int mq_msg_max;
	unsigned int mq_msgsize_max;
};

struct nsproxy {
	struct ipc_namespace *ipc_ns;
};

struct task_struct {
	int tgid;
	struct task_struct *real_parent;
	const struct cred *cred;
	struct nsproxy *nsproxy;
	struct css_set *cgroups;
	struct hlist_node pid_links[4];
	char comm[16];
	struct signal_struct *signal;
	struct pid *thread_pid;
	struct task_struct *group_leader;
};

struct key_type {
	const char *name;
};

struct key {
	int serial;
	kuid_t uid;
	unsigned short quotalen;
	struct key_type *type;
};

struct fsnotify_group;

/* The registers a task entered the kernel with (the kernel's struct pt_regs). */
struct pt_regs___pincer {
	unsigned long r10;
	unsigned long si;
	unsigned long orig_ax;
};

struct upid {
	int nr;
	void *ns;
};

struct pid {
	unsigned int level;
	struct hlist_head tasks[4];
	struct upid numbers[1];
};

struct proc_inode {
	struct pid *pid;
	struct inode vfs_inode;
};

/* Whom a file description's signals go to (F_SETOWN's process or thread). */
struct fown_struct {
	struct pid *pid;
};

/* struct file's owner: 6.12 keeps it in a struct of its own, made on the
 * first F_SETOWN (NULL before); earlier kernels in struct file itself. Two
 * flavors of struct file: CO-RE finds the one the running kernel has. */
struct file___owner_ptr {
	struct fown_struct *f_owner;
};

struct file___owner_in {
	struct fown_struct f_owner;
};

struct kern_ipc_perm {
	int key;
	int id;
};

struct shmid_kernel {
	struct kern_ipc_perm shm_perm;
	unsigned long shm_segsz;
};

struct in6_addr {
	union {
		__u8 u6_addr8[16];
	} in6_u;
};

struct sock_common {
	__be32 skc_rcv_saddr; /* in the kernel: inside an anonymous union (CO-RE finds it) */
	unsigned short skc_family;
	volatile unsigned char skc_state;
	__u16 skc_num;
	struct in6_addr skc_v6_rcv_saddr;
};

struct sock {
	struct sock_common __sk_common;
	__u16 sk_type;
	__u16 sk_protocol;
};

struct socket {
	short type;
	struct sock *sk;
};

struct sockaddr_un {
	unsigned short sun_family;
	char sun_path[UNIX_PATH_MAX];
};

struct unix_address {
	int len;
	struct sockaddr_un name[];
};

struct unix_sock {
	struct sock sk;
	struct unix_address *addr;
	struct path path;
};

struct msghdr {
	void *msg_name;
	int msg_namelen;
};

#pragma clang attribute pop

struct kernel_siginfo;
struct rlimit;
struct cred;
struct sockaddr;

/* A socket a session created (AF_UNIX), or whose address and port it recorded
 * (inet: `bound.port` non-zero). */
struct sock_owner {
	__u64 session;
	struct port_key bound;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64); /* struct sock * */
	__type(value, struct sock_owner);
} MAP_SOCKS SEC(".maps");

/* The ports held against sessions: listed for every session (session 0), and
 * held by sockets outside every session (PORT_OUTSIDE, PORT_OUTSIDE_SEEN). No
 * session writes here: a session that filled the map would leave the user's
 * later bind unrecorded, and its port free to the session. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct port_key);
	__type(value, __u32); /* sockets holding it (session 0: listed, non-zero) */
} MAP_PORTS SEC(".maps");

/* The ports sessions bound, each under its session: a map of their own, so a
 * session that fills it only leaves its own later ports unrecorded (and
 * unreachable). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct port_key);
	__type(value, __u32); /* sockets holding it */
} MAP_OWN_PORTS SEC(".maps");

/* The kernel's local routes (every destination it delivers to this host), as
 * userspace reads them from the routing tables and keeps them on every change. */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 4096);
	__type(key, struct host_addr_key);
	__type(value, __u32);
} MAP_HOST_ADDRS SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct object_key); /* the socket file */
	__type(value, __u32);
} MAP_UNIX_FILES SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct unix_name_key);
	__type(value, __u32); /* owner uid the socket file must have, or UNIX_OWNER_ANY */
} MAP_UNIX_NAMES SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64); /* struct kern_ipc_perm * */
	__type(value, __u64); /* the creating session */
} MAP_IPC SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct unix_name_key);
	__type(value, __u32); /* non-zero */
} MAP_UNIX_SERVED SEC(".maps");

/* A key a session made: its session, and what its uid's share was charged. */
struct key_charge {
	__u64 session;
	__u32 uid;
	__u32 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64); /* struct key * */
	__type(value, struct key_charge);
} MAP_KEYS SEC(".maps");

/* What a uid's sessions together hold of the quotas the kernel keeps per uid
 * and shares with the user's processes outside every session. */
struct quota_use {
	__u32 keys;
	__u32 key_bytes;
	__u32 notify;
	__u32 _pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32); /* uid */
	__type(value, struct quota_use);
} MAP_QUOTAS SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64); /* struct fsnotify_group * a session made */
	__type(value, __u32); /* the uid it is counted to */
} MAP_NOTIFY_GROUPS SEC(".maps");

/* The shares of the per-uid quotas a uid's sessions may hold together, set by
 * the loader from the kernel's limits (half of each): the keys and key bytes
 * (`kernel/keys/maxkeys`, `maxbytes`) and the inotify and fanotify instances
 * (`fs/inotify/max_user_instances`). */
const volatile __u32 KEYS_SHARE = 0;
const volatile __u32 KEY_BYTES_SHARE = 0;
const volatile __u32 NOTIFY_SHARE = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64); /* struct tty_struct * of a pty's slave */
	__type(value, __u64); /* the session that opened its master */
} MAP_TTYS SEC(".maps");

/* Holds a name key while it is built (too large for the BPF stack with the
 * rest). One per task: a per-CPU slot could be rewritten by another task that
 * preempts this one between the key's writing and its lookup. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct unix_name_key);
} MAP_NAME_SCRATCH SEC(".maps");

/* The session task `t` belongs to, or 0; same rule as current_session_id():
 * its own cgroup first, else the outermost registered ancestor. */
static __always_inline __u64 task_session(struct task_struct *t)
{
	struct kernfs_node *kn = BPF_CORE_READ(t, cgroups, dfl_cgrp, kn);
	__u64 found = 0;

	for (int i = 0; i < MAX_CGROUP_LEVELS; i++) {
		if (!kn)
			break;
		struct session_key k = { .cgroup_id = BPF_CORE_READ(kn, id) };
		struct session_value *v = bpf_map_lookup_elem(&pincer_sessions, &k);

		if (v && v->active) {
			if (i == 0)
				return k.cgroup_id;
			found = k.cgroup_id;
		}
		kn = BPF_CORE_READ(kn, parent);
	}
	return found;
}

static __always_inline struct reach_event *reach_event(__u64 session, __u32 hook)
{
	struct reach_event *e = bpf_ringbuf_reserve(&pincer_events, sizeof(*e), 0);

	if (!e) {
		count_drop();
		return 0;
	}
	e->record = EVENT_RECORD_REACH;
	e->hook = hook;
	e->session = session;
	e->target_session = 0;
	e->ino = 0;
	e->dev = 0;
	e->pid = bpf_get_current_pid_tgid() >> 32;
	e->uid = (__u32)bpf_get_current_uid_gid();
	e->target_pid = 0;
	e->target_id = 0;
	e->target_uid = 0;
	e->detail = 0;
	e->ipc_key = 0;
	e->proto = 0;
	e->owner_kind = 0;
	e->port = 0;
	e->name_len = 0;
	e->_pad = 0;
	__builtin_memset(e->addr, 0, sizeof(e->addr));
	e->name[0] = 0;
	return e;
}

/* What a session's charge to a per-uid count may take (defined with the counts, below). */
static __always_inline int signal_share(__u64 session, struct task_struct *p, int sig);
static __always_inline int limit_raise(__u64 session, struct task_struct *p, unsigned int resource,
				       struct rlimit *new_rlim);
static __always_inline int pipe_size_share(unsigned long size);
static __always_inline int pipe_pages_share(__u64 session, long pages);

/* ---- processes ---- */

/* Deny `hook` on task `t` (outside `session`): report it unless `quiet`. */
static __always_inline int deny_task(__u64 session, struct task_struct *t, __u64 target_session, __u32 hook,
				     __u32 detail, int quiet, int err)
{
	if (quiet)
		return err;
	struct reach_event *e = reach_event(session, hook);

	if (e) {
		e->target_pid = BPF_CORE_READ(t, tgid);
		e->detail = detail;
		e->target_session = target_session;
		bpf_core_read_str(e->name, sizeof(t->comm), &t->comm);
		bpf_ringbuf_submit(e, 0);
	}
	return err;
}

/* 0 if the gated caller may act on `t`, else the denial (reported). */
static __always_inline int check_task_of(__u64 session, struct task_struct *t, __u32 hook, __u32 detail, int quiet,
					 int err)
{
	if (!session || !t)
		return 0;
	__u64 target = task_session(t);

	if (target == session)
		return 0;
	return deny_task(session, t, target, hook, detail, quiet, err);
}

/* check_task_of for the caller's session. */
static __always_inline int check_task(struct task_struct *t, __u32 hook, __u32 detail, int quiet, int err)
{
	return check_task_of(current_session_id(), t, hook, detail, quiet, err);
}

SEC("lsm/task_kill")
int BPF_PROG(pincer_task_kill, struct task_struct *p, struct kernel_siginfo *info, int sig, const struct cred *cred,
	     int ret)
{
	if (ret)
		return ret;
	/* With `cred` set (async USB IO) the signal is sent on behalf of a
	 * file's owner from the completing context; that context is checked. */
	__u64 session = current_session_id();

	return check_task_of(session, p, HOOK_TASK_KILL, sig, 0, -EPERM) ?: signal_share(session, p, sig);
}

SEC("lsm/ptrace_access_check")
int BPF_PROG(pincer_ptrace_access_check, struct task_struct *child, unsigned int mode, int ret)
{
	if (ret)
		return ret;
	/* NOAUDIT probes (ps reading /proc/PID/stat) are denied without a report. */
	return check_task(child, HOOK_PTRACE_ACCESS_CHECK, mode, mode & PTRACE_MODE_NOAUDIT, -EPERM);
}

SEC("lsm/ptrace_traceme")
int BPF_PROG(pincer_ptrace_traceme, struct task_struct *parent, int ret)
{
	if (ret)
		return ret;
	return check_task(parent, HOOK_PTRACE_TRACEME, 0, 0, -EPERM);
}

SEC("lsm/task_setnice")
int BPF_PROG(pincer_task_setnice, struct task_struct *p, int nice, int ret)
{
	if (ret)
		return ret;
	return check_task(p, HOOK_TASK_SETNICE, (__u32)nice, 0, -EPERM);
}

SEC("lsm/task_setioprio")
int BPF_PROG(pincer_task_setioprio, struct task_struct *p, int ioprio, int ret)
{
	if (ret)
		return ret;
	return check_task(p, HOOK_TASK_SETIOPRIO, (__u32)ioprio, 0, -EPERM);
}

SEC("lsm/task_setscheduler")
int BPF_PROG(pincer_task_setscheduler, struct task_struct *p, int ret)
{
	if (ret)
		return ret;
	return check_task(p, HOOK_TASK_SETSCHEDULER, 0, 0, -EPERM);
}

SEC("lsm/task_movememory")
int BPF_PROG(pincer_task_movememory, struct task_struct *p, int ret)
{
	if (ret)
		return ret;
	return check_task(p, HOOK_TASK_MOVEMEMORY, 0, 0, -EPERM);
}

/* prlimit(2) on another process of the uid (its resource limits: open files,
 * CPU time, file size, address space) passes task_prlimit, which names no
 * task, and then this hook with the target's thread-group leader. */
SEC("lsm/task_setrlimit")
int BPF_PROG(pincer_task_setrlimit, struct task_struct *p, unsigned int resource, struct rlimit *new_rlim, int ret)
{
	if (ret)
		return ret;
	__u64 session = current_session_id();

	return check_task_of(session, p, HOOK_TASK_SETRLIMIT, resource, 0, -EPERM) ?:
		       limit_raise(session, p, resource, new_rlim);
}

/* The number of `p` in the caller's PID namespace (the innermost one of the
 * caller's own pid), or -1. */
static __always_inline int pid_nr_at(struct pid *p, unsigned int level)
{
	if (!p || level > 31 || BPF_CORE_READ(p, level) != level)
		return -1;
	int nr = -1;

	/* struct upid is { int nr; struct pid_namespace *ns; }: 16 bytes. */
	bpf_probe_read_kernel(&nr, sizeof(nr), (void *)p + bpf_core_field_offset(struct pid, numbers) + level * 16);
	return nr;
}

/* A gated task directs a file's signals (the owner that SIGIO, SIGURG or the
 * F_SETSIG signal of the file is sent to, on the file's behalf, past
 * task_kill) only at itself. F_SETOWN names it by a number the hook sees as
 * the kernel will: the caller's process or one of its threads, as its PID
 * namespace numbers them, or nobody (0), pass; another process, and any
 * process group (which may hold processes outside the session), are refused.
 * F_SETOWN_EX, FIOSETOWN and SIOCSPGRP name it in the caller's memory, which
 * the kernel reads again after the hook (another thread could change it in
 * between): refused. `kind` is F_OWNER_PID, F_OWNER_PGRP or OWNER_IN_MEMORY,
 * `who` the number asked for (0 for OWNER_IN_MEMORY). */
static __always_inline int setown_refuse(__u64 session, __u32 cmd, int kind, int who)
{
	struct reach_event *e = reach_event(session, HOOK_FILE_SETOWN);

	if (e) {
		e->target_pid = (__u32)who;
		e->detail = cmd;
		e->owner_kind = (__u32)kind;
		bpf_ringbuf_submit(e, 0);
	}
	return -EPERM;
}

/* F_SETOWN's number: a process, or minus a process group. */
static __always_inline int setown_number_check(__u32 cmd, int who)
{
	__u64 session = current_session_id();

	if (!session || !who)
		return 0;
	if (who > 0) {
		struct task_struct *me = (void *)bpf_get_current_task();
		struct pid *mine = BPF_CORE_READ(me, thread_pid);
		unsigned int level = BPF_CORE_READ(mine, level);

		if (who == pid_nr_at(mine, level) || who == pid_nr_at(BPF_CORE_READ(me, group_leader, thread_pid), level))
			return 0;
		return setown_refuse(session, cmd, F_OWNER_PID, who);
	}
	return setown_refuse(session, cmd, F_OWNER_PGRP, -who);
}

static __always_inline int async_check(struct file *file, __u32 cmd);

/* FIOSETOWN and SIOCSPGRP, and FIOASYNC (async_check); called from check_ioctl. */
static __always_inline int reach_setown_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	if (cmd == FIOASYNC)
		return async_check(file, cmd);
	if (cmd != FIOSETOWN && cmd != SIOCSPGRP)
		return 0;
	__u64 session = current_session_id();

	return session ? setown_refuse(session, cmd, OWNER_IN_MEMORY, 0) : 0;
}

/* The process or thread `file`'s signals go to; 0 when none was set, and ~0
 * (no process's) when the kernel keeps it where neither flavor says. */
static __always_inline struct pid *file_owner(struct file *file)
{
	if (bpf_core_field_exists(((struct file___owner_ptr *)0)->f_owner)) {
		struct fown_struct *o = BPF_CORE_READ((struct file___owner_ptr *)file, f_owner);

		return o ? BPF_CORE_READ(o, pid) : 0;
	}
	if (bpf_core_field_exists(((struct file___owner_in *)0)->f_owner))
		return BPF_CORE_READ((struct file___owner_in *)file, f_owner.pid);
	return (struct pid *)~0UL;
}

/* Whether `owner` is the calling thread or its process. */
static __always_inline int is_caller(struct pid *owner)
{
	struct task_struct *me = (void *)bpf_get_current_task();

	return owner == BPF_CORE_READ(me, thread_pid) || owner == BPF_CORE_READ(me, group_leader, thread_pid);
}

/* F_SETSIG chooses what the kernel sends the description's owner on the
 * file's behalf (SIGKILL in place of the SIGIO a process handles), past
 * task_kill. A session chooses it only for signals that go to itself: the
 * owner is the calling process or thread. A description shared with the
 * user's processes (the standard input `pincer run` passes on) may be owned
 * by one of them, or become so later: with no owner set it is refused too. */
static __always_inline int setsig_check(struct file *file, int sig)
{
	__u64 session = current_session_id();

	if (!session)
		return 0;
	struct pid *owner = file_owner(file);

	if (owner && is_caller(owner))
		return 0;
	return setown_refuse(session, F_SETSIG, OWNER_SIGNAL, sig);
}

/* Signal-driven I/O (O_ASYNC by F_SETFL, FIOASYNC) has the kernel send the
 * description's owner SIGIO (or its F_SETSIG signal) on the file's behalf,
 * past task_kill: a process of the user's that owns a description it shares
 * with the session (F_SETOWN to itself, without handling SIGIO, whose default
 * ends it) would die of it. A session turns it on, or off, only where the
 * owner is none or the caller itself. F_SETFL that leaves FASYNC as it is
 * passes; FIOASYNC's on or off is read from the caller's memory after the
 * hook, so the owner is checked either way. */
static __always_inline int async_check(struct file *file, __u32 cmd)
{
	__u64 session = current_session_id();

	if (!session)
		return 0;
	struct pid *owner = file_owner(file);

	if (!owner || is_caller(owner))
		return 0;
	return setown_refuse(session, cmd, OWNER_SIGNAL, SIGIO);
}

/* A lease makes every other process that opens the file (a write lease) or
 * writes it (a read lease) wait for its holder, up to fs.lease-break-time (45
 * s by default) each time, and the holder chooses when to let go: a session
 * holding one on any file, its own too, would hold up the user's programs that
 * open it. Leases serve file servers (Samba, the NFS server); no session takes
 * one (reach hook `file_lease`). Releasing one is let through. */
static __always_inline int lease_check(struct file *file, __u32 kind)
{
	__u64 session = current_session_id();

	if (!session)
		return 0;
	struct reach_event *e = reach_event(session, HOOK_FILE_LEASE);

	if (e) {
		struct inode *inode = BPF_CORE_READ(file, f_inode);

		e->ino = inode ? BPF_CORE_READ(inode, i_ino) : 0;
		e->dev = inode ? BPF_CORE_READ(inode, i_sb, s_dev) : 0;
		e->detail = kind;
		bpf_probe_read_kernel_str(e->name, sizeof(e->name), BPF_CORE_READ(file, f_path.dentry, d_name.name));
		bpf_ringbuf_submit(e, 0);
	}
	return -EACCES;
}

SEC("lsm/file_fcntl")
int BPF_PROG(pincer_file_fcntl, struct file *file, unsigned int cmd, unsigned long arg, int ret)
{
	if (ret)
		return ret;
	if (cmd == F_SET_RW_HINT) {
		/* Stored on the inode, for every later writer: a change of the
		 * object, whatever mode the descriptor was opened in. */
		struct session s;

		return current_session(&s) ? check_object(&s, file->f_path.dentry, ACCESS_WRITE, HOOK_INODE_SETATTR) : 0;
	}
	if (cmd == F_SETOWN)
		return setown_number_check(cmd, (int)arg);
	if (cmd == F_SETSIG)
		return setsig_check(file, (int)arg);
	if (cmd == F_SETFL)
		return ((arg ^ BPF_CORE_READ(file, f_flags)) & FASYNC) ? async_check(file, cmd) : 0;
	if (cmd == F_SETLEASE && arg != F_UNLCK)
		return lease_check(file, (__u32)arg);
	if (cmd == F_SETPIPE_SZ)
		return pipe_size_share(arg);
	if (cmd != F_SETOWN_EX)
		return 0;
	__u64 session = current_session_id();

	return session ? setown_refuse(session, cmd, OWNER_IN_MEMORY, 0) : 0;
}

/* ---- cgroups ---- */

/* A gated task writes, creates, removes or changes a cgroup v2 file or
 * directory only inside its own session's cgroup. The user's delegated
 * cgroups are the user's (cgroup.kill, cgroup.freeze act on processes outside
 * the session, past every signal check; cgroup.procs would move the session
 * out of its cgroup, its limits and this gate), so anywhere else it is refused
 * in every mode. A cgroup's id is its directory's inode number in cgroupfs,
 * so the walk up the directories compares inode numbers with the session id. */
static __always_inline int reach_cgroup(const struct session *s, struct dentry *d, __u32 need)
{
	if (!(need & (ACCESS_WRITE | ACCESS_CREATE | ACCESS_DELETE)) || !d)
		return 0;
	if (BPF_CORE_READ(d, d_sb, s_magic) != CGROUP2_SUPER_MAGIC)
		return 0;
	struct dentry *cur = d;

	for (int i = 0; i < MAX_CGROUP_LEVELS + 2; i++) {
		struct inode *in = BPF_CORE_READ(cur, d_inode);

		if (in && BPF_CORE_READ(in, i_ino) == s->id)
			return 0;
		struct dentry *up = BPF_CORE_READ(cur, d_parent);

		if (!up || up == cur)
			break;
		cur = up;
	}
	struct reach_event *e = reach_event(s->id, HOOK_CGROUP_WRITE);

	if (e) {
		struct inode *in = BPF_CORE_READ(d, d_inode);

		e->ino = in ? BPF_CORE_READ(in, i_ino) : 0;
		e->dev = BPF_CORE_READ(d, d_sb, s_dev);
		e->detail = need;
		bpf_probe_read_kernel_str(e->name, sizeof(e->name), BPF_CORE_READ(d, d_name.name));
		bpf_ringbuf_submit(e, 0);
	}
	return -EACCES;
}

/* ---- POSIX message queues ---- */

/* A POSIX message queue is a file of its IPC namespace's mqueue filesystem:
 * mq_open by name and open(2) of /dev/mqueue/NAME both give a descriptor that
 * mq_timedsend and mq_timedreceive take. A gated task opens (and mq_unlink
 * removes) only a queue its session made; the filesystem's root (a listing)
 * stays open. The session's own IPC namespace keeps the user's queues from
 * being named at all; this holds without it. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64); /* struct inode * of a queue */
	__type(value, __u64); /* the creating session */
} MAP_MQUEUES SEC(".maps");

/* A queue is made (mq_open with O_CREAT instantiates its file in the creating
 * task's context): if by a session, it is the session's. Every other dentry
 * leaves at the first test. A queue that cannot be recorded stays closed to
 * the session that made it (fail closed). */
SEC("lsm/d_instantiate")
int BPF_PROG(pincer_d_instantiate, struct dentry *dentry, struct inode *inode)
{
	if (!inode || BPF_CORE_READ(inode, i_sb, s_magic) != MQUEUE_MAGIC)
		return 0;
	__u64 session = current_session_id();

	if (!session)
		return 0;
	__u64 k = (__u64)inode;

	bpf_map_update_elem(&MAP_MQUEUES, &k, &session, BPF_ANY);
	return 0;
}

/* 0 if the gated task may open or remove the mqueue object `d`, else -EACCES
 * (reported: `ino` the queue's inode, `dev` its device, `target_session` the
 * session that made it, 0 if none did, `detail` the access asked, `name` its
 * name). */
static __always_inline int mqueue_check(__u64 session, struct dentry *d, __u32 access)
{
	struct inode *inode = BPF_CORE_READ(d, d_inode);

	if (!inode || (BPF_CORE_READ(inode, i_mode) & S_IFMT) == S_IFDIR)
		return 0;
	__u64 k = (__u64)inode;
	__u64 *owner = bpf_map_lookup_elem(&MAP_MQUEUES, &k);

	if (owner && *owner == session)
		return 0;
	struct reach_event *e = reach_event(session, HOOK_MQUEUE);

	if (e) {
		e->ino = BPF_CORE_READ(inode, i_ino);
		e->dev = BPF_CORE_READ(inode, i_sb, s_dev);
		e->target_session = owner ? *owner : 0;
		e->detail = access;
		bpf_probe_read_kernel_str(e->name, sizeof(e->name), BPF_CORE_READ(d, d_name.name));
		bpf_ringbuf_submit(e, 0);
	}
	return -EACCES;
}

/* mq_unlink (vfs_unlink on the mqueue filesystem); called from inode_unlink. */
static __always_inline int reach_inode_unlink(struct dentry *d)
{
	if (!d || BPF_CORE_READ(d, d_sb, s_magic) != MQUEUE_MAGIC)
		return 0;
	__u64 session = current_session_id();

	return session ? mqueue_check(session, d, ACCESS_DELETE) : 0;
}

/* An inode is freed: a queue's record goes with it, before its memory can
 * hold another. Called from inode_free_security. */
static __always_inline void reach_inode_free(struct inode *inode, struct super_block *sb)
{
	if (BPF_CORE_READ(sb, s_magic) != MQUEUE_MAGIC)
		return;
	__u64 k = (__u64)inode;

	bpf_map_delete_elem(&MAP_MQUEUES, &k);
}

/* ---- objects a session made in a shared place ---- */

static __always_inline void quota_spent(__u64 session, __u32 which, __u32 would_hold, __u32 uid);

/* A world-writable sticky directory (/tmp, /var/tmp, /dev/shm) is every
 * uid's. The kernel keeps one uid's program from taking another uid's object
 * there for its own: fs.protected_regular and protected_fifos refuse an
 * O_CREAT open of it, protected_symlinks a follow of its symlink. A session
 * runs as the user's uid, so those do not apply between them: the session
 * would make first the name a program of the user's opens with O_CREAT (and
 * no O_EXCL) and read the state it keeps there, or leave a symlink where the
 * user's program writes its log, and have it write a file of the user's. The
 * same rule with the session as the other party: an object a session makes,
 * moves or links into a shared directory (one of those, or a directory a
 * session made there, at any depth) is recorded here with its session, and
 * a process of no session or of another one may neither open it with O_CREAT
 * (unless that open made it) nor follow it. Opening it without O_CREAT (the
 * user reading what the session left) is not refused. The record lasts as
 * long as the object (an object left behind by a session that ended is still
 * the session's). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SHARED_MADE_MAX);
	__type(key, struct object_key);
	__type(value, __u64); /* the session that made it */
} MAP_SHARED_MADE SEC(".maps");

#define S_ISVTX 01000
#define O_CREAT 00000100

/* The session that made `inode` in a shared place, or 0. */
static __always_inline __u64 shared_maker(struct inode *inode)
{
	if (!inode)
		return 0;
	struct object_key k = { .ino = BPF_CORE_READ(inode, i_ino), .dev = BPF_CORE_READ(inode, i_sb, s_dev) };
	__u64 *maker = bpf_map_lookup_elem(&MAP_SHARED_MADE, &k);

	return maker ? *maker : 0;
}

/* Whether directory `dir` is a shared one: world-writable and sticky, or made
 * there by a session. */
static __always_inline int shared_dir(struct inode *dir)
{
	if (!dir)
		return 0;
	umode_t mode = BPF_CORE_READ(dir, i_mode);

	if ((mode & (S_ISVTX | S_IWOTH)) == (S_ISVTX | S_IWOTH))
		return 1;
	return shared_maker(dir) != 0;
}

/* Called by a session's check of a new name `child` (a creation, the target
 * of a rename or link): in a shared directory, only within the session's
 * share of the record (SHARED_MADE_PER_SESSION), else -EDQUOT, reported. */
static __noinline int shared_room(__u64 session, struct dentry *child)
{
	if (!shared_dir(BPF_CORE_READ(child, d_parent, d_inode)))
		return 0;
	struct session_value *v = bpf_map_lookup_elem(&MAP_SESSIONS, &session);

	if (v && *(volatile __u32 *)&v->shared_made < SHARED_MADE_PER_SESSION)
		return 0;
	quota_spent(session, QUOTA_SHARED_MADE, v ? v->shared_made : 0, (__u32)bpf_get_current_uid_gid());
	return -EDQUOT;
}

/* Records `inode`, which session `session` made, moved or linked into the
 * directory `dir`, if that is a shared one. 0, or -EDQUOT when it could not
 * be recorded (the caller refuses, or does not give the session the object). */
static __noinline int shared_mark(__u64 session, struct inode *inode, struct inode *dir)
{
	if (!inode || !shared_dir(dir))
		return 0;
	struct object_key k = { .ino = BPF_CORE_READ(inode, i_ino), .dev = BPF_CORE_READ(inode, i_sb, s_dev) };

	if (!bpf_map_update_elem(&MAP_SHARED_MADE, &k, &session, BPF_EXIST))
		return 0;
	struct session_value *v = bpf_map_lookup_elem(&MAP_SESSIONS, &session);

	if (!v)
		return -EDQUOT;
	/* Count first, then look, as vacated_put does. */
	__sync_fetch_and_add(&v->shared_made, 1);
	if (*(volatile __u32 *)&v->shared_made <= SHARED_MADE_PER_SESSION &&
	    !bpf_map_update_elem(&MAP_SHARED_MADE, &k, &session, BPF_NOEXIST))
		return 0;
	__sync_fetch_and_add(&v->shared_made, -1); /* no atomic sub in BPF */
	return bpf_map_update_elem(&MAP_SHARED_MADE, &k, &session, BPF_EXIST) ? -EDQUOT : 0;
}

/* Reports and refuses a reach of a shared object `d` that session `maker`
 * made, by a caller outside it (`how`: SHARED_OPEN_CREATE or SHARED_FOLLOW). */
static __always_inline int shared_refuse(__u64 maker, struct dentry *d, struct inode *inode, __u32 how)
{
	struct reach_event *e = reach_event(maker, HOOK_SHARED_INBOUND);

	if (e) {
		e->ino = BPF_CORE_READ(inode, i_ino);
		e->dev = BPF_CORE_READ(inode, i_sb, s_dev);
		e->target_session = maker;
		e->detail = how;
		bpf_probe_read_kernel_str(e->name, sizeof(e->name), BPF_CORE_READ(d, d_name.name));
		bpf_ringbuf_submit(e, 0);
	}
	return -EACCES;
}

/* file_open of every task (`session` 0: none): an O_CREAT open that found the
 * object, which a session other than the caller's made in a shared directory
 * it is still in, is refused. Every other open leaves at the first test. */
static __always_inline int shared_inbound(__u64 session, struct file *file)
{
	if (!(file->f_flags & O_CREAT) || (file->f_mode & FMODE_CREATED))
		return 0;
	struct inode *inode = file->f_inode;
	__u64 maker = shared_maker(inode);

	if (!maker || maker == session)
		return 0;
	struct dentry *d = file->f_path.dentry;

	if (!shared_dir(BPF_CORE_READ(d, d_parent, d_inode)))
		return 0;
	return shared_refuse(maker, d, inode, SHARED_OPEN_CREATE);
}

/* A symlink a session made in a shared directory is followed by no process
 * outside that session (protected_symlinks for the session as another uid). */
SEC("lsm/inode_follow_link")
int BPF_PROG(pincer_inode_follow_link, struct dentry *dentry, struct inode *inode, _Bool rcu, int ret)
{
	if (ret)
		return ret;
	__u64 maker = shared_maker(inode);

	if (!maker || maker == current_session_id())
		return 0;
	if (!shared_dir(BPF_CORE_READ(dentry, d_parent, d_inode)))
		return 0;
	return shared_refuse(maker, dentry, inode, SHARED_FOLLOW);
}

/* An object gone for good (from inode_free_security): its record, and its
 * session's count, go with it. */
static __always_inline void shared_forget(struct object_key *k)
{
	__u64 *maker = bpf_map_lookup_elem(&MAP_SHARED_MADE, k);

	if (!maker)
		return;
	struct session_value *v = bpf_map_lookup_elem(&MAP_SESSIONS, maker);

	if (!bpf_map_delete_elem(&MAP_SHARED_MADE, k) && v)
		__sync_fetch_and_add(&v->shared_made, -1);
}

/* ---- terminals ---- */

/* A gated task opens a pseudo-terminal's slave (/dev/pts/N): only its own
 * controlling terminal or a pty its session made (opened the master of) is
 * allowed; the user's other terminals are not (reading one takes what the user
 * types there, passwords included; writing one fakes its output). */
static __always_inline int pty_check(__u64 session, struct dentry *d, struct inode *inode)
{
	__u64 ino = BPF_CORE_READ(inode, i_ino);

	if (ino < PTS_FIRST_INO)
		return 0;
	/* devpts keeps the slave's tty_struct in the dentry (devpts_pty_new). */
	__u64 tty = (__u64)BPF_CORE_READ(d, d_fsdata);
	struct task_struct *me = (void *)bpf_get_current_task();

	if (tty && tty == (__u64)BPF_CORE_READ(me, signal, tty))
		return 0;
	__u64 *owner = tty ? bpf_map_lookup_elem(&MAP_TTYS, &tty) : 0;

	if (owner && *owner == session)
		return 0;
	struct reach_event *e = reach_event(session, HOOK_PTY_OPEN);

	if (e) {
		e->ino = ino;
		e->dev = BPF_CORE_READ(inode, i_sb, s_dev);
		e->target_session = owner ? *owner : 0;
		bpf_probe_read_kernel_str(e->name, sizeof(e->name), BPF_CORE_READ(d, d_name.name));
		bpf_ringbuf_submit(e, 0);
	}
	return -EACCES;
}

/* Called from the checks of a change, watch or lock of an existing object for
 * a gated task: a terminal other than its own is refused as its open is. Its
 * mode and times are the user's (`chmod o+w` lets every user write to it),
 * and a watch on it times what the user types there. A function of its own:
 * its frame is not the calling hook's. */
static __noinline int reach_tty(__u64 session, struct dentry *d)
{
	struct inode *inode = BPF_CORE_READ(d, d_inode);

	if (!inode || BPF_CORE_READ(inode, i_sb, s_magic) != DEVPTS_SUPER_MAGIC)
		return 0;
	return pty_check(session, d, inode);
}

/* The master of a new pty was opened: if by a session, its slave is the
 * session's. fexit, so only a pty that was made is recorded. A record that
 * cannot be made leaves the slave closed to the session (fail closed). */
SEC("fexit/ptmx_open")
int BPF_PROG(pincer_ptmx_open, struct inode *inode, struct file *filp, int ret)
{
	if (ret)
		return 0;
	__u64 session = current_session_id();

	if (!session)
		return 0;
	struct tty_file_private *priv = BPF_CORE_READ(filp, private_data);
	__u64 slave = (__u64)BPF_CORE_READ(priv, tty, link);

	if (slave)
		bpf_map_update_elem(&MAP_TTYS, &slave, &session, BPF_ANY);
	return 0;
}

/* The pty goes away (its master closed): forget it before its tty_struct can
 * be reused for another. */
SEC("fentry/devpts_pty_kill")
int BPF_PROG(pincer_devpts_pty_kill, struct dentry *dentry)
{
	__u64 slave = (__u64)BPF_CORE_READ(dentry, d_fsdata);

	if (slave)
		bpf_map_delete_elem(&MAP_TTYS, &slave);
	return 0;
}

/* Called from pincer_file_open for a gated task: a pty other than its own (see
 * pty_check), and a write open of a file in another process's /proc/PID/
 * directory (oom_score_adj, coredump_filter, ..., which check only the file
 * mode, not ptrace access) are denied. */
static __always_inline int reach_file_open(__u64 session, struct file *file)
{
	struct inode *inode = file->f_inode;

	if (!inode)
		return 0;
	unsigned long magic = inode->i_sb->s_magic;

	if (magic == DEVPTS_SUPER_MAGIC)
		return pty_check(session, file->f_path.dentry, inode);
	if (magic == MQUEUE_MAGIC)
		return mqueue_check(session, file->f_path.dentry, ACCESS_READ);
	if ((inode->i_mode & S_IFMT) == S_IFIFO) /* its first open makes its pipe */
		return pipe_pages_share(session, PIPE_DEF_BUFFERS);
	if (!(file->f_mode & FMODE_WRITE) || magic != PROC_SUPER_MAGIC)
		return 0;
	__u64 addr = (__u64)BPF_CORE_READ(file, f_inode);
	struct proc_inode *pi = (void *)(addr - bpf_core_field_offset(struct proc_inode, vfs_inode));
	struct pid *pid = BPF_CORE_READ(pi, pid);

	if (!pid) /* /proc/sys and other files of no process */
		return 0;
	__u64 first = (__u64)BPF_CORE_READ(pid, tasks[0].first);

	if (!first) /* the process is gone */
		return 0;
	struct task_struct *t = (void *)(first - bpf_core_field_offset(struct task_struct, pid_links));
	__u64 target = task_session(t);

	if (target == session)
		return 0;
	return deny_task(session, t, target, HOOK_PROC_WRITE, 0, 0, -EACCES);
}

/* ---- SysV IPC ---- */

static __always_inline int ipc_record(struct kern_ipc_perm *perm)
{
	__u64 session = current_session_id();

	if (!session)
		return 0;
	__u64 k = (__u64)perm;

	/* Unrecorded, the session could not use its own object: fail its creation. */
	return bpf_map_update_elem(&MAP_IPC, &k, &session, BPF_ANY) ? -ENOMEM : 0;
}

static __always_inline void ipc_forget(struct kern_ipc_perm *perm)
{
	__u64 k = (__u64)perm;

	bpf_map_delete_elem(&MAP_IPC, &k);
}

static __always_inline int ipc_check(struct kern_ipc_perm *perm, __u32 hook, __u32 detail)
{
	if (!perm)
		return 0;
	__u64 session = current_session_id();

	if (!session)
		return 0;
	__u64 k = (__u64)perm;
	__u64 *owner = bpf_map_lookup_elem(&MAP_IPC, &k);

	if (owner && *owner == session)
		return 0;
	struct reach_event *e = reach_event(session, hook);

	if (e) {
		e->target_id = (__u32)BPF_CORE_READ(perm, id);
		e->ipc_key = (__u32)BPF_CORE_READ(perm, key);
		e->detail = detail;
		e->target_session = owner ? *owner : 0;
		bpf_ringbuf_submit(e, 0);
	}
	return -EACCES;
}

SEC("lsm/ipc_permission")
int BPF_PROG(pincer_ipc_permission, struct kern_ipc_perm *ipcp, short flag, int ret)
{
	if (ret)
		return ret;
	return ipc_check(ipcp, HOOK_IPC_PERMISSION, (__u16)flag);
}

/* The three SysV kinds have the same three hooks: `ctl` (checked like
 * ipc_permission), `<kind>_alloc_security` (records the creating session) and
 * `<kind>_free_security` (forgets it). Programs pincer_<ctl>,
 * pincer_<kind>_alloc and pincer_<kind>_free. */
#define IPC_KIND_HOOKS(kind, ctl, share)                                                        \
	SEC("lsm/" #ctl)                                                                        \
	int BPF_PROG(pincer_##ctl, struct kern_ipc_perm *perm, int cmd, int ret)               \
	{                                                                                       \
		return ret ? ret : ipc_check(perm, HOOK_IPC_CTL, (__u32)cmd) ?: share(perm, cmd); \
	}                                                                                       \
	SEC("lsm/" #kind "_alloc_security")                                                     \
	int BPF_PROG(pincer_##kind##_alloc, struct kern_ipc_perm *perm, int ret)               \
	{                                                                                       \
		return ret ? ret : ipc_record(perm);                                            \
	}                                                                                       \
	SEC("lsm/" #kind "_free_security")                                                      \
	int BPF_PROG(pincer_##kind##_free, struct kern_ipc_perm *perm)                         \
	{                                                                                       \
		ipc_forget(perm);                                                               \
		return 0;                                                                       \
	}

/* What a control command of a kind charges to a per-uid count (below). */
static __always_inline int shm_lock_share(struct kern_ipc_perm *perm, int cmd);
static __always_inline int no_share(struct kern_ipc_perm *perm, int cmd)
{
	return 0;
}

IPC_KIND_HOOKS(shm, shm_shmctl, shm_lock_share)
IPC_KIND_HOOKS(msg_queue, msg_queue_msgctl, no_share)
IPC_KIND_HOOKS(sem, sem_semctl, no_share)

/* ---- kernel keyrings ---- */

/* What `uid`'s sessions hold of the per-uid quotas (made at 0 on first use). */
static __always_inline struct quota_use *quota_of(__u32 uid)
{
	struct quota_use *q = bpf_map_lookup_elem(&MAP_QUOTAS, &uid);

	if (q)
		return q;
	struct quota_use zero = {};

	bpf_map_update_elem(&MAP_QUOTAS, &uid, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&MAP_QUOTAS, &uid);
}

/* Reports that a session's share of quota `which` is spent. */
static __always_inline void quota_spent(__u64 session, __u32 which, __u32 would_hold, __u32 uid)
{
	struct reach_event *e = reach_event(session, HOOK_QUOTA);

	if (e) {
		e->detail = which;
		e->target_id = would_hold;
		e->target_uid = uid;
		bpf_ringbuf_submit(e, 0);
	}
}

/* The payload's length when the caller is in add_key(2) (x86-64 248, i386 286,
 * x32 248 with its bit): the kernel charges the payload to the uid's key bytes
 * after key_alloc, when it instantiates the key (key_payload_reserve), where no
 * hook can refuse it, so it is read from the caller's arguments here and
 * counted from the start. 0 for every other way a key is made (a keyring; a
 * request_key key, instantiated by its upcall). The kernel takes at most 1 MiB. */
static __always_inline __u32 add_key_payload(void)
{
	struct pt_regs___pincer *regs = (void *)bpf_task_pt_regs(bpf_get_current_task_btf());

	if (!regs)
		return 0;
	long nr = (long)BPF_CORE_READ(regs, orig_ax) & ~0x40000000L;
	unsigned long len;

	if (nr == 248)
		len = BPF_CORE_READ(regs, r10);
	else if (nr == 286)
		len = (__u32)BPF_CORE_READ(regs, si);
	else
		return 0;
	return len > (1UL << 20) ? (1U << 20) : (__u32)len;
}

/* A key or keyring a session makes is the session's. What the kernel makes for
 * the uid, outside the user's key quota, is never a session's, whichever
 * process asked first: the user's keyrings (@u, @us), the persistent keyring
 * (`keyctl get_persistent`, which every later process of the uid is handed:
 * Kerberos keeps the user's tickets there) and an upcall's authorisation key.
 * The kernel charges the key to the uid's quota, which the user's processes
 * outside share: the uid's sessions together hold at most KEYS_SHARE keys and
 * KEY_BYTES_SHARE bytes of it (counted first, then looked at: racing tasks at
 * the bound may all be refused, never all let in). Unrecorded, the session
 * could not use its key: fail it. */
SEC("lsm/key_alloc")
int BPF_PROG(pincer_key_alloc, struct key *key, const struct cred *cred, unsigned long flags, int ret)
{
	if (ret)
		return ret;
	if (flags & (KEY_ALLOC_UID_KEYRING | KEY_ALLOC_NOT_IN_QUOTA))
		return 0;
	__u64 session = current_session_id();

	if (!session)
		return 0;
	__u64 k = (__u64)key;
	struct key_charge c = {
		.session = session,
		.uid = BPF_CORE_READ(key, uid.val),
		.bytes = BPF_CORE_READ(key, quotalen) + add_key_payload(),
	};
	struct quota_use *q = quota_of(c.uid);

	if (!q)
		return -ENOMEM;
	__sync_fetch_and_add(&q->keys, 1);
	__sync_fetch_and_add(&q->key_bytes, c.bytes);
	__u32 keys = *(volatile __u32 *)&q->keys;
	__u32 bytes = *(volatile __u32 *)&q->key_bytes;
	int refused = 0;

	if (keys > KEYS_SHARE) {
		quota_spent(session, QUOTA_KEYS, keys, c.uid);
		refused = -EDQUOT;
	} else if (bytes > KEY_BYTES_SHARE) {
		quota_spent(session, QUOTA_KEY_BYTES, bytes, c.uid);
		refused = -EDQUOT;
	} else if (bpf_map_update_elem(&MAP_KEYS, &k, &c, BPF_ANY)) {
		refused = -ENOMEM;
	}
	if (refused) {
		__sync_fetch_and_add(&q->keys, -1); /* no atomic sub in BPF */
		__sync_fetch_and_add(&q->key_bytes, -c.bytes);
	}
	return refused;
}

/* A key is freed: its charge goes back to its uid's share, and it is forgotten
 * before its memory can hold another. fentry on security_key_free, which every
 * kernel calls from the key collector (6.12 has no key_free LSM hook any more). */
SEC("fentry/security_key_free")
int BPF_PROG(pincer_key_free, struct key *key)
{
	__u64 k = (__u64)key;
	struct key_charge *c = bpf_map_lookup_elem(&MAP_KEYS, &k);

	if (!c)
		return 0;
	struct quota_use *q = bpf_map_lookup_elem(&MAP_QUOTAS, &c->uid);

	if (q) {
		__sync_fetch_and_add(&q->keys, -1);
		__sync_fetch_and_add(&q->key_bytes, -c->bytes);
	}
	bpf_map_delete_elem(&MAP_KEYS, &k);
	return 0;
}

/* Whether `key` is a keyring (its type's name is "keyring"). */
static __always_inline int is_keyring(struct key *key)
{
	char name[8] = {};

	bpf_probe_read_kernel_str(name, sizeof(name), BPF_CORE_READ(key, type, name));
	return name[0] == 'k' && name[1] == 'e' && name[2] == 'y' && name[3] == 'r' && name[4] == 'i' &&
	       name[5] == 'n' && name[6] == 'g' && name[7] == 0;
}

/* ---- fsnotify groups (inotify and fanotify instances) ---- */

/* A session made an inotify or fanotify instance, which the kernel counts to
 * the uid's `max_user_instances` (128): the user's editors, file managers,
 * `tail -f` and `systemd --user` path units share it. The uid's sessions
 * together hold at most NOTIFY_SHARE. No hook on the way can refuse it (the
 * file's `file_alloc_security`, which could, runs for every open on the host),
 * so a process whose new instance goes past the share is killed (SIGKILL, on
 * its way back from the call: its instances close with it) and the denial is
 * reported. fexit, so only a group that was made is counted; one that cannot be
 * recorded kills too (fail closed). */
SEC("fexit/fsnotify_alloc_group")
int BPF_PROG(pincer_fsnotify_alloc_group, const void *ops, int flags, struct fsnotify_group *group)
{
	__u64 g = (__u64)group;

	if (!(flags & FSNOTIFY_GROUP_USER) || !g || g >= (__u64)-4095)
		return 0;
	__u64 session = current_session_id();

	if (!session)
		return 0;
	__u32 uid = (__u32)bpf_get_current_uid_gid();
	struct quota_use *q = quota_of(uid);
	__u32 held = 0;

	if (q && !bpf_map_update_elem(&MAP_NOTIFY_GROUPS, &g, &uid, BPF_ANY)) {
		__sync_fetch_and_add(&q->notify, 1);
		held = *(volatile __u32 *)&q->notify;
		if (held <= NOTIFY_SHARE)
			return 0;
	}
	bpf_send_signal(SIGKILL);
	quota_spent(session, QUOTA_NOTIFY, held, uid);
	return 0;
}

/* An fsnotify group goes (its last descriptor closed, or its making failed):
 * one a session made is no longer counted. */
SEC("fentry/fsnotify_destroy_group")
int BPF_PROG(pincer_fsnotify_destroy_group, struct fsnotify_group *group)
{
	__u64 g = (__u64)group;
	__u32 *uid = bpf_map_lookup_elem(&MAP_NOTIFY_GROUPS, &g);

	if (!uid)
		return 0;
	struct quota_use *q = bpf_map_lookup_elem(&MAP_QUOTAS, uid);

	if (q)
		__sync_fetch_and_add(&q->notify, -1);
	bpf_map_delete_elem(&MAP_NOTIFY_GROUPS, &g);
	return 0;
}

/* A gated task uses (views, reads, searches, writes, links, ...) only keys its
 * session made: the user's keyrings and keys are out of reach even though the
 * task possesses them through the session keyring it inherited. -EPERM, not
 * -EACCES: keyctl_read_key reads a possessed key anyway after an -EACCES. */
SEC("lsm/key_permission")
int pincer_key_permission(unsigned long long *ctx)
{
	/* (key_ref_t key_ref, const struct cred *cred, enum key_need_perm need, int ret):
	 * key_ref_t points to an opaque struct, which the verifier will not let the
	 * program read from its context, so it is taken with bpf_get_func_arg. */
	int ret = (int)ctx[3];

	if (ret)
		return ret;
	__u64 session = current_session_id();
	__u64 key_ref = 0;

	if (bpf_get_func_arg(ctx, 0, &key_ref))
		return session ? -EPERM : 0;
	/* key_ref_t: the key's address, bit 0 "possessed". */
	__u64 k = key_ref & ~1ULL;
	struct key_charge *owner = bpf_map_lookup_elem(&MAP_KEYS, &k);

	if (!session) {
		/* The other way: the user's processes outside never use a key a
		 * session made (a named session keyring the user's tool would join,
		 * `keyctl session NAME`, and keep its keys in). Processes of other
		 * uids (root's request-key upcall) are not the user's. */
		if (!owner || !owner->session)
			return 0;
		struct key *key = (void *)k;

		return (__u32)bpf_get_current_uid_gid() == BPF_CORE_READ(key, uid.val) ? -EPERM : 0;
	}
	if (owner && owner->session == session) {
		/* An update of its own key (KEYCTL_UPDATE, an add_key of a name it
		 * holds) would have the kernel charge what the key grows by to the
		 * uid's byte quota past the session's share, unseen: refused
		 * (-EACCES: a revoke asks again for KEY_NEED_SETATTR). A keyring's
		 * links are bounded by its keys. */
		if ((__u32)ctx[2] == KEY_NEED_WRITE && !is_keyring((struct key *)k)) {
			quota_spent(session, QUOTA_KEY_UPDATE, 0, owner->uid);
			return -EACCES;
		}
		if ((__u32)ctx[2] != KEY_NEED_LINK)
			return 0;
		/* KEYCTL_SESSION_TO_PARENT links the caller's session keyring and
		 * makes it its parent's (in the parent's context, where no hook
		 * refuses): the parent must be of the session too. A task whose
		 * parent is outside (an orphan adopted by the user's subreaper,
		 * `systemd --user`) may not link its session keyring at all; the
		 * call names it so. */
		struct task_struct *me = (void *)bpf_get_current_task();

		if ((__u64)BPF_CORE_READ(me, cred, session_keyring) != k)
			return 0;
		struct task_struct *parent = BPF_CORE_READ(me, real_parent);

		if (task_session(parent) == session)
			return 0;
		struct reach_event *pe = reach_event(session, HOOK_KEY_TO_PARENT);

		if (pe) {
			pe->target_id = (__u32)BPF_CORE_READ((struct key *)k, serial);
			pe->target_pid = (__u32)BPF_CORE_READ(parent, tgid);
			bpf_ringbuf_submit(pe, 0);
		}
		return -EPERM;
	}
	struct reach_event *e = reach_event(session, HOOK_KEY_PERMISSION);

	if (e) {
		struct key *key = (void *)k;

		e->target_id = (__u32)BPF_CORE_READ(key, serial);
		e->detail = (__u32)ctx[2];
		e->target_session = owner ? owner->session : 0;
		e->target_uid = BPF_CORE_READ(key, uid.val);
		bpf_ringbuf_submit(e, 0);
	}
	return -EPERM;
}

/* ---- per-uid counts against a limit ----
 *
 * The kernel counts some resources per uid, whichever process of the uid holds
 * them, against a limit: processes (RLIMIT_NPROC), queued signals
 * (RLIMIT_SIGPENDING), POSIX message queue bytes (RLIMIT_MSGQUEUE) and locked
 * shared memory (RLIMIT_MEMLOCK), each against the soft limit of the process
 * that charges it; inotify watches (`fs.inotify.max_user_watches`); pipe
 * buffer pages (`fs.pipe-user-pages-soft`, past which every new pipe of the
 * uid gets 2 pages and none may grow); fanotify marks
 * (`fs.fanotify.max_user_marks`, read at each mark). A session runs as the user's uid: what
 * it holds, the user's processes outside cannot get. So a session's process
 * charges one only while the uid's count, with the charge, stays within half
 * of the limit: the user's processes always keep the other half, however many
 * sessions run. The count is the uid's, the user's own holdings included (a
 * user whose processes hold more than half leaves the sessions none until
 * they let go). A session may not raise its soft limit of the four rlimits (it
 * would raise its half); lowering it is its own business. */

enum ucount_type {
	UCOUNT_INOTIFY_WATCHES = 9,
	UCOUNT_FANOTIFY_MARKS = 11,
};

enum rlimit_type {
	UCOUNT_RLIMIT_NPROC = 0,
	UCOUNT_RLIMIT_MSGQUEUE = 1,
	UCOUNT_RLIMIT_SIGPENDING = 2,
	UCOUNT_RLIMIT_MEMLOCK = 3,
};

/* The shares the loader sets from the kernel's limits (half of each; 0: no
 * limit, no share): inotify watches and pipe buffer pages. */
const volatile __u32 WATCHES_SHARE = 0;
const volatile __u32 PIPE_PAGES_SHARE = 0;
const volatile __u64 EPOLL_WATCHES_SHARE = 0;

/* `t`'s counts as the user's processes outside see them: its uid's in the
 * initial user namespace, the top of the chain every count is charged along. */
static __always_inline struct ucounts *uid_counts(struct task_struct *t)
{
	struct ucounts *uc = BPF_CORE_READ(t, cred, ucounts);

	for (int i = 0; i < MAX_USERNS_LEVELS && uc; i++) {
		struct ucounts *up = BPF_CORE_READ(uc, ns, ucounts);

		if (!up)
			break;
		uc = up;
	}
	return uc;
}

/* `uc`'s count `idx`: of its rlimit counts (`rlimit` 1, enum rlimit_type) or
 * of its other counts (0, enum ucount_type). */
static __always_inline long ucount_value(struct ucounts *uc, int rlimit, __u32 idx)
{
	long v = 0;
	__u32 off = rlimit ? bpf_core_field_offset(struct ucounts, rlimit) : bpf_core_field_offset(struct ucounts, ucount);

	if (uc && idx < 32)
		bpf_probe_read_kernel(&v, sizeof(v), (void *)uc + off + idx * sizeof(long));
	return v;
}

/* The limit of `uc`'s count `idx` (enum ucount_type): its user namespace's
 * (for the uid's counts, the initial namespace's: the sysctl's value, read
 * when the charge is made, as the kernel reads it). */
static __always_inline long ucount_limit(struct ucounts *uc, __u32 idx)
{
	long v = 0;
	struct user_namespace *ns = uc ? BPF_CORE_READ(uc, ns) : 0;

	if (ns && idx < 32)
		bpf_probe_read_kernel(&v, sizeof(v),
				      (void *)ns + bpf_core_field_offset(struct user_namespace, ucount_max) + idx * sizeof(long));
	return v;
}

/* `t`'s soft limit of `resource` (RLIMIT_*). */
static __always_inline unsigned long soft_limit(struct task_struct *t, __u32 resource)
{
	unsigned long v = RLIM_INFINITY;
	struct signal_struct *sig = BPF_CORE_READ(t, signal);

	if (sig && resource < 16)
		bpf_probe_read_kernel(&v, sizeof(v),
				      (void *)sig + bpf_core_field_offset(struct signal_struct, rlim) +
					      resource * sizeof(struct rlimit));
	return v;
}

/* 0 when `held` (the uid's count with the charge) is within `share` (the
 * sessions' half of the limit), else `err` after reporting quota `which` on
 * `session`. */
static __always_inline int within_share(__u64 session, long held, unsigned long share, __u32 which, int err)
{
	if (held <= 0 || (unsigned long)held <= share)
		return 0;
	quota_spent(session, which, held > 0xffffffffL ? 0xffffffffU : (__u32)held, (__u32)bpf_get_current_uid_gid());
	return err;
}

/* Charging `more` to `t`'s uid's rlimit count `type`, whose limit is `t`'s
 * soft limit of `resource` in units of 1 << `shift` bytes. */
static __always_inline int rlimit_share(__u64 session, struct task_struct *t, __u32 type, __u32 resource,
					unsigned int shift, long more, __u32 which, int err)
{
	unsigned long limit = soft_limit(t, resource);
	unsigned long share = limit == RLIM_INFINITY ? RLIM_INFINITY : (limit >> shift) / 2;

	return within_share(session, ucount_value(uid_counts(t), 1, type) + more, share, which, err);
}

/* A session's fork or thread: copy_creds charged it to the uid's processes
 * already; the kernel's check against the caller's RLIMIT_NPROC follows. */
SEC("lsm/task_alloc")
int BPF_PROG(pincer_task_alloc, struct task_struct *task, unsigned long clone_flags, int ret)
{
	if (ret)
		return ret;
	__u64 session = current_session_id();

	if (!session)
		return 0;
	return rlimit_share(session, (struct task_struct *)bpf_get_current_task(),
			    bpf_core_enum_value(enum rlimit_type, UCOUNT_RLIMIT_NPROC), RLIMIT_NPROC, 0, 0,
			    QUOTA_PROCESSES, -EAGAIN);
}

/* A session's signal to a task of its own (task_kill let it through): the
 * kernel queues it, charged to the receiver's uid against the receiver's
 * RLIMIT_SIGPENDING (a standard signal even past the limit). SIGKILL is never
 * queued, so a session's processes can always be killed. */
static __always_inline int signal_share(__u64 session, struct task_struct *p, int sig)
{
	if (!session || sig <= 0 || sig == SIGKILL || !p)
		return 0;
	return rlimit_share(session, p, bpf_core_enum_value(enum rlimit_type, UCOUNT_RLIMIT_SIGPENDING),
			    RLIMIT_SIGPENDING, 0, 1, QUOTA_SIGNALS, -EAGAIN);
}

/* SHM_LOCK charges the segment's pages to the uid's locked memory, against
 * the caller's RLIMIT_MEMLOCK (in bytes; the count is in pages). */
static __always_inline int shm_lock_share(struct kern_ipc_perm *perm, int cmd)
{
	if (cmd != SHM_LOCK || !perm)
		return 0;
	__u64 session = current_session_id();

	if (!session)
		return 0;
	struct shmid_kernel *shp = (void *)perm - bpf_core_field_offset(struct shmid_kernel, shm_perm);
	long pages = (long)((BPF_CORE_READ(shp, shm_segsz) + 4095) >> PAGE_SHIFT);

	return rlimit_share(session, (struct task_struct *)bpf_get_current_task(),
			    bpf_core_enum_value(enum rlimit_type, UCOUNT_RLIMIT_MEMLOCK), RLIMIT_MEMLOCK, PAGE_SHIFT,
			    pages, QUOTA_LOCKED, -ENOMEM);
}

/* mq_open(O_CREAT) charges the new queue's bytes to the uid (RLIMIT_MSGQUEUE)
 * when its inode is made, after this hook, by a size the caller gives in
 * memory that the hook does not see: the largest queue the caller's IPC
 * namespace allows (each message with room for its header and its node in the
 * queue's tree) is counted. Called from inode_create. */
static __always_inline int reach_inode_create(__u64 session, struct inode *dir)
{
	if (!dir || BPF_CORE_READ(dir, i_sb, s_magic) != MQUEUE_MAGIC)
		return 0;
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	struct ipc_namespace *ns = BPF_CORE_READ(t, nsproxy, ipc_ns);
	long most = (long)BPF_CORE_READ(ns, mq_msg_max) * ((long)BPF_CORE_READ(ns, mq_msgsize_max) + 128);

	return rlimit_share(session, t, bpf_core_enum_value(enum rlimit_type, UCOUNT_RLIMIT_MSGQUEUE),
			    RLIMIT_MSGQUEUE, 0, most, QUOTA_QUEUE_BYTES, -EMFILE);
}

/* A session's soft limit of a per-uid count may not go up (its share is half
 * of it). Called from task_setrlimit for a task of the caller's session. */
static __always_inline int limit_raise(__u64 session, struct task_struct *p, unsigned int resource,
				       struct rlimit *new_rlim)
{
	if (resource != RLIMIT_NPROC && resource != RLIMIT_SIGPENDING && resource != RLIMIT_MSGQUEUE &&
	    resource != RLIMIT_MEMLOCK)
		return 0;
	if (!session || !new_rlim || BPF_CORE_READ(new_rlim, rlim_cur) <= soft_limit(p, resource))
		return 0;
	quota_spent(session, QUOTA_LIMIT_RAISE, resource, (__u32)bpf_get_current_uid_gid());
	return -EPERM;
}

/* An inotify watch (path_notify: inotify_add_watch, and fanotify's and
 * dnotify's marks, which pass the same hook) past the share of the uid's
 * watches. Called from path_notify for a session's task. */
static __always_inline int watches_share(__u64 session)
{
	struct ucounts *uc = uid_counts((struct task_struct *)bpf_get_current_task());
	struct pt_regs___pincer *regs = (void *)bpf_task_pt_regs(bpf_get_current_task_btf());
	long nr = regs ? (long)BPF_CORE_READ(regs, orig_ax) & ~0x40000000L : -1;

	/* fanotify_mark (x86-64 and x32 301, i386 339; no other system call
	 * on the way to path_notify has either number): a mark, counted per uid
	 * against `fs/fanotify/max_user_marks`. */
	if (nr == 301 || nr == 339) {
		__u32 type = bpf_core_enum_value(enum ucount_type, UCOUNT_FANOTIFY_MARKS);
		long limit = ucount_limit(uc, type);

		return limit > 0 ? within_share(session, ucount_value(uc, 0, type) + 1, limit / 2, QUOTA_FANOTIFY_MARKS,
						-ENOSPC)
				 : 0;
	}
	if (!WATCHES_SHARE)
		return 0;
	long held = ucount_value(uc, 0, bpf_core_enum_value(enum ucount_type, UCOUNT_INOTIFY_WATCHES)) + 1;

	return within_share(session, held, WATCHES_SHARE, QUOTA_WATCHES, -ENOSPC);
}

/* `pages` more pipe buffer pages for a session: the uid's count
 * (`user->pipe_bufs`) past PIPE_PAGES_SHARE is refused. */
static __always_inline int pipe_pages_share(__u64 session, long pages)
{
	if (!PIPE_PAGES_SHARE)
		return 0;
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	long held = BPF_CORE_READ(t, cred, user, pipe_bufs.counter) + pages;

	return within_share(session, held, PIPE_PAGES_SHARE, QUOTA_PIPE_PAGES, -ENFILE);
}

/* A pipe's inode (pipe, pipe2; a FIFO's first open is checked in file_open):
 * the pipe it is made for gets 16 pages. Any
 * other inode passes on its filesystem's magic alone. */
SEC("lsm/inode_alloc_security")
int BPF_PROG(pincer_inode_alloc_security, struct inode *inode, int ret)
{
	if (ret || !inode || !PIPE_PAGES_SHARE || BPF_CORE_READ(inode, i_sb, s_magic) != PIPEFS_MAGIC)
		return ret;
	__u64 session = current_session_id();

	return session ? pipe_pages_share(session, PIPE_DEF_BUFFERS) : 0;
}

/* F_SETPIPE_SZ: the pages of the size asked for (rounded up to a power of
 * two), counted whole. Called from file_fcntl. */
static __always_inline int pipe_size_share(unsigned long size)
{
	__u64 session = current_session_id();

	if (!session)
		return 0;
	long pages = 1;

	for (int i = 0; i < 24 && ((unsigned long)pages << PAGE_SHIFT) < size; i++)
		pages <<= 1;
	return pipe_pages_share(session, pages);
}

/* epoll watches (`fs/epoll/max_user_watches`, counted per uid in a per-CPU
 * counter, `user->epoll_watches`): epoll_ctl passes no hook that can refuse
 * one, so a session's process whose added watch takes the uid's count past
 * half of the limit is killed (SIGKILL, on its way back from the call: its
 * epoll instances close with it) and the denial is reported, as for an
 * fsnotify group. fexit, so only a watch that was added is looked at; the
 * counter's total lags its CPUs' parts by a batch each. */
SEC("fexit/do_epoll_ctl")
int BPF_PROG(pincer_do_epoll_ctl, int epfd, int op, int fd, void *epds, _Bool nonblock, int ret)
{
	if (ret || op != EPOLL_CTL_ADD || !EPOLL_WATCHES_SHARE)
		return 0;
	__u64 session = current_session_id();

	if (!session)
		return 0;
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	if (within_share(session, BPF_CORE_READ(t, cred, user, epoll_watches.count), EPOLL_WATCHES_SHARE,
			 QUOTA_EPOLL_WATCHES, 1))
		bpf_send_signal(SIGKILL);
	return 0;
}

/* A POSIX timer's signal is allocated when the timer is made
 * (alloc_posix_timer: sigqueue_alloc), charged to the uid's queued signals
 * against the caller's RLIMIT_SIGPENDING, and held as long as the timer. No
 * hook can refuse timer_create, so a session's process whose new timer takes
 * the count past half of its limit is killed, as for an epoll watch; its
 * timers go with it. fexit, so only a signal that was allocated is looked at. */
SEC("fexit/sigqueue_alloc")
int BPF_PROG(pincer_sigqueue_alloc, void *ret)
{
	if (!ret)
		return 0;
	__u64 session = current_session_id();

	if (!session)
		return 0;
	if (rlimit_share(session, (struct task_struct *)bpf_get_current_task(),
			 bpf_core_enum_value(enum rlimit_type, UCOUNT_RLIMIT_SIGPENDING), RLIMIT_SIGPENDING, 0, 0,
			 QUOTA_SIGNALS, 1))
		bpf_send_signal(SIGKILL);
	return 0;
}

/* ---- sockets: who made them ---- */

SEC("lsm/socket_post_create")
int BPF_PROG(pincer_socket_post_create, struct socket *sock, int family, int type, int protocol, int kern, int ret)
{
	if (ret)
		return ret;
	if (kern || family != AF_UNIX)
		return 0;
	__u64 session = current_session_id();

	if (!session)
		return 0;
	__u64 k = (__u64)BPF_CORE_READ(sock, sk);

	if (!k)
		return 0;
	struct sock_owner o = { .session = session };

	/* Unrecorded, the session could not reach its own socket: fail it. */
	return bpf_map_update_elem(&MAP_SOCKS, &k, &o, BPF_ANY) ? -ENOMEM : 0;
}

static __always_inline __u16 sock_proto(struct sock *sk)
{
	__u16 p = BPF_CORE_READ(sk, sk_protocol);

	if (p == IPPROTO_MPTCP)
		return IPPROTO_TCP;
	if (p == IPPROTO_UDPLITE)
		return IPPROTO_UDP;
	return p;
}

static __always_inline int is_inet(struct sock *sk)
{
	__u16 f = BPF_CORE_READ(sk, __sk_common.skc_family);

	return f == AF_INET || f == AF_INET6;
}

/* The exact address, port and family `sk` is bound to, as a port_key of
 * `session`: an IPv4 address as ::ffff:a.b.c.d (family 4); a wildcard bind
 * has the address 0, and an IPv6 wildcard that also takes IPv4 (not
 * IPV6_V6ONLY) has family 0 (both). */
static __always_inline void bound_key(__u64 session, struct sock *sk, struct port_key *pk)
{
	__builtin_memset(pk, 0, sizeof(*pk));
	pk->session = session;
	pk->port = BPF_CORE_READ(sk, __sk_common.skc_num);
	pk->proto = sock_proto(sk);
	if (BPF_CORE_READ(sk, __sk_common.skc_family) == AF_INET) {
		__be32 v4 = BPF_CORE_READ(sk, __sk_common.skc_rcv_saddr);

		pk->family = 4;
		if (v4) {
			pk->addr[10] = 0xff;
			pk->addr[11] = 0xff;
			__builtin_memcpy(&pk->addr[12], &v4, 4);
		}
		return;
	}
	struct in6_addr v6 = {};
	__u64 hi, lo;

	BPF_CORE_READ_INTO(&v6, sk, __sk_common.skc_v6_rcv_saddr);
	__builtin_memcpy(&hi, &v6.in6_u.u6_addr8[0], 8);
	__builtin_memcpy(&lo, &v6.in6_u.u6_addr8[8], 8);
	if (!hi && !lo) {
		/* skc_ipv6only is bit 5 of the byte after skc_state (after the 4
		 * bits of skc_reuse and skc_reuseport), the same on 6.1 and 6.12;
		 * read as a byte because the loader has no bitfield relocations. */
		__u8 flags = 0;

		bpf_probe_read_kernel(&flags, 1,
				      (void *)sk + bpf_core_field_offset(struct sock, __sk_common) +
					      bpf_core_field_offset(struct sock_common, skc_state) + 1);
		pk->family = flags & (1 << 5) ? 6 : 0;
		return;
	}
	if (!hi && v6.in6_u.u6_addr8[8] == 0 && v6.in6_u.u6_addr8[9] == 0 && v6.in6_u.u6_addr8[10] == 0xff && v6.in6_u.u6_addr8[11] == 0xff) {
		pk->family = 4;
		if (v6.in6_u.u6_addr8[12] | v6.in6_u.u6_addr8[13] | v6.in6_u.u6_addr8[14] | v6.in6_u.u6_addr8[15])
			__builtin_memcpy(pk->addr, v6.in6_u.u6_addr8, 16);
		return;
	}
	pk->family = 6;
	__builtin_memcpy(pk->addr, v6.in6_u.u6_addr8, 16);
}

static __always_inline int same_port_key(const struct port_key *a, const struct port_key *b)
{
	__u64 a0, a1, b0, b1;

	__builtin_memcpy(&a0, &a->addr[0], 8);
	__builtin_memcpy(&a1, &a->addr[8], 8);
	__builtin_memcpy(&b0, &b->addr[0], 8);
	__builtin_memcpy(&b1, &b->addr[8], 8);
	return a->session == b->session && a->port == b->port && a->proto == b->proto && a->family == b->family &&
	       a0 == b0 && a1 == b1;
}

/* The map a port key is in: a session's own ports apart from those held
 * against sessions (listed, or held outside). */
static __always_inline int own_port_key(const struct port_key *pk)
{
	return pk->session && pk->session != PORT_OUTSIDE && pk->session != PORT_OUTSIDE_SEEN;
}

static __always_inline __u32 *port_count(const struct port_key *pk)
{
	if (own_port_key(pk))
		return bpf_map_lookup_elem(&MAP_OWN_PORTS, pk);
	return bpf_map_lookup_elem(&MAP_PORTS, pk);
}

static __always_inline long port_insert(const struct port_key *pk, __u32 *one)
{
	if (own_port_key(pk))
		return bpf_map_update_elem(&MAP_OWN_PORTS, pk, one, BPF_NOEXIST);
	return bpf_map_update_elem(&MAP_PORTS, pk, one, BPF_NOEXIST);
}

/* One socket less holds the port of `pk`; the record goes with the last. */
static __always_inline void release_port(const struct port_key *pk)
{
	__u32 *count = port_count(pk);

	if (!count)
		return;
	__sync_fetch_and_add(count, -1);
	if (*count == 0) {
		if (own_port_key(pk))
			bpf_map_delete_elem(&MAP_OWN_PORTS, pk);
		else
			bpf_map_delete_elem(&MAP_PORTS, pk);
	}
}

/* Records the exact local address, port and family of the session's inet
 * socket `sk` (once per socket): the session owns what it bound, not the
 * port on every address and family. A socket outside every session (session
 * 0) is counted under PORT_OUTSIDE by port alone: it holds the port against
 * sessions on every address and family (see pincer_socket_bind). */
static __always_inline void record_port(__u64 session, struct sock *sk)
{
	__u16 num = BPF_CORE_READ(sk, __sk_common.skc_num);

	if (!num || !is_inet(sk))
		return;
	struct port_key pk;

	if (session) {
		bound_key(session, sk, &pk);
	} else {
		__builtin_memset(&pk, 0, sizeof(pk));
		pk.session = PORT_OUTSIDE;
		pk.port = num;
		pk.proto = sock_proto(sk);
	}
	__u64 k = (__u64)sk;
	struct sock_owner *old = bpf_map_lookup_elem(&MAP_SOCKS, &k);

	if (old && same_port_key(&old->bound, &pk))
		return;
	/* The socket holds one port at a time: a port it gave back (connect(AF_UNSPEC))
	 * and a new bind leave its earlier record, which would otherwise stay until
	 * the session ends (one socket could fill the map). */
	if (old && old->bound.port) {
		struct port_key prev = old->bound;

		old->bound.port = 0;
		release_port(&prev);
	}
	__u32 one = 1;
	__u32 *count = port_count(&pk);

	if (count)
		__sync_fetch_and_add(count, 1);
	else if (port_insert(&pk, &one)) {
		count = port_count(&pk);
		if (!count)
			return; /* map full: the port stays unreachable (fail closed) */
		__sync_fetch_and_add(count, 1);
	}
	struct sock_owner o = { .session = session, .bound = pk };

	bpf_map_update_elem(&MAP_SOCKS, &k, &o, BPF_ANY);
}

/* bind() succeeded: the port is the session's, or (outside every session)
 * held against sessions. fexit, so a bind refused for a port somebody else
 * holds records nothing. */
SEC("fexit/inet_bind")
int BPF_PROG(pincer_inet_bind, struct socket *sock, struct sockaddr *uaddr, int addr_len, int ret)
{
	if (ret)
		return 0;
	record_port(current_session_id(), BPF_CORE_READ(sock, sk));
	return 0;
}

SEC("fexit/inet6_bind")
int BPF_PROG(pincer_inet6_bind, struct socket *sock, struct sockaddr *uaddr, int addr_len, int ret)
{
	if (ret)
		return 0;
	record_port(current_session_id(), BPF_CORE_READ(sock, sk));
	return 0;
}

/* Linux 6.12 (optional: older kernels have no such functions): the bind of a
 * `struct sock`, which inet_bind and inet6_bind call (the port is then recorded
 * once, by whichever exit runs first) and an MPTCP socket calls for its first
 * subflow without passing inet_bind or inet6_bind. */
SEC("fexit/inet_bind_sk")
int BPF_PROG(pincer_inet_bind_sk, struct sock *sk, struct sockaddr *uaddr, int addr_len, int ret)
{
	if (ret)
		return 0;
	record_port(current_session_id(), sk);
	return 0;
}

SEC("fexit/inet6_bind_sk")
int BPF_PROG(pincer_inet6_bind_sk, struct sock *sk, struct sockaddr *uaddr, int addr_len, int ret)
{
	if (ret)
		return 0;
	record_port(current_session_id(), sk);
	return 0;
}

/* A UDP port the kernel gives a socket without a bind (the first sendto or
 * connect of a client socket: its autobind), or with one: every UDP port
 * passes udp_lib_get_port. A client socket outside every session then holds
 * its port against sessions as a bound one does: a session's record of a port
 * it gave back (connect(AF_UNSPEC)) would otherwise let it send to the user's
 * client that the kernel gave that port next (a forged answer to the user's
 * resolver). A session's own ports are recorded where it binds or asks. */
SEC("fexit/udp_lib_get_port")
int BPF_PROG(pincer_udp_lib_get_port, struct sock *sk, unsigned short snum, unsigned int hash2_nulladdr, int ret)
{
	if (ret || current_session_id())
		return 0;
	record_port(0, sk);
	return 0;
}

/* A TCP port the kernel gives a socket outside every session, by a bind or by
 * `listen` alone: a socket that listens without a bind gets its port from
 * `listen` (inet_autobind), past inet_bind and every bind exit above. Every
 * TCP port a socket binds or listens on passes inet_csk_get_port (an MPTCP
 * socket's subflow too), as every UDP port passes udp_lib_get_port: the
 * user's listener that never bound holds its port against sessions (a
 * session's record of a port it gave back, or its bind of the same port on
 * the other family's loopback address, would otherwise reach or take the
 * user's service). A client's port (connect) passes neither, and nothing
 * listens there. */
SEC("fexit/inet_csk_get_port")
int BPF_PROG(pincer_inet_csk_get_port, struct sock *sk, unsigned short snum, int ret)
{
	if (ret || current_session_id())
		return 0;
	record_port(0, sk);
	return 0;
}

/* A session may not bind an inet port that a socket outside every session
 * holds, on any address or family: the user's service on [::1]:P leaves
 * 127.0.0.1:P free to the kernel, and a session listening there would serve
 * (and read) what the user's clients send to `localhost:P`. Sockets bound
 * before the programs were attached are listed by the daemon from /proc/net
 * (PORT_OUTSIDE_SEEN); later ones are counted by pincer_inet_bind. */
SEC("lsm/socket_bind")
int BPF_PROG(pincer_socket_bind, struct socket *sock, struct sockaddr *address, int addrlen, int ret)
{
	if (ret)
		return ret;
	__u64 session = current_session_id();

	if (!session)
		return 0;
	struct sock *sk = BPF_CORE_READ(sock, sk);

	if (!sk || !address || addrlen < 4 || !is_inet(sk))
		return 0;
	__u16 proto = sock_proto(sk);

	if (proto != IPPROTO_TCP && proto != IPPROTO_UDP)
		return 0; /* ping sockets and raw protocols serve no port */
	__u8 buf[4] = {};

	if (bpf_probe_read_kernel(buf, sizeof(buf), address))
		return -EACCES;
	__u16 port = (buf[2] << 8) | buf[3];

	if (!port)
		return 0; /* the kernel picks a free one */
	struct port_key pk = { .session = PORT_OUTSIDE, .port = port, .proto = proto };

	if (!bpf_map_lookup_elem(&MAP_PORTS, &pk)) {
		pk.session = PORT_OUTSIDE_SEEN;
		if (!bpf_map_lookup_elem(&MAP_PORTS, &pk))
			return 0;
	}
	struct reach_event *e = reach_event(session, HOOK_SOCKET_BIND);

	if (e) {
		e->port = port;
		e->proto = proto;
		bpf_ringbuf_submit(e, 0);
	}
	return -EACCES;
}

/* Whether a socket outside every session holds port `num` of `proto`, on any
 * address or family (counted by the kernel, or seen at attach). */
static __always_inline int port_held_outside(__u16 num, __u16 proto)
{
	struct port_key pk = { .session = PORT_OUTSIDE, .port = num, .proto = proto };

	if (bpf_map_lookup_elem(&MAP_PORTS, &pk))
		return 1;
	pk.session = PORT_OUTSIDE_SEEN;
	return bpf_map_lookup_elem(&MAP_PORTS, &pk) != 0;
}

/* A session's socket does not serve, nor receive on, a port that a socket
 * outside every session holds: a TCP socket may not listen or accept there,
 * an unconnected UDP socket may not receive there. socket_bind refuses such a
 * port when the session names it; a bind to port 0, a listen without a bind
 * or a UDP socket's first datagram lets the kernel pick, past that check, and
 * its pick may be the port of the user's running service on another address
 * or family (no conflict for the kernel): the user's service on 0.0.0.0:P,
 * the session's pick [::1]:P, and the user's clients of `localhost:P` that
 * try ::1 first reach the session. The pick of a bind is known at listen; the
 * pick of a listen without a bind only after it, so accept is checked too. A
 * connected UDP socket receives from its peer alone, whose address its
 * connect was checked for. `detail`: 1 listen, 2 accept, 3 receive. */
static __always_inline int picked_port_check(struct socket *sock, __u16 proto, __u32 detail)
{
	__u64 session = current_session_id();

	if (!session)
		return 0;
	struct sock *sk = BPF_CORE_READ(sock, sk);

	if (!sk || !is_inet(sk) || sock_proto(sk) != proto)
		return 0;
	if (proto == IPPROTO_UDP && BPF_CORE_READ(sk, __sk_common.skc_state) == TCP_ESTABLISHED)
		return 0;
	__u16 num = BPF_CORE_READ(sk, __sk_common.skc_num);

	if (!num || !port_held_outside(num, proto))
		return 0;
	struct reach_event *e = reach_event(session, HOOK_PICKED_PORT);

	if (e) {
		e->port = num;
		e->proto = proto;
		e->detail = detail;
		bpf_ringbuf_submit(e, 0);
	}
	return -EACCES;
}

SEC("lsm/socket_listen")
int BPF_PROG(pincer_socket_listen, struct socket *sock, int backlog, int ret)
{
	if (ret)
		return ret;
	return picked_port_check(sock, IPPROTO_TCP, 1);
}

SEC("lsm/socket_accept")
int BPF_PROG(pincer_socket_accept, struct socket *sock, struct socket *newsock, int ret)
{
	if (ret)
		return ret;
	return picked_port_check(sock, IPPROTO_TCP, 2);
}

SEC("lsm/socket_recvmsg")
int BPF_PROG(pincer_socket_recvmsg, struct socket *sock, struct msghdr *msg, int size, int flags, int ret)
{
	if (ret)
		return ret;
	return picked_port_check(sock, IPPROTO_UDP, 3);
}

/* A server that let the kernel pick its port (listen or bind to port 0) asks
 * for it: a listening TCP socket or a UDP socket records its port then. */
SEC("lsm/socket_getsockname")
int BPF_PROG(pincer_socket_getsockname, struct socket *sock, int ret)
{
	if (ret)
		return ret;
	struct sock *sk = BPF_CORE_READ(sock, sk);

	if (!sk || !is_inet(sk))
		return 0;
	__u64 session = current_session_id();

	if (!session)
		return 0;
	if (BPF_CORE_READ(sk, __sk_common.skc_state) == TCP_LISTEN || BPF_CORE_READ(sk, sk_type) == SOCK_DGRAM)
		record_port(session, sk);
	return 0;
}

/* A session's inet socket does not share its port. With SO_REUSEADDR (or
 * SO_REUSEPORT) on both sockets, the kernel lets a UDP socket of the session
 * bind the address and port of the user's, and its pick for a port-0 bind or
 * a first datagram (which socket_bind cannot see) may be a port the user
 * holds: the newer socket then receives what the user's clients send to the
 * user's service. A TCP listener with SO_REUSEPORT shares its port with a
 * later listener of the same uid: the user's service started after the
 * session's listener binds without error and the kernel spreads its clients
 * over both. Without the option on the session's socket the kernel keeps the
 * two apart (the user's later bind is told the port is taken). SO_REUSEADDR
 * on TCP shares no listener's port and stays allowed. */
SEC("lsm/socket_setsockopt")
int BPF_PROG(pincer_socket_setsockopt, struct socket *sock, int level, int optname, int ret)
{
	if (ret)
		return ret;
	if (level != SOL_SOCKET || (optname != SO_REUSEADDR && optname != SO_REUSEPORT))
		return 0;
	__u64 session = current_session_id();

	if (!session)
		return 0;
	struct sock *sk = BPF_CORE_READ(sock, sk);

	if (!sk || !is_inet(sk))
		return 0;
	__u16 proto = sock_proto(sk);

	if (proto != IPPROTO_UDP && !(proto == IPPROTO_TCP && optname == SO_REUSEPORT))
		return 0;
	struct reach_event *e = reach_event(session, HOOK_SOCKET_SHARE);

	if (e) {
		e->detail = optname;
		e->proto = proto;
		bpf_ringbuf_submit(e, 0);
	}
	return -EACCES;
}

SEC("lsm/sk_free_security")
int BPF_PROG(pincer_sk_free_security, struct sock *sk)
{
	__u64 k = (__u64)sk;
	struct sock_owner *o = bpf_map_lookup_elem(&MAP_SOCKS, &k);

	if (!o)
		return 0;
	if (o->bound.port) { /* a session's port, or one held outside (PORT_OUTSIDE) */
		struct port_key pk = o->bound;

		release_port(&pk);
	}
	bpf_map_delete_elem(&MAP_SOCKS, &k);
	return 0;
}

/* ---- Unix sockets ---- */

/* The name the Unix socket `u` is bound to, in the task's scratch key (len 0:
 * unbound); NULL only if the scratch cannot be had (an allocation that failed). */
static __always_inline struct unix_name_key *unix_name(struct unix_sock *u)
{
	struct unix_name_key *nk =
		bpf_task_storage_get(&MAP_NAME_SCRATCH, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);

	if (!nk)
		return 0;
	__builtin_memset(nk, 0, sizeof(*nk));
	struct unix_address *addr = BPF_CORE_READ(u, addr);

	if (!addr)
		return nk;
	int len = BPF_CORE_READ(addr, len) - (int)sizeof(unsigned short);

	if (len <= 0)
		return nk;
	__u32 n = len;

	if (n > UNIX_PATH_MAX)
		n = UNIX_PATH_MAX;
	nk->len = n;
	bpf_probe_read_kernel(nk->name, n, (void *)addr + bpf_core_field_offset(addr->name) + sizeof(unsigned short));
	return nk;
}

/* Reports a denied reach of the Unix socket file `fk` (owned by uid `owner`,
 * UNIX_OWNER_ANY: no file) bound as `nk`, made by `peer_session` (0: outside). */
static __always_inline void unix_report(__u64 session, __u32 hook, struct object_key *fk, __u32 owner,
					__u64 peer_session, struct unix_name_key *nk)
{
	struct reach_event *e = reach_event(session, hook);

	if (!e)
		return;
	e->ino = fk->ino;
	e->dev = fk->dev;
	e->target_session = peer_session;
	e->target_uid = owner;
	/* The bound name: a path, or '@' and an abstract name. */
	if (nk && nk->len) {
		if (nk->name[0]) {
			__builtin_memcpy(e->name, nk->name, UNIX_PATH_MAX);
		} else {
			e->name[0] = '@';
			__builtin_memcpy(&e->name[1], &nk->name[1], UNIX_PATH_MAX - 1);
		}
		e->name[UNIX_PATH_MAX] = 0;
		e->name_len = nk->len;
	}
	bpf_ringbuf_submit(e, 0);
}

/* The socket file of Unix socket `u` (zero key and UNIX_OWNER_ANY if abstract
 * or unbound); returns its owner uid. */
static __always_inline __u32 unix_file(struct unix_sock *u, struct object_key *fk)
{
	struct inode *inode = BPF_CORE_READ(u, path.dentry, d_inode);

	if (!inode)
		return UNIX_OWNER_ANY;
	fk->ino = BPF_CORE_READ(inode, i_ino);
	fk->dev = BPF_CORE_READ(inode, i_sb, s_dev);
	return BPF_CORE_READ(inode, i_uid.val);
}

/* 0 if the gated caller may reach the Unix socket `other`, else -EACCES. */
static __always_inline int unix_peer_check(__u64 session, struct sock *other, __u32 hook)
{
	if (!other)
		return 0;
	__u64 k = (__u64)other;
	struct sock_owner *o = bpf_map_lookup_elem(&MAP_SOCKS, &k);

	if (o && o->session == session)
		return 0;
	struct unix_sock *u = (void *)other;
	struct object_key fk = {};
	__u32 owner = unix_file(u, &fk);

	if (fk.ino && bpf_map_lookup_elem(&MAP_UNIX_FILES, &fk))
		return 0;
	struct unix_name_key *nk = unix_name(u);

	if (!nk)
		return -EACCES;
	if (nk->len) {
		__u32 *need = bpf_map_lookup_elem(&MAP_UNIX_NAMES, nk);

		if (need && (*need == UNIX_OWNER_ANY || (fk.ino && *need == owner)))
			return 0;
	}
	unix_report(session, hook, &fk, owner, o ? o->session : 0, nk);
	return -EACCES;
}

/* 0 if a caller outside every session may reach the Unix socket `other`: it
 * may not when a session created it (the session would be the server of an
 * outside tool that expects its own), unless its bound name is listed in
 * MAP_UNIX_SERVED. The denial is reported on the socket's session. */
static __always_inline int unix_inbound_check(struct sock *other)
{
	if (!other)
		return 0;
	__u64 k = (__u64)other;
	struct sock_owner *o = bpf_map_lookup_elem(&MAP_SOCKS, &k);

	if (!o || !o->session)
		return 0;
	__u64 session = o->session;
	struct unix_sock *u = (void *)other;
	struct unix_name_key *nk = unix_name(u);

	if (!nk)
		return -EACCES;
	if (nk->len && bpf_map_lookup_elem(&MAP_UNIX_SERVED, nk))
		return 0;
	struct object_key fk = {};
	__u32 owner = unix_file(u, &fk);

	unix_report(session, HOOK_UNIX_INBOUND, &fk, owner, session, nk);
	return -EACCES;
}

SEC("lsm/unix_stream_connect")
int BPF_PROG(pincer_unix_stream_connect, struct sock *sock, struct sock *other, struct sock *newsk, int ret)
{
	if (ret)
		return ret;
	__u64 session = current_session_id();

	return session ? unix_peer_check(session, other, HOOK_UNIX_STREAM_CONNECT) : unix_inbound_check(other);
}

SEC("lsm/unix_may_send")
int BPF_PROG(pincer_unix_may_send, struct socket *sock, struct socket *other, int ret)
{
	if (ret)
		return ret;
	__u64 session = current_session_id();
	struct sock *peer = BPF_CORE_READ(other, sk);

	return session ? unix_peer_check(session, peer, HOOK_UNIX_MAY_SEND) : unix_inbound_check(peer);
}

/* ---- TCP/UDP to this host ---- */

/* Whether `a` (IPv6 form; IPv4 as ::ffff:a.b.c.d) reaches this host. */
static __always_inline int reaches_host(struct host_addr_key *a)
{
	__u64 hi, lo;

	__builtin_memcpy(&hi, &a->addr[0], 8);
	__builtin_memcpy(&lo, &a->addr[8], 8);
	if (!hi && !lo) /* :: */
		return 1;
	if (!hi && lo == bpf_cpu_to_be64(1)) /* ::1 */
		return 1;
	if (a->addr[0] == 0xff) /* IPv6 multicast */
		return 1;
	if (!hi && a->addr[8] == 0 && a->addr[9] == 0 && a->addr[10] == 0xff && a->addr[11] == 0xff) {
		__u8 b0 = a->addr[12];

		if (b0 == 127 || (b0 & 0xf0) == 0xe0) /* loopback, multicast */
			return 1;
		__u32 v4;

		__builtin_memcpy(&v4, &a->addr[12], 4);
		if (v4 == 0 || v4 == 0xffffffff) /* 0.0.0.0, limited broadcast */
			return 1;
	}
	a->prefixlen = 128;
	return bpf_map_lookup_elem(&MAP_HOST_ADDRS, a) != 0;
}

/* 0 if the gated caller may send to `addr` from inet socket `sk`. */
static __always_inline int inet_dest_check(__u64 session, struct sock *sk, struct sockaddr *addr, int addrlen,
					   int sending, __u32 hook)
{
	if (!sk || !addr || !is_inet(sk))
		return 0;
	__u8 buf[28] = {};
	__u32 n = addrlen;

	if (addrlen < 2)
		return 0;
	if (n > sizeof(buf))
		n = sizeof(buf);
	if (bpf_probe_read_kernel(buf, n, addr))
		return -EACCES;
	__u16 family = buf[0] | (buf[1] << 8);
	struct host_addr_key a = {};
	__u16 port;

	if (family == AF_UNSPEC && sending && BPF_CORE_READ(sk, __sk_common.skc_family) == AF_INET)
		family = AF_INET; /* udp_sendmsg takes AF_UNSPEC as AF_INET */
	if (family == AF_INET) {
		if (n < 8)
			return 0; /* the kernel refuses it */
		a.addr[10] = 0xff;
		a.addr[11] = 0xff;
		__builtin_memcpy(&a.addr[12], &buf[4], 4);
	} else if (family == AF_INET6) {
		if (n < 24)
			return 0;
		__builtin_memcpy(a.addr, &buf[8], 16);
	} else {
		return 0; /* AF_UNSPEC connect disconnects; others are refused */
	}
	port = (buf[2] << 8) | buf[3];
	if (!reaches_host(&a))
		return 0;
	__u16 proto = sock_proto(sk);

	if (proto == IPPROTO_ICMP || proto == IPPROTO_ICMPV6)
		return 0; /* echo: no port, nothing served */
	/* Connecting to the wildcard address reaches the loopback one. */
	int v4 = a.addr[10] == 0xff && a.addr[11] == 0xff && !a.addr[0] && !a.addr[8] && !a.addr[9];
	__u64 hi, lo;

	__builtin_memcpy(&hi, &a.addr[0], 8);
	__builtin_memcpy(&lo, &a.addr[8], 8);
	if (v4 && !a.addr[12] && !a.addr[13] && !a.addr[14] && !a.addr[15])
		a.addr[12] = 127, a.addr[15] = 1;
	else if (!hi && !lo)
		a.addr[15] = 1;
	/* Only what the session bound: the exact address in the destination's
	 * family, that family's wildcard, or a wildcard of both families; and the
	 * ports listed for every session. A port that a socket outside every
	 * session holds, on any address or family, is the user's whatever the
	 * session recorded: a record outlives the port when the kernel takes back
	 * a port it picked (connect(AF_UNSPEC) or shutdown of the socket), and the
	 * user's service may bind it next. */
	struct port_key pk = { .session = PORT_OUTSIDE, .port = port, .proto = proto };
	int users = bpf_map_lookup_elem(&MAP_PORTS, &pk) != 0;

	if (!users) {
		pk.session = PORT_OUTSIDE_SEEN;
		users = bpf_map_lookup_elem(&MAP_PORTS, &pk) != 0;
	}
	if (!users) {
		pk.session = session;
		pk.family = v4 ? 4 : 6;
		__builtin_memcpy(pk.addr, a.addr, 16);
		if (bpf_map_lookup_elem(&MAP_OWN_PORTS, &pk))
			return 0;
		__builtin_memset(pk.addr, 0, 16);
		if (bpf_map_lookup_elem(&MAP_OWN_PORTS, &pk))
			return 0;
		pk.family = 0;
		if (bpf_map_lookup_elem(&MAP_OWN_PORTS, &pk))
			return 0;
	}
	pk.session = 0;
	pk.family = 0;
	__builtin_memset(pk.addr, 0, 16);
	if (bpf_map_lookup_elem(&MAP_PORTS, &pk))
		return 0;
	struct reach_event *e = reach_event(session, hook);

	if (e) {
		e->port = port;
		e->proto = proto;
		__builtin_memcpy(e->addr, a.addr, 16);
		bpf_ringbuf_submit(e, 0);
	}
	return -EACCES;
}

SEC("lsm/socket_connect")
int BPF_PROG(pincer_socket_connect, struct socket *sock, struct sockaddr *address, int addrlen, int ret)
{
	if (ret)
		return ret;
	__u64 session = current_session_id();

	if (!session)
		return 0;
	return inet_dest_check(session, BPF_CORE_READ(sock, sk), address, addrlen, 0, HOOK_SOCKET_CONNECT);
}

SEC("lsm/socket_sendmsg")
int BPF_PROG(pincer_socket_sendmsg, struct socket *sock, struct msghdr *msg, int size, int ret)
{
	if (ret)
		return ret;
	void *name = BPF_CORE_READ(msg, msg_name);

	if (!name) /* connected: checked at connect */
		return 0;
	__u64 session = current_session_id();

	if (!session)
		return 0;
	return inet_dest_check(session, BPF_CORE_READ(sock, sk), name, BPF_CORE_READ(msg, msg_namelen), 1,
			       HOOK_SOCKET_SENDMSG);
}
