//! A structured allow does not bypass the twin's other checks, on a small synthetic world
//! (not a shipped persona): under a broad allow a new place named like a protected area is
//! still a lookalike and content is still checked; explicit deny > inferred restriction
//! (which asks) > explicit allow. Each test fails if its mechanism is removed.

use crate::common;

use common::twin::tree;
use pincer::decider::{Mechanism, OfflineDecider, Verdict};
use pincer::sanitize::{SecretKey, Sanitizer};
use pincer::store::{AccessRecord, HistoryRecord, Permission, PolicyRule, TrustedState, UserPolicy};
use pincer::twin::{Decision, Outcome, Prepared, Request, Twin, TwinConfig, Variant};
use pincer::Access;
use std::collections::BTreeMap;
use std::sync::Arc;

fn files() -> BTreeMap<String, Vec<u8>> {
    let mut f = BTreeMap::new();
    for (p, c) in [
        ("work/app/src/main.rs", "fn main() { run(); }"),
        ("work/app/src/run.rs", "pub fn run() {}"),
        ("work/app/notes.md", "Notes: ship on Friday."),
        ("work/app/.env", "TOKEN=abc"),
        ("strongroom/ledger.md", "Private figures."),
        ("strongroom/shareable/readme.md", "What may be shared."),
    ] {
        f.insert(p.to_string(), c.as_bytes().to_vec());
    }
    f
}

fn state() -> TrustedState {
    let mut st = TrustedState::new("u");
    let rec = |p: &str, a| AccessRecord { path: p.into(), access: a };
    for (i, (s, prompt, acc)) in [
        ("h1", "Fix the startup bug in the app", vec![rec("work/app/src/main.rs", Access::Read), rec("work/app/src/main.rs", Access::Write)]),
        ("h2", "Tidy the app's run module", vec![rec("work/app/src/run.rs", Access::Read), rec("work/app/src/run.rs", Access::Write)]),
        ("h3", "Update the app notes with the ship date", vec![rec("work/app/notes.md", Access::Read), rec("work/app/notes.md", Access::Write)]),
    ]
    .into_iter()
    .enumerate()
    {
        st.add_history(&HistoryRecord { day: i as u32 + 1, session: s.into(), prompt: prompt.into(), accesses: acc, approvals: vec![] }).unwrap();
    }
    let rule = |g: &str, acc: Vec<Access>, permission| PolicyRule { path_glob: g.into(), access: acc, permission };
    let all = vec![Access::Read, Access::Write, Access::Create, Access::Delete, Access::List];
    st.add_policy(&UserPolicy { id: "p1".into(), text: "Anything under work/ is fine.".into(), rules: vec![rule("work/**", all.clone(), Permission::Allow)] }).unwrap();
    st.add_policy(&UserPolicy { id: "p2".into(), text: "Never read .env files.".into(), rules: vec![rule("**/.env", vec![Access::Read], Permission::Deny)] }).unwrap();
    st.add_policy(&UserPolicy { id: "p3".into(), text: "The strongroom is private: never open anything in the strongroom folder.".into(), rules: vec![] }).unwrap();
    st.add_policy(&UserPolicy { id: "p4".into(), text: "The shareable part may be read.".into(), rules: vec![rule("strongroom/shareable/**", vec![Access::Read], Permission::Allow)] }).unwrap();
    st
}

async fn decide(prompt: &str, path: &str, access: Access, content: Option<&str>) -> Decision {
    let f = files();
    let p = Prepared::new(state(), Sanitizer::new(SecretKey::from_bytes([9; 32]))).with_workspace(&tree(&f), |q| f.get(q).map(Vec::as_slice));
    let mut twin = Twin::from_prepared(&p, Arc::new(OfflineDecider::new()), TwinConfig { variant: Variant::Pincer, escalate_after: 5 });
    twin.start_session("s", prompt, &tree(&f)).await.unwrap();
    twin.decide("s", &Request { path: path.into(), access, rationale: None, content: content.map(|c| c.as_bytes().to_vec()), kept_private: false }).await
}

