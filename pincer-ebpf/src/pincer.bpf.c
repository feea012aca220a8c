// SPDX-License-Identifier: GPL-2.0
/* Pincer BPF LSM program.
 *
 * A task is gated when its cgroup v2, or one of its ancestors, is a registered
 * session. For a gated task every file open, creation, deletion, rename, link
 * and truncate of an object that lies under a registered protected root needs
 * a grant keyed by object: an exact grant (session, dev, ino) or a subtree
 * grant (session, dev, dir ino) found on the walk up d_parent. A miss is denied
 * with -EACCES and reported on the ring buffer. Objects outside every root and
 * tasks outside every session are left alone. Every hook returns an earlier
 * LSM's non-zero verdict unchanged. Needs kernel 5.11+ (BPF LSM, ring buffer,
 * ancestor cgroup ids for tracing programs). */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "vfs.h"
#include "pincer.h"

#define EACCES 13
#define S_IFMT 00170000
#define S_IFDIR 0040000
#define S_IFREG 0100000
#define FMODE_READ 0x1
#define FMODE_WRITE 0x2
#define FMODE_EXEC 0x20
#define FMODE_CREATED 0x100000
#define ATTR_SIZE (1u << 3)

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct session_key);
	__type(value, struct session_value);
} pincer_sessions SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct root_key);
	__type(value, __u32);
} pincer_roots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct grant_key);
	__type(value, __u32);
} pincer_exact SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct grant_key);
	__type(value, __u32);
} pincer_subtree SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} pincer_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} pincer_drops SEC(".maps");

/* Outcome of a walk up the dentries from one object. */
struct walk {
	__u64 root_ino;
	__u32 root_dev;
	__u32 granted;   /* access bits found on the way */
	__u32 protected; /* a root was found, or the bound ran out */
	__u32 flags;     /* EVENT_FLAG_* */
};

/* The registered session the current task belongs to, or 0. */
static __always_inline __u64 current_session(void)
{
	struct session_key key = { .cgroup_id = bpf_get_current_cgroup_id() };
	struct session_value *v = bpf_map_lookup_elem(&pincer_sessions, &key);

	if (v && v->active)
		return key.cgroup_id;
	for (int level = 1; level < MAX_CGROUP_LEVELS; level++) {
		__u64 id = bpf_get_current_ancestor_cgroup_id(level);

		if (!id || id == key.cgroup_id)
			break;
		struct session_key k = { .cgroup_id = id };

		v = bpf_map_lookup_elem(&pincer_sessions, &k);
		if (v && v->active)
			return id;
	}
	return 0;
}

static __always_inline int reach_file_open(__u64 session, struct file *file);

/* Walk from `d` up d_parent. Exact grants count for `d` itself when
 * `exact_ok`; subtree grants count on every level (including `d`) when
 * `subtree_ok`. Stops early once `need` is covered, at a protected root, or at
 * the filesystem root (unprotected). Running out of bound counts as
 * protected, so the caller denies. */
static __always_inline void walk_up(__u64 session, struct dentry *d, int exact_ok, int subtree_ok,
				    __u32 need, struct walk *w)
{
	struct grant_key gk = { .session = session };
	struct root_key rk = {};

	for (int i = 0; i < MAX_WALK_DEPTH; i++) {
		if (!d)
			return;
		struct inode *inode = d->d_inode;

		if (inode) {
			__u64 ino = inode->i_ino;
			__u32 dev = inode->i_sb->s_dev;
			__u32 *bits;

			gk.ino = ino;
			gk.dev = dev;
			if (i == 0 && exact_ok) {
				bits = bpf_map_lookup_elem(&pincer_exact, &gk);
				if (bits)
					w->granted |= *bits;
			}
			if (subtree_ok) {
				bits = bpf_map_lookup_elem(&pincer_subtree, &gk);
				if (bits)
					w->granted |= *bits;
			}
			if ((w->granted & need) == need)
				return;
			rk.ino = ino;
			rk.dev = dev;
			if (bpf_map_lookup_elem(&pincer_roots, &rk)) {
				w->protected = 1;
				w->root_ino = ino;
				w->root_dev = dev;
				return;
			}
		}
		struct dentry *parent = d->d_parent;

		if (parent == d)
			return;
		d = parent;
	}
	w->protected = 1;
	w->flags |= EVENT_FLAG_WALK_EXHAUSTED;
}

static __always_inline int allowed(const struct walk *w, __u32 need)
{
	return !w->protected || (w->granted & need) == need;
}

static __always_inline void count_drop(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&pincer_drops, &zero);

	if (n)
		__sync_fetch_and_add(n, 1);
}

