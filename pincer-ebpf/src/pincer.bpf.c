// SPDX-License-Identifier: GPL-2.0
/* Pincer BPF LSM program.
 *
 * A task is gated when its cgroup v2, or one of its ancestors, is a registered
 * session. For a gated task every file open, creation (files, directories,
 * symlinks, links, FIFOs, device nodes, socket binds), deletion, rename, change
 * of size, mode, owner, times or xattrs, and every fd received from another
 * process, of an object that lies under a registered protected root needs a
 * grant keyed by object: an exact grant (session, dev, ino), a subtree grant
 * (session, dev, dir ino) or an open path (dev, ino, for every session) found on
 * the walk up d_parent, which crosses mount points. Never-grantable objects,
 * directories and names beat every grant, open path and shadow mode. A miss is
 * denied with -EACCES and reported on the ring buffer (in a shadow session it
 * is reported and allowed). Terminal injection (TIOCSTI, TIOCLINUX) and new
 * user namespaces (unless the session allows them) are refused. Objects
 * outside every root and tasks outside every session are left alone. Every
 * hook returns an earlier LSM's non-zero verdict unchanged. What a walk found
 * is cached in inode storage and used only while the policy generation and
 * the kernel's rename and mount sequences are unchanged; the cache only ever
 * allows (see "The walk cache" below). Needs kernel 5.13+ (BPF LSM, ring
 * buffer, ancestor cgroup ids, bpf_for_each_map_elem, inode storage). */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "vfs.h"
#include "pincer.h"

#define EACCES 13
#define EDQUOT 122
#define RENAME_EXCHANGE 2
#define S_IFMT 00170000
#define S_IFIFO 0010000
#define S_IFDIR 0040000
#define S_IFLNK 0120000
#define S_IFREG 0100000
#define S_IROTH 00004
#define S_IXOTH 00001
#define S_IWOTH 00002
#define FMODE_READ 0x1
#define FMODE_WRITE 0x2
#define F_UNLCK 2
#define FMODE_EXEC 0x20
#define FMODE_CREATED 0x100000
#define EPERM 1
#define SB_ACTIVE (1ul << 30)
#define TIOCSTI 0x5412
#define TIOCLINUX 0x541C
#define FS_IOC_SETFLAGS 0x40086602
#define FS_IOC32_SETFLAGS 0x40046602
#define FS_IOC_FSSETXATTR 0x401c5820
#define FS_IOC_SETVERSION 0x40087602
#define FS_IOC32_SETVERSION 0x40047602
#define FS_IOC_ENABLE_VERITY 0x40806685
#define FS_IOC_SET_ENCRYPTION_POLICY 0x800c6613 /* declared _IOR, though it sets */
#define SB_KERNMOUNT (1ul << 22)
#define PROC_SUPER_MAGIC 0x9fa0
#define DEVPTS_SUPER_MAGIC 0x1cd1
#define CGROUP2_SUPER_MAGIC 0x63677270
#define FUSE_SUPER_MAGIC 0x65735546
#define FS_HAS_SUBTYPE 4 /* fuse and fuseblk (fusermount's); not virtiofs */
#define ACCESS_ALL_BITS (ACCESS_READ | ACCESS_WRITE | ACCESS_CREATE | ACCESS_DELETE | ACCESS_LIST)

/* Of the reach block (reach.bpf.c, included at the end). */
struct inode;
struct dentry;
struct super_block;
static __always_inline int reach_inode_unlink(struct dentry *d);
static __always_inline int reach_inode_create(__u64 session, struct inode *dir);
static __always_inline int watches_share(__u64 session);
static __always_inline void reach_inode_free(struct inode *inode, struct super_block *sb);

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct session_key);
	__type(value, struct session_value);
} MAP_SESSIONS SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct object_key);
	__type(value, __u32);
} MAP_ROOTS SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct grant_key);
	__type(value, __u32);
} MAP_EXACT SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct grant_key);
	__type(value, __u32);
} MAP_SUBTREE SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct object_key);
	__type(value, __u32);
} MAP_OPEN SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct object_key);
	__type(value, __u32);
} MAP_NEVER SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct name_key);
	__type(value, __u32);
} MAP_NEVER_NAMES SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct object_key);
	__type(value, __u32);
} MAP_NEVER_DIRS SEC(".maps");

/* The reserved names (NEVER_RESERVED) a mkdir may make, with the template whose
 * names the new directory gets (carry_reserved). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct name_key);
	__type(value, __u64);
} MAP_NEVER_CARRY SEC(".maps");

/* The names where a directory or symlink of the user's stood until a session
 * removed or moved it away, with the inode number of what left (moved_names):
 * what the session puts there is the user's place. Userspace removes a
 * session's entries with its grants. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__type(key, struct vacated_key);
	__type(value, __u64);
} MAP_VACATED SEC(".maps");

/* The single names a session was given `create` for in a directory whose exact
 * grant carries ACCESS_NAMED_CREATE (named_create). Userspace writes them and
 * removes a session's entries with its grants. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct create_name_key);
	__type(value, __u32);
} MAP_CREATE_NAMES SEC(".maps");

/* Where named_create builds its key: a name of up to NAME_MAX bytes does not fit
 * on the stack beside the walk (512 bytes for the whole call chain). One per
 * task, so no other task (as a per-CPU slot would allow, on preemption) can
 * change the key between its writing and its lookup. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct create_name_key);
} MAP_CREATE_KEY SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pincer_state);
} MAP_STATE SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pincer_generation);
} MAP_GENERATION SEC(".maps");

/* What one walk gave, for one session: from a directory up to the top (a
 * segment), or a file's own entries. */
struct cache_slot {
	__u64 session;
	__u64 policy;     /* the stamps it was computed under */
	__u64 mnt;        /* the vfsmount the walk went through (0: none given) */
	__u64 dentry;     /* file verdict: the dentry it was computed through, */
	__u64 parent;     /* that dentry's parent then, */
	__u64 hash_len;   /* and its name's hash and length then */
	__u32 rename_seq;
	__u32 mount_seq;
	__u8 never;       /* never-grantable bits on the way to the top */
	__u8 subtree;     /* subtree grants and open paths up to the first root (file: subtree only) */
	__u8 open;        /* file: its open path bits */
	__u8 flags;       /* SLOT_* */
	__u8 allowed;     /* file verdict: the bits its whole walk allows without a report */
	__u8 never_all;   /* file verdict: the never bits of its whole walk (own entries and name included) */
	__u8 _pad[2];
	__u32 levels;     /* levels the walk took */
	__u32 _pad2;
};

#define SLOT_VALID 1
#define SLOT_ROOT 2       /* a protected root was found (file: the file is one) */
#define SLOT_NAMES_HERE 4 /* the directory holds never-grantable names */
#define SLOT_VERDICT 8    /* file: `allowed` (and `never_all`) hold the verdict of its whole walk */
#define SLOT_HIDDEN 16    /* file: an object a hidden entry names (NEVER_HIDDEN) */
#define SLOT_NEVER_KNOWN 32 /* file: `never_all` holds the never bits of its whole walk (a stat computed them) */
#define SLOT_PRIVATE 64   /* a directory from here up (below the first root) gives others no search right */
#define CACHE_SLOTS 2     /* sessions per inode, by the low bits of their id */

struct walk_cache {
	struct bpf_spin_lock lock;
	__u32 fence;
	struct cache_slot slot[CACHE_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_INODE_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct walk_cache);
} MAP_WALK_CACHE SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} MAP_EVENTS SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} MAP_DROPS SEC(".maps");

/* [HOLD_SLOT_ANCHOR]: the hold anchor's thread-group id (0: misses are not
 * held). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HOLD_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} MAP_HOLD SEC(".maps");

/* Thread id → the hold it waits in: the daemon reads it when the thread's
 * FUSE request arrives. Full: the miss is denied at once. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HOLD_MAX);
	__type(key, __u32);
	__type(value, __u32);
} MAP_HELD SEC(".maps");

/* The registered session the current task belongs to. */
struct session {
	__u64 id;    /* cgroup id, 0 when the task is not gated */
	__u32 flags; /* SESSION_FLAG_* */
	__u32 uid;   /* the task's uid */
};

/* One walk up from an object: inputs, then outputs. Passed to the global
 * functions below, which the verifier checks once per program instead of once
 * per call site. Kernel pointers travel as integers (read with probe reads). */
struct walk {
	__u64 session;
	__u64 d;          /* struct dentry * to start from */
	__u64 mnt;        /* struct vfsmount * it was reached through, or 0 */
	__u64 child_name; /* name of a new entry in d, or 0 */
	__u64 root_ino;
	__u64 stamp_policy; /* cache: the stamps a collecting walk runs under (or a hit was checked against) */
	__u32 root_dev;
	__u32 need;
	__u16 exact_ok;   /* exact grants and open paths count for d itself */
	__u16 subtree_ok; /* subtree grants and open paths count on every level */
	__u32 granted;    /* access bits found on the way (up to the root) */
	__u32 never;      /* never-grantable bits found on the way (to the top) */
	__u32 protected;  /* a root was found, or the bound ran out */
	__u32 flags;      /* EVENT_FLAG_* */
	__u32 unknown;    /* the bound ran out before never entries could be ruled out */
	__u32 collect;    /* collect every grant bit up to the root (for the cache); `need` is not used */
	__u32 levels;     /* levels the walk took */
	__u32 stamp_rename;
	__u32 stamp_mount;
	__u32 exact;      /* cache: the object's exact grant */
	__u32 names_here; /* cache: the directory holds never-grantable names */
	__u32 hold;       /* a plain miss may be held (the held file_open only) */
	__u32 hold_id;    /* the hold a reported miss belongs to (0: not held) */
	__u16 hidden;     /* the walk starts inside a hidden entry: only the grants that reach those count */
	__u16 private_path; /* SLOT_PRIVATE: a directory on the way (below the first root) gives others no search right */
	__u32 mkdir;      /* a creation by mkdir: a reserved name with a carry may be made */
};

/* A position on the walk: a dentry and, when known, the mount it was reached through. */
struct pos {
	struct dentry *d;
	struct vfsmount *mnt;
};

/* The session of the current task: its own cgroup if registered, else its
 * outermost registered ancestor. A task outside every session costs one array
 * lookup and, per level at which a session cgroup exists, one ancestor id (0
 * past the task's own level, which ends the search) and one hash lookup. */
static __always_inline int current_session(struct session *s)
{
	__u32 zero = 0;
	struct pincer_state *st = bpf_map_lookup_elem(&MAP_STATE, &zero);
	/* Without the state entry every level is looked up (fail closed). */
	__u32 levels = st ? st->session_levels : SESSION_LEVELS_ALL;
	struct session_value *v = 0;
	__u64 id = 0;

	if (!levels)
		return 0;
	if (levels == SESSION_LEVELS_ALL) {
		struct session_key key = { .cgroup_id = bpf_get_current_cgroup_id() };

		v = bpf_map_lookup_elem(&MAP_SESSIONS, &key);
		if (v && v->active) {
			id = key.cgroup_id;
		} else {
			for (int level = 1; level < MAX_CGROUP_LEVELS; level++) {
				__u64 a = bpf_get_current_ancestor_cgroup_id(level);

				if (!a || a == key.cgroup_id)
					break;
				struct session_key k = { .cgroup_id = a };

				v = bpf_map_lookup_elem(&MAP_SESSIONS, &k);
				if (v && v->active) {
					id = a;
					break;
				}
			}
		}
	} else {
		struct session_value *outer_v = 0, *inner_v = 0;
		__u64 outer = 0, inner = 0;

		/* `left`: the levels from this one down (none left: done). */
		__u32 left = levels;

		for (int level = 0; level < MAX_CGROUP_LEVELS && left; level++, left >>= 1) {
			if (!(left & 1))
				continue;
			__u64 a = bpf_get_current_ancestor_cgroup_id(level);

			if (!a)
				break;
			struct session_key k = { .cgroup_id = a };
			struct session_value *x = bpf_map_lookup_elem(&MAP_SESSIONS, &k);

			if (x && x->active) {
				if (!outer) {
					outer = a;
					outer_v = x;
				}
				inner = a;
				inner_v = x;
			}
		}
		if (inner && inner != outer && inner == bpf_get_current_cgroup_id()) {
			id = inner;
			v = inner_v;
		} else {
			id = outer;
			v = outer_v;
		}
	}
	if (!id || !v)
		return 0;
	s->id = id;
	s->flags = v->flags;
	s->uid = (__u32)bpf_get_current_uid_gid();
	return 1;
}

static __always_inline struct mount *real_mount(struct vfsmount *mnt)
{
	return (struct mount *)((unsigned long)mnt - bpf_core_field_offset(struct mount, mnt));
}

/* One step up: to the parent dentry or, from the root of a filesystem, to the
 * dentry it is mounted on. Without a known mount (inode hooks get no vfsmount)
 * the superblock's first mount is taken. Returns 0 at the top, 1 after a step
 * within the filesystem, 2 after crossing a mount point. */
static __always_inline int step_up(struct pos *p)
{
	struct dentry *d = p->d;
	struct dentry *parent = BPF_CORE_READ(d, d_parent);

	if (parent && parent != d) {
		p->d = parent;
		return 1;
	}
	struct vfsmount *mnt = p->mnt;

	if (!mnt) {
		if (!bpf_core_field_exists(struct super_block, s_mounts) ||
		    !bpf_core_field_exists(struct mount, mnt_instance))
			return 0;
		struct super_block *sb = BPF_CORE_READ(d, d_sb);
		struct list_head *first = BPF_CORE_READ(sb, s_mounts.next);
		unsigned long head = (unsigned long)sb + bpf_core_field_offset(struct super_block, s_mounts);

		if (!sb || !first || (unsigned long)first == head)
			return 0;
		struct mount *m0 = (struct mount *)((unsigned long)first - bpf_core_field_offset(struct mount, mnt_instance));

		mnt = (struct vfsmount *)((unsigned long)m0 + bpf_core_field_offset(struct mount, mnt));
	}
	struct mount *m = real_mount(mnt);
	struct mount *pm = BPF_CORE_READ(m, mnt_parent);
	struct dentry *mp = BPF_CORE_READ(m, mnt_mountpoint);

	if (!pm || pm == m || !mp)
		return 0;
	p->d = mp;
	p->mnt = (struct vfsmount *)((unsigned long)pm + bpf_core_field_offset(struct mount, mnt));
	return 2;
}

/* State of walk_up between steps (bpf_loop callback context). */
struct walk_ctx {
	struct walk *w;
	struct pos p;
	const unsigned char *prev; /* the name of the entry the walk came from (0 at the first level and past a mount) */
	struct grant_key gk;
	struct object_key ok;
	struct name_key nk;
	__u32 searching; /* still collecting grants (below the root, need not covered) */
	__u32 done;      /* the walk ended before the bound */
	__u32 dev;       /* device of the current filesystem, once read */
	__u8 never_objects;
	__u8 never_names;
	__u8 dev_known;  /* dev holds the current filesystem's device */
	__u8 from_hidden_object; /* the level below was an object a hidden entry names (NEVER_HIDDEN) */
	__u8 carried;    /* the level below was a directory made carrying its reserved name's template */
	__u8 carried_here; /* this level's directory was (read for the level above) */
	__u8 hidden;     /* the walk has come up from a hidden entry */
	__u8 kept;       /* the walk has come up from a level kept private (kept_private) */
	umode_t mode;    /* the current level's mode, once read */
};

/* Whether an object of mode `mode` in a directory of mode `dir_mode` is kept
 * more private than that directory: a file or directory whose mode gives its
 * group and others nothing, in a directory whose mode gives them something. Its
 * owner (or the tool that wrote it: ssh, gpg, KeePassXC, a browser's logins,
 * a shell's history) withheld what its surroundings give, which is how a
 * secret among documents shows: a grant on a folder above it does not reach
 * it, as for a hidden entry; a grant on it or inside it does. A user whose
 * umask keeps every file private keeps every folder so too: nothing is kept
 * more private than its folder there, and only hidden entries and the never
 * places stand out. */
static __always_inline int kept_private(umode_t mode, umode_t dir_mode)
{
	umode_t type = mode & S_IFMT;

	return (type == S_IFREG || type == S_IFDIR) && !(mode & 077) && (dir_mode & 077);
}

/* The never bits a name entry `bits` (found under c->nk) gives the walk on
 * level `index`. A reserved name (NEVER_RESERVED: the first missing directory
 * on the way to a never place) acts at its own level only. Made new (the
 * first level of a creation, where the name is the new entry's): refused,
 * unless by mkdir where a carry is recorded, which gives the new directory its
 * template's names (carry_reserved). Passed on the way up from a directory of
 * that name: nothing, if that directory was made so (c->carried); else
 * `create` is refused under it, as if the never place were there (a directory
 * renamed there by the user, or one the kernel could not give the names). */
static __always_inline __u32 name_never(struct walk_ctx *c, __u64 index, __u32 bits)
{
	struct walk *w = c->w;

	if (!(bits & NEVER_RESERVED) || !w)
		return bits;
	bits &= ~NEVER_RESERVED;
	if (index == 0 && w->child_name) {
		if (!w->mkdir || !bpf_map_lookup_elem(&MAP_NEVER_CARRY, &c->nk))
			bits |= ACCESS_CREATE;
	} else if (!c->carried) {
		bits |= ACCESS_CREATE;
	}
	return bits;
}

/* Whether kernel string `name` is a hidden name (it starts with a dot). */
static __always_inline int hidden_name(const unsigned char *name)
{
	unsigned char ch = 0;

	return name && !bpf_probe_read_kernel(&ch, 1, name) && ch == '.';
}

/* Whether exact grant `bits` is that of a new folder of the session's: one it
 * made (ACCESS_CREATED_BY_SESSION) at a new name, not where a folder of the
 * user's stood nor beneath one (ACCESS_USERS_PLACE). Such a folder takes hidden
 * entries freely. */
static __always_inline int own_new_folder(__u32 bits)
{
	return (bits & (ACCESS_CREATED_BY_SESSION | ACCESS_USERS_PLACE)) == ACCESS_CREATED_BY_SESSION;
}

/* Whether a folder with exact bits `bits` moves as a new folder of a session's:
 * this session's (own_new_folder) or one an earlier session of the owner made
 * (ACCESS_MADE_EARLIER, which the daemon carries: it gives no hidden name). */
static __always_inline int session_made_folder(__u32 bits)
{
	return own_new_folder(bits) || ((bits & (ACCESS_MADE_EARLIER | ACCESS_USERS_PLACE)) == ACCESS_MADE_EARLIER);
}

/* Whether exact grant `bits` on the walk's current level (c->ok, the first
 * level) fails to reach c->prev, the name of a new entry in it. A hidden name
 * is reached only by the grant of a new folder of the session's
 * (own_new_folder) or by a grant of that very name (named_create, after the
 * walk); a `create` grant on the folder makes visible names only. And never
 * in a protected root: the hidden entries of a root (the home's dotfiles and
 * dot-directories: the configuration, code, state, histories and credentials
 * of the user's tools) are not made through `create` on the root. */
