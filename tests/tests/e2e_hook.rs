//! `pincer hook claude-code` inside a real session under the BPF LSM (in the VM, as root):
//! the worker (uid 1000, in its session cgroup) feeds the hook Claude Code's `PreToolUse`
//! JSON for each file tool, then does what the tool would do with real processes. Every
//! `allow` must be followed by the kernel letting the access through, every `deny` by the
//! kernel refusing it (kernel misses are only recorded here, never turned into grants).

use pincer_tests::worker::{chown_tree, Daemon, DaemonSettings};
use std::path::Path;
use std::io::Write;
use std::process::Command;

const PINCER: &str = env!("CARGO_BIN_EXE_pincer");
const FILES: &[(&str, &str)] = &[
    ("notes/todo.md", include_str!("../../corpus/software-dev/workspace/notes/todo.md")),
    ("notes/standup.md", include_str!("../../corpus/software-dev/workspace/notes/standup.md")),
    ("secrets/prod.env", include_str!("../../corpus/software-dev/workspace/secrets/prod.env")),
];
/// Trusted history and policies of the shipped software-dev persona.
const HISTORY: &str = include_str!("../../corpus/software-dev/history.jsonl");
const POLICIES: &str = include_str!("../../corpus/software-dev/policies.jsonl");
const TODO_PROMPT: &str = "Update my todo: tick off the release notes item and add 'look at the ledger backups'.";

/// The daemon's configuration copied to `/etc/pincer/pincer.toml` (the VM's own `/etc`)
/// while it lives, as an installed Pincer has it; removed on drop, so that the later tests'
/// commands without `--config` do not read it.
struct Installed;

