//! The shipped systemd unit (`etc/pincer.service`) agrees with the configuration's defaults
//! and passes `systemd-analyze verify`.

use pincer::daemon::config::Config;
use std::path::Path;

const UNIT: &str = include_str!("../../etc/pincer.service");

fn values(key: &str) -> Vec<&'static str> {
    UNIT.lines().filter_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix('='))).collect()
}

#[test]
fn the_unit_runs_the_daemon_with_readiness_on_the_default_paths() {
    assert_eq!(values("Type"), ["notify"]);
    assert_eq!(values("ExecStart"), ["/usr/local/bin/pincer daemon --config /etc/pincer/pincer.toml"]);
    let cfg = Config::default();
    assert_eq!(cfg.state_dir, Path::new("/var/lib").join(values("StateDirectory")[0]));
    assert_eq!(cfg.audit_log.parent().unwrap(), Path::new("/var/log").join(values("LogsDirectory")[0]));
    assert_eq!(cfg.socket.parent().unwrap(), Path::new("/run").join(values("RuntimeDirectory")[0]));
    let rw: Vec<&str> = values("ReadWritePaths")[0].split_whitespace().collect();
    assert!(rw.iter().any(|p| cfg.pin_dir.starts_with(p)), "pins are writable: {rw:?}");
    assert!(rw.iter().any(|p| cfg.cgroup_parent.starts_with(p)), "session cgroups are writable: {rw:?}");
    let caps = values("CapabilityBoundingSet")[0];
    for cap in ["CAP_BPF", "CAP_PERFMON", "CAP_SYS_ADMIN", "CAP_DAC_READ_SEARCH", "CAP_KILL", "CAP_SYS_NICE"] {
        assert!(caps.contains(cap), "{cap} in {caps}");
    }
    // The daemon raises its own priority (`nice`): a Nice= here would be inherited by
    // what it starts as the niceness to give back.
    assert!(values("Nice").is_empty(), "the unit sets no Nice=");
    assert!(values("SystemCallFilter")[0].split_whitespace().any(|s| s == "bpf"));
}

#[test]
fn systemd_analyze_verifies_the_unit() {
    let dir = tempfile::tempdir().unwrap();
    let unit = dir.path().join("pincer.service");
    std::fs::write(&unit, UNIT.replace("/usr/local/bin/pincer", env!("CARGO_BIN_EXE_pincer"))).unwrap();
    let out = std::process::Command::new("systemd-analyze").arg("verify").arg(&unit).output().expect("systemd-analyze (package systemd) must be installed");
    assert!(out.status.success() && out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
}
