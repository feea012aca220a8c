//! Debian kernels for the test VM: resolved with `apt-cache`, fetched with
//! `apt-get download`, cached under `target/vm/kernels/`, and unpacked with `dpkg-deb`.
//!
//! Package names move with Debian's security updates, so they are resolved at run time
//! from a meta package (`linux-image-amd64` depends on the current 6.1 image). A `.deb`
//! already in the cache is not fetched again; `manifest.json` records what was resolved,
//! so an offline run can reuse the last kernel it fetched.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Errors while resolving, fetching or unpacking a kernel.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// The `--kernel` value named no known kernel.
    #[error("unknown kernel {0:?}: expected one of 6.1, 6.12")]
    Unknown(String),
    /// Running a system tool failed to start.
    #[error("could not run `{command}`")]
    Spawn {
        /// The command line.
        command: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A system tool exited with an error.
    #[error("`{command}` failed: {stderr}")]
    Tool {
        /// The command line.
        command: String,
        /// What it printed on stderr.
        stderr: String,
    },
    /// Neither the meta package nor a search found an image package.
    #[error(
        "no Debian package found for the {label} kernel (tried `apt-cache depends {meta}` and \
         `apt-cache search {pattern}`; run `apt-get update` as root)"
    )]
    Unresolved {
        /// The kernel's label.
        label: String,
        /// The meta package tried.
        meta: String,
        /// The search pattern tried.
        pattern: String,
    },
    /// The package did not contain what the VM needs.
    #[error("{package}: no {what} in the package")]
    Missing {
        /// The package.
        package: String,
        /// What was missing (`boot/vmlinuz-*`, ...).
        what: &'static str,
    },
    /// The kernel's config lacks an option the LSM tests need.
    #[error("{package}: {option} is not set in its config; the BPF LSM tests cannot run on it")]
    Config {
        /// The package.
        package: String,
        /// The missing option.
        option: &'static str,
    },
    /// A file operation in the cache failed.
    #[error("{what} {path}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The manifest could not be written or read.
    #[error("manifest {path}")]
    Manifest {
        /// The manifest path.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
}

/// A kernel the VM tests run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelSpec {
    /// Short name used on the command line and in reports (`6.1`, `6.12`).
    pub label: &'static str,
    /// The meta package whose dependency is the current image package.
    pub meta: &'static str,
    /// `apt-cache search --names-only` pattern used when the meta package is unknown.
    pub pattern: &'static str,
}

/// The kernels `cargo xtask vm-test` runs on by default.
pub const KERNELS: &[KernelSpec] = &[
    KernelSpec {
        label: "6.1",
        meta: "linux-image-amd64",
        pattern: r"^linux-image-6\.1\.0-[0-9]+-amd64$",
    },
    KernelSpec {
        label: "6.12",
        meta: "linux-image-6.12-cloud-amd64",
        pattern: r"^linux-image-6\.12\.[0-9]+\+deb12-cloud-amd64$",
    },
];

/// Finds the spec for a `--kernel` value.
pub fn spec(label: &str) -> Result<KernelSpec, KernelError> {
    KERNELS
        .iter()
        .copied()
        .find(|k| k.label == label)
        .ok_or_else(|| KernelError::Unknown(label.to_owned()))
}

/// A kernel ready to boot, as recorded in the manifest.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Kernel {
    /// The spec's label (`6.1`).
    pub label: String,
    /// The Debian package (`linux-image-6.1.0-57-amd64`).
    pub package: String,
    /// The kernel release (`6.1.0-57-amd64`), from the vmlinuz name.
    pub release: String,
    /// The cached `.deb`.
    pub deb: PathBuf,
    /// The unpacked `vmlinuz`.
    pub vmlinuz: PathBuf,
    /// The unpacked kernel config.
    pub config: PathBuf,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Manifest {
    kernels: Vec<Kernel>,
}

