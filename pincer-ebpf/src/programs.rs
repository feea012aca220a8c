// Included by `lib.rs` and by `build.rs` (which checks the compiled object
// against it), so the program names are written once on the Rust side.

/// Program (function) names in the object and the LSM hook each attaches to,
/// in attach order.
///
/// Hooks with two signature variants come as two entries, the newer first: a
/// loader tries it and falls back to the next entry for the same hook when the
/// verifier refuses it (`inode_setattr` gained a leading `mnt_idmap` argument
/// in Linux 6.8).
pub const PROGRAMS: [(&str, &str); 20] = [
    ("pincer_file_open", "file_open"),
    ("pincer_inode_create", "inode_create"),
    ("pincer_inode_mkdir", "inode_mkdir"),
    ("pincer_inode_symlink", "inode_symlink"),
    ("pincer_inode_link", "inode_link"),
    ("pincer_inode_unlink", "inode_unlink"),
    ("pincer_inode_rmdir", "inode_rmdir"),
    ("pincer_inode_rename", "inode_rename"),
    ("pincer_inode_setattr_idmap", "inode_setattr"),
    ("pincer_inode_setattr", "inode_setattr"),
    ("pincer_inode_setxattr", "inode_setxattr"),
    ("pincer_inode_removexattr", "inode_removexattr"),
    ("pincer_inode_set_acl", "inode_set_acl"),
    ("pincer_inode_remove_acl", "inode_remove_acl"),
    ("pincer_inode_mknod", "inode_mknod"),
    ("pincer_file_receive", "file_receive"),
    ("pincer_file_ioctl", "file_ioctl"),
    ("pincer_file_ioctl_compat", "file_ioctl_compat"),
    ("pincer_inode_free_security", "inode_free_security"),
    ("pincer_userns_create", "userns_create"),
];

/// Hooks that older supported kernels lack (`inode_set_acl` and
/// `inode_remove_acl` since Linux 6.2, `file_ioctl_compat` since 6.8): a loader
/// skips them when the kernel has no such hook. On those kernels the
/// operations they gate pass through `inode_setxattr`, `inode_removexattr` and
/// `file_ioctl`, which are always attached.
pub const OPTIONAL_HOOKS: [&str; 3] = ["inode_set_acl", "inode_remove_acl", "file_ioctl_compat"];
