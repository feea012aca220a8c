//! Claude Code's `PreToolUse` command hook (`pincer hook claude-code`).
//!
//! Claude Code runs the hook before each tool call with one JSON object on stdin
//! (`session_id`, `transcript_path`, `cwd`, `hook_event_name`, `tool_name`, `tool_input`, ...)
//! and reads a decision from stdout when the hook exits 0:
//!
//! ```json
//! {"hookSpecificOutput": {"hookEventName": "PreToolUse",
//!   "permissionDecision": "deny", "permissionDecisionReason": "..."}}
//! ```
//!
//! Exit code 2 blocks the call with stderr as the reason; any other non-zero exit lets the
//! call go ahead, so the hook never exits with one (a panic is turned into exit 2 by the
//! CLI). For the file tools ([`tools::FILE_TOOLS`]) the hook asks the daemon for every
//! resource inside the session's protected roots, waiting while a question waits for the
//! user, and allows only when every one is granted. Anything else (Bash, web, MCP tools)
//! gets no decision: the kernel gates what those do. An unreachable daemon, an error reply,
//! an unreadable answer or no answer within the deadline is a deny with its reason.

use super::tools::{self, Need, Probe};
use crate::daemon::client::Client;
use crate::daemon::protocol::{Call, Reply};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The hook event this hook answers.
pub const EVENT: &str = "PreToolUse";

/// How a denied agent can still ask (appended to every denial).
pub const HOW_TO_ASK: &str = "Files under Pincer's protected roots are denied by the kernel until the twin grants them, \
    for Bash commands too. To ask for one, run `pincer request PATH --access read|write|create|delete|list --reason WHY` \
    or call the `request_resource` tool of the `pincer mcp` server; do not retry a denied request with other wording.";

/// The hook's input (fields Claude Code adds beyond these are ignored).
#[derive(Debug, Clone, Deserialize)]
pub struct HookInput {
    /// Claude Code's session id.
    #[serde(default)]
    pub session_id: Option<String>,
    /// The session's transcript file.
    #[serde(default)]
    pub transcript_path: Option<String>,
    /// The working directory of the call.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// The hook event (`PreToolUse`).
    #[serde(default)]
    pub hook_event_name: Option<String>,
    /// The tool about to run.
    pub tool_name: String,
    /// Its input.
    #[serde(default)]
    pub tool_input: Value,
}

/// Why the hook's input could not be used (each is a denial, exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum HookInputError {
    /// stdin was not the JSON object of a hook call.
    #[error("the hook's input is not a Claude Code hook call: {0}")]
    Json(#[from] serde_json::Error),
    /// The hook was installed for another event.
    #[error("`pincer hook claude-code` answers PreToolUse hooks only, not {0:?} (fix the hook's event in the settings)")]
    WrongEvent(String),
}

/// Parses the hook's stdin.
pub fn parse_input(text: &str) -> Result<HookInput, HookInputError> {
    let input: HookInput = serde_json::from_str(text)?;
    match input.hook_event_name.as_deref() {
        None | Some(EVENT) => Ok(input),
        Some(other) => Err(HookInputError::WrongEvent(other.to_string())),
    }
}

/// The hook's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Every resource was granted.
    Allow(String),
    /// Something was denied, or could not be asked.
    Deny(String),
    /// Not Pincer's to decide (not a file tool, or nothing inside a protected root).
    Pass,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SpecificOutput<'a> {
    hook_event_name: &'static str,
    permission_decision: &'static str,
    permission_decision_reason: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Output<'a> {
    hook_specific_output: SpecificOutput<'a>,
}

impl Decision {
    /// The stdout JSON of the decision (`None` for [`Decision::Pass`]: no output at all).
    pub fn to_json(&self) -> Option<String> {
        let (decision, reason) = match self {
            Decision::Allow(r) => ("allow", r),
            Decision::Deny(r) => ("deny", r),
            Decision::Pass => return None,
        };
        let out = Output { hook_specific_output: SpecificOutput { hook_event_name: EVENT, permission_decision: decision, permission_decision_reason: reason } };
        Some(serde_json::to_string(&out).expect("the output serializes"))
    }
}

fn deny(why: impl std::fmt::Display) -> Decision {
    Decision::Deny(format!("Pincer: {why}. {HOW_TO_ASK}"))
}

/// Whether `path` lies in one of `roots`: by name, or once its longest existing ancestor is
/// resolved (a path through a symbolic link into a root goes to the daemon, which refuses it
/// by name).
fn in_roots(path: &Path, roots: &[PathBuf]) -> bool {
    if tools::has_dot_segments(path) || roots.iter().any(|r| path.starts_with(r)) {
        return true;
    }
    let mut probe = path.to_path_buf();
    loop {
        if let Ok(real) = probe.canonicalize() {
            return roots.iter().any(|r| real.starts_with(r));
        }
        if !probe.pop() {
            return false;
        }
    }
}

