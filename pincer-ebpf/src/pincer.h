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

#endif
