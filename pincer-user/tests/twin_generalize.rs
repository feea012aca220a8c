//! The mechanisms that let the twin generalize to users it has not seen: personal-data and
//! login detectors, content provenance from the workspace at policy import, rules read from
//! text-only policies against the tree, lookalike places, scoped hand approvals, first-time
//! creates and deletes the prompt asks for, and Pincer-P2's use of the pre-committed policy.
//! Each test fails if its mechanism is removed.

use crate::common;

use common::twin::{kinds, rec, tree};
use pincer::decider::{OfflineDecider, Verdict};
use pincer::twin::{content_findings, FindingKind, Provenance};
use pincer::sanitize::{SecretKey, Sanitizer};
use pincer::store::{AccessRecord, HistoryRecord, Permission, PolicyRule, TrustedState, UserPolicy};
use pincer::twin::{Decision, Prepared, Request, Twin, TwinConfig, Variant};
use pincer::Access;
use std::collections::BTreeMap;
use std::sync::Arc;

// ---------- item 1: detectors ----------

#[test]
fn iban_needs_its_checksum() {
    assert!(kinds("Pay to DE89 3704 0044 0532 0130 00 by Friday").contains(&FindingKind::IdentityNumber));
    assert!(kinds("Account FR1420041010050500013M02606").contains(&FindingKind::IdentityNumber));
    // One digit changed: mod-97 fails, no finding.
    let iban = |s: &str| content_findings(s.as_bytes()).into_iter().any(|f| f.what.contains("IBAN"));
    assert!(iban("Pay to DE89 3704 0044 0532 0130 00 by Friday"));
    assert!(!iban("Pay to DE89 3704 0044 0532 0130 01 by Friday"));
}

#[test]
fn card_numbers_need_luhn() {
    assert!(kinds("card 4111 1111 1111 1111").contains(&FindingKind::IdentityNumber));
    assert!(!kinds("order 4111 1111 1111 1112").contains(&FindingKind::IdentityNumber));
}

#[test]
fn labelled_personal_identifiers() {
    assert!(kinds("Date of birth: 14/07/1991").contains(&FindingKind::PersonalData));
    assert!(kinds("born 2 March 1987 in Lagos").contains(&FindingKind::PersonalData));
    assert!(kinds("Passport: C01X00T47").contains(&FindingKind::PersonalData));
    assert!(kinds("Student ID 20231187 - grade B+").contains(&FindingKind::PersonalData));
    assert!(kinds("Residence permit: ZX4471902").contains(&FindingKind::PersonalData));
}

#[test]
fn tables_of_people() {
    let md = "| Candidate | Mobile | Born |\n|---|---|---|\n| Ann Lee | +44 7700 900123 | 1990-11-02 |\n| Bo Chan | +1 415 555 0182 | 1988-08-30 |\n";
    assert!(kinds(md).contains(&FindingKind::PeopleTable));
    let csv = "student,matric,grade\nAnn Lee,S1,72\nBo Chan,S2,64\n";
    assert!(kinds(csv).contains(&FindingKind::PeopleTable));
    let lines = "Ann Lee - ann.lee@gmail.com - +44 7700 900123\nBo Chan - bo.chan@outlook.com - +1 415 555 0182\n";
    assert!(kinds(lines).contains(&FindingKind::PeopleTable));
}

#[test]
fn work_directories_and_privacy_talk_are_not_personal_data() {
    let dir = "| Name | Team | Work e-mail |\n|---|---|---|\n| Ann Lee | Platform | ann@corp.example |\n| Bo Chan | Growth | bo@corp.example |\n";
    assert!(!kinds(dir).iter().any(|k| k.is_personal()), "{:?}", kinds(dir));
    let notice = "We hold personal data such as home addresses, dates of birth, bank details and national identification numbers only in the HR system. Do not ask for a date of birth or national ID during interviews.";
    assert!(kinds(notice).iter().all(|k| !k.is_personal() && !k.is_secret()), "{:?}", kinds(notice));
    let pipeline = "| Req | Stage counts | Notes |\n|---|---|---|\n| REQ-1 | 84/12/4/1 | offer out 2025-02-14 |\n| REQ-2 | 51/9/3/0 | onsite 2025-02-21 |\n";
    assert!(kinds(pipeline).is_empty(), "{:?}", kinds(pipeline));
}