fn run(cmd: &mut Command) -> Result<String, KernelError> {
    let command = format!("{cmd:?}").replace('"', "");
    let out = cmd.output().map_err(|source| KernelError::Spawn { command: command.clone(), source })?;
    if !out.status.success() {
        return Err(KernelError::Tool {
            command,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Parses `apt-cache depends` output: the first `Depends:` on a `linux-image-` package.
pub fn parse_depends(out: &str) -> Option<String> {
    out.lines()
        .filter_map(|l| l.trim().strip_prefix("Depends:"))
        .map(|p| p.trim().trim_matches(|c| c == '<' || c == '>'))
        .find(|p| p.starts_with("linux-image-"))
        .map(str::to_owned)
}

fn version_gt(a: &str, b: &str) -> bool {
    Command::new("dpkg")
        .args(["--compare-versions", a, "gt", b])
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Resolves the current image package of `spec` from the local apt lists.
fn resolve(spec: &KernelSpec) -> Result<String, KernelError> {
    if let Ok(out) = run(Command::new("apt-cache").args(["depends", "--important", spec.meta])) {
        if let Some(pkg) = parse_depends(&out) {
            return Ok(pkg);
        }
    }
    let out = run(Command::new("apt-cache").args(["search", "--names-only", spec.pattern]))?;
    let mut best: Option<&str> = None;
    for name in out.lines().filter_map(|l| l.split_whitespace().next()) {
        let newer = match best {
            None => true,
            Some(b) => version_gt(name.trim_start_matches("linux-image-"), b.trim_start_matches("linux-image-")),
        };
        if newer {
            best = Some(name);
        }
    }
    best.map(str::to_owned).ok_or_else(|| KernelError::Unresolved {
        label: spec.label.to_owned(),
        meta: spec.meta.to_owned(),
        pattern: spec.pattern.to_owned(),
    })
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> KernelError + 'a {
    move |source| KernelError::Io { what, path: path.to_owned(), source }
}

/// The cached `.deb` of `package`, if any.
fn cached_deb(dir: &Path, package: &str) -> Option<PathBuf> {
    let prefix = format!("{package}_");
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".deb"))
        })
}

/// Fetches `package` into `dir` with `apt-get download` (through a private temporary
/// directory, so a concurrent run never sees a partial file).
fn download(dir: &Path, package: &str) -> Result<PathBuf, KernelError> {
    let tmp = dir.join(format!(".download-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).map_err(io("creating", &tmp))?;
    let result = run(Command::new("apt-get")
        .args(["download", "-q", "-o", "APT::Sandbox::User=root", package])
        .current_dir(&tmp))
    .and_then(|_| {
        let deb = cached_deb(&tmp, package)
            .ok_or(KernelError::Missing { package: package.to_owned(), what: ".deb after apt-get download" })?;
        let dest = dir.join(deb.file_name().expect("a file found by read_dir has a name"));
        std::fs::rename(&deb, &dest).map_err(io("moving the .deb to", &dest))?;
        Ok(dest)
    });
    let _ = std::fs::remove_dir_all(&tmp);
    result
}

/// Unpacks `boot/` of `deb` into `dir/<package>/` and returns (vmlinuz, config).
fn unpack(dir: &Path, package: &str, deb: &Path) -> Result<(PathBuf, PathBuf), KernelError> {
    let dest = dir.join(package);
    if !dest.join("boot").is_dir() {
        let tmp = dir.join(format!(".unpack-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).map_err(io("creating", &tmp))?;
        // Only boot/ is needed; the modules are not (the initramfs loads none).
        let script = "dpkg-deb --fsys-tarfile \"$1\" | tar -x -C \"$2\" --wildcards './boot/*'";
        run(Command::new("sh").args(["-c", script, "sh"]).arg(deb).arg(&tmp))?;
        if std::fs::rename(&tmp, &dest).is_err() {
            // Another run unpacked it first.
            let _ = std::fs::remove_dir_all(&tmp);
        }
    }
    let boot = dest.join("boot");
    let find = |prefix: &str| -> Option<PathBuf> {
        std::fs::read_dir(&boot)
            .ok()?
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .find(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(prefix)))
    };
    let vmlinuz = find("vmlinuz-")
        .ok_or(KernelError::Missing { package: package.to_owned(), what: "boot/vmlinuz-*" })?;
    let config = find("config-")
        .ok_or(KernelError::Missing { package: package.to_owned(), what: "boot/config-*" })?;
    Ok((vmlinuz, config))
}

/// Options a kernel config must set to `y` for the tests.
pub const REQUIRED_CONFIG: &[&str] = &["CONFIG_BPF_LSM", "CONFIG_DEBUG_INFO_BTF", "CONFIG_BPF_SYSCALL"];

/// Checks that `config` (a kernel `.config`) sets every [`REQUIRED_CONFIG`] option to `y`.
pub fn check_config(package: &str, config: &str) -> Result<(), KernelError> {
    for option in REQUIRED_CONFIG {
        let line = format!("{option}=y");
        if !config.lines().any(|l| l.trim() == line) {
            return Err(KernelError::Config { package: package.to_owned(), option });
        }
    }
    Ok(())
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Fetches kernels into a cache directory, running `apt-get update` at most once.
pub struct Fetcher {
    dir: PathBuf,
    updated: bool,
}

impl Fetcher {
    /// A fetcher caching under `dir` (created if missing).
    pub fn new(dir: PathBuf) -> Result<Self, KernelError> {
        std::fs::create_dir_all(&dir).map_err(io("creating", &dir))?;
        Ok(Self { dir, updated: false })
    }

    fn manifest_path(&self) -> PathBuf {
        self.dir.join("manifest.json")
    }

    fn read_manifest(&self) -> Manifest {
        std::fs::read(self.manifest_path())
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    fn write_manifest(&self, kernel: &Kernel) -> Result<(), KernelError> {
        let mut m = self.read_manifest();
        m.kernels.retain(|k| k.label != kernel.label);
        m.kernels.push(kernel.clone());
        m.kernels.sort_by(|a, b| a.label.cmp(&b.label));
        let path = self.manifest_path();
        let tmp = self.dir.join(format!(".manifest-{}", std::process::id()));
        let text = serde_json::to_vec_pretty(&m).map_err(|source| KernelError::Manifest { path: path.clone(), source })?;
        std::fs::write(&tmp, text).map_err(io("writing", &tmp))?;
        std::fs::rename(&tmp, &path).map_err(io("writing", &path))
    }

    fn update(&mut self) -> Result<bool, KernelError> {
        if self.updated || !is_root() {
            return Ok(false);
        }
        eprintln!("xtask: apt-get update");
        run(Command::new("apt-get").args(["update", "-qq"]))?;
        self.updated = true;
        Ok(true)
    }

    fn resolve_and_fetch(&mut self, spec: &KernelSpec) -> Result<(String, PathBuf), KernelError> {
        let package = match resolve(spec) {
            Ok(p) => p,
            Err(e) => {
                if !self.update()? {
                    return Err(e);
                }
                resolve(spec)?
            }
        };
        if let Some(deb) = cached_deb(&self.dir, &package) {
            return Ok((package, deb));
        }
        eprintln!("xtask: apt-get download {package}");
        match download(&self.dir, &package) {
            Ok(deb) => Ok((package, deb)),
            Err(e) => {
                // Stale lists name a version the archive no longer has: refresh once.
                if !self.update()? {
                    return Err(e);
                }
                let package = resolve(spec)?;
                match cached_deb(&self.dir, &package) {
                    Some(deb) => Ok((package, deb)),
                    None => Ok((package.clone(), download(&self.dir, &package)?)),
                }
            }
        }
    }

    /// Returns the kernel for `spec`, fetching and unpacking it if needed. If apt cannot
    /// resolve or fetch it, the last kernel recorded in the manifest is used when its files
    /// are still there.
    pub fn get(&mut self, spec: &KernelSpec) -> Result<Kernel, KernelError> {
        let (package, deb) = match self.resolve_and_fetch(spec) {
            Ok(found) => found,
            Err(e) => {
                let cached = self.read_manifest().kernels.into_iter().find(|k| {
                    k.label == spec.label && k.vmlinuz.is_file() && k.config.is_file()
                });
                match cached {
                    Some(k) => {
                        eprintln!("xtask: {e}; using the cached {} ({})", k.package, k.label);
                        return Ok(k);
                    }
                    None => return Err(e),
                }
            }
        };
        let (vmlinuz, config) = unpack(&self.dir, &package, &deb)?;
        let text = std::fs::read_to_string(&config).map_err(io("reading", &config))?;
        check_config(&package, &text)?;
        let release = vmlinuz
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix("vmlinuz-"))
            .unwrap_or(&package)
            .to_owned();
        let kernel = Kernel { label: spec.label.to_owned(), package, release, deb, vmlinuz, config };
        self.write_manifest(&kernel)?;
        Ok(kernel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depends_output_gives_the_image_package() {
        let out = "linux-image-amd64\n  Depends: linux-image-6.1.0-57-amd64\n";
        assert_eq!(parse_depends(out).as_deref(), Some("linux-image-6.1.0-57-amd64"));
        let out = "linux-image-6.12-cloud-amd64\n  Depends: <linux-image-6.12.117+deb12-cloud-amd64>\n";
        assert_eq!(parse_depends(out).as_deref(), Some("linux-image-6.12.117+deb12-cloud-amd64"));
        assert_eq!(parse_depends("x\n  Depends: libc6\n"), None);
    }

    #[test]
    fn config_check_names_the_missing_option() {
        let good = "CONFIG_BPF_SYSCALL=y\nCONFIG_BPF_LSM=y\nCONFIG_DEBUG_INFO_BTF=y\n";
        check_config("k", good).unwrap();
        let bad = "CONFIG_BPF_SYSCALL=y\n# CONFIG_BPF_LSM is not set\nCONFIG_DEBUG_INFO_BTF=y\n";
        let err = check_config("k", bad).unwrap_err();
        assert!(matches!(err, KernelError::Config { option: "CONFIG_BPF_LSM", .. }), "{err}");
    }

    #[test]
    fn specs_are_found_by_label() {
        assert_eq!(spec("6.12").unwrap().meta, "linux-image-6.12-cloud-amd64");
        assert!(matches!(spec("5.10"), Err(KernelError::Unknown(_))));
    }
}