static __always_inline int misses_hidden_name(struct walk_ctx *c, int prev_hidden, __u32 bits)
{
	return prev_hidden && (!own_new_folder(bits) || bpf_map_lookup_elem(&MAP_ROOTS, &c->ok));
}

/* One level of walk_up; returns 1 to stop. */
static long walk_step(__u64 index, struct walk_ctx *c)
{
	struct walk *w = c->w;
	struct dentry *cur = c->p.d;

	if (!w || !cur) {
		c->done = 1;
		return 1;
	}
	__u32 need = w->need;
	struct inode *inode = BPF_CORE_READ(cur, d_inode);

	if (inode) {
		/* A directory on the way (below the first root) that gives
		 * others no search right: only the user's identity reaches what
		 * lies beneath. */
		if (c->searching) {
			umode_t below = c->mode; /* 0 at the first level */

			BPF_CORE_READ_INTO(&c->mode, inode, i_mode);
			if ((c->mode & S_IFMT) == S_IFDIR && !(c->mode & S_IXOTH))
				w->private_path = SLOT_PRIVATE;
			/* The level below kept more private than this one: reached
			 * only by grants on it or inside it, not by this level's
			 * subtree grant nor any above, the scratch's included (what
			 * a session made has its own exact grants; what it moved
			 * into the scratch is not its own). */
			if (kept_private(below, c->mode)) {
				w->flags |= EVENT_FLAG_KEPT_PRIVATE;
				c->kept = 1;
			}
		}
		__u64 ino = BPF_CORE_READ(inode, i_ino);
		__u32 *bits;

		/* Every dentry up to a mount point is on one filesystem: its
		 * device is read once per filesystem, not once per level. */
		if (!c->dev_known) {
			c->dev = BPF_CORE_READ(inode, i_sb, s_dev);
			c->dev_known = 1;
		}
		__u32 dev = c->dev;

		c->ok.ino = ino;
		c->ok.dev = dev;
		/* Whether the level below named a hidden object; this level's
		 * own bit is read next, for the level above. */
		int from_hidden_object = c->from_hidden_object;

		c->from_hidden_object = 0;
		if (c->never_objects) {
			bits = bpf_map_lookup_elem(&MAP_NEVER, &c->ok);
			if (bits) {
				w->never |= *bits;
				c->from_hidden_object = !!(*bits & NEVER_HIDDEN);
			}
		}
		/* c->carried: whether the level below was made carrying its
		 * template; this level's own mark is read now, for the level above. */
		__u32 *dir_mark = c->never_names ? bpf_map_lookup_elem(&MAP_NEVER_DIRS, &c->ok) : 0;

		c->carried_here = dir_mark && (*dir_mark & NEVER_DIR_CARRIED);
		if (dir_mark && c->prev) {
			__builtin_memset(&c->nk, 0, sizeof(c->nk));
			c->nk.ino = ino;
			c->nk.dev = dev;
			long n = bpf_probe_read_kernel_str(c->nk.name, sizeof(c->nk.name), c->prev);

			/* Longer names never match (they would be cut short). */
			if (n > 0 && n < (long)sizeof(c->nk.name)) {
				bits = bpf_map_lookup_elem(&MAP_NEVER_NAMES, &c->nk);
				if (bits)
					w->never |= name_never(c, index, *bits);
			}
		}
		c->carried = c->carried_here;
		if (!w->collect && (w->never & need)) {
			c->done = 1;
			return 1;
		}
		if (c->searching) {
			/* The loop index, not a counter in the context: the verifier
			 * then need not tell the levels apart (its states converge). */
			int first = index == 0;
			__u32 level = 0;

			c->gk.ino = ino;
			c->gk.dev = dev;
			/* Each lookup only while `need` is not yet covered: bits
			 * beyond `need` change no verdict. A collecting walk
			 * (need 0) takes every bit up to the root. */
			/* Hidden entries (names with a leading dot: the
			 * configuration, hooks, state and credentials of the user's
			 * tools, at any depth) are not reached by a subtree grant
			 * above them: each needs a grant on itself or inside it. The
			 * session's own place (its scratch) is the exception. So is
			 * what a hidden entry names under a visible name (the target
			 * of a hidden symlink, NEVER_HIDDEN). */
			int prev_hidden = from_hidden_object || hidden_name(c->prev);

			if (prev_hidden)
				c->hidden = 1;
			if (first && w->exact_ok) {
				bits = bpf_map_lookup_elem(&MAP_EXACT, &c->gk);
				if (bits && !misses_hidden_name(c, prev_hidden, *bits))
					level |= *bits;
			}
			if (w->subtree_ok && (w->collect || ((w->granted | level) & need) != need)) {
				bits = bpf_map_lookup_elem(&MAP_SUBTREE, &c->gk);
				if (bits && !c->kept && (!c->hidden || (*bits & ACCESS_CREATED_BY_SESSION)))
					level |= *bits;
			}
			w->granted |= level;
			if ((w->subtree_ok || (first && w->exact_ok)) && (w->collect || (w->granted & need) != need)) {
				bits = bpf_map_lookup_elem(&MAP_OPEN, &c->ok);
				if (bits)
					w->granted |= *bits;
			}
			if (!w->collect && (w->granted & need) == need) {
				c->searching = 0;
			} else if (bpf_map_lookup_elem(&MAP_ROOTS, &c->ok)) {
				w->protected = 1;
				w->root_ino = ino;
				w->root_dev = dev;
				c->searching = 0;
			}
		}
		if (!c->searching && !c->never_objects && !c->never_names) {
			c->done = 1;
			return 1;
		}
	}
	/* The name of the entry the walk comes from, for the never-name
	 * lookup and misses_hidden_name one level up. */
	c->prev = BPF_CORE_READ(cur, d_name.name);
	int step = step_up(&c->p);

	if (!step) {
		c->done = 1;
		return 1;
	}
	if (step == 2) {
		c->prev = 0; /* the mount point's own name is read on the next step */
		c->dev_known = 0;
	}
	return 0;
}

/* Walk from w->d (reached through w->mnt, or none) up to the top. Exact
 * grants and open paths count for d itself when exact_ok; subtree grants and
 * open paths count on every level when subtree_ok; grants count only up to the
 * first protected root. Never-grantable entries count on every level up to the
 * top: objects by (dev, ino), and names by (directory, name of the entry the
 * walk came from). child_name, if set, is the name of a new entry in d (so its
 * never entry is seen before it exists). Without never entries the walk stops
 * once `need` is covered or at the root. Running out of bound counts as
 * protected, so the caller denies. The levels run under bpf_loop, so the
 * verifier checks one level, not every one. */
__noinline int walk_up(struct walk *w)
{
	if (!w)
		return 0;
	__u32 zero = 0;
	struct pincer_state *st = bpf_map_lookup_elem(&MAP_STATE, &zero);
	struct walk_ctx c = {
		.w = w,
		.p = { .d = (struct dentry *)w->d, .mnt = (struct vfsmount *)w->mnt },
		.prev = (const unsigned char *)w->child_name,
		.gk = { .session = w->session },
		.searching = 1,
		.hidden = !!w->hidden,
		/* Without the state entry assume never entries exist (fail closed). */
		.never_objects = !st || st->never_objects,
		.never_names = !st || st->never_names,
		/* What a level reads before it writes starts at 0, read from w
		 * (w->levels is 0 before every walk: each caller clears w), not
		 * written as a constant: a verifier that explores the loop's
		 * callback from its first state only (6.1's) would take the
		 * constant for every level's value and drop as dead what a later
		 * level does with another (the level below kept private, coming
		 * from a hidden object or a carried directory, a known device). */
		.mode = (umode_t)w->levels,
		.from_hidden_object = (__u8)w->levels,
		.carried = (__u8)w->levels,
		.dev_known = (__u8)w->levels,
		.kept = (__u8)w->levels,
	};

	long levels = bpf_loop(MAX_WALK_DEPTH, walk_step, &c, 0);

	w->levels = levels > 0 ? (__u32)levels : 0;
	if (c.done)
		return 0;
	if (c.searching) {
		w->protected = 1;
		w->flags |= EVENT_FLAG_WALK_EXHAUSTED;
	}
	if (c.never_objects || c.never_names) {
		w->unknown = 1;
		w->flags |= EVENT_FLAG_WALK_EXHAUSTED;
	}
	return 0;
}

static __always_inline void count_drop(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&MAP_DROPS, &zero);

	if (n)
		__sync_fetch_and_add(n, 1);
}

static __always_inline struct miss_event *reserve(const struct session *s, __u32 access, __u32 hook,
						   const struct walk *w)
{
	struct miss_event *e = bpf_ringbuf_reserve(&MAP_EVENTS, sizeof(*e), 0);

	if (!e) {
		count_drop();
		return 0;
	}
	e->record = EVENT_RECORD_MISS;
	e->hook = hook;
	e->session = s->id;
	e->pid = bpf_get_current_pid_tgid() >> 32;
	e->uid = s->uid;
	e->access = access;
	e->flags = w->flags;
	e->root_ino = w->root_ino;
	e->root_dev = w->root_dev;
	e->hold = w->hold_id;
	e->ino = 0;
	e->dev = 0;
	e->parent_ino = 0;
	e->parent_dev = 0;
	e->depth = 0;
	e->_pad = 0;
	e->name[0] = 0;
	e->path[0] = 0;
	return e;
}

/* State of the path written into a miss (bpf_loop callback context). */
struct path_ctx {
	struct miss_event *e;
	struct pos p;
	__u64 root_ino;
	__u32 root_dev;
	__u32 off;
	__u32 depth;
	__u32 _pad;
};

/* One component of a miss's path; returns 1 to stop. */
static long path_step(__u64 index, struct path_ctx *c)
{
	struct miss_event *e = c->e;
	struct dentry *cur = c->p.d;

	if (!e || !cur)
		return 1;
	struct inode *di = BPF_CORE_READ(cur, d_inode);

	if (di && c->root_ino && BPF_CORE_READ(di, i_ino) == c->root_ino && BPF_CORE_READ(di, i_sb, s_dev) == c->root_dev)
		return 1;
	struct dentry *up = BPF_CORE_READ(cur, d_parent);

	if (up && up != cur) {
		__u32 off = c->off;

		if (off > EVENT_PATH_LEN - EVENT_NAME_LEN) {
			e->flags |= EVENT_FLAG_PATH_TRUNCATED;
			return 1;
		}
		long n = bpf_probe_read_kernel_str(&e->path[off], EVENT_NAME_LEN, BPF_CORE_READ(cur, d_name.name));

		if (n <= 0)
			return 1;
		c->off = off + n;
		c->depth++;
	}
	return step_up(&c->p) ? 0 : 1;
}

/* Push a miss: `obj` is the object (a struct dentry *; for creations, the
 * new negative dentry), reached through w->mnt (or none). Returns 1 when the
 * event was submitted, 0 when the ring buffer was full (counted as a drop). */
__noinline int report(const struct session *s, const struct walk *w, __u64 obj_ptr, __u32 access, __u32 hook)
{
	if (!s || !w)
		return 0;
	struct dentry *obj = (struct dentry *)obj_ptr;
	struct miss_event *e = reserve(s, access, hook, w);

	if (!e)
		return 0;
	struct inode *inode = BPF_CORE_READ(obj, d_inode);

	if (inode) {
		e->ino = BPF_CORE_READ(inode, i_ino);
		e->dev = BPF_CORE_READ(inode, i_sb, s_dev);
	}
	struct dentry *parent = BPF_CORE_READ(obj, d_parent);

	if (parent && parent != obj) {
		struct inode *pi = BPF_CORE_READ(parent, d_inode);

		if (pi) {
			e->parent_ino = BPF_CORE_READ(pi, i_ino);
			e->parent_dev = BPF_CORE_READ(pi, i_sb, s_dev);
		}
	}
	bpf_probe_read_kernel_str(e->name, sizeof(e->name), BPF_CORE_READ(obj, d_name.name));

	/* Components from the object up to (not including) the root, reversed;
	 * the root of a filesystem contributes no component. */
	struct path_ctx c = {
		.e = e,
		.p = { .d = obj, .mnt = (struct vfsmount *)w->mnt },
		.root_ino = w->root_ino,
		.root_dev = w->root_dev,
	};

	bpf_loop(MAX_WALK_DEPTH, path_step, &c, 0);
	__u32 depth = c.depth;

	e->depth = depth;
	bpf_ringbuf_submit(e, 0);
	return 1;
}

/* A kernel pointer as a plain integer: the global functions take only
 * scalars and memory, not the hook's typed (BTF) pointers. */
static __always_inline __u64 scalar_of(const void *ptr)
{
	__u64 v = 0;

	bpf_probe_read_kernel(&v, sizeof(v), &ptr);
	return v;
}

/* Holding a miss (the held file_open, kernels with the kfuncs below): the
 * event names a hold id, MAP_HELD maps the waiting thread to it, and the
 * thread reads an xattr of the hold anchor's executable, a file on the
 * daemon's FUSE mount, so it sleeps until the daemon answers the hold. */
/* A session's waiting threads are counted in its MAP_SESSIONS entry, so one
 * session can take at most HOLD_SLOT_PER_SESSION of the HOLD_MAX places:
 * past its share a miss is denied at once, and the other sessions' misses
 * are still held. */
_Static_assert(sizeof(struct session_key) == sizeof(__u64), "a session id is its key");

/* Whether a hook runs with a directory or the object locked (every held hook
 * but file_open): a thread held there keeps that lock while it waits. */
static __always_inline int hook_locks(__u32 hook)
{
	return hook != HOOK_FILE_OPEN && hook != HOOK_FILE_RECEIVE;
}

static __always_inline void hold_uncount(const struct session *s, int locked)
{
	/* s->id is laid out as struct session_key: no key copy on the stack,
	 * which the plain file_open has no room for. */
	struct session_value *v = bpf_map_lookup_elem(&MAP_SESSIONS, &s->id);

	if (v && v->held)
		__sync_fetch_and_add(&v->held, -1); /* no atomic sub in BPF */
	if (v && locked && v->held_locked)
		__sync_fetch_and_add(&v->held_locked, -1);
}

/* Counts a hold in, within the session's share of holds; a hold whose hook
 * keeps a lock also within one such hold per session at a time, so a session
 * can never keep more than one of the user's folders or files locked, however
 * fast it makes misses and whatever the daemon is doing. */
static __always_inline int hold_begin(const struct session *s, struct walk *w, int locked)
{
	__u32 slot = HOLD_SLOT_ANCHOR;
	__u32 *anchor = bpf_map_lookup_elem(&MAP_HOLD, &slot);

	slot = HOLD_SLOT_PER_SESSION;
	__u32 *share = bpf_map_lookup_elem(&MAP_HOLD, &slot);
	struct session_value *v = bpf_map_lookup_elem(&MAP_SESSIONS, &s->id);

	if (!anchor || !*anchor || !share || !v)
		return 0;
	/* Count first, then look: threads racing at the bound may all back off
	 * (a miss denied at once), never all get in. */
	__sync_fetch_and_add(&v->held, 1);
	if (*(volatile __u32 *)&v->held > *share) {
		__sync_fetch_and_add(&v->held, -1); /* no atomic sub in BPF */
		return 0;
	}
	if (locked) {
		__sync_fetch_and_add(&v->held_locked, 1);
		/* One at a time, and none while the session is quiet after a denied
		 * one (hold_wait): bounds the kernel keeps whatever the daemon does. */
		if (*(volatile __u32 *)&v->held_locked > 1 ||
		    bpf_ktime_get_ns() < *(volatile __u64 *)&v->locked_quiet_until) {
			hold_uncount(s, 1);
			return 0;
		}
	}
	/* Holds are told apart by (thread, id): a random id keeps a late answer
	 * to a thread's earlier hold from ending its next one. */
	__u32 id = bpf_get_prandom_u32() | 1;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	if (bpf_map_update_elem(&MAP_HELD, &tid, &id, BPF_ANY)) {
		hold_uncount(s, locked);
		return 0;
	}
	w->hold_id = id;
	return 1;
}

static __always_inline void hold_end(const struct session *s, struct walk *w, int locked)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	bpf_map_delete_elem(&MAP_HELD, &tid);
	hold_uncount(s, locked);
	w->hold_id = 0;
}

/* The verdict on a walk: never-grantable bits (or a walk that could not rule
 * them out) deny in every mode; other misses deny, or in a shadow session are
 * reported and allowed. */
static __always_inline int verdict(const struct session *s, __u64 obj, __u32 hook, struct walk *w)
{
	__u32 need = w->need;
	__u32 never = w->never & need;

	if (never) {
		w->flags |= EVENT_FLAG_NEVER;
		report(s, w, obj, never, hook);
		return -EACCES;
	}
	if (w->unknown) {
		report(s, w, obj, need, hook);
		return -EACCES;
	}
	if (!w->protected || (w->granted & need) == need)
		return 0;
	if (s->flags & SESSION_FLAG_SHADOW) {
		w->flags |= EVENT_FLAG_SHADOW;
		report(s, w, obj, need & ~w->granted, hook);
		return 0;
	}
	/* A plain miss under a root may be held: the event names the hold. An
	 * object gated by its owner has no root for the twin to judge it under. */
	if (w->hold && !(w->flags & EVENT_FLAG_OWNED) && hold_begin(s, w, hook_locks(hook)))
		w->flags |= EVENT_FLAG_HELD;
	if (!report(s, w, obj, need & ~w->granted, hook) && w->hold_id)
		hold_end(s, w, hook_locks(hook)); /* no event, nothing to wait for: denied now */
	return -EACCES;
}

/* verdict(), where a plain miss may be held when `held` is given: the bits
 * the held thread waits for are written there. */
static __always_inline int held_verdict(const struct session *s, __u64 obj, __u32 hook, struct walk *w, __u32 *held)
{
	w->hold = held != 0;
	int err = verdict(s, obj, hook, w);

	if (held && w->hold_id)
		*held = w->need & ~w->granted;
	return err;
}

/* A regular file with several hard links is reachable from several
 * directories, so a subtree grant on one of them must not open it: only an
 * exact grant can. */
static __always_inline int is_multi_link(struct inode *inode)
{
	return inode && (BPF_CORE_READ(inode, i_mode) & S_IFMT) != S_IFDIR && BPF_CORE_READ(inode, __i_nlink) > 1;
}

/* The access bits for which `inode` is one of the user's own objects, which a
 * session may reach only through a grant wherever it lies. An object is the
 * user's for an access when the user's identity is what lets the access
 * through: the object belongs to the session's uid (not root's: for a root
 * session every file would be its own), or the access needs a right its
 * "other" mode bits do not give everyone, so the kernel let it through for the
 * user's group, an ACL entry naming the user (udev's uaccess seats) or a
 * capability; or it is reached through a directory whose "other" bits give no
 * search right (`private_path`: a root-owned file in the user's 0700 folder,
 * a file in a group's 0770 share), which only the user's identity passes. What
 * every user of the machine may do (a world-readable system
 * file, /dev/null, creating in /tmp) is not the user's. Not counted: the
 * kernel's internal mounts (pipes, sockets, anonymous inodes, memfd and SysV
 * shared memory: reached only through a descriptor the session already holds),
 * /proc (other processes are reach checks), devpts (terminals are reach
 * checks), and cgroup2 (writes outside the session's cgroup are always
 * refused). sysfs counts: an attribute udev gives the user (a backlight, an
 * LED) is the user's. Everything on a FUSE mount of fusermount's kind counts
 * as the user's (sshfs, rclone, a gvfs share: the mount's server, not the
 * mode bits, keeps other users out); a root's FUSE mount for every user
 * (lxcfs) counts too, failing closed: the kernel's FUSE state is not in its
 * BTF (a module). */
