//! Phase times: each long step of `cargo xtask test` (packages, builds, host tests, each
//! VM) prints how long it took as it ends, and the whole run ends with the table, so the
//! next slow step is visible in CI's log.

use std::sync::Mutex;
use std::time::{Duration, Instant};

static PHASES: Mutex<Vec<(String, Duration)>> = Mutex::new(Vec::new());

/// Records that the phase `name` took `took`, and prints it.
pub fn record(name: impl Into<String>, took: Duration) {
    let name = name.into();
    eprintln!("xtask: phase {name}: {:.1} s", took.as_secs_f64());
    PHASES.lock().expect("phase lock").push((name, took));
}

/// Runs `f` as the phase `name`, recording its time whatever it returns.
pub fn timed<T>(name: &str, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    record(name, start.elapsed());
    out
}

/// The phases recorded so far, as a table (one line each).
pub fn table() -> String {
    let phases = PHASES.lock().expect("phase lock");
    let width = phases.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    phases.iter().map(|(n, d)| format!("  {n:<width$}  {:>8.1} s\n", d.as_secs_f64())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_are_recorded_in_order_with_their_time() {
        timed("unit-a", || ());
        record("unit-b", Duration::from_millis(2500));
        let t = table();
        let (a, b) = (t.find("unit-a").unwrap(), t.find("unit-b").unwrap());
        assert!(a < b, "{t}");
        assert!(t.contains("2.5 s"), "{t}");
    }
}
