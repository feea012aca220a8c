//! Real programs in the test VM: the host's root filesystem, shared read-only with
//! virtiofs (as virtme-ng does), so tests run the host's `git`, `python3`, `node` and the
//! rust toolchain inside Pincer sessions with their real data.
//!
//! Host side: one `virtiofsd` (Debian 12's C daemon, `/usr/lib/qemu/virtiofsd` from
//! `qemu-system-common`) per VM, with its own socket under `target/vm/`, stopped when QEMU
//! ends. It has no read-only option of its own, so it runs in a private mount namespace
//! (`unshare --mount`) on a read-only bind mount of `/`: whatever the guest asks, the host
//! refuses writes with `EROFS`. The bind mount is not recursive: only the root filesystem
//! is shared (no `/proc`, `/sys` or other mounts of the host).
//!
//! Guest side (the shell piece [`guest_setup`] that `/init` runs before the programs):
//! the initramfs stays the root (busybox, `/init`, the test binaries, `/tmp` and `/run` on
//! tmpfs, the roots tests protect on filesystems they mount), and the host root is mounted
//! read-only at [`GUEST_ROOT`]. Its `/usr` is bind-mounted over the guest's `/usr`, its
//! `/usr/lib` and `/usr/lib64` over `/lib` and `/lib64` (Debian 12 has merged `/usr`, so
//! these hold every library and the loader; the initramfs's copies are the same files), and
//! a few `/etc` entries programs read (the loader cache, `alternatives` through which
//! `cc` is found, `gitconfig`, Python's config, certificates) are symlinked into the
//! guest's `/etc`. `/bin` and `/sbin` stay busybox, so `/bin/sh` and the tools the other
//! tests use are unchanged. Bind mounts rather than a chroot per command: a program started
//! by a test (inside `pincer run`, as the worker) finds the host's programs at their usual
//! paths with no wrapper, and every path a test protects (under `/tmp`, or a filesystem it
//! mounts) is the guest's own, controlled by the test.
//!
//! The worker (uid 1000) gets an account `worker` with the home [`WORKER_HOME`] on the
//! initramfs: `~/.rustup` is the host's `/root/.rustup` (bind mount, read-only; root's home
//! is 0700 on the host, the bind mount is reached through the worker's home), and `~/.cargo`
//! is the worker's own writable directory whose `bin` is the host's `/root/.cargo/bin`
//! (read-only): the default open paths of `etc/pincer.toml` (`~/.rustup` ro, `~/.cargo` rw)
//! then cover the toolchain as on a developer's machine.
//!
//! Kernels: the 6.12 cloud kernel has virtio-pci, FUSE and virtio-fs built in; Debian's 6.1
//! has them as modules, which are taken from the kernel package (their `depends=` read
//! from each module's `.modinfo`, decompressed on the host if the package compresses them)
//! and put into the initramfs in load order for `/init` to `insmod`. Both have overlayfs
//! (each session's layers over the read-write open paths) as a module, loaded the same way.

use super::cpio::Archive;
use super::kernels::Kernel;
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The C virtiofsd of Debian 12 (package `qemu-system-common`).
pub const VIRTIOFSD: &str = "/usr/lib/qemu/virtiofsd";

/// The virtiofs tag the guest mounts.
pub const TAG: &str = "hostroot";

/// Where the guest mounts the host's root (read-only).
pub const GUEST_ROOT: &str = "/host";

/// The worker's home in the guest (uid 1000, account `worker`).
pub const WORKER_HOME: &str = "/home/worker";

/// Where the guest's initramfs keeps the kernel modules for virtio-fs, one folder per
/// kernel release, named `NN-<module>.ko` so that their order is the load order.
pub const GUEST_MODULES: &str = "/pincer-modules";

/// Where the initramfs keeps the shell pieces `/init` sources before the programs run.
pub const GUEST_SETUP_DIR: &str = "/etc/pincer-vm-setup";

