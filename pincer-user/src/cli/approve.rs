//! `pincer approve ID`: approve a pending question (recorded as a trusted user approval).

use super::conn::{call, Conn};
use clap::Args;
use pincer::daemon::{Call, Reply};
use std::process::ExitCode;

/// Arguments of `pincer approve` and `pincer deny`.
#[derive(Args)]
pub struct AnswerArgs {
    /// The question's id (from `pincer pending`).
    pub id: u64,
    #[command(flatten)]
    pub conn: Conn,
}

/// Sends the user's answer.
pub fn answer(args: AnswerArgs, approve: bool) -> anyhow::Result<ExitCode> {
    match call(&args.conn, Call::Answer { question: args.id, approve })? {
        Reply::Ok { message } => println!("{message}"),
        other => anyhow::bail!("unexpected reply: {other:?}"),
    }
    Ok(ExitCode::SUCCESS)
}

/// Approves.
pub fn run(args: AnswerArgs) -> anyhow::Result<ExitCode> {
    answer(args, true)
}
