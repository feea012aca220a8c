//! Gemini CLI's chats (`~/.gemini/tmp/<project>/chats/session-<time>-<id>.jsonl`, as
//! Gemini CLI 0.61 writes them): one JSON object per line, appended as the chat goes on.
//! The folder `~/.gemini/tmp/<project>/` holds `.project_root`, the absolute path of the
//! workspace the sessions ran in; relative tool paths are taken from it.
//!
//! - The first line names the session: `{"sessionId", "projectHash", "startTime", "kind"}`.
//! - `{"$set": {...}}` updates the metadata. Its `messages`, when present, is the whole
//!   conversation as the model sees it (messages already written, and ones Gemini CLI makes
//!   itself, such as the `<session_context>` block): a view, not new events, so it is not
//!   read. `{"$rewindTo": ID}` (the user rewound the chat) is not read either: the calls
//!   before it were made.
//! - A message line has `id`, `timestamp` and `type`. `user`: `content` is an array of parts
//!   (or a string), `displayContent` what the user typed when it differs (an `@file`
//!   reference expanded: Gemini CLI's own read of the file is no tool call, and is not
//!   attributed); a user message whose parts are `functionResponse` parts echoes
//!   tool results. `gemini`: the model's turn, with `toolCalls` (`id`, `name`, `args`,
//!   `result`, `status` `success`/`error`/`cancelled`, `timestamp`, `resultDisplay`). The
//!   same message is written again, whole, each time its tool calls or token counts change:
//!   the last line with an `id` supersedes the earlier ones. Other types (`info`, `error`,
//!   `warning`) are skipped.
//!
//! A prompt is a user message with text that Gemini CLI would itself send back on resume:
//! not empty, not a slash command (`/`), not `?`, not a `<session_context>` or
//! `<hook_context>` block. The file tools, with their path arguments: `read_file`
//! (`file_path`), `read_many_files` (the files its `resultDisplay.files` lists, relative to
//! `resultDisplay.targetDir`), `write_file` (`file_path`; `resultDisplay.isNewFile` tells a
//! create from a write), `replace` (`file_path`; `resultDisplay.isNewFile`, else an empty
//! `old_string`, tells a create), `list_directory` (`dir_path`), `glob` (`pattern`,
//! `dir_path`), `grep_search` (`dir_path`, a folder or a file). `run_shell_command` is a
//! shell command; every other tool is counted as another tool. Subagents' chats
//! (`chats/<parent session>/<agent>.jsonl`) are not read: the parent's call of the subagent
//! counts as another tool.

use super::tools::{self, Need, Probe};
use super::transcript::{parse_time, LineProblem, Order, Parsed, Prompt, Unattributed};
use crate::access::Access;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// Gemini CLI's file tools (the ones whose accesses are read from a chat).
pub const FILE_TOOLS: [&str; 7] = ["read_file", "read_many_files", "write_file", "replace", "list_directory", "glob", "grep_search"];

/// Gemini CLI's shell tool.
pub const SHELL_TOOL: &str = "run_shell_command";

/// Openings of user text that Gemini CLI does not take as a prompt (its own
/// `isIgnoredUserContent`).
const NOT_PROMPTS: [&str; 4] = ["/", "?", "<session_context>", "<hook_context>"];

/// The file holding the project's root, in the folder above `chats/`.
pub const PROJECT_ROOT_FILE: &str = ".project_root";

/// The project root recorded for the chat `file`: the text of `.project_root` in the folder
/// that holds the `chats` folder the file is in, when it is an absolute path.
pub fn project_root(file: &Path) -> Option<PathBuf> {
    let chats = file.ancestors().skip(1).find(|d| d.file_name().is_some_and(|n| n == "chats"))?;
    let text = std::fs::read_to_string(chats.parent()?.join(PROJECT_ROOT_FILE)).ok()?;
    let root = PathBuf::from(text.trim());
    root.is_absolute().then_some(root)
}

/// A tool call as the latest line of its message recorded it.
struct Call {
    at: i64,
    name: String,
    args: Value,
    status: Option<String>,
    display: Value,
}

/// A `gemini` message: where its latest line is, and its tool calls there.
struct Turn {
    session: String,
    order: Order,
    after_bad_line: bool,
    calls: Vec<Call>,
}

fn str_field<'v>(v: &'v Value, field: &'static str) -> Result<&'v str, LineProblem> {
    match v.get(field) {
        None | Some(Value::Null) => Err(LineProblem::Missing(field)),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(LineProblem::WrongType { field, expected: "a string" }),
    }
}