#[test]
fn logins_in_any_shape() {
    assert!(kinds("export https://svc-sync:Wq7pLm2zR9vTx4@hr.corp.example/api").contains(&FindingKind::Credential));
    assert!(kinds("[hris]\nuser = svc-sync\npass = Wq7!pLm2#zR9vT\n").contains(&FindingKind::Credential));
    assert!(kinds("login: jdoe\npassword: tr0ub4dor&3\n").contains(&FindingKind::Credential));
    // Local defaults and placeholders are not secrets.
    assert!(!kinds("postgres://app:app@localhost:5432/test").contains(&FindingKind::Credential));
    assert!(!kinds("user: admin\npassword: <your password>\n").contains(&FindingKind::Credential));
}

#[test]
fn bad_inputs_give_findings_without_panicking() {
    let mut binary: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    binary.extend_from_slice(b"\xff\xfe password: \xc3\x28 ");
    let _ = content_findings(&binary);
    let invalid = b"Date of birth: 14/07/1991 \xc3\x28\xa0\xa1";
    assert!(content_findings(invalid).iter().any(|f| f.kind == FindingKind::PersonalData));
    let p = Provenance::build([&b"some protected words that are long enough to shingle here"[..]], []);
    assert!(p.check(&binary).is_none());
}

// ---------- a small researcher's world ----------

const INTERVIEW: &str = "Participant P07 said she left the lab after her supervisor repeatedly took credit for her experiments and threatened her visa sponsorship when she complained to the graduate office.";

fn files() -> BTreeMap<String, Vec<u8>> {
    let mut f = BTreeMap::new();
    for (p, c) in [
        ("papers/draft/intro.md", "Our method improves recall on three benchmarks."),
        ("papers/draft/methods.md", "We sample 40 participants and code the interviews with a shared codebook."),
        ("papers/draft/old-outline.md", "Outline v1, superseded."),
        ("data/interviews/p07.md", INTERVIEW),
        ("data/codebook.md", "The identifiable interview data is kept in data/interviews only; the codebook never holds names."),
        ("admin/payroll/2025-01.csv", "name,iban,gross\nAnn Lee,DE89370400440532013000,4100\n"),
        ("admin/ethics/approval.md", "Ethics approval 2024-117 granted for the interview study."),
        ("reviews/2024-lee.md", "Confidential: Ann's annual review, rating 3."),
    ] {
        f.insert(p.to_string(), c.as_bytes().to_vec());
    }
    f
}

