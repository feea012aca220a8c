//! Booting the test VM: QEMU with TCG (never KVM), the serial console on stdout, a
//! deadline after which QEMU is killed.

use super::console::Transcript;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Errors while running QEMU.
#[derive(Debug, thiserror::Error)]
pub enum QemuError {
    /// QEMU could not be started.
    #[error("could not start {binary} (install qemu-system-x86: `cargo xtask deps`)")]
    Spawn {
        /// The QEMU binary.
        binary: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The console log could not be written.
    #[error("writing the console log {path}")]
    Log {
        /// The log path.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Waiting for QEMU failed.
    #[error("waiting for QEMU")]
    Wait(#[source] std::io::Error),
}

/// The QEMU binary.
pub const QEMU: &str = "qemu-system-x86_64";

/// The kernel command line: serial console, BPF in the LSM list, reboot at once on panic, and
/// no CPU-vulnerability mitigations (nothing in the test VM is a secret from another guest
/// process, and under TCG they cost about 6% of the red-team suite's time), and no check
/// that the emulated timer interrupts through the IO-APIC in time (`no_timer_check`: on a
/// loaded host the check can miss TCG's late ticks and panic the boot, "IO-APIC + timer
/// doesn't work").
pub const CMDLINE: &str = "console=ttyS0 lsm=lockdown,capability,landlock,yama,bpf panic=-1 quiet mitigations=off no_timer_check";

/// How one VM run ended.
#[derive(Debug)]
pub struct Run {
    /// What the console showed.
    pub transcript: Transcript,
    /// Whether QEMU was killed at the deadline.
    pub timed_out: bool,
    /// QEMU's exit status description.
    pub status: String,
    /// Wall-clock time from start to QEMU's exit.
    pub elapsed: Duration,
}

/// Guest memory for an initramfs of `initrd_bytes`: 1 GiB, or more when the archive is big
/// (the kernel holds the archive and its unpacked copy in memory at once).
pub fn memory_mib(initrd_bytes: u64) -> u64 {
    (initrd_bytes / (1 << 20) * 3 + 512).max(1024)
}

/// How the guest's clock advances.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GuestClock {
    /// With the host's time (QEMU's default): guest figures are wall time under TCG,
    /// disturbed by whatever else the host runs.
    #[default]
    Host,
    /// By instructions executed (`-icount shift=N,sleep=off`): every guest instruction
    /// advances the guest's clock (TSC, HPET, PIT alike) by 2^N ns, and an idle guest jumps
    /// to its next timer instead of waiting for the host. Guest time then counts the work
    /// the guest did, not how fast the host ran it.
    Instructions {
        /// ns of guest time per instruction, as a power of two.
        shift: u8,
    },
}

impl GuestClock {
    /// QEMU's arguments for this clock.
    pub fn qemu_args(self) -> Vec<String> {
        match self {
            GuestClock::Host => Vec::new(),
            GuestClock::Instructions { shift } => vec!["-icount".into(), format!("shift={shift},sleep=off")],
        }
    }
}

/// How long a VM may keep printing after a kernel fault (so the console keeps the
/// trace) before it is stopped.
pub const FAULT_GRACE: Duration = Duration::from_secs(5);

/// One VM to boot.
#[derive(Debug, Clone)]
pub struct Machine<'a> {
    /// The kernel image.
    pub vmlinuz: &'a Path,
    /// The initramfs.
    pub initrd: &'a Path,
    /// How the guest's clock advances.
    pub clock: GuestClock,
    /// Virtual CPUs.
    pub cpus: u8,
    /// Words added to [`CMDLINE`] (e.g. the init's `pincer.only=` list).
    pub append: Vec<String>,
    /// The socket of a virtiofsd serving the host's root, if the guest gets it (see
    /// [`super::hostfs`]).
    pub hostfs: Option<&'a Path>,
}

impl<'a> Machine<'a> {
    /// One vCPU, the host's clock, nothing appended, no shared host root.
    pub fn new(vmlinuz: &'a Path, initrd: &'a Path) -> Self {
        Self { vmlinuz, initrd, clock: GuestClock::Host, cpus: 1, append: Vec::new(), hostfs: None }
    }
}

/// The QEMU command line for booting `m`.
pub fn command(m: &Machine) -> Command {
    let size = std::fs::metadata(m.initrd).map(|meta| meta.len()).unwrap_or(0);
    let mut append = CMDLINE.to_string();
    for word in &m.append {
        append.push(' ');
        append.push_str(word);
    }
    let mut cmd = Command::new(QEMU);
    cmd.args(["-accel", "tcg"]).args(m.clock.qemu_args()).arg("-smp").arg(m.cpus.max(1).to_string()).arg("-m")
        .arg(format!("{}M", memory_mib(size)))
        .args(m.hostfs.map(|socket| super::hostfs::qemu_args(socket, memory_mib(size))).unwrap_or_default())
        // The host's programs may use any instruction the host has (Claude Code's runtime
        // needs AVX2 and dies with SIGILL on QEMU's default CPU model): every extension
        // TCG can emulate.
        .args(if m.hostfs.is_some() { &["-cpu", "max"][..] } else { &[] })
        .args(["-nographic", "-no-reboot", "-nic", "none"])
        .arg("-kernel")
        .arg(m.vmlinuz)
        .arg("-initrd")
        .arg(m.initrd)
        .arg("-append")
        .arg(append);
    cmd
}

/// Boots `machine`, feeding each console line to the transcript, to `log`, and to `echo`
/// (which decides what reaches the terminal). QEMU is killed at `timeout`, or
/// [`FAULT_GRACE`] after the console reports a kernel fault.
pub fn boot(
    machine: &Machine,
    timeout: Duration,
    log: &Path,
    mut echo: impl FnMut(&str, &Transcript),
) -> Result<Run, QemuError> {
    let mut log_file = std::fs::File::create(log)
        .map_err(|source| QemuError::Log { path: log.to_owned(), source })?;
    let start = Instant::now();
    let mut child = command(machine)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| QemuError::Spawn { binary: QEMU.to_owned(), source })?;

