//! `#[repr(C)]` layouts shared with the BPF LSM program in `pincer-ebpf`.
#![no_std]
