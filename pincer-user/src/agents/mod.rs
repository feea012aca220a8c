//! Coding agents under Pincer: Claude Code's `PreToolUse` hook ([`hook`]), and trusted
//! history from Claude Code's transcripts and Codex's rollouts ([`transcript`]).
//!
//! - [`tools`], the resources a call of one of Claude Code's file tools touches.
//! - [`hook`], `pincer hook claude-code`: asks the daemon before a file tool runs.
//! - [`transcript`], `pincer history convert`: one history task per user prompt.

mod claude;
mod codex;
pub mod hook;
pub mod tools;
pub mod transcript;

pub use codex::patch_resources;