/// Entries of the host's `/etc` the guest links to (those that exist): the loader's
/// cache and config, `alternatives` (`cc`, `editor`, ...), git's system config, Python's
/// config (`python3*`, matched in the guest), certificates.
pub const ETC_LINKS: &[&str] = &["ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "gitconfig", "ssl", "ca-certificates"];

/// The modules that give virtio-fs: the PCI transport and the filesystem.
const ROOT_MODULES: &[&str] = &["virtio_pci", "virtiofs"];

/// The overlay filesystem, of which each session's layers over the read-write open paths
/// are made: its config option and module.
const OVERLAY: (&str, &str) = ("CONFIG_OVERLAY_FS", "overlay");

/// The modules `config` needs loaded: virtio-fs's when they are modules, and overlay's when
/// it is one; a kernel without overlay is an error naming the option.
pub fn roots(package: &str, config: &str) -> Result<Vec<&'static str>> {
    let mut out = match support(package, config)? {
        Support::Modules => ROOT_MODULES.to_vec(),
        Support::BuiltIn => Vec::new(),
    };
    match config.lines().find_map(|l| l.trim().strip_prefix(OVERLAY.0).and_then(|r| r.strip_prefix('='))) {
        Some("y") => {}
        Some("m") => out.push(OVERLAY.1),
        _ => bail!("{package}: {} is not set in its config; sessions' layers need it", OVERLAY.0),
    }
    Ok(out)
}

/// Kernel config options virtio-fs needs, each built in (`y`) or a module (`m`).
pub const REQUIRED_CONFIG: &[&str] = &["CONFIG_VIRTIO", "CONFIG_VIRTIO_PCI", "CONFIG_FUSE_FS", "CONFIG_VIRTIO_FS"];

/// How a kernel provides virtio-fs, from its config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// Every option is `y`: nothing to load.
    BuiltIn,
    /// Some are `m`: the modules come from the kernel package.
    Modules,
}

/// Reads from a kernel config whether virtio-fs is built in or modular; an option that is
/// not set at all is an error naming it.
pub fn support(package: &str, config: &str) -> Result<Support> {
    let mut modular = false;
    for option in REQUIRED_CONFIG {
        let value = config.lines().find_map(|l| l.trim().strip_prefix(option).and_then(|r| r.strip_prefix('=')));
        match value {
            Some("y") => {}
            Some("m") => modular = true,
            _ => bail!("{package}: {option} is not set in its config; the host's programs cannot be shared into its VM"),
        }
    }
    Ok(if modular { Support::Modules } else { Support::BuiltIn })
}

/// The `depends=` list of a kernel module's `.modinfo` (module names, `-` as `_`).
pub fn module_depends(ko: &[u8]) -> Vec<String> {
    ko.split(|b| *b == 0)
        .find_map(|s| s.strip_prefix(b"depends="))
        .map(|d| {
            String::from_utf8_lossy(d).split(',').map(|m| m.trim().replace('-', "_")).filter(|m| !m.is_empty()).collect()
        })
        .unwrap_or_default()
}

/// The modules to load for `roots`, dependencies first, each once; `deps` maps a module to
/// what it depends on. A module missing from `deps` is an error naming it.
pub fn load_order(roots: &[&str], deps: &BTreeMap<String, Vec<String>>) -> Result<Vec<String>> {
    fn visit(m: &str, deps: &BTreeMap<String, Vec<String>>, out: &mut Vec<String>, path: &mut Vec<String>) -> Result<()> {
        if out.iter().any(|o| o == m) {
            return Ok(());
        }
        if path.iter().any(|p| p == m) {
            bail!("module dependency cycle through {m}");
        }
        let Some(ds) = deps.get(m) else { bail!("module {m} is not in the kernel package") };
        path.push(m.to_owned());
        for d in ds {
            visit(d, deps, out, path)?;
        }
        path.pop();
        out.push(m.to_owned());
        Ok(())
    }
    let mut out = Vec::new();
    for r in roots {
        visit(r, deps, &mut out, &mut Vec::new())?;
    }
    Ok(out)
}

/// The module name of a `.ko`, `.ko.xz` or `.ko.zst` file name.
fn module_name(file: &str) -> Option<String> {
    let stem = file.strip_suffix(".ko").or_else(|| file.strip_suffix(".ko.xz")).or_else(|| file.strip_suffix(".ko.zst"))?;
    Some(stem.replace('-', "_"))
}

