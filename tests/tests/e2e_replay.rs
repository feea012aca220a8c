//! Corpus samples replayed by a real worker under the real BPF LSM (inside the VM, as
//! root) give the same outcome for their monitored resource as the evaluation harness's
//! replay gives for that sample and the `pincer` defense with the offline decider.
//!
//! For each chosen sample of every persona of the shipped corpus (`PINCER_CORPUS`, which
//! `cargo xtask vm-test` sets), the test
//! 1. replays it in process with `pincer::eval::replay::replay_sample` against
//!    `PincerDefense` (what `pincer eval --defense pincer` computes for it);
//! 2. replays it for real: the `pincer` daemon with the offline twin, the persona's trusted
//!    history and policies imported for a user of the sample's own (so each sample starts
//!    from the persona's pristine trusted state, as in the harness), the persona's workspace
//!    copied to a protected root on tmpfs with the sample's setup applied, each session's
//!    prompt given through the user's channel (`pincer run --prompt`), each request step
//!    whose `needs` were met asked with `pincer request` by the worker (busybox `sh` as that
//!    user in the session's cgroup) and, if granted, performed as a real file operation;
//!    notes are skipped (the twin takes no messages from the worker);
//! 3. asserts that the monitored access was actually performed exactly when the harness
//!    says it was granted, and that otherwise the kernel refused it when the worker tried
//!    it without a grant. Each request's answer and the kernel's action are compared with
//!    the harness step by step as well.
//!
//! Samples are chosen by a fixed rule, not by outcome: per persona, the first
//! [`UTILITY_PER_PERSONA`] utility samples and the first [`ATTACKS_PER_CLASS`] attack
//! samples of each class, in file order, plus, for each access type none of those requests,
//! the first sample that requests it.

use pincer::access::Access;
use pincer::decider::OfflineDecider;
use pincer::eval::corpus::{AttackType, Corpus, Persona, Sample, SampleKind, Step};
use pincer::eval::defense::{DefenseName, Outcome};
use pincer::eval::pincer::PincerDefense;
use pincer::eval::replay::{replay_sample, StepOutcome};
use pincer_tests::worker::{prepare_workspace, session_script, Daemon, DaemonSettings, Probe};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

const PINCER: &str = env!("CARGO_BIN_EXE_pincer");
/// Utility samples replayed per persona.
const UTILITY_PER_PERSONA: usize = 3;
/// Attack samples replayed per persona and attack class.
const ATTACKS_PER_CLASS: usize = 1;
/// The first worker uid; each sample gets the next one.
const FIRST_UID: u32 = 2000;

/// The corpus: `PINCER_CORPUS`, or the workspace's `corpus/`.
fn corpus_dir() -> PathBuf {
    match std::env::var_os("PINCER_CORPUS") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ is inside the workspace").join("corpus"),
    }
}

/// The samples of a persona chosen by the rule in the module docs, in file order.
fn chosen(persona: &Persona) -> Vec<&Sample> {
    let mut utility = 0;
    let mut per_class: std::collections::HashMap<AttackType, usize> = std::collections::HashMap::new();
    let mut out = Vec::new();
    for s in &persona.samples {
        let take = match (s.kind, s.attack) {
            (SampleKind::Utility, _) => {
                utility += 1;
                utility <= UTILITY_PER_PERSONA
            }
            (SampleKind::Attack, Some(class)) => {
                let n = per_class.entry(class).or_default();
                *n += 1;
                *n <= ATTACKS_PER_CLASS
            }
            (SampleKind::Attack, None) => false,
        };
        if take {
            out.push(s);
        }
    }
    // Every access type the persona's samples use is exercised: for a type no chosen
    // sample requests, the first sample that does is added.
    let requests = |s: &Sample, a: Access| s.sessions.iter().flat_map(|x| &x.steps).any(|st| matches!(st, Step::Request(r) if r.access == a));
    for a in Access::ALL {
        if !out.iter().any(|s| requests(s, a)) {
            if let Some(extra) = persona.samples.iter().find(|s| requests(s, a)) {
                out.push(extra);
            }
        }
    }
    out.sort_by_key(|s| s.line);
    out
}

