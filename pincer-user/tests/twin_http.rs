//! The chat-model deciders against local servers speaking each wire format: good answers,
//! malformed bodies, 429 and 500, slow answers, refusals and truncated JSON. Every failure
//! must be a deny whose reason names the cause, and tokens must be counted.

use pincer::decider::{AnthropicChat, ChatConfig, Decider, LlmDecider, OpenAiChat, Verdict, Vote1Input, VoteOutcome};
use pincer::twin::{Knowledge, SessionView};
use pincer::sanitize::{SecretKey, Sanitizer};
use pincer::store::TrustedState;
use pincer::Access;
use serde_json::json;
use std::time::Duration;
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn cfg(base: String) -> ChatConfig {
    ChatConfig { base_url: base, api_key: Some("k".into()), model: "m".into(), timeout: Duration::from_millis(500), max_tokens: 256 }
}

fn openai_body(content: &str, finish: &str) -> serde_json::Value {
    json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}],
           "usage": {"prompt_tokens": 120, "completion_tokens": 15}})
}

fn anthropic_body(text: &str, stop: &str) -> serde_json::Value {
    json!({"type": "message", "content": [{"type": "text", "text": text}], "stop_reason": stop,
           "usage": {"input_tokens": 130, "output_tokens": 17}})
}

async fn vote1_with(d: &dyn Decider) -> VoteOutcome {
    let z = Sanitizer::new(SecretKey::from_bytes([1; 32]));
    let k = Knowledge::build(&TrustedState::new("u"), &z);
    let mut s = SessionView::default();
    s.add_prompt("Fix the parser", &k, &z);
    let p = z.path("src/parse.rs");
    d.vote1(&Vote1Input { knowledge: &k, session: &s, path: &p, access: Access::Read }).await
}

async fn openai_server(resp: ResponseTemplate) -> (MockServer, LlmDecider<OpenAiChat>) {
    let server = MockServer::start().await;
    Mock::given(method("POST")).and(path("/v1/chat/completions")).and(header("authorization", "Bearer k")).respond_with(resp).mount(&server).await;
    let d = LlmDecider::new(OpenAiChat::new(cfg(format!("{}/v1", server.uri()))).unwrap());
    (server, d)
}

async fn anthropic_server(resp: ResponseTemplate) -> (MockServer, LlmDecider<AnthropicChat>) {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(header("x-api-key", "k"))
        .and(header("anthropic-version", "2023-06-01"))
        .respond_with(resp)
        .mount(&server)
        .await;
    let d = LlmDecider::new(AnthropicChat::new(cfg(server.uri())).unwrap());
    (server, d)
}

fn assert_denied(v: &VoteOutcome, cause: &str) {
    assert_eq!(v.verdict, Verdict::Deny, "{v:?}");
    assert!(v.reason.contains(cause), "reason {:?} should name {cause:?}", v.reason);
}

