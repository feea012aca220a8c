//! A scripted model for the agent tests: a local server of the Anthropic Messages API
//! (`POST /v1/messages`, for Claude Code), of the OpenAI Responses API (`POST
//! /v1/responses`, for Codex) and of the Gemini API (`POST
//! /v1beta/models/MODEL:streamGenerateContent?alt=sse` and `:generateContent`, for Gemini
//! CLI), streamed as server-sent events, that plays the model's side of a task given as a
//! script, so a real agent runs real tools without a model.
//!
//! The script (JSON in the environment variable `PINCER_MODEL_SCRIPT`) is a list of steps,
//! each one tool call: `{"name", "tool", "input", "expect", "retries"}`. The server answers
//! each request of the agent's main loop (one that offers tools) from the tool results the
//! request carries: the first step while there are none; after a result, the same step again
//! if the result failed (it is an error, or lacks the step's `expect` text) and the step
//! has retries left (a kernel that denies a first access at once and grants it a moment
//! later needs one; a retried shell command ends in a comment naming the try), else the
//! next step; after the last step a text answer ending the turn.
//! Requests without tools (the agent's side calls) get a short text answer. A Responses
//! API tool result (`function_call_output`) has no error flag: its step needs an `expect`.
//!
//! What it saw is printed on standard error, one line each, for the test to read:
//! `MODEL-RESULT {"step", "try", "name", "ok", "is_error", "content", "at_ms"}` for each tool
//! result the first time it arrives (content cut at 4000 bytes; `at_ms`: when, in ms since the
//! Unix epoch), `MODEL-REQUEST {"n", "tools",
//! "results", "bytes", "watched"}` for each request, where `watched` tells whether the body
//! held one of the lines of `PINCER_MODEL_WATCH` (secrets that must never reach the model), and
//! `MODEL-LISTEN PORT` once it listens. Usage: `pincer-model [--port N]` (default 0: any
//! free port on 127.0.0.1), with `--port-file FILE` to write the port to.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// One tool call of the script.
#[derive(Debug, Clone)]
struct Step {
    name: String,
    tool: String,
    input: Value,
    expect: Option<String>,
    retries: u32,
}

impl Step {
    fn from_json(v: &Value) -> Step {
        Step {
            name: v["name"].as_str().unwrap_or("step").to_owned(),
            tool: v["tool"].as_str().expect("a script step names its tool").to_owned(),
            input: v["input"].clone(),
            expect: v["expect"].as_str().map(str::to_owned),
            retries: v["retries"].as_u64().unwrap_or(0) as u32,
        }
    }

    /// The tool and input of try `attempt`: a retried shell command carries a trailing
    /// comment naming the try, as a model varies a command it runs again (an agent may stop
    /// a turn that repeats one call verbatim: Gemini CLI's loop detection does); an
    /// `apply_patch` script is sent as it is.
    fn input_for(&self, attempt: u32) -> (String, Value) {
        let mut input = self.input.clone();
        if attempt > 0 {
            for key in ["command", "cmd"] {
                if let Some(Value::String(c)) = input.get_mut(key) {
                    if !c.trim_start().starts_with("apply_patch") {
                        c.push_str(&format!("  # try {}", attempt + 1));
                    }
                }
            }
        }
        (self.tool.clone(), input)
    }

    /// Whether a tool result shows this step done.
    fn succeeded(&self, is_error: bool, content: &str) -> bool {
        match &self.expect {
            Some(e) => content.contains(e.as_str()),
            None => !is_error,
        }
    }
}

/// A tool result as the agent sent it back.
struct ToolResult {
    id: String,
    is_error: bool,
    content: String,
}

/// The text of a `tool_result` block's content (a string or a list of text blocks).
fn result_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().filter_map(|i| i["text"].as_str()).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