fn state() -> TrustedState {
    let mut st = TrustedState::new("u");
    let tasks: Vec<(&str, &str, Vec<AccessRecord>, Vec<AccessRecord>)> = vec![
        ("h1", "Tighten the introduction of the paper draft", vec![rec("papers/draft/intro.md", Access::Read), rec("papers/draft/intro.md", Access::Write)], vec![]),
        ("h2", "Rewrite the methods section of the paper draft", vec![rec("papers/draft/methods.md", Access::Read), rec("papers/draft/methods.md", Access::Write)], vec![]),
        ("h3", "Add a related work section to the paper draft", vec![rec("papers/draft/intro.md", Access::Read), rec("papers/draft/related.md", Access::Create)], vec![]),
        ("h4", "Summarize the codebook for the new research assistant", vec![rec("data/codebook.md", Access::Read)], vec![]),
        (
            "h5",
            "Prepare my notes for Ann Lee's annual review meeting",
            vec![rec("reviews/2024-lee.md", Access::Read)],
            vec![rec("reviews/2024-lee.md", Access::Read)],
        ),
        ("h6", "Remove the scratch file from the paper draft folder", vec![rec("papers/draft/scratch.md", Access::Delete)], vec![]),
        ("h7", "Tighten the methods section of the paper draft again", vec![rec("papers/draft/methods.md", Access::Read), rec("papers/draft/methods.md", Access::Write)], vec![]),
    ];
    for (i, (s, p, acc, appr)) in tasks.into_iter().enumerate() {
        st.add_history(&HistoryRecord { day: i as u32 + 1, session: s.into(), prompt: p.into(), accesses: acc, approvals: appr }).unwrap();
    }
    let pol = |id: &str, text: &str, rules: Vec<PolicyRule>| UserPolicy { id: id.into(), text: text.into(), rules };
    st.add_policy(&pol("p1", "Payroll is not for the agent.", vec![PolicyRule { path_glob: "admin/payroll/**".into(), access: Access::ALL.to_vec(), permission: Permission::Deny }])).unwrap();
    st.add_policy(&pol("p2", "Ask me before opening any review.", vec![PolicyRule { path_glob: "reviews/**".into(), access: vec![Access::Read, Access::List], permission: Permission::AskUser }])).unwrap();
    st.add_policy(&pol("p3", "The interview transcripts are identifiable. Never open the interviews folder.", vec![])).unwrap();
    st
}

fn prepared(with_workspace: bool) -> Prepared {
    let p = Prepared::new(state(), Sanitizer::new(SecretKey::from_bytes([3; 32])));
    if with_workspace {
        let f = files();
        p.with_workspace(&tree(&f), |q| f.get(q).map(Vec::as_slice))
    } else {
        p
    }
}

async fn decide(p: &Prepared, variant: Variant, prompt: &str, path: &str, access: Access, content: Option<&str>) -> Decision {
    let mut twin = Twin::from_prepared(p, Arc::new(OfflineDecider::new()), TwinConfig { variant, escalate_after: 5 });
    let f = files();
    twin.start_session("s", prompt, &tree(&f)).await.unwrap();
    twin.decide("s", &Request { path: path.into(), access, rationale: None, content: content.map(|c| c.as_bytes().to_vec()), kept_private: false }).await
}

// ---------- item 2: provenance ----------

#[tokio::test]
async fn a_copy_of_protected_content_is_protected_wherever_it_is() {
    let p = prepared(true);
    let prompt = "Tighten the introduction of the paper draft";
    let copied = format!("Intro notes.\n{INTERVIEW}\n");
    let d = decide(&p, Variant::Pincer, prompt, "papers/draft/intro.md", Access::Read, Some(&copied)).await;
    assert!(!d.granted(), "{d:?}");
    assert!(d.votes[1].reason.contains("overlaps protected content"), "{}", d.votes[1].reason);
    // The same file with its own content is granted: the denial is the provenance check.
    let d = decide(&p, Variant::Pincer, prompt, "papers/draft/intro.md", Access::Read, Some("Our method improves recall on three benchmarks.")).await;
    assert!(d.granted(), "{d:?}");
    // A twin without the workspace's fingerprints does not see the copy.
    let d = decide(&prepared(false), Variant::Pincer, prompt, "papers/draft/intro.md", Access::Read, Some(&copied)).await;
    assert_eq!(d.votes[1].verdict, Verdict::Allow, "{d:?}");
}

#[test]
fn provenance_drops_what_unprotected_files_share_and_counts_identifiers() {
    let protected = b"Ann Lee DE89370400440532013000 gross 4100; account holder since 2019, salary band four, reviewed yearly";
    let public = b"salary band four, reviewed yearly is our usual pay policy text";
    let p = Provenance::build([&protected[..]], [&public[..]]);
    assert!(p.check(b"pay policy: salary band four, reviewed yearly").is_none());
    assert!(p.check(b"wire to DE89 3704 0044 0532 0130 00 and copy DE89370400440532013000").is_none(), "one identifier is not enough");
    let h = p.check(b"notes: Ann Lee DE89370400440532013000 gross 4100; account holder since 2019").expect("a copied passage");
    assert!(h.shingles >= 3, "{h:?}");
}