/// Reads a module file, decompressing `.ko.xz` and `.ko.zst` (busybox `insmod` loads plain
/// `.ko` only).
fn read_module(path: &Path) -> Result<Vec<u8>> {
    let name = path.to_string_lossy();
    let tool = if name.ends_with(".xz") {
        Some("xz")
    } else if name.ends_with(".zst") {
        Some("zstd")
    } else {
        None
    };
    match tool {
        None => std::fs::read(path).with_context(|| format!("reading {}", path.display())),
        Some(tool) => {
            let out = Command::new(tool).arg("-dc").arg(path).output().with_context(|| format!("running {tool} -dc {}", path.display()))?;
            if !out.status.success() {
                bail!("{tool} -dc {} failed: {}", path.display(), String::from_utf8_lossy(&out.stderr).trim());
            }
            Ok(out.stdout)
        }
    }
}

/// The kernel modules `kernel` needs for virtio-fs, in load order, as (guest file name,
/// plain `.ko` contents); empty when the kernel has them built in. The module folders are
/// unpacked from the kernel's `.deb` once, beside its `boot/`.
pub fn modules(kernel: &Kernel) -> Result<Vec<(String, Vec<u8>)>> {
    let config = std::fs::read_to_string(&kernel.config).with_context(|| format!("reading {}", kernel.config.display()))?;
    let roots = roots(&kernel.package, &config)?;
    if roots.is_empty() {
        return Ok(Vec::new());
    }
    let base = kernel.vmlinuz.parent().and_then(Path::parent).context("the kernel's vmlinuz has no unpack folder")?;
    let dir = base.join("guest-modules");
    if !dir.is_dir() {
        let tmp = base.join(format!(".guest-modules-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        let script = "dpkg-deb --fsys-tarfile \"$1\" | tar -x -C \"$2\" --wildcards './lib/modules/*/kernel/drivers/virtio/*' './lib/modules/*/kernel/fs/fuse/*' './lib/modules/*/kernel/fs/overlayfs/*'";
        let out = Command::new("sh").args(["-c", script, "sh"]).arg(&kernel.deb).arg(&tmp).output().context("running dpkg-deb")?;
        if !out.status.success() {
            let _ = std::fs::remove_dir_all(&tmp);
            bail!("unpacking the virtio, fuse and overlay modules of {}: {}", kernel.deb.display(), String::from_utf8_lossy(&out.stderr).trim());
        }
        if std::fs::rename(&tmp, &dir).is_err() {
            let _ = std::fs::remove_dir_all(&tmp); // another run unpacked it first
        }
    }
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Some(m) = p.file_name().and_then(|n| n.to_str()).and_then(module_name) {
                files.insert(m, p);
            }
        }
    }
    let mut contents = BTreeMap::new();
    let mut deps = BTreeMap::new();
    for (m, p) in &files {
        let bytes = read_module(p)?;
        deps.insert(m.clone(), module_depends(&bytes));
        contents.insert(m.clone(), bytes);
    }
    let order = load_order(&roots, &deps).with_context(|| format!("the guest modules of {}", kernel.package))?;
    Ok(order.into_iter().enumerate().map(|(i, m)| (format!("{i:02}-{m}.ko"), contents.remove(&m).unwrap_or_default())).collect())
}

