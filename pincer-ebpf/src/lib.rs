//! The Pincer BPF LSM program, compiled from C by `build.rs`.
