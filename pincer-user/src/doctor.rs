//! `pincer doctor`: whether this host can run the Pincer daemon, with the command that fixes
//! each failure.
//!
//! Every path a check reads is in [`Host`], so tests point the checks at files they wrote.

use crate::daemon::client::Client;
use crate::daemon::config::{Config, ConfigError, DEFAULT_CONFIG};
use crate::daemon::protocol::{Call, Reply};
use std::fmt::Write as _;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Kernel options the daemon needs.
pub const KERNEL_OPTIONS: [&str; 5] = ["CONFIG_BPF_SYSCALL", "CONFIG_BPF_LSM", "CONFIG_DEBUG_INFO_BTF", "CONFIG_CGROUPS", "CONFIG_SECURITYFS"];

/// The files and directories the checks read.
#[derive(Debug, Clone)]
pub struct Host {
    /// The running kernel's release (`uname -r`).
    pub release: String,
    /// Kernel configuration files to try, in order (`/boot/config-<release>`).
    pub kernel_configs: Vec<PathBuf>,
    /// The active LSM list (`/sys/kernel/security/lsm`).
    pub lsm: PathBuf,
    /// The kernel's BTF (`/sys/kernel/btf/vmlinux`).
    pub btf: PathBuf,
    /// The mount table (`/proc/self/mounts`).
    pub mounts: PathBuf,
    /// Where cgroup v2 must be mounted (`/sys/fs/cgroup`).
    pub cgroup_root: PathBuf,
    /// The uid that must own the daemon's socket directory and state (0).
    pub daemon_uid: u32,
}

fn uname_release() -> String {
    // SAFETY: uname fills the struct it is given.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return String::new();
    }
    // SAFETY: uname NUL-terminates `release`.
    unsafe { std::ffi::CStr::from_ptr(u.release.as_ptr()) }.to_string_lossy().into_owned()
}

impl Host {
    /// This machine.
    pub fn system() -> Self {
        let release = uname_release();
        Host {
            kernel_configs: vec![PathBuf::from(format!("/boot/config-{release}"))],
            release,
            lsm: PathBuf::from(crate::kernel::LSM_LIST),
            btf: PathBuf::from("/sys/kernel/btf/vmlinux"),
            mounts: PathBuf::from("/proc/self/mounts"),
            cgroup_root: PathBuf::from("/sys/fs/cgroup"),
            daemon_uid: 0,
        }
    }
}

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Ready.
    Ok,
    /// Not a failure, but worth knowing (not checkable from here, or created later).
    Warn,
    /// The daemon cannot run (or cannot run safely) until it is fixed.
    Fail,
}

/// One check.
#[derive(Debug, Clone)]
pub struct Check {
    /// What was checked.
    pub name: &'static str,
    /// Its result.
    pub status: Status,
    /// What was found.
    pub detail: String,
    /// The command that fixes a failure.
    pub fix: Option<String>,
}

/// All checks.
#[derive(Debug, Clone)]
pub struct Report {
    /// The kernel release checked.
    pub release: String,
    /// The checks, in order.
    pub checks: Vec<Check>,
}

impl Report {
    /// Whether no check failed.
    pub fn ready(&self) -> bool {
        self.checks.iter().all(|c| c.status != Status::Fail)
    }

    /// The check named `name`.
    pub fn get(&self, name: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.name == name)
    }

    /// The report as text, one check per line, each failure followed by its fix.
    pub fn render(&self) -> String {
        let mut s = format!("pincer doctor: kernel {}\n", self.release);
        for c in &self.checks {
            let tag = match c.status {
                Status::Ok => "ok  ",
                Status::Warn => "warn",
                Status::Fail => "FAIL",
            };
            let mut detail = c.detail.lines();
            let _ = writeln!(s, "  {tag}  {}: {}", c.name, detail.next().unwrap_or(""));
            for more in detail {
                let _ = writeln!(s, "        {more}");
            }
            if let Some(f) = &c.fix {
                let _ = writeln!(s, "        fix: {f}");
            }
        }
        let failed = self.checks.iter().filter(|c| c.status == Status::Fail).count();
        if failed == 0 {
            s.push_str("the host is ready for the Pincer daemon\n");
        } else {
            let _ = writeln!(s, "the host is not ready: {failed} check(s) failed");
        }
        s
    }
}

fn check(name: &'static str, status: Status, detail: impl Into<String>, fix: Option<String>) -> Check {
    Check { name, status, detail: detail.into(), fix }
}

