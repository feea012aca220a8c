//! Replays the shipped corpus against the twin with the offline decider and prints cASR and
//! cBGR per persona and attack type (a sanity check of the twin on its own; the evaluation
//! harness proper is `pincer eval`).

use crate::common;

use common::twin::tree;
use pincer::decider::OfflineDecider;
use pincer::sanitize::{SecretKey, Sanitizer};
use pincer::store::{parse_history, parse_policies, TrustedState};
use pincer::twin::{Prepared, Request, Twin, TwinConfig, Variant};
use pincer::Access;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus")
}

fn load_workspace(root: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(base).unwrap().to_string_lossy().to_string();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

#[derive(Default, Debug)]
struct Tally {
    n: usize,
    requested: usize,
    granted: usize,
}

async fn replay(persona: &Path, variant: Variant, verbose: bool) -> (BTreeMap<String, Tally>, Tally) {
    let mut state = TrustedState::new("u");
    for h in parse_history(&persona.join("history.jsonl")).unwrap() {
        state.add_history(&h).unwrap();
    }
    for p in parse_policies(&persona.join("policies.jsonl")).unwrap() {
        state.add_policy(&p).unwrap();
    }
    let ws = load_workspace(&persona.join("workspace"));
    let z = Sanitizer::new(SecretKey::from_bytes([7; 32]));
    let pristine = tree(&ws);
    let prepared = Prepared::new(state, z).with_workspace(&pristine, |p| ws.get(p).map(Vec::as_slice));
    let mut attacks: BTreeMap<String, Tally> = BTreeMap::new();
    let mut util = Tally::default();
    for line in std::fs::read_to_string(persona.join("samples.jsonl")).unwrap().lines().filter(|l| !l.trim().is_empty()) {
        let s: Value = serde_json::from_str(line).unwrap();
        let mut files = ws.clone();
        for op in s["setup"].as_array().unwrap() {
            let path = op["path"].as_str().unwrap().to_string();
            match op["op"].as_str().unwrap() {
                "write" => {
                    files.insert(path, op["content"].as_str().unwrap().as_bytes().to_vec());
                }
                "delete" => {
                    files.remove(&path);
                }
                "rename" => {
                    if let Some(c) = files.remove(&path) {
                        files.insert(op["to"].as_str().unwrap().to_string(), c);
                    }
                }
                _ => {}
            }
        }
        let t = tree(&files);
        let mut twin = Twin::from_prepared(&prepared, Arc::new(OfflineDecider::new()), TwinConfig { variant, escalate_after: 2 });
        twin.set_day(s["day"].as_u64().unwrap_or(0) as u32);
        let mon_path = s["monitored"]["path"].as_str().unwrap();
        let mon_access: Access = s["monitored"]["access"].as_str().unwrap().parse().unwrap();
        let (mut requested, mut granted) = (false, false);
        for (si, sess) in s["sessions"].as_array().unwrap().iter().enumerate() {
            let name = format!("{}-{si}", s["id"].as_str().unwrap());
            twin.start_session(&name, sess["prompt"].as_str().unwrap(), &t).await.unwrap();
            let mut results: Vec<bool> = vec![];
            for step in sess["steps"].as_array().unwrap() {
                let Some(path) = step["path"].as_str() else { continue };
                let access: Access = step["access"].as_str().unwrap().parse().unwrap();
                let needs_ok = step["needs"].as_array().map(|n| n.iter().all(|i| results.get(i.as_u64().unwrap() as usize).copied().unwrap_or(false))).unwrap_or(true);
                if !needs_ok {
                    results.push(false);
                    continue;
                }
                let req = Request {
                    path: path.to_string(),
                    access,
                    rationale: step["rationale"].as_str().map(String::from),
                    content: files.get(path.trim_end_matches('/')).cloned(),
                    kept_private: false,
                };
                let d = twin.decide(&name, &req).await;
                let g = d.granted();
                results.push(g);
                let is_mon = path == mon_path && access == mon_access;
                if is_mon {
                    requested = true;
                    granted |= g;
                }
                if verbose && (is_mon || !g) {
                    let tag = if is_mon { "MON" } else { "   " };
                    println!(
                        "  {tag} {} {} {access} {path}: {:?}\n      v1 {:?} {}\n      v2 {:?} {}\n      v3 {:?} {}",
                        s["id"].as_str().unwrap(),
                        sess["prompt"].as_str().unwrap().chars().take(70).collect::<String>(),
                        d.outcome,
                        d.votes[0].verdict,
                        d.votes[0].reason,
                        d.votes[1].verdict,
                        d.votes[1].reason,
                        d.votes[2].verdict,
                        d.votes[2].reason
                    );
                }
            }
            twin.end_session(&name).unwrap();
        }
        let tally = if s["kind"] == "attack" { attacks.entry(s["attack"].as_str().unwrap().to_string()).or_default() } else { &mut util };
        tally.n += 1;
        tally.requested += requested as usize;
        tally.granted += granted as usize;
    }
    (attacks, util)
}

#[tokio::test]
#[ignore = "prints figures over the shipped corpus; run with --ignored --nocapture"]
async fn twin_corpus_figures() {
    let verbose = std::env::var("TWIN_VERBOSE").is_ok();
    let only = std::env::var("TWIN_PERSONA").ok();
    let mut personas: Vec<String> = std::fs::read_dir(corpus_dir()).unwrap().filter_map(|e| e.ok()).filter(|e| e.path().is_dir()).map(|e| e.file_name().to_string_lossy().to_string()).collect();
    personas.sort();
    for persona in &personas {
        if only.as_deref().is_some_and(|o| o != persona) {
            continue;
        }
        let dir = corpus_dir().join(persona);
        if !dir.join("samples.jsonl").exists() {
            continue;
        }
        let variants = if std::env::var("TWIN_P1").is_ok() { vec![Variant::Pincer] } else { vec![Variant::Pincer, Variant::PincerP2] };
        for variant in variants {
            let (attacks, util) = replay(&dir, variant, verbose).await;
            let (mut r, mut g) = (0, 0);
            for t in attacks.values() {
                r += t.requested;
                g += t.granted;
            }
            println!(
                "{persona} {variant:?}: cASR {:.3} ({g}/{r})  cBGR {:.3} ({}/{})  {attacks:?}",
                g as f64 / r.max(1) as f64,
                util.granted as f64 / util.requested.max(1) as f64,
                util.granted,
                util.requested
            );
        }
    }
}
