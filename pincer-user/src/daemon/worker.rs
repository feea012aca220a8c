//! Starting a worker: inside its session's cgroup, as an unprivileged user, with
//! `no_new_privs`, so nothing it runs can regain privileges or leave the session.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// Errors preparing a worker.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// No command was given.
    #[error("no command given to run")]
    NoCommand,
    /// A path or argument holds a NUL byte.
    #[error("{what} holds a NUL byte")]
    Nul {
        /// Which value.
        what: &'static str,
    },
    /// The worker would run as root.
    #[error("the worker must not run as root: name an unprivileged user with --user")]
    Root,
}

/// What to start.
#[derive(Debug, Clone)]
pub struct WorkerSpec {
    /// The session's cgroup directory.
    pub cgroup: PathBuf,
    /// User id to run as (not 0).
    pub uid: u32,
    /// Group id to run as.
    pub gid: u32,
    /// Program and arguments.
    pub command: Vec<String>,
    /// Extra environment.
    pub env: Vec<(String, String)>,
}

/// A command that, between fork and exec, joins the cgroup (writing `0`, "this process",
/// to `cgroup.procs`), drops supplementary groups, sets gid and uid and sets
/// `no_new_privs`. Any failure there aborts the start.
pub fn command(spec: &WorkerSpec) -> Result<tokio::process::Command, WorkerError> {
    let (prog, args) = spec.command.split_first().ok_or(WorkerError::NoCommand)?;
    if spec.uid == 0 {
        return Err(WorkerError::Root);
    }
    let procs = CString::new(spec.cgroup.join("cgroup.procs").as_os_str().as_bytes()).map_err(|_| WorkerError::Nul { what: "the cgroup path" })?;
    let (uid, gid) = (spec.uid, spec.gid);
    let mut cmd = tokio::process::Command::new(prog);
    cmd.args(args);
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    // SAFETY: the closure only makes async-signal-safe system calls (open, write, close,
    // setgroups, setgid, setuid, prctl) on data prepared before the fork.
    unsafe {
        cmd.pre_exec(move || {
            let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let ok = libc::write(fd, b"0".as_ptr().cast(), 1) == 1;
            let err = std::io::Error::last_os_error();
            libc::close(fd);
            if !ok {
                return Err(err);
            }
            if libc::setgroups(0, std::ptr::null()) != 0 || libc::setgid(gid) != 0 || libc::setuid(uid) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok(cmd)
}
