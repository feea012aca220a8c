//! `pincer history convert --from claude-code|codex|gemini-cli --root DIR PATH...`: trusted
//! history (the corpus's `history.jsonl`, as `pincer import` reads it) from an agent's own
//! transcripts, on stdout. Unreadable lines are listed on stderr with file and line, with a
//! count of what could not be attributed; the exit code is 1 if any line was unreadable.

use clap::{Args, Subcommand};
use crate::agents::transcript::{convert, Agent};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `pincer history`.
#[derive(Args)]
pub struct HistoryArgs {
    #[command(subcommand)]
    command: HistoryCommand,
}

#[derive(Subcommand)]
enum HistoryCommand {
    /// Convert an agent's transcripts into history (one task per user prompt) on stdout.
    Convert(ConvertArgs),
}

#[derive(Args)]
struct ConvertArgs {
    /// Whose transcripts: Claude Code's `~/.claude/projects/*/*.jsonl`, Codex's
    /// `~/.codex/sessions/**/rollout-*.jsonl` or Gemini CLI's
    /// `~/.gemini/tmp/<project>/chats/session-*.jsonl`.
    #[arg(long, value_enum)]
    from: Agent,
    /// The protected root the history's paths are relative to (accesses outside it are
    /// counted, not written).
    #[arg(long)]
    root: PathBuf,
    /// Transcript files, or folders searched for them (`*.jsonl` files; for Gemini CLI,
    /// `chats/session-*.jsonl` files).
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<PathBuf>,
}

/// Whether `file`, found in a folder given, is one of `agent`'s transcripts.
fn is_transcript(agent: Agent, file: &Path) -> bool {
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
    match agent {
        Agent::ClaudeCode | Agent::Codex => name.ends_with(".jsonl"),
        Agent::GeminiCli => name.starts_with("session-") && name.ends_with(".jsonl") && file.parent().and_then(Path::file_name).is_some_and(|d| d == "chats"),
    }
}

/// `path` if it is a file, else the transcripts under it, in name order.
fn jsonl_files(agent: Agent, path: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if !path.is_dir() {
        out.push(path.to_path_buf());
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
    entries.sort();
    for e in entries {
        if e.is_dir() {
            jsonl_files(agent, &e, out)?;
        } else if is_transcript(agent, &e) {
            out.push(e);
        }
    }
    Ok(())
}

/// Runs the subcommand.
pub fn run(args: HistoryArgs) -> anyhow::Result<ExitCode> {
    let HistoryCommand::Convert(args) = args.command;
    let mut files = Vec::new();
    for p in &args.paths {
        jsonl_files(args.from, p, &mut files).map_err(|e| anyhow::anyhow!("cannot list {}: {e}", p.display()))?;
    }
    let c = convert(args.from, &files, &args.root);
    std::io::stdout().lock().write_all(c.to_jsonl().as_bytes())?;
    for e in &c.errors {
        eprintln!("pincer: {e}");
    }
    eprintln!("pincer: {}", c.summary(files.len()));
    Ok(if c.errors.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
