//! The demo run inside the VM by `cargo xtask demo`: the `pincer` daemon with the offline
//! twin learns a corpus persona's history and policies, then a scripted worker made of real
//! processes (busybox sh, cat, touch, rm, ls and `pincer request`) replays corpus samples
//! under the BPF LSM, one `pincer run` session per sample session, printing every grant and
//! denial as it happens.
//!
//! Usage: pincer-demo PINCER_BINARY PERSONA_DIR SAMPLE_ID...

use pincer::eval::corpus::{load_persona, SampleKind};
use pincer_tests::worker::{prepare_workspace, session_script, Daemon, DaemonSettings};
use std::path::PathBuf;
use std::process::Command;

const WORKER_UID: u32 = 1000;

fn die(msg: String) -> ! {
    eprintln!("pincer-demo: {msg}");
    std::process::exit(1);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 {
        die("usage: pincer-demo PINCER_BINARY PERSONA_DIR SAMPLE_ID...".into());
    }
    let (pincer, persona_dir) = (PathBuf::from(&args[0]), PathBuf::from(&args[1]));
    let mut problems = Vec::new();
    let Some(persona) = load_persona(&persona_dir, &mut problems) else {
        let list: Vec<String> = problems.iter().map(|p| format!("  {p}")).collect();
        die(format!("cannot load the persona {}:\n{}", persona_dir.display(), list.join("\n")));
    };
    let dir = PathBuf::from("/tmp/pincer-demo");
    let _ = std::fs::remove_dir_all(&dir);
    println!("== Pincer demo: persona {} (offline decider, BPF LSM enforcement)", persona.id);
    let daemon = Daemon::start(&pincer, &dir, &DaemonSettings { on_miss: "record", escalation_timeout_secs: 5 });
    println!("== The twin learns the user's trusted history and policies");
    print!("{}", daemon.import(&persona_dir, WORKER_UID));
    let mut failed = false;
    for id in &args[2..] {
        let Some(sample) = persona.samples.iter().find(|s| &s.id == id) else {
            die(format!("no sample {id} in {}", persona_dir.display()));
        };
        let attack = sample.attack.map(|a| a.as_str()).unwrap_or("");
        let kind = if sample.kind == SampleKind::Attack { "attack" } else { "utility" };
        println!();
        println!("== Sample {id}: {kind} {attack} ({})", sample.note.as_deref().unwrap_or(""));
        let ws = dir.join(format!("ws-{id}"));
        prepare_workspace(&persona_dir.join("workspace"), &ws, &sample.setup, WORKER_UID);
        let monitored = &sample.monitored;
        let mut monitored_done = false;
        for sess in &sample.sessions {
            println!("user prompt: {}", sess.prompt);
            let script = session_script(&sess.steps, monitored, !monitored_done);
            let run = daemon.run_session(&ws, WORKER_UID, &sess.prompt, &script, sess.steps.len(), &|line| println!("{line}"));
            monitored_done |= run.performed(&sess.steps, monitored);
            failed |= !run.success;
        }
        let what = format!("{} {}", monitored.access, monitored.path);
        match (sample.kind, monitored_done) {
            (SampleKind::Attack, true) => println!("== Result: the attack SUCCEEDED ({what} happened)"),
            (SampleKind::Attack, false) => println!("== Result: the attack was blocked ({what} never happened)"),
            (_, true) => println!("== Result: the task succeeded ({what} happened)"),
            (_, false) => println!("== Result: the task did not get {what}"),
        }
    }
    println!();
    println!("== Audit log of the decisions (pincer log)");
    let _ = Command::new(&pincer).args(["log"]).env("PINCER_SOCKET", &daemon.socket).status();
    drop(daemon);
    if failed {
        die("a worker session failed".into());
    }
}
