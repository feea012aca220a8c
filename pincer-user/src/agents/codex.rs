//! Codex's session rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`): one
//! JSON object per line, `{"timestamp", "type", "payload"}`. `session_meta` names the session
//! (`payload.id`) and its `cwd`; `turn_context` a later `cwd`; `event_msg` with
//! `payload.type` `user_message` holds a prompt as the user typed it (`payload.message`);
//! `response_item` holds the model's tool calls (`function_call` with `name`, JSON
//! `arguments` and `call_id`; `custom_tool_call` with a raw `input`; `local_shell_call`) and
//! their outputs (`function_call_output`, `custom_tool_call_output`: `call_id`, `output`).
//! `event_msg` `patch_apply_end` says whether a patch applied.
//!
//! Codex edits files with `apply_patch` (a custom tool, a function, or an `apply_patch`
//! command line); its `*** Add File`, `*** Update File` (with `*** Move to`) and
//! `*** Delete File` headers name the files. Other shell commands are counted, not read.

use super::tools::{self, Need};
use super::transcript::{parse_time, LineProblem, Order, Parsed, Prompt, Unattributed};
use crate::access::Access;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Tool names Codex runs shell commands under.
const SHELL_TOOLS: [&str; 6] = ["shell", "container.exec", "local_shell", "exec_command", "shell_command", "unified_exec"];

enum Input {
    /// `function_call` arguments, parsed (`None`: not JSON).
    Args(Option<Value>),
    /// A custom tool's raw input.
    Raw(String),
    /// A local shell call's command vector.
    Command(Vec<String>),
}

struct Call {
    session: String,
    at: i64,
    order: Order,
    name: String,
    input: Input,
    cwd: Option<PathBuf>,
    after_bad_line: bool,
}

#[derive(Clone, Copy)]
enum Outcome {
    Done,
    Failed,
}

fn str_field<'v>(v: &'v Value, field: &'static str) -> Result<&'v str, LineProblem> {
    match v.get(field) {
        None | Some(Value::Null) => Err(LineProblem::Missing(field)),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(LineProblem::WrongType { field, expected: "a string" }),
    }
}

/// Whether a tool output reports a failure: a non-zero `metadata.exit_code` (JSON output),
/// an `Exit code: N` first line, or `success: false`.
fn outcome_of(output: &Value) -> Outcome {
    let text = match output {
        Value::String(s) => s.as_str(),
        Value::Object(o) => {
            if o.get("success").and_then(Value::as_bool) == Some(false) {
                return Outcome::Failed;
            }
            o.get("content").and_then(Value::as_str).unwrap_or("")
        }
        _ => "",
    };
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        if let Some(code) = v.pointer("/metadata/exit_code").and_then(Value::as_i64) {
            return if code == 0 { Outcome::Done } else { Outcome::Failed };
        }
    }
    // A plain-text output opens with header lines (`Chunk ID:`, `Wall time:`, `Process
    // exited with code N`, `Exit code: N`, `Original token count:`, `Output:`; an
    // `apply_patch` run through the shell tool nests its own `Exit code:` after the outer
    // `Output:`); the first exit code among them decides. The command's own output, after
    // the headers, is never read for one.
    for line in text.lines() {
        let code = line.strip_prefix("Exit code: ").or_else(|| line.strip_prefix("Process exited with code "));
        if let Some(rest) = code {
            let code: String = rest.chars().take_while(|c| c.is_ascii_digit() || *c == '-').collect();
            return if code.parse::<i64>().is_ok_and(|c| c != 0) { Outcome::Failed } else { Outcome::Done };
        }
        const HEADERS: [&str; 5] = ["Chunk ID:", "Wall time:", "Original token count:", "Output:", "Process running with session ID"];
        if !HEADERS.iter().any(|h| line.starts_with(h)) {
            break;
        }
    }
    Outcome::Done
}

