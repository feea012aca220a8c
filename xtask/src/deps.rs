//! System packages: checked with `dpkg-query`, installed with `apt-get` when missing.

use anyhow::{bail, Context, Result};
use std::process::Command;

/// Packages needed to build the BPF program (clang-19, libbpf headers).
pub const BUILD: &[&str] = &["clang-19", "llvm-19", "libbpf-dev", "linux-libc-dev"];
/// Packages needed to boot the test VM (QEMU pulls in SeaBIOS; busybox-static needs nothing
/// else; cpio lists and unpacks initramfs images for inspection and its tests).
pub const VM: &[&str] = &["qemu-system-x86", "busybox-static", "cpio"];

/// Packages of the host programs the VM's real-tool test runs through the shared host root
/// (`vm/hostfs.rs`), virtiofsd (`qemu-system-common`, also pulled in by QEMU), and `curl`,
/// which fetches the agents' npm packages (`agents.rs`).
pub const REAL_TOOLS: &[&str] = &["qemu-system-common", "git", "python3", "nodejs", "curl"];

/// Packages of the fleet tests (`pincer-user/tests/fleet.rs`): a real PostgreSQL server
/// whose `initdb` and `pg_ctl` the tests run in a temporary folder (Debian 12 ships 15),
/// and the `openssl` CLI that makes the TLS test's CA and server certificates.
pub const FLEET: &[&str] = &["postgresql", "openssl"];

/// Packages of other host tests: QEMU's user-mode emulators, which run the hold anchor
/// built for the other architecture (`pincer-user/src/kernel/anchor.rs`).
pub const HOST_TESTS: &[&str] = &["qemu-user"];

/// Every package any task needs: [`BUILD`], [`VM`], [`REAL_TOOLS`], [`FLEET`] and
/// [`HOST_TESTS`].
pub fn all() -> Vec<&'static str> {
    BUILD.iter().chain(VM).chain(REAL_TOOLS).chain(FLEET).chain(HOST_TESTS).copied().collect()
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

/// The official Python MCP SDK, whose client drives `pincer mcp` in a host test.
pub const PYTHON_MCP: &str = "mcp";

/// Installs the Python MCP SDK with pip when `import mcp` fails.
pub fn ensure_python_mcp() -> Result<()> {
    let importable = |py: &str| {
        Command::new(py).args(["-c", "import mcp"]).output().map(|o| o.status.success()).unwrap_or(false)
    };
    if importable("python3") {
        return Ok(());
    }
    eprintln!("xtask: installing the Python package {PYTHON_MCP}");
    let pip = |extra: &[&str]| {
        Command::new("python3")
            .args(["-m", "pip", "install", "--quiet"])
            .args(extra)
            .arg(PYTHON_MCP)
            .stdin(std::process::Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    };
    if !pip(&[]) && !pip(&["--break-system-packages"]) {
        bail!("`python3 -m pip install {PYTHON_MCP}` failed (the MCP host test needs the Python MCP SDK)");
    }
    if !importable("python3") {
        bail!("installed the Python package {PYTHON_MCP}, but `python3 -c 'import mcp'` still fails");
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
        assert!(all.contains(&"postgresql"), "the fleet tests need a PostgreSQL server");
    }
}
