//! `pincer doctor` on the host: the checks read the files named in `Host`, so a test writes
//! a host that lacks everything and one that has everything (with a daemon answering on its
//! socket), and the real binary runs against this machine.

use pincer::daemon::config::Config;
use pincer::kernel::MemoryMaps;
use pincer::daemon::peer::CgroupLookup;
use pincer::doctor::{self, Host, Status, KERNEL_OPTIONS};

use crate::common;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

struct FakeHost {
    dir: tempfile::TempDir,
    host: Host,
    config: Config,
    config_file: PathBuf,
}

fn uid() -> u32 {
    // SAFETY: getuid has no preconditions.
    unsafe { libc::getuid() }
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A host with everything the daemon needs.
fn ready_host() -> FakeHost {
    let dir = tempfile::tempdir().unwrap();
    chmod(dir.path(), 0o755);
    let d = dir.path();
    let cfg_text: String = KERNEL_OPTIONS.iter().map(|o| format!("{o}=y\n")).collect::<String>() + "# CONFIG_SECURITY_SELINUX is not set\n";
    std::fs::write(d.join("config-6.1.0-test"), cfg_text).unwrap();
    std::fs::write(d.join("lsm"), "lockdown,capability,landlock,yama,apparmor,bpf").unwrap();
    std::fs::write(d.join("vmlinux"), [0x9f, 0xeb, 1, 0]).unwrap();
    std::fs::create_dir_all(d.join("cgroup")).unwrap();
    std::fs::write(d.join("cgroup/cgroup.controllers"), "cpu memory pids\n").unwrap();
    std::fs::create_dir_all(d.join("bpf")).unwrap();
    std::fs::write(d.join("mounts"), format!("sysfs /sys sysfs rw 0 0\ncgroup2 {0}/cgroup cgroup2 rw 0 0\nbpf {0}/bpf bpf rw 0 0\n", d.display())).unwrap();
    for sub in ["run", "state", "log"] {
        std::fs::create_dir_all(d.join(sub)).unwrap();
        chmod(&d.join(sub), 0o755);
    }
    let config = Config {
        socket: d.join("run/pincer.sock"),
        audit_log: d.join("log/audit.jsonl"),
        pin_dir: d.join("bpf/pincer"),
        cgroup_parent: d.join("cgroup/pincer"),
        ..common::config_in(d)
    };
    let config_file = d.join("pincer.toml");
    std::fs::write(&config_file, toml::to_string(&config).unwrap()).unwrap();
    let host = Host {
        release: "6.1.0-test".into(),
        kernel_configs: vec![d.join("config-6.1.0-test")],
        lsm: d.join("lsm"),
        btf: d.join("vmlinux"),
        mounts: d.join("mounts"),
        cgroup_root: d.join("cgroup"),
        daemon_uid: uid(),
    };
    FakeHost { dir, host, config, config_file }
}

/// Starts a daemon (the enforcer over maps in memory) on the fake host's socket and returns
/// once it has answered a call (so it has made its state directory private before the test
/// changes anything in it).
async fn start_daemon(config: &Config) -> tokio::sync::oneshot::Sender<()> {
    let lookup: CgroupLookup = Arc::new(|_| Ok(PathBuf::from("/sys/fs/cgroup/user.slice")));
    let stop = common::start_daemon(config, MemoryMaps::default().enforcer(), lookup, [1; 32], None).stop;
    let mut c = pincer::daemon::client::Client::connect(&config.socket).await.unwrap();
    c.call(pincer::daemon::Call::Sessions).await.unwrap();
    stop
}

#[tokio::test]
async fn a_ready_host_passes_every_check() {
    let f = ready_host();
    let _stop = start_daemon(&f.config).await;
    chmod(&f.config.state_dir, 0o700);
    let report = doctor::run(&f.host, Some(&f.config_file), None).await;
    let text = report.render();
    assert!(report.ready(), "{text}");
    for c in &report.checks {
        // The fake host's BTF is a bare header: which way a miss waits cannot be read from it.
        if c.name == "hold" {
            assert!(c.status != Status::Fail && c.detail.contains("denied at once"), "{text}");
            continue;
        }
        assert_eq!(c.status, Status::Ok, "{text}");
    }
    let names: Vec<&str> = report.checks.iter().map(|c| c.name).collect();
    assert_eq!(names, ["kernel config", "bpf LSM", "BTF", "hold", "cgroup v2", "bpffs", "configuration", "daemon", "socket", "state", "store"]);
    assert!(text.ends_with("the host is ready for the Pincer daemon\n"), "{text}");
}

#[tokio::test]
async fn a_host_lacking_everything_fails_each_check_with_the_command_that_fixes_it() {
    let f = ready_host();
    let d = f.dir.path();
    std::fs::write(d.join("config-6.1.0-test"), "CONFIG_BPF_SYSCALL=y\n# CONFIG_BPF_LSM is not set\nCONFIG_DEBUG_INFO_BTF=y\n").unwrap();
    std::fs::write(d.join("lsm"), "lockdown,capability,landlock,yama,apparmor").unwrap();
    std::fs::remove_file(d.join("vmlinux")).unwrap();
    std::fs::write(d.join("mounts"), format!("cgroup2 {}/cgroup/unified cgroup2 rw 0 0\n", d.display())).unwrap();
    std::fs::remove_file(d.join("cgroup/cgroup.controllers")).unwrap();
    std::fs::write(&f.config_file, "socket = \"/run/pincer/pincer.sock\"\non_mis = \"decide\"\n").unwrap();
    // The configuration does not parse, so the defaults apply: give the socket explicitly.
    let report = doctor::run(&f.host, Some(&f.config_file), Some(d.join("run/pincer.sock"))).await;
    let text = report.render();
    assert!(!report.ready(), "{text}");
    let fail = |name: &str| {
        let c = report.get(name).unwrap_or_else(|| panic!("no check {name}"));
        assert_eq!(c.status, Status::Fail, "{name}: {text}");
        (c.detail.clone(), c.fix.clone().unwrap_or_else(|| panic!("{name} has no fix: {text}")))
    };
    let (detail, fix) = fail("kernel config");
    assert!(detail.contains("CONFIG_BPF_LSM=y") && !detail.contains("CONFIG_BPF_SYSCALL=y,"), "{detail}");
    assert!(fix.contains("linux-image"), "{fix}");
    let (detail, fix) = fail("bpf LSM");
    assert!(detail.contains("lockdown,capability,landlock,yama,apparmor"), "{detail}");
    assert!(fix.contains("lsm=lockdown,capability,landlock,yama,apparmor,bpf") && fix.contains("update-grub"), "{fix}");
    let (_, fix) = fail("BTF");
    assert!(fix.contains("CONFIG_DEBUG_INFO_BTF"), "{fix}");
    let (detail, fix) = fail("cgroup v2");
    assert!(detail.contains("cgroup2 only at"), "{detail}");
    assert!(fix.contains("systemd.unified_cgroup_hierarchy=1"), "{fix}");
    let (_, fix) = fail("bpffs");
    assert!(fix.contains("mount -t bpf bpf /sys/fs/bpf"), "the defaults' pin_dir: {fix}");
    let (detail, _) = fail("configuration");
    assert!(detail.contains("on_mis"), "the bad key is named: {detail}");
    let (detail, fix) = fail("daemon");
    assert!(detail.contains("cannot connect"), "{detail}");
    assert!(fix.contains("systemctl enable --now pincer"), "{fix}");
    assert!(text.contains("the host is not ready: "), "{text}");
    // Each failure line is followed by its fix.
    assert_every_failure_has_a_fix(&text);
}

/// After each FAIL line, a `fix:` line comes before the next check.
fn assert_every_failure_has_a_fix(text: &str) {
    let status = |l: &str| ["ok ", "warn", "FAIL"].iter().any(|t| l.trim_start().starts_with(t));
    let lines: Vec<&str> = text.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        if l.trim_start().starts_with("FAIL") {
            let rest = lines[i + 1..].iter().take_while(|l| !status(l)).collect::<Vec<_>>();
            assert!(rest.iter().any(|l| l.trim_start().starts_with("fix: ")), "{l} has no fix:\n{text}");
        }
    }
}

