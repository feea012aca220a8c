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
	__u32 held;  /* the session's threads waiting in a hold (kernel-counted) */
	__u32 held_locked; /* of those, the ones whose hook keeps a lock (at most 1) */
	__u64 locked_quiet_until; /* bpf_ktime_get_ns(): no such hold before it */
	__u32 vacated; /* the session's MAP_VACATED entries (kernel-counted) */
	__u32 shared_made; /* its MAP_SHARED_MADE entries (kernel-counted) */
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

/* The entry `name` of directory (dev, ino) where a directory or symlink of the
 * user's stood until session `session` removed or moved it away. */
struct vacated_key {
	__u64 session;
	__u64 ino;
	__u32 dev;
	__u32 _pad;
	char name[NEVER_NAME_LEN];
};

/* The single name `name` session `session` may create in directory (dev, ino)
 * (a grant of ACCESS_NAMED_CREATE on the directory). Its first fields are the
 * directory's grant_key, and from `ino` on its object_key (named_create looks
 * both up with it). */
struct create_name_key {
	__u64 session;
	__u64 ino;
	__u32 dev;
	__u32 _pad;
	char name[CREATE_NAME_LEN];
};

struct pincer_state {
	__u32 never_objects;
	__u32 never_names;
	__u32 session_levels; /* bit L: a session cgroup may be at level L */
	__u32 never_patterns; /* the access bits never patterns have (0: none) */
};

struct pincer_generation {
	__u64 policy;
	__u64 rename_seq_addr;
	__u64 mount_seq_addr;
};

struct grant_key {
	__u64 session;
	__u64 ino;
	__u32 dev;
	__u32 _pad;
};

struct miss_event {
	__u32 record; /* EVENT_RECORD_MISS */
	__u32 hook;
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
	__u32 flags;
	__u32 depth;
	__u32 hold; /* the hold the thread waits in, or 0 */
	__u32 _pad;
	char name[EVENT_NAME_LEN];
	char path[EVENT_PATH_LEN];
};

/* Session containment: reach into other processes and sockets (reach.bpf.c).
 * The HOOK_* ids, UNIX_* and MAP_* names come from
 * pincer-common/src/reach.rs through pincer_gen.h like the rest. */

/* A reach denial: a task of a session refused an action on something outside it.
 * Which fields each hook fills: pincer-common/src/reach.rs; the rest are 0. */
struct reach_event {
	__u32 record; /* EVENT_RECORD_REACH */
	__u32 hook;
	__u64 session;        /* the denied task's (HOOK_UNIX_INBOUND: the socket's) */
	__u64 target_session; /* the session that made the target; 0: none */
	__u64 ino;            /* the target's file (socket, terminal, cgroup file), or 0 */
	__u32 dev;
	__u32 pid;            /* the denied task */
	__u32 uid;
	__u32 target_pid;     /* the target process (F_SETOWN: the owner's number) */
	__u32 target_id;      /* IPC id or key serial */
	__u32 target_uid;     /* owner of the key or of the socket file */
	__u32 detail;         /* signal, mode, command, option, KEY_NEED_* or access bits */
	__u32 ipc_key;
	__u32 proto;          /* 6 TCP, 17 UDP */
	__u32 owner_kind;     /* F_SETOWN: 1 process, 2 process group, 3 named in memory */
	__u16 port;
	__u16 name_len;       /* bytes of a Unix socket's bound name */
	__u32 _pad;
	__u8 addr[16];        /* IPv6, network order; IPv4 as ::ffff:a.b.c.d */
	char name[EVENT_NAME_LEN];
};

struct port_key {
	__u64 session; /* 0: every session */
	__u16 port;
	__u16 proto;
	__u16 family;  /* 4, 6, or 0: both (a dual-stack wildcard, or a listed port) */
	__u16 _pad;
	__u8 addr[16]; /* the bound address (IPv4 as ::ffff:a.b.c.d); 0: any */
};

struct host_addr_key {
	__u32 prefixlen; /* LPM trie key: bits of addr that count (128: one address) */
	__u8 addr[16];   /* IPv6; IPv4 as ::ffff:a.b.c.d */
};

struct unix_name_key {
	__u32 len; /* bytes of name used (sun_path bytes bound) */
	__u8 name[UNIX_NAME_LEN];
};

#include "pincer_layout.h"

#endif