static __always_inline __u32 users_bits(const struct session *s, struct inode *inode, int private_path)
{
	if (!inode || !s->uid)
		return 0;
	struct super_block *sb = BPF_CORE_READ(inode, i_sb);
	unsigned long magic = BPF_CORE_READ(sb, s_magic);

	if ((BPF_CORE_READ(sb, s_flags) & SB_KERNMOUNT) || magic == PROC_SUPER_MAGIC ||
	    magic == DEVPTS_SUPER_MAGIC || magic == CGROUP2_SUPER_MAGIC)
		return 0;
	/* On FUSE (a user's sshfs, rclone, gvfs: what fusermount mounts) the
	 * server decides who passes, and without allow_other the kernel lets only
	 * the mounting user's processes reach it, past every hook: its owners and
	 * modes tell nothing of whose it is. virtiofs (a VM's share, mounted by
	 * root for every user) is FUSE too, without a subtype. */
	if (private_path || BPF_CORE_READ(inode, i_uid.val) == s->uid ||
	    (magic == FUSE_SUPER_MAGIC && (BPF_CORE_READ(sb, s_type, fs_flags) & FS_HAS_SUBTYPE)))
		return ACCESS_ALL_BITS;
	umode_t mode = BPF_CORE_READ(inode, i_mode);
	__u32 bits = 0;

	if (!(mode & S_IROTH))
		bits |= ACCESS_READ | ACCESS_LIST;
	if (!(mode & S_IWOTH))
		bits |= ACCESS_WRITE | ACCESS_CREATE | ACCESS_DELETE;
	return bits;
}

/* An object of the user's whose walk met no root is gated by its owner: it
 * needs a grant like an object under a root (a hard link the user made
 * outside every root included). Other objects outside every root are what the
 * system lets every user touch. */
static __always_inline void protect_owned(const struct session *s, struct inode *inode, struct walk *w)
{
	if (!w->protected && (users_bits(s, inode, w->private_path) & w->need)) {
		w->protected = 1;
		w->flags |= EVENT_FLAG_OWNED;
	}
}

/* ---- The walk cache ----
 *
 * A walk's result is kept in inode local storage: on a directory, what the
 * walk from it to the top gave (never bits, subtree grants and open paths up to
 * the first root, whether a root was found, whether the directory holds never
 * names); on a file, its own entries. The exact grant of the object is always
 * looked up live. An entry is used only while the three stamps it was computed
 * under are unchanged: the policy generation (userspace writes a fresh one
 * after every change that can narrow a verdict), the kernel's rename_lock
 * sequence (every dentry move) and mount_lock sequence (every mount made,
 * moved or freed); a directory's entry also only through the same vfsmount.
 * The cache only ever allows: whenever it cannot tell that the walk would
 * allow without a report, the full walk runs on the live maps and decides. */

/* The stamps a cache entry must match. */
struct stamp {
	__u64 policy;
	__u32 rename_seq;
	__u32 mount_seq;
};

/* A kernel address as a read-only pointer to kernel type `btf_id` (Linux 6.2;
 * the verifier makes the call a plain move from 6.3): loads through it are
 * single instructions with an exception fixup, where bpf_probe_read_kernel
 * is a helper call of about a hundred instructions. Resolved by the loader
 * like the hold's kfuncs (pincer-user's kernel::kfunc); on a kernel without
 * it the call's id is 0 and HAVE_RDONLY_CAST is 0, so the verifier removes
 * the call as dead code and the probe reads run. */
extern void *bpf_rdonly_cast(const void *obj__ign, __u32 btf_id__k);

/* 1 when the loader found bpf_rdonly_cast in the kernel's BTF (a read-only
 * global: the verifier knows its value and prunes the branch not taken). */
const volatile __u32 HAVE_RDONLY_CAST = 0;

/* Reads the current stamps; 0 when nothing may be cached (the addresses are
 * unknown, or a rename or mount change is under way). */
static __always_inline int read_stamp(struct stamp *t)
{
	__u32 zero = 0;
	struct pincer_generation *g = bpf_map_lookup_elem(&MAP_GENERATION, &zero);

	if (!g || !g->rename_seq_addr || !g->mount_seq_addr)
		return 0;
	t->policy = g->policy;
	if (HAVE_RDONLY_CAST) {
		struct seqcount *rename = bpf_rdonly_cast((const void *)g->rename_seq_addr,
							  bpf_core_type_id_kernel(struct seqcount));
		struct seqcount *mount = bpf_rdonly_cast((const void *)g->mount_seq_addr,
							 bpf_core_type_id_kernel(struct seqcount));

		t->rename_seq = *(volatile unsigned int *)&rename->sequence;
		t->mount_seq = *(volatile unsigned int *)&mount->sequence;
	} else if (bpf_probe_read_kernel(&t->rename_seq, sizeof(t->rename_seq), (const void *)g->rename_seq_addr) ||
		   bpf_probe_read_kernel(&t->mount_seq, sizeof(t->mount_seq), (const void *)g->mount_seq_addr)) {
		return 0;
	}
	return !((t->rename_seq | t->mount_seq) & 1);
}

static __always_inline int same_stamp(const struct stamp *a, __u64 policy, __u32 rename_seq, __u32 mount_seq)
{
	return a->policy == policy && a->rename_seq == rename_seq && a->mount_seq == mount_seq;
}

/* The slot of `session` in `wc`, copied under the lock; 1 if it is that
 * session's and valid. */
static __always_inline int slot_get(struct walk_cache *wc, __u64 session, struct cache_slot *out)
{
	__u32 i = session & (CACHE_SLOTS - 1);

	if (i >= CACHE_SLOTS)
		return 0;
	bpf_spin_lock(&wc->lock);
	*out = wc->slot[i];
	bpf_spin_unlock(&wc->lock);
	return out->session == session && (out->flags & SLOT_VALID);
}

/* Stores `v` if the stamps are still those it was computed under (1 if it
 * did). The atomic orders the reads that computed it before the stamps are
 * read again. */
static __always_inline int slot_put(struct walk_cache *wc, struct cache_slot *v)
{
	struct stamp now;
	__u32 i = v->session & (CACHE_SLOTS - 1);

	__sync_fetch_and_add(&wc->fence, 1);
	if (!read_stamp(&now) || !same_stamp(&now, v->policy, v->rename_seq, v->mount_seq) || i >= CACHE_SLOTS)
		return 0;
	bpf_spin_lock(&wc->lock);
	wc->slot[i] = *v;
	bpf_spin_unlock(&wc->lock);
	return 1;
}

static __always_inline __u8 low_bits(__u32 bits)
{
	return (__u8)(bits & ACCESS_ALL_BITS);
}

/* The directory whose walk to the top a check of `obj` needs: `obj` itself
 * for a directory, else its parent. */
static __always_inline struct inode *segment_dir(struct dentry *obj)
{
	struct inode *inode = obj->d_inode;

	if (!inode)
		return 0;
	if ((inode->i_mode & S_IFMT) == S_IFDIR)
		return inode;
	struct dentry *parent = obj->d_parent;

	return parent && parent != obj ? parent->d_inode : 0;
}

/* A file's own entries, from the cache or looked up and cached, packed as
 * never | subtree << 8 | open << 16 | flags << 24 (0: none to be had). They
 * are keyed by the inode, so only the policy must match; (policy, rename,
 * mount) are the current stamps. Reads and writes the slot in place, so no
 * copy of it is on this frame. */