fn kernel_config(host: &Host) -> Check {
    const NAME: &str = "kernel config";
    let Some((path, text)) = host.kernel_configs.iter().find_map(|p| std::fs::read_to_string(p).ok().map(|t| (p, t))) else {
        let tried = host.kernel_configs.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
        return check(NAME, Status::Warn, format!("no readable kernel configuration ({tried}); the checks below test the running kernel directly"), None);
    };
    let missing: Vec<&str> = KERNEL_OPTIONS.iter().copied().filter(|o| !text.lines().any(|l| l.trim() == format!("{o}=y"))).collect();
    if missing.is_empty() {
        return check(NAME, Status::Ok, format!("{} (in {})", KERNEL_OPTIONS.map(|o| format!("{o}=y")).join(", "), path.display()), None);
    }
    check(
        NAME,
        Status::Fail,
        format!("{} lacks {}", path.display(), missing.iter().map(|o| format!("{o}=y")).collect::<Vec<_>>().join(", ")),
        Some("boot a kernel built with them: the distribution kernels of Debian 12 and Ubuntu 24.04 are (`apt-get install linux-image-amd64` on Debian, `apt-get install linux-image-generic` on Ubuntu, then reboot)".into()),
    )
}

fn lsm(host: &Host) -> Check {
    const NAME: &str = "bpf LSM";
    match std::fs::read_to_string(&host.lsm) {
        Err(e) => check(
            NAME,
            Status::Fail,
            format!("cannot read the active LSM list {}: {e}", host.lsm.display()),
            Some("mount securityfs: `mount -t securityfs securityfs /sys/kernel/security` (systemd does this at boot)".into()),
        ),
        Ok(found) if crate::kernel::lsm_list_has_bpf(&found).is_ok() => check(NAME, Status::Ok, format!("active LSMs: {}", found.trim()), None),
        Ok(found) => {
            let list = found.trim();
            let want = if list.is_empty() { "bpf".to_string() } else { format!("{list},bpf") };
            check(
                NAME,
                Status::Fail,
                format!("bpf is not in the active LSM list ({list})"),
                Some(format!(
                    "echo 'GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX lsm={want}\"' | sudo tee /etc/default/grub.d/pincer.cfg && sudo update-grub && sudo reboot"
                )),
            )
        }
    }
}

/// Mount points of file systems of type `fstype` in a mount table.
fn mounts_of(table: &str, fstype: &str) -> Vec<PathBuf> {
    table
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_, point, ty) = (f.next()?, f.next()?, f.next()?);
            (ty == fstype).then(|| PathBuf::from(point.replace("\\040", " ")))
        })
        .collect()
}

