//! `pincer history convert` on transcripts in Claude Code's, Codex's and Gemini CLI's formats
//! (fixtures in `tests/fixtures/transcripts/`, with `@ROOT@` standing for the root; Claude
//! Code's and Codex's written after the formats' public descriptions, Gemini CLI's recorded
//! from a real Gemini CLI 0.61 run against the scripted model): one task per prompt,
//! accesses only from file tools that succeeded, everything else counted; truncated and
//! malformed lines are errors naming the file and line and lose nothing else; the output is
//! accepted by `pincer import`.

use pincer::agents::transcript::{convert, Agent, Conversion, Unattributed};
use pincer::store::{parse_history, Store};
use pincer::Access;
use std::path::{Path, PathBuf};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/transcripts");

/// The fixtures of `agent_dir` copied under a temporary folder with `@ROOT@` replaced by a
/// real root (holding the folders and files the Grep calls name).
struct Setup {
    _dir: tempfile::TempDir,
    root: PathBuf,
    files: Vec<PathBuf>,
}

fn setup(agent_dir: &str) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("work");
    std::fs::create_dir_all(root.join("projects/ledger/src")).unwrap();
    std::fs::create_dir_all(root.join("notes")).unwrap();
    std::fs::write(root.join("notes/standup.md"), "Mon: ledger backups\n").unwrap();
    let mut files = Vec::new();
    let mut stack = vec![Path::new(FIXTURES).join(agent_dir)];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                files.push(p);
            }
        }
    }
    files.sort();
    let copies = files
        .iter()
        .map(|f| {
            let to = dir.path().join("t").join(f.strip_prefix(FIXTURES).unwrap());
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::write(&to, std::fs::read_to_string(f).unwrap().replace("@ROOT@", root.to_str().unwrap())).unwrap();
            to
        })
        .collect();
    Setup { _dir: dir, root, files: copies }
}

/// A task as (day, session, prompt, accesses).
type TaskView = (u32, String, String, Vec<(String, Access)>);

fn tasks(c: &Conversion) -> Vec<TaskView> {
    c.history.iter().map(|h| (h.day, h.session.clone(), h.prompt.clone(), h.accesses.iter().map(|a| (a.path.clone(), a.access)).collect())).collect()
}

fn acc(list: &[(&str, Access)]) -> Vec<(String, Access)> {
    list.iter().map(|(p, a)| (p.to_string(), *a)).collect()
}

fn errors(c: &Conversion) -> Vec<(String, Option<usize>)> {
    c.errors.iter().map(|e| (e.file.file_name().unwrap().to_string_lossy().into_owned(), e.line)).collect()
}

/// The output of a conversion is what `pincer import` reads: the same parser, then a store.
fn assert_importable(c: &Conversion) {
    let d = tempfile::tempdir().unwrap();
    let (h, p) = (d.path().join("history.jsonl"), d.path().join("policies.jsonl"));
    std::fs::write(&h, c.to_jsonl()).unwrap();
    std::fs::write(&p, "").unwrap();
    let parsed = parse_history(&h).unwrap();
    assert_eq!(parsed, c.history);
    let sum = Store::in_memory().unwrap().import_persona("dana", &h, &p).unwrap();
    assert_eq!(sum.tasks, c.history.len());
}

