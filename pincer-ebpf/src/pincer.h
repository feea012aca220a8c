/* Layouts shared with userspace. Mirrors pincer-common/src/lib.rs: keep both in
 * step; the _Static_asserts below and the const asserts there catch drift. */
#ifndef PINCER_H
#define PINCER_H

#define ACCESS_READ (1u << 0)
#define ACCESS_WRITE (1u << 1)
#define ACCESS_CREATE (1u << 2)
#define ACCESS_DELETE (1u << 3)
#define ACCESS_LIST (1u << 4)
#define ACCESS_CREATED_BY_SESSION (1u << 31)

#define HOOK_FILE_OPEN 1
#define HOOK_INODE_CREATE 2
#define HOOK_INODE_MKDIR 3
#define HOOK_INODE_SYMLINK 4
#define HOOK_INODE_LINK 5
#define HOOK_INODE_LINK_SOURCE 6
#define HOOK_INODE_UNLINK 7
#define HOOK_INODE_RMDIR 8
#define HOOK_INODE_RENAME_FROM 9
#define HOOK_INODE_RENAME_TO 10
#define HOOK_INODE_RENAME_OVER 11
#define HOOK_INODE_SETATTR 12

#define EVENT_FLAG_WALK_EXHAUSTED (1u << 0)
#define EVENT_FLAG_PATH_TRUNCATED (1u << 1)
#define EVENT_FLAG_MULTI_LINK (1u << 2)

#define MAX_WALK_DEPTH 32
#define MAX_CGROUP_LEVELS 16
#define EVENT_NAME_LEN 256
#define EVENT_PATH_LEN 1024

struct session_key {
	__u64 cgroup_id;
};

struct session_value {
	__u32 active;
	__u32 _pad;
};

struct root_key {
	__u64 ino;
	__u32 dev;
	__u32 _pad;
};

struct grant_key {
	__u64 session;
	__u64 ino;
	__u32 dev;
	__u32 _pad;
};

struct miss_event {
	__u64 session;
	__u64 ino;
	__u64 parent_ino;
	__u64 root_ino;
	__u32 pid;
	__u32 uid;
	__u32 dev;
	__u32 parent_dev;
	__u32 root_dev;
	__u32 access;
	__u32 hook;
	__u32 flags;
	__u32 depth;
	__u32 _pad;
	char name[EVENT_NAME_LEN];
	char path[EVENT_PATH_LEN];
};

_Static_assert(sizeof(struct session_key) == 8, "session_key size");
_Static_assert(sizeof(struct session_value) == 8, "session_value size");
_Static_assert(sizeof(struct root_key) == 16, "root_key size");
_Static_assert(__builtin_offsetof(struct root_key, dev) == 8, "root_key.dev");
_Static_assert(sizeof(struct grant_key) == 24, "grant_key size");
_Static_assert(__builtin_offsetof(struct grant_key, ino) == 8, "grant_key.ino");
_Static_assert(__builtin_offsetof(struct grant_key, dev) == 16, "grant_key.dev");
_Static_assert(__builtin_offsetof(struct miss_event, pid) == 32, "miss_event.pid");
_Static_assert(__builtin_offsetof(struct miss_event, access) == 52, "miss_event.access");
_Static_assert(__builtin_offsetof(struct miss_event, hook) == 56, "miss_event.hook");
_Static_assert(__builtin_offsetof(struct miss_event, depth) == 64, "miss_event.depth");
_Static_assert(__builtin_offsetof(struct miss_event, name) == 72, "miss_event.name");
_Static_assert(__builtin_offsetof(struct miss_event, path) == 72 + EVENT_NAME_LEN, "miss_event.path");
_Static_assert(sizeof(struct miss_event) == 72 + EVENT_NAME_LEN + EVENT_PATH_LEN, "miss_event size");

/* Session containment: reach into other processes and sockets (reach.bpf.c).
 * Mirrors pincer-common/src/reach.rs. */
#define HOOK_TASK_KILL 32
#define HOOK_PTRACE_ACCESS_CHECK 33
#define HOOK_PTRACE_TRACEME 34
#define HOOK_TASK_SETNICE 35
#define HOOK_TASK_SETIOPRIO 36
#define HOOK_TASK_SETSCHEDULER 37
#define HOOK_TASK_MOVEMEMORY 38
#define HOOK_PROC_WRITE 39
#define HOOK_IPC_PERMISSION 40
#define HOOK_IPC_CTL 41
#define HOOK_UNIX_STREAM_CONNECT 42
#define HOOK_UNIX_MAY_SEND 43
#define HOOK_SOCKET_CONNECT 44
#define HOOK_SOCKET_SENDMSG 45

#define EVENT_FLAG_REACH (1u << 8)
#define UNIX_OWNER_ANY 0xffffffffu
#define UNIX_NAME_LEN 108

struct port_key {
	__u64 session; /* 0: every session */
	__u16 port;
	__u16 proto;
	__u32 _pad;
};

struct host_addr_key {
	__u8 addr[16]; /* IPv6; IPv4 as ::ffff:a.b.c.d */
};

struct unix_name_key {
	__u32 len; /* bytes of name used (sun_path bytes bound) */
	__u8 name[UNIX_NAME_LEN];
};

_Static_assert(sizeof(struct port_key) == 16, "port_key size");
_Static_assert(__builtin_offsetof(struct port_key, port) == 8, "port_key.port");
_Static_assert(__builtin_offsetof(struct port_key, proto) == 10, "port_key.proto");
_Static_assert(sizeof(struct host_addr_key) == 16, "host_addr_key size");
_Static_assert(sizeof(struct unix_name_key) == 112, "unix_name_key size");

#endif
