//! Ways to write that a session opened before a place became never-grantable.
//!
//! The kernel checks a write when a file is opened (and a shared mapping when it is made);
//! a write through a descriptor already open passes no hook (`file_permission` is not
//! attached: every process on the host would pay it). So when the user's configuration
//! names a new code place while a session runs (`core.hooksPath` set to a folder the
//! session had a grant on), a descriptor the session opened for writing there before, or a
//! shared writable mapping, would keep writing the user's code. Linux has no way to close
//! another process's descriptor, so once the new places are in the kernel, the session's
//! processes that hold such a way to write are ended (`SIGKILL`), with the session's cgroup
//! frozen while they are looked for, so none forks or passes a descriptor on meanwhile.
//! A descriptor in flight in a Unix socket (sent, not yet received) belongs to no process
//! and is not seen here; the kernel checks it when it is received (`file_receive`, as an
//! open with the descriptor's mode), so one open for writing is refused then.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How a process could still write an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteHandle {
    /// A descriptor open for writing (`O_WRONLY` or `O_RDWR`).
    Descriptor,
    /// A shared writable mapping (`mmap(PROT_WRITE, MAP_SHARED)`).
    SharedMapping,
}

impl WriteHandle {
    /// As the audit names it.
    pub fn name(self) -> &'static str {
        match self {
            WriteHandle::Descriptor => "a descriptor open for writing",
            WriteHandle::SharedMapping => "a shared writable mapping",
        }
    }
}

/// A process of a session that could still write a never-grantable object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Writer {
    /// Its pid (in the daemon's PID namespace).
    pub pid: i32,
    /// The object's path as the kernel names it.
    pub path: PathBuf,
    /// How it could write it.
    pub how: WriteHandle,
}

/// The pids of every process in `cgroup` and the cgroups below it.
fn processes(cgroup: &Path) -> Vec<i32> {
    let mut pids = Vec::new();
    let mut dirs = vec![cgroup.to_path_buf()];
    while let Some(d) = dirs.pop() {
        if let Ok(text) = std::fs::read_to_string(d.join("cgroup.procs")) {
            pids.extend(text.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
        }
        if let Ok(entries) = std::fs::read_dir(&d) {
            dirs.extend(entries.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| e.path()));
        }
    }
    pids
}

/// Whether a descriptor's `fdinfo` says it is open for writing.
fn open_for_writing(fdinfo: &str) -> bool {
    fdinfo
        .lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .and_then(|f| i32::from_str_radix(f.trim(), 8).ok())
        .is_some_and(|flags| matches!(flags & libc::O_ACCMODE, libc::O_WRONLY | libc::O_RDWR))
}

/// The path of a writable shared mapping in a line of `/proc/PID/maps`.
fn shared_writable_mapping(line: &str) -> Option<&str> {
    let mut fields = line.splitn(6, ' ');
    let perms = fields.nth(1)?;
    let path = fields.nth(3)?.trim_start();
    (perms.as_bytes().get(1) == Some(&b'w') && perms.as_bytes().get(3) == Some(&b's') && path.starts_with('/') && !path.ends_with(" (deleted)")).then_some(path)
}

/// The ways process `pid` could write an object `forbidden` names.
fn writers_of(pid: i32, forbidden: &impl Fn(&Path) -> bool) -> Vec<Writer> {
    let mut found = Vec::new();
    if let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
        for fd in fds.flatten() {
            let Ok(target) = std::fs::read_link(fd.path()) else { continue };
            // Pipes, sockets and anonymous inodes are named `type:[...]`; a deleted file
            // cannot be reached by a name.
            if !target.is_absolute() || target.as_os_str().as_encoded_bytes().ends_with(b" (deleted)") || !forbidden(&target) {
                continue;
            }
            let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{}", fd.file_name().to_string_lossy())).unwrap_or_default();
            if open_for_writing(&info) {
                found.push(Writer { pid, path: target, how: WriteHandle::Descriptor });
            }
        }
    }
    if let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) {
        for path in maps.lines().filter_map(shared_writable_mapping) {
            let path = Path::new(path);
            if forbidden(path) && !found.iter().any(|w| w.how == WriteHandle::SharedMapping && w.path == path) {
                found.push(Writer { pid, path: path.to_path_buf(), how: WriteHandle::SharedMapping });
            }
        }
    }
    found
}

