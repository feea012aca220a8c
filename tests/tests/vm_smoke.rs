//! Checks that the test VM is what the privileged tests assume: real root, BPF in the
//! active LSM list, BTF for CO-RE, and bpffs, cgroup2 and securityfs mounted where a host
//! has them. Runs inside `cargo xtask vm-test`.

use std::fs;

/// The (source, target, fstype) of every mount, from `/proc/self/mounts`.
fn mounts() -> Vec<(String, String, String)> {
    fs::read_to_string("/proc/self/mounts")
        .expect("read /proc/self/mounts (is proc mounted?)")
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            Some((f.next()?.to_owned(), f.next()?.to_owned(), f.next()?.to_owned()))
        })
        .collect()
}

fn assert_mounted(target: &str, fstype: &str) {
    let all = mounts();
    assert!(
        all.iter().any(|(_, t, ty)| t == target && ty == fstype),
        "{fstype} is not mounted at {target}; mounts: {all:?}"
    );
}

/// The four ids (real, effective, saved, filesystem) of a `Uid:`/`Gid:` line.
fn ids(status: &str, key: &str) -> Vec<u32> {
    let line = status
        .lines()
        .find(|l| l.starts_with(key))
        .unwrap_or_else(|| panic!("no {key} line in /proc/self/status"));
    line[key.len()..].split_whitespace().map(|n| n.parse().expect("numeric id")).collect()
}

#[test]
fn runs_as_real_root_with_full_capabilities() {
    let status = fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    assert_eq!(ids(&status, "Uid:"), [0, 0, 0, 0], "not running as root");
    assert_eq!(ids(&status, "Gid:"), [0, 0, 0, 0], "not running with gid 0");
    let cap_eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .expect("CapEff line")
        .trim();
    let caps = u64::from_str_radix(cap_eff, 16).expect("hex CapEff");
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_BPF: u32 = 39;
    const CAP_PERFMON: u32 = 38;
    for cap in [CAP_SYS_ADMIN, CAP_BPF, CAP_PERFMON] {
        assert_ne!(caps & (1 << cap), 0, "capability {cap} missing from CapEff {cap_eff}");
    }
}

#[test]
fn bpf_is_an_active_lsm() {
    let lsm = fs::read_to_string("/sys/kernel/security/lsm")
        .expect("read /sys/kernel/security/lsm (is securityfs mounted?)");
    assert!(
        lsm.trim().split(',').any(|m| m == "bpf"),
        "bpf is not in the active LSM list {lsm:?}; boot with lsm=...,bpf"
    );
}

#[test]
fn kernel_has_btf_for_co_re() {
    let btf = fs::metadata("/sys/kernel/btf/vmlinux").expect("/sys/kernel/btf/vmlinux");
    assert!(btf.len() > 0, "empty vmlinux BTF");
}

#[test]
fn bpffs_cgroup2_and_securityfs_are_mounted() {
    assert_mounted("/sys/fs/bpf", "bpf");
    assert_mounted("/sys/fs/cgroup", "cgroup2");
    assert_mounted("/sys/kernel/security", "securityfs");
    assert_mounted("/tmp", "tmpfs");
    // A child cgroup can be made and a process moved into it, as sessions need.
    let dir = "/sys/fs/cgroup/vm-smoke";
    fs::create_dir(dir).expect("create a cgroup");
    fs::write(format!("{dir}/cgroup.procs"), std::process::id().to_string()).expect("join the cgroup");
    let own = fs::read_to_string("/proc/self/cgroup").expect("read /proc/self/cgroup");
    assert_eq!(own.trim(), "0::/vm-smoke");
    fs::write("/sys/fs/cgroup/cgroup.procs", std::process::id().to_string()).expect("leave the cgroup");
    fs::remove_dir(dir).expect("remove the cgroup");
}

/// The loader attaches the held `file_open` exactly where the kernel has its kfuncs
/// (Linux 6.12; 6.1 lacks them and gets the plain one). On a mismatch the verifier's
/// answer to the held program is printed.
#[test]
fn the_held_file_open_is_attached_where_the_kernel_has_its_kfuncs() {
    let te = pincer_tests::TestEnforcer::shared();
    let btf = aya::Btf::from_sys_fs().expect("kernel BTF");
    let missing = pincer::kernel::kfunc::missing(&btf);
    let held = te.enforcer.as_ref().expect("enforcer").holds_misses();
    if held != missing.is_empty() {
        let object = pincer::kernel::kfunc::resolve_for(pincer_ebpf::PINCER_BPF, &btf).expect("resolve kfuncs");
        let mut ebpf = aya::EbpfLoader::new().btf(Some(&btf)).allow_unsupported_maps().load(&object).expect("load the object");
        let lsm: &mut aya::programs::Lsm = ebpf.program_mut("pincer_file_open_held").expect("held program").try_into().expect("an LSM program");
        let why = lsm.load("file_open", &btf).err().map(|e| format!("{e:?}")).unwrap_or_else(|| "it loads".into());
        panic!("held file_open attached: {held}; kfuncs missing: {missing:?}; loading it alone: {why}");
    }
}

/// Where the kernel has the hold's kfuncs, every held variant (creations, removals and
/// renames as well as `file_open`) passes the verifier, and the loader attaches it: the
/// pinned links are the held programs. Each refusal is printed with the verifier's answer.
#[test]
fn every_held_variant_loads_where_the_kernel_has_its_kfuncs() {
    let btf = aya::Btf::from_sys_fs().expect("kernel BTF");
    if !pincer::kernel::kfunc::missing(&btf).is_empty() {
        return; // 6.1: the plain programs only (the test above checks that)
    }
    let object = pincer::kernel::kfunc::resolve_for(pincer_ebpf::PINCER_BPF, &btf).expect("resolve kfuncs");
    let mut ebpf = aya::EbpfLoader::new().btf(Some(&btf)).allow_unsupported_maps().load(&object).expect("load the object");
    let mut refused = Vec::new();
    let held: Vec<_> = pincer_ebpf::PROGRAMS.iter().filter(|(n, _)| n.ends_with("_held")).collect();
    assert!(held.len() >= 4, "file_open, inode_create, inode_unlink and inode_rename have held variants");
    for (name, hook) in held {
        let lsm: &mut aya::programs::Lsm = ebpf.program_mut(name).expect("held program").try_into().expect("an LSM program");
        if let Err(e) = lsm.load(hook, &btf) {
            refused.push(format!("{name} ({hook}): {e:?}"));
        }
    }
    assert!(refused.is_empty(), "held variants refused:\n{}", refused.join("\n\n"));
}

