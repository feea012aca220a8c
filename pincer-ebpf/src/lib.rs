//! The Pincer BPF LSM program, compiled from C (`src/pincer.bpf.c`) by
//! `build.rs` with clang and embedded as an ELF object.
//!
//! The object's map layouts are mirrored by `pincer-common`; load it with aya
//! (`pincer::kernel::Enforcer` does). Needs a kernel with BPF LSM enabled
//! (`lsm=...,bpf`, Linux 5.11 or later).
#![no_std]

/// Program (function) names in the object and the LSM hook each attaches to.
///
/// `inode_setattr` has two variants: the hook gained a leading `mnt_idmap`
/// argument in Linux 6.8, so a loader tries the `_idmap` one first and falls
/// back to the other when the verifier refuses it.
pub const PROGRAMS: [(&str, &str); 10] = [
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
];

/// Programs of the reach block (`src/reach.bpf.c`) and the LSM hook each
/// attaches to: no reach into other processes, no deputies. (Writes to
/// another process's `/proc/PID/` files are checked by `pincer_file_open`.)
pub const REACH_PROGRAMS: [(&str, &str); 24] = [
    ("pincer_task_kill", "task_kill"),
    ("pincer_ptrace_access_check", "ptrace_access_check"),
    ("pincer_ptrace_traceme", "ptrace_traceme"),
    ("pincer_task_setnice", "task_setnice"),
    ("pincer_task_setioprio", "task_setioprio"),
    ("pincer_task_setscheduler", "task_setscheduler"),
    ("pincer_task_movememory", "task_movememory"),
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
    ("pincer_socket_getsockname", "socket_getsockname"),
    ("pincer_sk_free_security", "sk_free_security"),
    ("pincer_unix_stream_connect", "unix_stream_connect"),
    ("pincer_unix_may_send", "unix_may_send"),
    ("pincer_socket_connect", "socket_connect"),
    ("pincer_socket_sendmsg", "socket_sendmsg"),
];

/// `fexit` programs of the reach block and the kernel function each traces:
/// a successful `bind` records the session's port.
pub const REACH_FEXIT: [(&str, &str); 2] = [("pincer_inet_bind", "inet_bind"), ("pincer_inet6_bind", "inet6_bind")];

#[repr(C, align(8))]
struct Aligned<Bytes: ?Sized>(Bytes);

static ALIGNED: &Aligned<[u8]> = &Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/pincer.bpf.o")));

/// The compiled BPF object (ELF), 8-byte aligned as aya's loader expects.
pub static PINCER_BPF: &[u8] = &ALIGNED.0;
