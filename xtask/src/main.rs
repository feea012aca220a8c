//! `cargo xtask`: developer and CI tasks for Pincer.
//!
//! Every task installs or checks the system packages it needs first, so the
//! README's commands work on a fresh machine.

mod agents;
mod demo;
mod deps;
mod phase;
mod test;
mod vm;

use clap::{Parser, Subcommand};

/// Developer and CI tasks.
#[derive(Parser)]
#[command(name = "xtask")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Install (as root) or check the system packages the build and tests need, the
    /// Python MCP SDK the MCP host test uses, and fetch the pinned agents the VM tests run.
    Deps,
    /// Run every test: the host tests, then the VM tests against the real BPF LSM.
    Test(test::TestArgs),
    /// Run the privileged tests (`tests/`) in QEMU on Debian kernels with BPF LSM.
    VmTest(vm::VmOptions),
    /// Boot the VM and run a real Pincer session on a corpus persona (the README's demo).
    Demo(demo::DemoArgs),
    /// Run a benchmark in the VM.
    Bench {
        #[command(subcommand)]
        bench: Bench,
    },
}

#[derive(Subcommand)]
enum Bench {
    /// Nanoseconds per open+close: no program, not gated, exact grant, subtree grant, Landlock;
    /// connect to an allowed socket and a signal inside the session. By default the guest's
    /// clock counts instructions (stable figures); `--wall-clock` for wall time.
    Open {
        #[command(flatten)]
        vm: vm::VmOptions,
        #[command(flatten)]
        clock: vm::BenchClock,
        /// Also sample the guest with `perf record` during extra runs of the gated stat and
        /// exact-grant open cases (after the rounds) and print where their instructions went
        /// (the Pincer programs, the helpers they call, the hook).
        #[arg(long)]
        perf: bool,
        /// Arguments passed to the benchmark binary (after `--`).
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// The daemon's decision pipeline under load: N concurrent sessions of real workers
    /// making tool requests and kernel misses; decisions/s, round trips, miss to retry, RSS.
    Daemon {
        #[command(flatten)]
        vm: vm::VmOptions,
        /// Loads to run, each this many concurrent sessions with one worker each
        /// (comma-separated).
        #[arg(long, default_value = "1,32")]
        sessions: String,
        /// Rounds per worker (one tool request and one kernel miss each), at least: a load of
        /// fewer sessions runs more, so that every load makes as many first touches.
        #[arg(long, default_value_t = 10)]
        rounds: usize,
        /// Also sample the whole guest with `perf record` during each load and print where
        /// its CPU went (by program, and the top symbols).
        #[arg(long)]
        perf: bool,
        /// vCPUs of the VM (QEMU TCG runs one host thread for each): the daemon and the
        /// workers share them.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=8))]
        vcpus: u8,
        /// Arguments passed to the benchmark binary (after `--`).
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// The real agents' tests (`agent_*`) with an ungated run of each task first: wall time
    /// under Pincer against the same task with no session (the ratio), and retries per step.
    /// The newest kernel by default.
    Agents {
        #[command(flatten)]
        vm: vm::VmOptions,
        /// Also sample the whole guest with `perf record` during each run of a task (ungated
        /// and under Pincer) and print where its CPU went (by program, and the top symbols).
        #[arg(long)]
        perf: bool,
    },
}

fn main() -> std::process::ExitCode {
    match try_main() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn try_main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Deps => deps::ensure(&deps::all()).and_then(|()| deps::ensure_python_mcp()).and_then(|()| agents::ensure_all().map(drop)),
        Command::Test(args) => test::run(args),
        Command::VmTest(opts) => vm::vm_test(&opts),
        Command::Demo(args) => demo::run(args),
        Command::Bench { bench: Bench::Open { vm, clock, perf, args } } => {
            let profile = perf.then_some(std::path::Path::new(vm::PERF));
            let mut all = Vec::new();
            if let Some(p) = profile {
                anyhow::ensure!(p.is_file(), "--perf needs the host's {} (Debian: `apt-get install linux-perf`)", p.display());
                all.push("--perf".to_string());
            }
            all.extend(args);
            vm::bench(&vm, &vm::BENCH_OPEN, clock.guest_clock(), &all, profile, 1)
        }
        Command::Bench { bench: Bench::Daemon { vm, sessions, rounds, perf, vcpus, args } } => {
            let mut all = vec!["--sessions".to_string(), sessions, "--rounds".into(), rounds.to_string()];
            let profile = perf.then_some(std::path::Path::new(vm::PERF));
            if let Some(p) = profile {
                anyhow::ensure!(p.is_file(), "--perf needs the host's {} (Debian: `apt-get install linux-perf`)", p.display());
                all.push("--perf".into());
            }
            all.extend(args);
            vm::bench(&vm, &vm::BENCH_DAEMON, vm::qemu::GuestClock::Host, &all, profile, vcpus)
        }
        Command::Bench { bench: Bench::Agents { vm, perf } } => {
            if perf {
                anyhow::ensure!(std::path::Path::new(vm::PERF).is_file(), "--perf needs the host's {} (Debian: `apt-get install linux-perf`)", vm::PERF);
            }
            vm::bench_agents(vm, perf)
        }
    }
}
