//! `pincer log [--follow] [--session ID] [--host NAME] [--json]`: the audit log of your
//! sessions (with the postgres store: of your sessions on every host of the fleet).

use super::conn::{runtime, Conn};
use clap::Args;
use crate::daemon::client::Client;
use crate::daemon::{Call, Reply};
use std::process::ExitCode;

/// Arguments of `pincer log`.
#[derive(Args)]
pub struct LogArgs {
    /// Keep printing new entries.
    #[arg(long, short)]
    follow: bool,
    /// Only this session.
    #[arg(long)]
    session: Option<String>,
    /// Only entries written by this host (a fleet's shared audit).
    #[arg(long)]
    host: Option<String>,
    /// Print the JSON lines as stored.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    conn: Conn,
}

/// Prints the entries.
pub fn run(args: LogArgs) -> anyhow::Result<ExitCode> {
    let socket = args.conn.socket()?;
    runtime()?.block_on(async {
        let mut c = Client::connect(&socket).await?;
        c.send(Call::Log { session: args.session, follow: args.follow, host: args.host }).await?;
        while let Some(r) = c.next().await? {
            match r {
                Reply::Entry { entry } => {
                    if args.json {
                        println!("{}", serde_json::to_string(&entry)?);
                    } else {
                        println!("{}", entry.human());
                    }
                }
                Reply::End => break,
                Reply::Error { message, .. } => anyhow::bail!("{message}"),
                other => anyhow::bail!("unexpected reply: {other:?}"),
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}