/// Asks the daemon for each resource in turn; the first denial ends it.
async fn ask(socket: &Path, tool: &str, needs: Vec<Need>) -> Decision {
    let mut client = match Client::connect(socket).await {
        Ok(c) => c,
        Err(e) => return deny(format!("cannot ask the daemon, so the {tool} call is denied: {e}")),
    };
    let roots = match client.call(Call::Status { session: None }).await {
        Ok(Reply::Session(info)) => info.roots,
        Ok(Reply::Error { message, .. }) => return deny(format!("the daemon refused to name this session's roots: {message}")),
        Ok(other) => return deny(format!("unexpected answer from the daemon to a status call: {other:?}")),
        Err(e) => return deny(format!("no answer from the daemon: {e}")),
    };
    let needs: Vec<Need> = needs.into_iter().filter(|n| in_roots(&n.path, &roots)).collect();
    if needs.is_empty() {
        return Decision::Pass;
    }
    let mut granted = Vec::new();
    for n in needs {
        let path = n.path.to_string_lossy().into_owned();
        let call = Call::Request { path: path.clone(), access: n.access, reason: Some(format!("Claude Code {tool} tool call")), session: None };
        match client.call(call).await {
            Ok(Reply::Decision { granted: true, .. }) => granted.push(format!("{} {path}", n.access)),
            Ok(Reply::Decision { granted: false, reason, .. }) => return deny(format!("{} {path} denied: {reason}", n.access)),
            Ok(Reply::Error { message, .. }) => return deny(format!("{} {path} refused by the daemon: {message}", n.access)),
            Ok(other) => return deny(format!("unexpected answer from the daemon for {} {path}: {other:?}", n.access)),
            Err(e) => return deny(format!("no decision for {} {path}: {e}", n.access)),
        }
    }
    Decision::Allow(format!("Pincer granted {}", granted.join(", ")))
}

/// Decides one hook call: the resources of a file tool are asked of the daemon at `socket`,
/// each answer awaited up to `deadline` in all (a question for the user included).
pub async fn decide(input: &HookInput, socket: &Path, deadline: Duration) -> Decision {
    let probe = |p: &Path| match tools::probe_fs(p) {
        // A path the hook cannot examine is asked as an existing one; the daemon decides.
        Probe::Unknown => Probe::File,
        known => known,
    };
    let needs = match tools::resources(&input.tool_name, &input.tool_input, input.cwd.as_deref(), &probe) {
        None => return Decision::Pass,
        Some(Err(e)) => return deny(e),
        Some(Ok(needs)) => needs,
    };
    match tokio::time::timeout(deadline, ask(socket, &input.tool_name, needs)).await {
        Ok(d) => d,
        Err(_) => deny(format!("no decision from the daemon within {} s, so the {} call is denied", deadline.as_secs(), input.tool_name)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_has_the_documented_shape() {
        let v: Value = serde_json::from_str(&Decision::Deny("no".into()).to_json().unwrap()).unwrap();
        assert_eq!(v, serde_json::json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "no"}}));
        assert!(Decision::Pass.to_json().is_none());
    }

    #[test]
    fn input_must_be_a_pre_tool_use_call() {
        let i = parse_input(r#"{"session_id":"s","cwd":"/w","hook_event_name":"PreToolUse","tool_name":"Read","tool_input":{"file_path":"/w/a"},"permission_mode":"default"}"#).unwrap();
        assert_eq!(i.tool_name, "Read");
        assert!(matches!(parse_input("{\"tool_name\": 3}"), Err(HookInputError::Json(_))));
        assert!(matches!(parse_input("not json"), Err(HookInputError::Json(_))));
        let e = parse_input(r#"{"hook_event_name":"PostToolUse","tool_name":"Read"}"#).unwrap_err();
        assert!(e.to_string().contains("PostToolUse"), "{e}");
    }

    #[test]
    fn roots_are_matched_by_name_or_by_the_real_path() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("ws")).unwrap();
        let root = d.path().join("ws").canonicalize().unwrap();
        std::os::unix::fs::symlink(&root, d.path().join("link")).unwrap();
        let roots = [root.clone()];
        assert!(in_roots(&root.join("missing/file"), &roots));
        assert!(in_roots(&d.path().join("link/notes/a.md"), &roots), "a path through a symlink into a root");
        assert!(!in_roots(Path::new("/usr/include/stdio.h"), &roots));
        assert!(in_roots(Path::new("/usr/../work/x"), &roots), "`..` paths go to the daemon, which refuses them");
    }
}