/// Every tool result of a request's messages, in order.
fn tool_results(body: &Value) -> Vec<ToolResult> {
    let mut out = Vec::new();
    for m in body["messages"].as_array().into_iter().flatten() {
        for block in m["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_result" {
                out.push(ToolResult {
                    id: block["tool_use_id"].as_str().unwrap_or_default().to_owned(),
                    is_error: block["is_error"].as_bool().unwrap_or(false),
                    content: result_text(&block["content"]),
                });
            }
        }
    }
    out
}

/// Every tool result of a Responses API request's input items, in order.
fn function_outputs(body: &Value) -> Vec<ToolResult> {
    body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["type"] == "function_call_output")
        .map(|i| ToolResult {
            id: i["call_id"].as_str().unwrap_or_default().to_owned(),
            is_error: false,
            content: match &i["output"] {
                Value::String(s) => s.clone(),
                Value::Object(o) => o.get("content").and_then(Value::as_str).unwrap_or_default().to_owned(),
                other => result_text(other),
            },
        })
        .collect()
}

/// Every tool result of a Gemini API request's contents (`functionResponse` parts), in order.
fn function_responses(body: &Value) -> Vec<ToolResult> {
    let mut out = Vec::new();
    for c in body["contents"].as_array().into_iter().flatten() {
        for part in c["parts"].as_array().into_iter().flatten() {
            let r = &part["functionResponse"];
            if r.is_null() {
                continue;
            }
            let response = &r["response"];
            let (is_error, content) = match (response["output"].as_str(), response["error"].as_str()) {
                (Some(o), _) => (false, o.to_owned()),
                (None, Some(e)) => (true, e.to_owned()),
                (None, None) => (false, response.to_string()),
            };
            out.push(ToolResult { id: r["id"].as_str().unwrap_or_default().to_owned(), is_error, content });
        }
    }
    out
}

/// The step and try a tool-use id of ours names (`toolu_pincer_S_T`).
fn parse_id(id: &str) -> Option<(usize, u32)> {
    let rest = id.strip_prefix("toolu_pincer_")?;
    let (s, t) = rest.split_once('_')?;
    Some((s.parse().ok()?, t.parse().ok()?))
}

/// What the model does next: a step's try, or the final answer.
#[derive(Debug, PartialEq, Eq)]
enum Next {
    Call { step: usize, attempt: u32 },
    Finish,
}

/// The next action after `results` (only the last one matters: each call waits for its
/// result before the next is made).
fn next(script: &[Step], results: &[ToolResult]) -> Next {
    let Some(last) = results.iter().rev().find_map(|r| parse_id(&r.id).map(|p| (p, r))) else {
        return if script.is_empty() { Next::Finish } else { Next::Call { step: 0, attempt: 0 } };
    };
    let ((step, attempt), r) = last;
    let Some(s) = script.get(step) else { return Next::Finish };
    if !s.succeeded(r.is_error, &r.content) && attempt < s.retries {
        return Next::Call { step, attempt: attempt + 1 };
    }
    if step + 1 < script.len() {
        Next::Call { step: step + 1, attempt: 0 }
    } else {
        Next::Finish
    }
}

/// One server-sent event.
fn event(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// The events of one assistant message holding `block` (a `tool_use` or a `text` block).
fn message_events(model: &str, n: usize, block: &Value, stop_reason: &str) -> String {
    let mut out = String::new();
    out += &event(
        "message_start",
        json!({"type": "message_start", "message": {"id": format!("msg_pincer_{n}"), "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 100, "output_tokens": 1}}}),
    );
    if block["type"] == "tool_use" {
        let start = json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}});
        out += &event("content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": start}));
        let input = block["input"].to_string();
        // The input arrives in pieces, as a model streams it.
        let cut = input.char_indices().map(|(i, _)| i).find(|i| *i >= input.len() / 2).unwrap_or(input.len());
        for part in [&input[..cut], &input[cut..]] {
            out += &event("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": part}}));
        }
    } else {
        out += &event("content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}));
        out += &event("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": block["text"]}}));
    }
    out += &event("content_block_stop", json!({"type": "content_block_stop", "index": 0}));
    out += &event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": {"output_tokens": 20}}),
    );
    out += &event("message_stop", json!({"type": "message_stop"}));
    out
}