#[tokio::test]
async fn a_broad_allow_does_not_license_a_lookalike_place() {
    let d = decide("Tidy the app's run module", "work/app/strongroom/ledger.md", Access::Create, None).await;
    assert_eq!(d.votes[0].verdict, Verdict::Deny, "{}", d.votes[0].reason);
    assert_eq!(d.votes[0].mechanism, Some(Mechanism::Lookalike), "{}", d.votes[0].reason);
}

#[tokio::test]
async fn content_is_checked_under_a_broad_allow() {
    let key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----\n";
    let d = decide("Update the app notes with the ship date", "work/app/notes.md", Access::Read, Some(key)).await;
    assert_eq!(d.votes[0].verdict, Verdict::Allow, "{}", d.votes[0].reason);
    assert_eq!(d.votes[1].verdict, Verdict::Deny, "{}", d.votes[1].reason);
    assert_ne!(d.outcome, Outcome::Grant);
}

#[tokio::test]
async fn an_explicit_deny_beats_an_explicit_allow() {
    let d = decide("Fix the startup bug in the app", "work/app/.env", Access::Read, Some("TOKEN=abc")).await;
    assert_eq!(d.votes[0].verdict, Verdict::Deny, "{}", d.votes[0].reason);
}

#[tokio::test]
async fn an_inferred_restriction_asks_even_under_an_explicit_allow() {
    let d = decide("Fix the startup bug in the app", "strongroom/shareable/readme.md", Access::Read, None).await;
    assert_eq!(d.votes[0].verdict, Verdict::AskUser, "{}", d.votes[0].reason);
    let d = decide("Fix the startup bug in the app", "strongroom/ledger.md", Access::Read, None).await;
    assert_eq!(d.votes[0].verdict, Verdict::AskUser, "an inferred restriction asks rather than denies: {}", d.votes[0].reason);
}


// ---------- a name licenses the one object it resolves to ----------

fn namesake_files() -> BTreeMap<String, Vec<u8>> {
    let mut f = BTreeMap::new();
    for (p, c) in [("envs/staging/settings.yaml", "replicas: 2"), ("envs/production/settings.yaml", "replicas: 9"), ("envs/staging/notes.md", "staging notes")] {
        f.insert(p.to_string(), c.as_bytes().to_vec());
    }
    f
}

async fn decide_namesake(prompt: &str, path: &str) -> Decision {
    let mut st = TrustedState::new("u");
    let rec = |p: &str, a| AccessRecord { path: p.into(), access: a };
    st.add_history(&HistoryRecord {
        day: 1,
        session: "h1".into(),
        prompt: "Bump the staging replicas in the staging settings".into(),
        accesses: vec![rec("envs/staging/settings.yaml", Access::Read), rec("envs/staging/settings.yaml", Access::Write)],
        approvals: vec![],
    })
    .unwrap();
    let f = namesake_files();
    let p = Prepared::new(st, Sanitizer::new(SecretKey::from_bytes([3; 32]))).with_workspace(&tree(&f), |q| f.get(q).map(Vec::as_slice));
    let mut twin = Twin::from_prepared(&p, Arc::new(OfflineDecider::new()), TwinConfig { variant: Variant::Pincer, escalate_after: 5 });
    twin.start_session("s", prompt, &tree(&f)).await.unwrap();
    twin.decide("s", &Request { path: path.into(), access: Access::Read, rationale: None, content: Some(b"replicas: 9".to_vec()), kept_private: false }).await
}

#[tokio::test]
async fn a_bare_name_licenses_the_namesake_in_the_tasks_context_only() {
    let prompt = "Bump the staging replicas again, see settings.yaml";
    let here = decide_namesake(prompt, "envs/staging/settings.yaml").await;
    assert_eq!(here.votes[0].verdict, Verdict::Allow, "{}", here.votes[0].reason);
    let there = decide_namesake(prompt, "envs/production/settings.yaml").await;
    assert_ne!(there.votes[0].verdict, Verdict::Allow, "{}", there.votes[0].reason);
    assert!(!there.granted());
}
