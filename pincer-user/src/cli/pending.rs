//! `pincer pending [--host NAME]`: questions waiting for the user (with a fleet's shared
//! store: the questions of every host, each with the host that asked).

use super::conn::{call, Conn};
use clap::Args;
use crate::daemon::{Call, Reply};
use crate::shown::Shown;
use std::process::ExitCode;

/// Arguments of `pincer pending`.
#[derive(Args)]
pub struct PendingArgs {
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Only the questions this host of the fleet asked.
    #[arg(long)]
    host: Option<String>,
    #[command(flatten)]
    conn: Conn,
}

/// Lists pending questions.
pub fn run(args: PendingArgs) -> anyhow::Result<ExitCode> {
    let Reply::Pending { mut questions } = call(&args.conn, Call::Pending)? else { anyhow::bail!("unexpected reply") };
    if let Some(h) = &args.host {
        questions.retain(|q| q.host.as_ref() == Some(h));
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&questions)?);
    } else if questions.is_empty() {
        println!("no pending questions");
    } else {
        for q in questions {
            let w = if q.waiting { " (worker waiting)" } else { "" };
            let host = q.host.as_deref().map(|h| format!("{}  ", Shown(h))).unwrap_or_default();
            // The path and the reasons quote the session's request: shown escaped.
            println!("{:>4}  {host}[{}] {} {}{w}: {}", q.id, Shown(&q.session), q.access, Shown(&q.path), Shown(&q.reason));
            if q.access == crate::Access::Create {
                // The kernel grants a creation by folder: say what approving gives.
                let (folder, hidden) = crate::twin::created_in(&q.path);
                let kind = if hidden { "hidden" } else { "visible" };
                println!("        approving lets the session create any {kind} name in {}/", Shown(if folder.is_empty() { "." } else { folder }));
            }
            for (i, v) in q.votes.iter().enumerate() {
                let verdict = serde_json::to_value(v.verdict).ok().and_then(|x| x.as_str().map(str::to_string)).unwrap_or_default();
                println!("        vote {}: {verdict}: {}", i + 1, Shown(&v.reason));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