fn cgroup2(host: &Host, table: &str, cfg: &Config) -> Check {
    const NAME: &str = "cgroup v2";
    let points = mounts_of(table, "cgroup2");
    if points.iter().any(|p| p == &host.cgroup_root) && host.cgroup_root.join("cgroup.controllers").exists() {
        if !cfg.cgroup_parent.starts_with(&host.cgroup_root) {
            return check(NAME, Status::Fail, format!("cgroup_parent {} is not under {}", cfg.cgroup_parent.display(), host.cgroup_root.display()), Some(format!("set cgroup_parent to a directory under {} in the configuration", host.cgroup_root.display())));
        }
        return check(NAME, Status::Ok, format!("unified hierarchy at {}", host.cgroup_root.display()), None);
    }
    let found = if points.is_empty() { "no cgroup2 mount".to_string() } else { format!("cgroup2 only at {}", points.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")) };
    check(
        NAME,
        Status::Fail,
        format!("{} is not a cgroup v2 (unified) hierarchy: {found}", host.cgroup_root.display()),
        Some("boot with the unified hierarchy: echo 'GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX systemd.unified_cgroup_hierarchy=1\"' | sudo tee -a /etc/default/grub.d/pincer.cfg && sudo update-grub && sudo reboot".into()),
    )
}

fn bpffs(table: &str, cfg: &Config) -> Check {
    const NAME: &str = "bpffs";
    let points = mounts_of(table, "bpf");
    match points.iter().find(|p| cfg.pin_dir.starts_with(p)) {
        Some(p) => check(NAME, Status::Ok, format!("mounted at {} (pins in {})", p.display(), cfg.pin_dir.display()), None),
        None => {
            let at = cfg.pin_dir.parent().unwrap_or(Path::new("/sys/fs/bpf")).display().to_string();
            check(
                NAME,
                Status::Fail,
                format!("no bpf file system holds pin_dir {}", cfg.pin_dir.display()),
                Some(format!("sudo mount -t bpf bpf {at} (to keep it: echo 'bpf {at} bpf defaults 0 0' | sudo tee -a /etc/fstab)")),
            )
        }
    }
}

fn btf(host: &Host) -> Check {
    const NAME: &str = "BTF";
    use std::io::Read;
    let fix = Some("boot a kernel built with CONFIG_DEBUG_INFO_BTF=y (the Debian 12 and Ubuntu 24.04 kernels are)".to_string());
    let mut magic = [0u8; 2];
    match std::fs::File::open(&host.btf).and_then(|mut f| f.read_exact(&mut magic)) {
        // BTF starts with the magic 0xeb9f in the machine's byte order.
        Ok(()) if u16::from_ne_bytes(magic) == 0xeb9f => check(NAME, Status::Ok, format!("{} is readable", host.btf.display()), None),
        Ok(()) => check(NAME, Status::Fail, format!("{} is not BTF", host.btf.display()), fix),
        Err(e) => check(NAME, Status::Fail, format!("cannot read {}: {e}", host.btf.display()), fix),
    }
}

/// Which way a miss waits for its decision on this kernel: held (6.12's kfuncs and FUSE)
/// or denied at once and retried.
fn hold(host: &Host, cfg: &Config) -> Check {
    const NAME: &str = "hold";
    if !cfg.hold.enabled {
        return check(NAME, Status::Warn, "off ([hold] enabled = false): a miss is denied at once and the worker retries", None);
    }
    let btf = match aya::Btf::parse_file(&host.btf, aya::Endianness::default()) {
        Ok(b) => b,
        Err(e) => return check(NAME, Status::Warn, format!("cannot read {}: {e}; a miss is denied at once", host.btf.display()), None),
    };
    let missing = crate::kernel::kfunc::missing(&btf);
    if !missing.is_empty() {
        let need: Vec<String> = crate::kernel::kfunc::KFUNCS.iter().filter(|(k, _)| missing.contains(k)).map(|(k, v)| format!("{k} ({v})")).collect();
        return check(
            NAME,
            Status::Ok,
            format!("deny and retry: this kernel lacks {} for the held file_open; a miss is denied at once and the worker's retry succeeds after the grant", need.join(", ")),
            Some("run Linux 6.12 or later to hold a miss until it is decided".into()),
        );
    }
    if !Path::new("/dev/fuse").exists() {
        return check(NAME, Status::Warn, "deny and retry: /dev/fuse is missing (the hold's anchor runs from a FUSE mount)", Some("load the fuse module (modprobe fuse)".into()));
    }
    let attached = match crate::kernel::Enforcer::reuse(&cfg.pin_dir) {
        Ok(e) if e.holds_misses() => " (the pinned program holds)",
        Ok(_) => " (the pinned program is the plain one: restart the daemon after removing the pins to hold)",
        Err(_) => "",
    };
    check(NAME, Status::Ok, format!("held: a miss waits up to {} ms for its decision (sleepable file_open, bpf_get_file_xattr on the FUSE anchor at {}){attached}", cfg.hold.max_ms, cfg.hold.mountpoint.display()), None)
}

fn configuration(path: Option<&Path>) -> (Check, Config) {
    const NAME: &str = "configuration";
    let shown = path.map(Path::to_path_buf).or_else(|| std::env::var_os("PINCER_CONFIG").map(PathBuf::from)).unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG));
    match Config::load(path) {
        Ok(cfg) if shown.exists() => (check(NAME, Status::Ok, format!("{} parses", shown.display()), None), cfg),
        Ok(cfg) => (check(NAME, Status::Warn, format!("no {}: the defaults apply", shown.display()), None), cfg),
        Err(e) => {
            let fix = match &e {
                ConfigError::Read { .. } => format!("create it: sudo install -D -m 0644 etc/pincer.toml {}", shown.display()),
                _ => format!("edit {} (etc/pincer.toml documents every key and its default)", shown.display()),
            };
            let mut detail = e.to_string();
            if let Some(src) = std::error::Error::source(&e) {
                if !detail.contains(&src.to_string()) {
                    detail = format!("{detail}: {src}");
                }
            }
            (check(NAME, Status::Fail, format!("the checks below use the defaults; {detail}"), Some(fix)), Config::default())
        }
    }
}

