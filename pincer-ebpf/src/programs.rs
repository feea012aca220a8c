// Included by `lib.rs` and by `build.rs` (which checks the compiled object
// against it), so the program names are written once on the Rust side.

/// Program (function) names in the object and the LSM hook each attaches to,
/// in attach order.
///
/// Hooks with two variants come as two entries, the preferred first: a loader
/// tries it and falls back to the next entry for the same hook when the
/// verifier refuses it (`inode_setattr` gained a leading `mnt_idmap` argument
/// in Linux 6.8; the `*_held` programs are sleepable and call kernel
/// functions that Linux 6.12 has and 6.1 lacks).
///
/// A `*_held` program alone on its hook (`path_mkdir`) only holds a miss for a
/// plain program on another hook (`inode_mkdir`) that checks the access anyway:
/// a loader skips it when the kernel refuses it.
pub const PROGRAMS: [(&str, &str); 35] = [
    ("pincer_file_open_held", "file_open"),
    ("pincer_file_open", "file_open"),
    ("pincer_inode_create_held", "inode_create"),
    ("pincer_inode_create", "inode_create"),
    ("pincer_inode_mkdir", "inode_mkdir"),
    ("pincer_path_mkdir_held", "path_mkdir"),
    ("pincer_inode_symlink_held", "inode_symlink"),
    ("pincer_inode_symlink", "inode_symlink"),
    ("pincer_inode_link", "inode_link"),
    ("pincer_inode_unlink_held", "inode_unlink"),
    ("pincer_inode_unlink", "inode_unlink"),
    ("pincer_inode_rmdir_held", "inode_rmdir"),
    ("pincer_inode_rmdir", "inode_rmdir"),
    ("pincer_inode_rename_held", "inode_rename"),
    ("pincer_inode_rename", "inode_rename"),
    ("pincer_inode_setattr_held", "inode_setattr"),
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
    ("pincer_sb_free_security", "sb_free_security"),
    ("pincer_userns_create", "userns_create"),
    ("pincer_path_notify", "path_notify"),
    ("pincer_inode_getattr", "inode_getattr"),
    ("pincer_inode_getxattr", "inode_getxattr"),
    ("pincer_inode_listxattr", "inode_listxattr"),
    ("pincer_inode_readlink", "inode_readlink"),
    ("pincer_file_lock", "file_lock"),
];

/// Hooks that older supported kernels lack (`inode_set_acl` and
/// `inode_remove_acl` since Linux 6.2, `file_ioctl_compat` since 6.8): a loader
/// skips them when the kernel has no such hook. On those kernels the
/// operations they gate pass through `inode_setxattr`, `inode_removexattr` and
/// `file_ioctl`, which are always attached.
pub const OPTIONAL_HOOKS: [&str; 3] = ["inode_set_acl", "inode_remove_acl", "file_ioctl_compat"];

/// Programs of the reach block (`src/reach.bpf.c`) and the LSM hook each
/// attaches to: no reach into other processes, no deputies. (Writes to
/// another process's `/proc/PID/` files are checked by `pincer_file_open`.)
pub const REACH_PROGRAMS: [(&str, &str); 37] = [
    ("pincer_task_kill", "task_kill"),
    ("pincer_ptrace_access_check", "ptrace_access_check"),
    ("pincer_ptrace_traceme", "ptrace_traceme"),
    ("pincer_task_setnice", "task_setnice"),
    ("pincer_task_setioprio", "task_setioprio"),
    ("pincer_task_setscheduler", "task_setscheduler"),
    ("pincer_task_movememory", "task_movememory"),
    ("pincer_task_setrlimit", "task_setrlimit"),
    ("pincer_file_fcntl", "file_fcntl"),
    ("pincer_ipc_permission", "ipc_permission"),
    ("pincer_shm_shmctl", "shm_shmctl"),
    ("pincer_msg_queue_msgctl", "msg_queue_msgctl"),
    ("pincer_sem_semctl", "sem_semctl"),
    ("pincer_shm_alloc", "shm_alloc_security"),
    ("pincer_msg_queue_alloc", "msg_queue_alloc_security"),
    ("pincer_sem_alloc", "sem_alloc_security"),
    ("pincer_shm_free", "shm_free_security"),
    ("pincer_msg_queue_free", "msg_queue_free_security"),
    ("pincer_sem_free", "sem_free_security"),
    ("pincer_socket_post_create", "socket_post_create"),
    ("pincer_socket_bind", "socket_bind"),
    ("pincer_socket_listen", "socket_listen"),
    ("pincer_socket_accept", "socket_accept"),
    ("pincer_socket_recvmsg", "socket_recvmsg"),
    ("pincer_socket_getsockname", "socket_getsockname"),
    ("pincer_socket_setsockopt", "socket_setsockopt"),
    ("pincer_sk_free_security", "sk_free_security"),
    ("pincer_unix_stream_connect", "unix_stream_connect"),
    ("pincer_unix_may_send", "unix_may_send"),
    ("pincer_socket_connect", "socket_connect"),
    ("pincer_socket_sendmsg", "socket_sendmsg"),
    ("pincer_key_alloc", "key_alloc"),
    ("pincer_key_permission", "key_permission"),
    ("pincer_d_instantiate", "d_instantiate"),
    ("pincer_inode_follow_link", "inode_follow_link"),
    ("pincer_task_alloc", "task_alloc"),
    ("pincer_inode_alloc_security", "inode_alloc_security"),
];