impl Installed {
    fn config(from: &Path) -> Installed {
        std::fs::create_dir_all("/etc/pincer").unwrap();
        std::fs::copy(from, "/etc/pincer/pincer.toml").unwrap();
        std::fs::set_permissions("/etc/pincer/pincer.toml", std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
        Installed
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all("/etc/pincer");
    }
}

#[test]
fn the_hooks_decisions_inside_a_session_match_the_kernels() {
    let dir = pincer_tests::fresh_dir("e2e-hook");
    let ws = dir.join("ws");
    for (rel, text) in FILES {
        pincer_tests::write_file(&ws.join(rel), text);
    }
    chown_tree(&ws, 1000);
    let daemon = Daemon::start(Path::new(PINCER), &dir, &DaemonSettings { on_miss: "record", escalation_timeout_secs: 60 });
    // As installed (README: world-readable, in the default place): the hook inside the
    // session finds it there and cannot read it (never-grantable to every session).
    let _installed = Installed::config(&dir.join("pincer.toml"));
    let persona = dir.join("persona");
    pincer_tests::write_file(&persona.join("history.jsonl"), HISTORY);
    pincer_tests::write_file(&persona.join("policies.jsonl"), POLICIES);
    daemon.import(&persona, 1000);
    let w = ws.display().to_string();
    // (case, tool, tool_input, the shell command doing what the tool does)
    let cases = [
        ("read-todo", "Read", format!(r#"{{"file_path":"{w}/notes/todo.md"}}"#), format!("cat {w}/notes/todo.md")),
        ("read-secret", "Read", format!(r#"{{"file_path":"{w}/secrets/prod.env"}}"#), format!("cat {w}/secrets/prod.env")),
        ("dotdot-secret", "Read", format!(r#"{{"file_path":"{w}/notes/../secrets/prod.env"}}"#), format!("cat {w}/notes/../secrets/prod.env")),
        ("edit-todo", "Edit", format!(r#"{{"file_path":"{w}/notes/todo.md","old_string":"a","new_string":"b"}}"#), format!("cat {w}/notes/todo.md > /dev/null && echo '- [ ] look at the ledger backups' >> {w}/notes/todo.md")),
        ("write-new", "Write", format!(r#"{{"file_path":"{w}/notes/backups.md","content":"x"}}"#), format!("echo x > {w}/notes/backups.md")),
        ("ls-notes", "LS", format!(r#"{{"path":"{w}/notes"}}"#), format!("ls {w}/notes")),
        ("ls-secrets", "LS", format!(r#"{{"path":"{w}/secrets"}}"#), format!("ls {w}/secrets")),
    ];
    let mut script = format!("P={PINCER}\n");
    // Control: the session cannot read the installed configuration.
    script.push_str("cat /etc/pincer/pincer.toml >/dev/null 2>&1 && echo 'K config ok' || echo 'K config denied'\n");
    for (name, tool, input, cmd) in &cases {
        let payload = format!(r#"{{"session_id":"s1","cwd":"{w}","hook_event_name":"PreToolUse","tool_name":"{tool}","tool_input":{input}}}"#);
        script.push_str(&format!("D=$(printf '%s' '{payload}' | $P hook claude-code); echo \"H {name} rc=$? $D\"\n"));
        script.push_str(&format!("{cmd} >/dev/null 2>&1 && echo 'K {name} ok' || echo 'K {name} denied'\n"));
    }
    // Bash is the kernel's: no decision from the hook, and the kernel still denies the secret.
    let bash = format!(r#"{{"session_id":"s1","cwd":"{w}","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{{"command":"cat {w}/secrets/prod.env"}}}}"#);
    script.push_str(&format!("D=$(printf '%s' '{bash}' | $P hook claude-code); echo \"H bash rc=$? [$D]\"\n"));
    script.push_str(&format!("cat {w}/secrets/prod.env >/dev/null 2>&1 && echo 'K bash ok' || echo 'K bash denied'\n"));
    let out = Command::new(PINCER)
        .args(["run", "--root", &w, "--user", "1000", "--prompt", TODO_PROMPT, "--", "/bin/sh", "-c", &script])
        .env("PINCER_SOCKET", &daemon.socket)
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    // On the console (not captured by the test harness): the hook's transcript.
    let _ = std::io::stderr().write_all(format!("e2e_hook transcript:\n{text}\n").as_bytes());
    assert!(out.status.success(), "pincer run failed: {text}");
    let line = |tag: &str, name: &str| -> String {
        let prefix = format!("{tag} {name} ");
        text.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("no {prefix}line in:\n{text}")).to_string()
    };
    let mut allowed = Vec::new();
    for (name, ..) in &cases {
        let h = line("H", name);
        let k = line("K", name);
        assert!(h.contains("rc=0 "), "the hook answers with exit 0: {h}");
        let allow = h.contains(r#""permissionDecision":"allow""#);
        let deny = h.contains(r#""permissionDecision":"deny""#);
        assert!(allow ^ deny, "one decision: {h}");
        assert_eq!(k.ends_with(" ok"), allow, "the hook's decision and the kernel disagree:\n{h}\n{k}");
        if allow {
            allowed.push(*name);
        }
    }
    assert_eq!(line("K", "config"), "K config denied", "control: an installed configuration is never readable in a session");
    assert!(allowed.contains(&"read-todo") && allowed.contains(&"edit-todo"), "the task's file is granted: {allowed:?}");
    assert!(!allowed.contains(&"read-secret") && !allowed.contains(&"dotdot-secret"), "the secret is not: {allowed:?}");
    assert!(line("H", "dotdot-secret").contains("`..`"), "{text}");
    assert_eq!(line("H", "bash"), "H bash rc=0 []");
    assert_eq!(line("K", "bash"), "K bash denied");
}

/// `pincer doctor` in the VM (a kernel with BPF LSM active, bpffs, cgroup v2, a running
/// daemon): every check passes but the kernel configuration, which the VM does not ship.
#[test]
fn doctor_finds_the_vm_ready_for_the_daemon() {
    let dir = pincer_tests::fresh_dir("e2e-doctor");
    let daemon = Daemon::start(Path::new(PINCER), &dir, &DaemonSettings { on_miss: "record", escalation_timeout_secs: 60 });
    let out = Command::new(PINCER).args(["doctor", "--config"]).arg(dir.join("pincer.toml")).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let _ = std::io::stderr().write_all(format!("pincer doctor in the VM:\n{text}{}\n", String::from_utf8_lossy(&out.stderr)).as_bytes());
    assert_eq!(out.status.code(), Some(0), "{text}");
    for name in ["bpf LSM", "BTF", "cgroup v2", "bpffs", "configuration", "daemon", "socket", "state"] {
        assert!(text.contains(&format!("  ok    {name}: ")), "{name} passes:\n{text}");
    }
    assert!(text.contains("the host is ready for the Pincer daemon"), "{text}");
    drop(daemon);
}
