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

#[repr(C, align(8))]
struct Aligned<Bytes: ?Sized>(Bytes);

static ALIGNED: &Aligned<[u8]> = &Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/pincer.bpf.o")));

/// The compiled BPF object (ELF), 8-byte aligned as aya's loader expects.
pub static PINCER_BPF: &[u8] = &ALIGNED.0;