static __noinline __u32 file_entries(const struct session *s, struct inode *inode, __u64 policy, __u32 rename,
				     __u32 mount)
{
	struct walk_cache *wc = bpf_inode_storage_get(&MAP_WALK_CACHE, inode, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	__u32 i = s->id & (CACHE_SLOTS - 1);
	__u32 packed = 0;

	if (!wc || i >= CACHE_SLOTS)
		return 0;
	bpf_spin_lock(&wc->lock);
	struct cache_slot *v = &wc->slot[i];

	if (v->session == s->id && (v->flags & SLOT_VALID) && v->policy == policy)
		packed = v->never | (__u32)v->subtree << 8 | (__u32)v->open << 16 | (__u32)v->flags << 24;
	bpf_spin_unlock(&wc->lock);
	if (packed)
		return packed;
	struct object_key ok = { .ino = inode->i_ino, .dev = inode->i_sb->s_dev };
	struct grant_key gk = { .session = s->id, .ino = ok.ino, .dev = ok.dev };
	__u32 *bits;
	__u8 never = 0, subtree = 0, open = 0, flags = SLOT_VALID;

	bits = bpf_map_lookup_elem(&MAP_NEVER, &ok);
	if (bits) {
		never = low_bits(*bits);
		if (*bits & NEVER_HIDDEN)
			flags |= SLOT_HIDDEN;
	}
	bits = bpf_map_lookup_elem(&MAP_SUBTREE, &gk);
	if (bits)
		subtree = low_bits(*bits);
	bits = bpf_map_lookup_elem(&MAP_OPEN, &ok);
	if (bits)
		open = low_bits(*bits);
	if (bpf_map_lookup_elem(&MAP_ROOTS, &ok))
		flags |= SLOT_ROOT;
	packed = never | (__u32)subtree << 8 | (__u32)open << 16 | (__u32)flags << 24;

	__u32 zero = 0;

	/* A file's own entries are keyed by the object: only the policy
	 * generation can make them stale (the rename and mount stamps stored
	 * are the caller's, for the verdict kept in the same slot). */
	__sync_fetch_and_add(&wc->fence, 1);
	struct pincer_generation *g = bpf_map_lookup_elem(&MAP_GENERATION, &zero);

	if (!g || g->policy != policy)
		return packed;
	bpf_spin_lock(&wc->lock);
	v = &wc->slot[i];
	v->session = s->id;
	v->policy = policy;
	v->mnt = 0;
	v->dentry = 0;
	v->parent = 0;
	v->hash_len = 0;
	v->rename_seq = rename;
	v->mount_seq = mount;
	v->never = never;
	v->subtree = subtree;
	v->open = open;
	v->flags = flags;
	v->allowed = 0;
	v->never_all = 0;
	v->levels = 0;
	bpf_spin_unlock(&wc->lock);
	return packed;
}

/* The never bits of entry `name` (a kernel string) in directory (dev, ino).
 * A global function: its key lives in its own frame. */
__noinline __u32 never_name_bits(__u64 ino, __u32 dev, __u64 name)
{
	struct name_key nk;

	__builtin_memset(&nk, 0, sizeof(nk));
	nk.ino = ino;
	nk.dev = dev;
	long n = bpf_probe_read_kernel_str(nk.name, sizeof(nk.name), (const void *)name);

	if (n <= 0 || n >= (long)sizeof(nk.name))
		return 0; /* longer names never match, as in the walk */
	__u32 *bits = bpf_map_lookup_elem(&MAP_NEVER_NAMES, &nk);

	return bits ? *bits : 0;
}

#define CACHE_NONE 0 /* nothing to be had: run the full walk */
#define CACHE_HIT 1  /* w holds the segment and the object's exact grant */
#define CACHE_FILL 2 /* w is set up as the collecting walk that computes the segment */
#define CACHE_MULTI (1u << 30) /* cache_decide: a file with several links */

static __noinline int cache_decide(const struct session *s, struct dentry *obj, struct walk *w, __u32 need_multi);

/* A dentry's name hash and length as one value (read as two fields: 6.1's
 * verifier does not take the union's 64-bit view). */
static __always_inline __u64 name_hash_len(struct dentry *d)
{
	return (__u64)d->d_name.len << 32 | d->d_name.hash;
}

/* The verdict of a file with one link, as cached for this session by
 * verdict_put: the access bits its walk allows without a report, with
 * VERDICT_FOUND; and the never bits of its walk (shifted by VERDICT_NEVER_SHIFT),
 * with VERDICT_NEVER_FOUND, which a stat may have cached alone; 0 if none
 * holds. It holds only while the stamps, the mount, the dentry, its parent
 * and its name are those it was computed through. */
#define VERDICT_FOUND 0x100
#define VERDICT_NEVER_FOUND 0x200
#define VERDICT_NO_SLOT 0x400 /* the file has no cache slots at all (nothing made them yet) */
#define VERDICT_NEVER_SHIFT 16
static __noinline __u32 file_verdict(const struct session *s, struct dentry *obj, __u64 mnt)
{
	struct inode *inode = obj->d_inode;
	struct stamp t;
	__u32 i = s->id & (CACHE_SLOTS - 1), found = 0;

	if (!inode || inode->__i_nlink != 1 || (inode->i_mode & S_IFMT) == S_IFDIR || i >= CACHE_SLOTS)
		return 0;
	struct walk_cache *wc = bpf_inode_storage_get(&MAP_WALK_CACHE, inode, 0, 0);

	if (!wc)
		return VERDICT_NO_SLOT;
	if (!read_stamp(&t))
		return 0;
	__u64 parent = (__u64)obj->d_parent, hash_len = name_hash_len(obj);

	/* Compared in place, under the lock. */
	bpf_spin_lock(&wc->lock);
	struct cache_slot *v = &wc->slot[i];

	if (v->session == s->id && (v->flags & (SLOT_VERDICT | SLOT_NEVER_KNOWN)) && v->policy == t.policy &&
	    v->rename_seq == t.rename_seq && v->mount_seq == t.mount_seq && v->mnt == mnt && v->dentry == (__u64)obj &&
	    v->parent == parent && v->hash_len == hash_len)
		found = ((v->flags & SLOT_VERDICT) ? v->allowed | VERDICT_FOUND : 0) | VERDICT_NEVER_FOUND |
			(__u32)v->never_all << VERDICT_NEVER_SHIFT;
	bpf_spin_unlock(&wc->lock);
	return found;
}

/* Records the verdict of file `obj` (one link) for the session, in the slot
 * its entries are in, if the stamps w's walk ran under still hold:
 * `allowed_never` = allowed | never << 8, the never bits of its whole walk and
 * the bits it allows (with `flags` SLOT_VERDICT), or the never bits alone
 * (SLOT_NEVER_KNOWN, from a stat). A verdict already there is kept when only
 * the never bits come. */
static __noinline void verdict_put(const struct session *s, struct dentry *obj, struct walk *w, __u32 allowed_never,
				   __u32 flags)
{
	struct inode *inode = obj->d_inode;
	struct stamp now;

	if (!inode || inode->__i_nlink != 1)
		return;
	struct walk_cache *wc = bpf_inode_storage_get(&MAP_WALK_CACHE, inode, 0, 0);

	if (!wc)
		return;
	__sync_fetch_and_add(&wc->fence, 1);
	if (!read_stamp(&now) || !same_stamp(&now, w->stamp_policy, w->stamp_rename, w->stamp_mount))
		return;
	__u64 dentry = (__u64)obj, parent = (__u64)obj->d_parent, hash_len = name_hash_len(obj), mnt = w->mnt;
	__u32 i = s->id & (CACHE_SLOTS - 1);

	if (i >= CACHE_SLOTS)
		return;
	bpf_spin_lock(&wc->lock);
	struct cache_slot *v = &wc->slot[i];

	/* Never bits alone do not replace a verdict that still holds. */
	int keep = flags != SLOT_VERDICT && (v->flags & SLOT_VERDICT) && v->mnt == mnt && v->dentry == dentry &&
		   v->parent == parent && v->hash_len == hash_len && v->rename_seq == now.rename_seq &&
		   v->mount_seq == now.mount_seq;

	if (v->session == s->id && v->policy == now.policy && (v->flags & SLOT_VALID) && !keep) {
		v->mnt = mnt;
		v->dentry = dentry;
		v->parent = parent;
		v->hash_len = hash_len;
		v->rename_seq = now.rename_seq;
		v->mount_seq = now.mount_seq;
		v->allowed = (__u8)allowed_never;
		v->never_all = (__u8)(allowed_never >> 8);
		v->flags = (v->flags & ~(SLOT_VERDICT | SLOT_NEVER_KNOWN)) | (__u8)flags;
	}
	bpf_spin_unlock(&wc->lock);
}

/* The session's exact grant on object (ino, dev), 0 if none. A subprogram:
 * its key is not on the rename hook's frame. */
static __noinline __u32 exact_bits(__u64 session, __u64 ino, __u32 dev)
{
	struct grant_key gk = { .session = session, .ino = ino, .dev = dev };
	__u32 *bits = bpf_map_lookup_elem(&MAP_EXACT, &gk);

	return bits ? *bits : 0;
}

/* The session's exact grant on the object of dentry `d`, 0 if none. */
static __noinline __u32 own_exact(__u64 session, struct dentry *d)
{
	struct inode *inode = BPF_CORE_READ(d, d_inode);

	return inode ? exact_bits(session, BPF_CORE_READ(inode, i_ino), BPF_CORE_READ(inode, i_sb, s_dev)) : 0;
}

/* ---- The user's places ----
 *
 * A folder the session makes at a new name is its own: it takes hidden
 * entries freely (own_new_folder; cargo's target/.fingerprint). A folder of
 * the user's is the user's place by its name too: the user's tools find it by
 * its path, whatever object stands there. So where the session removes or
 * moves away a directory or symlink of the user's, it records the name
 * (MAP_VACATED, with the inode number of what left). What then stands at such
 * a name is the user's place: a directory the session makes there
 * (ACCESS_USERS_PLACE on its exact entry), or a directory of the user's other
 * than the one that left it moved there (its own MAP_VACATED entry under the
 * empty name: mark_users_place). A directory the
 * session makes beneath the user's place is the user's place too (hidden
 * names in it need a grant, as in the folder that stood there). Neither a new
 * folder of the session's nor a symlink may take such a name or the place of
 * a folder of the user's, nor that new folder move beneath the user's place
 * (takes_users_place). */

/* Levels in_users_place looks up; deeper, a directory counts as the user's
 * place. */
#define USERS_PLACE_DEPTH 32

/* The key of `entry`'s name in its directory for `session`; 0 if the name or
 * the directory cannot be read. A longer name is kept as its first
 * NEVER_NAME_LEN - 1 bytes (names alike in those are one entry: stricter). */
static __always_inline int vacated_key_of(struct vacated_key *k, __u64 session, struct dentry *entry)
{
	struct inode *dir = BPF_CORE_READ(entry, d_parent, d_inode);

	__builtin_memset(k, 0, sizeof(*k));
	if (!dir)
		return 0;
	k->session = session;
	k->ino = BPF_CORE_READ(dir, i_ino);
	k->dev = BPF_CORE_READ(dir, i_sb, s_dev);
	return bpf_probe_read_kernel_str(k->name, sizeof(k->name), BPF_CORE_READ(entry, d_name.name)) > 0;
}

/* If `entry`'s name is one the session vacated, the inode number of what left
 * it (~0 for an unreadable name: it counts, and matches nothing); else 0. */
static __noinline __u64 vacated_by(__u64 session, struct dentry *entry)
{
	struct vacated_key k;

	if (!vacated_key_of(&k, session, entry))
		return ~0ULL;
	__u64 *left = bpf_map_lookup_elem(&MAP_VACATED, &k);

	return left ? *left : 0;
}

/* Writes `value` at `k` in MAP_VACATED; a new entry only within the session's
 * share (VACATED_PER_SESSION, counted in its MAP_SESSIONS entry), so no session
 * fills the map for the others. 0, or -EACCES (the change is refused rather
 * than the name forgotten). */
static __always_inline int vacated_put(struct vacated_key *k, __u64 value)
{
	if (!bpf_map_update_elem(&MAP_VACATED, k, &value, BPF_EXIST))
		return 0;
	/* k->session is laid out as struct session_key. */
	struct session_value *v = bpf_map_lookup_elem(&MAP_SESSIONS, &k->session);

	if (!v)
		return -EACCES;
	/* Count first, then look, as hold_begin does. */
	__sync_fetch_and_add(&v->vacated, 1);
	if (*(volatile __u32 *)&v->vacated <= VACATED_PER_SESSION && !bpf_map_update_elem(&MAP_VACATED, k, &value, BPF_NOEXIST))
		return 0;
	__sync_fetch_and_add(&v->vacated, -1); /* no atomic sub in BPF */
	/* Written meanwhile by another thread of the session: written again. */
	return bpf_map_update_elem(&MAP_VACATED, k, &value, BPF_EXIST) ? -EACCES : 0;
}

/* Whether directory `d`, or one above it on its filesystem, is marked as the
 * user's place for the session: made there by the session (its exact entry's
 * ACCESS_USERS_PLACE) or moved there (mark_users_place). */
static __noinline int in_users_place(__u64 session, struct dentry *d)
{
	struct vacated_key k;

	__builtin_memset(&k, 0, sizeof(k));
	k.session = session;
	for (int i = 0; i < USERS_PLACE_DEPTH; i++) {
		if (!d)
			return 0;
		struct inode *inode = BPF_CORE_READ(d, d_inode);

		if (inode) {
			k.ino = BPF_CORE_READ(inode, i_ino);
			k.dev = BPF_CORE_READ(inode, i_sb, s_dev);
			if ((exact_bits(session, k.ino, k.dev) & ACCESS_USERS_PLACE) || bpf_map_lookup_elem(&MAP_VACATED, &k))
				return 1;
		}
		struct dentry *up = BPF_CORE_READ(d, d_parent);

		if (up == d)
			return 0;
		d = up;
	}
	return 1;
}

/* Whether `entry` (a name in its directory) is where a folder of the user's
 * stands for the session: a name the session vacated, or that a directory of
 * the user's holds now. */
static __noinline int users_folder_name(__u64 session, struct dentry *entry)
{
	if (vacated_by(session, entry))
		return 1;
	struct inode *there = BPF_CORE_READ(entry, d_inode);

	return there && (BPF_CORE_READ(there, i_mode) & S_IFMT) == S_IFDIR && !own_new_folder(own_exact(session, entry));
}

/* Marks the directory `inode` of the user's as the user's place for the
 * session: its own entry in MAP_VACATED, under the empty name (no entry has
 * it), which only the kernel writes. 0, or -EACCES (vacated_put). */
static __noinline int mark_users_place(__u64 session, struct inode *inode)
{
	struct vacated_key k;

	__builtin_memset(&k, 0, sizeof(k));
	k.session = session;
	k.ino = BPF_CORE_READ(inode, i_ino);
	k.dev = BPF_CORE_READ(inode, i_sb, s_dev);
	return vacated_put(&k, ~0ULL);
}

/* The names a rename (or a removal: `new_dentry` 0) changes. The directory or
 * symlink `old_dentry` of the user's (not one the session made at a new name)
 * leaves its name: recorded as vacated (a symlink's name is a path to a
 * folder as much as a directory's). A directory of the user's that arrives
 * where another folder of the user's stood (a vacated name it did not leave,
 * or over a directory) is the user's place from then on (mark_arrival). 0,
 * or -EACCES when the session's share of MAP_VACATED is spent (vacated_put). */
static __noinline int moved_names(__u64 session, struct dentry *old_dentry, struct dentry *new_dentry)
{
	struct inode *inode = BPF_CORE_READ(old_dentry, d_inode);

	if (!inode)
		return 0;
	__u32 fmt = BPF_CORE_READ(inode, i_mode) & S_IFMT;

	if ((fmt != S_IFDIR && fmt != S_IFLNK) || own_new_folder(own_exact(session, old_dentry)))
		return 0;
	struct vacated_key k;
	__u64 ino = BPF_CORE_READ(inode, i_ino);

	if (!vacated_key_of(&k, session, old_dentry) || vacated_put(&k, ino))
		return -EACCES;
	if (fmt != S_IFDIR || !new_dentry)
		return 0;
	/* mark_arrival */
	__u64 left = vacated_by(session, new_dentry);
	struct inode *there = BPF_CORE_READ(new_dentry, d_inode);
	int over = there && there != inode && (BPF_CORE_READ(there, i_mode) & S_IFMT) == S_IFDIR;

	if ((left && left != ino) || over)
		return mark_users_place(session, inode);
	return 0;
}

/* Whether moving `old_dentry` to `new_dentry` puts a new folder of the
 * session's (its hidden entries made freely) where a folder of the user's
 * stands (users_folder_name) or beneath the user's place, or a symlink where
 * a folder of the user's stands. */
static __noinline int takes_users_place(__u64 session, struct dentry *old_dentry, struct dentry *new_dentry)
{
	struct inode *inode = BPF_CORE_READ(old_dentry, d_inode);

	if (!inode)
		return 0;
	__u32 fmt = BPF_CORE_READ(inode, i_mode) & S_IFMT;

	if (fmt == S_IFLNK)
		return users_folder_name(session, new_dentry);
	if (fmt != S_IFDIR || !session_made_folder(own_exact(session, old_dentry)))
		return 0;
	return users_folder_name(session, new_dentry) || in_users_place(session, BPF_CORE_READ(new_dentry, d_parent));
}

/* A new folder of the session's takes hidden entries freely (own_new_folder),
 * and the user's tools read the hidden configuration of every folder above
 * where they run (cargo's .cargo/config.toml, direnv's .envrc, git's .git). So
 * an object of the user's (one the session did not make) does not move into a
 * new folder of the session's, at any depth, that holds a hidden entry the
 * session made (ACCESS_HOLDS_HIDDEN, set by mark_hidden_entry); and where it
 * moves in, those folders become the user's place (ACCESS_USERS_PLACE), so no
 * hidden entry is made in them afterwards without a grant. Whether such a
 * rename is refused; the folders above a chain deeper than USERS_PLACE_DEPTH
 * are not seen, so it is refused too. */
static __noinline int moves_under_own_hidden(__u64 session, struct dentry *old_dentry, struct dentry *new_dentry)
{
	if (own_exact(session, old_dentry) & ACCESS_CREATED_BY_SESSION)
		return 0;
	struct dentry *d = BPF_CORE_READ(new_dentry, d_parent);

	for (int i = 0; i < USERS_PLACE_DEPTH; i++) {
		struct inode *inode = d ? BPF_CORE_READ(d, d_inode) : 0;

		if (!inode)
			return 0;
		struct grant_key gk = {
			.session = session,
			.ino = BPF_CORE_READ(inode, i_ino),
			.dev = BPF_CORE_READ(inode, i_sb, s_dev),
		};
		__u32 *bits = bpf_map_lookup_elem(&MAP_EXACT, &gk);

		if (!bits || !session_made_folder(*bits))
			return 0;
		if (*bits & ACCESS_HOLDS_HIDDEN)
			return 1;
		*bits |= ACCESS_USERS_PLACE;
		struct dentry *up = BPF_CORE_READ(d, d_parent);

		if (up == d)
			return 0;
		d = up;
	}
	return 1;
}

/* After a hidden entry `child` was allowed into a new folder of the session's:
 * marks the folder (ACCESS_HOLDS_HIDDEN) for moves_under_own_hidden. */
static __noinline void mark_hidden_entry(__u64 session, struct dentry *child)
{
	if (!hidden_name(BPF_CORE_READ(child, d_name.name)))
		return;
	struct inode *dir = BPF_CORE_READ(child, d_parent, d_inode);

	if (!dir)
		return;
	struct grant_key gk = {
		.session = session,
		.ino = BPF_CORE_READ(dir, i_ino),
		.dev = BPF_CORE_READ(dir, i_sb, s_dev),
	};
	__u32 *bits = bpf_map_lookup_elem(&MAP_EXACT, &gk);

	if (bits && own_new_folder(*bits))
		*bits |= ACCESS_HOLDS_HIDDEN;
}

/* Looks up the segment of directory `dir` (dentry `dir_d`, reached through
 * w->mnt) for a check of `obj`. On a hit, leaves in w: never, granted and
 * protected as the walk from `dir` to the top gave them, levels, names_here,
 * the current stamps, and `exact`, the exact grant of `obj`. On a miss, sets
 * w up as the walk that computes the segment. A subprogram, so its frame is
 * not on the full walk's call chain. */
static __noinline int segment_lookup(const struct session *s, struct inode *dir, struct dentry *dir_d,
				     struct inode *obj, struct walk *w)
{
	struct stamp t;
	struct cache_slot seg;
	__u64 mnt = w->mnt;

	if (!read_stamp(&t))
		return CACHE_NONE;
	struct walk_cache *wc = bpf_inode_storage_get(&MAP_WALK_CACHE, dir, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);

	if (!wc)
		return CACHE_NONE;
	__builtin_memset(w, 0, sizeof(*w));
	w->session = s->id;
	w->mnt = mnt;
	w->stamp_policy = t.policy;
	w->stamp_rename = t.rename_seq;
	w->stamp_mount = t.mount_seq;
	if (!slot_get(wc, s->id, &seg) || !same_stamp(&t, seg.policy, seg.rename_seq, seg.mount_seq) || seg.mnt != mnt) {
		w->d = scalar_of(dir_d);
		w->subtree_ok = 1;
		w->collect = 1;
		return CACHE_FILL;
	}
	w->exact = obj ? exact_bits(s->id, obj->i_ino, obj->i_sb->s_dev) : 0;
	w->never = seg.never;
	w->granted = seg.subtree;
	w->protected = seg.flags & SLOT_ROOT;
	w->private_path = seg.flags & SLOT_PRIVATE;
	w->names_here = seg.flags & SLOT_NAMES_HERE;
	w->levels = seg.levels;
	return CACHE_HIT;
}

/* Caches the result of the collecting walk `w` (set up by segment_lookup) on
 * directory `dir`, if it ran to its end and the stamps did not move. Returns
 * 1 with `w` as a hit leaves it (the exact grant of `obj` looked up), 0 if
 * not cached (the walk did not run to its end, or the stamps moved). */
static __noinline int cache_fill(const struct session *s, struct inode *dir, struct inode *obj, struct walk *w)
{
	struct cache_slot v;

	if (w->unknown || (w->flags & EVENT_FLAG_WALK_EXHAUSTED))
		return 0;
	struct walk_cache *wc = bpf_inode_storage_get(&MAP_WALK_CACHE, dir, 0, 0);

	if (!wc)
		return 0;
	struct object_key ok = { .ino = dir->i_ino, .dev = dir->i_sb->s_dev };

	w->exact = obj ? exact_bits(s->id, obj->i_ino, obj->i_sb->s_dev) : 0;
	w->names_here = bpf_map_lookup_elem(&MAP_NEVER_DIRS, &ok) ? SLOT_NAMES_HERE : 0;

	v.session = s->id;
	v.policy = w->stamp_policy;
	v.mnt = w->mnt;
	v.rename_seq = w->stamp_rename;
	v.mount_seq = w->stamp_mount;
	v.never = low_bits(w->never);
	v.subtree = low_bits(w->granted);
	v.open = 0;
	v.flags = SLOT_VALID | w->names_here | (w->protected ? SLOT_ROOT : w->private_path);
	v.levels = w->levels;
	/* A walk a rename, mount change or policy change overlapped is not used. */
	return slot_put(wc, &v);
}

/* 1 when `w` holds the cached segment of the directory a check of `obj`
 * (reached through `mnt`) needs, as segment_lookup leaves a hit: looked up,
 * or computed by the collecting walk and cached when missing; with `obj`'s
 * exact grant when `exact` (a check of the never bits alone goes without).
 * 0 when the cache cannot give it (`w` is then free for the full walk). */
static __always_inline int cached_segment(const struct session *s, struct dentry *obj, __u64 mnt, int exact,
					  struct walk *w)
{
	struct inode *inode = obj->d_inode;
	struct inode *dir = segment_dir(obj);

	if (!inode || !dir)
		return 0;
	struct dentry *dir_d = dir == inode ? obj : obj->d_parent;

	w->mnt = mnt;
	int c = segment_lookup(s, dir, dir_d, exact ? inode : 0, w);

	if (c == CACHE_FILL) {
		walk_up(w);
		c = cache_fill(s, dir, exact ? inode : 0, w) ? CACHE_HIT : CACHE_NONE;
	}
	return c == CACHE_HIT;
}

/* 1 when the walk from the opened object `obj` (reached through `mnt`) is
 * known from the cache to allow `need` without a report; 0 when the full walk
 * must run (`w` is then free for it). Mirrors walk_up, verdict and
 * protect_outside_link for that one outcome; `multi`: a file with several
 * links (subtree grants do not count). */
static __always_inline int cached_allow(const struct session *s, struct dentry *obj, __u64 mnt, __u32 need,
					int multi, struct walk *w)
{
	return cached_segment(s, obj, mnt, 1, w) && cache_decide(s, obj, w, need | (multi ? CACHE_MULTI : 0));
}

/* The verdict cached_allow gives on a hit (w as segment_lookup left it):
 * 1 allow, 0 walk. `need_multi`: `need`, with CACHE_MULTI for a file with
 * several links. */
static __noinline int cache_decide(const struct session *s, struct dentry *obj, struct walk *w, __u32 need_multi)
{
	struct inode *inode = obj->d_inode;
	struct inode *dir = segment_dir(obj);
	__u32 need = need_multi & ~CACHE_MULTI;
	int multi = !!(need_multi & CACHE_MULTI);

	if (!inode || !dir)
		return 0;
	int own_dir = dir == inode;
	__u32 never = w->never, granted = w->exact, protected = 0;

	if (own_dir) {
		granted |= w->granted;
		protected = w->protected | w->private_path;
	} else {
		if (w->levels >= MAX_WALK_DEPTH)
			return 0;
		/* A hidden file: its directory's segment holds the subtree
		 * grants above it, which do not reach it; the full walk
		 * decides. */
		if (hidden_name(obj->d_name.name))
			return 0;
		__u32 own = file_entries(s, inode, w->stamp_policy, w->stamp_rename, w->stamp_mount);

		/* A file a hidden entry names, like a hidden file: the full walk. */
		if (!own || ((own >> 24) & SLOT_HIDDEN))
			return 0;
		if (w->names_here)
			never |= never_name_bits(dir->i_ino, dir->i_sb->s_dev, scalar_of(obj->d_name.name));
		never |= own & 0xff;
		granted |= (own >> 16 & 0xff) | (multi ? 0 : own >> 8 & 0xff);
		if ((own >> 24) & SLOT_ROOT) {
			protected = 1;
		} else {
			protected = w->protected | w->private_path;
			if (!multi)
				granted |= w->granted;
		}
	}
	/* Bits the walk leaves ungated: none under a root, else those for
	 * which the object is not the user's. */
	/* (A private path gates like a root here: the full walk tells the
	 * objects the owner rule leaves out, /proc's among them, apart.) */
	__u32 free = protected ? 0 : ACCESS_ALL_BITS & ~users_bits(s, inode, 0);

	if (!own_dir && !multi)
		verdict_put(s, obj, w, (ACCESS_ALL_BITS & ~never & (granted | free)) | (never & ACCESS_ALL_BITS) << 8, SLOT_VERDICT);
	if (never & need)
		return 0;
	return ((granted | free) & need) == need;
}

/* ---- Never patterns ----
 *
 * A never rule for NAME or DIR/NAME under any root (a pattern that starts
 * with two stars and a slash) is matched on the names an access actually
 * reaches, whenever they appeared: MAP_NEVER_NAMES holds, under
 * NEVER_PATTERN_DEV, each NAME's value (its never bits, its word id if it is
 * a DIR, and the mask of the DIR words it pairs with) and, under
 * NEVER_PAIR_DEV, the bits of each (DIR word, NAME) pair. The walk reads the
 * name of every level from the object to the top. Inside the session's
 * scratch (its subtree grant marked ACCESS_CREATED_BY_SESSION) nothing
 * matches: the scratch is the session's own to fill (`git init` there), and no
 * tool of the user's runs from it. Only checks that need a bit some pattern
 * has (the state's never_patterns) pay for it. */

/* State of pattern_walk between levels; `k` is the key's room for names and
 * then for the grant of the level (one at a time). */
struct pattern_ctx {
	union {
		struct name_key nk;
		struct grant_key gk;
	} k;
	struct pos p;
	__u64 session;
	__u64 prev;      /* the name of the entry the walk came from (kernel string), or 0 */
	__u32 pending;   /* that entry's value */
	__u32 own;       /* the current level's value */
	__u32 matched;   /* bits matched so far that the session's scratch did not lift */
	__u32 first;     /* the first level's own value */
	__u8 pinned_ok;  /* the first level's entry is the checked object (not a new name) */
	__u8 note;       /* look for the session's scratch at every level, matched or not */
	__u8 lifted;     /* (with note) a level of the walk is the session's scratch */
};

/* The value of entry `name` (a kernel string), with `nk` as the key's room:
 * its NEVER_PATTERN_DEV entry, 0 if none (or a name longer than any). */
static __always_inline __u32 pattern_value(struct name_key *nk, __u64 name)
{
	__builtin_memset(nk, 0, sizeof(*nk));
	nk->dev = NEVER_PATTERN_DEV;
	long n = bpf_probe_read_kernel_str(nk->name, sizeof(nk->name), (const void *)name);

	if (n <= 0 || n >= (long)sizeof(nk->name))
		return 0;
	__u32 *v = bpf_map_lookup_elem(&MAP_NEVER_NAMES, nk);

	return v ? *v : 0;
}

/* One level of pattern_walk: the entry the walk came from is matched in the
 * current directory; returns 1 to stop. */
static long pattern_step(__u64 index, struct pattern_ctx *c)
{
	struct dentry *cur = c->p.d;

	if (!cur)
		return 1;
	c->own = pattern_value(&c->k.nk, scalar_of(BPF_CORE_READ(cur, d_name.name)));
	if (index == 0)
		c->first = c->own;
	/* Only the checked object's own entry is pinned, not a directory above. */
	if (index != 1 || !c->pinned_ok)
		c->pending &= ~NEVER_PATTERN_PINNED;
	c->matched |= c->pending & NEVER_PATTERN_BITS;
	__u32 word = (c->own >> NEVER_PATTERN_WORD_SHIFT) & 0xff;

	if (c->prev && word && word <= NEVER_PATTERN_WORDS &&
	    ((c->pending >> NEVER_PATTERN_MASK_SHIFT) & (1u << (word - 1)))) {
		__builtin_memset(&c->k.nk, 0, sizeof(c->k.nk));
		c->k.nk.dev = NEVER_PAIR_DEV;
		c->k.nk.ino = word;
		long n = bpf_probe_read_kernel_str(c->k.nk.name, sizeof(c->k.nk.name), (const void *)c->prev);

		if (n > 0 && n < (long)sizeof(c->k.nk.name)) {
			__u32 *bits = bpf_map_lookup_elem(&MAP_NEVER_NAMES, &c->k.nk);

			if (bits)
				c->matched |= *bits & NEVER_PATTERN_BITS;
		}
	}
	struct inode *inode = BPF_CORE_READ(cur, d_inode);

	if ((c->matched || c->note) && inode) {
		__builtin_memset(&c->k.gk, 0, sizeof(c->k.gk));
		c->k.gk.session = c->session;
		c->k.gk.ino = BPF_CORE_READ(inode, i_ino);
		c->k.gk.dev = BPF_CORE_READ(inode, i_sb, s_dev);
		__u32 *g = bpf_map_lookup_elem(&MAP_SUBTREE, &c->k.gk);

		if (g && (*g & ACCESS_CREATED_BY_SESSION)) {
			c->matched = 0;
			c->lifted = 1;
		}
	}
	c->pending = c->own & (NEVER_PATTERN_BITS | (0xffffu << NEVER_PATTERN_MASK_SHIFT));
	c->prev = scalar_of(BPF_CORE_READ(cur, d_name.name));
	int step = step_up(&c->p);

	if (!step)
		return 1;
	if (step == 2) /* the mounted root's name ("/") names no pattern */
		c->pending = 0, c->prev = 0;
	return 0;
}

/* The never bits the patterns give an access to dentry `d` (reached through
 * `mnt`, or 0) or, with `child_name`, to that new entry of directory `d`, for
 * `session`: the bits matched from the object to the top that the session's
 * scratch does not lift, with `delete` for a pinned entry (a DIR word such as
 * `.git`, so it cannot be moved away, filled and moved back). A walk that does
 * not reach the top gives every bit (fail closed). A global function: its
 * frame is not on the main walk's call chain. */
__noinline __u32 pattern_walk(__u64 session, __u64 d, __u64 mnt, __u64 child_name)
{
	struct pattern_ctx c;

	__builtin_memset(&c, 0, sizeof(c));
	c.p.d = (struct dentry *)d;
	c.p.mnt = (struct vfsmount *)mnt;
	c.session = session;
	c.prev = child_name;
	c.pinned_ok = !child_name;
	if (child_name) {
		__u32 v = pattern_value(&c.k.nk, child_name);

		c.pending = v & (NEVER_PATTERN_BITS | (0xffffu << NEVER_PATTERN_MASK_SHIFT));
		/* A DIR word of the patterns (`.git`, `.claude`) is a reserved name:
		 * a new entry of that name (made, linked, or a folder renamed to
		 * it) would make the patterns match what is inside, which no check
		 * saw, or point git at a directory of another name (a `.git` file
		 * or symlink). Only the session's scratch lifts it. */
		if ((v >> NEVER_PATTERN_WORD_SHIFT) & 0xff)
			c.pending |= ACCESS_CREATE;
	}
	long levels = bpf_loop(MAX_WALK_DEPTH, pattern_step, &c, 0);

	if (levels >= MAX_WALK_DEPTH || levels < 0)
		return ACCESS_ALL_BITS;
	__u32 m = c.matched;

	return (m & ACCESS_ALL_BITS) | (m & NEVER_PATTERN_PINNED ? ACCESS_DELETE : 0);
}

/* ---- The patterns' cache ----
 *
 * A walk of the patterns for an entry E of directory D (the checked object,
 * or a new name) is two parts: E's own level (E's value, and the pair of D's
 * word with E's name, unless a scratch at D or above lifts them) and what
 * the walk from D to the top matches for D's own entry and every level above
 * (`above`), which does not depend on E. `above` is kept per session in D's
 * inode storage, under the walk cache's three stamps and the mount the walk
 * went through, with D's word and whether a level from D up is the session's
 * scratch: a file written or made again in a directory already walked costs
 * one name lookup instead of a walk to the top. */
#define PATTERN_LIFTED (1u << 8)     /* a level from D up is the session's scratch */
#define PATTERN_WORD_SHIFT 16         /* D's own word id */
#define PATTERN_EXHAUSTED (1u << 31)  /* the walk did not reach the top */

struct pattern_slot {
	__u64 session;
	__u64 policy;
	__u64 mnt;
	__u32 rename_seq;
	__u32 mount_seq;
	__u32 above; /* pattern_above's value */
	__u32 valid;
};

/* Two slots per session: a check with no mount (inode hooks: a create) and
 * one through the file's mount (an open), which would otherwise evict each
 * other as a file is made and then opened. */
#define PATTERN_SLOTS (2 * CACHE_SLOTS)

struct pattern_cache {
	struct bpf_spin_lock lock;
	__u32 fence;
	struct pattern_slot slot[PATTERN_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_INODE_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct pattern_cache);
} MAP_PATTERN_CACHE SEC(".maps");

/* `above` for directory `d` (reached through `mnt`): the bits the walk from d
 * to the top matches for d's own entry and every level above (pinned bits
 * do not count there), with PATTERN_LIFTED, d's word, or PATTERN_EXHAUSTED.
 * Inlined in pattern_cached: one frame between the hook's and the walk's
 * steps, as pattern_walk has. */
static __always_inline __u32 pattern_above(__u64 session, __u64 d, __u64 mnt)
{
	struct pattern_ctx c;

	__builtin_memset(&c, 0, sizeof(c));
	c.p.d = (struct dentry *)d;
	c.p.mnt = (struct vfsmount *)mnt;
	c.session = session;
	c.note = 1;
	long levels = bpf_loop(MAX_WALK_DEPTH, pattern_step, &c, 0);

	if (levels >= MAX_WALK_DEPTH || levels < 0)
		return PATTERN_EXHAUSTED;
	return (c.matched & NEVER_PATTERN_BITS) | (c.lifted ? PATTERN_LIFTED : 0) |
	       ((c.first >> NEVER_PATTERN_WORD_SHIFT) & 0xff) << PATTERN_WORD_SHIFT;
}

/* The bits entry `name` (a kernel string) matches at its own level in a
 * directory whose word is `word`: its own value and the pair, as pattern_step
 * matches them. `child`: a new name (its pinned bit does not count, and a
 * DIR word is reserved: `create`); else the checked object itself. */
static __always_inline __u32 pattern_entry(__u64 name, __u32 word, __u32 child)
{
	struct name_key nk;
	__u32 v = pattern_value(&nk, name);
	__u32 pending = v & (NEVER_PATTERN_BITS | (0xffffu << NEVER_PATTERN_MASK_SHIFT));

	if (child) {
		pending &= ~NEVER_PATTERN_PINNED;
		if ((v >> NEVER_PATTERN_WORD_SHIFT) & 0xff)
			pending |= ACCESS_CREATE;
	}
	__u32 m = pending & NEVER_PATTERN_BITS;

	if (word && word <= NEVER_PATTERN_WORDS && ((pending >> NEVER_PATTERN_MASK_SHIFT) & (1u << (word - 1)))) {
		__builtin_memset(&nk, 0, sizeof(nk));
		nk.dev = NEVER_PAIR_DEV;
		nk.ino = word;
		long n = bpf_probe_read_kernel_str(nk.name, sizeof(nk.name), (const void *)name);

		if (n > 0 && n < (long)sizeof(nk.name)) {
			__u32 *bits = bpf_map_lookup_elem(&MAP_NEVER_NAMES, &nk);

			if (bits)
				m |= *bits & NEVER_PATTERN_BITS;
		}
	}
	return m;
}

#define PATTERN_SERVED (1u << 30) /* pattern_cached: the value is the cache's answer */

/* pattern_walk's value for entry `e` of directory `dir` (the hook's
 * pointers; reached through `mnt`, or 0), `child` as for pattern_entry, with
 * PATTERN_SERVED; `above` comes from the cache (looked up, or computed and
 * kept if the stamps held meanwhile). 0 when the cache cannot serve
 * (pattern_walk then decides). A walk that does not reach the top gives
 * every bit. A subprogram, so its frame is not on the hooks' own. */
static __noinline __u32 pattern_cached(const struct session *s, struct dentry *dir, struct dentry *e, __u64 mnt,
				       __u32 child)
{
	struct inode *di = dir->d_inode;
	struct stamp t;
	__u32 i = (s->id & (CACHE_SLOTS - 1)) * 2 + (mnt ? 1 : 0), above = 0, hit = 0;

	if (!di || i >= PATTERN_SLOTS || !read_stamp(&t))
		return 0;
	struct pattern_cache *pc = bpf_inode_storage_get(&MAP_PATTERN_CACHE, di, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);

	if (!pc)
		return 0;
	/* Compared in place, under the lock. */
	bpf_spin_lock(&pc->lock);
	struct pattern_slot *v = &pc->slot[i];

	if (v->valid && v->session == s->id && v->mnt == mnt && v->policy == t.policy && v->rename_seq == t.rename_seq &&
	    v->mount_seq == t.mount_seq) {
		above = v->above;
		hit = 1;
	}
	bpf_spin_unlock(&pc->lock);
	if (!hit) {
		/* The atomic orders the walk's reads after the stamps read
		 * above; the stamps are read again after it. */
		__sync_fetch_and_add(&pc->fence, 1);
		above = pattern_above(s->id, scalar_of(dir), mnt);
		if (above & PATTERN_EXHAUSTED)
			return PATTERN_SERVED | ACCESS_ALL_BITS;
		__u64 policy = t.policy;
		__u32 rename = t.rename_seq, mount = t.mount_seq;

		if (read_stamp(&t) && same_stamp(&t, policy, rename, mount)) {
			bpf_spin_lock(&pc->lock);
			v = &pc->slot[i];
			v->session = s->id;
			v->policy = policy;
			v->mnt = mnt;
			v->rename_seq = rename;
			v->mount_seq = mount;
			v->above = above;
			v->valid = 1;
			bpf_spin_unlock(&pc->lock);
		}
	}
	__u32 m = above & NEVER_PATTERN_BITS;

	if (!(above & PATTERN_LIFTED))
		m |= pattern_entry(scalar_of(e->d_name.name), (above >> PATTERN_WORD_SHIFT) & 0xff, child);
	return PATTERN_SERVED | (m & ACCESS_ALL_BITS) | (m & NEVER_PATTERN_PINNED ? ACCESS_DELETE : 0);
}

/* pattern_walk for object `d` (a hook's pointer; through `mnt`, or 0), from
 * the cache where it can serve: an object that is not the root of its
 * filesystem. */
static __always_inline __u32 pattern_of_object(const struct session *s, struct dentry *d, __u64 mnt)
{
	struct dentry *dir = d->d_parent;

	if (dir && dir != d) {
		__u32 m = pattern_cached(s, dir, d, mnt, 0);

		if (m & PATTERN_SERVED)
			return m & ~PATTERN_SERVED;
	}
	return pattern_walk(s->id, scalar_of(d), mnt, 0);
}

/* The pattern bits of a check of object `d` (through `mnt`, or 0) that needs
 * `need`, 0 when no pattern has a bit of it (then nothing is read). Without
 * the state entry: walked (fail closed). `d` as a number: the walk alone. */
static __always_inline __u32 pattern_check(const struct session *s, __u64 d, __u64 mnt, __u32 need)
{
	__u32 zero = 0;
	struct pincer_state *st = bpf_map_lookup_elem(&MAP_STATE, &zero);

	if (st && !(st->never_patterns & need))
		return 0;
	return pattern_walk(s->id, d, mnt, 0) & need;
}

/* pattern_check for new entry `child` (a hook's pointer) of its directory,
 * which the cache serves. */
static __always_inline __u32 pattern_check_child(const struct session *s, struct dentry *child, __u32 need)
{
	__u32 zero = 0;
	struct pincer_state *st = bpf_map_lookup_elem(&MAP_STATE, &zero);
	struct dentry *dir = child->d_parent;

	if (st && !(st->never_patterns & need))
		return 0;
	if (dir && dir != child) {
		__u32 m = pattern_cached(s, dir, child, 0, 1);

		if (m & PATTERN_SERVED)
			return m & need;
	}
	return pattern_walk(s->id, scalar_of(dir), 0, scalar_of(child->d_name.name)) & need;
}

/* Sets `w` up for the full walk of a check: from dentry `d` through `mnt`,
 * exact grants on d and (unless `multi`, a file with several links) subtree
 * grants counting. Field by field, so no second walk is built on the stack. */
static __always_inline void walk_start(struct walk *w, const struct session *s, __u64 d, __u64 mnt, __u32 need,
				       int multi)
{
	__builtin_memset(w, 0, sizeof(*w));
	w->session = s->id;
	w->d = d;
	w->mnt = mnt;
	w->need = need;
	w->exact_ok = 1;
	w->subtree_ok = !multi;
	w->flags = multi ? EVENT_FLAG_MULTI_LINK : 0;
}

/* Refuses a symlink made where a folder of the user's stands
 * (users_folder_name), or an object of the user's moved beneath the session's
 * hidden entries (moves_under_own_hidden), as a never-grantable `create` of
 * the new name: no grant makes it safe. */
static __noinline int refuse_users_place(const struct session *s, struct dentry *d, __u32 hook)
{
	struct walk w;

	walk_start(&w, s, scalar_of(d), 0, ACCESS_CREATE, 0);
	w.never = ACCESS_CREATE;
	w.flags |= EVENT_FLAG_NEVER;
	report(s, &w, scalar_of(d), ACCESS_CREATE, hook);
	return -EACCES;
}

static __always_inline int reach_file_open(__u64 session, struct file *file);
static __always_inline int shared_inbound(__u64 session, struct file *file);
static __noinline int shared_room(__u64 session, struct dentry *child);
static __noinline int shared_mark(__u64 session, struct inode *inode, struct inode *dir);
static __always_inline void shared_forget(struct object_key *k);
static __always_inline int reach_cgroup(const struct session *s, struct dentry *d, __u32 need);
static __noinline int reach_tty(__u64 session, struct dentry *d);

/* In the `need` of check_object_held: only a grant on the object itself
 * counts (as for a file with several links). */
#define NEED_EXACT (1u << 29)

/* Check `need` on the existing object `d` (exact, subtree and open grants;
 * only exact ones for files with several links, or with NEED_EXACT). With
 * `held`, a plain miss may be held: the bits it waits for are written there. */
static __always_inline int check_object_held(const struct session *s, struct dentry *d, __u32 need, __u32 hook,
					     __u32 *held)
{
	struct inode *inode = BPF_CORE_READ(d, d_inode);
	int multi = is_multi_link(inode) || (need & NEED_EXACT);
	struct walk w;

	need &= ~NEED_EXACT;

	int err = reach_cgroup(s, d, need);

	if (err)
		return err;
	walk_start(&w, s, scalar_of(d), 0, need, multi);

	walk_up(&w);
	/* `d` may have come from a probe read (BPF_CORE_READ): the walk. */
	w.never |= pattern_check(s, scalar_of(d), 0, need);
	protect_owned(s, inode, &w);
	/* A pinned object (an ancestor of a never place) is never removed or
	 * moved: its own entry, not its ancestors', says so. */
	if ((need & ACCESS_DELETE) && inode) {
		struct object_key k = { .ino = BPF_CORE_READ(inode, i_ino), .dev = BPF_CORE_READ(inode, i_sb, s_dev) };
		__u32 *bits = bpf_map_lookup_elem(&MAP_NEVER, &k);

		if (bits && (*bits & NEVER_PINNED))
			w.never |= ACCESS_DELETE;
	}
	return held_verdict(s, w.d, hook, &w, held);
}

static __always_inline int check_object(const struct session *s, struct dentry *d, __u32 need, __u32 hook)
{
	return check_object_held(s, d, need, hook, 0);
}

/* Whether session `session` was given `create` for the very name of `child`,
 * a new entry, in its parent directory: the directory's exact grant carries
 * ACCESS_NAMED_CREATE and the name is in MAP_CREATE_NAMES. A hidden name is
 * not made this way in a protected root either (misses_hidden_name). A name
 * that exists already (a rename over it: git's `index.lock` to `index`, an
 * editor's save) adds no name to the folder: the mark is enough, and the
 * replaced object's own check (`write`, HOOK_INODE_RENAME_OVER) follows. */
_Static_assert(__builtin_offsetof(struct create_name_key, ino) == __builtin_offsetof(struct grant_key, ino) &&
		       __builtin_offsetof(struct create_name_key, dev) == __builtin_offsetof(struct grant_key, dev) &&
		       __builtin_offsetof(struct create_name_key, name) >= sizeof(struct grant_key) &&
		       __builtin_offsetof(struct create_name_key, dev) - __builtin_offsetof(struct create_name_key, ino) ==
			       __builtin_offsetof(struct object_key, dev) &&
		       sizeof(struct object_key) == __builtin_offsetof(struct create_name_key, name) - __builtin_offsetof(struct create_name_key, ino),
	       "create_name_key starts with a grant_key and, from ino, an object_key");

static __noinline int named_create(__u64 session, __u64 child)
{
	struct dentry *d = (struct dentry *)child;
	struct inode *dir = BPF_CORE_READ(d, d_parent, d_inode);

	if (!dir)
		return 0;
	/* Without its scratch (an allocation that failed) the name is not granted. */
	struct create_name_key *k =
		bpf_task_storage_get(&MAP_CREATE_KEY, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);

	if (!k)
		return 0;
	__builtin_memset(k, 0, sizeof(*k));
	k->session = session;
	k->ino = BPF_CORE_READ(dir, i_ino);
	k->dev = BPF_CORE_READ(dir, i_sb, s_dev);
	/* The key's first fields are the directory's grant_key, and from `ino`
	 * on its object_key (same layout). */
	__u32 *bits = bpf_map_lookup_elem(&MAP_EXACT, k);

	if (!bits || !(*bits & ACCESS_NAMED_CREATE))
		return 0;
	if (BPF_CORE_READ(d, d_inode))
		return 1;
	long n = bpf_probe_read_kernel_str(k->name, sizeof(k->name), BPF_CORE_READ(d, d_name.name));

	if (n <= 1 || n >= (long)sizeof(k->name))
		return 0;
	if (k->name[0] == '.' && bpf_map_lookup_elem(&MAP_ROOTS, &k->ino))
		return 0;
	return bpf_map_lookup_elem(&MAP_CREATE_NAMES, k) != 0;
}

/* Check `create` on the directory that would hold `child` (a new name), with
 * the never entry of that name; `held` as for check_object_held. */
static __always_inline int check_create_held(const struct session *s, struct dentry *child, __u32 hook, __u32 *held)
{
	struct walk w;
	int err = reach_cgroup(s, child, ACCESS_CREATE) ?: shared_room(s->id, child);

	if (err)
		return err;
	walk_start(&w, s, (__u64)BPF_CORE_READ(child, d_parent), 0, ACCESS_CREATE, 0);
	w.child_name = (__u64)BPF_CORE_READ(child, d_name.name);
	w.mkdir = hook == HOOK_INODE_MKDIR;

	walk_up(&w);
	w.never |= pattern_check_child(s, child, ACCESS_CREATE);
	/* A new entry in a directory of the user's: gated by that owner. */
	protect_owned(s, BPF_CORE_READ(child, d_parent, d_inode), &w);
	/* Looked up only for what would be a miss. */
	if (w.protected && !(w.granted & ACCESS_CREATE) && !(w.never & ACCESS_CREATE) && named_create(s->id, scalar_of(child)))
		w.granted |= ACCESS_CREATE;
	err = held_verdict(s, scalar_of(child), hook, &w, held);
	if (!err)
		mark_hidden_entry(s->id, child);
	return err;
}

static __always_inline int check_create(const struct session *s, struct dentry *child, __u32 hook)
{
	return check_create_held(s, child, hook, 0);
}

/* Whether the opened object is kept more private than its folder
 * (kept_private), read now. A subprogram: its reads take no room on the
 * open's frame. `file` is the hook's own (BTF-typed) argument, so the reads
 * are plain loads, not probe-read helper calls. */
static __noinline int opened_private(struct file *file)
{
	struct dentry *d = file->f_path.dentry;
	struct inode *inode = d ? d->d_inode : 0;
	struct dentry *parent = d ? d->d_parent : 0;
	struct inode *dir = parent ? parent->d_inode : 0;

	return inode && dir && kept_private(inode->i_mode, dir->i_mode);
}

/* Check an open file: `read` (or `list` for a directory) and `write` as its
 * mode says, walked through its own mount. */
static __always_inline int check_file(const struct session *s, struct file *file, __u32 hook, int may_record_created,
				      __u32 *held)
{
	/* `file` is the hook's own (BTF-typed) argument: its fields are read
	 * directly, without a probe-read helper call each. */
	struct inode *inode = file->f_inode;
	struct dentry *d = file->f_path.dentry;
	fmode_t mode = file->f_mode;
	umode_t imode = inode ? inode->i_mode : 0;
	int dir = inode && (imode & S_IFMT) == S_IFDIR;
	__u32 need = 0;

	if (mode & (FMODE_READ | FMODE_EXEC))
		need |= dir ? ACCESS_LIST : ACCESS_READ;
	if (mode & FMODE_WRITE)
		need |= ACCESS_WRITE;
	if (!need) /* neither read nor write (ioctl-only opens): treat as read */
		need = dir ? ACCESS_LIST : ACCESS_READ;
	if (need & ACCESS_WRITE) {
		int err = reach_cgroup(s, file->f_path.dentry, need);

		if (err)
			return err;
	}

	struct inode *di = d ? d->d_inode : 0;
	__u32 zero = 0;
	struct pincer_state *st = bpf_map_lookup_elem(&MAP_STATE, &zero);
	int multi = inode && !dir && inode->__i_nlink > 1;
	/* A file this open created takes the full walk, which records the
	 * creator's grant below. */
	int created = may_record_created && (mode & FMODE_CREATED) && inode;
	struct walk w;

	/* Never patterns first: a match refuses whatever the caches say (the
	 * full walk starts with its bits). */
	if (d && (!st || (st->never_patterns & need))) {
		__u32 pat = pattern_of_object(s, d, scalar_of(file->f_path.mnt)) & need;

		if (pat) {
			walk_start(&w, s, scalar_of(d), scalar_of(file->f_path.mnt), need, multi);
			w.never = pat;
			goto walk;
		}
	}
	/* One lookup before any path work: the walk's first level finds the
	 * exact grant of the object the path names, and when no never-grantable
	 * entry exists anywhere (the state says so; no state entry: walk) a
	 * grant that covers `need` is the walk's whole verdict. */
	if (di && st && !st->never_objects && !st->never_names) {
		struct grant_key gk = { .session = s->id, .ino = di->i_ino, .dev = di->i_sb->s_dev };
		__u32 *bits = bpf_map_lookup_elem(&MAP_EXACT, &gk);

		if (bits && (*bits & need) == need)
			return 0;
	}
	/* An object kept more private than its folder takes the full walk too:
	 * the caches hold what reaches it from above, and its mode is read live
	 * (a chmod moves no stamp). */
	if (opened_private(file))
		goto full;
	if (d && !multi && !dir) {
		/* A file opened again: its cached verdict, if it still holds. */
		__u32 known = file_verdict(s, d, (__u64)file->f_path.mnt);

		if ((known & VERDICT_FOUND) && (known & need) == need)
			return 0;
	}
	if (d && !created && cached_allow(s, d, scalar_of(file->f_path.mnt), need, multi, &w))
		return 0;
full:
	walk_start(&w, s, scalar_of(d), scalar_of(file->f_path.mnt), need, multi);
walk:
	walk_up(&w);
	protect_owned(s, inode, &w);
	/* A walk that a grant satisfied stops before the root (w.protected
	 * unset): inside the session's scratch (its subtree grant is marked
	 * ACCESS_CREATED_BY_SESSION) the file is recorded too. */
	if (created && !(w.never & need) && !w.unknown &&
	    (w.protected || (w.granted & ACCESS_CREATED_BY_SESSION))) {
		/* inode_create already checked `create`: the creator may read,
		 * write and delete what it made, now and later, by an exact grant
		 * on the inode: a hard link it then makes (git's objects,
		 * rustc's incremental files) needs an exact grant, as every file
		 * with more than one link does. */
		struct grant_key gk = {
			.session = s->id,
			.ino = inode->i_ino,
			.dev = inode->i_sb->s_dev,
		};
		__u32 bits = ACCESS_READ | ACCESS_WRITE | ACCESS_DELETE | ACCESS_CREATED_BY_SESSION;
		__u32 *old = bpf_map_lookup_elem(&MAP_EXACT, &gk);

		if (old)
			bits |= *old;
		bpf_map_update_elem(&MAP_EXACT, &gk, &bits, BPF_ANY);
		return 0;
	}
	return held_verdict(s, w.d, hook, &w, held);
}

/* The session id of the current task, or 0 (for the reach block). */
static __always_inline __u64 current_session_id(void)
{
	struct session s;

	return current_session(&s) ? s.id : 0;
}


SEC("lsm/file_open")
int BPF_PROG(pincer_file_open, struct file *file, int ret)
{
	struct session s;

	if (ret)
		return ret;
	/* An O_CREAT open of what a session made in a shared place. */
	if (!current_session(&s))
		return shared_inbound(0, file);
	/* Writes to another process's /proc/PID files are reach, not files. */
	int reach = reach_file_open(s.id, file) ?: shared_inbound(s.id, file);

	if (reach)
		return reach;
	/* What the open made in a shared place is recorded as the session's. */
	if ((file->f_mode & FMODE_CREATED) && shared_mark(s.id, file->f_inode, file->f_path.dentry->d_parent->d_inode))
		return -EDQUOT;
	return check_file(&s, file, HOOK_FILE_OPEN, 1, 0);
}

/* Kernel functions of the held file_open (bpf_rcu_read_lock since 6.2,
 * bpf_get_file_xattr since 6.8, bpf_get_task_exe_file and bpf_put_file since
 * 6.12). Plain externs: the
 * loader writes each call's BTF id into the instruction (pincer-user's
 * kernel::kfunc), and on a kernel without them this program is refused and
 * the plain file_open attached instead. */
struct task_struct;
extern struct task_struct *bpf_task_from_pid(__s32 pid);
extern void bpf_task_release(struct task_struct *p);
extern struct file *bpf_get_task_exe_file(struct task_struct *task);
extern void bpf_put_file(struct file *file);
extern int bpf_get_file_xattr(struct file *file, const char *name__str, struct bpf_dynptr *value_p);
extern void bpf_rcu_read_lock(void);
extern void bpf_rcu_read_unlock(void);

/* The xattr the held thread reads (the kfunc reads `user.*` names only); a
 * thread whose hook keeps a lock reads the other name, so the daemon bounds
 * its wait by `[hold] locked_max_ms` from the moment it arrives. */
const volatile char HOLD_XATTR[] = "user.pincer.hold";
const volatile char HOLD_XATTR_LOCKED[] = "user.pincer.hold.locked";

/* A hold whose hook keeps a lock ended denied after `waited` ns: the session's
 * next such misses are denied at once, not held, for LOCKED_QUIET_FACTOR times
 * that (LOCKED_QUIET_MIN_MS to LOCKED_QUIET_MAX_MS), so a session cannot keep
 * the user's folders locked by one denied hold after another. */
static __always_inline void locked_quiet(const struct session *s, __u64 waited)
{
	struct session_value *v = bpf_map_lookup_elem(&MAP_SESSIONS, &s->id);
	__u64 pause = waited * LOCKED_QUIET_FACTOR;

	if (pause < (__u64)LOCKED_QUIET_MIN_MS * 1000000)
		pause = (__u64)LOCKED_QUIET_MIN_MS * 1000000;
	if (pause > (__u64)LOCKED_QUIET_MAX_MS * 1000000)
		pause = (__u64)LOCKED_QUIET_MAX_MS * 1000000;
	if (v)
		v->locked_quiet_until = bpf_ktime_get_ns() + pause;
}

/* Waits in the hold the miss just reported. The daemon's answer only ends the
 * wait, as do a dead daemon, a missing anchor or a FUSE error; what allows is
 * the grant the caller checks next. A function of its own: its dynptr's stack
 * slot ends with it (the verifier refuses a later write to a slot that held
 * one, which the caller's code could be given). */
static __noinline void hold_sleep(const struct session *s, int locked)
{
	__u32 anchor_slot = HOLD_SLOT_ANCHOR;
	__u32 *anchor = bpf_map_lookup_elem(&MAP_HOLD, &anchor_slot);
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	if (anchor && *anchor) {
		struct task_struct *t = bpf_task_from_pid(*anchor);

		if (t) {
			struct file *exe = bpf_get_task_exe_file(t);

			/* The answer's bytes are never read: any thread may land its
			 * bytes in this slot. */
			__u32 scratch_slot = HOLD_SLOT_SCRATCH;
			__u32 *scratch = bpf_map_lookup_elem(&MAP_HOLD, &scratch_slot);

			if (exe && scratch) {
				struct bpf_dynptr dp;

				bpf_dynptr_from_mem(scratch, sizeof(*scratch), 0, &dp);
				bpf_get_file_xattr(exe, locked ? (const char *)HOLD_XATTR_LOCKED : (const char *)HOLD_XATTR, &dp);
			}
			if (exe)
				bpf_put_file(exe);
			bpf_task_release(t);
		}
	}
	bpf_map_delete_elem(&MAP_HELD, &tid);
	hold_uncount(s, locked);
}

/* hold_sleep, then the object checked again: an exact grant of the missing
 * bits on the object the twin judged (the opened file, the object removed or
 * replaced) is what allows; the wait ended by anything else finds none. */
static __always_inline int hold_wait(const struct session *s, __u32 dev, __u64 ino, __u32 missing, int locked)
{
	__u64 began = bpf_ktime_get_ns();

	hold_sleep(s, locked);
	if (ino && (exact_bits(s->id, ino, dev) & missing) == missing)
		return 0;
	if (locked)
		locked_quiet(s, bpf_ktime_get_ns() - began);
	return -EACCES;
}

/* file_open that holds a plain miss until the daemon has decided it (sleepable;
 * attached instead of pincer_file_open where the kernel accepts it). */
SEC("lsm.s/file_open")
int BPF_PROG(pincer_file_open_held, struct file *file, int ret)
{
	struct session s;
	__u32 missing = 0;

	if (ret)
		return ret;
	if (!current_session(&s))
		return shared_inbound(0, file);
	int reach = reach_file_open(s.id, file) ?: shared_inbound(s.id, file);

	if (reach)
		return reach;
	if ((file->f_mode & FMODE_CREATED) && shared_mark(s.id, file->f_inode, file->f_path.dentry->d_parent->d_inode))
		return -EDQUOT;
	/* The check runs in an RCU read section, as the plain program does (the
	 * dentries it walks are RCU-protected); the wait comes after it. */
	bpf_rcu_read_lock();
	int err = check_file(&s, file, HOOK_FILE_OPEN, 1, &missing);

	bpf_rcu_read_unlock();
	if (!err || !missing)
		return err;
	struct inode *inode = file->f_inode;

	return inode ? hold_wait(&s, inode->i_sb->s_dev, inode->i_ino, missing, hook_locks(HOOK_FILE_OPEN)) : -EACCES;
}

/* Held changes of names (sleepable, attached instead of the plain programs
 * where the kernel accepts them). Their hooks run with the directory's lock
 * taken, so a hold keeps that one directory locked while the twin decides
 * (at most `[hold] max_ms`): other lookups of new names in it and listings
 * of it wait too. A rename between two directories also holds the
 * filesystem's rename lock, so it is never held: its miss is denied at once,
 * as on kernels without the held programs. */

/* check_object_held and, on a held miss, the wait; the grant looked for is
 * on `d`'s inode. */
static __always_inline int held_object(const struct session *s, struct dentry *d, __u32 need, __u32 hook,
				       int may_hold)
{
	__u32 missing = 0;

	bpf_rcu_read_lock();
	int err = check_object_held(s, d, need, hook, may_hold ? &missing : 0);

	bpf_rcu_read_unlock();
	if (!err || !missing)
		return err;
	struct inode *inode = BPF_CORE_READ(d, d_inode);

	return inode ? hold_wait(s, BPF_CORE_READ(inode, i_sb, s_dev), BPF_CORE_READ(inode, i_ino), missing, hook_locks(hook)) : -EACCES;
}

/* check_create_held and, on a held miss, the wait; the grant looked for is
 * `create` of the new name in the directory `dir` it goes into: a grant of
 * that name (named_create), or for a visible name `create` on the folder (a
 * hidden name is not made by a grant on its folder: misses_hidden_name). */
static __always_inline int held_create(const struct session *s, struct inode *dir, struct dentry *child, __u32 hook,
				       int may_hold)
{
	__u32 missing = 0;

	bpf_rcu_read_lock();
	int err = check_create_held(s, child, hook, may_hold ? &missing : 0);

	bpf_rcu_read_unlock();
	if (!err || !missing)
		return err;
	if (!dir)
		return -EACCES;
	__u64 began = bpf_ktime_get_ns();
	int locked = hook_locks(hook);

	hold_sleep(s, locked);
	__u32 bits = exact_bits(s->id, BPF_CORE_READ(dir, i_ino), BPF_CORE_READ(dir, i_sb, s_dev));

	if (((bits & missing) == missing && !hidden_name(BPF_CORE_READ(child, d_name.name))) ||
	    ((missing & ~ACCESS_CREATE) == 0 && named_create(s->id, scalar_of(child))))
		return 0;
	if (locked)
		locked_quiet(s, bpf_ktime_get_ns() - began);
	return -EACCES;
}

SEC("lsm.s/inode_create")
int BPF_PROG(pincer_inode_create_held, struct inode *dir, struct dentry *dentry, umode_t mode, int ret)
{
	struct session s;

	if (ret)
		return ret;
	return current_session(&s) ? reach_inode_create(s.id, dir) ?: held_create(&s, dir, dentry, HOOK_INODE_CREATE, 1) : 0;
}

/* mkdir's hold. The kernel does not let inode_mkdir sleep, but path_mkdir may
 * (on kernels built with CONFIG_SECURITY_PATH, as Debian's are): do_mkdirat
 * calls it just before vfs_mkdir, with the same directory locked, on the same
 * new name. This program holds a plain miss there until the daemon has
 * decided and refuses what stays ungranted; pincer_inode_mkdir, attached
 * beside it, still checks the access when vfs_mkdir runs. Directories made by
 * the kernel for a filesystem (overlayfs's work folders) take no path hook and
 * are only checked. */
SEC("lsm.s/path_mkdir")
int BPF_PROG(pincer_path_mkdir_held, const struct path *dir, struct dentry *dentry, umode_t mode, int ret)
{
	struct session s;

	if (ret)
		return ret;
	if (!current_session(&s))
		return 0;
	return held_create(&s, BPF_CORE_READ(dir, dentry, d_inode), dentry, HOOK_INODE_MKDIR, 1);
}

SEC("lsm.s/inode_unlink")
int BPF_PROG(pincer_inode_unlink_held, struct inode *dir, struct dentry *dentry, int ret)
{
	struct session s;

	if (ret)
		return ret;
	if (!current_session(&s))
		return 0;
	/* A POSIX queue of the user's (mq_unlink) is reach, not files. */
	int err = reach_inode_unlink(dentry);

	if (err)
		return err;
	err = held_object(&s, dentry, ACCESS_DELETE, HOOK_INODE_UNLINK, 1);
	return err ? err : moved_names(s.id, dentry, 0);
}

SEC("lsm.s/inode_rmdir")
int BPF_PROG(pincer_inode_rmdir_held, struct inode *dir, struct dentry *dentry, int ret)
{
	struct session s;

	if (ret)
		return ret;
	if (!current_session(&s))
		return 0;
	int err = held_object(&s, dentry, ACCESS_DELETE, HOOK_INODE_RMDIR, 1);

	return err ? err : moved_names(s.id, dentry, 0);
}

SEC("lsm.s/inode_symlink")
int BPF_PROG(pincer_inode_symlink_held, struct inode *dir, struct dentry *dentry, const char *old_name, int ret)
{
	struct session s;

	if (ret)
		return ret;
	if (!current_session(&s))
		return 0;
	int err = held_create(&s, dir, dentry, HOOK_INODE_SYMLINK, 1);

	if (err)
		return err;
	return users_folder_name(s.id, dentry) ? refuse_users_place(&s, dentry, HOOK_INODE_SYMLINK) : 0;
}

#define ATTR_MODE (1 << 0)

/* What a change of attributes needs: `write`, and a grant on the object
 * itself (NEED_EXACT) for a mode that takes every right from a folder's group
 * and others where it gave them some. What lies in such a folder is then no
 * more private than the folder (kept_private), so a 0600 database among 0755
 * documents would be reached by a grant above them once the documents' folder
 * is made 0700 in a 0700 home: only a grant on the folder allows that. */
static __always_inline __u32 setattr_need(struct dentry *d, struct iattr *attr)
{
	struct inode *inode = BPF_CORE_READ(d, d_inode);

	if (!(BPF_CORE_READ(attr, ia_valid) & ATTR_MODE) || !inode)
		return ACCESS_WRITE;
	umode_t now = BPF_CORE_READ(inode, i_mode), next = BPF_CORE_READ(attr, ia_mode);

	return (now & S_IFMT) == S_IFDIR && (now & 077) && !(next & 077) ? ACCESS_WRITE | NEED_EXACT : ACCESS_WRITE;
}

/* inode_setattr (the 6.8+ signature; the held programs need 6.12): a change of
 * size, mode, owner or times needs `write`. The file's own lock is taken, not
 * its directory's. */
SEC("lsm.s/inode_setattr")
int BPF_PROG(pincer_inode_setattr_held, struct mnt_idmap *idmap, struct dentry *dentry, struct iattr *attr, int ret)
{
	struct session s;

	if (ret)
		return ret;
	if (!BPF_CORE_READ(attr, ia_valid) || !current_session(&s))
		return 0;
	return reach_tty(s.id, dentry) ?: held_object(&s, dentry, setattr_need(dentry, attr), HOOK_INODE_SETATTR, 1);
}

/* The access bits the grants give `entry` (a dentry, existing or new) at its
 * place, its directory and name: subtree grants and open paths from the
 * directory up to the first root (none of the subtree grants for a hidden
 * name), with ACCESS_CREATED_BY_SESSION when the directory lies in the
 * session's scratch. With `hidden`, the bits a hidden entry inside `entry`
 * gets there (open paths and the scratch's grant only). The entry's own
 * grants are not counted: they move with it. */
static __noinline __u32 place_bits(struct walk *w, __u64 session, struct dentry *entry, __u32 hidden)
{
	if (!w || !entry)
		return 0;
	__builtin_memset(w, 0, sizeof(*w));
	w->session = session;
	w->d = scalar_of(BPF_CORE_READ(entry, d_parent));
	w->child_name = scalar_of(BPF_CORE_READ(entry, d_name.name));
	w->hidden = hidden;
	w->subtree_ok = 1;
	w->collect = 1;
	walk_up(w);
	return w->granted;
}

/* Whether a rename changes whether the entry is hidden (a subtree grant
 * reaches it under one name and not the other). */
static __always_inline int hiding_changes(struct dentry *old_dentry, struct dentry *new_dentry)
{
	return hidden_name(BPF_CORE_READ(old_dentry, d_name.name)) != hidden_name(BPF_CORE_READ(new_dentry, d_name.name));
}

/* A rename across directories may not widen what the session can do to what
 * it moves (as Landlock's REFER right): the grants of the new place must be
 * ones the old place gave, for a directory (everything in the moved tree gets
 * them) and for a file alike, except what the file's own exact grant already
 * gives it (the session's own files move freely); a directory does not move
 * into the session's scratch from elsewhere. And no directory leaves the
 * session's scratch: a tree assembled there (a repository with hooks and
 * config) would bring into the user's places names that no check saw. Refused
 * as never-grantable: no grant could make the move safe. So is a move that
 * is `taken` (takes_users_place: the hook asks it on every rename). */
static __always_inline int check_move(const struct session *s, struct dentry *old_dentry, struct dentry *new_dentry,
				      int taken)
{
	struct inode *inode = BPF_CORE_READ(old_dentry, d_inode);
	/* One walk for both places and the report: the hook's frame is the
	 * stack budget of the whole call chain. */
	struct walk w;

	if (!inode)
		return 0;
	if (!taken) {
		int dir = (BPF_CORE_READ(inode, i_mode) & S_IFMT) == S_IFDIR;
		__u32 from = place_bits(&w, s->id, old_dentry, 0);
		__u32 to = place_bits(&w, s->id, new_dentry, 0);
		/* Into the scratch is a gain for a directory: the patterns do not
		 * apply there, and the scratch goes when the session ends. */
		__u32 gain = to & ~from & (ACCESS_ALL_BITS | ACCESS_CREATED_BY_SESSION);

		/* A directory's hidden entries get only what reaches hidden entries
		 * (open paths, the scratch): compared on their own. */
		if (dir) {
			__u32 hidden_from = place_bits(&w, s->id, old_dentry, 1);

			gain |= place_bits(&w, s->id, new_dentry, 1) & ~hidden_from &
				(ACCESS_ALL_BITS | ACCESS_CREATED_BY_SESSION);
		}
		if (!dir)
			gain &= (ACCESS_READ | ACCESS_WRITE | ACCESS_DELETE) &
				~exact_bits(s->id, BPF_CORE_READ(inode, i_ino), BPF_CORE_READ(inode, i_sb, s_dev));
		if (!gain && !(dir && (from & ACCESS_CREATED_BY_SESSION) && !(to & ACCESS_CREATED_BY_SESSION)))
			return 0;
	}
	walk_start(&w, s, scalar_of(new_dentry), 0, ACCESS_CREATE, 0);
	w.never = ACCESS_CREATE;
	return verdict(s, scalar_of(new_dentry), HOOK_INODE_RENAME_TO, &w);
}

/* check_move for a hard link (always to a file): the new name may not give
 * the file read, write or delete beyond what its old name and its own exact
 * grant give. Refused as never-grantable. */
static __always_inline int check_link(const struct session *s, struct dentry *old_dentry, struct dentry *new_dentry)
{
	struct walk w;
	__u32 own = own_exact(s->id, old_dentry);
	__u32 from = place_bits(&w, s->id, old_dentry, 0);

	if (!(place_bits(&w, s->id, new_dentry, 0) & ~from & ~own & (ACCESS_READ | ACCESS_WRITE | ACCESS_DELETE)))
		return 0;
	/* verdict() on a never-grantable `create`, without its hold path. */
	walk_start(&w, s, scalar_of(new_dentry), 0, ACCESS_CREATE, 0);
	w.never = ACCESS_CREATE;
	w.flags |= EVENT_FLAG_NEVER;
	report(s, &w, scalar_of(new_dentry), ACCESS_CREATE, HOOK_INODE_LINK);
	return -EACCES;
}

/* pincer_inode_rename's checks, each held when both names are in one
 * directory. */
SEC("lsm.s/inode_rename")
int BPF_PROG(pincer_inode_rename_held, struct inode *old_dir, struct dentry *old_dentry, struct inode *new_dir,
	     struct dentry *new_dentry, int ret)
{
	struct session s;

	if (ret)
		return ret;
	if (!current_session(&s))
		return 0;
	int one_dir = old_dir == new_dir;
	int err = held_object(&s, old_dentry, ACCESS_DELETE, HOOK_INODE_RENAME_FROM, one_dir);

	if (err)
		return err;
	err = held_create(&s, new_dir, new_dentry, HOOK_INODE_RENAME_TO, one_dir);
	if (err)
		return err;
	if (!one_dir && moves_under_own_hidden(s.id, old_dentry, new_dentry))
		return refuse_users_place(&s, new_dentry, HOOK_INODE_RENAME_TO);
	int taken = takes_users_place(s.id, old_dentry, new_dentry);

	if (taken || !one_dir || hiding_changes(old_dentry, new_dentry)) {
		err = check_move(&s, old_dentry, new_dentry, taken);
		if (err)
			return err;
	}
	/* The names the rename changes (old_dentry is not needed after this:
	 * the hook's frame has no room to keep it). */
	err = moved_names(s.id, old_dentry, new_dentry);
	if (err)
		return err;
	struct inode *replaced = BPF_CORE_READ(new_dentry, d_inode);

	if (replaced) {
		__u16 mode = BPF_CORE_READ(replaced, i_mode);

		return held_object(&s, new_dentry, (mode & S_IFMT) == S_IFDIR ? ACCESS_DELETE : ACCESS_WRITE,
				   HOOK_INODE_RENAME_OVER, one_dir);
	}
	return 0;
}

/* An fd that arrives by SCM_RIGHTS or pidfd_getfd: no open happens in the
 * session, so the object is checked here as an open with the file's mode. */
SEC("lsm/file_receive")
int BPF_PROG(pincer_file_receive, struct file *file, int ret)
{
	struct session s;

	if (ret)
		return ret;
	if (!current_session(&s))
		return 0;
	return check_file(&s, file, HOOK_FILE_RECEIVE, 0, 0);
}

SEC("lsm/inode_create")
int BPF_PROG(pincer_inode_create, struct inode *dir, struct dentry *dentry, umode_t mode, int ret)
{
	struct session s;

	if (ret)
		return ret;
	return current_session(&s) ? reach_inode_create(s.id, dir) ?: check_create(&s, dentry, HOOK_INODE_CREATE) : 0;
}

SEC("lsm/inode_mkdir")
int BPF_PROG(pincer_inode_mkdir, struct inode *dir, struct dentry *dentry, umode_t mode, int ret)
{
	struct session s;

	if (ret)
		return ret;
	return current_session(&s) ? check_create(&s, dentry, HOOK_INODE_MKDIR) : 0;
}

/* A directory the session made itself: as a file it creates gets read and write
 * (check_file), the session may list, fill, change and remove the directory it
 * makes, so a tool that builds a tree (cargo's target/, mkdir -p) works with the
 * one `create` it was granted on the parent. A successful mkdir by a gated task
 * (inode_mkdir already checked `create` there) gives its session an exact grant
 * of every access on the new directory, marked ACCESS_CREATED_BY_SESSION: on the
 * directory, not beneath it. What the session then makes inside is its own by
 * the same rules (each file and directory its own exact grant); what another
 * process puts there later (the user's file in the session's folder) is the
 * user's, and needs a grant like any other of the user's objects. The never
 * patterns apply inside as anywhere (a `.git` the session makes in the user's
 * folder runs its hooks in the user's git); only the session's scratch, whose
 * subtree grant is marked ACCESS_CREATED_BY_SESSION, lifts them. When the map
 * is full the directory gets no entry (the session's accesses to it are then
 * decided as misses). vfs_mkdir's first argument is a user_namespace (6.1) or
 * mnt_idmap (6.3+) pointer; it is not read. */
static __always_inline int record_made(struct dentry *dentry, int ret, int dir)
{
	struct session s;

	if (ret || !current_session(&s))
		return 0;
	struct inode *inode = BPF_CORE_READ(dentry, d_inode);

	/* Made in a shared place and not recorded there: not the session's
	 * either (shared_room left it room, so only a race gets here). */
	if (!inode || shared_mark(s.id, inode, BPF_CORE_READ(dentry, d_parent, d_inode)))
		return 0;
	struct grant_key gk = {
		.session = s.id,
		.ino = BPF_CORE_READ(inode, i_ino),
		.dev = BPF_CORE_READ(inode, i_sb, s_dev),
	};
	__u32 bits = ACCESS_ALL_BITS | ACCESS_CREATED_BY_SESSION;

	/* Where a folder of the user's stood, or in the user's place remade: the
	 * user's place (no hidden name without a grant). */
	if (dir && (vacated_by(s.id, dentry) || in_users_place(s.id, BPF_CORE_READ(dentry, d_parent))))
		bits |= ACCESS_USERS_PLACE;

	bpf_map_update_elem(&MAP_EXACT, &gk, &bits, BPF_ANY);
	return 0;
}

/* What carry_reserved copies: the entries of `template` go to (dev, ino). */
struct carry_ctx {
	__u64 template;
	__u64 ino;
	__u32 dev;
	__u32 failed; /* an entry could not be written */
};

/* Copies an entry of the template, in the map it is in (the never names or
 * the carries), to the new directory's key. */
static long carry_entry(struct bpf_map *map, struct name_key *key, void *value, struct carry_ctx *c)
{
	if (key->dev != NEVER_CARRY_DEV || key->ino != c->template)
		return 0;
	struct name_key nk = *key;

	nk.dev = c->dev;
	nk.ino = c->ino;
	if (bpf_map_update_elem(map, &nk, value, BPF_ANY))
		c->failed = 1;
	return 0;
}

/* A directory made under a reserved name (NEVER_RESERVED) that has a carry,
 * by anyone (a session, or the user's own tools while sessions run): it gets
 * the template's names, as its own entries (the next reserved name with its
 * carry, or the never place with its bits), and then its mark with
 * NEVER_DIR_CARRIED, which lets walks pass the reserved name above it. Until
 * the mark is there (between the kernel showing the directory and this exit,
 * or for good if an entry could not be written) a walk from inside meets the
 * reserved name unmarked and refuses `create` (name_never). The policy
 * generation moves, so nothing cached in that window outlives it. */
static __always_inline void carry_reserved(struct inode *dir, struct dentry *dentry)
{
	__u32 zero = 0;
	struct pincer_state *st = bpf_map_lookup_elem(&MAP_STATE, &zero);

	if (st && !st->never_names)
		return;
	struct inode *inode = dentry->d_inode;

	if (!inode || !dir)
		return;
	struct name_key nk;

	__builtin_memset(&nk, 0, sizeof(nk));
	nk.ino = dir->i_ino;
	nk.dev = dir->i_sb->s_dev;
	long n = bpf_probe_read_kernel_str(nk.name, sizeof(nk.name), dentry->d_name.name);

	if (n <= 0 || n >= (long)sizeof(nk.name))
		return;
	__u64 *template = bpf_map_lookup_elem(&MAP_NEVER_CARRY, &nk);

	if (!template)
		return;
	struct carry_ctx c = { .template = *template, .ino = inode->i_ino, .dev = inode->i_sb->s_dev };

	bpf_for_each_map_elem(&MAP_NEVER_NAMES, carry_entry, &c, 0);
	bpf_for_each_map_elem(&MAP_NEVER_CARRY, carry_entry, &c, 0);
	if (c.failed)
		return;
	struct object_key ok = { .ino = c.ino, .dev = c.dev };
	__u32 *held = bpf_map_lookup_elem(&MAP_NEVER_DIRS, &ok);
	__u32 mark = (held ? *held : 0) | NEVER_DIR_CARRIED;

	bpf_map_update_elem(&MAP_NEVER_DIRS, &ok, &mark, BPF_ANY);
	struct pincer_generation *g = bpf_map_lookup_elem(&MAP_GENERATION, &zero);

	if (g)
		__sync_fetch_and_add(&g->policy, 1);
}

SEC("fexit/vfs_mkdir")
int BPF_PROG(pincer_vfs_mkdir, void *idmap, struct inode *dir, struct dentry *dentry, umode_t mode, int ret)
{
	/* The template's names first: the session's grant on what it made
	 * (record_made) comes only once they are there. */
	if (!ret)
		carry_reserved(dir, dentry);
	return record_made(dentry, ret, 1);
}

/* A symlink, FIFO, device node or bound Unix socket the session made is its
 * own the same way (inode_symlink and inode_mknod checked `create`): it may
 * remove or rename what it made, open its FIFO, and nothing more. */
SEC("fexit/vfs_symlink")
int BPF_PROG(pincer_vfs_symlink, void *idmap, struct inode *dir, struct dentry *dentry, const char *oldname, int ret)
{
	return record_made(dentry, ret, 0);
}

SEC("fexit/vfs_mknod")
int BPF_PROG(pincer_vfs_mknod, void *idmap, struct inode *dir, struct dentry *dentry, umode_t mode, dev_t dev, int ret)
{
	return record_made(dentry, ret, 0);
}

/* What a session moves or links into a shared place is recorded as made
 * there, as what it creates there is (shared_mark; the new name's check,
 * shared_room, left it room). After the rename a dentry stands at its new
 * name; an exchange moved both. */
SEC("fexit/vfs_rename")
int BPF_PROG(pincer_vfs_rename, struct renamedata *rd, int ret)
{
	struct session s;

	if (ret || !current_session(&s))
		return 0;
	struct dentry *moved = BPF_CORE_READ(rd, old_dentry);

	shared_mark(s.id, BPF_CORE_READ(moved, d_inode), BPF_CORE_READ(moved, d_parent, d_inode));
	if (BPF_CORE_READ(rd, flags) & RENAME_EXCHANGE) {
		struct dentry *other = BPF_CORE_READ(rd, new_dentry);

		shared_mark(s.id, BPF_CORE_READ(other, d_inode), BPF_CORE_READ(other, d_parent, d_inode));
	}
	return 0;
}

SEC("fexit/vfs_link")
int BPF_PROG(pincer_vfs_link, struct dentry *old_dentry, void *idmap, struct inode *dir, struct dentry *new_dentry,
	     void *delegated, int ret)
{
	struct session s;

	if (ret || !current_session(&s))
		return 0;
	shared_mark(s.id, BPF_CORE_READ(old_dentry, d_inode), dir);
	return 0;
}

/* FIFOs, character and block devices, and Unix sockets bound to a path (the
 * socket inode is made through vfs_mknod). */
SEC("lsm/inode_mknod")
int BPF_PROG(pincer_inode_mknod, struct inode *dir, struct dentry *dentry, umode_t mode, dev_t dev, int ret)
{
	struct session s;

	if (ret)
		return ret;
	return current_session(&s) ? check_create(&s, dentry, HOOK_INODE_MKNOD) : 0;
}

SEC("lsm/inode_symlink")
int BPF_PROG(pincer_inode_symlink, struct inode *dir, struct dentry *dentry, const char *old_name, int ret)
{
	struct session s;

	if (ret)
		return ret;
	if (!current_session(&s))
		return 0;
	int err = check_create(&s, dentry, HOOK_INODE_SYMLINK);

	if (err)
		return err;
	return users_folder_name(s.id, dentry) ? refuse_users_place(&s, dentry, HOOK_INODE_SYMLINK) : 0;
}

SEC("lsm/inode_link")
int BPF_PROG(pincer_inode_link, struct dentry *old_dentry, struct inode *dir, struct dentry *new_dentry,
	     int ret)
{
	struct session s;

	if (ret)
		return ret;
	if (!current_session(&s))
		return 0;
	int err = check_create(&s, new_dentry, HOOK_INODE_LINK);

	if (err)
		return err;
	/* A new name for an object is a new way to reach it: the session must
	 * already be able to read it by grant, and the new name may not reach
	 * it with more than the old one does (as for a move). */
	err = check_object(&s, old_dentry, ACCESS_READ, HOOK_INODE_LINK_SOURCE);
	if (err)
		return err;
	return check_link(&s, old_dentry, new_dentry);
}

SEC("lsm/inode_unlink")
int BPF_PROG(pincer_inode_unlink, struct inode *dir, struct dentry *dentry, int ret)
{
	struct session s;

	if (ret)
		return ret;
	if (!current_session(&s))
		return 0;
	/* A POSIX queue of the user's (mq_unlink) is reach, not files. */
	int err = reach_inode_unlink(dentry);

	if (err)
		return err;
	err = check_object(&s, dentry, ACCESS_DELETE, HOOK_INODE_UNLINK);
	return err ? err : moved_names(s.id, dentry, 0);
}

SEC("lsm/inode_rmdir")
int BPF_PROG(pincer_inode_rmdir, struct inode *dir, struct dentry *dentry, int ret)
{
	struct session s;

	if (ret)
		return ret;
	if (!current_session(&s))
		return 0;
	int err = check_object(&s, dentry, ACCESS_DELETE, HOOK_INODE_RMDIR);

	return err ? err : moved_names(s.id, dentry, 0);
}

/* RENAME_EXCHANGE reaches this hook twice, with the sides swapped, so both
 * objects are checked. A file renamed over another replaces that file's content,
 * as editors and agents save (write a temporary file, rename it over the old
 * one): the file replaced needs `write`; a directory replaced needs `delete`. */
SEC("lsm/inode_rename")
int BPF_PROG(pincer_inode_rename, struct inode *old_dir, struct dentry *old_dentry, struct inode *new_dir,
	     struct dentry *new_dentry, int ret)
{
	struct session s;

	if (ret)
		return ret;
	if (!current_session(&s))
		return 0;
	int err = check_object(&s, old_dentry, ACCESS_DELETE, HOOK_INODE_RENAME_FROM);

	if (err)
		return err;
	err = check_create(&s, new_dentry, HOOK_INODE_RENAME_TO);
	if (err)
		return err;
	if (old_dir != new_dir && moves_under_own_hidden(s.id, old_dentry, new_dentry))
		return refuse_users_place(&s, new_dentry, HOOK_INODE_RENAME_TO);
	int taken = takes_users_place(s.id, old_dentry, new_dentry);

	if (taken || old_dir != new_dir || hiding_changes(old_dentry, new_dentry)) {
		err = check_move(&s, old_dentry, new_dentry, taken);
		if (err)
			return err;
	}
	/* The names the rename changes (old_dentry is not needed after this:
	 * the hook's frame has no room to keep it). */
	err = moved_names(s.id, old_dentry, new_dentry);
	if (err)
		return err;
	struct inode *replaced = BPF_CORE_READ(new_dentry, d_inode);

	if (replaced) {
		__u16 mode = BPF_CORE_READ(replaced, i_mode);

		return check_object(&s, new_dentry, (mode & S_IFMT) == S_IFDIR ? ACCESS_DELETE : ACCESS_WRITE,
				    HOOK_INODE_RENAME_OVER);
	}
	return 0;
}

/* Any attribute change (size, mode, owner, times) needs `write`. */
static __always_inline int check_setattr(struct dentry *dentry, struct iattr *attr)
{
	struct session s;

	if (!BPF_CORE_READ(attr, ia_valid))
		return 0;
	if (!current_session(&s))
		return 0;
	return reach_tty(s.id, dentry) ?: check_object(&s, dentry, setattr_need(dentry, attr), HOOK_INODE_SETATTR);
}

/* inode_setattr before Linux 6.8: (dentry, attr). */
SEC("lsm/inode_setattr")
int BPF_PROG(pincer_inode_setattr, struct dentry *dentry, struct iattr *attr, int ret)
{
	if (ret)
		return ret;
	return check_setattr(dentry, attr);
}

/* inode_setattr since Linux 6.8: (idmap, dentry, attr). The loader tries this
 * one first and falls back to the one above. */
SEC("lsm/inode_setattr")
int BPF_PROG(pincer_inode_setattr_idmap, struct mnt_idmap *idmap, struct dentry *dentry, struct iattr *attr,
	     int ret)
{
	if (ret)
		return ret;
	return check_setattr(dentry, attr);
}

static __always_inline int check_metadata(struct dentry *dentry, __u32 hook)
{
	struct session s;

	if (!current_session(&s))
		return 0;
	return reach_tty(s.id, dentry) ?: check_object(&s, dentry, ACCESS_WRITE, hook);
}

/* The first argument is a user_namespace (6.1) or a mnt_idmap (6.3+); the
 * dentry is the second on both, so one program serves both kernels. */
SEC("lsm/inode_setxattr")
int BPF_PROG(pincer_inode_setxattr, void *idmap, struct dentry *dentry, const char *name, const void *value,
	     __u64 size, int flags, int ret)
{
	if (ret)
		return ret;
	return check_metadata(dentry, HOOK_INODE_SETXATTR);
}

SEC("lsm/inode_removexattr")
int BPF_PROG(pincer_inode_removexattr, void *idmap, struct dentry *dentry, const char *name, int ret)
{
	if (ret)
		return ret;
	return check_metadata(dentry, HOOK_INODE_REMOVEXATTR);
}

/* Linux 6.2+: POSIX ACLs are set and removed through these, not the xattr hooks. */
SEC("lsm/inode_set_acl")
int BPF_PROG(pincer_inode_set_acl, struct mnt_idmap *idmap, struct dentry *dentry, const char *acl_name,
	     struct posix_acl *kacl, int ret)
{
	if (ret)
		return ret;
	return check_metadata(dentry, HOOK_INODE_SET_ACL);
}

SEC("lsm/inode_remove_acl")
int BPF_PROG(pincer_inode_remove_acl, struct mnt_idmap *idmap, struct dentry *dentry, const char *acl_name,
	     int ret)
{
	if (ret)
		return ret;
	return check_metadata(dentry, HOOK_INODE_REMOVE_ACL);
}

static __always_inline int reach_setown_ioctl(struct file *file, unsigned int cmd, unsigned long arg);

/* Terminal injection is refused in every mode: no grant can allow it. The
 * filesystem ioctls that change the object itself need `write`, whatever mode
 * the file was opened in (the kernel asks only for its owner, and a read-only
 * descriptor is enough): its inode flags (append-only, immutable, no-dump,
 * project id...), its generation number, fs-verity (which makes the file
 * read-only for good) and an encryption policy (on an empty directory: every
 * file made in it later is encrypted with a key the session chose). The owner
 * of a file's signals (FIOSETOWN, SIOCSPGRP), and turning them on (FIOASYNC),
 * are reach checks (reach_setown_ioctl). */
static __always_inline int changes_the_object(unsigned int cmd)
{
	return cmd == FS_IOC_SETFLAGS || cmd == FS_IOC32_SETFLAGS || cmd == FS_IOC_FSSETXATTR ||
	       cmd == FS_IOC_SETVERSION || cmd == FS_IOC32_SETVERSION || cmd == FS_IOC_ENABLE_VERITY ||
	       cmd == FS_IOC_SET_ENCRYPTION_POLICY;
}

static __always_inline int check_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct session s;
	int err = reach_setown_ioctl(file, cmd, arg);

	if (err)
		return err;

	if (changes_the_object(cmd))
		return current_session(&s) ? check_object(&s, file->f_path.dentry, ACCESS_WRITE, HOOK_FILE_IOCTL) : 0;
	if (cmd != TIOCSTI && cmd != TIOCLINUX)
		return 0;
	if (!current_session(&s))
		return 0;
	struct walk w = { .mnt = (__u64)BPF_CORE_READ(file, f_path.mnt), .flags = EVENT_FLAG_NEVER };

	report(&s, &w, (__u64)BPF_CORE_READ(file, f_path.dentry), ACCESS_WRITE, HOOK_FILE_IOCTL);
	return -EPERM;
}