/// The events of one Responses API reply holding `item` (a `function_call` or a `message`).
fn response_events(model: &str, n: usize, item: &Value) -> String {
    let id = format!("resp_pincer_{n}");
    let usage = json!({"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 20,
        "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 120});
    let mut out = String::new();
    out += &event("response.created", json!({"type": "response.created", "response": {"id": id, "model": model, "status": "in_progress"}}));
    out += &event("response.output_item.added", json!({"type": "response.output_item.added", "output_index": 0, "item": item}));
    out += &event("response.output_item.done", json!({"type": "response.output_item.done", "output_index": 0, "item": item}));
    out += &event("response.completed", json!({"type": "response.completed", "response": {"id": id, "model": model, "status": "completed", "usage": usage}}));
    out
}

/// The API a request came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    /// Anthropic Messages (`/v1/messages`).
    Messages,
    /// OpenAI Responses (`/v1/responses`).
    Responses,
    /// Gemini (`/v1beta/models/MODEL:generateContent`, streamed or not).
    Gemini,
}

/// The server's state across connections.
struct Model {
    script: Vec<Step>,
    watch: Vec<String>,
    /// Requests served.
    requests: usize,
    /// Tool results already printed (by tool-use id).
    seen: std::collections::BTreeSet<String>,
}

/// Writes one line to standard error in a single call.
fn report(line: String) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(format!("{line}\n").as_bytes());
    let _ = err.flush();
}

fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

impl Model {
    /// The reply to one `POST /v1/messages` or `/v1/responses` body: (content type, body).
    /// `streamed`: a Gemini request on `:streamGenerateContent` (its body does not say).
    fn answer(&mut self, api: Api, streamed: bool, raw: &[u8]) -> (&'static str, String) {
        self.requests += 1;
        let n = self.requests;
        let text = String::from_utf8_lossy(raw);
        let watched = self.watch.iter().any(|w| text.contains(w.as_str()));
        let body: Value = serde_json::from_slice(raw).unwrap_or(Value::Null);
        let default_model = match api {
            Api::Messages => "claude-sonnet-4-5",
            Api::Responses => "gpt-5",
            Api::Gemini => "gemini-2.5-pro",
        };
        let model = body["model"].as_str().unwrap_or(default_model).to_owned();
        let stream = body["stream"].as_bool().unwrap_or(api == Api::Gemini && streamed);
        let tools = match api {
            Api::Gemini => body["tools"].as_array().into_iter().flatten().map(|t| t["functionDeclarations"].as_array().map_or(0, Vec::len)).sum(),
            _ => body["tools"].as_array().map_or(0, Vec::len),
        };
        let results = match api {
            Api::Messages => tool_results(&body),
            Api::Responses => function_outputs(&body),
            Api::Gemini => function_responses(&body),
        };
        report(format!("MODEL-REQUEST {}", json!({"n": n, "api": format!("{api:?}"), "tools": tools, "results": results.len(), "bytes": raw.len(), "watched": watched, "stream": stream})));
        let next = if tools == 0 {
            None
        } else {
            for r in &results {
                if !self.seen.insert(r.id.clone()) {
                    continue;
                }
                let (step, attempt) = parse_id(&r.id).unwrap_or((usize::MAX, 0));
                let s = self.script.get(step);
                report(format!(
                    "MODEL-RESULT {}",
                    json!({"step": step, "try": attempt, "name": s.map(|s| s.name.as_str()), "ok": s.is_some_and(|s| s.succeeded(r.is_error, &r.content)),
                        "is_error": r.is_error, "content": cut(&r.content, 4000), "at_ms": pincer_tests::agent::unix_ms()})
                ));
            }
            Some(next(&self.script, &results))
        };
        let call = match next {
            Some(Next::Call { step, attempt }) => Some((format!("toolu_pincer_{step}_{attempt}"), self.script[step].input_for(attempt))),
            _ => None,
        };
        let text = if next.is_none() { "ok" } else { "Done: the tests pass and the fix is committed." };
        match api {
            Api::Messages => {
                let (block, stop) = match call {
                    Some((id, (tool, input))) => (json!({"type": "tool_use", "id": id, "name": tool, "input": input}), "tool_use"),
                    None => (json!({"type": "text", "text": text}), "end_turn"),
                };
                if stream {
                    ("text/event-stream", message_events(&model, n, &block, stop))
                } else {
                    let msg = json!({"id": format!("msg_pincer_{n}"), "type": "message", "role": "assistant", "model": model, "content": [block],
                        "stop_reason": stop, "stop_sequence": null, "usage": {"input_tokens": 100, "output_tokens": 20}});
                    ("application/json", msg.to_string())
                }
            }
            Api::Responses => {
                let item = match call {
                    Some((id, (tool, input))) => json!({"type": "function_call", "id": format!("fc_{id}"), "call_id": id, "name": tool, "arguments": input.to_string(), "status": "completed"}),
                    None => json!({"type": "message", "id": format!("msg_pincer_{n}"), "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": text, "annotations": []}]}),
                };
                if stream {
                    ("text/event-stream", response_events(&model, n, &item))
                } else {
                    let resp = json!({"id": format!("resp_pincer_{n}"), "object": "response", "model": model, "status": "completed", "output": [item],
                        "usage": {"input_tokens": 100, "output_tokens": 20, "total_tokens": 120}});
                    ("application/json", resp.to_string())
                }
            }
            Api::Gemini => {
                let part = match call {
                    Some((id, (tool, input))) => json!({"functionCall": {"id": id, "name": tool, "args": input}}),
                    None => json!({"text": text}),
                };
                let resp = json!({"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
                    "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 20, "totalTokenCount": 120}, "modelVersion": model});
                if stream {
                    ("text/event-stream", format!("data: {resp}\r\n\r\n"))
                } else {
                    ("application/json", resp.to_string())
                }
            }
        }
    }
}

