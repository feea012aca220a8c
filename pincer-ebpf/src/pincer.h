/* Layouts shared with userspace. The constants (ACCESS_*, HOOK_*, EVENT_FLAG_*,
 * SESSION_FLAG_*, sizes) and map names (MAP_*) come from pincer-common through
 * the generated pincer_gen.h; the structs below are checked against
 * pincer-common's layouts by the generated pincer_layout.h (build.rs), so a
 * change on one side only fails the build. */
#ifndef PINCER_H
#define PINCER_H

#include "pincer_gen.h"

struct session_key {
	__u64 cgroup_id;
};

struct session_value {
	__u32 active;
	__u32 flags; /* SESSION_FLAG_* */
};

/* A filesystem object: key of the roots, open and never maps. */
struct object_key {
	__u64 ino;
	__u32 dev;
	__u32 _pad;
};

/* The entry `name` of directory (dev, ino), existing or not. */
struct name_key {
	__u64 ino;
	__u32 dev;
	__u32 _pad;
	char name[NEVER_NAME_LEN];
};

struct pincer_state {
	__u32 never_objects;
	__u32 never_names;
	__u32 session_levels; /* bit L: a session cgroup may be at level L */
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

#include "pincer_layout.h"

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