/* Push a miss: `obj` is the object (for creations, the new negative dentry). */
static __always_inline void report(__u64 session, struct dentry *obj, __u32 missing, __u32 hook,
				   const struct walk *w)
{
	struct miss_event *e = bpf_ringbuf_reserve(&pincer_events, sizeof(*e), 0);

	if (!e) {
		count_drop();
		return;
	}
	__u64 pid_tgid = bpf_get_current_pid_tgid();

	e->session = session;
	e->pid = pid_tgid >> 32;
	e->uid = (__u32)bpf_get_current_uid_gid();
	e->access = missing;
	e->hook = hook;
	e->flags = w->flags;
	e->root_ino = w->root_ino;
	e->root_dev = w->root_dev;
	e->_pad = 0;
	e->ino = 0;
	e->dev = 0;
	e->parent_ino = 0;
	e->parent_dev = 0;
	e->name[0] = 0;
	e->path[0] = 0;

	struct inode *inode = obj->d_inode;

	if (inode) {
		e->ino = inode->i_ino;
		e->dev = inode->i_sb->s_dev;
	}
	struct dentry *parent = obj->d_parent;

	if (parent && parent != obj) {
		struct inode *pi = parent->d_inode;

		if (pi) {
			e->parent_ino = pi->i_ino;
			e->parent_dev = pi->i_sb->s_dev;
		}
	}
	bpf_probe_read_kernel_str(e->name, sizeof(e->name), obj->d_name.name);

	/* Components from the object up to (not including) the root, reversed. */
	struct dentry *d = obj;
	__u32 off = 0;
	__u32 depth = 0;

	for (int i = 0; i < MAX_WALK_DEPTH; i++) {
		if (!d)
			break;
		struct inode *di = d->d_inode;

		if (di && w->root_ino && di->i_ino == w->root_ino && di->i_sb->s_dev == w->root_dev)
			break;
		if (off > EVENT_PATH_LEN - EVENT_NAME_LEN) {
			e->flags |= EVENT_FLAG_PATH_TRUNCATED;
			break;
		}
		long n = bpf_probe_read_kernel_str(&e->path[off], EVENT_NAME_LEN, d->d_name.name);

		if (n <= 0)
			break;
		off += n;
		depth++;
		struct dentry *p = d->d_parent;

		if (p == d)
			break;
		d = p;
	}
	e->depth = depth;
	bpf_ringbuf_submit(e, 0);
}

/* Check `need` on object `d` (exact and subtree grants); report a miss. */
static __always_inline int check_object(__u64 session, struct dentry *d, int subtree_ok, __u32 need,
					__u32 hook, __u32 flags)
{
	struct walk w = { .flags = flags };

	walk_up(session, d, 1, subtree_ok, need, &w);
	if (allowed(&w, need))
		return 0;
	report(session, d, need & ~w.granted, hook, &w);
	return -EACCES;
}

/* Check `create` on the directory that would hold `child` (a new name). */
static __always_inline int check_create(__u64 session, struct dentry *child, __u32 hook)
{
	struct walk w = {};

	walk_up(session, child->d_parent, 1, 1, ACCESS_CREATE, &w);
	if (allowed(&w, ACCESS_CREATE))
		return 0;
	report(session, child, ACCESS_CREATE, hook, &w);
	return -EACCES;
}

/* Files with several hard links are reachable from several directories, so a
 * subtree grant on one of them must not open them: only an exact grant can. */
static __always_inline int is_multi_link(struct inode *inode)
{
	return inode && (inode->i_mode & S_IFMT) != S_IFDIR && inode->__i_nlink > 1;
}

SEC("lsm/file_open")
int BPF_PROG(pincer_file_open, struct file *file, int ret)
{
	if (ret)
		return ret;
	__u64 session = current_session();

	if (!session)
		return 0;
	int reach = reach_file_open(session, file);

	if (reach)
		return reach;
	struct inode *inode = file->f_inode;
	struct dentry *d = file->f_path.dentry;
	fmode_t mode = file->f_mode;
	int dir = inode && (inode->i_mode & S_IFMT) == S_IFDIR;
	__u32 need = 0;

	if (mode & (FMODE_READ | FMODE_EXEC))
		need |= dir ? ACCESS_LIST : ACCESS_READ;
	if (mode & FMODE_WRITE)
		need |= ACCESS_WRITE;
	if (!need) /* neither read nor write (ioctl-only opens): treat as read */
		need = dir ? ACCESS_LIST : ACCESS_READ;

	int multi = is_multi_link(inode);
	struct walk w = { .flags = multi ? EVENT_FLAG_MULTI_LINK : 0 };

	walk_up(session, d, 1, !multi, need, &w);
	if (allowed(&w, need))
		return 0;
	if ((mode & FMODE_CREATED) && inode) {
		/* inode_create already checked `create`: the creator may read and
		 * write what it made, now and later. */
		struct grant_key gk = {
			.session = session,
			.ino = inode->i_ino,
			.dev = inode->i_sb->s_dev,
		};
		__u32 bits = ACCESS_READ | ACCESS_WRITE | ACCESS_CREATED_BY_SESSION;
		__u32 *old = bpf_map_lookup_elem(&pincer_exact, &gk);

		if (old)
			bits |= *old;
		bpf_map_update_elem(&pincer_exact, &gk, &bits, BPF_ANY);
		return 0;
	}
	report(session, d, need & ~w.granted, HOOK_FILE_OPEN, &w);
	return -EACCES;
}

