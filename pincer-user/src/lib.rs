//! Pincer: least privilege for AI coding agents, enforced at the resource.
//!
//! - [`access`]: the access types; [`glob`]: the one glob-syntax test; [`jsonl`]: the one
//!   JSON-lines reader.
//! - [`kernel`]: the aya loader of the BPF LSM program, its grant maps and miss stream.
//! - [`sanitize`]: the keyed PRF that hides untrusted names from deciders.
//! - [`format`]: the corpus format's history, policies and approvals, and their reader.
//! - [`store`]: the twin's trusted state in SQLite.
//! - [`twin`]: the digital twin: three votes and the pre-committed policy.
//! - [`decider`]: decider backends (offline, OpenAI-compatible, Anthropic).
//! - [`daemon`]: the daemon, its socket protocol, sessions, the request tool's server side.
//! - [`eval`]: the corpus loader, the seven defenses and the evaluation harness.
//! - [`agents`]: Claude Code's hook, and history from Claude Code's and Codex's transcripts.
//! - [`doctor`]: whether a host can run the daemon.
//! - [`service`]: readiness for systemd.
//! - [`workload`]: what the daemon's benchmarks drive.
//! - [`cli_main`]: the `pincer` command line (`src/cli/`); `src/main.rs` only calls it.
#![warn(missing_docs)]

pub mod access;
pub mod glob;
pub mod jsonl;
pub mod kernel;
pub mod sanitize;
pub mod shown;
pub mod format;
pub mod store;
pub mod twin;
pub mod decider;
pub mod eval;
pub mod daemon;
pub mod agents;
pub mod doctor;
pub mod service;
pub mod workload;
mod cli;

pub use access::Access;

/// Runs the `pincer` command line on this process's arguments and returns its exit status.
pub fn cli_main() -> std::process::ExitCode {
    cli::main()
}