/// `fexit` programs and the kernel function each traces: a successful `bind`
/// records the session's port, a UDP port the kernel gives a socket outside
/// every session (a client's autobind too) is held against sessions, as is a TCP port
/// (`inet_csk_get_port`: a bind, or `listen` alone), a successful open of `/dev/ptmx` the session's
/// new pty (reach block), a successful `mkdir`, `symlink` or `mknod` the session's
/// exact grant on the object it made (file gating), and a successful `rename` or `link`
/// into a shared place the session's record of the object there, and an added epoll watch
/// and a POSIX timer's preallocated signal the uid's count looked at against the sessions'
/// share.
pub const REACH_FEXIT: [(&str, &str); 15] = [
    ("pincer_inet_bind", "inet_bind"),
    ("pincer_inet6_bind", "inet6_bind"),
    ("pincer_udp_lib_get_port", "udp_lib_get_port"),
    ("pincer_inet_csk_get_port", "inet_csk_get_port"),
    ("pincer_inet_bind_sk", "inet_bind_sk"),
    ("pincer_inet6_bind_sk", "inet6_bind_sk"),
    ("pincer_ptmx_open", "ptmx_open"),
    ("pincer_vfs_mkdir", "vfs_mkdir"),
    ("pincer_vfs_symlink", "vfs_symlink"),
    ("pincer_vfs_mknod", "vfs_mknod"),
    ("pincer_vfs_rename", "vfs_rename"),
    ("pincer_vfs_link", "vfs_link"),
    ("pincer_fsnotify_alloc_group", "fsnotify_alloc_group"),
    ("pincer_do_epoll_ctl", "do_epoll_ctl"),
    ("pincer_sigqueue_alloc", "sigqueue_alloc"),
];

/// Kernel functions of [`REACH_FEXIT`] that older supported kernels lack: a loader
/// skips their programs where the kernel has no such function. Linux 6.12 binds a
/// socket by its `struct sock` with `inet_bind_sk` and `inet6_bind_sk`, which
/// `inet_bind` and `inet6_bind` call and an MPTCP socket calls for its first subflow
/// directly; on 6.1 the MPTCP subflow is bound through `inet_bind` and `inet6_bind`.
/// `sigqueue_alloc` (a POSIX timer's signal, allocated when the timer is made) is in 6.1
/// and 6.12; later kernels keep the signal in the timer itself.
pub const OPTIONAL_TRACES: [&str; 3] = ["inet_bind_sk", "inet6_bind_sk", "sigqueue_alloc"];

/// `fentry` programs of the reach block and the kernel function each traces:
/// a pty that goes away, a key that is freed and an fsnotify group that goes are
/// forgotten.
pub const REACH_FENTRY: [(&str, &str); 3] = [
    ("pincer_devpts_pty_kill", "devpts_pty_kill"),
    ("pincer_key_free", "security_key_free"),
    ("pincer_fsnotify_destroy_group", "fsnotify_destroy_group"),
];
