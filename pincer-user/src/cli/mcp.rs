//! `pincer mcp`: the resource request tool as an MCP server on stdio.

use super::conn::{runtime, Conn};
use clap::Args;
use std::process::ExitCode;

/// Arguments of `pincer mcp`.
#[derive(Args)]
pub struct McpArgs {
    #[command(flatten)]
    conn: Conn,
}

/// Serves until stdin closes.
pub fn run(args: McpArgs) -> anyhow::Result<ExitCode> {
    let socket = args.conn.socket()?;
    runtime()?.block_on(async {
        let stdin = tokio::io::BufReader::new(tokio::io::stdin());
        crate::daemon::mcp::serve(stdin, tokio::io::stdout(), &socket).await
    })?;
    Ok(ExitCode::SUCCESS)
}