#[tokio::test]
async fn a_replaceable_socket_and_a_readable_key_are_failures() {
    let f = ready_host();
    let _stop = start_daemon(&f.config).await;
    chmod(f.config.socket.parent().unwrap(), 0o777);
    std::fs::write(f.config.state_dir.join("prf.key"), [0u8; 32]).unwrap();
    chmod(&f.config.state_dir.join("prf.key"), 0o644);
    let report = doctor::run(&f.host, Some(&f.config_file), None).await;
    let text = report.render();
    let socket = report.get("socket").unwrap();
    assert_eq!(socket.status, Status::Fail, "{text}");
    assert!(socket.detail.contains("writable by group or others") && socket.fix.as_ref().unwrap().contains("chmod 0755"), "{text}");
    let state = report.get("state").unwrap();
    assert_eq!(state.status, Status::Fail, "{text}");
    assert!(state.detail.contains("prf.key") && state.fix.as_ref().unwrap().contains("chmod 0600"), "{text}");
    assert_eq!(report.get("daemon").unwrap().status, Status::Ok, "{text}");
}

#[test]
fn on_this_host_the_binary_names_what_is_missing_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pincer"))
        .args(["doctor", "--socket"])
        .arg(dir.path().join("no-daemon.sock"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{text}");
    assert_eq!(out.status.code(), Some(1), "no daemon answers here, so the host is not ready:\n{text}");
    for name in ["kernel config", "bpf LSM", "BTF", "cgroup v2", "bpffs", "configuration", "daemon", "socket", "state"] {
        assert!(text.contains(&format!("  {name}: ")), "{name} is checked:\n{text}");
    }
    assert!(text.contains("FAIL  daemon: cannot connect"), "{text}");
    assert_every_failure_has_a_fix(&text);
}
