//! Holding a miss until the daemon has decided it.
//!
//! On a kernel that accepts the held `file_open` (Linux 6.12: a sleepable BPF LSM program
//! calling `bpf_get_task_exe_file` and `bpf_get_file_xattr`), a plain miss is reported
//! with a hold id and the worker's thread then reads the `user.pincer.hold` xattr of the
//! *hold anchor*'s executable. The anchor is a process whose executable (a program of a
//! few instructions that only waits, [`super::anchor`]) lies on a FUSE filesystem this
//! module serves ([`HoldFs`]), so the read becomes a FUSE `GETXATTR`
//! request and the thread sleeps until it is answered. The daemon answers it when it has
//! decided the miss ([`Holds::release`]) or when [`Holds`]'s bound runs out; the kernel
//! then looks for an exact grant on the object again. The answer carries no verdict: the
//! hold can only end a wait, never let an access through.
//!
//! ```text
//! worker open() ─ miss ─→ ring buffer (hold id) ─→ daemon decides ─→ grant into the map
//!      │                                                                 │
//!      └─ getxattr(anchor exe) ─→ FUSE GETXATTR (thread id → MAP_HELD → hold id)
//!                                         └──────── answered ←───────────┘
//!         ←─ the kernel checks the object's exact grant again: 0 or EACCES
//! ```
//!
//! A dead daemon closes the FUSE connection: every waiting thread's read fails and the
//! check finds no grant. A thread whose request the daemon has read cannot be interrupted
//! by FUSE (the kernel waits for the reply, and `fuser` does not act on FUSE interrupts),
//! so a hold that has waited [`KILL_POLL`] looks every [`KILL_POLL`] for a SIGKILL pending
//! on its thread (or the thread gone) and then ends at once: a held process dies within
//! about twice that, not at the bound.

use aya::maps::{HashMap as BpfHashMap, MapData};
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner, OpenFlags, ReplyAttr,
    ReplyData, ReplyDirectory, ReplyEntry, ReplyOpen, ReplyXattr, Request,
};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// The xattr the held thread reads (`HOLD_XATTR` of `pincer.bpf.c`).
pub const HOLD_XATTR: &str = "user.pincer.hold";
/// The xattr a held thread whose hook keeps a folder or the object locked reads
/// (`HOLD_XATTR_LOCKED`): its wait is bounded by [`Holds::with_locked_max`] from the moment
/// it arrives, before the daemon has seen its miss.
pub const HOLD_XATTR_LOCKED: &str = "user.pincer.hold.locked";
/// The anchor's executable in the FUSE filesystem.
const ANCHOR_NAME: &str = "anchor";
const ROOT_INO: u64 = 1;
const ANCHOR_INO: u64 = 2;
/// How long the kernel may cache the filesystem's two entries (they never change).
const TTL: Duration = Duration::from_secs(3600);
/// How often a waiting hold looks whether its thread was killed (after waiting this long).
pub const KILL_POLL: Duration = Duration::from_millis(50);

/// Why holding could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum HoldError {
    /// A file or directory operation failed.
    #[error("{op} {}", path.display())]
    Io {
        /// What was done.
        op: &'static str,
        /// The path.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The pinned thread map could not be opened.
    #[error("cannot open the pinned map {0}")]
    Map(String),
    /// The anchor did not come up on the FUSE filesystem.
    #[error("the hold anchor did not start from {}: {problem}", path.display())]
    Anchor {
        /// Its executable.
        path: PathBuf,
        /// What went wrong.
        problem: String,
    },
}

/// A waiting thread's FUSE request: answering it (or dropping it) ends the wait.
#[derive(Debug)]
pub struct HoldAnswer {
    reply: Option<ReplyXattr>,
    size: u32,
    /// The waiting thread (in the daemon's PID namespace), 0 if not known.
    tid: u32,
}

impl HoldAnswer {
    /// Ends the wait; the kernel then checks the object's grant.
    pub fn release(mut self) {
        self.send();
    }

