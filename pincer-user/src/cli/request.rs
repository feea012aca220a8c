//! `pincer request PATH --access A [--reason TEXT]`: the worker's resource request tool.
//! Exits 0 when granted, 1 with the reason when denied.

use super::conn::{call, Conn};
use clap::Args;
use crate::daemon::{Call, Reply};
use crate::Access;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `pincer request`.
#[derive(Args)]
pub struct RequestArgs {
    /// The resource (relative paths are taken from the current directory; symlinks are not
    /// followed, `..` is refused).
    path: PathBuf,
    /// read, write, create, delete or list.
    #[arg(long)]
    access: Access,
    /// Why the worker needs it.
    #[arg(long)]
    reason: Option<String>,
    /// The session (only your own is accepted; default: the session you run in).
    #[arg(long)]
    session: Option<String>,
    #[command(flatten)]
    conn: Conn,
}

/// Makes a path absolute without touching the file system (no symlink is resolved here:
/// the daemon resolves it inside the session's roots).
pub fn absolute(path: &std::path::Path) -> anyhow::Result<String> {
    let p = if path.is_absolute() { path.to_path_buf() } else { std::env::current_dir()?.join(path) };
    p.to_str().map(str::to_string).ok_or_else(|| anyhow::anyhow!("the path {} is not valid UTF-8", p.display()))
}

/// Asks the daemon and waits for the decision.
pub fn run(args: RequestArgs) -> anyhow::Result<ExitCode> {
    let path = absolute(&args.path)?;
    match call(&args.conn, Call::Request { path: path.clone(), access: args.access, reason: args.reason, session: args.session })? {
        Reply::Decision { granted: true, .. } => {
            println!("granted: {} {path}", args.access);
            Ok(ExitCode::SUCCESS)
        }
        Reply::Decision { outcome, reason, question, .. } => {
            let q = question.map(|q| format!(" (question {q})")).unwrap_or_default();
            eprintln!("denied ({outcome}){q}: {} {path}: {reason}", args.access);
            Ok(ExitCode::from(1))
        }
        other => anyhow::bail!("unexpected reply: {other:?}"),
    }
}
