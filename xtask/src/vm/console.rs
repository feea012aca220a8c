//! Reading the VM's serial console: the markers the init script prints and the test
//! harness summaries in between.
//!
//! The init prints, each on its own line:
//! - `PINCER-VM-KERNEL <release> lsm=<list>` once the system is prepared,
//! - `PINCER-VM-BEGIN <name>` before running a binary,
//! - `PINCER-VM-RESULT <name> <exit code>` after it,
//! - `PINCER-VM-SETUP-FAILED <what>` if preparing the VM failed (nothing was run),
//! - `PINCER-VM-DONE` when everything ran, just before powering off.
//!
//! Kernel messages may be printed in the middle of a line, so a marker is recognized
//! anywhere in a line, not only at its start.

/// Marker printed before a binary runs.
pub const BEGIN: &str = "PINCER-VM-BEGIN";
/// Marker printed with a binary's exit code.
pub const RESULT: &str = "PINCER-VM-RESULT";
/// Marker printed when the init could not prepare the VM.
pub const SETUP_FAILED: &str = "PINCER-VM-SETUP-FAILED";
/// Marker of the line naming the kernel release and the active LSMs.
pub const KERNEL: &str = "PINCER-VM-KERNEL";
/// Marker printed when every binary ran.
pub const DONE: &str = "PINCER-VM-DONE";

/// Kernel messages after which a VM is stopped at once instead of waiting out its
/// timeout: a panic, an oops or `BUG`, a lockup. Matched anywhere in a line.
pub const KERNEL_FAULTS: &[&str] = &[
    "Kernel panic - not syncing",
    "kernel BUG at",
    "BUG: kernel NULL pointer dereference",
    "BUG: unable to handle",
    "BUG: soft lockup",
    "BUG: scheduling while atomic",
    "Oops: ",
    "general protection fault",
    "hard LOCKUP",
];

/// What one binary did in the VM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinaryResult {
    /// The binary's name as given to the init.
    pub name: String,
    /// Its exit code (`None` if the RESULT marker never came).
    pub exit_code: Option<i32>,
    /// Tests passed, summed over libtest's `test result:` lines.
    pub passed: u32,
    /// Tests failed, summed over libtest's `test result:` lines.
    pub failed: u32,
    /// Console lines printed while the binary ran (markers excluded).
    pub output: Vec<String>,
    /// When its BEGIN marker was read, from the start of the VM.
    pub began: std::time::Duration,
    /// How long it ran (BEGIN to RESULT, host time), once it finished.
    pub took: Option<std::time::Duration>,
}

impl BinaryResult {
    /// Whether the binary ran to the end and exited 0.
    pub fn ok(&self) -> bool {
        self.exit_code == Some(0)
    }
}

/// Everything read from one VM's console.
#[derive(Debug, Default, Clone)]
pub struct Transcript {
    /// Binaries in the order they started.
    pub binaries: Vec<BinaryResult>,
    /// Whether `PINCER-VM-DONE` was seen.
    pub done: bool,
    /// The reason given by `PINCER-VM-SETUP-FAILED`, if printed.
    pub setup_failed: Option<String>,
    /// The first console line that reported a kernel fault ([`KERNEL_FAULTS`]).
    pub fault: Option<String>,
    current: Option<usize>,
}

/// Removes terminal escape sequences, carriage returns and other control characters.
pub fn clean(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => {
                // CSI: ESC [ params final-byte; other escapes: ESC + one char.
                if chars.peek() == Some(&'[') {
                    chars.next();
                    for d in chars.by_ref() {
                        if ('@'..='~').contains(&d) {
                            break;
                        }
                    }
                } else {
                    chars.next();
                }
            }
            '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// Parses libtest's `test result: ok. 3 passed; 0 failed; ...` into (passed, failed).
fn parse_test_result(line: &str) -> Option<(u32, u32)> {
    let rest = &line[line.find("test result: ")? + "test result: ".len()..];
    let mut passed = None;
    let mut failed = None;
    for part in rest.split(';') {
        let words: Vec<&str> = part.split_whitespace().collect();
        // "ok. 3 passed" / "FAILED. 1 passed" / " 0 failed"
        if let [.., n, kind] = words.as_slice() {
            match *kind {
                "passed" => passed = n.parse().ok(),
                "failed" => failed = n.parse().ok(),
                _ => {}
            }
        }
    }
    Some((passed?, failed?))
}

/// The words after `marker` in `line`, if the marker is in it.
fn after_marker<'a>(line: &'a str, marker: &str) -> Option<Vec<&'a str>> {
    let at = line.find(marker)?;
    let rest = &line[at + marker.len()..];
    // The marker must be a whole word (RESULT must not match RESULTS).
    if !(rest.is_empty() || rest.starts_with(' ')) {
        return None;
    }
    Some(rest.split_whitespace().collect())
}

