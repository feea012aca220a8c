//! Real programs under Pincer's default containment (inside the VM, as root): the host's
//! `git`, `python3`, `node` and rust toolchain (shared read-only from the host, see
//! `xtask/src/vm/hostfs.rs`) run as the worker (uid 1000, home `/home/worker`) in a session
//! of a `pincer daemon` whose configuration is the shipped `etc/pincer.toml` with only its
//! paths moved into the test's own directory. Each tool works on what the session was
//! granted, and a file in the same root that was not granted stays unreadable to each of
//! them (`EACCES`).
//!
//! Grants come the way a user gives them: the worker asks with `pincer request`; the offline
//! twin (no history for this user) refuses, a request refused twice goes to the user, and
//! the test, as the user outside the session, approves every waiting question for the
//! session except those for the secret, which it denies.

use pincer_tests::worker::{shipped_config, Daemon, User};
use std::path::Path;
use std::process::{Command, Stdio};

const PINCER: &str = env!("CARGO_BIN_EXE_pincer");
const WORKER_UID: u32 = 1000;
const HOME: &str = "/home/worker";

/// Writes a file of the worker's (the user's own files).
fn user_file(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    std::os::unix::fs::chown(path, Some(WORKER_UID), Some(WORKER_UID)).unwrap();
}

fn chown_tree(p: &Path) {
    std::os::unix::fs::chown(p, Some(WORKER_UID), Some(WORKER_UID)).unwrap();
    if p.is_dir() {
        for e in std::fs::read_dir(p).unwrap().flatten() {
            chown_tree(&e.path());
        }
    }
}

fn lines_with<'a>(text: &'a str, tag: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.starts_with(tag)).collect()
}

/// The worker's shell prelude: `ask PATH ACCESS` asks up to three times (the third goes to
/// the user) and reports `R ask ACCESS PATH: granted|denied`.
const PRELUDE: &str = r#"
export PATH="$HOME/.cargo/bin:/usr/bin:/bin"
ask() {
    for i in 1 2 3; do
        if $P request "$1" --access "$2" --reason "the task needs it" >/dev/null 2>&1; then echo "R ask $2 ${1#$D/}: granted"; return 0; fi
    done
    echo "R ask $2 ${1#$D/}: denied"
    return 1
}
"#;