SEC("lsm/file_ioctl")
int BPF_PROG(pincer_file_ioctl, struct file *file, unsigned int cmd, unsigned long arg, int ret)
{
	if (ret)
		return ret;
	return check_ioctl(file, cmd, arg);
}

/* Linux 6.8+: 32-bit compat ioctls no longer pass file_ioctl. */
SEC("lsm/file_ioctl_compat")
int BPF_PROG(pincer_file_ioctl_compat, struct file *file, unsigned int cmd, unsigned long arg, int ret)
{
	if (ret)
		return ret;
	return check_ioctl(file, cmd, arg);
}

/* A lock or a lease acts on the user's other processes (their writer waits,
 * their lease breaks), and a read-only descriptor is enough for a read lock,
 * a shared flock() or a read lease: taking one needs `write` on the object,
 * whatever mode the file was opened in (POSIX, OFD and flock locks and leases
 * all pass this hook). A file opened for writing passed that check at open;
 * releasing a lock is always allowed. */
SEC("lsm/file_lock")
int BPF_PROG(pincer_file_lock, struct file *file, unsigned int cmd, int ret)
{
	struct session s;

	if (ret)
		return ret;
	if (cmd == F_UNLCK || (file->f_mode & FMODE_WRITE) || !current_session(&s))
		return 0;
	return reach_tty(s.id, file->f_path.dentry) ?: check_object(&s, file->f_path.dentry, ACCESS_WRITE, HOOK_FILE_LOCK);
}