impl Transcript {
    /// Creates an empty transcript.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds one console line (already split at `\n`) at time zero.
    #[cfg(test)]
    pub fn feed(&mut self, raw: &str) {
        self.feed_at(raw, std::time::Duration::ZERO);
    }

    /// Feeds one console line read `at` after the VM started (for each binary's time).
    pub fn feed_at(&mut self, raw: &str, at: std::time::Duration) {
        let line = clean(raw);
        if self.fault.is_none() && KERNEL_FAULTS.iter().any(|f| line.contains(f)) {
            self.fault = Some(line.clone());
        }
        if let Some(words) = after_marker(&line, BEGIN) {
            let name = words.first().copied().unwrap_or("?").to_owned();
            self.binaries.push(BinaryResult {
                name,
                exit_code: None,
                passed: 0,
                failed: 0,
                output: Vec::new(),
                began: at,
                took: None,
            });
            self.current = Some(self.binaries.len() - 1);
        } else if let Some(words) = after_marker(&line, RESULT) {
            if let [name, code, ..] = words.as_slice() {
                let code = code.parse().ok();
                match self.binaries.iter_mut().rev().find(|b| b.name == *name) {
                    Some(b) => {
                        b.exit_code = code;
                        b.took = Some(at.saturating_sub(b.began));
                    }
                    None => self.binaries.push(BinaryResult {
                        name: (*name).to_owned(),
                        exit_code: code,
                        passed: 0,
                        failed: 0,
                        output: Vec::new(),
                        began: at,
                        took: Some(std::time::Duration::ZERO),
                    }),
                }
            }
            self.current = None;
        } else if let Some(words) = after_marker(&line, SETUP_FAILED) {
            self.setup_failed = Some(words.join(" "));
        } else if after_marker(&line, DONE).is_some() {
            self.done = true;
            self.current = None;
        } else if let Some(i) = self.current {
            let b = &mut self.binaries[i];
            if let Some((passed, failed)) = parse_test_result(&line) {
                b.passed += passed;
                b.failed += failed;
            }
            b.output.push(line);
        }
    }

    /// Total tests passed over all binaries.
    pub fn tests_passed(&self) -> u32 {
        self.binaries.iter().map(|b| b.passed).sum()
    }

    /// Total tests failed over all binaries.
    pub fn tests_failed(&self) -> u32 {
        self.binaries.iter().map(|b| b.failed).sum()
    }

    /// Whether the VM finished and every one of `expected` binaries ran and exited 0.
    pub fn passed(&self, expected: &[String]) -> bool {
        self.done
            && self.setup_failed.is_none()
            && self.fault.is_none()
            && expected.iter().all(|name| self.binaries.iter().any(|b| &b.name == name && b.ok()))
    }