/// Reads one HTTP request: (method, path, body). Handles `Content-Length` and chunked bodies.
fn read_request(stream: &mut BufReader<TcpStream>) -> std::io::Result<Option<(String, String, Vec<u8>)>> {
    let mut line = String::new();
    if stream.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or_default().to_owned(), parts.next().unwrap_or_default().to_owned());
    let (mut length, mut chunked) = (0usize, false);
    loop {
        let mut h = String::new();
        if stream.read_line(&mut h)? == 0 || h == "\r\n" || h == "\n" {
            break;
        }
        let lower = h.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        } else if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
            chunked = true;
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            stream.read_line(&mut size)?;
            let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16).unwrap_or(0);
            let mut chunk = vec![0; n + 2];
            stream.read_exact(&mut chunk)?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else {
        body.resize(length, 0);
        stream.read_exact(&mut body)?;
    }
    Ok(Some((method, path, body)))
}

fn serve(conn: TcpStream, model: Arc<Mutex<Model>>) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut out = conn;
    while let Some((method, path, body)) = read_request(&mut reader)? {
        let (status, ctype, reply) = if method == "POST" && path.starts_with("/v1/messages") && !path.starts_with("/v1/messages/count_tokens") {
            let (ctype, reply) = model.lock().expect("model lock").answer(Api::Messages, false, &body);
            ("200 OK", ctype, reply)
        } else if method == "POST" && path.starts_with("/v1/responses") {
            let (ctype, reply) = model.lock().expect("model lock").answer(Api::Responses, false, &body);
            ("200 OK", ctype, reply)
        } else if method == "POST" && path.starts_with("/v1beta/models/") && path.contains(":countTokens") {
            ("200 OK", "application/json", json!({"totalTokens": 100}).to_string())
        } else if method == "POST" && path.starts_with("/v1beta/models/") && (path.contains(":streamGenerateContent") || path.contains(":generateContent")) {
            let streamed = path.contains(":streamGenerateContent");
            let (ctype, reply) = model.lock().expect("model lock").answer(Api::Gemini, streamed, &body);
            ("200 OK", ctype, reply)
        } else if method == "POST" && path.starts_with("/v1/messages/count_tokens") {
            ("200 OK", "application/json", json!({"input_tokens": 100}).to_string())
        } else {
            report(format!("MODEL-OTHER {method} {path}"));
            ("404 Not Found", "application/json", json!({"type": "error", "error": {"type": "not_found_error", "message": "not here"}}).to_string())
        };
        let head = format!("HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\nrequest-id: req_pincer\r\n\r\n", reply.len());
        out.write_all(head.as_bytes())?;
        out.write_all(reply.as_bytes())?;
        out.flush()?;
    }
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned();
    let port: u16 = value("--port").map(|p| p.parse().expect("--port N")).unwrap_or(0);
    let script_text = std::env::var("PINCER_MODEL_SCRIPT").unwrap_or_else(|_| "[]".into());
    let script: Vec<Step> = serde_json::from_str::<Value>(&script_text)
        .expect("PINCER_MODEL_SCRIPT is a JSON list")
        .as_array()
        .expect("PINCER_MODEL_SCRIPT is a JSON list")
        .iter()
        .map(Step::from_json)
        .collect();
    let watch: Vec<String> = std::env::var("PINCER_MODEL_WATCH").unwrap_or_default().lines().filter(|w| !w.is_empty()).map(str::to_owned).collect();
    let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind 127.0.0.1");
    let port = listener.local_addr().expect("local address").port();
    if let Some(f) = value("--port-file") {
        std::fs::write(&f, port.to_string()).unwrap_or_else(|e| panic!("write {f}: {e}"));
    }
    report(format!("MODEL-LISTEN {port}"));
    let model = Arc::new(Mutex::new(Model { script, watch, requests: 0, seen: Default::default() }));
    for conn in listener.incoming().flatten() {
        let model = model.clone();
        std::thread::spawn(move || {
            let _ = serve(conn, model);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(expect: Option<&str>, retries: u32) -> Step {
        Step { name: "s".into(), tool: "Read".into(), input: json!({}), expect: expect.map(str::to_owned), retries }
    }

    fn result(id: &str, is_error: bool, content: &str) -> ToolResult {
        ToolResult { id: id.into(), is_error, content: content.into() }
    }

    #[test]
    fn a_failed_step_is_tried_again_while_it_has_retries_then_the_script_goes_on() {
        let script = vec![step(Some("Ran 2 tests"), 2), step(None, 0)];
        assert_eq!(next(&script, &[]), Next::Call { step: 0, attempt: 0 });
        let r0 = result("toolu_pincer_0_0", true, "Permission denied");
        assert_eq!(next(&script, &[r0]), Next::Call { step: 0, attempt: 1 });
        let r1 = result("toolu_pincer_0_2", false, "still denied");
        assert_eq!(next(&script, &[r1]), Next::Call { step: 1, attempt: 0 });
        let ok = result("toolu_pincer_0_0", true, "Ran 2 tests\nFAILED");
        assert_eq!(next(&script, &[ok]), Next::Call { step: 1, attempt: 0 });
        assert_eq!(next(&script, &[result("toolu_pincer_1_0", true, "x")]), Next::Finish);
    }

    #[test]
    fn the_events_carry_the_tool_input_in_pieces_that_join_to_it() {
        let block = json!({"type": "tool_use", "id": "toolu_pincer_0_0", "name": "Bash", "input": {"command": "echo é"}});
        let text = message_events("m", 1, &block, "tool_use");
        let names: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("event: ")).collect();
        assert_eq!(names, ["message_start", "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop", "message_delta", "message_stop"]);
        let joined: String = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| serde_json::from_str::<Value>(d).unwrap())
            .filter_map(|v| v["delta"]["partial_json"].as_str().map(str::to_owned))
            .collect();
        assert_eq!(serde_json::from_str::<Value>(&joined).unwrap(), block["input"]);
        assert!(text.contains("\"stop_reason\":\"tool_use\""));
    }

    #[test]
    fn a_responses_api_request_is_answered_from_its_function_outputs() {
        let script = vec![
            Step { name: "run".into(), tool: "exec_command".into(), input: json!({"cmd": "python3 -m unittest"}), expect: Some("OK".into()), retries: 1 },
        ];
        let mut m = Model { script, watch: vec!["SECRET".into()], requests: 0, seen: Default::default() };
        let first = json!({"model": "gpt-5", "stream": true, "tools": [{"type": "function", "name": "exec_command"}], "input": [{"type": "message", "role": "user", "content": []}]});
        let (ctype, text) = m.answer(Api::Responses, false, first.to_string().as_bytes());
        assert_eq!(ctype, "text/event-stream");
        let items: Vec<Value> = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| serde_json::from_str::<Value>(d).unwrap())
            .filter(|v| v["type"] == "response.output_item.done")
            .map(|v| v["item"].clone())
            .collect();
        assert_eq!(items.len(), 1);
        assert_eq!(items[0]["call_id"], "toolu_pincer_0_0");
        let args: Value = serde_json::from_str(items[0]["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(args["cmd"], "python3 -m unittest");
        assert!(text.contains("\"type\":\"response.completed\""));
        // A failed result is tried again; a passing one ends the turn with a message.
        let failed = json!({"model": "gpt-5", "stream": true, "tools": [{}], "input": [{"type": "function_call_output", "call_id": "toolu_pincer_0_0", "output": "Permission denied"}]});
        let (_, text) = m.answer(Api::Responses, false, failed.to_string().as_bytes());
        assert!(text.contains("toolu_pincer_0_1"), "{text}");
        let passed = json!({"stream": true, "tools": [{}], "input": [{"type": "function_call_output", "call_id": "toolu_pincer_0_1", "output": "Ran 2 tests\nOK"}]});
        let (_, text) = m.answer(Api::Responses, false, passed.to_string().as_bytes());
        assert!(text.contains("\"type\":\"message\"") && !text.contains("function_call"), "{text}");
    }

    #[test]
    fn a_gemini_request_is_answered_from_its_function_responses() {
        let script = vec![Step { name: "read".into(), tool: "read_file".into(), input: json!({"file_path": "/p/a"}), expect: None, retries: 1 }];
        let mut m = Model { script, watch: vec![], requests: 0, seen: Default::default() };
        let tools = json!([{"functionDeclarations": [{"name": "read_file"}, {"name": "run_shell_command"}]}]);
        let first = json!({"contents": [{"role": "user", "parts": [{"text": "go"}]}], "tools": tools});
        let (ctype, text) = m.answer(Api::Gemini, true, first.to_string().as_bytes());
        assert_eq!(ctype, "text/event-stream");
        let v: Value = serde_json::from_str(text.strip_prefix("data: ").unwrap().trim_end()).unwrap();
        let call = &v["candidates"][0]["content"]["parts"][0]["functionCall"];
        assert_eq!((call["id"].as_str(), call["name"].as_str(), &call["args"]), (Some("toolu_pincer_0_0"), Some("read_file"), &json!({"file_path": "/p/a"})));
        // An error response is a failed try; the step is tried again.
        let failed = json!({"tools": tools, "contents": [{"role": "user", "parts": [{"functionResponse": {"id": "toolu_pincer_0_0", "name": "read_file", "response": {"error": "EACCES"}}}]}]});
        let (_, text) = m.answer(Api::Gemini, true, failed.to_string().as_bytes());
        assert!(text.contains("toolu_pincer_0_1"), "{text}");
        // A side call (no tools), not streamed: plain JSON text.
        let (ctype, text) = m.answer(Api::Gemini, false, json!({"contents": []}).to_string().as_bytes());
        assert_eq!(ctype, "application/json");
        assert!(text.contains("\"text\":\"ok\""), "{text}");
    }
}
