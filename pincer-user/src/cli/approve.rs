//! `pincer approve ID [--scope once|session|always] [--host NAME]`: approve a pending
//! question (of another host of the fleet with `--host`).

use super::conn::{call, Conn};
use clap::Args;
use crate::daemon::protocol::ApprovalScope;
use crate::daemon::{Call, Reply};
use std::process::ExitCode;

/// Arguments of `pincer deny`.
#[derive(Args)]
pub struct AnswerArgs {
    /// The question's id (from `pincer pending`).
    pub id: u64,
    /// The host of the fleet that asked it (default: this host). The answer is recorded in
    /// the fleet's store and the reply waits (`store.answer_wait_secs`) for that host to
    /// apply it: exit code 3 if it has not (yet).
    #[arg(long)]
    pub host: Option<String>,
    #[command(flatten)]
    pub conn: Conn,
}

/// Arguments of `pincer approve`.
#[derive(Args)]
pub struct ApproveArgs {
    /// The question's id (from `pincer pending`).
    pub id: u64,
    /// How far the approval reaches: `once` grants this request only (the kernel grant is
    /// taken back after `escalation.once_secs`, the twin keeps nothing); `session` lasts for
    /// the rest of the session; `always` (the default, and what approve always did) also
    /// records it as your approval in the trusted state, which licenses the resource for
    /// later tasks like this one (list and remove with `pincer policy`).
    #[arg(long, value_enum, default_value_t = ApprovalScope::Always)]
    pub scope: ApprovalScope,
    /// The host of the fleet that asked it (default: this host). The answer is recorded in
    /// the fleet's store and the reply waits (`store.answer_wait_secs`) for that host to
    /// apply it: exit code 3 if it has not (yet).
    #[arg(long)]
    pub host: Option<String>,
    #[command(flatten)]
    pub conn: Conn,
}

/// The exit code when an answer to another host's question is recorded but that host has
/// not applied it (yet): it may be down; it applies the answer when it is back.
pub const NOT_APPLIED: u8 = 3;

/// Sends the user's answer. With `--host`, the reply says whether the asking host applied
/// it; exit code [`NOT_APPLIED`] if it has not (yet).
pub fn answer(conn: &Conn, id: u64, approve: bool, scope: ApprovalScope, host: Option<String>) -> anyhow::Result<ExitCode> {
    match call(conn, Call::Answer { question: id, approve, scope, host })? {
        Reply::Ok { message } => println!("{message}"),
        Reply::Answered { applied, message } => {
            println!("{message}");
            if !applied {
                return Ok(ExitCode::from(NOT_APPLIED));
            }
        }
        other => anyhow::bail!("unexpected reply: {other:?}"),
    }
    Ok(ExitCode::SUCCESS)
}

/// Approves.
pub fn run(args: ApproveArgs) -> anyhow::Result<ExitCode> {
    answer(&args.conn, args.id, true, args.scope, args.host)
}