    /// One sentence per problem found, for the failure report.
    pub fn problems(&self, expected: &[String]) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(what) = &self.setup_failed {
            out.push(format!("VM setup failed: {what}"));
        }
        if let Some(line) = &self.fault {
            out.push(format!("the kernel reported a fault, the VM was stopped: {line}"));
        }
        for name in expected {
            match self.binaries.iter().find(|b| &b.name == name) {
                None => out.push(format!("{name}: never started")),
                Some(b) => match b.exit_code {
                    None => out.push(format!("{name}: started but did not finish")),
                    Some(0) => {}
                    Some(code) => {
                        out.push(format!("{name}: exit code {code} ({} failed tests)", b.failed))
                    }
                },
            }
        }
        if !self.done {
            out.push(format!("the VM ended without printing {DONE}"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_all(lines: &[&str]) -> Transcript {
        let mut t = Transcript::new();
        for l in lines {
            t.feed(l);
        }
        t
    }

    #[test]
    fn clean_strips_escapes_and_carriage_returns() {
        assert_eq!(clean("\u{1b}c\u{1b}[?7l\u{1b}[2JPINCER-VM-DONE\r"), "PINCER-VM-DONE");
        assert_eq!(clean("a\tb\r"), "a\tb");
    }

    #[test]
    fn a_passing_run_counts_tests() {
        let t = feed_all(&[
            "[    1.0] random kernel line",
            "PINCER-VM-BEGIN vm_smoke\r",
            "running 4 tests",
            "test runs_as_root ... ok",
            "test result: ok. 4 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s",
            "PINCER-VM-RESULT vm_smoke 0",
            "PINCER-VM-BEGIN lib-pincer_tests",
            "test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s",
            "PINCER-VM-RESULT lib-pincer_tests 0",
            "PINCER-VM-DONE",
        ]);
        let expected = vec!["vm_smoke".to_owned(), "lib-pincer_tests".to_owned()];
        assert!(t.passed(&expected), "{:?}", t.problems(&expected));
        assert_eq!(t.tests_passed(), 4);
        assert_eq!(t.binaries[0].output.len(), 3);
    }

    #[test]
    fn a_failed_binary_or_missing_done_fails() {
        let t = feed_all(&[
            "PINCER-VM-BEGIN enforce",
            "test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 1s",
            "PINCER-VM-RESULT enforce 101",
            "PINCER-VM-DONE",
        ]);
        let expected = vec!["enforce".to_owned()];
        assert!(!t.passed(&expected));
        assert_eq!((t.tests_passed(), t.tests_failed()), (2, 1));
        assert_eq!(t.problems(&expected), ["enforce: exit code 101 (1 failed tests)"]);

        let hung = feed_all(&["PINCER-VM-BEGIN enforce", "running 3 tests"]);
        assert!(!hung.passed(&expected));
        assert_eq!(
            hung.problems(&expected),
            ["enforce: started but did not finish", "the VM ended without printing PINCER-VM-DONE"]
        );
    }

    #[test]
    fn a_binary_that_never_ran_fails_even_with_done() {
        let t = feed_all(&["PINCER-VM-DONE"]);
        assert!(!t.passed(&["x".to_owned()]));
        assert!(t.passed(&[]));
    }

    #[test]
    fn markers_are_found_after_kernel_noise_but_not_as_prefixes() {
        let t = feed_all(&[
            "[ 3.2] audit: something PINCER-VM-BEGIN a",
            "PINCER-VM-RESULTS a 0",
            "PINCER-VM-RESULT a 0",
            "PINCER-VM-SETUP-FAILED mount bpffs",
        ]);
        assert_eq!(t.binaries.len(), 1);
        assert_eq!(t.binaries[0].exit_code, Some(0));
        assert_eq!(t.binaries[0].output, ["PINCER-VM-RESULTS a 0"]);
        assert_eq!(t.setup_failed.as_deref(), Some("mount bpffs"));
        assert!(!t.passed(&["a".to_owned()]));
    }

    #[test]
    fn a_kernel_fault_fails_the_run_and_names_the_line() {
        let mut t = Transcript::new();
        t.feed_at("PINCER-VM-BEGIN enforce", std::time::Duration::from_secs(2));
        t.feed_at("[   12.5] watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [enforce:81]", std::time::Duration::from_secs(30));
        t.feed_at("[   13.0] Kernel panic - not syncing: softlockup: hung tasks", std::time::Duration::from_secs(31));
        assert!(t.fault.as_deref().is_some_and(|l| l.contains("soft lockup")), "{:?}", t.fault);
        t.feed("PINCER-VM-RESULT enforce 0");
        t.feed("PINCER-VM-DONE");
        assert!(!t.passed(&["enforce".to_owned()]));
        assert!(t.problems(&["enforce".to_owned()])[0].contains("stuck for 22s"));
        // Test output that merely mentions a bug is no fault.
        let quiet = feed_all(&["PINCER-VM-BEGIN a", "test no_bug_here ... ok", "PINCER-VM-RESULT a 0", "PINCER-VM-DONE"]);
        assert!(quiet.fault.is_none() && quiet.passed(&["a".to_owned()]));
    }

    #[test]
    fn each_binary_gets_its_time() {
        let mut t = Transcript::new();
        t.feed_at("PINCER-VM-BEGIN a", std::time::Duration::from_secs(3));
        t.feed_at("PINCER-VM-RESULT a 0", std::time::Duration::from_secs(10));
        assert_eq!(t.binaries[0].took, Some(std::time::Duration::from_secs(7)));
    }

    #[test]
    fn an_unparsable_exit_code_is_a_failure() {
        let t = feed_all(&["PINCER-VM-BEGIN a", "PINCER-VM-RESULT a x", "PINCER-VM-DONE"]);
        assert!(!t.passed(&["a".to_owned()]));
    }
}
