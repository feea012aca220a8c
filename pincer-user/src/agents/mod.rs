//! Coding agents under Pincer: Claude Code's `PreToolUse` hook ([`hook`]), and trusted
//! history from Claude Code's transcripts, Codex's rollouts and Gemini CLI's chats
//! ([`transcript`]).
//!
//! - [`tools`], the resources a call of one of Claude Code's file tools touches.
//! - [`hook`], `pincer hook claude-code`: asks the daemon before a file tool runs.
//! - [`transcript`], `pincer history convert`: one history task per user prompt.

mod claude;
mod codex;
mod gemini;
pub mod hook;
pub mod tools;
pub mod transcript;

pub use codex::patch_resources;