    let (tx, rx) = mpsc::channel::<String>();
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    let tx_err = tx.clone();
    let out_thread = std::thread::spawn(move || forward_lines(stdout, "", &tx));
    let err_thread = std::thread::spawn(move || forward_lines(stderr, "qemu: ", &tx_err));

    let mut transcript = Transcript::new();
    let mut deadline = start + timeout;
    let mut timed_out = false;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                writeln!(log_file, "{line}")
                    .map_err(|source| QemuError::Log { path: log.to_owned(), source })?;
                let had_fault = transcript.fault.is_some();
                transcript.feed_at(&line, start.elapsed());
                echo(&line, &transcript);
                if !had_fault && transcript.fault.is_some() {
                    deadline = deadline.min(Instant::now() + FAULT_GRACE);
                }
            }
            // Both pipes closed: QEMU exited.
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                timed_out = transcript.fault.is_none();
                let _ = child.kill();
                if !timed_out {
                    let _ = writeln!(log_file, "xtask: stopped QEMU after a kernel fault");
                }
                break;
            }
        }
    }
    let status = child.wait().map_err(QemuError::Wait)?;
    let _ = out_thread.join();
    let _ = err_thread.join();
    // Lines read between the kill and the pipes closing.
    for line in rx.try_iter() {
        let _ = writeln!(log_file, "{line}");
        transcript.feed_at(&line, start.elapsed());
    }
    if timed_out {
        let _ = writeln!(log_file, "xtask: killed QEMU after {} s", timeout.as_secs());
    }
    Ok(Run { transcript, timed_out, status: status.to_string(), elapsed: start.elapsed() })
}

/// Sends each `\n`-terminated line of `r` (lossily decoded) to `tx` with `prefix`.
fn forward_lines(r: impl Read, prefix: &str, tx: &mpsc::Sender<String>) {
    let mut reader = BufReader::new(r);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let text = String::from_utf8_lossy(&buf);
                let line = text.trim_end_matches(['\n', '\r']);
                if tx.send(format!("{prefix}{line}")).is_err() {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_uses_tcg_and_never_kvm() {
        let cmd = command(&Machine::new(Path::new("/k"), Path::new("/i")));
        let args: Vec<String> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert!(args.windows(2).any(|w| w[0] == "-accel" && w[1] == "tcg"));
        assert!(!args.iter().any(|a| a.contains("kvm") || a.contains("icount")));
        assert!(args.contains(&"-no-reboot".to_owned()));
        assert!(args.windows(2).any(|w| w[0] == "-smp" && w[1] == "1"));
        let two = Machine { cpus: 2, append: vec!["pincer.only=a,b".into()], ..Machine::new(Path::new("/k"), Path::new("/i")) };
        let args: Vec<String> = command(&two).get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert!(args.windows(2).any(|w| w[0] == "-smp" && w[1] == "2"));
        assert!(args.iter().any(|a| a.starts_with(CMDLINE) && a.ends_with(" pincer.only=a,b")));
        let append = &args[args.iter().position(|a| a == "-append").unwrap() + 1];
        assert!(append.contains("lsm=") && append.contains(",bpf") && append.contains("panic=-1"));
    }

    #[test]
    fn an_instruction_clock_counts_instructions_and_never_sleeps() {
        let cmd = command(&Machine { clock: GuestClock::Instructions { shift: 0 }, ..Machine::new(Path::new("/k"), Path::new("/i")) });
        let args: Vec<String> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert!(args.windows(2).any(|w| w[0] == "-icount" && w[1] == "shift=0,sleep=off"));
        assert!(args.windows(2).any(|w| w[0] == "-accel" && w[1] == "tcg"));
    }

    #[test]
    fn a_shared_host_root_gets_memory_of_the_same_size_as_the_guest() {
        let cmd = command(&Machine { hostfs: Some(Path::new("/t/v.sock")), ..Machine::new(Path::new("/k"), Path::new("/nonexistent")) });
        let args: Vec<String> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        let m = &args[args.iter().position(|a| a == "-m").unwrap() + 1];
        assert_eq!(m, "1024M");
        assert!(args.windows(2).any(|w| w[0] == "-cpu" && w[1] == "max"), "the host's programs get every emulated extension");
        let plain = command(&Machine::new(Path::new("/k"), Path::new("/i")));
        assert!(!plain.get_args().any(|a| a == "-cpu"), "benchmarks keep QEMU's default CPU model");
        assert!(args.iter().any(|a| a == "memory-backend-memfd,id=mem,size=1024M,share=on"));
        assert!(args.iter().any(|a| a == "vhost-user-fs-pci,chardev=hostfs,tag=hostroot"));
    }

    #[test]
    fn memory_grows_with_a_big_initramfs() {
        assert_eq!(memory_mib(20 << 20), 1024);
        assert_eq!(memory_mib(400 << 20), 1712);
    }

    #[test]
    fn forwarded_lines_lose_their_line_endings() {
        let (tx, rx) = mpsc::channel();
        forward_lines(&b"one\r\ntwo\nthree"[..], "p: ", &tx);
        drop(tx);
        assert_eq!(rx.iter().collect::<Vec<_>>(), ["p: one", "p: two", "p: three"]);
    }
}