    fn send(&mut self) {
        if let Some(reply) = self.reply.take() {
            if self.size == 0 {
                reply.size(1);
            } else {
                reply.data(b"1");
            }
        }
    }
}

impl Drop for HoldAnswer {
    fn drop(&mut self) {
        self.send();
    }
}

/// Counters of the holds since the daemon started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HoldStats {
    /// Threads that waited in a hold.
    pub held: u64,
    /// Holds released because their miss was decided.
    pub released: u64,
    /// Holds that reached the bound before a decision.
    pub timed_out: u64,
    /// Holds ended before a decision because their thread was killed.
    pub killed: u64,
    /// FUSE requests of threads that were in no hold (answered at once).
    pub strays: u64,
}

/// How a hold stood when its miss was decided ([`Holds::release`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldEnd {
    /// The thread had waited this long; the decision ended its wait.
    Waited(Duration),
    /// The decision came before the thread's request, which is answered when it arrives.
    Early,
    /// The bound had ended the wait (after this long) before the decision: the access
    /// was denied, whatever the decision.
    TimedOut(Duration),
    /// The thread was killed while it waited (after this long): its wait ended then.
    Killed(Duration),
}

#[derive(Debug, Default)]
struct Table {
    waiting: HashMap<u32, (HoldAnswer, Instant)>,
    decided: HashMap<u32, Instant>,
    /// Holds that ended before their decision: when, and how (after how long a wait).
    expired: HashMap<u32, (Instant, HoldEnd)>,
    /// Holds bounded below the daemon's `max` ([`Holds::limit`]): the bound, and when set.
    limits: HashMap<u32, (Duration, Instant)>,
    stats: HoldStats,
}

/// The holds in progress, shared by the FUSE thread (a thread's request arrives) and the
/// daemon (a miss is decided). Holds are keyed by the kernel's hold id; whichever of the
/// request and the decision comes second ends the wait.
#[derive(Debug, Clone)]
pub struct Holds {
    table: Arc<Mutex<Table>>,
    max: Duration,
    locked_max: Duration,
    runtime: tokio::runtime::Handle,
}

impl Holds {
    /// Holds that last at most `max`; timers run on `runtime`.
    pub fn new(max: Duration, runtime: tokio::runtime::Handle) -> Self {
        Self { table: Arc::default(), max, locked_max: max, runtime }
    }

    /// The same, with the holds that keep a lock ([`HOLD_XATTR_LOCKED`]) bounded by
    /// `locked_max` (at most `max`) from their arrival.
    pub fn with_locked_max(mut self, locked_max: Duration) -> Self {
        self.locked_max = locked_max.min(self.max);
        self
    }

