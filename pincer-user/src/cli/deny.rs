//! `pincer deny ID`: deny a pending question (recorded as a trusted user refusal).

use super::approve::{answer, AnswerArgs};
use crate::daemon::protocol::ApprovalScope;
use std::process::ExitCode;

/// Denies.
pub fn run(args: AnswerArgs) -> anyhow::Result<ExitCode> {
    answer(&args.conn, args.id, false, ApprovalScope::Always, args.host)
}
