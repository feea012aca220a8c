//! `pincer policy list|remove ID`: your standing approvals and policies in the trusted state.

use super::conn::{call, Conn};
use clap::{Args, Subcommand};
use crate::daemon::protocol::{Rule, RuleId};
use crate::daemon::{Call, Reply};
use crate::shown::Shown;
use std::process::ExitCode;

/// Arguments of `pincer policy`.
#[derive(Args)]
pub struct PolicyArgs {
    #[command(subcommand)]
    command: PolicyCommand,
}

#[derive(Subcommand)]
enum PolicyCommand {
    /// Your standing approvals (from `pincer approve --scope always` and imported history)
    /// and policies, each with its id.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Removes an approval or policy by id (`a12`, `p3`); the twin's next decision goes
    /// without it (pre-committed policies of open sessions stay as they were made).
    Remove {
        /// The id, as `pincer policy list` shows it.
        id: RuleId,
        #[command(flatten)]
        conn: Conn,
    },
}

/// Runs `pincer policy`.
pub fn run(args: PolicyArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        PolicyCommand::List { json, conn } => {
            let Reply::Rules { rules } = call(&conn, Call::Rules)? else { anyhow::bail!("unexpected reply") };
            if json {
                println!("{}", serde_json::to_string_pretty(&rules)?);
            } else if rules.is_empty() {
                println!("no approvals or policies");
            }
            if !json {
                for r in rules {
                    match r.rule {
                        Rule::Approval(a) => println!("{:>6}  approval  {} {} {} (task {})", r.id.to_string(), a.permission.as_str(), a.access, Shown(&a.path_glob), Shown(&a.session)),
                        Rule::Policy(p) => println!("{:>6}  policy    {}: {}", r.id.to_string(), Shown(&p.id), Shown(&p.text)),
                    }
                }
            }
        }
        PolicyCommand::Remove { id, conn } => match call(&conn, Call::RemoveRule { id })? {
            Reply::Ok { message } => println!("{message}"),
            other => anyhow::bail!("unexpected reply: {other:?}"),
        },
    }
    Ok(ExitCode::SUCCESS)
}