async fn daemon(socket: &Path) -> Check {
    const NAME: &str = "daemon";
    let fix = Some("sudo systemctl enable --now pincer (the unit is etc/pincer.service), or run `sudo pincer daemon`".to_string());
    let call = async {
        let mut c = Client::connect(socket).await?;
        c.call(Call::Sessions).await
    };
    match tokio::time::timeout(Duration::from_secs(5), call).await {
        Ok(Ok(Reply::Sessions { sessions })) => check(NAME, Status::Ok, format!("answering at {} ({} open sessions of yours)", socket.display(), sessions.len()), None),
        Ok(Ok(Reply::Error { message, .. })) => check(NAME, Status::Warn, format!("answering at {}, but refused this caller: {message}", socket.display()), None),
        Ok(Ok(other)) => check(NAME, Status::Fail, format!("unexpected answer at {}: {other:?}", socket.display()), fix),
        Ok(Err(e)) => check(NAME, Status::Fail, format!("{e}"), fix),
        Err(_) => check(NAME, Status::Fail, format!("no answer at {} within 5 s", socket.display()), fix),
    }
}

/// A directory's problems: missing, not owned by `uid`, or writable by group or others.
fn unsafe_dir(dir: &Path, uid: u32) -> Option<String> {
    match std::fs::metadata(dir) {
        Err(e) => Some(format!("cannot examine {}: {e}", dir.display())),
        Ok(m) if m.uid() != uid => Some(format!("{} is owned by uid {}, not {uid}", dir.display(), m.uid())),
        Ok(m) if m.mode() & 0o022 != 0 => Some(format!("{} is writable by group or others (mode {:o})", dir.display(), m.mode() & 0o7777)),
        Ok(_) => None,
    }
}

fn socket_perms(socket: &Path, uid: u32) -> Check {
    const NAME: &str = "socket";
    let dir = socket.parent().unwrap_or(Path::new("/"));
    let fix_dir = format!("sudo chown {uid} {0} && sudo chmod 0755 {0}", dir.display());
    match std::fs::symlink_metadata(socket) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return check(NAME, Status::Warn, format!("{} does not exist (the daemon makes it when it starts)", socket.display()), None),
        Err(e) => return check(NAME, Status::Fail, format!("cannot examine {}: {e}", socket.display()), Some("run `sudo pincer doctor`".into())),
        Ok(m) if !m.file_type().is_socket() => return check(NAME, Status::Fail, format!("{} is not a socket", socket.display()), Some(format!("sudo rm {} && sudo systemctl restart pincer", socket.display()))),
        Ok(m) if m.uid() != uid => return check(NAME, Status::Fail, format!("{} is owned by uid {}, not the daemon's {uid}: another process may be posing as the daemon", socket.display(), m.uid()), Some("sudo systemctl restart pincer".into())),
        Ok(m) if m.mode() & 0o666 != 0o666 => return check(NAME, Status::Fail, format!("{} has mode {:o}: users cannot connect", socket.display(), m.mode() & 0o777), Some(format!("sudo chmod 0666 {}", socket.display()))),
        Ok(_) => {}
    }
    match unsafe_dir(dir, uid) {
        Some(problem) => check(NAME, Status::Fail, format!("{problem}: the socket could be replaced"), Some(fix_dir)),
        None => check(NAME, Status::Ok, format!("{} (mode 0666 in a directory only uid {uid} can write)", socket.display()), None),
    }
}