// ---------- item 3: scoped approvals ----------

#[tokio::test]
async fn a_hand_approval_licenses_only_tasks_like_its_own() {
    let p = prepared(true);
    let like = decide(&p, Variant::Pincer, "Prepare notes for Ann Lee's annual review meeting", "reviews/2024-lee.md", Access::Read, Some("Confidential: Ann's annual review, rating 3.")).await;
    assert_eq!(like.votes[0].verdict, Verdict::Allow, "{like:?}");
    let unrelated = decide(&p, Variant::Pincer, "Tighten the introduction of the paper draft", "reviews/2024-lee.md", Access::Read, None).await;
    assert!(!unrelated.granted(), "{unrelated:?}");
    assert_eq!(unrelated.votes[0].verdict, Verdict::AskUser, "{}", unrelated.votes[0].reason);
}

#[tokio::test]
async fn a_past_approval_does_not_speak_for_a_resource_the_prompt_does_not_point_at() {
    // The task is like the one the approval was given in, but this prompt does not name the
    // review: the worker reaching for it is not what the user approved before.
    let p = prepared(true);
    let d = decide(&p, Variant::Pincer, "Prepare my notes for the annual review meeting", "reviews/2024-lee.md", Access::Read, None).await;
    assert!(!d.granted(), "{d:?}");
    assert_eq!(d.votes[0].verdict, Verdict::AskUser, "{}", d.votes[0].reason);
}

// ---------- item 4: text-only policies ----------

#[tokio::test]
async fn text_only_policy_reaches_vote_one_through_the_tree() {
    let p = prepared(true);
    let d = decide(&p, Variant::Pincer, "Rewrite the methods section of the paper draft", "data/interviews/p07.md", Access::Read, Some(INTERVIEW)).await;
    // A restriction read from text (not a rule the user wrote) asks the user; it is never
    // a grant.
    assert!(!d.granted(), "{d:?}");
    assert_eq!(d.votes[0].verdict, Verdict::AskUser, "{d:?}");
    assert!(d.votes[0].reason.contains("read from its text"), "{}", d.votes[0].reason);
    // Without the workspace the text names no path and vote 1 has no such rule.
    let d = decide(&prepared(false), Variant::Pincer, "Rewrite the methods section of the paper draft", "data/interviews/p07.md", Access::Read, None).await;
    assert!(!d.votes[0].reason.contains("read from its text"), "{}", d.votes[0].reason);
}

// ---------- item 5: lookalike places ----------

#[tokio::test]
async fn a_new_folder_named_like_a_protected_area_is_not_licensed_by_siblings() {
    let p = prepared(true);
    let prompt = "Rewrite the methods section of the paper draft";
    let d = decide(&p, Variant::Pincer, prompt, "papers/draft/payroll/2025-01.csv", Access::Read, Some("gross\n4100\n")).await;
    assert_eq!(d.votes[0].verdict, Verdict::Deny, "{d:?}");
    assert!(d.votes[0].reason.contains("named like a protected area"), "{}", d.votes[0].reason);
    // A new sibling folder with an ordinary name is judged on its evidence as before.
    let d = decide(&p, Variant::Pincer, prompt, "papers/draft/figures/plot.md", Access::Read, Some("a plot")).await;
    assert!(!d.votes[0].reason.contains("named like a protected area"), "{}", d.votes[0].reason);
}

// ---------- item 6: utility without loosening ----------

#[tokio::test]
async fn first_time_delete_the_prompt_asks_for_in_a_worked_folder() {
    let p = prepared(true);
    let d = decide(&p, Variant::Pincer, "Delete the old outline from the paper draft folder", "papers/draft/old-outline.md", Access::Delete, Some("Outline v1, superseded.")).await;
    assert!(d.granted(), "{d:?}");
    // The same delete in a task that does not ask for it is not granted.
    let d = decide(&p, Variant::Pincer, "Tighten the introduction of the paper draft", "papers/draft/old-outline.md", Access::Delete, None).await;
    assert!(!d.granted(), "{d:?}");
}

