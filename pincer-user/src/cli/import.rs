//! `pincer import --history FILE --policies FILE [--uid N] [--workspace DIR]`: imports trusted history and
//! policies (corpus format) into the twin's state for your user.

use super::conn::{call, Conn};
use anyhow::Context;
use clap::Args;
use crate::daemon::{Call, Reply};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `pincer import`.
#[derive(Args)]
pub struct ImportArgs {
    /// A `history.jsonl` (one past task per line).
    #[arg(long)]
    history: PathBuf,
    /// A `policies.jsonl` (the user's own policies).
    #[arg(long)]
    policies: PathBuf,
    /// Import for this uid (root only; default: you).
    #[arg(long)]
    uid: Option<u32>,
    /// Your workspace as it is now, before any session has touched it: the twin reads its
    /// tree and fingerprints the files your policies protect.
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    #[command(flatten)]
    conn: Conn,
}

/// Sends the files' contents to the daemon.
pub fn run(args: ImportArgs) -> anyhow::Result<ExitCode> {
    let history = std::fs::read_to_string(&args.history).with_context(|| format!("reading {}", args.history.display()))?;
    let policies = std::fs::read_to_string(&args.policies).with_context(|| format!("reading {}", args.policies.display()))?;
    match call(&args.conn, Call::Import { history, policies, uid: args.uid, workspace: args.workspace.map(|w| std::path::absolute(&w).unwrap_or(w)) })? {
        Reply::Ok { message } => println!("{message}"),
        other => anyhow::bail!("unexpected reply: {other:?}"),
    }
    Ok(ExitCode::SUCCESS)
}
