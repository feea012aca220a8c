//! Claude Code's project transcripts (`~/.claude/projects/<project>/<session>.jsonl`, and
//! subagents' files beside them): one JSON object per line. Lines of `type` `user` and
//! `assistant` carry `sessionId`, `timestamp`, `cwd`, `isSidechain` and a `message` whose
//! `content` is a string or an array of blocks: `text`, `tool_use` (`id`, `name`, `input`)
//! in assistant lines, `tool_result` (`tool_use_id`, `is_error`) in user lines, with the
//! tool's structured result in the line's `toolUseResult` (for `Write`: `type` `create` or
//! `update`). Other line types (`summary`, `system`, `file-history-snapshot`, ...) carry
//! neither prompts nor tool calls and are skipped.
//!
//! A prompt is a user line of the main conversation (not a sidechain, not `isMeta`) with text
//! and no tool result, that is not one of the lines Claude Code writes itself for slash
//! commands, `!` shell escapes or interruptions.

use super::tools::{self, Probe};
use super::transcript::{parse_time, LineProblem, Order, Parsed, Prompt, Unattributed};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Text openings of user lines that Claude Code writes itself.
const NOT_PROMPTS: [&str; 4] = ["<command-", "<local-command-", "<bash-", "[Request interrupted by user"];

struct Use {
    session: String,
    at: i64,
    order: Order,
    name: String,
    input: Value,
    cwd: Option<PathBuf>,
    after_bad_line: bool,
}

enum Outcome<'a> {
    Done(Option<&'a Value>),
    Failed,
    Missing,
}

fn str_field<'v>(v: &'v Value, field: &'static str) -> Result<&'v str, LineProblem> {
    match v.get(field) {
        None | Some(Value::Null) => Err(LineProblem::Missing(field)),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(LineProblem::WrongType { field, expected: "a string" }),
    }
}

/// What the recorded result says about the file the call wrote.
fn target_probe(u: &Use, result: Option<&Value>) -> Probe {
    match u.name.as_str() {
        "Write" => match result.and_then(|r| r.get("type")).and_then(Value::as_str) {
            Some("create") => Probe::Missing,
            Some("update") => Probe::File,
            _ => Probe::Unknown,
        },
        "Edit" => match u.input.get("old_string").and_then(Value::as_str) {
            Some("") => Probe::Missing,
            _ => Probe::File,
        },
        "MultiEdit" => match u.input.pointer("/edits/0/old_string").and_then(Value::as_str) {
            Some("") => Probe::Missing,
            _ => Probe::File,
        },
        _ => Probe::File,
    }
}

fn finish(u: Use, outcome: Outcome, out: &mut Parsed) {
    let result = match outcome {
        _ if u.name == "Bash" => Err(Unattributed::ShellCommand),
        _ if !tools::FILE_TOOLS.contains(&u.name.as_str()) => Err(Unattributed::OtherTool),
        Outcome::Failed => Err(Unattributed::FailedCall),
        Outcome::Missing => Err(Unattributed::NoResult),
        Outcome::Done(result) => {
            let target = u.input.get(if u.name == "NotebookEdit" { "notebook_path" } else { "file_path" }).and_then(Value::as_str).and_then(|p| tools::absolute(&u.name, p, u.cwd.as_deref()).ok());
            let tp = target_probe(&u, result);
            let grep = u.name == "Grep";
            // Folders above a written file existed (or were made with it); a Grep path is
            // looked up where the history is converted.
            let probe = |p: &Path| if Some(p) == target.as_deref() { tp } else if grep { tools::probe_fs(p) } else { Probe::Dir };
            match tools::resources(&u.name, &u.input, u.cwd.as_deref(), &probe).expect("a file tool") {
                // Whether a Grep searched a file or a folder is read from the file system.
                Ok(needs) if grep && needs.iter().any(|n| !matches!(tools::probe_fs(&n.path), Probe::File | Probe::Dir)) => Err(Unattributed::SearchTarget),
                Ok(needs) => Ok(needs),
                Err(tools::ToolError::CreateOrWrite { .. }) => Err(Unattributed::CreateOrWrite),
                Err(_) => Err(Unattributed::BadInput),
            }
        }
    };
    out.call(&u.session, u.at, u.order, u.after_bad_line, result);
}