#[tokio::test]
async fn openai_allow_answer_is_parsed_and_tokens_counted() {
    let (_s, d) = openai_server(ResponseTemplate::new(200).set_body_json(openai_body(r#"{"verdict": "allow", "reason": "same file as a similar task"}"#, "stop"))).await;
    let v = vote1_with(&d).await;
    assert_eq!(v.verdict, Verdict::Allow);
    assert_eq!(v.reason, "same file as a similar task");
    assert_eq!((v.tokens.input, v.tokens.output, v.tokens.calls), (120, 15, 1));
}

#[tokio::test]
async fn openai_fenced_json_is_accepted_prose_is_not() {
    let (_s, d) = openai_server(ResponseTemplate::new(200).set_body_json(openai_body("```json\n{\"verdict\": \"ask_user\", \"reason\": \"r\"}\n```", "stop"))).await;
    assert_eq!(vote1_with(&d).await.verdict, Verdict::AskUser);
    let (_s, d) = openai_server(ResponseTemplate::new(200).set_body_json(openai_body("Sure! I think this is fine: allow", "stop"))).await;
    assert_denied(&vote1_with(&d).await, "unparsable");
    let (_s, d) = openai_server(ResponseTemplate::new(200).set_body_json(openai_body(r#"{"verdict": "grant", "reason": "r"}"#, "stop"))).await;
    assert_denied(&vote1_with(&d).await, "unparsable");
}

#[tokio::test]
async fn openai_failures_deny_with_cause() {
    let (_s, d) = openai_server(ResponseTemplate::new(429).set_body_string("slow down")).await;
    assert_denied(&vote1_with(&d).await, "429");
    let (_s, d) = openai_server(ResponseTemplate::new(500).set_body_string("boom")).await;
    assert_denied(&vote1_with(&d).await, "HTTP 500");
    let (_s, d) = openai_server(ResponseTemplate::new(200).set_body_string("{\"choices\": [")).await;
    assert_denied(&vote1_with(&d).await, "malformed response body");
    let (_s, d) = openai_server(ResponseTemplate::new(200).set_body_json(json!({"id": "x"}))).await;
    assert_denied(&vote1_with(&d).await, "malformed response body");
    let (_s, d) = openai_server(ResponseTemplate::new(200).set_body_json(openai_body(r#"{"verdict": "allow", "rea"#, "length"))).await;
    assert_denied(&vote1_with(&d).await, "truncated");
    let (_s, d) = openai_server(ResponseTemplate::new(200).set_body_json(openai_body(r#"{"verdict": "allow", "rea"#, "stop"))).await;
    assert_denied(&vote1_with(&d).await, "unparsable");
    let body = json!({"choices": [{"message": {"role": "assistant", "content": null, "refusal": "I can't help with that"}, "finish_reason": "stop"}]});
    let (_s, d) = openai_server(ResponseTemplate::new(200).set_body_json(body)).await;
    assert_denied(&vote1_with(&d).await, "refused");
    let (_s, d) = openai_server(ResponseTemplate::new(200).set_body_json(openai_body(r#"{"verdict": "allow", "reason": "r"}"#, "stop")).set_delay(Duration::from_secs(3))).await;
    assert_denied(&vote1_with(&d).await, "no answer within");
}

#[tokio::test]
async fn anthropic_allow_answer_is_parsed_and_tokens_counted() {
    let (_s, d) = anthropic_server(ResponseTemplate::new(200).set_body_json(anthropic_body(r#"{"verdict": "allow", "reason": "named in the prompt"}"#, "end_turn"))).await;
    let v = vote1_with(&d).await;
    assert_eq!(v.verdict, Verdict::Allow);
    assert_eq!((v.tokens.input, v.tokens.output, v.tokens.calls), (130, 17, 1));
}

#[tokio::test]
async fn anthropic_failures_deny_with_cause() {
    let (_s, d) = anthropic_server(ResponseTemplate::new(429)).await;
    assert_denied(&vote1_with(&d).await, "429");
    let (_s, d) = anthropic_server(ResponseTemplate::new(500).set_body_string("overloaded")).await;
    assert_denied(&vote1_with(&d).await, "HTTP 500");
    let (_s, d) = anthropic_server(ResponseTemplate::new(200).set_body_string("<html>")).await;
    assert_denied(&vote1_with(&d).await, "malformed response body");
    let (_s, d) = anthropic_server(ResponseTemplate::new(200).set_body_json(anthropic_body(r#"{"verdict": "al"#, "max_tokens"))).await;
    assert_denied(&vote1_with(&d).await, "truncated");
    let (_s, d) = anthropic_server(ResponseTemplate::new(200).set_body_json(anthropic_body("", "refusal"))).await;
    assert_denied(&vote1_with(&d).await, "refused");
    let (_s, d) = anthropic_server(ResponseTemplate::new(200).set_body_json(anthropic_body(r#"{"verdict": "allow"}"#, "end_turn"))).await;
    assert_denied(&vote1_with(&d).await, "unparsable");
    let (_s, d) = anthropic_server(ResponseTemplate::new(200).set_body_json(anthropic_body(r#"{"verdict": "allow", "reason": "r"}"#, "end_turn")).set_delay(Duration::from_secs(3))).await;
    assert_denied(&vote1_with(&d).await, "no answer within");
}

#[tokio::test]
async fn policy_generation_parses_entries_and_fails_on_garbage() {
    use pincer::decider::PolicyInput;
    let z = Sanitizer::new(SecretKey::from_bytes([1; 32]));
    let state = TrustedState::new("u");
    let k = Knowledge::build(&state, &z);
    let tree = vec!["src/".to_string(), "src/parse.rs".to_string()];
    let input = PolicyInput { prompt: "Fix the parser", workspace_tree: &tree, state: &state, similar: &[], knowledge: &k };
    let good = r#"{"entries": [{"path_glob": "src/parse.rs", "access": ["read", "write"], "operations": ["edit"], "permission": "allow", "rationale": "the parser"}]}"#;
    let (_s, d) = anthropic_server(ResponseTemplate::new(200).set_body_json(anthropic_body(good, "end_turn"))).await;
    let ans = d.policy(&input).await.unwrap();
    assert_eq!(ans.entries.len(), 1);
    assert_eq!(ans.entries[0].access, vec![Access::Read, Access::Write]);
    assert_eq!(ans.tokens.calls, 1);
    let (_s, d) = openai_server(ResponseTemplate::new(200).set_body_json(openai_body(r#"{"entries": [{"path_glob": "src/**", "access": ["chmod"]}]}"#, "stop"))).await;
    assert!(d.policy(&input).await.is_err());
}

#[test]
fn missing_configuration_is_named() {
    // Only the error path is checked: with PINCER_MODEL unset the error names it.
    if std::env::var("PINCER_MODEL").is_err() {
        let e = ChatConfig::openai_from_env().unwrap_err().to_string();
        assert!(e.contains("PINCER_MODEL"), "{e}");
    }
}

#[tokio::test]
async fn anthropic_calls_mark_the_stable_prefix_and_cached_tokens_are_counted() {
    let body = json!({"type": "message", "content": [{"type": "text", "text": r#"{"verdict": "allow", "reason": "r"}"#}], "stop_reason": "end_turn",
                      "usage": {"input_tokens": 30, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 1200, "output_tokens": 9}});
    let (server, d) = anthropic_server(ResponseTemplate::new(200).set_body_json(body)).await;
    let v = vote1_with(&d).await;
    assert_eq!((v.tokens.input, v.tokens.cached, v.tokens.output), (1230, 1200, 9), "cached input counts as input");
    let sent: serde_json::Value = serde_json::from_slice(&server.received_requests().await.unwrap()[0].body).unwrap();
    assert_eq!(sent["system"][0]["cache_control"]["type"], "ephemeral", "{sent}");
    let content = sent["messages"][0]["content"].as_array().unwrap();
    assert_eq!(content.len(), 2, "the stable prefix, then the rest: {sent}");
    assert_eq!(content[0]["cache_control"]["type"], "ephemeral");
    assert!(content[0]["text"].as_str().unwrap().starts_with("{\"user_policies\":"), "{sent}");
    assert!(content[1].get("cache_control").is_none() && content[1]["text"].as_str().unwrap().contains("\"request\":"), "the request comes last, unmarked: {sent}");
}

#[tokio::test]
async fn openai_cached_tokens_are_counted() {
    let body = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": r#"{"verdict": "deny", "reason": "r"}"#}, "finish_reason": "stop"}],
                      "usage": {"prompt_tokens": 1500, "completion_tokens": 8, "prompt_tokens_details": {"cached_tokens": 1280}}});
    let (_s, d) = openai_server(ResponseTemplate::new(200).set_body_json(body)).await;
    let v = vote1_with(&d).await;
    assert_eq!(v.verdict, Verdict::Deny);
    assert_eq!((v.tokens.input, v.tokens.cached, v.tokens.output, v.tokens.calls), (1500, 1280, 8, 1));
    assert_eq!(v.tokens.sections.iter().sum::<u64>(), 1500, "the sections share out the input tokens");
}
