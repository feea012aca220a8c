//! System packages: checked with `dpkg-query`, installed with `apt-get` when missing.

use anyhow::{bail, Context, Result};
use std::process::Command;

/// Packages needed to build the BPF program (clang-19, libbpf headers).
pub const BUILD: &[&str] = &["clang-19", "llvm-19", "libbpf-dev", "linux-libc-dev"];
/// Packages needed to boot the test VM (QEMU pulls in SeaBIOS; busybox-static needs nothing
/// else; cpio lists and unpacks initramfs images for inspection and its tests).
pub const VM: &[&str] = &["qemu-system-x86", "busybox-static", "cpio"];

/// Every package any task needs: [`BUILD`] and [`VM`].
pub fn all() -> Vec<&'static str> {
    BUILD.iter().chain(VM).copied().collect()
}

fn installed(pkg: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", pkg])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
        .unwrap_or(false)
}

/// Installs any of `pkgs` that is missing; fails with the list if not root.
pub fn ensure(pkgs: &[&str]) -> Result<()> {
    let missing: Vec<&str> = pkgs.iter().copied().filter(|p| !installed(p)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        bail!("missing system packages: {} (run `sudo cargo xtask deps`)", missing.join(" "));
    }
    eprintln!("xtask: installing {}", missing.join(" "));
    let status = Command::new("apt-get").arg("update").arg("-qq").status().context("apt-get update")?;
    if !status.success() {
        bail!("apt-get update failed");
    }
    let status = Command::new("apt-get")
        .args(["install", "-y", "-qq", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdin(std::process::Stdio::null())
        .status()
        .context("apt-get install")?;
    if !status.success() {
        bail!("apt-get install {} failed", missing.join(" "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn all_covers_build_and_vm_packages() {
        let all = super::all();
        for pkg in super::BUILD.iter().chain(super::VM) {
            assert!(all.contains(pkg), "{pkg}");
        }
        assert!(all.contains(&"busybox-static") && all.contains(&"qemu-system-x86"));
    }
}
