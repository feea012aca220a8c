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

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PINCER: &str = env!("CARGO_BIN_EXE_pincer");
/// The shipped configuration: its `[containment]` (and everything else) is what a user
/// installs.
const SHIPPED_CONFIG: &str = include_str!("../../etc/pincer.toml");
const WORKER_UID: u32 = 1000;
const HOME: &str = "/home/worker";

/// The shipped configuration with the per-test paths replaced (each key must be there).
fn config_for(dir: &Path, name: &str) -> String {
    let paths = [
        ("state_dir", dir.join("state")),
        ("socket", dir.join("pincer.sock")),
        ("audit_log", dir.join("audit.jsonl")),
        ("pin_dir", PathBuf::from(pincer_tests::SHARED_PIN_DIR)),
        ("cgroup_parent", PathBuf::from("/sys/fs/cgroup").join(name)),
        ("scratch_parent", dir.join("scratch")),
    ];
    let mut out = String::new();
    let mut replaced = Vec::new();
    for line in SHIPPED_CONFIG.lines() {
        match paths.iter().find(|(k, _)| line.starts_with(&format!("{k} = "))) {
            Some((k, v)) => {
                out.push_str(&format!("{k} = {:?}\n", v.to_string_lossy()));
                replaced.push(*k);
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    for (k, _) in &paths {
        assert_eq!(replaced.iter().filter(|r| *r == k).count(), 1, "etc/pincer.toml sets {k} once");
    }
    out
}

/// A `pincer daemon` on the shipped configuration, on the VM's shared program
/// (`pincer_tests::SHARED_PIN_DIR`); stopped, and its entries removed from the program's
/// maps, when dropped.
struct Daemon {
    dir: PathBuf,
    socket: PathBuf,
    pin_dir: PathBuf,
    child: Child,
}

impl Daemon {
    fn start(dir: &Path) -> Daemon {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        std::fs::create_dir_all(dir.join("scratch")).unwrap();
        // The worker reaches the socket and the workspace below `dir`.
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        // The shared program must hold no entries another test left behind.
        pincer_tests::assert_clean(Path::new(pincer_tests::SHARED_PIN_DIR));
        pincer_tests::drain_misses(Path::new(pincer_tests::SHARED_PIN_DIR));
        let config = dir.join("pincer.toml");
        std::fs::write(&config, config_for(dir, &name)).unwrap();
        let socket = dir.join("pincer.sock");
        let child = Command::new(PINCER).args(["daemon", "--config"]).arg(&config).spawn().expect("start pincer daemon");
        let start = Instant::now();
        while std::os::unix::net::UnixStream::connect(&socket).is_err() {
            assert!(start.elapsed() < Duration::from_secs(120), "the daemon did not open {}", socket.display());
            std::thread::sleep(Duration::from_millis(50));
        }
        Daemon { dir: dir.to_owned(), socket, pin_dir: PathBuf::from(pincer_tests::SHARED_PIN_DIR), child }
    }

}

impl Drop for Daemon {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
        // The shared program stays loaded for the next test; this daemon's entries go.
        pincer_tests::clear_policy(&self.pin_dir);
    }
}

/// Answers the questions a waiting worker asks, as the user would: approves each for the
/// session unless its path names the secret, which it denies. Stops when dropped.
struct User {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Vec<String>>>,
}

impl User {
    fn answering(socket: &Path) -> User {
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, socket) = (stop.clone(), socket.to_owned());
        let thread = std::thread::spawn(move || {
            let mut answered = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                let out = Command::new(PINCER).args(["pending", "--json"]).env("PINCER_SOCKET", &socket).output().expect("pincer pending");
                let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
                for q in v.as_array().into_iter().flatten().filter(|q| q["waiting"] == true) {
                    let (id, path, access) = (q["id"].as_u64().unwrap().to_string(), q["path"].as_str().unwrap_or(""), q["access"].as_str().unwrap_or(""));
                    let approve = !path.contains("secret");
                    let args: Vec<&str> = if approve { vec!["approve", &id, "--scope", "session"] } else { vec!["deny", &id] };
                    let o = Command::new(PINCER).args(&args).env("PINCER_SOCKET", &socket).output().expect("pincer approve");
                    answered.push(format!("{} {access} {path}: {}", if approve { "approved" } else { "denied" }, o.status));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            answered
        });
        User { stop, thread: Some(thread) }
    }

    fn finish(mut self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

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
    let daemon = Daemon::start(&dir);
    let user = User::answering(&daemon.socket);
    let script = format!(
        r#"P={PINCER}
W={ws}
D=$W/proj
{PRELUDE}
cd $D || exit 1
# The user's project folder: list it, create in it (a create is asked for the new name,
# the grant goes on its folder), read and write the notes, read the crate.
ask $D list; ask $D/.git create; ask $D/made-by-python.txt create; ask $D/leak create
ask $D/notes.txt read; ask $D/notes.txt write
ask $D/hello list; ask $D/hello/src list; ask $D/hello/Cargo.toml read; ask $D/hello/src/main.rs read
ask $D/hello/Cargo.lock create; ask $D/hello/target create

# git: a new repository in the granted workspace, a granted file committed.
git init -q . 2>&1 && echo "R git init: ok" || echo "R git init: failed"
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
    assert!(ws.join("proj/.git/config").is_file(), "git made its repository's config");
    let audit = std::fs::read_to_string(daemon.dir.join("audit.jsonl")).unwrap_or_default();
    assert!(audit.contains("secret.txt"), "the kernel reported the refused reads of the secret: {audit}");
}