/* A watch (inotify, fanotify, dnotify) tells when an object is read, written
 * or changed, and names the entries of a directory as they come and go: it
 * needs `read` (a directory: `list`) like an open. */
SEC("lsm/path_notify")
int BPF_PROG(pincer_path_notify, const struct path *path, __u64 mask, unsigned int obj_type, int ret)
{
	struct session s;

	if (ret)
		return ret;
	if (!current_session(&s))
		return 0;
	struct dentry *d = BPF_CORE_READ(path, dentry);
	struct inode *inode = BPF_CORE_READ(d, d_inode);
	__u32 need = inode && (BPF_CORE_READ(inode, i_mode) & S_IFMT) == S_IFDIR ? ACCESS_LIST : ACCESS_READ;

	return reach_tty(s.id, d) ?: check_object(&s, d, need, HOOK_PATH_NOTIFY) ?: watches_share(s.id);
}

/* 1 when the walk cache shows that `d` (reached through `mnt`) is not
 * never-readable: a file's cached verdict (an open's, or an earlier stat's),
 * else the never bits of its directory's segment (from the directory to the
 * top, computed and cached as file_open's are when missing), with a file's
 * own entries and its name in the directory; 0 when the cache cannot tell
 * (the full walk then decides and reports). `ls -l` of a directory costs one
 * walk for the directory, not one per entry. A file that has cache slots (an
 * open or a walk made them) keeps the never bits as its verdict, so a stat
 * again (`git status`, a build's checks) costs one lookup of its own; one that
 * has none gets none from a stat (no allocation for each file an `ls -lR`
 * passes): its own never entry is looked up directly. Mirrors cache_decide
 * for the never bits alone: the grants do not matter here. */
