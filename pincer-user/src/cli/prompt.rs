//! `pincer prompt [--session ID] TEXT`: a later prompt of the user in an open session.

use super::conn::{call, Conn};
use clap::Args;
use crate::daemon::{Call, Reply};
use std::process::ExitCode;

/// Arguments of `pincer prompt`.
#[derive(Args)]
pub struct PromptArgs {
    /// Session (default: your only open session).
    #[arg(long)]
    session: Option<String>,
    /// The prompt.
    text: String,
    #[command(flatten)]
    conn: Conn,
}

/// Sends the prompt to the twin.
pub fn run(args: PromptArgs) -> anyhow::Result<ExitCode> {
    match call(&args.conn, Call::Prompt { session: args.session, text: args.text })? {
        Reply::Ok { message } => println!("{message}"),
        other => anyhow::bail!("unexpected reply: {other:?}"),
    }
    Ok(ExitCode::SUCCESS)
}
