//! The test VM's initramfs: busybox-static, the programs to run with the shared libraries
//! `ldd` lists for them, and an `/init` script that prepares the system like a real host
//! (proc, sysfs, devtmpfs, bpffs, cgroup2, securityfs, tmpfs) and runs each program,
//! printing the markers of [`super::console`] on the serial console.

use super::console::{BEGIN, DONE, KERNEL, RESULT, SETUP_FAILED};
use super::cpio::{Archive, CpioError};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Errors while building the initramfs.
#[derive(Debug, thiserror::Error)]
pub enum InitramfsError {
    /// A program name would not be safe in the init script or as a file name.
    #[error("program name {0:?} must be non-empty ASCII letters, digits, `-` or `_`")]
    BadName(String),
    /// Two programs have the same name.
    #[error("two programs are named {0:?}")]
    DuplicateName(String),
    /// busybox is missing or not statically linked.
    #[error("{path} is not a static busybox; install busybox-static (`cargo xtask deps`)")]
    Busybox {
        /// Where busybox was looked for.
        path: PathBuf,
    },
    /// `ldd` could not be run or did not understand the program.
    #[error("ldd {path}: {reason}")]
    Ldd {
        /// The program.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// A shared library a program needs was not found on the host.
    #[error("{program} needs {library}, which ldd could not find")]
    LibraryNotFound {
        /// The program.
        program: PathBuf,
        /// The library's soname.
        library: String,
    },
    /// A folder to pack could not be read.
    #[error("reading {path}")]
    Read {
        /// The folder.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Building the archive failed.
    #[error(transparent)]
    Archive(#[from] CpioError),
    /// Writing the archive file failed.
    #[error("writing {path}")]
    Write {
        /// The output path.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// A program for the VM to run, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    /// Name in markers and reports; the binary is stored as `/pincer/<name>`.
    pub name: String,
    /// The executable on the host.
    pub host_path: PathBuf,
    /// Arguments (for test binaries `--test-threads=1`).
    pub args: Vec<String>,
}

/// Where `cargo xtask vm-test` puts the shipped corpus in the VM (also exported to the
/// programs as `PINCER_CORPUS`).
pub const VM_CORPUS: &str = "/corpus";

/// The kernel command-line parameter that limits the init to some programs
/// (`pincer.only=enforce_stale,vm_smoke`).
pub const ONLY_PARAM: &str = "pincer.only";

/// Kernel command-line prefix of an environment variable the init exports to every
/// program (`pincer.env.PINCER_AGENT_BASELINE=1`).
pub const ENV_PARAM: &str = "pincer.env.";

/// Where the static busybox is installed by Debian's `busybox-static`.
pub const BUSYBOX: &str = "/bin/busybox";

/// Parses `ldd` output into the absolute paths of the libraries and the loader.
pub fn parse_ldd(program: &Path, out: &str) -> Result<Vec<String>, InitramfsError> {
    let mut libs = Vec::new();
    for line in out.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.contains("statically linked") {
            continue;
        }
        if let Some((soname, rest)) = line.split_once("=>") {
            let rest = rest.trim();
            if rest.starts_with("not found") {
                return Err(InitramfsError::LibraryNotFound {
                    program: program.to_owned(),
                    library: soname.trim().to_owned(),
                });
            }
            match rest.split_whitespace().next() {
                Some(path) if path.starts_with('/') => libs.push(path.to_owned()),
                // `linux-vdso.so.1 =>  (0x...)` on some systems: provided by the kernel.
                _ => {}
            }
        } else if let Some(path) = line.split_whitespace().next().filter(|p| p.starts_with('/')) {
            libs.push(path.to_owned()); // the dynamic loader
        }
        // Anything else (linux-vdso.so.1) is provided by the kernel.
    }
    Ok(libs)
}

/// The shared libraries (and loader) `program` needs, from `ldd`; empty if static.
pub fn shared_libraries(program: &Path) -> Result<Vec<String>, InitramfsError> {
    let out = Command::new("ldd").arg(program).output().map_err(|e| InitramfsError::Ldd {
        path: program.to_owned(),
        reason: e.to_string(),
    })?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        if stdout.contains("not a dynamic executable") || stderr.contains("not a dynamic executable") {
            return Ok(Vec::new());
        }
        return Err(InitramfsError::Ldd { path: program.to_owned(), reason: stderr.trim().to_owned() });
    }
    parse_ldd(program, &stdout)
}

fn check_name(name: &str) -> Result<(), InitramfsError> {
    let ok = !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(InitramfsError::BadName(name.to_owned()))
    }
}

/// Quotes `s` for a POSIX shell.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The `/init` script that runs `programs` in order and powers off.
pub fn init_script(programs: &[Program]) -> String {
    let mut s = String::from(
        r#"#!/bin/sh
# Init of the Pincer test VM: prepare the system as a host would, run each program,
# report on the serial console, power off.
export PATH=/bin:/sbin:/usr/bin:/usr/sbin HOME=/root TMPDIR=/tmp RUST_BACKTRACE=1 PINCER_VM=1 PINCER_CORPUS=VM_CORPUS_PATH
fail() {
    echo
    echo "SETUP_FAILED $*"
    poweroff -f
    sleep 60
}
mnt() { # type source target options
    mkdir -p "$3" && mount -t "$1" -o "$4" "$2" "$3" || fail "mount -t $1 $3"
}
mnt proc proc /proc nosuid,nodev,noexec
mnt sysfs sysfs /sys nosuid,nodev,noexec
mnt devtmpfs devtmpfs /dev mode=0755,nosuid
mnt securityfs securityfs /sys/kernel/security nosuid,nodev,noexec
mnt bpf bpf /sys/fs/bpf mode=0700
mnt cgroup2 cgroup2 /sys/fs/cgroup nosuid,nodev,noexec
# Helper binaries are stored at their host paths, which may lie under /tmp or /run (a
# checkout in /tmp): move them aside before the tmpfs mounts hide them, then back.
for d in /tmp /run; do
    if [ -n "$(ls -A "$d" 2>/dev/null)" ]; then
        mkdir -p /.initramfs && mv "$d" "/.initramfs$d" && mkdir "$d" || fail "moving $d aside"
    fi
done
mnt tmpfs tmpfs /tmp mode=1777,nosuid,nodev
mnt tmpfs tmpfs /run mode=0755,nosuid,nodev
for d in /tmp /run; do
    if [ -d "/.initramfs$d" ]; then
        cp -a "/.initramfs$d/." "$d/" && rm -rf "/.initramfs$d" || fail "restoring $d"
    fi
done
mnt devpts devpts /dev/pts gid=5,mode=620
mnt tmpfs tmpfs /dev/shm mode=1777,nosuid,nodev
ln -sf /proc/self/fd /dev/fd
hostname pincer-vm
for f in SETUP_DIR/*.sh; do
    [ -e "$f" ] && . "$f"
done
echo
echo "KERNEL_MARKER $(uname -r) lsm=$(cat /sys/kernel/security/lsm)"
cd /
"#,
    )
    .replace("SETUP_FAILED", SETUP_FAILED)
    .replace("KERNEL_MARKER", KERNEL)
    .replace("VM_CORPUS_PATH", VM_CORPUS)
    .replace("SETUP_DIR", super::hostfs::GUEST_SETUP_DIR);
    // `pincer.only=a,b` on the kernel command line runs just those programs (one initramfs
    // serves several VMs: e.g. the walk-cache tests again on two vCPUs).
    s.push_str(&format!(
        "only=\nfor w in $(cat /proc/cmdline); do case \"$w\" in {ONLY_PARAM}=*) only=\",${{w#{ONLY_PARAM}=}},\";; esac; done\n\
         wanted() {{ [ -z \"$only\" ] || case \"$only\" in *,\"$1\",*) true;; *) false;; esac; }}\n\
         for w in $(cat /proc/cmdline); do case \"$w\" in {ENV_PARAM}*=*) export \"${{w#{ENV_PARAM}}}\";; esac; done\n"
    ));
    for p in programs {
        let args: Vec<String> = p.args.iter().map(|a| shell_quote(a)).collect();
        s.push_str(&format!(
            "if wanted {name}; then\necho\necho \"{BEGIN} {name}\"\n/pincer/{name} {args}\nrc=$?\necho\necho \"{RESULT} {name} $rc\"\nfi\n",
            name = p.name,
            args = args.join(" "),
        ));
    }
    s.push_str(&format!("sync\necho\necho \"{DONE}\"\npoweroff -f\nsleep 60\n"));
    s
}

/// Builds the initramfs for `programs` and writes it (uncompressed newc) to `out`.
/// Each of `extra` (helper executables the programs start) is stored at its host path, so
/// a test can run `env!("CARGO_BIN_EXE_<name>")` in the VM. Returns the archive's size.
pub fn build(
    programs: &[Program],
    extra: &[PathBuf],
    busybox: &Path,
    out: &Path,
) -> Result<u64, InitramfsError> {
    let mut seen = std::collections::HashSet::new();
    for p in programs {
        check_name(&p.name)?;
        if !seen.insert(p.name.as_str()) {
            return Err(InitramfsError::DuplicateName(p.name.clone()));
        }
    }
    if !busybox.is_file() || !shared_libraries(busybox).map(|l| l.is_empty()).unwrap_or(false) {
        return Err(InitramfsError::Busybox { path: busybox.to_owned() });
    }

    let mut a = Archive::new();
    for dir in ["proc", "sys", "dev", "run", "root", "etc", "pincer", "usr/bin", "usr/sbin", "sbin", "bin"] {
        a.dir(dir, 0o755)?;
    }
    a.dir("tmp", 0o1777)?;
    a.char_device("dev/console", 5, 1, 0o600)?;
    a.char_device("dev/null", 1, 3, 0o666)?;
    a.host_file("bin/busybox", busybox, 0o755)?;
    let applets = Command::new(busybox).arg("--list-full").output().map_err(|e| {
        InitramfsError::Ldd { path: busybox.to_owned(), reason: format!("--list-full: {e}") }
    })?;
    for applet in String::from_utf8_lossy(&applets.stdout).lines().map(str::trim) {
        if !applet.is_empty() && applet != "bin/busybox" && !a.contains(applet) {
            a.symlink(applet, "/bin/busybox")?;
        }
    }
    if !a.contains("bin/sh") {
        return Err(InitramfsError::Busybox { path: busybox.to_owned() });
    }
    a.file("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n".to_vec(), 0o644)?;
    a.file("etc/group", b"root:x:0:\nnogroup:x:65534:\n".to_vec(), 0o644)?;

    for p in programs {
        a.host_file(&format!("pincer/{}", p.name), &p.host_path, 0o755)?;
        for lib in shared_libraries(&p.host_path)? {
            if !a.contains(&lib) {
                a.host_file(&lib, Path::new(&lib), 0o755)?;
            }
        }
    }
    for path in extra {
        let text = path.to_string_lossy();
        if !a.contains(&text) {
            a.host_file(&text, path, 0o755)?;
        }
        for lib in shared_libraries(path)? {
            if !a.contains(&lib) {
                a.host_file(&lib, Path::new(&lib), 0o755)?;
            }
        }
    }
    a.file("init", init_script(programs).into_bytes(), 0o755)?;

    let file = std::fs::File::create(out)
        .map_err(|source| InitramfsError::Write { path: out.to_owned(), source })?;
    a.write_to(std::io::BufWriter::new(file))?;
    let len = std::fs::metadata(out)
        .map_err(|source| InitramfsError::Write { path: out.to_owned(), source })?
        .len();
    Ok(len)
}

/// Adds the directory tree `host` (folders and regular files) to `a` under `vm_path`.
pub fn add_tree(a: &mut Archive, host: &Path, vm_path: &str) -> Result<(), InitramfsError> {
    a.dir(vm_path, 0o755)?;
    let read = |source| InitramfsError::Read { path: host.to_owned(), source };
    for e in std::fs::read_dir(host).map_err(read)? {
        let e = e.map_err(read)?;
        let p = format!("{vm_path}/{}", e.file_name().to_string_lossy());
        if e.file_type().map_err(read)?.is_dir() {
            add_tree(a, &e.path(), &p)?;
        } else {
            a.host_file(&p, &e.path(), 0o644)?;
        }
    }
    Ok(())
}

/// Appends `extra` as a second archive to the initramfs at `out` (the kernel unpacks both).
pub fn append(out: &Path, extra: &Archive) -> Result<(), InitramfsError> {
    use std::io::Write;
    let write = |source| InitramfsError::Write { path: out.to_owned(), source };
    let mut buf = Vec::new();
    extra.write_to(&mut buf)?;
    let mut file = std::fs::OpenOptions::new().append(true).open(out).map_err(write)?;
    file.write_all(&buf).map_err(write)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output_lists_libraries_and_loader() {
        let out = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                   \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f36)\n\
                   \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f36)\n\
                   \t/lib64/ld-linux-x86-64.so.2 (0x00007f36)\n";
        assert_eq!(
            parse_ldd(Path::new("t"), out).unwrap(),
            [
                "/lib/x86_64-linux-gnu/libgcc_s.so.1",
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/lib64/ld-linux-x86-64.so.2"
            ]
        );
        assert!(parse_ldd(Path::new("t"), "\tstatically linked\n").unwrap().is_empty());
    }

    #[test]
    fn a_missing_library_is_an_error_naming_it() {
        let out = "\tlibbpf.so.1 => not found\n";
        let err = parse_ldd(Path::new("t"), out).unwrap_err();
        assert!(err.to_string().contains("libbpf.so.1"), "{err}");
    }

    #[test]
    fn the_host_ldd_finds_libc_for_a_dynamic_program() {
        let libs = shared_libraries(Path::new("/bin/ls")).unwrap();
        assert!(libs.iter().any(|l| l.ends_with("/libc.so.6")), "{libs:?}");
    }

    #[test]
    fn init_runs_programs_in_order_with_markers_and_quoted_args() {
        let programs = vec![
            Program { name: "a".into(), host_path: "/x".into(), args: vec!["--test-threads=1".into()] },
            Program { name: "b-2".into(), host_path: "/y".into(), args: vec!["it's".into()] },
        ];
        let s = init_script(&programs);
        let a = s.find("PINCER-VM-BEGIN a\"").unwrap();
        let b = s.find("PINCER-VM-BEGIN b-2\"").unwrap();
        let done = s.find("PINCER-VM-DONE").unwrap();
        assert!(a < b && b < done);
        assert!(s.contains("/pincer/a '--test-threads=1'\n"));
        assert!(s.contains(r"/pincer/b-2 'it'\''s'"));
        assert!(s.contains("PINCER-VM-RESULT b-2 $rc"));
        assert!(s.contains("mnt bpf bpf /sys/fs/bpf"));
        assert!(s.contains("mnt cgroup2 cgroup2 /sys/fs/cgroup"));
        assert!(s.contains("mnt securityfs securityfs /sys/kernel/security"));
        let setup = s.find("for f in /etc/pincer-vm-setup/*.sh").expect("setup pieces are sourced");
        assert!(s.find("mnt tmpfs tmpfs /tmp").unwrap() < setup && setup < a, "after the mounts, before the programs");
    }

    #[test]
    fn the_only_parameter_picks_the_programs_a_vm_runs() {
        let programs = ["a", "ab", "b"].map(|n| Program { name: n.into(), host_path: "/x".into(), args: vec![] });
        let script = init_script(&programs);
        // The init's selection, run by a real shell on a kernel command line of our own.
        let start = script.find("only=\n").unwrap();
        let end = script[start..].find("}\n").unwrap() + start + 2;
        let run = |cmdline: &str| {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("cmdline"), cmdline).unwrap();
            let pick = script[start..end].replace("/proc/cmdline", &dir.path().join("cmdline").to_string_lossy());
            let body = format!("{pick}for p in a ab b; do wanted $p && printf '%s ' $p; done");
            String::from_utf8(Command::new("sh").args(["-c", &body]).output().unwrap().stdout).unwrap()
        };
        assert_eq!(run("console=ttyS0 quiet"), "a ab b ");
        assert_eq!(run("console=ttyS0 pincer.only=ab quiet"), "ab ");
        assert_eq!(run("pincer.only=b,a"), "a b ");
    }

    #[test]
    fn env_parameters_reach_every_program() {
        let script = init_script(&[Program { name: "a".into(), host_path: "/x".into(), args: vec![] }]);
        let start = script.find("for w in $(cat /proc/cmdline); do case \"$w\" in pincer.env.").unwrap();
        let end = script[start..].find("done\n").unwrap() + start + 5;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cmdline"), "console=ttyS0 pincer.env.PINCER_X=1 pincer.only=a pincer.env.PINCER_Y=b=c quiet").unwrap();
        let pick = script[start..end].replace("/proc/cmdline", &dir.path().join("cmdline").to_string_lossy());
        let body = format!("{pick}sh -c 'printf \"%s %s\" \"$PINCER_X\" \"$PINCER_Y\"'");
        let out = Command::new("sh").args(["-c", &body]).env_remove("PINCER_X").env_remove("PINCER_Y").output().unwrap();
        assert_eq!(String::from_utf8(out.stdout).unwrap(), "1 b=c");
    }

    #[test]
    fn unsafe_or_duplicate_names_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("i.cpio");
        let p = |name: &str| Program { name: name.into(), host_path: "/bin/ls".into(), args: vec![] };
        assert!(matches!(build(&[p("a;b")], &[], Path::new(BUSYBOX), &out), Err(InitramfsError::BadName(_))));
        assert!(matches!(
            build(&[p("a"), p("a")], &[], Path::new(BUSYBOX), &out),
            Err(InitramfsError::DuplicateName(_))
        ));
    }

    #[test]
    fn a_built_initramfs_holds_busybox_program_libraries_and_init() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("i.cpio");
        let programs =
            [Program { name: "ls".into(), host_path: "/bin/ls".into(), args: vec![] }];
        build(&programs, &[PathBuf::from("/usr/bin/cat")], Path::new(BUSYBOX), &out).unwrap();
        let listing = Command::new("cpio")
            .args(["-t", "--quiet", "-F"])
            .arg(&out)
            .output()
            .expect("cpio is installed by `cargo xtask deps`");
        let listing = String::from_utf8_lossy(&listing.stdout);
        for want in ["init", "bin/busybox", "bin/sh", "sbin/poweroff", "pincer/ls", "dev/console", "tmp", "usr/bin/cat"] {
            assert!(listing.lines().any(|l| l == want), "{want} missing from the initramfs");
        }
        assert!(listing.lines().any(|l| l.ends_with("libc.so.6")));
        assert!(listing.lines().any(|l| l.contains("ld-linux-x86-64.so.2")));
    }
}