SEC("lsm/inode_create")
int BPF_PROG(pincer_inode_create, struct inode *dir, struct dentry *dentry, umode_t mode, int ret)
{
	if (ret)
		return ret;
	__u64 session = current_session();

	return session ? check_create(session, dentry, HOOK_INODE_CREATE) : 0;
}

SEC("lsm/inode_mkdir")
int BPF_PROG(pincer_inode_mkdir, struct inode *dir, struct dentry *dentry, umode_t mode, int ret)
{
	if (ret)
		return ret;
	__u64 session = current_session();

	return session ? check_create(session, dentry, HOOK_INODE_MKDIR) : 0;
}

SEC("lsm/inode_symlink")
int BPF_PROG(pincer_inode_symlink, struct inode *dir, struct dentry *dentry, const char *old_name, int ret)
{
	if (ret)
		return ret;
	__u64 session = current_session();

	return session ? check_create(session, dentry, HOOK_INODE_SYMLINK) : 0;
}

SEC("lsm/inode_link")
int BPF_PROG(pincer_inode_link, struct dentry *old_dentry, struct inode *dir, struct dentry *new_dentry,
	     int ret)
{
	if (ret)
		return ret;
	__u64 session = current_session();

	if (!session)
		return 0;
	int err = check_create(session, new_dentry, HOOK_INODE_LINK);

	if (err)
		return err;
	/* A new name for an object is a new way to reach it: the session must
	 * already be able to read it by grant. */
	int multi = is_multi_link(old_dentry->d_inode);

	return check_object(session, old_dentry, !multi, ACCESS_READ, HOOK_INODE_LINK_SOURCE,
			    multi ? EVENT_FLAG_MULTI_LINK : 0);
}

SEC("lsm/inode_unlink")
int BPF_PROG(pincer_inode_unlink, struct inode *dir, struct dentry *dentry, int ret)
{
	if (ret)
		return ret;
	__u64 session = current_session();

	return session ? check_object(session, dentry, 1, ACCESS_DELETE, HOOK_INODE_UNLINK, 0) : 0;
}

SEC("lsm/inode_rmdir")
int BPF_PROG(pincer_inode_rmdir, struct inode *dir, struct dentry *dentry, int ret)
{
	if (ret)
		return ret;
	__u64 session = current_session();

	return session ? check_object(session, dentry, 1, ACCESS_DELETE, HOOK_INODE_RMDIR, 0) : 0;
}

/* RENAME_EXCHANGE reaches this hook twice, with the sides swapped, so both
 * objects are checked. */
SEC("lsm/inode_rename")
int BPF_PROG(pincer_inode_rename, struct inode *old_dir, struct dentry *old_dentry, struct inode *new_dir,
	     struct dentry *new_dentry, int ret)
{
	if (ret)
		return ret;
	__u64 session = current_session();

	if (!session)
		return 0;
	int err = check_object(session, old_dentry, 1, ACCESS_DELETE, HOOK_INODE_RENAME_FROM, 0);

	if (err)
		return err;
	err = check_create(session, new_dentry, HOOK_INODE_RENAME_TO);
	if (err)
		return err;
	if (new_dentry->d_inode)
		return check_object(session, new_dentry, 1, ACCESS_DELETE, HOOK_INODE_RENAME_OVER, 0);
	return 0;
}

static __always_inline int check_setattr(struct dentry *dentry, struct iattr *attr)
{
	if (!(attr->ia_valid & ATTR_SIZE))
		return 0;
	__u64 session = current_session();

	if (!session)
		return 0;
	int multi = is_multi_link(dentry->d_inode);

	return check_object(session, dentry, !multi, ACCESS_WRITE, HOOK_INODE_SETATTR,
			    multi ? EVENT_FLAG_MULTI_LINK : 0);
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

#include "reach.bpf.c"
