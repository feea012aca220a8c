//! `pincer hook claude-code`: Claude Code's `PreToolUse` command hook. Reads the hook's JSON
//! on stdin, asks the daemon for the resources of a file tool, prints the decision as
//! `hookSpecificOutput` JSON and exits 0; unreadable input (and any panic) exits 2, which
//! blocks the call: the hook never exits with a code that lets a call through unasked.

use super::conn::{runtime, Conn};
use clap::{Args, Subcommand};
use crate::agents::hook::{self, Decision};
use crate::daemon::client::socket_path;
use crate::daemon::config::Config;
use std::io::Read;
use std::process::ExitCode;
use std::time::Duration;

/// Largest hook input read (a Write's content is part of it).
const MAX_INPUT: u64 = 64 << 20;
/// Exit code with which Claude Code blocks the tool call and shows stderr to the model.
const BLOCK: u8 = 2;

/// Arguments of `pincer hook`.
#[derive(Args)]
pub struct HookArgs {
    #[command(subcommand)]
    agent: Agent,
}

#[derive(Subcommand)]
enum Agent {
    /// Claude Code's PreToolUse hook (JSON on stdin, `hookSpecificOutput` on stdout).
    ClaudeCode(ClaudeArgs),
}

/// Arguments of `pincer hook claude-code`.
#[derive(Args)]
struct ClaudeArgs {
    /// Longest wait for the daemon's decisions, in seconds, a question for the user included
    /// (default: the configuration's escalation.timeout_secs plus 10; inside a session, which
    /// cannot read the configuration, the default escalation timeout plus 10). Set the hook's
    /// `timeout` in Claude Code's settings above it.
    #[arg(long)]
    timeout: Option<u64>,
    #[command(flatten)]
    conn: Conn,
}

fn block(why: impl std::fmt::Display) -> ExitCode {
    eprintln!("Pincer: {why}. {}", hook::HOW_TO_ASK);
    ExitCode::from(BLOCK)
}

/// The longest wait for the daemon: `--timeout`, else the configuration's escalation
/// timeout plus 10 s. Inside a session (the socket given by `pincer run`'s
/// `PINCER_SOCKET` or `--socket`), a configuration the hook cannot read (the shipped never
/// rules refuse `/etc/pincer` to every session) gives the default escalation timeout's
/// wait: the daemon bounds a question by its own timeout and denies after it, so a shorter
/// wait here can only turn into a deny.
fn deadline(args: &ClaudeArgs) -> Result<Duration, crate::daemon::config::ConfigError> {
    if let Some(t) = args.timeout {
        return Ok(Duration::from_secs(t));
    }
    let config = args.conn.config.as_deref();
    let secs = match Config::load(config) {
        Ok(cfg) => cfg.escalation.timeout_secs + 10,
        Err(e) => {
            let set = |v: &str| std::env::var_os(v).is_some_and(|s| !s.is_empty());
            let socket_given = args.conn.socket.is_some() || set("PINCER_SOCKET");
            if !socket_given || config.is_some() || set("PINCER_CONFIG") {
                return Err(e);
            }
            Config::default().escalation.timeout_secs + 10
        }
    };
    Ok(Duration::from_secs(secs))
}

/// Answers one hook call.
pub fn run(args: HookArgs) -> anyhow::Result<ExitCode> {
    let Agent::ClaudeCode(args) = args.agent;
    // A panic must block the call, not let it through (any exit code but 0 and 2 does).
    std::panic::set_hook(Box::new(|info| {
        eprintln!("Pincer: the hook failed ({info}), so the tool call is denied. {}", hook::HOW_TO_ASK);
        std::process::exit(i32::from(BLOCK));
    }));
    let mut text = String::new();
    if let Err(e) = std::io::stdin().take(MAX_INPUT).read_to_string(&mut text) {
        return Ok(block(format!("cannot read the hook's input: {e}")));
    }
    let input = match hook::parse_input(&text) {
        Ok(i) => i,
        Err(e) => return Ok(block(e)),
    };
    let decision = match (socket_path(args.conn.socket.clone(), args.conn.config.as_deref()), deadline(&args)) {
        (Ok(socket), Ok(deadline)) => runtime()?.block_on(hook::decide(&input, &socket, deadline)),
        (Err(e), _) | (_, Err(e)) => Decision::Deny(format!("Pincer: the configuration cannot be read, so the call is denied: {e}. {}", hook::HOW_TO_ASK)),
    };
    if let Some(json) = decision.to_json() {
        println!("{json}");
    }
    Ok(ExitCode::SUCCESS)
}