fn state_perms(cfg: &Config, uid: u32) -> Check {
    const NAME: &str = "state";
    let dir = &cfg.state_dir;
    if !dir.exists() {
        return check(NAME, Status::Warn, format!("{} does not exist yet (the daemon creates it)", dir.display()), None);
    }
    if let Some(problem) = unsafe_dir(dir, uid) {
        return check(NAME, Status::Fail, problem, Some(format!("sudo chown {uid}:0 {0} && sudo chmod 0700 {0}", dir.display())));
    }
    if let Some(log_dir) = cfg.audit_log.parent().filter(|d| d.exists()) {
        if let Some(problem) = unsafe_dir(log_dir, uid) {
            return check(NAME, Status::Fail, format!("audit log directory: {problem}"), Some(format!("sudo chown {uid}:0 {0} && sudo chmod 0755 {0}", log_dir.display())));
        }
    }
    let key = dir.join("prf.key");
    match std::fs::symlink_metadata(&key) {
        Ok(m) if m.uid() != uid || m.mode() & 0o077 != 0 || !m.file_type().is_file() => check(
            NAME,
            Status::Fail,
            format!("the sanitizer key {} must be a file of uid {uid} with mode 0600 (found uid {}, mode {:o})", key.display(), m.uid(), m.mode() & 0o7777),
            Some(format!("sudo chown {uid}:0 {0} && sudo chmod 0600 {0}", key.display())),
        ),
        Ok(_) => check(NAME, Status::Ok, format!("{} and its key are private to uid {uid}", dir.display()), None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => check(NAME, Status::Ok, format!("{} is private to uid {uid} (the key is made at the first start)", dir.display()), None),
        Err(e) => check(NAME, Status::Warn, format!("cannot examine {} as this user ({e}); run `sudo pincer doctor`", key.display()), None),
    }
}

/// The trusted store: for the postgres backend, that the password file is root-only, the
/// database answers, its schema is this build's, and the daemon's role may create the
/// per-user roles that row-level security reads with (without being a superuser).
pub fn store_checks(cfg: &Config) -> Vec<Check> {
    const NAME: &str = "store";
    let spec = cfg.store_spec();
    let crate::store::StoreSpec::Postgres(settings) = &spec else {
        return vec![check(NAME, Status::Ok, format!("{} (one host; `[store] backend = \"postgres\"` shares it across a fleet)", spec.describe()), None)];
    };
    if let Some(f) = &settings.password_file {
        if let Err(e) = crate::store::pg::read_password_file(f) {
            return vec![check(NAME, Status::Fail, e.to_string(), Some(format!("sudo chown 0:0 {0} && sudo chmod 0600 {0}", f.display())))];
        }
    }
    let store = match crate::store::Store::connect_postgres(settings.clone()) {
        Ok(s) => s,
        Err(e) => {
            return vec![check(NAME, Status::Fail, crate::daemon::error::chain(&e), Some("check store.url, store.tls and the password file; is the server up and reachable?".into()))];
        }
    };
    let mut out = vec![check(NAME, Status::Ok, format!("{} answers", spec.describe()), None)];
    out.push(match store.schema_version() {
        Ok(v) if v == store.known_version() => check("store schema", Status::Ok, format!("version {v}, this build's"), None),
        Ok(v) if v < store.known_version() => {
            check("store schema", Status::Warn, format!("version {v}, this build brings it to {} at start", store.known_version()), Some("sudo pincer store migrate".into()))
        }
        Ok(v) => check("store schema", Status::Fail, format!("version {v} is newer than this build ({})", store.known_version()), Some("upgrade pincer on this host".into())),
        Err(e) => check("store schema", Status::Fail, crate::daemon::error::chain(&e), Some("sudo pincer store migrate".into())),
    });
    out.push(match store.role_rights() {
        Ok((_, true)) => check(
            "store permissions",
            Status::Warn,
            "the daemon logs in as a superuser; a role with CREATEROLE that owns the database is enough".to_string(),
            Some("CREATE ROLE pincer LOGIN CREATEROLE; ALTER DATABASE ... OWNER TO pincer".into()),
        ),
        Ok((true, false)) => check("store permissions", Status::Ok, "the daemon's role may create the per-user roles (CREATEROLE) and is no superuser".to_string(), None),
        Ok((false, false)) => check(
            "store permissions",
            Status::Fail,
            "the daemon's role cannot create the per-user roles users read their rows with".to_string(),
            Some("ALTER ROLE pincer CREATEROLE".into()),
        ),
        Err(e) => check("store permissions", Status::Fail, crate::daemon::error::chain(&e), None),
    });
    out
}

/// Runs every check. `config` is the configuration file to check (default: `PINCER_CONFIG`
/// or `/etc/pincer/pincer.toml`); `socket` overrides the configuration's socket.
pub async fn run(host: &Host, config: Option<&Path>, socket: Option<PathBuf>) -> Report {
    let table = std::fs::read_to_string(&host.mounts).unwrap_or_default();
    let (cfg_check, cfg) = configuration(config);
    let socket = socket.unwrap_or_else(|| cfg.socket.clone());
    let checks = vec![
        kernel_config(host),
        lsm(host),
        btf(host),
        hold(host, &cfg),
        cgroup2(host, &table, &cfg),
        bpffs(&table, &cfg),
        cfg_check,
        daemon(&socket).await,
        socket_perms(&socket, host.daemon_uid),
        state_perms(&cfg, host.daemon_uid),
    ];
    let mut checks = checks;
    checks.extend(store_checks(&cfg));
    Report { release: host.release.clone(), checks }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_table_is_read_by_type() {
        let t = "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\nbpf /sys/fs/bpf bpf rw 0 0\nnone /mnt/a\\040b bpf rw 0 0\n";
        assert_eq!(mounts_of(t, "bpf"), [PathBuf::from("/sys/fs/bpf"), PathBuf::from("/mnt/a b")]);
        assert_eq!(mounts_of(t, "cgroup2"), [PathBuf::from("/sys/fs/cgroup")]);
    }
}