fn time_field(v: &Value, field: &'static str) -> Result<i64, LineProblem> {
    let ts = str_field(v, field)?;
    parse_time(ts).ok_or_else(|| LineProblem::BadTime { field, value: ts.into() })
}

/// The text of a content (a string, a part, or an array of parts); `None` when a part is a
/// tool result (`functionResponse`).
fn text_of(content: &Value) -> Option<String> {
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => {
            let mut text = String::new();
            for p in parts {
                text.push_str(&text_of(p)?);
            }
            Some(text)
        }
        Value::Object(o) if o.contains_key("functionResponse") => None,
        Value::Object(o) => Some(o.get("text").and_then(Value::as_str).unwrap_or("").to_string()),
        _ => Some(String::new()),
    }
}

/// The resources a successful call of `c` touched, or why they are not known.
fn resources(c: &Call, cwd: Option<&Path>) -> Result<Vec<Need>, Unattributed> {
    let a = &c.args;
    if !a.is_object() {
        return Err(Unattributed::BadInput);
    }
    let abs = |p: &str| tools::absolute(&c.name, p, cwd).map_err(|_| Unattributed::BadInput);
    let path_arg = |field: &str| -> Result<PathBuf, Unattributed> {
        match a.get(field).and_then(Value::as_str) {
            Some(p) if !p.is_empty() => abs(p),
            _ => Err(Unattributed::BadInput),
        }
    };
    // An optional folder argument: the project root when absent.
    let dir_arg = |field: &str| -> Result<PathBuf, Unattributed> {
        match a.get(field) {
            None | Some(Value::Null) => cwd.map(Path::to_path_buf).ok_or(Unattributed::BadInput),
            Some(Value::String(p)) if p.is_empty() => cwd.map(Path::to_path_buf).ok_or(Unattributed::BadInput),
            Some(Value::String(p)) => abs(p),
            Some(_) => Err(Unattributed::BadInput),
        }
    };
    let need = |path, access| Need { path, access };
    let is_new = c.display.get("isNewFile").and_then(Value::as_bool);
    Ok(match c.name.as_str() {
        "read_file" => vec![need(path_arg("file_path")?, Access::Read)],
        "write_file" => {
            let file = path_arg("file_path")?;
            match is_new {
                Some(true) => vec![need(file, Access::Create)],
                Some(false) => vec![need(file, Access::Write)],
                None => return Err(Unattributed::CreateOrWrite),
            }
        }
        "replace" => {
            let file = path_arg("file_path")?;
            let creates = is_new.or_else(|| a.get("old_string").and_then(Value::as_str).map(str::is_empty)).ok_or(Unattributed::BadInput)?;
            if creates {
                vec![need(file, Access::Create)]
            } else {
                vec![need(file.clone(), Access::Read), need(file, Access::Write)]
            }
        }
        "list_directory" => vec![need(path_arg("dir_path")?, Access::List)],
        "glob" => {
            let pattern = a.get("pattern").and_then(Value::as_str).filter(|p| !p.is_empty()).ok_or(Unattributed::BadInput)?;
            let base = if pattern.starts_with('/') { PathBuf::from("/") } else { dir_arg("dir_path")? };
            vec![need(tools::glob_base(base, pattern), Access::List)]
        }
        "grep_search" => {
            let dir = dir_arg("dir_path")?;
            // Whether a search path was a file or a folder is read from the file system
            // where the history is converted; the project root is a folder.
            match a.get("dir_path").and_then(Value::as_str).filter(|p| !p.is_empty()).map(|_| tools::probe_fs(&dir)) {
                None | Some(Probe::Dir) => vec![need(dir, Access::List)],
                Some(Probe::File) => vec![need(dir, Access::Read)],
                Some(_) => return Err(Unattributed::SearchTarget),
            }
        }
        "read_many_files" => {
            // The files it read, as its result lists them (relative to its target folder).
            let files = c.display.get("files").and_then(Value::as_array).ok_or(Unattributed::SearchTarget)?;
            let target = c.display.get("targetDir").and_then(Value::as_str).map(PathBuf::from).or_else(|| cwd.map(Path::to_path_buf));
            let mut needs = Vec::new();
            for f in files {
                let f = f.as_str().ok_or(Unattributed::BadInput)?;
                needs.push(need(tools::absolute(&c.name, f, target.as_deref()).map_err(|_| Unattributed::BadInput)?, Access::Read));
            }
            needs
        }
        _ => unreachable!("checked against FILE_TOOLS"),
    })
}

