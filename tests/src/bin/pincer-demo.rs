//! The demo run inside the VM by `cargo xtask demo`: the `pincer` daemon with the offline
//! twin learns a corpus persona's history and policies, then a scripted worker made of real
//! processes (busybox sh, cat, cp, rm, ls and `pincer request`) replays corpus samples under
//! the BPF LSM, one `pincer run` session per sample session, printing every grant and
//! denial as it happens.
//!
//! Usage: pincer-demo PINCER_BINARY PERSONA_DIR SAMPLE_ID...

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const WORKER_UID: u32 = 1000;

fn die(msg: String) -> ! {
    eprintln!("pincer-demo: {msg}");
    std::process::exit(1);
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| die(format!("mkdir {}: {e}", to.display())));
    for e in std::fs::read_dir(from).unwrap_or_else(|e| die(format!("read {}: {e}", from.display()))) {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), &t).unwrap_or_else(|err| die(format!("copy {}: {err}", e.path().display())));
        }
    }
}

fn chown_tree(p: &Path) {
    let _ = std::os::unix::fs::chown(p, Some(WORKER_UID), Some(WORKER_UID));
    if p.is_dir() {
        for e in std::fs::read_dir(p).unwrap().flatten() {
            chown_tree(&e.path());
        }
    }
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Applies a sample's `setup` to the fresh workspace (as the harness, ungated).
fn setup(ws: &Path, ops: &[serde_json::Value]) {
    for op in ops {
        let p = ws.join(op["path"].as_str().unwrap_or_default());
        let r = match op["op"].as_str().unwrap_or_default() {
            "write" => {
                if let Some(d) = p.parent() {
                    let _ = std::fs::create_dir_all(d);
                }
                std::fs::write(&p, op["content"].as_str().unwrap_or_default())
            }
            "mkdir" => std::fs::create_dir_all(&p),
            "delete" => std::fs::remove_file(&p).or_else(|_| std::fs::remove_dir_all(&p)),
            "rename" => std::fs::rename(&p, ws.join(op["to"].as_str().unwrap_or_default())),
            other => die(format!("unknown setup op {other}")),
        };
        r.unwrap_or_else(|e| die(format!("setup {op}: {e}")));
    }
}

/// The worker's shell script for one session: for each request step whose needs were
/// met, ask with `pincer request`, and if granted do it with a real process.
fn script(steps: &[serde_json::Value]) -> String {
    let mut s = String::new();
    for (i, st) in steps.iter().enumerate() {
        let Some(path) = st["path"].as_str() else {
            s.push_str(&format!("echo '  worker note to the authorizer (the twin takes none): {}'\n", st["note"].as_str().unwrap_or("").replace('\'', "")));
            continue;
        };
        let access = st["access"].as_str().unwrap_or("read");
        let reason = st["rationale"].as_str().unwrap_or("");
        let target = format!("\"$W/{}\"", path.trim_end_matches('/'));
        let (tool, op) = match access {
            "read" => ("cat", format!("cat {target} >/dev/null")),
            "write" => ("sh >>", format!("echo 'edited by the worker' >> {target}")),
            "create" if path.ends_with('/') => ("mkdir", format!("mkdir {target}")),
            "create" => ("cp", format!("cp /proc/version {target}")),
            "delete" if path.ends_with('/') => ("rmdir", format!("rmdir {target}")),
            "delete" => ("rm", format!("rm {target}")),
            _ => ("ls", format!("ls {target} >/dev/null")),
        };
        let needs: Vec<String> = st["needs"].as_array().into_iter().flatten().filter_map(|n| n.as_u64()).map(|n| format!("[ \"$ok{n}\" = 1 ]")).collect();
        let cond = if needs.is_empty() { "true".to_string() } else { needs.join(" && ") };
        s.push_str(&format!(
            "ok{i}=0\nif {cond}; then\n  echo '- worker asks: {access} {path}'\n  if $P request {target} --access {access} --reason {r}; then\n    if {op} 2>/dev/null; then ok{i}=1; echo '  kernel: {tool} {path}: done'; else echo '  kernel: {tool} {path}: denied'; fi\n  fi\nelse\n  echo '- not requested (needs an earlier denied step): {access} {path}'\nfi\necho \"STEP {i} $ok{i}\"\n",
            r = quote(reason)
        ));
    }
    s
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 {
        die("usage: pincer-demo PINCER_BINARY PERSONA_DIR SAMPLE_ID...".into());
    }
    let (pincer, persona) = (PathBuf::from(&args[0]), PathBuf::from(&args[1]));
    let dir = PathBuf::from("/tmp/pincer-demo");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("pincer.toml");
    let socket = dir.join("pincer.sock");
    std::fs::write(
        &config,
        format!(
            "state_dir = \"{0}/state\"\nsocket = \"{1}\"\naudit_log = \"{0}/audit.jsonl\"\npin_dir = \"/sys/fs/bpf/pincer-demo\"\ncgroup_parent = \"/sys/fs/cgroup/pincer\"\non_miss = \"record\"\n[escalation]\ntimeout_secs = 5\n",
            dir.display(),
            socket.display()
        ),
    )
    .unwrap();
    println!("== Pincer demo: persona {} (offline decider, BPF LSM enforcement)", persona.display());
    let mut daemon = Command::new(&pincer).args(["daemon", "--config", config.to_str().unwrap()]).spawn().unwrap_or_else(|e| die(format!("start daemon: {e}")));
    let start = Instant::now();
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        if start.elapsed() > Duration::from_secs(60) {
            die("the daemon did not start".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let pin = |args: &[&str]| Command::new(&pincer).args(args).env("PINCER_SOCKET", &socket).status().map(|s| s.success()).unwrap_or(false);
    let h = persona.join("history.jsonl");
    let p = persona.join("policies.jsonl");
    println!("== The twin learns the user's trusted history and policies");
    if !pin(&["import", "--history", h.to_str().unwrap(), "--policies", p.to_str().unwrap(), "--uid", &WORKER_UID.to_string()]) {
        die("import failed".into());
    }
    let samples = std::fs::read_to_string(persona.join("samples.jsonl")).unwrap_or_else(|e| die(format!("samples: {e}")));
    let mut failed = false;
    for id in &args[2..] {
        let Some(sample) = samples.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()).find(|s| s["id"] == id.as_str()) else {
            die(format!("no sample {id}"));
        };
        let kind = sample["kind"].as_str().unwrap_or("");
        let attack = sample["attack"].as_str().unwrap_or("");
        println!();
        println!("== Sample {id}: {kind} {attack} ({})", sample["note"].as_str().unwrap_or(""));
        let ws = dir.join(format!("ws-{id}"));
        copy_dir(&persona.join("workspace"), &ws);
        setup(&ws, sample["setup"].as_array().map(Vec::as_slice).unwrap_or(&[]));
        chown_tree(&ws);
        let _ = std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755));
        let monitored = &sample["monitored"];
        let mut monitored_done = false;
        for sess in sample["sessions"].as_array().into_iter().flatten() {
            let prompt = sess["prompt"].as_str().unwrap_or("");
            println!("user prompt: {prompt}");
            let steps = sess["steps"].as_array().cloned().unwrap_or_default();
            let body = format!("P={}\nW={}\n{}", pincer.display(), ws.display(), script(&steps));
            let mut child = Command::new(&pincer)
                .args(["run", "--root", ws.to_str().unwrap(), "--user", &WORKER_UID.to_string(), "--prompt", prompt, "--", "/bin/sh", "-c", &body])
                .env("PINCER_SOCKET", &socket)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| die(format!("pincer run: {e}")));
            let out = child.stdout.take().unwrap();
            let err = child.stderr.take().unwrap();
            let errs = std::thread::spawn(move || {
                for line in BufReader::new(err).lines().map_while(Result::ok) {
                    println!("  {line}");
                }
            });
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Some(rest) = line.strip_prefix("STEP ") {
                    let mut it = rest.split(' ');
                    let (i, ok) = (it.next().and_then(|x| x.parse::<usize>().ok()), it.next() == Some("1"));
                    if let Some(st) = i.and_then(|i| steps.get(i)) {
                        if ok && st["path"] == monitored["path"] && st["access"] == monitored["access"] {
                            monitored_done = true;
                        }
                    }
                    continue;
                }
                println!("{line}");
            }
            let _ = errs.join();
            if !child.wait().map(|s| s.success()).unwrap_or(false) {
                failed = true;
            }
        }
        let what = format!("{} {}", monitored["access"].as_str().unwrap_or(""), monitored["path"].as_str().unwrap_or(""));
        match (kind, monitored_done) {
            ("attack", true) => println!("== Result: the attack SUCCEEDED ({what} happened)"),
            ("attack", false) => println!("== Result: the attack was blocked ({what} never happened)"),
            (_, true) => println!("== Result: the task succeeded ({what} happened)"),
            (_, false) => println!("== Result: the task did not get {what}"),
        }
    }
    println!();
    println!("== Audit log of the decisions (pincer log)");
    let _ = Command::new(&pincer).args(["log"]).env("PINCER_SOCKET", &socket).status();
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) };
    let _ = daemon.wait();
    let _ = std::fs::remove_dir_all("/sys/fs/bpf/pincer-demo");
    if failed {
        die("a worker session failed".into());
    }
}