static __always_inline int cached_not_never_read(const struct session *s, struct dentry *d, struct vfsmount *m,
						  struct walk *w)
{
	/* The verdict compares the mount as the hook passed it; the segment
	 * and the walk keep it as a scalar, converted only on their way. */
	__u32 known = file_verdict(s, d, (__u64)m);

	if (known & VERDICT_NEVER_FOUND)
		return !((known >> VERDICT_NEVER_SHIFT) & ACCESS_READ);
	__u64 mnt = scalar_of(m);

	if (!cached_segment(s, d, mnt, 0, w))
		return 0;
	struct inode *inode = d->d_inode;
	struct inode *dir = segment_dir(d);

	if (!inode || !dir)
		return 0;
	__u32 never = w->never;

	if (dir != inode) {
		if (w->levels >= MAX_WALK_DEPTH)
			return 0;
		if (w->names_here)
			never |= never_name_bits(dir->i_ino, dir->i_sb->s_dev, scalar_of(d->d_name.name));
		if (known & VERDICT_NO_SLOT) {
			struct object_key ok = { .ino = inode->i_ino, .dev = inode->i_sb->s_dev };
			__u32 *own = bpf_map_lookup_elem(&MAP_NEVER, &ok);

			return !((never | (own ? *own : 0)) & ACCESS_READ);
		}
		__u32 own = file_entries(s, inode, w->stamp_policy, w->stamp_rename, w->stamp_mount);

		if (!own)
			return 0;
		never |= own & 0xff;
		verdict_put(s, d, w, (never & ACCESS_ALL_BITS) << 8, SLOT_NEVER_KNOWN);
	}
	return !(never & ACCESS_READ);
}