#[test]
fn claude_code_transcripts_become_one_task_per_prompt_with_the_file_tools_accesses() {
    use Access::*;
    let s = setup("claude-code");
    let c = convert(Agent::ClaudeCode, &s.files, &s.root);
    const S1: &str = "5f1c2a9e-7b1d-4e0a-9c55-3d2f8e6a1b01";
    const S2: &str = "a03be4d2-11f9-4c2e-8d0b-6f5e9a7c2d02";
    const S3: &str = "c9d8e7f6-2233-4a5b-9e1f-0a1b2c3d4e03";
    assert_eq!(
        tasks(&c),
        vec![
            (0, format!("{S1}-1"), "Add a --verbose flag to the ledger CLI and update its help text.".into(), acc(&[("projects/ledger/src/cli.rs", Read), ("projects/ledger/src/cli.rs", Write)])),
            (
                1,
                format!("{S1}-2"),
                "Write release notes for 0.4 in docs/RELEASE.md.".into(),
                // The subagent's (sidechain) Grep belongs to the prompt it worked for.
                acc(&[("projects/ledger/docs/", List), ("projects/ledger/docs/RELEASE.md", Create), ("projects/ledger/src/", List)])
            ),
            (
                2,
                format!("{S2}-1"),
                "Summarize my standup notes and tick off the done items in todo.md.".into(),
                acc(&[("notes/standup.md", Read), ("notes/todo.md", Read), ("notes/todo.md", Write), ("analysis/hours.ipynb", Read), ("analysis/hours.ipynb", Write)])
            ),
            (3, format!("{S3}-1"), "Find the notes that mention backups.".into(), acc(&[("notes/standup.md", Read)])),
        ]
    );
    // The truncated line in the middle, the truncated last line, a non-object line.
    assert_eq!(errors(&c), [("ledger.jsonl".to_string(), Some(15)), ("ledger.jsonl".into(), Some(29)), ("notes.jsonl".into(), Some(13))]);
    let msg = c.errors[0].to_string();
    assert!(msg.contains("ledger.jsonl:15:") && msg.contains("not valid JSON"), "{msg}");
    let counted: Vec<(Unattributed, u64)> = c.unattributed.iter().map(|(k, v)| (*k, *v)).collect();
    use Unattributed as U;
    assert_eq!(
        counted,
        [
            (U::ShellCommand, 1),
            (U::OtherTool, 1),
            (U::FailedCall, 1),
            (U::NoResult, 1),
            (U::CreateOrWrite, 1),
            (U::OutsideRoot, 1),
            (U::RootItself, 1),
            (U::DotSegments, 1),
            (U::AfterBadLine, 1),
            (U::NotAPrompt, 1),
        ]
    );
    assert_eq!(c.repeated, 1, "the resumed session's copy of a prompt is dropped");
    assert_importable(&c);
}

#[test]
fn codex_rollouts_become_history_from_apply_patch_and_the_file_tools() {
    use Access::*;
    let s = setup("codex");
    let c = convert(Agent::Codex, &s.files, &s.root);
    const X1: &str = "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a51";
    const X2: &str = "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a52";
    assert_eq!(
        tasks(&c),
        vec![
            (
                0,
                format!("{X1}-1"),
                "Make the notifier retry failed webhooks three times.".into(),
                acc(&[("projects/notifier/src/webhook.rs", Read), ("projects/notifier/src/webhook.rs", Write), ("projects/notifier/src/retry.rs", Create)])
            ),
            (
                0,
                format!("{X1}-2"),
                "Also document it in the README.".into(),
                // A move is a delete of the old name and a create of the new one.
                acc(&[
                    ("projects/notifier/README.md", Read),
                    ("projects/notifier/README.md", Write),
                    ("projects/notifier/docs/old-name.md", Read),
                    ("projects/notifier/docs/old-name.md", Delete),
                    ("projects/notifier/docs/retries.md", Create)
                ])
            ),
            (2, format!("{X2}-1"), "Add the backup check to my todo list.".into(), acc(&[("notes/todo.md", Read), ("notes/todo.md", Write)])),
        ]
    );
    assert_eq!(errors(&c).len(), 1);
    assert_eq!(c.errors[0].line, Some(14));
    use Unattributed as U;
    let counted: Vec<(Unattributed, u64)> = c.unattributed.iter().map(|(k, v)| (*k, *v)).collect();
    // Two shell commands, the failed patch and the patch the user rejected, update_plan,
    // the read_file call without output.
    assert_eq!(counted, [(U::ShellCommand, 2), (U::OtherTool, 1), (U::FailedCall, 2), (U::NoResult, 1)]);
    assert_importable(&c);
}