/// Parses one transcript file (`index` orders it among the inputs).
pub(crate) fn parse(index: usize, file: &Path, text: &str, out: &mut Parsed) {
    let mut pending: HashMap<String, Use> = HashMap::new();
    let mut order_of_pending: Vec<String> = Vec::new();
    let mut after_bad_line = false;
    for (n, line) in crate::jsonl::parse_lines::<Value>(text) {
        match line.map_err(LineProblem::Json).and_then(|v| parse_line(index, n, v, after_bad_line, &mut pending, &mut order_of_pending, out)) {
            Ok(LineKind::Prompt) => after_bad_line = false,
            Ok(LineKind::Other) => {}
            Err(problem) => {
                out.error(file, n, problem);
                after_bad_line = true;
            }
        }
    }
    for id in order_of_pending {
        if let Some(u) = pending.remove(&id) {
            finish(u, Outcome::Missing, out);
        }
    }
}

enum LineKind {
    Prompt,
    Other,
}

fn parse_line(
    index: usize,
    n: usize,
    v: Value,
    after_bad_line: bool,
    pending: &mut HashMap<String, Use>,
    order_of_pending: &mut Vec<String>,
    out: &mut Parsed,
) -> Result<LineKind, LineProblem> {
    if !v.is_object() {
        return Err(LineProblem::NotObject);
    }
    let kind = str_field(&v, "type")?;
    if kind != "user" && kind != "assistant" {
        return Ok(LineKind::Other);
    }
    let session = str_field(&v, "sessionId")?.to_string();
    let ts = str_field(&v, "timestamp")?;
    let at = parse_time(ts).ok_or_else(|| LineProblem::BadTime { field: "timestamp", value: ts.into() })?;
    let cwd = v.get("cwd").and_then(Value::as_str).map(PathBuf::from);
    let flag = |f: &str| v.get(f).and_then(Value::as_bool).unwrap_or(false);
    let message = v.get("message").ok_or(LineProblem::Missing("message"))?;
    let content = message.get("content").ok_or(LineProblem::Missing("message.content"))?;
    let blocks: Vec<Value> = match content {
        Value::String(s) => vec![serde_json::json!({"type": "text", "text": s})],
        Value::Array(a) => a.clone(),
        _ => return Err(LineProblem::WrongType { field: "message.content", expected: "a string or an array of blocks" }),
    };
    if kind == "assistant" {
        for b in &blocks {
            if b.get("type").and_then(Value::as_str) != Some("tool_use") {
                continue;
            }
            let id = str_field(b, "id").map_err(|_| LineProblem::Missing("message.content[].id"))?.to_string();
            let name = str_field(b, "name").map_err(|_| LineProblem::Missing("message.content[].name"))?.to_string();
            let input = b.get("input").cloned().unwrap_or(Value::Null);
            order_of_pending.push(id.clone());
            pending.insert(id, Use { session: session.clone(), at, order: (index, n), name, input, cwd: cwd.clone(), after_bad_line });
        }
        return Ok(LineKind::Other);
    }
    let mut texts = Vec::new();
    let mut results = Vec::new();
    for b in &blocks {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => texts.extend(b.get("text").and_then(Value::as_str)),
            Some("tool_result") => {
                let id = str_field(b, "tool_use_id").map_err(|_| LineProblem::Missing("message.content[].tool_use_id"))?;
                results.push((id.to_string(), b.get("is_error").and_then(Value::as_bool).unwrap_or(false)));
            }
            _ => {}
        }
    }
    if !results.is_empty() {
        // The structured result belongs to the line's single tool result.
        let structured = if results.len() == 1 { v.get("toolUseResult").filter(|r| r.is_object()) } else { None };
        for (id, is_error) in results {
            if let Some(u) = pending.remove(&id) {
                finish(u, if is_error { Outcome::Failed } else { Outcome::Done(structured) }, out);
            }
        }
        return Ok(LineKind::Other);
    }
    if flag("isSidechain") || flag("isMeta") || texts.is_empty() {
        return Ok(LineKind::Other);
    }
    let text = texts.join("\n");
    let trimmed = text.trim_start();
    if trimmed.is_empty() || NOT_PROMPTS.iter().any(|p| trimmed.starts_with(p)) {
        out.skipped.push(Unattributed::NotAPrompt);
        return Ok(LineKind::Other);
    }
    out.prompts.push(Prompt { session, at, order: (index, n), text });
    Ok(LineKind::Prompt)
}