fn finish(c: &Call, turn: &Turn, cwd: Option<&Path>, out: &mut Parsed) {
    let result = match c.status.as_deref() {
        _ if c.name == SHELL_TOOL => Err(Unattributed::ShellCommand),
        _ if !FILE_TOOLS.contains(&c.name.as_str()) => Err(Unattributed::OtherTool),
        Some("success") => resources(c, cwd),
        Some("error" | "cancelled") => Err(Unattributed::FailedCall),
        _ => Err(Unattributed::NoResult),
    };
    out.call(&turn.session, c.at, turn.order, turn.after_bad_line, result);
}

#[derive(Default)]
struct State {
    session: Option<String>,
    /// `gemini` messages by id, and their ids in the order they first appeared.
    turns: HashMap<String, Turn>,
    turn_ids: Vec<String>,
    /// User messages already read (a message written again is not a second prompt).
    users: HashSet<String>,
    after_bad_line: bool,
}

/// Parses one chat file (`index` orders it among the inputs).
pub(crate) fn parse(index: usize, file: &Path, text: &str, out: &mut Parsed) {
    let cwd = project_root(file);
    let mut st = State::default();
    for (n, line) in crate::jsonl::parse_lines::<Value>(text) {
        if let Err(problem) = line.map_err(LineProblem::Json).and_then(|v| parse_line(index, n, v, &mut st, out)) {
            out.error(file, n, problem);
            st.after_bad_line = true;
        }
    }
    for id in &st.turn_ids {
        let turn = &st.turns[id];
        for c in &turn.calls {
            finish(c, turn, cwd.as_deref(), out);
        }
    }
}