    /// The longest a hold lasts.
    pub fn max(&self) -> Duration {
        self.max
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A thread's request for hold `id` arrived: answered at once if the miss is already
    /// decided, else it waits for [`Holds::release`] or the bound.
    pub fn arrived(&self, id: u32, answer: HoldAnswer) {
        self.arrived_as(id, answer, false);
    }

    /// [`Holds::arrived`] of a thread whose hook keeps a lock when `locked`: its wait is
    /// bounded by the locked maximum at once (or by a smaller bound set already).
    pub fn arrived_as(&self, id: u32, answer: HoldAnswer, locked: bool) {
        let mut t = self.lock();
        t.stats.held += 1;
        if locked {
            let bound = self.locked_max;
            let entry = t.limits.entry(id).or_insert((bound, Instant::now()));
            entry.0 = entry.0.min(bound);
        }
        if t.decided.remove(&id).is_some() {
            t.stats.released += 1;
            drop(t);
            answer.release();
            return;
        }
        let tid = answer.tid;
        t.waiting.insert(id, (answer, Instant::now()));
        let ends_now = t.limits.get(&id).is_some_and(|(limit, _)| limit.is_zero());
        drop(t);
        if ends_now {
            if let Some((answer, _)) = self.end_early(id, false) {
                answer.release();
            }
            return;
        }
        let me = self.clone();
        let max = self.max;
        self.runtime.spawn(async move {
            let start = tokio::time::Instant::now();
            // Most holds end within KILL_POLL; a longer one looks for its thread's death
            // every KILL_POLL, and for a bound set meanwhile ([`Holds::limit`]).
            let mut next = start + KILL_POLL;
            let killed = loop {
                let limit = me.lock().limits.get(&id).map_or(max, |(l, _)| *l).min(max);
                let deadline = start + limit;
                tokio::time::sleep_until(next.min(deadline)).await;
                if !me.lock().waiting.contains_key(&id) {
                    return;
                }
                let now = tokio::time::Instant::now();
                if now >= deadline {
                    break false;
                }
                if now >= next {
                    if tid != 0 && thread_is_dying(tid) {
                        break true;
                    }
                    next += KILL_POLL;
                }
            };
            let ended = me.end_early(id, killed);
            if let Some((answer, waited)) = ended {
                if killed {
                    tracing::info!(hold = id, tid, waited_ms = waited.as_millis() as u64, "held thread was killed; its hold ends");
                } else {
                    tracing::warn!(hold = id, waited_ms = waited.as_millis() as u64, "hold reached its bound before a decision; denied");
                }
                answer.release();
            }
        });
    }

    /// Bounds hold `id` to `limit` (never beyond the daemon's `max`): its wait ends with a
    /// deny once it has waited that long, at once for a zero limit, whether its thread's
    /// request came already or comes later. The decision still comes and serves a retry.
    pub fn limit(&self, id: u32, limit: Duration) {
        let over = {
            let mut t = self.lock();
            let now = Instant::now();
            let stale = self.max * 2;
            t.limits.retain(|_, (_, at)| now.duration_since(*at) < stale);
            t.limits.insert(id, (limit, now));
            t.waiting.get(&id).is_some_and(|(_, since)| since.elapsed() >= limit)
        };
        if over {
            if let Some((answer, _)) = self.end_early(id, false) {
                answer.release();
            }
        }
    }

    /// Takes hold `id` out of the waiting ones before its decision (the bound ran out, or
    /// its thread was killed) and remembers how it ended for [`Holds::release`].
    fn end_early(&self, id: u32, killed: bool) -> Option<(HoldAnswer, Duration)> {
        let mut t = self.lock();
        let (answer, since) = t.waiting.remove(&id)?;
        t.limits.remove(&id);
        let waited = since.elapsed();
        let end = if killed {
            t.stats.killed += 1;
            HoldEnd::Killed(waited)
        } else {
            t.stats.timed_out += 1;
            HoldEnd::TimedOut(waited)
        };
        let now = Instant::now();
        let stale = self.max * 2;
        t.expired.retain(|_, (at, _)| now.duration_since(*at) < stale);
        t.expired.insert(id, (now, end));
        Some((answer, waited))
    }

    /// A request from a thread that is in no hold (a stray read of the anchor's xattr).
    fn stray(&self, answer: HoldAnswer) {
        self.lock().stats.strays += 1;
        drop(answer);
    }

    /// Miss `id` is decided (its grant, if any, is in the kernel): ends the wait of its
    /// thread, or records the decision for a request yet to come, and says which.
    pub fn release(&self, id: u32) -> HoldEnd {
        let mut t = self.lock();
        t.limits.remove(&id);
        if let Some((answer, since)) = t.waiting.remove(&id) {
            t.stats.released += 1;
            drop(t);
            answer.release();
            return HoldEnd::Waited(since.elapsed());
        }
        if let Some((_, end)) = t.expired.remove(&id) {
            return end;
        }
        let now = Instant::now();
        let stale = self.max * 2;
        t.decided.retain(|_, at| now.duration_since(*at) < stale);
        t.decided.insert(id, now);
        HoldEnd::Early
    }

    /// How long hold `id`'s thread has waited so far (none: its request has not arrived,
    /// or its wait has ended).
    pub fn waited(&self, id: u32) -> Option<Duration> {
        self.lock().waiting.get(&id).map(|(_, since)| since.elapsed())
    }

    /// The counters so far.
    pub fn stats(&self) -> HoldStats {
        self.lock().stats
    }

    /// Threads waiting now.
    pub fn waiting(&self) -> usize {
        self.lock().waiting.len()
    }

    /// Ends every wait (the daemon is stopping): each thread's check then finds no new grant.
    pub fn release_all(&self) {
        let waiting: Vec<_> = self.lock().waiting.drain().collect();
        for (_, (answer, _)) in waiting {
            answer.release();
        }
    }
}

/// Whether thread `tid` (in this process's PID namespace) is gone, exiting, or has a
/// SIGKILL pending: its hold then has no one left to serve.
fn thread_is_dying(tid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{tid}/status")) {
        Ok(status) => status_is_dying(&status),
        Err(_) => true,
    }
}