/* A read of an object's metadata where its read is never-grantable: refused and
 * reported with `hook` (the dentry's mount, where the hook has one, lets the
 * walk cross mounts). `cached` and `cached_mnt`: the object and its mount as
 * the hook's pointers, whose walk cache may answer first (`dentry` and `mnt`
 * are then taken from them, only if the walk must run); 0: the walk, from
 * `dentry` and `mnt`. */
static __always_inline int never_read_of(struct dentry *cached, struct vfsmount *cached_mnt, __u64 dentry, __u64 mnt,
					 __u32 hook)
{
	struct session s;
	__u32 zero = 0;

	if (!current_session(&s))
		return 0;
	struct pincer_state *st = bpf_map_lookup_elem(&MAP_STATE, &zero);

	if (st && !st->never_objects && !st->never_names)
		return 0;
	struct walk w;

	if (cached) {
		if (cached_not_never_read(&s, cached, cached_mnt, &w))
			return 0;
		dentry = scalar_of(cached);
		mnt = scalar_of(cached_mnt);
	}
	walk_start(&w, &s, dentry, mnt, ACCESS_READ, 0);
	w.exact_ok = 0;
	w.subtree_ok = 0;
	walk_up(&w);
	if (w.never & ACCESS_READ) {
		w.flags |= EVENT_FLAG_NEVER;
		report(&s, &w, w.d, ACCESS_READ, hook);
		return -EACCES;
	}
	return 0;
}

static __always_inline int never_read(__u64 dentry, __u64 mnt, __u32 hook)
{
	return never_read_of(0, 0, dentry, mnt, hook);
}

/* stat of a never-grantable object: its size, times and owner tell what a
 * secret holds and when it changes, so an object no grant may read cannot be
 * looked at either. Everything else stays visible (listing a directory shows
 * its names anyway). Only never-grantable entries are looked up: with none
 * configured, a stat costs the session lookup and one array read; with some,
 * the walk cache answers for the entries of a directory already walked. */
SEC("lsm/inode_getattr")
int BPF_PROG(pincer_inode_getattr, const struct path *path, int ret)
{
	if (ret)
		return ret;
	struct dentry *d = path->dentry;

	return never_read_of(d, path->mnt, 0, 0, HOOK_INODE_GETATTR);
}

/* The other reads of metadata: an extended attribute, the list of their names,
 * a symlink's target. Same signatures on 6.1 and 6.12. */
SEC("lsm/inode_getxattr")
int BPF_PROG(pincer_inode_getxattr, struct dentry *dentry, const char *name, int ret)
{
	if (ret)
		return ret;
	return never_read((__u64)dentry, 0, HOOK_INODE_GETXATTR);
}

SEC("lsm/inode_listxattr")
int BPF_PROG(pincer_inode_listxattr, struct dentry *dentry, int ret)
{
	if (ret)
		return ret;
	return never_read((__u64)dentry, 0, HOOK_INODE_LISTXATTR);
}

SEC("lsm/inode_readlink")
int BPF_PROG(pincer_inode_readlink, struct dentry *dentry, int ret)
{
	if (ret)
		return ret;
	return never_read((__u64)dentry, 0, HOOK_INODE_READLINK);
}

SEC("lsm/userns_create")
int BPF_PROG(pincer_userns_create, const struct cred *cred, int ret)
{
	struct session s;

	if (ret)
		return ret;
	if (!current_session(&s) || (s.flags & SESSION_FLAG_ALLOW_USERNS))
		return 0;
	struct walk w = {};
	struct miss_event *e = reserve(&s, 0, HOOK_USERNS_CREATE, &w);

	if (e)
		bpf_ringbuf_submit(e, 0);
	return -EPERM;
}

struct freed {
	__u64 ino;
	__u32 dev;
};

static long forget_grants(struct bpf_map *map, struct session_key *key, struct session_value *value,
			  struct freed *f)
{
	struct grant_key gk = { .session = key->cgroup_id, .ino = f->ino, .dev = f->dev };

	bpf_map_delete_elem(&MAP_EXACT, &gk);
	bpf_map_delete_elem(&MAP_SUBTREE, &gk);
	return 0;
}

/* Forgets an entry (a never name or a carry) keyed by the freed directory. */
static long forget_name_of_dir(struct bpf_map *map, struct name_key *key, void *value, struct freed *f)
{
	if (key->ino == f->ino && key->dev == f->dev)
		bpf_map_delete_elem(map, key);
	return 0;
}

/* An inode that is gone for good takes every entry keyed by its number with
 * it, so a later object that reuses the number (ext2/ext4 reuse freed numbers;
 * a new tmpfs may get the same device number) starts with no grant. Gone for
 * good: no links left, or its filesystem is being unmounted (the kernel clears
 * s_root before it frees the filesystem's dentries and inodes, and SB_ACTIVE
 * before the rest). An inode evicted from the cache while it still has links
 * and its filesystem stays (memory pressure, drop_caches) keeps its entries:
 * its object and number stay, and a never entry lost there would let the
 * object through. (The inode hash cannot tell the two apart: evict() takes
 * the inode out of the hash before it frees it.) What an unmount does not
 * free again (an inode evicted earlier) goes with the filesystem
 * (pincer_sb_free_security, which runs later, after the unmount returns, on
 * newer kernels). */
SEC("lsm/inode_free_security")
int BPF_PROG(pincer_inode_free_security, struct inode *inode)
{
	struct super_block *sb = BPF_CORE_READ(inode, i_sb);

	if (!sb)
		return 0;
	reach_inode_free(inode, sb);
	if (BPF_CORE_READ(inode, __i_nlink) && BPF_CORE_READ(sb, s_root) && (BPF_CORE_READ(sb, s_flags) & SB_ACTIVE))
		return 0;
	struct freed f = { .ino = BPF_CORE_READ(inode, i_ino), .dev = BPF_CORE_READ(sb, s_dev) };
	struct object_key ok = { .ino = f.ino, .dev = f.dev };

	bpf_map_delete_elem(&MAP_OPEN, &ok);
	bpf_map_delete_elem(&MAP_NEVER, &ok);
	bpf_map_delete_elem(&MAP_ROOTS, &ok);
	shared_forget(&ok);
	bpf_for_each_map_elem(&MAP_SESSIONS, forget_grants, &f, 0);
	/* A directory made under a reserved name takes the names it was given
	 * (carry_reserved) with it. */
	__u32 *mark = bpf_map_lookup_elem(&MAP_NEVER_DIRS, &ok);

	if (mark && (*mark & NEVER_DIR_CARRIED)) {
		bpf_for_each_map_elem(&MAP_NEVER_NAMES, forget_name_of_dir, &f, 0);
		bpf_for_each_map_elem(&MAP_NEVER_CARRY, forget_name_of_dir, &f, 0);
		bpf_map_delete_elem(&MAP_NEVER_DIRS, &ok);
	}
	return 0;
}

static long forget_object_of_dev(struct bpf_map *map, struct object_key *key, __u32 *value, __u32 *dev)
{
	if (key->dev == *dev)
		bpf_map_delete_elem(map, key);
	return 0;
}

static long forget_grant_of_dev(struct bpf_map *map, struct grant_key *key, __u32 *value, __u32 *dev)
{
	if (key->dev == *dev)
		bpf_map_delete_elem(map, key);
	return 0;
}

static long forget_name_of_dev(struct bpf_map *map, struct name_key *key, void *value, __u32 *dev)
{
	if (key->dev == *dev)
		bpf_map_delete_elem(map, key);
	return 0;
}

/* A filesystem that goes away takes every entry of its device with it. */
SEC("lsm/sb_free_security")
int BPF_PROG(pincer_sb_free_security, struct super_block *sb)
{
	__u32 dev = BPF_CORE_READ(sb, s_dev);

	bpf_for_each_map_elem(&MAP_OPEN, forget_object_of_dev, &dev, 0);
	bpf_for_each_map_elem(&MAP_NEVER, forget_object_of_dev, &dev, 0);
	bpf_for_each_map_elem(&MAP_NEVER_DIRS, forget_object_of_dev, &dev, 0);
	bpf_for_each_map_elem(&MAP_ROOTS, forget_object_of_dev, &dev, 0);
	bpf_for_each_map_elem(&MAP_NEVER_NAMES, forget_name_of_dev, &dev, 0);
	bpf_for_each_map_elem(&MAP_NEVER_CARRY, forget_name_of_dev, &dev, 0);
	bpf_for_each_map_elem(&MAP_EXACT, forget_grant_of_dev, &dev, 0);
	bpf_for_each_map_elem(&MAP_SUBTREE, forget_grant_of_dev, &dev, 0);
	return 0;
}

#include "reach.bpf.c"
