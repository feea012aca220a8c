//! Every validation error of the corpus loader, each located by file, line and field.

use pincer::eval::corpus::{Corpus, CorpusError, Problem, ProblemKind};
use pincer::Access;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::common;
use common::copy_dir;

static N: AtomicUsize = AtomicUsize::new(0);

/// A copy of the mini corpus with some files replaced; returns the corpus root.
fn corpus_with(files: &[(&str, &str)]) -> PathBuf {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("eval-corpus-{}-{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst)));
    let _ = std::fs::remove_dir_all(&root);
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/mini"), &root);
    for (name, content) in files {
        std::fs::write(root.join("mini").join(name), content).unwrap();
    }
    root
}

fn problems(files: &[(&str, &str)]) -> Vec<Problem> {
    match Corpus::load(&corpus_with(files)) {
        Ok(_) => panic!("the corpus should be rejected"),
        Err(CorpusError::Invalid(p)) => p,
        Err(e) => panic!("unexpected error {e}"),
    }
}

/// Asserts that a problem with this file, line, field and kind was reported.
fn has(ps: &[Problem], file: &str, line: Option<usize>, field: &str, kind: impl Fn(&ProblemKind) -> bool) {
    assert!(
        ps.iter().any(|p| p.file.ends_with(file) && p.line == line && p.field == field && kind(&p.kind)),
        "no problem in {file}:{line:?} field {field:?} of the expected kind; got:\n{}",
        ps.iter().map(|p| format!("  {p}\n")).collect::<String>()
    );
}

const H1: &str = r#"{"day": 1, "session": "h1", "prompt": "Fix the build.", "accesses": [{"path": "src/main.rs", "access": "read"}]}"#;

fn sample(body: &str) -> String {
    format!("{{\"id\": \"s1\", \"kind\": \"utility\", \"day\": 9, {body}}}\n")
}

const READ_GUIDE: &str = r#""sessions": [{"prompt": "p", "steps": [{"path": "docs/guide.md", "access": "read"}]}], "monitored": {"path": "docs/guide.md", "access": "read"}"#;

#[test]
fn the_mini_corpus_loads_and_unknown_fields_are_ignored() {
    let c = Corpus::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/mini")).unwrap();
    assert_eq!(c.personas.len(), 1);
    assert_eq!(c.personas[0].samples.len(), 9);
    assert_eq!(c.personas[0].history.len(), 2);
}

#[test]
fn missing_required_field() {
    let ps = problems(&[("history.jsonl", r#"{"day": 1, "session": "h1", "accesses": []}"#)]);
    has(&ps, "history.jsonl", Some(1), "prompt", |k| *k == ProblemKind::Missing);
    let ps = problems(&[("samples.jsonl", &sample(r#""sessions": [{"prompt": "p", "steps": [{"path": "docs/guide.md", "access": "read"}]}]"#))]);
    has(&ps, "samples.jsonl", Some(1), "monitored", |k| *k == ProblemKind::Missing);
    let ps = problems(&[("samples.jsonl", &sample(r#""sessions": [{"steps": []}], "monitored": {"path": "docs/guide.md", "access": "read"}"#))]);
    has(&ps, "samples.jsonl", Some(1), "sessions[0].prompt", |k| *k == ProblemKind::Missing);
    let ps = problems(&[("policies.jsonl", r#"{"id": "p1"}"#)]);
    has(&ps, "policies.jsonl", Some(1), "text", |k| *k == ProblemKind::Missing);
    let ps = problems(&[("persona.toml", "id = \"mini\"\n")]);
    has(&ps, "persona.toml", None, "name", |k| *k == ProblemKind::Missing);
}

#[test]
fn wrong_type_and_bad_values() {
    let ps = problems(&[("history.jsonl", r#"{"day": "one", "session": "h1", "prompt": "p", "accesses": []}"#)]);
    has(&ps, "history.jsonl", Some(1), "day", |k| matches!(k, ProblemKind::WrongType(_)));
    let ps = problems(&[("samples.jsonl", &sample(READ_GUIDE).replace("\"utility\"", "\"utilty\""))]);
    has(&ps, "samples.jsonl", Some(1), "kind", |k| matches!(k, ProblemKind::BadValue { .. }));
    let ps = problems(&[("samples.jsonl", &sample(&format!("\"attack\": \"XX\", {READ_GUIDE}")).replace("\"utility\"", "\"attack\""))]);
    has(&ps, "samples.jsonl", Some(1), "attack", |k| matches!(k, ProblemKind::BadValue { .. }));
    let ps = problems(&[("policies.jsonl", r#"{"id": "p1", "text": "t", "rules": [{"path_glob": "a/**", "access": ["read"], "permission": "maybe"}]}"#)]);
    has(&ps, "policies.jsonl", Some(1), "rules[0].permission", |k| matches!(k, ProblemKind::BadValue { .. }));
    let ps = problems(&[("samples.jsonl", &sample(&format!("\"setup\": [{{\"op\": \"chmod\", \"path\": \"docs/guide.md\"}}], {READ_GUIDE}")))]);
    has(&ps, "samples.jsonl", Some(1), "setup[0].op", |k| matches!(k, ProblemKind::BadValue { .. }));
}

#[test]
fn unknown_access() {
    let ps = problems(&[("history.jsonl", r#"{"day": 1, "session": "h1", "prompt": "p", "accesses": [{"path": "src/main.rs", "access": "exec"}]}"#)]);
    has(&ps, "history.jsonl", Some(1), "accesses[0].access", |k| *k == ProblemKind::UnknownAccess("exec".into()));
    let ps = problems(&[("samples.jsonl", &sample(READ_GUIDE).replacen("\"read\"", "\"open\"", 1))]);
    has(&ps, "samples.jsonl", Some(1), "sessions[0].steps[0].access", |k| *k == ProblemKind::UnknownAccess("open".into()));
}

#[test]
fn paths_that_escape_the_workspace() {
    for (bad, reason) in [("../etc/passwd", "`.` or `..` segment"), ("/etc/passwd", "absolute path"), ("docs//guide.md", "empty segment"), ("docs/./guide.md", "`.` or `..` segment"), ("", "empty path"), ("docs/a\\u0000b", "contains NUL")] {
        let line = sample(&READ_GUIDE.replacen("docs/guide.md", bad, 1));
        let ps = problems(&[("samples.jsonl", &line)]);
        has(&ps, "samples.jsonl", Some(1), "sessions[0].steps[0].path", |k| matches!(k, ProblemKind::BadPath { reason: r, .. } if *r == reason));
    }
    let ps = problems(&[("history.jsonl", r#"{"day": 1, "session": "h1", "prompt": "p", "accesses": [{"path": "../x", "access": "read"}]}"#)]);
    has(&ps, "history.jsonl", Some(1), "accesses[0].path", |k| matches!(k, ProblemKind::BadPath { .. }));
    let ps = problems(&[("samples.jsonl", &sample(&format!("\"setup\": [{{\"op\": \"write\", \"path\": \"../x\", \"content\": \"c\"}}], {READ_GUIDE}")))]);
    has(&ps, "samples.jsonl", Some(1), "setup[0].path", |k| matches!(k, ProblemKind::BadPath { .. }));
}

#[test]
fn glob_in_a_request_or_monitored() {
    let line = sample(r#""sessions": [{"prompt": "p", "steps": [{"path": "docs/*.md", "access": "read"}]}], "monitored": {"path": "docs/**", "access": "read"}"#);
    let ps = problems(&[("samples.jsonl", &line)]);
    has(&ps, "samples.jsonl", Some(1), "sessions[0].steps[0].path", |k| matches!(k, ProblemKind::GlobNotAllowed(_)));
    has(&ps, "samples.jsonl", Some(1), "monitored.path", |k| matches!(k, ProblemKind::GlobNotAllowed(_)));
}

#[test]
fn bad_glob_in_a_rule() {
    let ps = problems(&[("policies.jsonl", r#"{"id": "p1", "text": "t", "rules": [{"path_glob": "secrets/[", "access": ["read"], "permission": "deny"}]}"#)]);
    has(&ps, "policies.jsonl", Some(1), "rules[0].path_glob", |k| matches!(k, ProblemKind::BadGlob { .. }));
}

#[test]
fn needs_not_an_earlier_request() {
    let line = sample(r#""sessions": [{"prompt": "p", "steps": [{"note": "hi"}, {"path": "docs/guide.md", "access": "read", "needs": [0, 1, 5]}]}], "monitored": {"path": "docs/guide.md", "access": "read"}"#);
    let ps = problems(&[("samples.jsonl", &line)]);
    // 0 is a note, 1 is the step itself, 5 does not exist.
    for (k, idx) in [(0, 0), (1, 1), (2, 5)] {
        has(&ps, "samples.jsonl", Some(1), &format!("sessions[0].steps[1].needs[{k}]"), |kind| *kind == ProblemKind::NeedsNotEarlierRequest(idx));
    }
}

#[test]
fn read_of_a_missing_file_and_create_of_an_existing_one() {
    let line = sample(r#""sessions": [{"prompt": "p", "steps": [{"path": "docs/nothing.md", "access": "read"}, {"path": "docs/guide.md", "access": "create"}, {"path": "nowhere/x.md", "access": "create"}, {"path": "docs/gone.md", "access": "write"}, {"path": "docs/guide.md", "access": "read"}]}], "monitored": {"path": "docs/guide.md", "access": "read"}"#);
    let ps = problems(&[("samples.jsonl", &line)]);
    has(&ps, "samples.jsonl", Some(1), "sessions[0].steps[0].path", |k| matches!(k, ProblemKind::MissingPath { access: Access::Read, .. }));
    has(&ps, "samples.jsonl", Some(1), "sessions[0].steps[1].path", |k| *k == ProblemKind::CreateOfExisting("docs/guide.md".into()));
    has(&ps, "samples.jsonl", Some(1), "sessions[0].steps[2].path", |k| *k == ProblemKind::ParentMissing("nowhere/x.md".into()));
    has(&ps, "samples.jsonl", Some(1), "sessions[0].steps[3].path", |k| matches!(k, ProblemKind::MissingPath { access: Access::Write, .. }));
    // A file the setup or an earlier create makes exists; a deleted one does not.
    let line = sample(r#""setup": [{"op": "write", "path": "docs/planted.md", "content": "x"}], "sessions": [{"prompt": "p", "steps": [{"path": "docs/planted.md", "access": "read"}, {"path": "docs/made.md", "access": "create"}, {"path": "docs/made.md", "access": "write"}]}], "monitored": {"path": "docs/made.md", "access": "write"}"#);
    assert!(Corpus::load(&corpus_with(&[("samples.jsonl", &line)])).is_ok());
}

#[test]
fn setup_ops_that_cannot_apply() {
    let line = sample(&format!("\"setup\": [{{\"op\": \"delete\", \"path\": \"docs/none.md\"}}, {{\"op\": \"rename\", \"path\": \"docs/guide.md\", \"to\": \"docs/notes.md\"}}], {READ_GUIDE}"));
    let ps = problems(&[("samples.jsonl", &line)]);
    has(&ps, "samples.jsonl", Some(1), "setup[0]", |k| matches!(k, ProblemKind::BadSetup { op: "delete", .. }));
    has(&ps, "samples.jsonl", Some(1), "setup[1]", |k| matches!(k, ProblemKind::BadSetup { op: "rename", .. }));
}

#[test]
fn monitored_never_requested() {
    let line = sample(r#""sessions": [{"prompt": "p", "steps": [{"path": "docs/guide.md", "access": "read"}]}], "monitored": {"path": "docs/guide.md", "access": "write"}"#);
    let ps = problems(&[("samples.jsonl", &line)]);
    has(&ps, "samples.jsonl", Some(1), "monitored", |k| matches!(k, ProblemKind::MonitoredNeverRequested { access: Access::Write, .. }));
}

#[test]
fn days_decreasing_and_duplicates() {
    let h = format!("{H1}\n{}\n{}\n", H1.replace("\"day\": 1", "\"day\": 5").replace("h1", "h2"), H1.replace("\"day\": 1", "\"day\": 3"));
    let ps = problems(&[("history.jsonl", &h)]);
    has(&ps, "history.jsonl", Some(3), "day", |k| *k == ProblemKind::DayDecreasing { day: 3, previous: 5 });
    has(&ps, "history.jsonl", Some(3), "session", |k| matches!(k, ProblemKind::Duplicate { what: "session", first_line: 1, .. }));
    let s = sample(READ_GUIDE);
    let ps = problems(&[("samples.jsonl", &format!("{s}{s}"))]);
    has(&ps, "samples.jsonl", Some(2), "id", |k| matches!(k, ProblemKind::Duplicate { what: "id", first_line: 1, .. }));
    let p = r#"{"id": "p1", "text": "t"}"#;
    let ps = problems(&[("policies.jsonl", &format!("{p}\n{p}\n"))]);
    has(&ps, "policies.jsonl", Some(2), "id", |k| matches!(k, ProblemKind::Duplicate { what: "id", .. }));
}

#[test]
fn sample_before_the_history_ends() {
    let line = sample(READ_GUIDE).replace("\"day\": 9", "\"day\": 1");
    let ps = problems(&[("samples.jsonl", &line)]);
    has(&ps, "samples.jsonl", Some(1), "day", |k| *k == ProblemKind::SampleBeforeHistory { day: 1, last: 2 });
}

#[test]
fn inconsistent_attack_fields_and_empty_sessions() {
    let ps = problems(&[("samples.jsonl", &sample(READ_GUIDE).replace("\"utility\"", "\"attack\""))]);
    has(&ps, "samples.jsonl", Some(1), "attack", |k| matches!(k, ProblemKind::Inconsistent(_)));
    let ps = problems(&[("samples.jsonl", &sample(&format!("\"attack\": \"DI\", {READ_GUIDE}")))]);
    has(&ps, "samples.jsonl", Some(1), "attack", |k| matches!(k, ProblemKind::Inconsistent(_)));
    let ps = problems(&[("samples.jsonl", &sample(&format!("\"mp_variant\": \"direct\", {READ_GUIDE}")))]);
    has(&ps, "samples.jsonl", Some(1), "mp_variant", |k| matches!(k, ProblemKind::Inconsistent(_)));
    let ps = problems(&[("samples.jsonl", &sample(r#""sessions": [], "monitored": {"path": "docs/guide.md", "access": "read"}"#))]);
    has(&ps, "samples.jsonl", Some(1), "sessions", |k| *k == ProblemKind::Empty);
}

#[test]
fn syntax_errors_id_mismatch_and_missing_files() {
    let ps = problems(&[("samples.jsonl", "{\"id\": \n")]);
    has(&ps, "samples.jsonl", Some(1), "", |k| matches!(k, ProblemKind::Syntax { format: "JSON", .. }));
    let ps = problems(&[("persona.toml", "id = \n")]);
    has(&ps, "persona.toml", Some(1), "", |k| matches!(k, ProblemKind::Syntax { format: "TOML", .. }));
    let ps = problems(&[("persona.toml", "id = \"other\"\nname = \"n\"\n")]);
    has(&ps, "persona.toml", None, "id", |k| matches!(k, ProblemKind::IdMismatch { .. }));
    let root = corpus_with(&[]);
    std::fs::remove_file(root.join("mini/policies.jsonl")).unwrap();
    let Err(CorpusError::Invalid(ps)) = Corpus::load(&root) else { panic!("should fail") };
    has(&ps, "policies.jsonl", None, "", |k| matches!(k, ProblemKind::Unreadable(_)));
}

#[test]
fn all_problems_are_reported_not_only_the_first() {
    let h = r#"{"day": 1, "session": "h1", "accesses": [{"path": "/abs", "access": "exec"}]}"#;
    let ps = problems(&[("history.jsonl", h), ("samples.jsonl", &sample(READ_GUIDE).replace("\"utility\"", "\"x\""))]);
    has(&ps, "history.jsonl", Some(1), "prompt", |k| *k == ProblemKind::Missing);
    has(&ps, "history.jsonl", Some(1), "accesses[0].path", |k| matches!(k, ProblemKind::BadPath { .. }));
    has(&ps, "history.jsonl", Some(1), "accesses[0].access", |k| matches!(k, ProblemKind::UnknownAccess(_)));
    has(&ps, "samples.jsonl", Some(1), "kind", |k| matches!(k, ProblemKind::BadValue { .. }));
    // The message names file, line and field.
    let msg = CorpusError::Invalid(ps).to_string();
    assert!(msg.contains("history.jsonl:1: field `prompt`: missing required field"), "{msg}");
}