#[test]
fn the_cli_writes_history_on_stdout_and_names_bad_lines_on_stderr() {
    let s = setup("claude-code");
    let transcripts = s.files[0].parent().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pincer"))
        .args(["history", "convert", "--from", "claude-code", "--root"])
        .arg(&s.root)
        .arg(transcripts)
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "unreadable lines make the exit code 1\n{stderr}");
    assert_eq!(stdout.lines().count(), 4, "{stdout}");
    assert_eq!(stdout, convert(Agent::ClaudeCode, &s.files, &s.root).to_jsonl(), "a folder is read as its .jsonl files");
    assert!(stderr.contains("ledger.jsonl:15: not valid JSON"), "{stderr}");
    assert!(stderr.contains("notes.jsonl:13: not a JSON object"), "{stderr}");
    assert!(stderr.contains("converted 4 tasks with 11 accesses from 2 files"), "{stderr}");
    assert!(stderr.contains("not attributed: 1 shell commands"), "{stderr}");
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_pincer")).args(["history", "convert", "--from", "gemini", "--root", "/w", "x.jsonl"]).output().unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("gemini"));
}

#[test]
fn an_unreadable_file_is_named_and_the_others_are_still_converted() {
    let s = setup("codex");
    let mut files = vec![PathBuf::from("/nonexistent/rollout.jsonl")];
    files.extend(s.files.iter().cloned());
    let c = convert(Agent::Codex, &files, &s.root);
    assert_eq!(c.history.len(), 3);
    assert_eq!(c.errors[0].line, None);
    assert!(c.errors[0].to_string().starts_with("/nonexistent/rollout.jsonl: cannot read"), "{}", c.errors[0]);
}

/// Gemini CLI's sessions, recorded in `gemini-cli/tmp/almanac/chats/`: three prompts (the
/// second and third resumed with `--resume latest`; the resumed runs also started a second
/// chat file of the same session with no prompt in it), and a later session whose prompt
/// names a file with `@` (Gemini CLI sends the file's content with it).
const G: &str = "9c852e2d-c2a5-490c-ad3a-92fc66b4b0fc";
const G2: &str = "e4fb33bd-ec3c-49a4-964e-747bfa7796ed";
const G_CHAT: &str = "session-2026-12-02T18-39-9c852e2d.jsonl";

/// The Gemini CLI fixture set up, with the project folders its `grep_search` looked in, and
/// the chat files only (not `.project_root`).
fn gemini_setup() -> Setup {
    let mut s = setup("gemini-cli");
    std::fs::create_dir_all(s.root.join("projects/almanac/src")).unwrap();
    s.files.retain(|f| f.extension().is_some_and(|x| x == "jsonl"));
    assert_eq!(s.files.len(), 3);
    s
}

#[test]
fn gemini_cli_chats_become_history_from_the_file_tools_that_succeeded() {
    use Access::*;
    let s = gemini_setup();
    let c = convert(Agent::GeminiCli, &s.files, &s.root);
    assert!(c.errors.is_empty(), "{:?}", c.errors);
    assert_eq!(
        tasks(&c),
        vec![
            (
                0,
                format!("{G}-1"),
                "Tidy the almanac: read the README, greet the almanac in src/main.txt, start notes/todo.md, and look around.".into(),
                // read_file with a path relative to .project_root, replace (an edit),
                // write_file of a new file (`isNewFile`), list_directory.
                acc(&[
                    ("projects/almanac/README.md", Read),
                    ("projects/almanac/src/main.txt", Read),
                    ("projects/almanac/src/main.txt", Write),
                    ("projects/almanac/notes/todo.md", Create),
                    ("projects/almanac/src/", List),
                ])
            ),
            (
                0,
                format!("{G}-2"),
                "Now check the notes, find the TODOs, and rewrite the README around the moon phases.".into(),
                // glob, grep_search of the project and of a folder, write_file over an
                // existing file, replace with an empty old_string (a create).
                acc(&[
                    ("projects/almanac/notes/", List),
                    ("projects/almanac/", List),
                    ("projects/almanac/src/", List),
                    ("projects/almanac/README.md", Write),
                    ("projects/almanac/notes/ideas.md", Create),
                ])
            ),
            (0, format!("{G}-3"), "Plan the moon phases work.".into(), acc(&[("projects/almanac/notes/plan.md", Read)])),
            // The prompt as typed (`displayContent`), not with the file's content; the CLI's
            // own read of the file is no tool call of the model.
            (0, format!("{G2}-1"), "Summarize @notes/plan.md please".into(), vec![]),
        ]
    );
    use Unattributed as U;
    let counted: Vec<(Unattributed, u64)> = c.unattributed.iter().map(|(k, v)| (*k, *v)).collect();
    // run_shell_command; write_todos; the read of a missing file, the write_file the file's
    // permissions refused and the call of read_many_files (not a tool of this run).
    assert_eq!(counted, [(U::ShellCommand, 1), (U::OtherTool, 1), (U::FailedCall, 3)]);
    assert_eq!(c.repeated, 0);
    assert_importable(&c);
}

