//! `pincer mcp`: an MCP server on stdio (JSON-RPC 2.0, one message per line) exposing the
//! resource request tool as `request_resource`, so an agent such as Claude Code, Codex or
//! Gemini CLI can ask the twin for access. Every failure to reach the daemon is a denial.

use super::client::Client;
use super::protocol::{Call, Reply};
use crate::access::Access;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};

/// The MCP protocol versions this server speaks, newest first.
pub const PROTOCOL_VERSIONS: [&str; 3] = ["2025-06-18", "2025-03-26", "2024-11-05"];
/// The tool's name.
pub const TOOL: &str = "request_resource";

/// Errors of the MCP server's transport (protocol errors are answered, not returned).
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// stdin or stdout failed.
    #[error("MCP stdio transport failed")]
    Io(#[from] std::io::Error),
}

fn tool() -> Value {
    json!({
        "name": TOOL,
        "title": "Request access to a protected resource",
        "description": "Ask Pincer for access to a file or directory in a protected workspace before touching it. \
            Access is denied by the kernel until granted. Give the path, the access type and a short reason. \
            A denial is final for now; do not retry the same request with a different wording.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Path of the resource (absolute, or relative to the agent's working directory)."},
                "access": {"type": "string", "enum": ["read", "write", "create", "delete", "list"], "description": "What to do with it."},
                "reason": {"type": "string", "description": "Why the task needs it."}
            },
            "required": ["path", "access"]
        }
    })
}

fn ok(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn err(id: &Value, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}})
}

fn text_result(text: String, is_error: bool) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": is_error})
}

/// Asks the daemon for one resource; the text says what was decided.
pub async fn request(socket: &Path, cwd: &Path, path: &str, access: Access, reason: Option<String>) -> (bool, String) {
    let abs = if Path::new(path).is_absolute() { PathBuf::from(path) } else { cwd.join(path) };
    let abs = abs.to_string_lossy().into_owned();
    let reply = match Client::connect(socket).await {
        Ok(mut c) => c.call(Call::Request { path: abs.clone(), access, reason, session: None }).await,
        Err(e) => Err(e),
    };
    match reply {
        Ok(Reply::Decision { granted: true, .. }) => (true, format!("granted: {access} {abs}")),
        Ok(Reply::Decision { outcome, reason, .. }) => (false, format!("denied ({outcome}): {access} {abs}: {reason}")),
        Ok(Reply::Error { message, .. }) => (false, format!("denied: {access} {abs}: {message}")),
        Ok(other) => (false, format!("denied: unexpected daemon reply {other:?}")),
        Err(e) => (false, format!("denied: {e}")),
    }
}

/// Handles one JSON-RPC message; `None` for notifications.
pub async fn handle(msg: &Value, socket: &Path, cwd: &Path) -> Option<Value> {
    let Some(obj) = msg.as_object() else {
        return Some(err(&Value::Null, -32600, "invalid request: not a JSON object (batches are not supported)"));
    };
    let id = obj.get("id").cloned();
    let method = obj.get("method").and_then(Value::as_str);
    let (Some(id), Some(method)) = (id, method) else {
        // Notifications (no id) and responses get no answer.
        return None;
    };
    let params = obj.get("params").cloned().unwrap_or(json!({}));
    Some(match method {
        "initialize" => {
            let asked = params.get("protocolVersion").and_then(Value::as_str).unwrap_or("");
            let version = PROTOCOL_VERSIONS.iter().find(|v| **v == asked).copied().unwrap_or(PROTOCOL_VERSIONS[0]);
            ok(
                &id,
                json!({
                    "protocolVersion": version,
                    "capabilities": {"tools": {"listChanged": false}},
                    "serverInfo": {"name": "pincer", "version": env!("CARGO_PKG_VERSION")},
                    "instructions": "Files under the protected workspace are denied until Pincer grants them. \
                        Call request_resource before reading, writing, creating, deleting or listing them."
                }),
            )
        }
        "ping" => ok(&id, json!({})),
        "tools/list" => ok(&id, json!({"tools": [tool()]})),
        "tools/call" => {
            let name = params.get("name").and_then(Value::as_str).unwrap_or("");
            if name != TOOL {
                return Some(err(&id, -32602, format!("unknown tool {name:?} (this server has {TOOL})")));
            }
            let args = params.get("arguments").cloned().unwrap_or(json!({}));
            let Some(path) = args.get("path").and_then(Value::as_str) else {
                return Some(ok(&id, text_result("denied: the `path` argument is missing".into(), true)));
            };
            let access = match args.get("access").and_then(Value::as_str).map(str::parse::<Access>) {
                Some(Ok(a)) => a,
                Some(Err(e)) => return Some(ok(&id, text_result(format!("denied: {e}"), true))),
                None => return Some(ok(&id, text_result("denied: the `access` argument is missing (read, write, create, delete or list)".into(), true))),
            };
            let reason = args.get("reason").and_then(Value::as_str).map(str::to_string);
            let (granted, text) = request(socket, cwd, path, access, reason).await;
            ok(&id, text_result(text, !granted))
        }
        other => err(&id, -32601, format!("method not found: {other}")),
    })
}

/// Serves MCP on `input`/`output` until `input` ends.
pub async fn serve<R, W>(input: R, mut output: W, socket: &Path) -> Result<(), McpError>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let cwd = std::env::current_dir()?;
    let mut lines = input.lines();
    while let Some(line) = lines.next_line().await? {
        if line.trim().is_empty() {
            continue;
        }
        let reply = match serde_json::from_str::<Value>(&line) {
            Ok(msg) => handle(&msg, socket, &cwd).await,
            Err(e) => Some(err(&Value::Null, -32700, format!("parse error: {e}"))),
        };
        if let Some(r) = reply {
            let mut s = serde_json::to_string(&r).expect("JSON values serialize");
            s.push('\n');
            output.write_all(s.as_bytes()).await?;
            output.flush().await?;
        }
    }
    Ok(())
}