/// [`thread_is_dying`] on the text of a `/proc/TID/status` file.
fn status_is_dying(status: &str) -> bool {
    const SIGKILL_BIT: u64 = 1 << (libc::SIGKILL - 1);
    status.lines().any(|l| {
        let (key, value) = l.split_once(':').unwrap_or((l, ""));
        let value = value.trim();
        match key {
            "State" => value.starts_with('Z') || value.starts_with('X'),
            "SigPnd" | "ShdPnd" => u64::from_str_radix(value, 16).is_ok_and(|bits| bits & SIGKILL_BIT != 0),
            _ => false,
        }
    })
}

/// The FUSE filesystem of the hold: a root directory with one executable, the anchor
/// ([`super::anchor::program`]).
pub struct HoldFs {
    program: Vec<u8>,
    held: BpfHashMap<MapData, u32, u32>,
    holds: Holds,
    started: SystemTime,
}

impl HoldFs {
    fn attr(&self, ino: u64) -> FileAttr {
        let dir = ino == ROOT_INO;
        FileAttr {
            ino: INodeNo(ino),
            size: if dir { 0 } else { self.program.len() as u64 },
            blocks: if dir { 0 } else { (self.program.len() as u64).div_ceil(512) },
            atime: self.started,
            mtime: self.started,
            ctime: self.started,
            crtime: self.started,
            kind: if dir { FileType::Directory } else { FileType::RegularFile },
            perm: 0o555,
            nlink: if dir { 2 } else { 1 },
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }
}

impl Filesystem for HoldFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if parent.0 == ROOT_INO && name == ANCHOR_NAME {
            reply.entry(&TTL, &self.attr(ANCHOR_INO), Generation(0));
        } else {
            reply.error(Errno::ENOENT);
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match ino.0 {
            ROOT_INO | ANCHOR_INO => reply.attr(&TTL, &self.attr(ino.0)),
            _ => reply.error(Errno::ENOENT),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        if ino.0 == ANCHOR_INO {
            reply.opened(FileHandle(0), FopenFlags::FOPEN_KEEP_CACHE);
        } else {
            reply.error(Errno::EISDIR);
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        if ino.0 != ANCHOR_INO {
            return reply.error(Errno::EISDIR);
        }
        let from = usize::try_from(offset).unwrap_or(usize::MAX).min(self.program.len());
        let to = from.saturating_add(size as usize).min(self.program.len());
        reply.data(&self.program[from..to]);
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        if ino.0 != ROOT_INO {
            return reply.error(Errno::ENOTDIR);
        }
        let entries = [(ROOT_INO, FileType::Directory, "."), (ROOT_INO, FileType::Directory, ".."), (ANCHOR_INO, FileType::RegularFile, ANCHOR_NAME)];
        for (i, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*ino), (i + 1) as u64, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let locked = name == HOLD_XATTR_LOCKED;
        if ino.0 != ANCHOR_INO || !(locked || name == HOLD_XATTR) {
            return reply.error(Errno::ENODATA);
        }
        let answer = HoldAnswer { reply: Some(reply), size, tid: req.pid() };
        // The requesting thread's id (in the daemon's PID namespace) names its hold.
        match self.held.get(&req.pid(), 0) {
            Ok(id) => self.holds.arrived_as(id, answer, locked),
            Err(_) => self.holds.stray(answer),
        }
    }
}

/// The hold's FUSE mount and its anchor process; dropping it unmounts, kills the anchor
/// and so ends every wait.
pub struct Anchor {
    pid: u32,
    mountpoint: PathBuf,
    session: Option<fuser::BackgroundSession>,
}

/// How long dropping an [`Anchor`] waits for its process to be gone before it unmounts.
const ANCHOR_EXIT_WAIT: Duration = Duration::from_secs(2);

impl Anchor {
    /// Mounts the hold's filesystem at `mountpoint` (created if missing; a stale mount of
    /// an earlier daemon is detached first), serving requests against the thread map
    /// pinned under `pin_dir`, and starts the anchor from it.
    pub fn start(mountpoint: &Path, pin_dir: &Path, holds: Holds) -> Result<Self, HoldError> {
        fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> HoldError + 'a {
            move |source| HoldError::Io { op, path: path.to_path_buf(), source }
        }
        let map_path = pin_dir.join("maps").join(pincer_common::map_names::HELD);
        let data = MapData::from_pin(&map_path).map_err(|e| HoldError::Map(format!("{}: {e}", map_path.display())))?;
        let held = BpfHashMap::try_from(aya::maps::Map::HashMap(data)).map_err(|e| HoldError::Map(e.to_string()))?;
        // A mount left by a daemon that died: detach it (ENOTCONN by now).
        if let Ok(c) = std::ffi::CString::new(mountpoint.as_os_str().as_encoded_bytes()) {
            // SAFETY: `c` is a valid NUL-terminated path; failure (nothing mounted) is fine.
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
        std::fs::create_dir_all(mountpoint).map_err(io("create", mountpoint))?;
        let fs = HoldFs { program: super::anchor::program(), held, holds, started: SystemTime::now() };
        let mut config = fuser::Config::default();
        config.mount_options = vec![
            fuser::MountOption::FSName("pincer-hold".into()),
            fuser::MountOption::RO,
            fuser::MountOption::NoSuid,
            fuser::MountOption::NoDev,
            fuser::MountOption::Exec,
        ];
        // Held threads are the user's: their requests must reach this filesystem.
        config.acl = fuser::SessionACL::All;
        let session = fuser::Session::new(fs, mountpoint, &config).map_err(io("mount FUSE at", mountpoint))?;
        let session = session.spawn().map_err(io("serve FUSE at", mountpoint))?;
        let anchor_exe = mountpoint.join(ANCHOR_NAME);
        let pid = spawn_anchor(&anchor_exe)?;
        Ok(Self { pid, mountpoint: mountpoint.to_path_buf(), session: Some(session) })
    }

    /// The anchor's process id (the value for [`super::Enforcer::set_hold_anchor`]).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Where the filesystem is mounted.
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }
}

impl Drop for Anchor {
    /// Kills the anchor and waits until it is reaped (its executable is on the mount, so
    /// an unmount before that fails with `EBUSY` and left the mount behind, one per daemon
    /// start at its own mount point), then unmounts; a mount still there is detached.
    fn drop(&mut self) {
        // SAFETY: kill(2) on the anchor's pid; it is our child (reaped by its waiter thread).
        unsafe { libc::kill(self.pid as i32, libc::SIGKILL) };
        let start = Instant::now();
        // SAFETY: kill(2) with signal 0 only checks the pid; ESRCH once the waiter reaped it.
        while unsafe { libc::kill(self.pid as i32, 0) } == 0 && start.elapsed() < ANCHOR_EXIT_WAIT {
            std::thread::sleep(Duration::from_millis(2));
        }
        drop(self.session.take());
        if let Ok(c) = std::ffi::CString::new(self.mountpoint.as_os_str().as_encoded_bytes()) {
            // SAFETY: `c` is a valid NUL-terminated path; failure (already unmounted) is fine.
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

/// Starts the anchor from `exe` on a thread that lives as long as it does (the anchor dies
/// with the daemon: its parent-death signal is tied to that thread), and waits until its
/// executable is the FUSE file.
fn spawn_anchor(exe: &Path) -> Result<u32, HoldError> {
    let (tx, rx) = std::sync::mpsc::channel();
    let exe_owned = exe.to_path_buf();
    std::thread::Builder::new()
        .name("pincer-hold-anchor".into())
        .spawn(move || {
            let mut cmd = std::process::Command::new(&exe_owned);
            cmd.env_clear().stdin(std::process::Stdio::null()).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
            // SAFETY: prctl is async-signal-safe; the child only sets its death signal.
            unsafe {
                cmd.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            match cmd.spawn() {
                Ok(mut child) => {
                    let _ = tx.send(Ok(child.id()));
                    let _ = child.wait();
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                }
            }
        })
        .map_err(|source| HoldError::Io { op: "start a thread for", path: exe.to_path_buf(), source })?;
    let pid = rx
        .recv()
        .map_err(|_| HoldError::Anchor { path: exe.to_path_buf(), problem: "its starter thread ended".into() })?
        .map_err(|e| HoldError::Anchor { path: exe.to_path_buf(), problem: e.to_string() })?;
    let proc_exe = PathBuf::from(format!("/proc/{pid}/exe"));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if std::fs::read_link(&proc_exe).is_ok_and(|p| p == exe) {
            return Ok(pid);
        }
        if Instant::now() > deadline {
            // SAFETY: kill(2) of our own child.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            return Err(HoldError::Anchor { path: exe.to_path_buf(), problem: "its executable is not the FUSE file after 10 s".into() });
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holds(max_ms: u64) -> (tokio::runtime::Runtime, Holds) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_time().build().unwrap();
        let h = Holds::new(Duration::from_millis(max_ms), rt.handle().clone());
        (rt, h)
    }

    /// A decision that comes before the thread's request is kept for it; a late decision
    /// for an expired hold does not end a later one.
    #[test]
    fn decision_before_request_and_expiry() {
        let (rt, h) = holds(20);
        assert_eq!(h.release(7), HoldEnd::Early, "no one waits yet");
        h.arrived(7, HoldAnswer { reply: None, size: 8, tid: 0 });
        assert_eq!(h.waiting(), 0, "answered at once");
        h.arrived(9, HoldAnswer { reply: None, size: 8, tid: 0 });
        assert_eq!(h.waiting(), 1);
        rt.block_on(async { tokio::time::sleep(Duration::from_millis(60)).await });
        assert_eq!(h.waiting(), 0, "the bound ended the wait");
        assert_eq!(h.stats().timed_out, 1);
        assert!(matches!(h.release(9), HoldEnd::TimedOut(w) if w >= Duration::from_millis(20)), "a decision after the bound finds it timed out");
        let s = h.stats();
        assert_eq!((s.held, s.released, s.timed_out), (2, 1, 1));
    }

    /// A hold whose hook keeps a lock is bounded by the locked maximum from its arrival,
    /// before any decision or daemon-set bound; a plain one waits up to the maximum.
    #[test]
    fn a_locked_hold_is_bounded_from_its_arrival() {
        let (rt, h) = holds(60_000);
        let h = h.with_locked_max(Duration::from_millis(30));
        h.arrived_as(3, HoldAnswer { reply: None, size: 8, tid: 0 }, true);
        h.arrived_as(4, HoldAnswer { reply: None, size: 8, tid: 0 }, false);
        rt.block_on(async { tokio::time::sleep(KILL_POLL * 2).await });
        assert_eq!(h.waiting(), 1, "the locked hold ended at its bound; the plain one waits");
        assert!(matches!(h.release(3), HoldEnd::TimedOut(w) if w >= Duration::from_millis(30) && w < Duration::from_secs(5)));
        assert!(matches!(h.release(4), HoldEnd::Waited(_)));
        // A smaller bound the daemon set first stays (zero: denied at once).
        h.limit(6, Duration::ZERO);
        h.arrived_as(6, HoldAnswer { reply: None, size: 8, tid: 0 }, true);
        assert_eq!(h.waiting(), 0);
    }

    /// A hold whose thread dies ends at once, long before the bound, and a decision that
    /// comes later finds it ended by the kill.
    #[test]
    fn a_hold_ends_when_its_thread_is_killed() {
        let (rt, h) = holds(60_000);
        let mut child = std::process::Command::new("sleep").arg("60").spawn().unwrap();
        h.arrived(5, HoldAnswer { reply: None, size: 8, tid: child.id() });
        rt.block_on(async { tokio::time::sleep(KILL_POLL * 3).await });
        assert_eq!(h.waiting(), 1, "a live thread keeps waiting");
        child.kill().unwrap();
        rt.block_on(async { tokio::time::sleep(KILL_POLL * 4).await });
        assert_eq!(h.waiting(), 0, "the killed thread's hold ended");
        assert_eq!(h.stats().killed, 1);
        assert!(matches!(h.release(5), HoldEnd::Killed(_)));
        child.wait().unwrap();
    }

    /// What `/proc/TID/status` says of a thread in a FUSE wait with SIGKILL pending, of a
    /// zombie, and of a thread that only has other signals pending.
    #[test]
    fn a_pending_sigkill_or_a_zombie_is_dying() {
        let held = "Name:\tcat\nState:\tD (disk sleep)\nSigPnd:\t0000000000000100\nShdPnd:\t0000000000000000\n";
        assert!(status_is_dying(held));
        let shared = "State:\tD (disk sleep)\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000100\n";
        assert!(status_is_dying(shared));
        assert!(status_is_dying("State:\tZ (zombie)\n"));
        let alive = "State:\tD (disk sleep)\nSigPnd:\t0000000000000002\nShdPnd:\t0000000000004000\n";
        assert!(!status_is_dying(alive), "SIGINT and SIGTERM pending do not end a hold");
    }

    /// A hold bounded below `max` ends at its bound; a zero bound ends a wait at once, set
    /// before or after the thread's request.
    #[test]
    fn a_limit_ends_a_hold_before_the_daemons_bound() {
        let (rt, h) = holds(60_000);
        h.arrived(1, HoldAnswer { reply: None, size: 8, tid: 0 });
        h.limit(1, Duration::from_millis(30));
        rt.block_on(async { tokio::time::sleep(KILL_POLL * 3).await });
        assert_eq!(h.waiting(), 0, "the limit ended the wait");
        assert!(matches!(h.release(1), HoldEnd::TimedOut(w) if w >= Duration::from_millis(30) && w < Duration::from_secs(10)));
        h.limit(2, Duration::ZERO);
        h.arrived(2, HoldAnswer { reply: None, size: 8, tid: 0 });
        assert_eq!(h.waiting(), 0, "a zero limit set before the request ends it on arrival");
        h.arrived(3, HoldAnswer { reply: None, size: 8, tid: 0 });
        h.limit(3, Duration::ZERO);
        assert_eq!(h.waiting(), 0, "a zero limit set after the request ends it at once");
        assert_eq!(h.stats().timed_out, 3);
    }

    #[test]
    fn release_ends_the_wait_it_names_only() {
        let (_rt, h) = holds(10_000);
        h.arrived(1, HoldAnswer { reply: None, size: 8, tid: 0 });
        h.arrived(2, HoldAnswer { reply: None, size: 8, tid: 0 });
        assert!(matches!(h.release(2), HoldEnd::Waited(_)));
        assert_eq!(h.waiting(), 1);
        h.release_all();
        assert_eq!(h.waiting(), 0);
    }
}