/// One sample's outcome on both sides.
struct Row {
    id: String,
    class: String,
    expected_granted: bool,
    performed: bool,
    probe: String,
    steps: usize,
    asked: usize,
    granted: usize,
    escalations: u64,
    seconds: f64,
}

/// Prints straight to standard output, past the test harness's capture, so the table
/// shows in the VM's console even when the test passes.
fn show(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}");
    let _ = out.flush();
}

fn verdict_name(o: &StepOutcome) -> &'static str {
    match o {
        StepOutcome::NotRequested => "not requested",
        StepOutcome::Decided(Outcome::Grant) => "grant",
        StepOutcome::Decided(Outcome::Deny) => "deny",
        StepOutcome::Decided(Outcome::Escalate) => "escalate",
        StepOutcome::Note => "note",
    }
}

#[test]
fn replayed_samples_under_the_kernel_match_the_eval_harness() {
    let root = corpus_dir();
    let corpus = Corpus::load(&root).unwrap_or_else(|e| panic!("load the corpus {}: {e}", root.display()));
    let rt = pincer_tests::runtime();
    let dir = pincer_tests::fresh_dir("e2e-replay");
    // Escalations count as not granted in the harness; the worker's wait for the user is
    // kept short (an unanswered question is a denial).
    let daemon = Daemon::start(Path::new(PINCER), &dir, &DaemonSettings { on_miss: "record", escalation_timeout_secs: 1 });
    let mut uid = FIRST_UID;
    let mut rows: Vec<Row> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    let all = Instant::now();
    for persona in &corpus.personas {
        let persona_dir = root.join(&persona.id);
        let mut defense = PincerDefense::new(DefenseName::Pincer, persona, Arc::new(OfflineDecider::new()))
            .unwrap_or_else(|e| panic!("set up the pincer defense for {}: {e}", persona.id));
        let samples = chosen(persona);
        assert!(samples.iter().any(|s| s.kind == SampleKind::Utility), "{} has no utility sample", persona.id);
        assert!(samples.iter().filter(|s| s.kind == SampleKind::Attack).count() >= 2, "{} has too few attack samples", persona.id);
        for sample in samples {
            let start = Instant::now();
            uid += 1;
            let expected = rt.block_on(replay_sample(&mut defense, persona, sample, None));
            daemon.import(&persona_dir, uid);
            let ws = dir.join(format!("ws-{}", sample.id));
            prepare_workspace(&persona_dir.join("workspace"), &ws, &sample.setup, uid);
            let monitored = &sample.monitored;
            let mut performed = false;
            let mut probe_seen = String::from("-");
            let mut fail = |msg: String| failures.push(format!("{}: {msg}", sample.id));
            let mut transcript = String::new();
            let (mut asked, mut granted) = (0, 0);
            for (si, sess) in sample.sessions.iter().enumerate() {
                let script = session_script(&sess.steps, monitored, !performed);
                let run = daemon.run_session(&ws, uid, &sess.prompt, &script, sess.steps.len(), &|_| {});
                transcript.push_str(&run.transcript);
                if !run.success {
                    fail(format!("session {si}: pincer run failed:\n{}", run.transcript));
                    continue;
                }
                let want = &expected.steps[si];
                for (k, step) in sess.steps.iter().enumerate() {
                    let Step::Request(r) = step else { continue };
                    let Some(rep) = run.steps[k] else {
                        fail(format!("session {si} step {k}: the worker reported nothing"));
                        continue;
                    };
                    asked += usize::from(rep.asked);
                    granted += usize::from(rep.granted);
                    let what = format!("session {si} step {k} ({} {})", r.access, r.path);
                    let eval_asked = !matches!(want[k], StepOutcome::NotRequested);
                    let eval_granted = matches!(want[k], StepOutcome::Decided(Outcome::Grant));
                    if rep.asked != eval_asked || rep.granted != eval_granted {
                        fail(format!(
                            "{what}: the harness says {}, the daemon {}",
                            verdict_name(&want[k]),
                            if !rep.asked { "was not asked" } else if rep.granted { "granted" } else { "did not grant" }
                        ));
                    }
                    if rep.asked && rep.granted != rep.done {
                        fail(format!("{what}: granted {} but the real operation {}", rep.granted, if rep.done { "succeeded" } else { "failed" }));
                    }
                }
                performed |= run.performed(&sess.steps, monitored);
                match run.probe {
                    Some(Probe::Done) => fail(format!("session {si}: the kernel let the monitored {} {} through without a grant", monitored.access, monitored.path)),
                    Some(Probe::Refused(msg)) => {
                        if !msg.contains("Permission denied") {
                            fail(format!("session {si}: the monitored access failed, but not as a kernel refusal: {msg}"));
                        }
                        probe_seen = "EACCES".into();
                    }
                    None => {}
                }
            }
            if performed != expected.granted {
                fail(format!(
                    "monitored {} {}: the harness says {}, the real worker {} it",
                    monitored.access,
                    monitored.path,
                    if expected.granted { "granted" } else { "not granted" },
                    if performed { "performed" } else { "did not perform" }
                ));
            }
            if !expected.granted && probe_seen == "-" {
                fail("the monitored access was not granted, but the worker never tried it".into());
            }
            if failures.iter().any(|f| f.starts_with(&format!("{}: ", sample.id))) {
                show(&format!("---- {} transcript ----\n{transcript}", sample.id));
            }
            rows.push(Row {
                id: sample.id.clone(),
                class: sample.attack.map(|a| a.as_str().to_string()).unwrap_or_else(|| "utility".into()),
                expected_granted: expected.granted,
                performed,
                probe: probe_seen,
                steps: sample.sessions.iter().map(|s| s.steps.len()).sum(),
                asked,
                granted,
                escalations: expected.escalations,
                seconds: start.elapsed().as_secs_f64(),
            });
        }
    }
    show("");
    show(&format!(
        "{:<12} {:<8} {:>5} {:>6} {:>8} {:>4} {:>13} {:>10} {:>7} {:>5}",
        "sample", "class", "steps", "asked", "granted", "esc", "eval granted", "performed", "probe", "secs"
    ));
    for r in &rows {
        show(&format!(
            "{:<12} {:<8} {:>5} {:>6} {:>8} {:>4} {:>13} {:>10} {:>7} {:>5.1}",
            r.id, r.class, r.steps, r.asked, r.granted, r.escalations, r.expected_granted, r.performed, r.probe, r.seconds
        ));
    }
    let agree = rows.iter().filter(|r| r.expected_granted == r.performed).count();
    show(&format!(
        "e2e replay: {agree}/{} samples agree with the harness on the monitored access ({} granted, {} refused by the kernel); \
         {} requests, {} granted, {} escalated; {:.1} s",
        rows.len(),
        rows.iter().filter(|r| r.performed).count(),
        rows.iter().filter(|r| r.probe == "EACCES").count(),
        rows.iter().map(|r| r.asked).sum::<usize>(),
        rows.iter().map(|r| r.granted).sum::<usize>(),
        rows.iter().map(|r| r.escalations).sum::<u64>(),
        all.elapsed().as_secs_f64()
    ));
    let audit = daemon.audit();
    assert!(audit.contains("\"event\":\"decision\""), "the daemon decided nothing: {audit}");
    assert!(rows.len() >= 10, "only {} samples chosen", rows.len());
    // Both outcomes must have been exercised, or the comparison proves little.
    assert!(rows.iter().any(|r| r.performed), "no monitored access was performed in any sample");
    assert!(rows.iter().any(|r| r.probe == "EACCES"), "no monitored access was refused by the kernel in any sample");
    assert!(failures.is_empty(), "{} disagreements:\n{}", failures.len(), failures.join("\n"));
}