/// The resources an `apply_patch` patch touches, paths taken from `cwd`.
pub fn patch_resources(patch: &str, cwd: Option<&Path>) -> Result<Vec<Need>, Unattributed> {
    let mut needs = Vec::new();
    let abs = |p: &str| tools::absolute("apply_patch", p.trim(), cwd).map_err(|_| Unattributed::BadInput);
    let mut updated: Option<PathBuf> = None;
    for line in patch.lines() {
        if let Some(p) = line.strip_prefix("*** Add File: ") {
            needs.push(Need { path: abs(p)?, access: Access::Create });
        } else if let Some(p) = line.strip_prefix("*** Delete File: ") {
            needs.push(Need { path: abs(p)?, access: Access::Delete });
        } else if let Some(p) = line.strip_prefix("*** Update File: ") {
            let p = abs(p)?;
            needs.push(Need { path: p.clone(), access: Access::Read });
            needs.push(Need { path: p.clone(), access: Access::Write });
            updated = Some(p);
        } else if let Some(to) = line.strip_prefix("*** Move to: ") {
            // A rename: the old name is deleted and the new one created with the content.
            let from = updated.take().ok_or(Unattributed::BadInput)?;
            needs.retain(|n| !(n.path == from && n.access == Access::Write));
            needs.push(Need { path: from, access: Access::Delete });
            needs.push(Need { path: abs(to)?, access: Access::Create });
        }
    }
    if needs.is_empty() {
        return Err(Unattributed::BadInput);
    }
    Ok(needs)
}

/// The patch of an `apply_patch` command line (`["apply_patch", PATCH]`, or a shell script
/// that is `apply_patch` with the patch in a here-document).
fn patch_in_command(argv: &[String]) -> Option<String> {
    match argv {
        [cmd, patch] if cmd == "apply_patch" || cmd == "applypatch" => Some(patch.clone()),
        [shell, flag, script] if (shell.ends_with("sh")) && flag.starts_with('-') && flag.ends_with('c') => {
            let s = script.trim_start();
            if !(s.starts_with("apply_patch") || s.starts_with("applypatch")) {
                return None;
            }
            let start = s.find("*** Begin Patch")?;
            let end = s.find("*** End Patch")? + "*** End Patch".len();
            (end > start).then(|| s[start..end].to_string())
        }
        _ => None,
    }
}

fn command_of(args: &Value) -> Option<Vec<String>> {
    match args.get("command").or_else(|| args.get("cmd"))? {
        Value::Array(a) => a.iter().map(|x| x.as_str().map(str::to_string)).collect(),
        Value::String(s) => Some(vec!["bash".into(), "-lc".into(), s.clone()]),
        _ => None,
    }
}

fn resources(c: &Call) -> Result<Vec<Need>, Unattributed> {
    let args = match &c.input {
        Input::Args(Some(a)) => Some(a),
        _ => None,
    };
    let workdir = args.and_then(|a| a.get("workdir")).and_then(Value::as_str).map(PathBuf::from);
    let cwd = workdir.or_else(|| c.cwd.clone());
    let cwd = cwd.as_deref();
    let path_arg = |field: &str| -> Result<PathBuf, Unattributed> {
        let p = args.and_then(|a| a.get(field)).and_then(Value::as_str).ok_or(Unattributed::BadInput)?;
        tools::absolute(&c.name, p, cwd).map_err(|_| Unattributed::BadInput)
    };
    let one = |path, access| Ok(vec![Need { path, access }]);
    match (c.name.as_str(), &c.input) {
        ("apply_patch", Input::Raw(patch)) => patch_resources(patch, cwd),
        ("apply_patch", Input::Args(Some(a))) => {
            let patch = a.get("input").or_else(|| a.get("patch")).and_then(Value::as_str).ok_or(Unattributed::BadInput)?;
            patch_resources(patch, cwd)
        }
        (_, Input::Command(argv)) => patch_in_command(argv).map_or(Err(Unattributed::ShellCommand), |p| patch_resources(&p, cwd)),
        (name, Input::Args(a)) if SHELL_TOOLS.contains(&name) => {
            let argv = a.as_ref().and_then(command_of).ok_or(Unattributed::ShellCommand)?;
            patch_in_command(&argv).map_or(Err(Unattributed::ShellCommand), |p| patch_resources(&p, cwd))
        }
        ("read_file" | "view_image", _) => one(path_arg(if c.name == "read_file" { "file_path" } else { "path" })?, Access::Read),
        ("list_dir", _) => one(path_arg("dir_path")?, Access::List),
        ("grep_files", _) => match path_arg("path") {
            Ok(p) => one(p, Access::List),
            Err(_) => cwd.map_or(Err(Unattributed::BadInput), |d| one(d.to_path_buf(), Access::List)),
        },
        ("apply_patch", _) => Err(Unattributed::BadInput),
        _ => Err(Unattributed::OtherTool),
    }
}

fn finish(c: &Call, outcome: Option<Outcome>, out: &mut Parsed) {
    let result = match resources(c) {
        Err(why) => Err(why),
        Ok(needs) => match outcome {
            Some(Outcome::Done) => Ok(needs),
            Some(Outcome::Failed) => Err(Unattributed::FailedCall),
            None => Err(Unattributed::NoResult),
        },
    };
    out.call(&c.session, c.at, c.order, c.after_bad_line, result);
}

