//! The Pincer BPF LSM program, compiled from C (`src/pincer.bpf.c`) by
//! `build.rs` with clang and embedded as an ELF object.
//!
//! The object's map layouts are mirrored by `pincer-common`; load it with aya
//! (`pincer::kernel::Enforcer` does). Needs a kernel with BPF LSM enabled
//! (`lsm=...,bpf`, Linux 5.11 or later).
#![no_std]

include!("programs.rs");

#[repr(C, align(8))]
struct Aligned<Bytes: ?Sized>(Bytes);

static ALIGNED: &Aligned<[u8]> = &Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/pincer.bpf.o")));

/// The compiled BPF object (ELF), 8-byte aligned as aya's loader expects.
pub static PINCER_BPF: &[u8] = &ALIGNED.0;