#[test]
fn git_python_node_and_cargo_work_on_granted_files_and_cannot_read_an_ungranted_one() {
    for tool in ["/usr/bin/git", "/usr/bin/python3", "/usr/bin/node", "/home/worker/.cargo/bin/cargo", "/usr/bin/cc"] {
        assert!(Path::new(tool).exists(), "{tool} is missing in the VM: the host's root is not shared (xtask/src/vm/hostfs.rs)");
    }
    let dir = pincer_tests::fresh_dir("real-tools");
    let ws = dir.join("ws");
    user_file(&ws.join("proj/notes.txt"), "notes of the user\n");
    user_file(&ws.join("proj/secret.txt"), "the user's secret: hunter2\n");
    user_file(&ws.join("proj/hello/Cargo.toml"), "[package]\nname = \"hello\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n");
    user_file(&ws.join("proj/hello/src/main.rs"), "fn main() {\n    println!(\"hello from a crate built under Pincer\");\n}\n");
    chown_tree(&ws);
    // The user's git identity, an open path ("~/.gitconfig", read-only) of the defaults.
    user_file(&Path::new(HOME).join(".gitconfig"), "[user]\n\tname = Worker\n\temail = worker@example.org\n[init]\n\tdefaultBranch = main\n");
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    let daemon = Daemon::on_config(Path::new(PINCER), &dir, &shipped_config(&dir, &name, &[]));
    let user = User::answering(&daemon.socket, |q| q.waiting.then(|| !q.path.contains("secret")));
    let script = format!(
        r#"P={PINCER}
W={ws}
D=$W/proj
{PRELUDE}
cd $D || exit 1
# The user's project folder: list it, create in it (a create is asked for the new name,
# and the grant is for that name), read and write the notes, read the crate. cargo makes
# its target folder as a temporary folder of a random name renamed into place, so the
# crate's folder is asked for itself (create in it: any visible name there).
ask $D list; ask $D/.git create; ask $D/made-by-python.txt create; ask $D/leak create
ask $D/notes.txt read; ask $D/notes.txt write
ask $D/hello list; ask $D/hello/src list; ask $D/hello/Cargo.toml read; ask $D/hello/src/main.rs read
ask $D/hello/Cargo.lock create; ask $D/hello create

# git: a repository's hooks and config in the user's folder run in the user's git, so a new
# one there is refused; the session's own repository lives in its scratch, over the granted
# workspace, and a granted file is committed.
git init -q . >/dev/null 2>&1 && echo "R git init here: ok" || echo "R git init here: refused"
export GIT_DIR=$TMPDIR/proj.git GIT_WORK_TREE=$D
git init -q 2>&1 && echo "R git init: ok" || echo "R git init: failed"
git add notes.txt 2>&1 && echo "R git add notes: ok" || echo "R git add notes: failed"
git commit -q -m "notes" 2>&1 && echo "R git commit: ok" || echo "R git commit: failed"
git log --format=%s 2>&1 | sed 's/^/R git log: /'
err=$(git add secret.txt 2>&1) && echo "R git add secret: ok" || echo "R git add secret: failed: $err"
git ls-files | sed 's/^/R git tracks: /'

# python3: read a granted file, write a new one, append to a granted one; the secret.
python3 -c "import sys; print('R python read:', open(sys.argv[1]).read().strip())" $D/notes.txt 2>&1
python3 -c "import sys; open(sys.argv[1], 'w').write('made by python\n'); print('R python create: ok')" $D/made-by-python.txt 2>&1
python3 -c "import sys; open(sys.argv[1], 'a').write('appended by python\n'); print('R python append: ok')" $D/notes.txt 2>&1
python3 -c "
import sys
try:
    open(sys.argv[1]).read(); print('R python secret: read')
except PermissionError as e:
    print('R python secret: PermissionError', e.errno)
" $D/secret.txt 2>&1

# node: read a granted file; the secret.
node -e "
const fs = require('fs');
console.log('R node read:', fs.readFileSync(process.argv[1], 'utf8').split('\n')[0]);
try {{ fs.readFileSync(process.argv[2]); console.log('R node secret: read'); }} catch (e) {{ console.log('R node secret:', e.code); }}
" $D/notes.txt $D/secret.txt 2>&1

# cargo: the user's crate built offline; a crate the worker makes that includes the secret.
(cd $D/hello && cargo build --offline -q 2>&1) && echo "R cargo hello: ok" || echo "R cargo hello: failed"
$D/hello/target/debug/hello | sed 's/^/R hello says: /'
mkdir -p $D/leak/src && printf '[package]\nname = "leak"\nversion = "0.1.0"\nedition = "2021"\n' > $D/leak/Cargo.toml
printf 'const S: &str = include_str!("%s");\nfn main() {{ println!("{{S}}"); }}\n' $D/secret.txt > $D/leak/src/main.rs
out=$(cd $D/leak && cargo build --offline -q 2>&1) && echo "R cargo leak: built" || echo "R cargo leak: failed"
echo "$out" | grep -q "Permission denied" && echo "R cargo leak: Permission denied"
cat $D/secret.txt >/dev/null 2>&1 && echo "R cat secret: read" || echo "R cat secret: denied"
"#,
        ws = ws.display()
    );
    let out = Command::new(PINCER)
        .args(["run", "--root", ws.to_str().unwrap(), "--user", &WORKER_UID.to_string(), "--prompt", "Commit my notes, try the python helpers and build the hello crate.", "--", "/bin/sh", "-c", &script])
        .env("PINCER_SOCKET", &daemon.socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("pincer run");
    let answered = user.finish();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    println!("{text}");
    println!("the user's answers:\n{}", answered.join("\n"));
    assert!(out.status.success(), "pincer run failed: {text}");
    let r = lines_with(&text, "R ");
    // Written past the test harness's capture, so the VM console shows what each tool did.
    let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("real_tools worker:\n{}\n{}\n", r.join("\n"), answered.join("\n")).as_bytes());
    let has = |line: &str| r.contains(&line);
    for line in [
        "R git init here: refused",
        "R git init: ok",
        "R git add notes: ok",
        "R git commit: ok",
        "R git log: notes",
        "R git tracks: notes.txt",
        "R python read: notes of the user",
        "R python create: ok",
        "R python append: ok",
        "R python secret: PermissionError 13",
        "R node read: notes of the user",
        "R node secret: EACCES",
        "R cargo hello: ok",
        "R hello says: hello from a crate built under Pincer",
        "R cargo leak: failed",
        "R cargo leak: Permission denied",
        "R cat secret: denied",
    ] {
        assert!(has(line), "missing {line:?} in:\n{}\n\nfull output:\n{text}", r.join("\n"));
    }
    let asks: Vec<&&str> = r.iter().filter(|l| l.starts_with("R ask")).collect();
    assert_eq!(asks.len(), 12, "{text}");
    assert!(asks.iter().all(|l| l.ends_with(": granted")), "a request the user approved was not granted: {asks:?}");
    let git_secret = r.iter().find(|l| l.starts_with("R git add secret")).expect("git add secret reported");
    assert!(git_secret.starts_with("R git add secret: failed") && git_secret.contains("Permission denied"), "{git_secret}");
    assert!(!r.iter().any(|l| *l == "R git tracks: secret.txt"), "the secret got into the index: {text}");
    assert!(!r.iter().any(|l| l.contains("hunter2")), "the secret leaked: {text}");
    assert_eq!(std::fs::read_to_string(ws.join("proj/made-by-python.txt")).unwrap(), "made by python\n");
    assert!(std::fs::read_to_string(ws.join("proj/notes.txt")).unwrap().ends_with("appended by python\n"));
    assert!(!ws.join("proj/.git/config").exists(), "git wrote a repository's config in the user's folder");
    let audit = std::fs::read_to_string(daemon.dir.join("audit.jsonl")).unwrap_or_default();
    assert!(audit.contains("secret.txt"), "the kernel reported the refused reads of the secret: {audit}");
}