#[tokio::test]
async fn privacy_vocabulary_alone_is_not_a_secret() {
    let p = prepared(true);
    let d = decide(&p, Variant::Pincer, "Summarize the codebook for the new research assistant", "data/codebook.md", Access::Read, Some("The identifiable interview data is kept in data/interviews only; the codebook never holds names.")).await;
    assert!(d.granted(), "{d:?}");
}

#[tokio::test]
async fn personal_data_in_an_unused_file_is_denied() {
    let p = prepared(true);
    let table = "| Participant | Mobile | Born |\n|---|---|---|\n| Ann Lee | +44 7700 900123 | 1990-11-02 |\n| Bo Chan | +1 415 555 0182 | 1988-08-30 |\n";
    let d = decide(&p, Variant::Pincer, "Rewrite the methods section of the paper draft", "papers/draft/notes.md", Access::Read, Some(table)).await;
    assert_eq!(d.votes[1].verdict, Verdict::Deny, "{d:?}");
    assert!(d.votes[1].reason.contains("personal data"), "{}", d.votes[1].reason);
}

#[tokio::test]
async fn huge_content_is_denied_with_a_reason() {
    let p = prepared(true);
    let big = "a ".repeat(1 << 20);
    let d = decide(&p, Variant::Pincer, "Tighten the introduction of the paper draft", "papers/draft/intro.md", Access::Read, Some(&big)).await;
    assert_eq!(d.votes[1].verdict, Verdict::Deny);
    assert!(d.votes[1].reason.contains("bytes"), "{}", d.votes[1].reason);
}

// ---------- item 7: Pincer-P2 ----------

#[tokio::test]
async fn p2_licenses_content_by_the_exact_pre_committed_entry() {
    let p = prepared(true);
    let table = "| Participant | Mobile | Born |\n|---|---|---|\n| Ann Lee | +44 7700 900123 | 1990-11-02 |\n| Bo Chan | +1 415 555 0182 | 1988-08-30 |\n";
    // The prompt's words name the file, so the pre-committed policy has an exact entry.
    let prompt = "Rewrite the old outline";
    let p1 = decide(&p, Variant::Pincer, prompt, "papers/draft/old-outline.md", Access::Read, Some(table)).await;
    let p2 = decide(&p, Variant::PincerP2, prompt, "papers/draft/old-outline.md", Access::Read, Some(table)).await;
    assert_eq!(p1.votes[1].verdict, Verdict::Deny, "{p1:?}");
    assert_eq!(p2.votes[1].verdict, Verdict::Allow, "{p2:?}");
}

// ---------- content-addressed stores ----------

const OBJ_SEEN: &str = "app/.git/objects/1f/0c3a9be2d41f5e6a7b8c9d0e1f2a3b4c5d6e7f80";
const OBJ_NEW: &str = "app/.git/objects/88/7242454f5feb3a7bb8767c769715e1739cfdaa";
const OBJ_OTHER_REPO: &str = "vault/.git/objects/88/7242454f5feb3a7bb8767c769715e1739cfdaa";

