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

struct super_block {
	dev_t s_dev;
	unsigned long s_magic;
};

struct inode {
	umode_t i_mode;
	struct {
		unsigned int val;
	} i_uid;
	unsigned long i_ino;
	unsigned int __i_nlink;
	struct super_block *i_sb;
};

struct dentry {
	struct dentry *d_parent;
	struct qstr d_name;
	struct inode *d_inode;
};

struct vfsmount;

struct path {
	struct vfsmount *mnt;
	struct dentry *dentry;
};

struct file {
	struct path f_path;
	struct inode *f_inode;
	fmode_t f_mode;
};

struct iattr {
	unsigned int ia_valid;
};

struct mnt_idmap;

#pragma clang attribute pop

#endif
