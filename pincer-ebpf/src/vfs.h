/* The few kernel structures the program reads, vmlinux-free. Field offsets are
 * relocated at load time against the running kernel's BTF (CO-RE), so only the
 * names and types used here must match. */
#ifndef PINCER_VFS_H
#define PINCER_VFS_H

typedef unsigned int fmode_t;
typedef unsigned short umode_t;
typedef unsigned int dev_t;

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

struct qstr {
	union {
		struct {
			__u32 hash;
			__u32 len;
		};
		__u64 hash_len;
	};
	const unsigned char *name;
};

/* rename_lock's and mount_lock's counter (at the start of each seqlock_t). */
struct seqcount {
	unsigned int sequence;
};

struct list_head {
	struct list_head *next;
	struct list_head *prev;
};

struct dentry;

struct file_system_type {
	int fs_flags;
};

struct super_block {
	dev_t s_dev;
	unsigned long s_magic;
	unsigned long s_flags;
	struct dentry *s_root;
	struct list_head s_mounts;
	struct file_system_type *s_type;
};

typedef struct {
	unsigned int val;
} kuid_t;

struct hlist_node {
	struct hlist_node *next;
	struct hlist_node **pprev;
};

struct inode {
	umode_t i_mode;
	struct hlist_node i_hash;
	kuid_t i_uid;
	unsigned long i_ino;
	unsigned int __i_nlink;
	struct super_block *i_sb;
};

struct dentry {
	struct dentry *d_parent;
	struct qstr d_name;
	struct inode *d_inode;
	struct super_block *d_sb;
	void *d_fsdata;
};

struct vfsmount {
	struct dentry *mnt_root;
	struct super_block *mnt_sb;
};

/* fs/mount.h: the mount a vfsmount is embedded in. */
struct mount {
	struct mount *mnt_parent;
	struct dentry *mnt_mountpoint;
	struct vfsmount mnt;
	struct list_head mnt_instance;
};

struct path {
	struct vfsmount *mnt;
	struct dentry *dentry;
};

struct file {
	struct path f_path;
	struct inode *f_inode;
	fmode_t f_mode;
	unsigned int f_flags;
	void *private_data;
};

struct iattr {
	unsigned int ia_valid;
	umode_t ia_mode;
};

/* vfs_rename's argument (its user namespace or idmap fields are not read). */
struct renamedata {
	struct inode *old_dir;
	struct dentry *old_dentry;
	struct inode *new_dir;
	struct dentry *new_dentry;
	unsigned int flags;
};

struct mnt_idmap;
struct user_namespace;
struct posix_acl;
struct cred;
struct bpf_map;

#pragma clang attribute pop

#endif