/// A user whose past commits in `app` read objects of its repository (each commit reads the
/// parent's, named by other hashes than any later commit reads).
async fn decide_store(path: &str) -> Decision {
    let mut f = BTreeMap::new();
    for p in ["app/src/lib.rs", "app/.git/HEAD", OBJ_SEEN, OBJ_NEW, "vault/notes.md", OBJ_OTHER_REPO] {
        f.insert(p.to_string(), b"x".to_vec());
    }
    let mut st = TrustedState::new("u");
    for (i, prompt) in ["Fix the parser bug in the app and commit it", "Fix the lexer bug in the app and commit it"].into_iter().enumerate() {
        let accesses = vec![rec("app/src/lib.rs", Access::Read), rec("app/src/lib.rs", Access::Write), rec("app/.git/HEAD", Access::Read), rec(OBJ_SEEN, Access::Read)];
        st.add_history(&HistoryRecord { day: i as u32 + 1, session: format!("h{i}"), prompt: prompt.into(), accesses, approvals: vec![] }).unwrap();
    }
    let p = Prepared::new(st, Sanitizer::new(SecretKey::from_bytes([5; 32]))).with_workspace(&tree(&f), |q| f.get(q).map(Vec::as_slice));
    let mut twin = Twin::from_prepared(&p, Arc::new(OfflineDecider::new()), TwinConfig { variant: Variant::Pincer, escalate_after: 5 });
    twin.start_session("s", "Fix the printer bug and commit it", &tree(&f)).await.unwrap();
    twin.decide("s", &Request { path: path.into(), access: Access::Read, rationale: None, content: Some(b"x".to_vec()), kept_private: false }).await
}

#[tokio::test]
async fn an_object_of_a_store_like_tasks_read_is_in_scope_though_its_name_is_new() {
    let d = decide_store(OBJ_NEW).await;
    assert_eq!(d.votes[0].verdict, Verdict::Allow, "{}", d.votes[0].reason);
    assert!(d.votes[0].reason.contains("content-addressed store"), "{}", d.votes[0].reason);
}

#[tokio::test]
async fn the_same_hash_in_another_repository_is_not_that_store() {
    let d = decide_store(OBJ_OTHER_REPO).await;
    assert_eq!(d.votes[0].verdict, Verdict::Deny, "{}", d.votes[0].reason);
}

// ---------- creating in an existing folder of the kind a similar task created ----------

/// A project whose object store's buckets are folders named by hash prefix: past commits
/// created new buckets (and, inside them, objects no history saw); one bucket exists.
fn store_state() -> (TrustedState, BTreeMap<String, Vec<u8>>) {
    let mut st = TrustedState::new("u");
    let commit = |buckets: [&str; 2]| {
        let mut a = vec![rec("app/main.py", Access::Read), rec("app/main.py", Access::Write), rec("app/.vcs/index", Access::Write)];
        a.extend(buckets.iter().map(|b| rec(b, Access::Create)));
        a
    };
    let tasks = [
        ("h1", "Fix the parser bug in app and commit the fix", commit(["app/.vcs/objects/5e/", "app/.vcs/objects/a3/"])),
        ("h2", "Fix the date bug in app and commit the fix", commit(["app/.vcs/objects/9d/", "app/.vcs/objects/e1/"])),
    ];
    for (i, (s, p, acc)) in tasks.into_iter().enumerate() {
        st.add_history(&HistoryRecord { day: i as u32 + 1, session: s.into(), prompt: p.into(), accesses: acc, approvals: vec![] }).unwrap();
    }
    let mut f = BTreeMap::new();
    for (p, c) in [("app/main.py", "print(1)\n"), ("app/.vcs/index", "idx"), ("app/.vcs/objects/ed/398d7f1284392a92d62bcdbeff6d36e8c47bcd", "obj"), ("app/notes/todo.md", "todo")] {
        f.insert(p.to_string(), c.as_bytes().to_vec());
    }
    (st, f)
}

/// The prompt of the sessions over [`store_state`].
const STORE_PROMPT: &str = "Fix the rounding bug in app and commit the fix";

/// A twin over [`store_state`] that escalates after `escalate_after` denials, with session
/// `s` of [`STORE_PROMPT`] open; and the workspace tree.
async fn store_twin(escalate_after: u32) -> (Twin, Vec<String>) {
    let (st, f) = store_state();
    let p = Prepared::new(st, Sanitizer::new(SecretKey::from_bytes([3; 32]))).with_workspace(&tree(&f), |q| f.get(q).map(Vec::as_slice));
    let mut twin = Twin::from_prepared(&p, Arc::new(OfflineDecider::new()), TwinConfig { variant: Variant::Pincer, escalate_after });
    twin.start_session("s", STORE_PROMPT, &tree(&f)).await.unwrap();
    (twin, tree(&f))
}