#[test]
fn gemini_cli_bad_lines_are_named_and_the_other_lines_still_count() {
    use Access::*;
    let s = gemini_setup();
    let chat = s.files.iter().find(|f| f.ends_with(G_CHAT)).unwrap().clone();
    let text = std::fs::read_to_string(&chat).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    assert!(lines[11].contains("\"name\":\"replace\"") && lines[39].contains("\"type\":\"gemini\""), "the recorded chat changed");
    // Line 12, the replace call's result, cut short; line 40, the model's last answer of the
    // first prompt, without its timestamp; a line that is not an object before line 78.
    lines[11].truncate(300);
    let v: serde_json::Value = serde_json::from_str(&lines[39]).unwrap();
    let mut o = v.as_object().unwrap().clone();
    o.remove("timestamp");
    lines[39] = serde_json::Value::Object(o).to_string();
    lines.insert(77, "[1, 2]".into());
    std::fs::write(&chat, lines.join("\n") + "\n").unwrap();
    let c = convert(Agent::GeminiCli, &s.files, &s.root);
    assert_eq!(errors(&c), [(G_CHAT.to_string(), Some(12)), (G_CHAT.into(), Some(40)), (G_CHAT.into(), Some(78))]);
    let msgs: Vec<String> = c.errors.iter().map(|e| e.to_string()).collect();
    assert!(msgs[0].contains(&format!("{G_CHAT}:12: not valid JSON")), "{}", msgs[0]);
    assert!(msgs[1].contains(&format!("{G_CHAT}:40: `timestamp` is missing")), "{}", msgs[1]);
    assert!(msgs[2].contains(&format!("{G_CHAT}:78: not a JSON object")), "{}", msgs[2]);
    let got = tasks(&c);
    assert_eq!(got.len(), 4);
    // The replace is lost with its line; the write_file and list_directory after the cut
    // line and before the next prompt are not guessed to belong to the first prompt.
    assert_eq!(got[0].3, acc(&[("projects/almanac/README.md", Read)]));
    assert_eq!(got[1].3.len(), 5);
    assert_eq!(got[2].3, acc(&[("projects/almanac/notes/plan.md", Read)]));
    use Unattributed as U;
    let counted: Vec<(Unattributed, u64)> = c.unattributed.iter().map(|(k, v)| (*k, *v)).collect();
    assert_eq!(counted, [(U::ShellCommand, 1), (U::OtherTool, 1), (U::FailedCall, 3), (U::AfterBadLine, 2)]);
    assert_importable(&c);
}

#[test]
fn the_cli_finds_gemini_cli_chats_under_a_folder() {
    let s = gemini_setup();
    // ~/.gemini/tmp/ as given: the chats of every project under it, and nothing else (the
    // session logs Gemini CLI keeps beside them are not chats).
    let tmp = s.files[0].parent().unwrap().parent().unwrap().parent().unwrap();
    std::fs::create_dir_all(tmp.join("almanac/logs")).unwrap();
    std::fs::write(tmp.join("almanac/logs/session-9c852e2d.jsonl"), "not a chat\n").unwrap();
    std::fs::write(tmp.join("almanac/notes.jsonl"), "not a chat\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pincer"))
        .args(["history", "convert", "--from", "gemini-cli", "--root"])
        .arg(&s.root)
        .arg(tmp)
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(stdout, convert(Agent::GeminiCli, &s.files, &s.root).to_jsonl());
    assert!(stderr.contains("converted 4 tasks with 11 accesses from 3 files"), "{stderr}");
    assert!(stderr.contains("not attributed: 1 shell commands"), "{stderr}");
}