/// How long the cgroup is given to freeze before it is looked at anyway.
const FREEZE_WAIT: Duration = Duration::from_millis(500);

/// Writes `cgroup.freeze` and, when freezing, waits (at most [`FREEZE_WAIT`]) until
/// `cgroup.events` says the cgroup is frozen.
fn freeze(cgroup: &Path, on: bool) {
    if std::fs::write(cgroup.join("cgroup.freeze"), if on { "1" } else { "0" }).is_err() || !on {
        return;
    }
    let start = Instant::now();
    while start.elapsed() < FREEZE_WAIT {
        if std::fs::read_to_string(cgroup.join("cgroup.events")).is_ok_and(|e| e.lines().any(|l| l == "frozen 1")) {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Ends every process of the session in `cgroup` that could still write an object
/// `forbidden` names (a descriptor open for writing, a shared writable mapping), with the
/// cgroup frozen while they are looked for; returns them. Called once the new
/// never-grantable places are in the kernel, so no new way to write them can be opened.
pub fn end_writers(cgroup: &Path, forbidden: impl Fn(&Path) -> bool) -> Vec<Writer> {
    freeze(cgroup, true);
    let writers: Vec<Writer> = processes(cgroup).into_iter().flat_map(|pid| writers_of(pid, &forbidden)).collect();
    let mut ended = std::collections::BTreeSet::new();
    for w in &writers {
        if ended.insert(w.pid) {
            // SAFETY: kill(2) of a process of the session's cgroup.
            unsafe { libc::kill(w.pid, libc::SIGKILL) };
        }
    }
    freeze(cgroup, false);
    writers
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_descriptor_is_for_writing_by_its_access_mode() {
        assert!(open_for_writing("pos:\t0\nflags:\t0100001\nmnt_id:\t30\n"));
        assert!(open_for_writing("pos:\t0\nflags:\t02002\n"));
        assert!(!open_for_writing("pos:\t0\nflags:\t0100000\n"));
        assert!(!open_for_writing("pos:\t0\n"), "no flags line: not taken for a writer");
    }

    #[test]
    fn only_shared_writable_mappings_of_named_files_count() {
        let line = |perms: &str, path: &str| format!("7f0000000000-7f0000001000 {perms} 00000000 08:01 1234                       {path}");
        assert_eq!(shared_writable_mapping(&line("rw-s", "/home/u/x/hooks/pre-commit")), Some("/home/u/x/hooks/pre-commit"));
        assert_eq!(shared_writable_mapping(&line("rw-p", "/home/u/x/hooks/pre-commit")), None, "private: writes stay in the process");
        assert_eq!(shared_writable_mapping(&line("r--s", "/home/u/x/hooks/pre-commit")), None, "read-only");
        assert_eq!(shared_writable_mapping(&line("rw-s", "/dev/zero (deleted)")), None);
        assert_eq!(shared_writable_mapping(&line("rw-s", "[heap]")), None);
    }

    /// This process's own descriptors: one open for writing in a forbidden folder is found,
    /// one open for reading there and one for writing elsewhere are not.
    #[test]
    fn a_process_writer_is_found_by_its_descriptor_and_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let (hooks, other) = (dir.path().join("hooks"), dir.path().join("notes"));
        std::fs::create_dir_all(&hooks).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(hooks.join("pre-commit"), "#!/bin/sh\n").unwrap();
        std::fs::write(hooks.join("read-only"), "").unwrap();
        let w = std::fs::OpenOptions::new().append(true).open(hooks.join("pre-commit")).unwrap();
        let r = std::fs::File::open(hooks.join("read-only")).unwrap();
        let elsewhere = std::fs::File::create(other.join("n.txt")).unwrap();
        let hooks_dir = hooks.canonicalize().unwrap();
        let found = writers_of(std::process::id() as i32, &|p: &Path| p.starts_with(&hooks_dir));
        let paths: Vec<_> = found.iter().map(|w| (w.path.file_name().unwrap().to_string_lossy().into_owned(), w.how)).collect();
        assert_eq!(paths, vec![("pre-commit".to_string(), WriteHandle::Descriptor)]);
        let _ = (w.as_raw_fd(), r.as_raw_fd(), elsewhere.as_raw_fd());
    }
}
