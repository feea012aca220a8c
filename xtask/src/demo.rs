//! `cargo xtask demo`: boots the test VM and runs a real Pincer session under BPF LSM
//! enforcement with the offline decider on a corpus persona: the twin learns the persona's
//! history, and a scripted worker of real processes replays one utility task and one
//! attack from the corpus, the terminal showing each grant and denial as it happens.

use crate::vm::{self, console, cpio, initramfs, kernels, qemu};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Options of `cargo xtask demo`.
#[derive(clap::Args, Debug, Clone)]
pub struct DemoArgs {
    #[command(flatten)]
    vm: vm::VmOptions,
    /// The corpus persona folder.
    #[arg(long, default_value = "corpus/software-dev")]
    persona: PathBuf,
    /// Samples to replay (default: one utility task and one attack of the persona).
    #[arg(long = "sample")]
    samples: Vec<String>,
}

/// The demo program inside the VM.
const DEMO: &str = "pincer-demo";

/// The first utility sample with one session and no setup, and the first indirect-injection
/// attack with one session, of a persona (short enough to watch).
fn default_samples(persona: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(persona.join("samples.jsonl")).with_context(|| format!("reading {}", persona.join("samples.jsonl").display()))?;
    let mut utility = None;
    let mut attack = None;
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        let one_session = v["sessions"].as_array().is_some_and(|s| s.len() == 1);
        let short = one_session && v["setup"].as_array().is_none_or(|s| s.is_empty());
        let id = v["id"].as_str().unwrap_or_default().to_string();
        match v["kind"].as_str() {
            Some("utility") if short && utility.is_none() => utility = Some(id),
            Some("attack") if one_session && attack.is_none() && v["attack"] == "II" => attack = Some(id),
            _ => {}
        }
    }
    let (Some(u), Some(a)) = (utility, attack) else { bail!("{} has no short utility and attack samples", persona.display()) };
    Ok(vec![u, a])
}

/// Runs the demo.
pub fn run(args: DemoArgs) -> Result<()> {
    crate::deps::ensure(&crate::deps::all())?;
    let root = vm::workspace_root();
    let persona = if args.persona.is_absolute() { args.persona.clone() } else { root.join(&args.persona) };
    let samples = if args.samples.is_empty() { default_samples(&persona)? } else { args.samples.clone() };
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["build", "-p", "pincer-tests", "--release", "--bins", "--message-format=json-render-diagnostics"])
        .current_dir(&root)
        .stderr(Stdio::inherit())
        .output()
        .context("running cargo build")?;
    if !out.status.success() {
        bail!("cargo build -p pincer-tests --release --bins failed");
    }
    let artifacts = vm::parse_artifacts(&String::from_utf8_lossy(&out.stdout));
    let find = |name: &str| artifacts.iter().find(|a| a.name == name && a.kind == "bin").map(|a| a.executable.clone()).with_context(|| format!("cargo built no `{name}` binary"));
    let (demo, pincer) = (find(DEMO)?, find("pincer")?);
    // The persona keeps its folder name in the VM (the loader checks it against its id).
    let folder = persona.file_name().with_context(|| format!("{} names no persona folder", persona.display()))?.to_string_lossy().into_owned();
    let vm_persona = format!("corpus/{folder}");
    let mut prog_args = vec![pincer.to_string_lossy().into_owned(), format!("/{vm_persona}")];
    prog_args.extend(samples.iter().cloned());
    let programs = vec![initramfs::Program { name: DEMO.into(), host_path: demo, args: prog_args }];
    let dir = root.join("target").join("vm");
    std::fs::create_dir_all(dir.join("logs"))?;
    let initrd = dir.join(format!("initramfs-demo-{}.cpio", std::process::id()));
    initramfs::build(&programs, &[pincer], Path::new(initramfs::BUSYBOX), &initrd)?;
    // The persona travels as a second archive appended to the first (the kernel unpacks both).
    let mut extra = cpio::Archive::new();
    extra.dir("corpus", 0o755)?;
    initramfs::add_tree(&mut extra, &persona.join("workspace"), &format!("{vm_persona}/workspace"))?;
    for f in ["history.jsonl", "policies.jsonl", "samples.jsonl", "persona.toml"] {
        extra.host_file(&format!("{vm_persona}/{f}"), &persona.join(f), 0o644)?;
    }
    initramfs::append(&initrd, &extra)?;
    let default = &kernels::KERNELS[kernels::KERNELS.len() - 1..];
    let kernels = vm::fetch_kernels(&args.vm.kernels, default);
    let kernels = match kernels {
        Ok(k) => k,
        Err(e) => {
            let _ = std::fs::remove_file(&initrd);
            return Err(e);
        }
    };
    let names = vec![DEMO.to_string()];
    let mut failed = false;
    for k in &kernels {
        println!("demo: booting {} in QEMU (TCG), persona {}, samples {}", k.release, persona.display(), samples.join(", "));
        let log = dir.join("logs").join(format!("demo-{}.log", k.release));
        let run = qemu::boot(&qemu::Machine::new(&k.vmlinuz, &initrd), Duration::from_secs(args.vm.timeout), &log, |line, t| {
            let inside = t.binaries.last().is_some_and(|b| b.exit_code.is_none());
            let marker = [console::BEGIN, console::RESULT, console::DONE].iter().any(|m| line.contains(m));
            if inside && !marker {
                println!("{}", console::clean(line));
            }
        })?;
        if run.timed_out || !run.transcript.passed(&names) {
            failed = true;
            println!("demo on {}: FAIL (console log {})", k.release, log.display());
        } else {
            println!("demo on {}: done in {:.1} s", k.release, run.elapsed.as_secs_f64());
        }
    }
    let _ = std::fs::remove_file(&initrd);
    if failed {
        bail!("the demo failed");
    }
    Ok(())
}
