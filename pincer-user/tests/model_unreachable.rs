//! Model-backed runs say when the model is unreachable: `pincer eval --decider openai`
//! against a closed port, a server that answers 500 and one that answers garbage counts the
//! failed calls, names the endpoint and the cause, and exits non-zero because every call
//! failed (each failure stayed a denial).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::Command;

const MINI: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/mini");

/// Runs `pincer eval --decider openai` on the mini corpus against `base_url`.
fn eval_against(base_url: &str) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pincer"))
        .args(["eval", "--decider", "openai", "--corpus", MINI, "--defense", "pincer", "--defense", "static-judge"])
        .env("OPENAI_BASE_URL", base_url)
        .env("PINCER_MODEL", "test-model")
        .env_remove("OPENAI_API_KEY")
        .env_remove("RUST_LOG")
        .output()
        .expect("pincer runs");
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A local HTTP server that gives every request the same raw `response`.
fn serve(response: &'static str) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut c) = conn else { continue };
            std::thread::spawn(move || {
                let mut r = BufReader::new(c.try_clone().unwrap());
                let mut len = 0usize;
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0; len];
                let _ = r.read_exact(&mut body);
                let _ = c.write_all(response.as_bytes());
            });
        }
    });
    format!("http://{addr}/v1")
}

#[test]
fn a_closed_port_is_reported_with_the_endpoint_and_the_run_fails() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let (ok, stderr) = eval_against(&format!("http://127.0.0.1:{port}/v1"));
    assert!(!ok, "every call failed, so the run fails:\n{stderr}");
    assert!(stderr.contains("model was unreachable"), "{stderr}");
    assert!(stderr.contains("model calls failed"), "the count is reported:\n{stderr}");
    assert!(stderr.contains(&format!("http://127.0.0.1:{port}/v1/chat/completions")), "the endpoint is named:\n{stderr}");
    assert!(stderr.contains("transport error"), "the cause is named:\n{stderr}");
    let (failed, calls) = counts(&stderr);
    assert!(calls > 0 && failed == calls, "{stderr}");
}

#[test]
fn a_server_error_status_is_reported_and_the_run_fails() {
    let url = serve("HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\nContent-Length: 11\r\nConnection: close\r\n\r\nmodel crash");
    let (ok, stderr) = eval_against(&url);
    assert!(!ok, "{stderr}");
    assert!(stderr.contains("HTTP 500") && stderr.contains("model crash"), "the status and body are named:\n{stderr}");
    assert!(stderr.contains(&format!("{url}/chat/completions")), "{stderr}");
}

#[test]
fn a_garbage_answer_is_reported_and_the_run_fails() {
    let url = serve("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 9\r\nConnection: close\r\n\r\n<html>no!");
    let (ok, stderr) = eval_against(&url);
    assert!(!ok, "{stderr}");
    assert!(stderr.contains("model calls failed") && stderr.contains(&format!("{url}/chat/completions")), "{stderr}");
}

/// `failed` and `calls` of the summary line `F of C model calls failed`.
fn counts(stderr: &str) -> (u64, u64) {
    let line = stderr.lines().find(|l| l.contains("model calls failed")).expect("a summary line");
    let words: Vec<&str> = line.split_whitespace().collect();
    let i = words.iter().position(|w| *w == "of").unwrap();
    (words[i - 1].parse().unwrap(), words[i + 1].parse().unwrap())
}

/// Runs `pincer eval --config FILE` on the mini corpus, with `env` set and the model
/// variables otherwise unset.
fn eval_with_config(config: &str, env: &[(&str, &str)]) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pincer.toml");
    std::fs::write(&path, config).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pincer"));
    cmd.args(["eval", "--config", path.to_str().unwrap(), "--corpus", MINI, "--defense", "pincer"]);
    for v in ["OPENAI_BASE_URL", "OPENAI_API_KEY", "PINCER_MODEL", "RUST_LOG"] {
        cmd.env_remove(v);
    }
    cmd.envs(env.iter().copied());
    let out = cmd.output().expect("pincer runs");
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn eval_takes_the_endpoint_from_the_daemons_decider_settings_and_the_environment_overrides_it() {
    let port = |_: ()| {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let (configured, overriding) = (port(()), port(()));
    let config = format!("[decider]\nbackend = \"openai\"\nendpoint = \"http://127.0.0.1:{configured}/v1\"\nmodel = \"test-model\"\n");
    let (ok, stderr) = eval_with_config(&config, &[]);
    assert!(!ok, "{stderr}");
    assert!(stderr.contains(&format!("http://127.0.0.1:{configured}/v1/chat/completions")), "the configured endpoint is called:\n{stderr}");
    let (ok, stderr) = eval_with_config(&config, &[("OPENAI_BASE_URL", &format!("http://127.0.0.1:{overriding}/v1"))]);
    assert!(!ok, "{stderr}");
    assert!(stderr.contains(&format!("http://127.0.0.1:{overriding}/v1/chat/completions")), "the environment overrides it:\n{stderr}");
    let (ok, stderr) = eval_with_config("[decider]\nbackend = \"openai\"\n", &[]);
    assert!(!ok && stderr.contains("decider.model"), "a model name is required:\n{stderr}");
}
