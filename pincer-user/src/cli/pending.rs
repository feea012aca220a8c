//! `pincer pending`: questions waiting for the user.

use super::conn::{call, Conn};
use clap::Args;
use pincer::daemon::{Call, Reply};
use std::process::ExitCode;

/// Arguments of `pincer pending`.
#[derive(Args)]
pub struct PendingArgs {
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    conn: Conn,
}

/// Lists pending questions.
pub fn run(args: PendingArgs) -> anyhow::Result<ExitCode> {
    let Reply::Pending { questions } = call(&args.conn, Call::Pending)? else { anyhow::bail!("unexpected reply") };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&questions)?);
    } else if questions.is_empty() {
        println!("no pending questions");
    } else {
        for q in questions {
            let w = if q.waiting { " (worker waiting)" } else { "" };
            println!("{:>4}  [{}] {} {}{w}: {}", q.id, q.session, q.access, q.path, q.reason);
            for (i, v) in q.votes.iter().enumerate() {
                let verdict = serde_json::to_value(v.verdict).ok().and_then(|x| x.as_str().map(str::to_string)).unwrap_or_default();
                println!("        vote {}: {verdict}: {}", i + 1, v.reason);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