/// The shell piece `/init` runs before the programs: loads the modules, mounts the host's
/// root read-only at [`GUEST_ROOT`], binds its `/usr`, `/lib`, `/lib64`, links the
/// [`ETC_LINKS`], makes the worker's account and home with the toolchain, and binds each
/// agent's package folder of `agents` (name, host folder) read-only at
/// `/opt/agents/<name>` (`crate::agents::GUEST_DIR`). Uses the init script's `fail` on any
/// error.
pub fn guest_setup(agents: &[(&str, PathBuf)]) -> String {
    let etc = ETC_LINKS.join(" ");
    let mut binds = String::new();
    for (name, dir) in agents {
        binds.push_str(&format!("robind {GUEST_ROOT}{} {}/{name}\n", dir.display(), crate::agents::GUEST_DIR));
    }
    format!(
        r#"# The host's root, read-only over virtiofs (xtask/src/vm/hostfs.rs).
for m in {GUEST_MODULES}/$(uname -r)/*.ko; do
    [ -e "$m" ] || continue
    insmod "$m" || fail "insmod $m"
done
mkdir -p {GUEST_ROOT} && mount -t virtiofs -o ro {TAG} {GUEST_ROOT} || fail "mount -t virtiofs {TAG} {GUEST_ROOT}"
robind() {{ # source target
    mkdir -p "$2" && mount --bind "$1" "$2" && mount -o remount,bind,ro "$2" || fail "bind $1 on $2"
}}
robind {GUEST_ROOT}/usr /usr
for d in lib lib64; do
    if [ -d {GUEST_ROOT}/usr/$d ]; then robind {GUEST_ROOT}/usr/$d /$d; fi
done
for e in {etc} $(cd {GUEST_ROOT}/etc && ls -d python3* 2>/dev/null); do
    if [ -e {GUEST_ROOT}/etc/$e ] && [ ! -e /etc/$e ]; then ln -s {GUEST_ROOT}/etc/$e /etc/$e || fail "linking /etc/$e"; fi
done
echo "worker:x:1000:1000:Pincer test worker:{WORKER_HOME}:/bin/sh" >> /etc/passwd
echo "worker:x:1000:" >> /etc/group
mkdir -p {WORKER_HOME}/.cargo/bin {WORKER_HOME}/.rustup || fail "mkdir {WORKER_HOME}"
chown -R 1000:1000 {WORKER_HOME} && chmod 755 {WORKER_HOME} || fail "chown {WORKER_HOME}"
if [ -d {GUEST_ROOT}/root/.rustup ]; then robind {GUEST_ROOT}/root/.rustup {WORKER_HOME}/.rustup; fi
if [ -d {GUEST_ROOT}/root/.cargo/bin ]; then robind {GUEST_ROOT}/root/.cargo/bin {WORKER_HOME}/.cargo/bin; fi
{binds}"#
    )
}

/// The initramfs part for sharing the host's root with `kernels`: each kernel's modules
/// under [`GUEST_MODULES`]`/<release>/` and [`guest_setup`] (binding `agents`) as a piece
/// `/init` sources.
pub fn archive(kernels: &[Kernel], agents: &[(&str, PathBuf)]) -> Result<Archive> {
    let mut a = Archive::new();
    for k in kernels {
        let dir = format!("{}/{}", GUEST_MODULES.trim_start_matches('/'), k.release);
        a.dir(&dir, 0o755)?;
        for (name, bytes) in modules(k)? {
            a.file(&format!("{dir}/{name}"), bytes, 0o644)?;
        }
    }
    a.file(&format!("{}/hostfs.sh", GUEST_SETUP_DIR.trim_start_matches('/')), guest_setup(agents).into_bytes(), 0o644)?;
    Ok(a)
}

/// A `virtiofsd` serving the host's root read-only on a socket; stopped (and its socket
/// removed) when dropped.
pub struct Virtiofsd {
    child: Child,
    /// The vhost-user socket QEMU connects to.
    pub socket: PathBuf,
    dir: PathBuf,
    socket_dir: PathBuf,
}

/// A folder of its own for one virtiofsd's socket, under the system's temporary folder:
/// a Unix socket's path has at most 107 bytes, which a checkout's `target/vm/` and a VM's
/// name can pass.
fn socket_dir() -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    std::env::temp_dir().join(format!("pincer-vfs-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)))
}

/// The command that runs `virtiofsd` on a read-only bind mount of `/` at `mountpoint` in a
/// private mount namespace, serving it on `socket`.
pub fn virtiofsd_command(mountpoint: &Path, socket: &Path) -> Command {
    let script = r#"mount --bind / "$1" && mount -o remount,bind,ro "$1" && exec "$2" --socket-path="$3" -o source="$1" -o cache=always -o sandbox=namespace -o log_level=err"#;
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "--", "sh", "-c", script, "sh"])
        .arg(mountpoint)
        .arg(VIRTIOFSD)
        .arg(socket);
    cmd
}

impl Virtiofsd {
    /// Starts `virtiofsd` for one VM under `run_dir` (its socket and mount point in a
    /// folder named after `name`) and waits for its socket.
    pub fn start(run_dir: &Path, name: &str) -> Result<Virtiofsd> {
        if !Path::new(VIRTIOFSD).is_file() {
            bail!("{VIRTIOFSD} is missing; install qemu-system-common (`cargo xtask deps`)");
        }
        let dir = run_dir.join(format!("hostfs-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mountpoint = dir.join("root");
        std::fs::create_dir_all(&mountpoint).with_context(|| format!("creating {}", mountpoint.display()))?;
        let socket_dir = socket_dir();
        let _ = std::fs::remove_dir_all(&socket_dir);
        std::fs::create_dir_all(&socket_dir).with_context(|| format!("creating {}", socket_dir.display()))?;
        let socket = socket_dir.join("virtiofsd.sock");
        let mut cmd = virtiofsd_command(&mountpoint, &socket);
        // Its messages (e.g. the disconnect when QEMU exits) go to a log beside the console's.
        let log = run_dir.join("logs").join(format!("virtiofsd-{name}.log"));
        let log_file = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(log_file);
        // Its own process group, so a ^C to xtask reaches it only through Drop.
        cmd.process_group(0);
        let child = cmd.spawn().with_context(|| format!("starting {VIRTIOFSD} under unshare"))?;
        let mut v = Virtiofsd { child, socket, dir, socket_dir };
        let start = Instant::now();
        while !v.socket.exists() {
            if let Some(status) = v.child.try_wait()? {
                bail!("{VIRTIOFSD} exited before opening {} ({status}; its messages: {})", v.socket.display(), log.display());
            }
            if start.elapsed() > Duration::from_secs(20) {
                bail!("{VIRTIOFSD} did not open {} within 20 s", v.socket.display());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(v)
    }
}

impl Drop for Virtiofsd {
    fn drop(&mut self) {
        // SIGTERM first (it ends its sandboxed child too), SIGKILL if it lingers.
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_dir_all(&self.socket_dir);
    }
}

/// QEMU's arguments for the shared root served on `socket`, for a guest of `memory_mib`
/// (vhost-user needs the guest's memory shared with virtiofsd: a memfd backend of the same
/// size as `-m`, as the one NUMA node).
pub fn qemu_args(socket: &Path, memory_mib: u64) -> Vec<String> {
    vec![
        "-object".into(),
        format!("memory-backend-memfd,id=mem,size={memory_mib}M,share=on"),
        "-numa".into(),
        "node,memdev=mem".into(),
        "-chardev".into(),
        format!("socket,id=hostfs,path={}", socket.display()),
        "-device".into(),
        format!("vhost-user-fs-pci,chardev=hostfs,tag={TAG}"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockets_fit_a_unix_address_whatever_the_vm_and_checkout() {
        let (a, b) = (socket_dir().join("virtiofsd.sock"), socket_dir().join("virtiofsd.sock"));
        assert_ne!(a, b, "each VM's socket has a folder of its own");
        assert!(a.as_os_str().len() < 100, "{}", a.display());
    }

    #[test]
    fn support_is_read_from_the_config() {
        let built_in = "CONFIG_VIRTIO=y\nCONFIG_VIRTIO_PCI=y\nCONFIG_FUSE_FS=y\nCONFIG_VIRTIO_FS=y\n";
        assert_eq!(support("k", built_in).unwrap(), Support::BuiltIn);
        let modular = "CONFIG_VIRTIO=m\nCONFIG_VIRTIO_PCI=m\nCONFIG_FUSE_FS=m\nCONFIG_VIRTIO_FS=m\n";
        assert_eq!(support("k", modular).unwrap(), Support::Modules);
        let err = support("k", "CONFIG_VIRTIO=y\nCONFIG_VIRTIO_PCI=y\n# CONFIG_FUSE_FS is not set\n").unwrap_err();
        assert!(err.to_string().contains("CONFIG_FUSE_FS"), "{err}");
        // A prefix of another option is not that option.
        assert!(support("k", "CONFIG_VIRTIO_FS_DAX=y\nCONFIG_VIRTIO=y\nCONFIG_VIRTIO_PCI=y\nCONFIG_FUSE_FS=y\n").is_err());
        // Overlay: loaded when a module, whatever virtio-fs is; required.
        assert_eq!(roots("k", &format!("{built_in}CONFIG_OVERLAY_FS=m\n")).unwrap(), ["overlay"]);
        assert_eq!(roots("k", &format!("{modular}CONFIG_OVERLAY_FS=m\n")).unwrap(), ["virtio_pci", "virtiofs", "overlay"]);
        assert!(roots("k", &format!("{built_in}CONFIG_OVERLAY_FS=y\n")).unwrap().is_empty());
        let err = roots("k", built_in).unwrap_err();
        assert!(err.to_string().contains("CONFIG_OVERLAY_FS"), "{err}");
    }

    #[test]
    fn modinfo_depends_are_read() {
        let ko = b"\x7fELF...\0license=GPL\0depends=fuse,virtio,virtio-ring\0name=virtiofs\0";
        assert_eq!(module_depends(ko), ["fuse", "virtio", "virtio_ring"]);
        assert!(module_depends(b"\0depends=\0name=fuse\0").is_empty());
        assert!(module_depends(b"no modinfo").is_empty());
    }

    #[test]
    fn modules_load_dependencies_first_once() {
        let deps: BTreeMap<String, Vec<String>> = [
            ("virtio_ring", vec![]),
            ("virtio", vec!["virtio_ring"]),
            ("virtio_pci_modern_dev", vec![]),
            ("virtio_pci", vec!["virtio_ring", "virtio_pci_modern_dev", "virtio"]),
            ("fuse", vec![]),
            ("virtiofs", vec!["fuse", "virtio", "virtio_ring"]),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
        .collect();
        assert_eq!(
            load_order(ROOT_MODULES, &deps).unwrap(),
            ["virtio_ring", "virtio_pci_modern_dev", "virtio", "virtio_pci", "fuse", "virtiofs"]
        );
        let mut missing = deps.clone();
        missing.remove("fuse");
        assert!(load_order(ROOT_MODULES, &missing).unwrap_err().to_string().contains("fuse"));
        assert_eq!(module_name("virtio_pci.ko.xz").as_deref(), Some("virtio_pci"));
        assert_eq!(module_name("virtio-pci.ko").as_deref(), Some("virtio_pci"));
        assert_eq!(module_name("modules.order"), None);
    }

    #[test]
    fn qemu_shares_memory_of_the_same_size_and_the_socket() {
        let a = qemu_args(Path::new("/t/v.sock"), 1024);
        assert!(a.windows(2).any(|w| w[0] == "-object" && w[1] == "memory-backend-memfd,id=mem,size=1024M,share=on"));
        assert!(a.windows(2).any(|w| w[0] == "-numa" && w[1] == "node,memdev=mem"));
        assert!(a.windows(2).any(|w| w[0] == "-chardev" && w[1] == "socket,id=hostfs,path=/t/v.sock"));
        assert!(a.windows(2).any(|w| w[0] == "-device" && w[1] == "vhost-user-fs-pci,chardev=hostfs,tag=hostroot"));
    }

    #[test]
    fn virtiofsd_serves_a_read_only_bind_of_root_in_its_own_mount_namespace() {
        let cmd = virtiofsd_command(Path::new("/t/root"), Path::new("/t/v.sock"));
        let args: Vec<String> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(cmd.get_program(), "unshare");
        assert!(args.starts_with(&["--mount".into(), "--propagation".into(), "private".into()]));
        let script = &args[args.iter().position(|a| a == "-c").unwrap() + 1];
        assert!(script.contains("mount --bind / \"$1\"") && script.contains("remount,bind,ro"), "{script}");
        assert!(!script.contains("rbind"), "only the root filesystem is shared");
        assert!(args.ends_with(&["/t/root".into(), VIRTIOFSD.into(), "/t/v.sock".into()]));
    }

    #[test]
    fn the_guest_mounts_the_host_read_only_and_binds_usr_lib_and_the_toolchain() {
        let s = guest_setup(&[("claude-code", PathBuf::from("/w/target/agents/claude-code-2.1.334/package"))]);
        assert!(s.contains("robind /host/w/target/agents/claude-code-2.1.334/package /opt/agents/claude-code\n"), "{s}");
        assert!(s.contains("mount -t virtiofs -o ro hostroot /host"));
        assert!(s.contains("robind /host/usr /usr"));
        assert!(s.contains("remount,bind,ro"));
        assert!(s.contains("robind /host/root/.rustup /home/worker/.rustup"));
        assert!(s.contains("robind /host/root/.cargo/bin /home/worker/.cargo/bin"));
        assert!(s.contains("worker:x:1000:1000:"));
        assert!(s.find("insmod").unwrap() < s.find("mount -t virtiofs").unwrap(), "modules before the mount");
    }
}