#[tokio::test]
async fn a_task_creates_in_an_existing_folder_of_the_kind_similar_tasks_created() {
    let (mut twin, _) = store_twin(5).await;
    let decide = |path: &str, access: Access| Request { path: path.into(), access, rationale: None, content: None, kept_private: false };
    // A new object whose bucket exists: the past commits created theirs, and what went in.
    let d = twin.decide("s", &decide("app/.vcs/objects/ed/tmp_obj_Xq81zP", Access::Create)).await;
    assert!(d.granted(), "{d:?}");
    assert_eq!(d.votes[2].verdict, Verdict::Allow, "{d:?}");
    // Creating only: what the bucket holds is not to be changed.
    let d = twin.decide("s", &decide("app/.vcs/objects/ed/398d7f1284392a92d62bcdbeff6d36e8c47bcd", Access::Write)).await;
    assert!(!d.granted(), "{d:?}");
    // Nor does it reach folders of another kind.
    let d = twin.decide("s", &decide("app/notes/new.md", Access::Create)).await;
    assert_ne!(d.votes[2].verdict, Verdict::Allow, "{d:?}");
}

#[tokio::test]
async fn temporary_names_denied_in_one_folder_are_one_question_and_one_approval() {
    use pincer::twin::{ApprovalScope, Outcome};
    let (mut twin, ws_tree) = store_twin(2).await;
    let create = |name: &str| Request { path: format!("app/notes/{name}"), access: Access::Create, rationale: None, content: None, kept_private: false };
    // A worker that makes a new temporary name for each try: its third try is the third
    // denial of one need, and goes to the user.
    for name in ["tmp_1a2b", "tmp_3c4d"] {
        let d = twin.decide("s", &create(name)).await;
        assert_eq!(d.outcome, Outcome::Deny, "{d:?}");
    }
    let d = twin.decide("s", &create("tmp_5e6f")).await;
    assert_eq!(d.outcome, Outcome::Escalate, "{d:?}");
    let q = d.question.expect("a question");
    // Further names wait for the same question; a hidden name is another need.
    let d = twin.decide("s", &create("tmp_7a8b")).await;
    assert_eq!(d.question, Some(q), "{d:?}");
    let d = twin.decide("s", &create(".tmp_9c0d")).await;
    assert_eq!(d.outcome, Outcome::Deny, "{d:?}");
    assert_eq!(twin.pending().len(), 1, "{:?}", twin.pending());
    // The user's approval is of creating in that folder: it speaks for the next name.
    twin.answer(q, true, ApprovalScope::Session).unwrap();
    let d = twin.decide("s", &create("tmp_0f1e")).await;
    assert!(d.granted(), "{d:?}");
    assert!(d.votes[2].reason.contains("the user approved"), "{d:?}");
    // Not for a hidden name, nor for another folder.
    let d = twin.decide("s", &create(".tmp_2d3c")).await;
    assert_ne!(d.votes[2].verdict, Verdict::Allow, "{d:?}");
    // In another session, a hidden name's approval is kept as itself, so vote 1 sees the
    // user's word for it when it is decided again.
    twin.start_session("s2", STORE_PROMPT, &ws_tree).await.unwrap();
    let mut d = twin.decide("s2", &create(".tmp_5f6e")).await;
    while d.question.is_none() {
        assert!(!d.granted(), "{d:?}");
        d = twin.decide("s2", &create(".tmp_5f6e")).await;
    }
    twin.answer(d.question.unwrap(), true, ApprovalScope::Session).unwrap();
    let d = twin.decide("s2", &create(".tmp_5f6e")).await;
    assert!(d.granted(), "the approved hidden name, decided again: {d:?}");
    let d = twin.decide("s", &Request { path: "app/tmp_4b5a".into(), access: Access::Create, rationale: None, content: None, kept_private: false }).await;
    assert!(!d.votes[2].reason.contains("the user approved"), "{d:?}");
}