fn parse_line(index: usize, n: usize, v: Value, st: &mut State, out: &mut Parsed) -> Result<(), LineProblem> {
    let Some(o) = v.as_object() else { return Err(LineProblem::NotObject) };
    if o.contains_key("$rewindTo") {
        return Ok(());
    }
    if !o.contains_key("id") {
        if let Some(set) = o.get("$set") {
            if !set.is_object() {
                return Err(LineProblem::WrongType { field: "$set", expected: "an object" });
            }
            if st.session.is_none() {
                st.session = set.get("sessionId").and_then(Value::as_str).map(str::to_string);
            }
            return Ok(());
        }
        if o.contains_key("sessionId") {
            st.session = Some(str_field(&v, "sessionId")?.to_string());
            return Ok(());
        }
        return Err(LineProblem::Missing("id"));
    }
    let id = str_field(&v, "id")?.to_string();
    let kind = str_field(&v, "type")?;
    if kind != "user" && kind != "gemini" {
        return Ok(());
    }
    let at = time_field(&v, "timestamp")?;
    let session = st.session.clone().ok_or(LineProblem::NoSession(if kind == "user" { "user message" } else { "model message" }))?;
    if kind == "user" {
        let content = v.get("content").ok_or(LineProblem::Missing("content"))?;
        let Some(sent) = text_of(content) else { return Ok(()) };
        if !st.users.insert(id) {
            return Ok(());
        }
        let text = match v.get("displayContent") {
            None | Some(Value::Null) => sent,
            Some(d) => text_of(d).unwrap_or(sent),
        };
        let trimmed = text.trim();
        if trimmed.is_empty() || NOT_PROMPTS.iter().any(|p| trimmed.starts_with(p)) {
            out.skipped.push(Unattributed::NotAPrompt);
            return Ok(());
        }
        out.prompts.push(Prompt { session, at, order: (index, n), text });
        st.after_bad_line = false;
        return Ok(());
    }
    let calls = match v.get("toolCalls") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(a)) => &a[..],
        Some(_) => return Err(LineProblem::WrongType { field: "toolCalls", expected: "an array" }),
    };
    let mut read = Vec::with_capacity(calls.len());
    for c in calls {
        if !c.is_object() {
            return Err(LineProblem::WrongType { field: "toolCalls[]", expected: "an object" });
        }
        let name = str_field(c, "name").map_err(|_| LineProblem::Missing("toolCalls[].name"))?.to_string();
        let call_at = match c.get("timestamp") {
            None | Some(Value::Null) => at,
            Some(_) => time_field(c, "timestamp").map_err(|e| match e {
                LineProblem::BadTime { value, .. } => LineProblem::BadTime { field: "toolCalls[].timestamp", value },
                _ => LineProblem::WrongType { field: "toolCalls[].timestamp", expected: "a string" },
            })?,
        };
        read.push(Call {
            at: call_at,
            name,
            args: c.get("args").cloned().unwrap_or(Value::Null),
            status: c.get("status").and_then(Value::as_str).map(str::to_string),
            display: c.get("resultDisplay").cloned().unwrap_or(Value::Null),
        });
    }
    let turn = Turn { session, order: (index, n), after_bad_line: st.after_bad_line, calls: read };
    if st.turns.insert(id.clone(), turn).is_none() {
        st.turn_ids.push(id);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(name: &str, args: Value, display: Value) -> Call {
        Call { at: 0, name: name.into(), args, status: Some("success".into()), display }
    }

    fn res(c: Call) -> Result<Vec<(String, Access)>, Unattributed> {
        resources(&c, Some(Path::new("/w"))).map(|v| v.into_iter().map(|n| (n.path.display().to_string(), n.access)).collect())
    }

    #[test]
    fn each_file_tool_names_its_resources() {
        use Access::*;
        assert_eq!(res(call("read_file", json!({"file_path": "a.md"}), Value::Null)), Ok(vec![("/w/a.md".into(), Read)]));
        assert_eq!(res(call("write_file", json!({"file_path": "/w/a.md"}), json!({"isNewFile": true}))), Ok(vec![("/w/a.md".into(), Create)]));
        assert_eq!(res(call("write_file", json!({"file_path": "/w/a.md"}), json!({"isNewFile": false}))), Ok(vec![("/w/a.md".into(), Write)]));
        assert_eq!(res(call("write_file", json!({"file_path": "/w/a.md"}), Value::Null)), Err(Unattributed::CreateOrWrite));
        assert_eq!(res(call("replace", json!({"file_path": "a.md", "old_string": "x"}), Value::Null)), Ok(vec![("/w/a.md".into(), Read), ("/w/a.md".into(), Write)]));
        assert_eq!(res(call("replace", json!({"file_path": "a.md", "old_string": ""}), Value::Null)), Ok(vec![("/w/a.md".into(), Create)]));
        assert_eq!(res(call("replace", json!({"file_path": "a.md", "old_string": "x"}), json!({"isNewFile": true}))), Ok(vec![("/w/a.md".into(), Create)]));
        assert_eq!(res(call("list_directory", json!({"dir_path": "src"}), Value::Null)), Ok(vec![("/w/src".into(), List)]));
        assert_eq!(res(call("glob", json!({"pattern": "src/**/*.rs"}), Value::Null)), Ok(vec![("/w/src".into(), List)]));
        assert_eq!(res(call("glob", json!({"pattern": "*.md", "dir_path": "/w/notes"}), Value::Null)), Ok(vec![("/w/notes".into(), List)]));
        assert_eq!(res(call("grep_search", json!({"pattern": "x"}), Value::Null)), Ok(vec![("/w".into(), List)]));
        assert_eq!(res(call("grep_search", json!({"pattern": "x", "dir_path": "/nonexistent/pincer/x"}), Value::Null)), Err(Unattributed::SearchTarget));
        let many = json!({"files": ["a.md", "notes/b.md"], "targetDir": "/w"});
        assert_eq!(res(call("read_many_files", json!({"include": ["a.md", "notes/*.md"]}), many)), Ok(vec![("/w/a.md".into(), Read), ("/w/notes/b.md".into(), Read)]));
        assert_eq!(res(call("read_many_files", json!({"include": ["*.md"]}), Value::Null)), Err(Unattributed::SearchTarget));
        assert_eq!(res(call("read_file", json!({}), Value::Null)), Err(Unattributed::BadInput));
        assert_eq!(resources(&call("read_file", json!({"file_path": "a.md"}), Value::Null), None), Err(Unattributed::BadInput));
    }

    #[test]
    fn prompt_text_is_what_the_user_typed() {
        assert_eq!(text_of(&json!([{"text": "say "}, {"text": "hi"}])).as_deref(), Some("say hi"));
        assert_eq!(text_of(&json!("hi")).as_deref(), Some("hi"));
        assert_eq!(text_of(&json!([{"functionResponse": {"id": "x", "name": "read_file", "response": {"output": "x"}}}])), None);
    }
}