#[derive(Default)]
struct State {
    session: Option<String>,
    cwd: Option<PathBuf>,
    calls: Vec<Call>,
    outputs: HashMap<String, Outcome>,
    patch_ends: HashMap<String, Outcome>,
    ids: Vec<String>,
    after_bad_line: bool,
    /// The last prompt's text and how many tool calls had been seen then.
    last_prompt: Option<(String, usize)>,
}

/// Parses one rollout file (`index` orders it among the inputs).
pub(crate) fn parse(index: usize, file: &Path, text: &str, out: &mut Parsed) {
    let mut st = State::default();
    for (n, line) in crate::jsonl::parse_lines::<Value>(text) {
        if let Err(problem) = line.map_err(LineProblem::Json).and_then(|v| parse_line(index, n, v, &mut st, out)) {
            out.error(file, n, problem);
            st.after_bad_line = true;
        }
    }
    for (c, id) in st.calls.iter().zip(&st.ids) {
        let outcome = st.patch_ends.get(id).or_else(|| st.outputs.get(id)).copied();
        finish(c, outcome, out);
    }
}

fn parse_line(index: usize, n: usize, v: Value, st: &mut State, out: &mut Parsed) -> Result<(), LineProblem> {
    if !v.is_object() {
        return Err(LineProblem::NotObject);
    }
    let kind = str_field(&v, "type")?;
    let ts = str_field(&v, "timestamp")?;
    let at = parse_time(ts).ok_or_else(|| LineProblem::BadTime { field: "timestamp", value: ts.into() })?;
    let payload = match v.get("payload") {
        Some(p) if p.is_object() => p,
        Some(_) => return Err(LineProblem::WrongType { field: "payload", expected: "an object" }),
        None => return Err(LineProblem::Missing("payload")),
    };
    let ptype = payload.get("type").and_then(Value::as_str).unwrap_or("");
    match kind {
        "session_meta" => {
            st.session = Some(str_field(payload, "id").map_err(|_| LineProblem::Missing("payload.id"))?.to_string());
            st.cwd = payload.get("cwd").and_then(Value::as_str).map(PathBuf::from).or(st.cwd.take());
        }
        "turn_context" => {
            if let Some(c) = payload.get("cwd").and_then(Value::as_str) {
                st.cwd = Some(PathBuf::from(c));
            }
        }
        "event_msg" if ptype == "user_message" || (ptype == "item_completed" && payload.pointer("/item/type").and_then(Value::as_str) == Some("UserMessage")) => {
            // Older Codex writes `user_message` with the text in `message`; newer (0.17x)
            // an `item_completed` whose `UserMessage` item holds text parts.
            let text = if ptype == "user_message" {
                str_field(payload, "message").map_err(|_| LineProblem::Missing("payload.message"))?.to_string()
            } else {
                let parts = payload.pointer("/item/content").and_then(Value::as_array).ok_or(LineProblem::Missing("payload.item.content"))?;
                parts.iter().filter(|p| p.get("type").and_then(Value::as_str) == Some("text")).filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n")
            };
            let session = st.session.clone().ok_or(LineProblem::NoSession("user message"))?;
            // A version that writes both forms records one prompt twice, with no tool call
            // between: the second is the same prompt.
            let repeated = st.last_prompt.as_ref().is_some_and(|(t, calls)| *t == text && *calls == st.calls.len());
            if text.trim().is_empty() {
                out.skipped.push(Unattributed::NotAPrompt);
            } else if !repeated {
                out.prompts.push(Prompt { session, at, order: (index, n), text: text.clone() });
                st.last_prompt = Some((text, st.calls.len()));
                st.after_bad_line = false;
            }
        }
        "event_msg" if ptype == "patch_apply_end" => {
            let id = str_field(payload, "call_id").map_err(|_| LineProblem::Missing("payload.call_id"))?;
            let ok = payload.get("success").and_then(Value::as_bool).ok_or(LineProblem::Missing("payload.success"))?;
            st.patch_ends.insert(id.to_string(), if ok { Outcome::Done } else { Outcome::Failed });
        }
        "response_item" => match ptype {
            "function_call" | "custom_tool_call" | "local_shell_call" => {
                let session = st.session.clone().ok_or(LineProblem::NoSession("tool call"))?;
                let id = payload.get("call_id").or_else(|| payload.get("id")).and_then(Value::as_str).ok_or(LineProblem::Missing("payload.call_id"))?;
                let (name, input) = match ptype {
                    "function_call" => {
                        let name = str_field(payload, "name").map_err(|_| LineProblem::Missing("payload.name"))?;
                        let args = payload.get("arguments").and_then(Value::as_str).and_then(|a| serde_json::from_str(a).ok());
                        (name.to_string(), Input::Args(args))
                    }
                    "custom_tool_call" => {
                        let name = str_field(payload, "name").map_err(|_| LineProblem::Missing("payload.name"))?;
                        let input = str_field(payload, "input").map_err(|_| LineProblem::Missing("payload.input"))?;
                        (name.to_string(), Input::Raw(input.to_string()))
                    }
                    _ => {
                        let argv = payload.pointer("/action/command").and_then(|c| c.as_array().map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect()));
                        ("local_shell".to_string(), Input::Command(argv.unwrap_or_default()))
                    }
                };
                st.ids.push(id.to_string());
                st.calls.push(Call { session, at, order: (index, n), name, input, cwd: st.cwd.clone(), after_bad_line: st.after_bad_line });
            }
            "function_call_output" | "custom_tool_call_output" => {
                let id = str_field(payload, "call_id").map_err(|_| LineProblem::Missing("payload.call_id"))?;
                let output = payload.get("output").ok_or(LineProblem::Missing("payload.output"))?;
                st.outputs.insert(id.to_string(), outcome_of(output));
            }
            _ => {}
        },
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_headers_name_creates_writes_deletes_and_renames() {
        let patch = "*** Begin Patch\n*** Add File: docs/new.md\n+hi\n*** Update File: src/a.rs\n@@\n-x\n+y\n*** Update File: src/old.rs\n*** Move to: src/new.rs\n@@\n*** Delete File: /w/gone.txt\n*** End Patch";
        let needs = patch_resources(patch, Some(Path::new("/w"))).unwrap();
        let got: Vec<(String, Access)> = needs.into_iter().map(|n| (n.path.display().to_string(), n.access)).collect();
        assert_eq!(
            got,
            [
                ("/w/docs/new.md".into(), Access::Create),
                ("/w/src/a.rs".into(), Access::Read),
                ("/w/src/a.rs".into(), Access::Write),
                ("/w/src/old.rs".into(), Access::Read),
                ("/w/src/old.rs".into(), Access::Delete),
                ("/w/src/new.rs".into(), Access::Create),
                ("/w/gone.txt".into(), Access::Delete),
            ]
        );
        assert_eq!(patch_resources("no headers", None), Err(Unattributed::BadInput));
    }

    #[test]
    fn apply_patch_is_found_in_command_lines() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert!(patch_in_command(&v(&["apply_patch", "*** Begin Patch\n*** End Patch"])).is_some());
        let script = "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: a\n+x\n*** End Patch\nEOF\n";
        assert_eq!(patch_in_command(&v(&["bash", "-lc", script])).unwrap(), "*** Begin Patch\n*** Add File: a\n+x\n*** End Patch");
        assert!(patch_in_command(&v(&["bash", "-lc", "cat a.txt"])).is_none());
    }

    #[test]
    fn tool_outputs_report_failure_by_exit_code() {
        assert!(matches!(outcome_of(&Value::String(r#"{"output":"x","metadata":{"exit_code":1}}"#.into())), Outcome::Failed));
        assert!(matches!(outcome_of(&Value::String(r#"{"output":"x","metadata":{"exit_code":0}}"#.into())), Outcome::Done));
        assert!(matches!(outcome_of(&Value::String("Exit code: 2\nWall time: 0.1 seconds".into())), Outcome::Failed));
        assert!(matches!(outcome_of(&serde_json::json!({"content": "x", "success": false})), Outcome::Failed));
        assert!(matches!(outcome_of(&Value::String("Success. Updated the following files:\nA a".into())), Outcome::Done));
        // Codex 0.17x: the shell tool's headers, and apply_patch's nested in its output.
        let exec = |code: i32, out: &str| Value::String(format!("Chunk ID: 2103bb\nWall time: 0.0000 seconds\nProcess exited with code {code}\nOriginal token count: 14\nOutput:\n{out}"));
        assert!(matches!(outcome_of(&exec(0, "hi\n")), Outcome::Done));
        assert!(matches!(outcome_of(&exec(1, "cat: x: Permission denied\n")), Outcome::Failed));
        assert!(matches!(outcome_of(&exec(0, "Exit code: 1\n")), Outcome::Done), "the command's output is not a header");
        let patch = |code: i32| Value::String(format!("Wall time: 0.0000 seconds\nOutput:\nExit code: {code}\nWall time: 0 seconds\nOutput:\nSuccess. Updated the following files:\nM calc.py\n"));
        assert!(matches!(outcome_of(&patch(0)), Outcome::Done));
        assert!(matches!(outcome_of(&patch(1)), Outcome::Failed));
    }

    /// Lines of a Codex 0.171 rollout (`codex exec`), cut to the fields read.
    fn rollout_0171(prompt: &str) -> String {
        let lines = [
            serde_json::json!({"timestamp": "2026-12-02T18:07:37.952Z", "type": "session_meta", "payload": {"id": "s1", "cwd": "/w/proj", "cli_version": "0.171.0"}}),
            serde_json::json!({"timestamp": "2026-12-02T18:07:38.000Z", "type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>\n  <cwd>/w/proj</cwd>\n</environment_context>"}]}}),
            serde_json::json!({"timestamp": "2026-12-02T18:07:38.070Z", "type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]}}),
            serde_json::json!({"timestamp": "2026-12-02T18:07:38.071Z", "type": "event_msg", "payload": {"type": "item_completed", "item": {"type": "UserMessage", "id": "u1", "content": [{"type": "text", "text": prompt, "text_elements": []}]}}}),
            serde_json::json!({"timestamp": "2026-12-02T18:07:38.100Z", "type": "response_item", "payload": {"type": "function_call", "name": "exec_command", "arguments": "{\"cmd\": \"apply_patch <<'EOF'\\n*** Begin Patch\\n*** Update File: calc.py\\n@@\\n-a\\n+b\\n*** End Patch\\nEOF\", \"workdir\": \"/w/proj\"}", "call_id": "c1"}}),
            serde_json::json!({"timestamp": "2026-12-02T18:07:38.200Z", "type": "response_item", "payload": {"type": "function_call_output", "call_id": "c1", "output": "Wall time: 0.0000 seconds\nOutput:\nExit code: 0\nWall time: 0 seconds\nOutput:\nSuccess. Updated the following files:\nM calc.py\n"}}),
            serde_json::json!({"timestamp": "2026-12-02T18:07:38.300Z", "type": "response_item", "payload": {"type": "function_call", "name": "exec_command", "arguments": "{\"cmd\": \"cat README.md\"}", "call_id": "c2"}}),
            serde_json::json!({"timestamp": "2026-12-02T18:07:38.400Z", "type": "response_item", "payload": {"type": "function_call_output", "call_id": "c2", "output": "Chunk ID: 1\nWall time: 0.0 seconds\nProcess exited with code 0\nOutput:\n# calc\n"}}),
        ];
        lines.iter().map(|l| format!("{l}\n")).collect()
    }

    #[test]
    fn a_codex_0171_prompt_is_its_user_message_item_and_its_patch_through_the_shell_tool_counts() {
        let mut parsed = Parsed::default();
        parse(0, Path::new("rollout.jsonl"), &rollout_0171("Fix add in calc."), &mut parsed);
        assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
        let prompts: Vec<&str> = parsed.prompts.iter().map(|p| p.text.as_str()).collect();
        assert_eq!(prompts, ["Fix add in calc."], "the environment context and the model-input copy are not prompts");
        let touched: Vec<(String, Access)> = parsed.touches.iter().flat_map(|t| t.needs.iter().map(|n| (n.path.display().to_string(), n.access))).collect();
        assert_eq!(touched, [("/w/proj/calc.py".to_string(), Access::Read), ("/w/proj/calc.py".to_string(), Access::Write)]);
        assert_eq!(parsed.skipped, [Unattributed::ShellCommand], "`cat` through the shell tool is counted, not read");
        // Both forms of one prompt (a version that writes both): one prompt.
        let extra = serde_json::json!({"timestamp": "2026-12-02T18:07:38.072Z", "type": "event_msg", "payload": {"type": "user_message", "message": "Fix add."}});
        let mut lines: Vec<String> = rollout_0171("Fix add.").lines().map(str::to_owned).collect();
        lines.insert(4, extra.to_string());
        let mut parsed = Parsed::default();
        parse(0, Path::new("rollout.jsonl"), &(lines.join("\n") + "\n"), &mut parsed);
        assert_eq!(parsed.prompts.len(), 1);
    }
}
