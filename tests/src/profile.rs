//! A `perf record` of the whole guest around one phase of a benchmark, and its report:
//! where the guest's CPU went, by program, by program and object, and by symbol. The
//! `perf` is the host's: the shared host root shows it to the VM tests, and `cargo xtask
//! bench daemon --perf` packs it into the benchmark's initramfs at the same path.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The `perf` binary, at the host's path.
pub const PERF: &str = "/usr/bin/perf";

/// The thread names of Pincer's processes: the daemon's runtime workers and hold server,
/// and `pincer` itself (its main thread, `pincer run`).
const PINCER_COMMS: &str = "pincer,tokio-rt-worker,fuser-0,fuser-1,fuser-2,fuser-3";

/// A running `perf record` of every CPU of the guest.
pub struct Profile {
    child: Child,
    data: String,
}

impl Profile {
    /// Starts sampling every CPU at 1999 Hz into a file named after `tag`.
    pub fn start(tag: &str) -> Result<Profile, String> {
        let data = format!("/tmp/pincer-{tag}.perf.data");
        let child = Command::new(PERF)
            .args(["record", "--all-cpus", "--freq", "1999", "--output", &data])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("start {PERF}: {e}"))?;
        // perf opens its events before it samples: give it the time to.
        std::thread::sleep(Duration::from_millis(500));
        Ok(Profile { child, data })
    }

    /// Stops the recording (SIGINT, as perf expects) and waits for perf to write it: what
    /// follows (a benchmark's teardown) is not sampled. Stopping again does nothing.
    pub fn stop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: kill(2) of our own child, which has not been reaped.
            unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
            let _ = self.child.wait();
        }
    }

    /// Stops the recording (if [`Profile::stop`] did not) and returns its report: the share
    /// of samples by program, by program and object, and the top `symbols` symbols.
    pub fn report(mut self, symbols: usize) -> Result<String, String> {
        self.stop();
        let mut out = String::from("  where the guest's CPU went (perf record, all CPUs, 1999 Hz):\n");
        // The last section: Pincer's own threads alone (the daemon's runtime, its hold
        // server, `pincer run`), shares still of the whole guest.
        let ours = ["--comms", PINCER_COMMS];
        for (sort, top, only) in [("comm", 10, &[][..]), ("comm,dso", 16, &[][..]), ("comm,dso,sym", symbols, &[][..]), ("comm,dso,sym", 30, &ours[..])] {
            let r = Command::new(PERF)
                .args(["report", "--stdio", "--input", &self.data, "--sort", sort])
                .args(only)
                .output()
                .map_err(|e| format!("{PERF} report: {e}"))?;
            out.push_str(&format!("  by {sort}{}:\n", if only.is_empty() { "" } else { ", Pincer's threads only" }));
            for line in String::from_utf8_lossy(&r.stdout).lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()).take(top) {
                out.push_str(&format!("    {}\n", line.trim_end()));
            }
        }
        let _ = std::fs::remove_file(&self.data);
        Ok(out)
    }
}
