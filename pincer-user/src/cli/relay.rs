//! The worker's standard streams: descriptions of the session's own, which `pincer run`
//! relays to and from its own stdin, stdout and stderr.
//!
//! A descriptor passed on at exec shares its *file description* with every process that
//! holds it: its flags (`O_NONBLOCK`, `O_APPEND`, `O_ASYNC`), its offset and, for a
//! terminal, the terminal itself. Handing the worker `pincer run`'s own stdio would let
//! the session change what the user's shell and the other processes of a pipeline read
//! and write through (an `O_NONBLOCK` set on a shared pipe makes the user's next read fail
//! with `EAGAIN`), and read what the user types on the terminal it shares. So the worker
//! gets none of them:
//! - where `pincer run`'s stream is a terminal, a pseudo-terminal of the session's (its
//!   slave, owned by the worker's user, becomes the worker's controlling terminal; its
//!   modes and window size are the user's terminal's, and a window change is passed on);
//! - any other stream, a pipe of its own.
//!
//! Threads copy the bytes with blocking reads and writes, so `pincer run` never changes a
//! flag of the descriptions it shares either. While the worker has the terminal's input,
//! the user's terminal is in raw mode (`^C`, `^Z` reach the worker through its own
//! terminal, as over `ssh -t`), and its modes are restored when the relay ends. A
//! `pincer run` started in the background reads the terminal (and makes it raw) only once
//! the user brings it to the foreground.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::process::Stdio;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// `pincer run`'s stdin, stdout and stderr.
const OUTER: [RawFd; 3] = [0, 1, 2];

/// A bound on one copy's buffer.
const CHUNK: usize = 64 * 1024;

/// The worker's streams, prepared before it starts.
pub struct Relay {
    /// What the worker's fd 0, 1 and 2 become.
    worker: [OwnedFd; 3],
    /// `pincer run`'s end of each stream that is a pipe (the read end for stdin's writer is
    /// the worker's): stdin's write end, stdout's and stderr's read ends.
    ours: [Option<OwnedFd>; 3],
    /// The pseudo-terminal's master, when one of the streams is a terminal.
    master: Option<OwnedFd>,
}

/// Whether `fd` is a terminal.
fn is_tty(fd: RawFd) -> bool {
    // SAFETY: isatty on an integer.
    unsafe { libc::isatty(fd) == 1 }
}

fn last_error(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// A pipe, close-on-exec: (read end, write end).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut p = [0; 2];
    // SAFETY: pipe2 into a local array.
    if unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(last_error("making a pipe for the worker's stream"));
    }
    // SAFETY: both descriptors were just made and are owned here only.
    Ok(unsafe { (OwnedFd::from_raw_fd(p[0]), OwnedFd::from_raw_fd(p[1])) })
}

/// A new pseudo-terminal: (master, slave). The slave takes the modes and window size of
/// the user's terminal `like` and is owned by `uid`, as a login's terminal is.
fn pty(like: RawFd, uid: u32) -> io::Result<(OwnedFd, OwnedFd)> {
    // SAFETY: posix_openpt, grantpt, unlockpt, ptsname_r, open, tcgetattr, tcsetattr,
    // ioctl and fchown on descriptors made here and local buffers.
    unsafe {
        let m = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        if m < 0 {
            return Err(last_error("opening /dev/ptmx for the worker's terminal"));
        }
        let master = OwnedFd::from_raw_fd(m);
        if libc::grantpt(m) != 0 || libc::unlockpt(m) != 0 {
            return Err(last_error("unlocking the worker's terminal"));
        }
        let mut name = [0 as libc::c_char; 64];
        if libc::ptsname_r(m, name.as_mut_ptr(), name.len()) != 0 {
            return Err(last_error("naming the worker's terminal"));
        }
        let s = libc::open(name.as_ptr(), libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        if s < 0 {
            return Err(last_error("opening the worker's terminal"));
        }
        let slave = OwnedFd::from_raw_fd(s);
        let mut modes: libc::termios = std::mem::zeroed();
        if libc::tcgetattr(like, &mut modes) == 0 {
            libc::tcsetattr(s, libc::TCSANOW, &modes);
        }
        copy_window_size(like, m);
        if libc::fchown(s, uid, u32::MAX) != 0 {
            return Err(last_error("giving the worker's terminal to its user"));
        }
        Ok((master, slave))
    }
}

/// Copies the window size of terminal `from` to the pseudo-terminal master `to` (the
/// kernel signals the worker's foreground group with `SIGWINCH`).
fn copy_window_size(from: RawFd, to: RawFd) {
    // SAFETY: TIOCGWINSZ/TIOCSWINSZ with a local winsize.
    unsafe {
        let mut ws: libc::winsize = std::mem::zeroed();
        if libc::ioctl(from, libc::TIOCGWINSZ, &mut ws) == 0 {
            libc::ioctl(to, libc::TIOCSWINSZ, &ws);
        }
    }
}

impl Relay {
    /// Prepares the worker's streams for `pincer run`'s own: a pseudo-terminal owned by
    /// `uid` for those that are terminals, a pipe for each of the others.
    pub fn prepare(uid: u32) -> io::Result<Relay> {
        let tty = OUTER.iter().copied().find(|&fd| is_tty(fd));
        let (master, slave) = match tty {
            Some(like) => {
                let (m, s) = pty(like, uid)?;
                (Some(m), Some(s))
            }
            None => (None, None),
        };
        let mut worker = Vec::with_capacity(3);
        let mut ours = [None, None, None];
        for (i, &fd) in OUTER.iter().enumerate() {
            match &slave {
                Some(s) if is_tty(fd) => worker.push(s.try_clone()?),
                _ => {
                    let (r, w) = pipe()?;
                    let (theirs, mine) = if i == 0 { (r, w) } else { (w, r) };
                    worker.push(theirs);
                    ours[i] = Some(mine);
                }
            }
        }
        let worker: [OwnedFd; 3] = worker.try_into().map_err(|_| io::Error::other("three streams"))?;
        Ok(Relay { worker, ours, master })
    }

    /// The worker's stdin, stdout and stderr (copies of its ends: the relay keeps its own
    /// until [`Relay::start`]).
    pub fn worker_stdio(&self) -> io::Result<[Stdio; 3]> {
        let [a, b, c] = &self.worker;
        Ok([Stdio::from(a.try_clone()?), Stdio::from(b.try_clone()?), Stdio::from(c.try_clone()?)])
    }

    /// Starts copying, once the worker has started: its ends are closed here, so a stream
    /// ends when the worker's processes have all closed it.
    pub fn start(self) -> io::Result<Running> {
        let Relay { worker, ours, master } = self;
        drop(worker);
        let raw = Arc::new(Mutex::new(Terminal::Cooked));
        let (done_tx, done) = mpsc::channel();
        let mut outputs = 0;
        let [stdin, stdout, stderr] = ours;
        if let Some(w) = stdin {
            std::thread::Builder::new().name("relay-stdin".into()).spawn(move || {
                let _ = copy(0, w.as_raw_fd(), None);
            })?;
        }
        for (fd, r) in [(1, stdout), (2, stderr)] {
            if let Some(r) = r {
                let tx = done_tx.clone();
                outputs += 1;
                std::thread::Builder::new().name(format!("relay-{fd}")).spawn(move || {
                    let _ = copy(r.as_raw_fd(), fd, None);
                    drop(r);
                    let _ = tx.send(());
                })?;
            }
        }
        let master = master.map(Arc::new);
        if let Some(m) = master.clone() {
            if is_tty(0) {
                let input = m.clone();
                let raw = raw.clone();
                std::thread::Builder::new().name("relay-tty-in".into()).spawn(move || {
                    // Only the terminal's foreground job may read it (a background one is
                    // stopped by SIGTTIN) or change its modes: `pincer run ... &` waits
                    // until the user brings it to the foreground.
                    while !foreground_of(0) {
                        if matches!(*raw.lock().unwrap_or_else(|e| e.into_inner()), Terminal::Done) {
                            return;
                        }
                        std::thread::sleep(FOREGROUND_POLL);
                    }
                    {
                        let mut t = raw.lock().unwrap_or_else(|e| e.into_inner());
                        match *t {
                            Terminal::Done => return,
                            _ => {
                                if let Some(r) = RawMode::enter(0) {
                                    *t = Terminal::Raw(r);
                                }
                            }
                        }
                    }
                    let _ = copy(0, input.as_raw_fd(), None);
                })?;
            }
            let to = if is_tty(1) { 1 } else { 2 };
            let tx = done_tx.clone();
            outputs += 1;
            std::thread::Builder::new().name("relay-tty-out".into()).spawn(move || {
                let _ = copy(m.as_raw_fd(), to, Some(libc::EIO));
                let _ = tx.send(());
            })?;
        }
        Ok(Running { done, outputs, master, raw })
    }
}

/// How often a `pincer run` in the background looks whether it is in the foreground.
const FOREGROUND_POLL: Duration = Duration::from_millis(100);

/// The user's terminal as the relay left it.
enum Terminal {
    /// Its modes untouched.
    Cooked,
    /// In raw mode while the worker has its input; restored on drop.
    Raw(#[allow(dead_code)] RawMode),
    /// The relay is done: its modes are back and stay.
    Done,
}

/// Whether `pincer run` is the foreground job of terminal `fd` (only then may it read the
/// terminal or change its modes; a background job would be stopped by `SIGTTIN` or
/// `SIGTTOU`).
fn foreground_of(fd: RawFd) -> bool {
    // SAFETY: tcgetpgrp and getpgrp have no preconditions.
    unsafe { is_tty(fd) && libc::tcgetpgrp(fd) == libc::getpgrp() }
}

/// Copies `from` to `to` until `from` ends (end of file, or `end` as its error: a
/// pseudo-terminal's master reads `EIO` once no slave is open) or `to` is gone. Waits with
/// `poll` where another process made either description non-blocking, so a flag someone
/// else set loses no byte.
fn copy(from: RawFd, to: RawFd, end: Option<i32>) -> io::Result<()> {
    let mut buf = vec![0u8; CHUNK];
    loop {
        // SAFETY: read into a buffer of its length.
        let n = match retrying(from, libc::POLLIN, || unsafe { libc::read(from, buf.as_mut_ptr().cast(), buf.len()) }) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.raw_os_error().is_some() && e.raw_os_error() == end => return Ok(()),
            Err(e) => return Err(e),
        };
        let mut left = &buf[..n];
        while !left.is_empty() {
            // SAFETY: write from a buffer of its length.
            let w = retrying(to, libc::POLLOUT, || unsafe { libc::write(to, left.as_ptr().cast(), left.len()) })?;
            left = &left[w..];
        }
    }
}

/// Runs `op` (a read or write of `fd`) until it does not fail with `EINTR`, waiting for
/// `events` on `fd` after an `EAGAIN`: what it returned, or its error.
fn retrying(fd: RawFd, events: libc::c_short, mut op: impl FnMut() -> isize) -> io::Result<usize> {
    loop {
        let n = op();
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => {}
            Some(libc::EAGAIN) => wait_for(fd, events),
            _ => return Err(e),
        }
    }
}

/// Waits until `fd` is ready for `events` (or has hung up).
fn wait_for(fd: RawFd, events: libc::c_short) {
    let mut p = libc::pollfd { fd, events, revents: 0 };
    // SAFETY: poll on one local pollfd.
    unsafe { libc::poll(&mut p, 1, -1) };
}

/// The user's terminal in raw mode while the worker has its input; its modes come back
/// when this is dropped.
struct RawMode {
    fd: RawFd,
    saved: libc::termios,
}

impl RawMode {
    fn enter(fd: RawFd) -> Option<RawMode> {
        // SAFETY: tcgetattr/tcsetattr with local termios values.
        unsafe {
            let mut saved: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(fd, &mut saved) != 0 {
                return None;
            }
            let mut raw = saved;
            libc::cfmakeraw(&mut raw);
            (libc::tcsetattr(fd, libc::TCSADRAIN, &raw) == 0).then_some(RawMode { fd, saved })
        }
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        // SAFETY: tcsetattr with the modes read at entry.
        unsafe { libc::tcsetattr(self.fd, libc::TCSADRAIN, &self.saved) };
    }
}

/// The relay while the worker runs.
pub struct Running {
    /// One message per output copy that ended.
    done: mpsc::Receiver<()>,
    /// How many output copies run.
    outputs: usize,
    /// The pseudo-terminal's master, to pass window changes on.
    master: Option<Arc<OwnedFd>>,
    /// The user's terminal's modes, restored when the relay is done.
    raw: Arc<Mutex<Terminal>>,
}

impl Running {
    /// Passes the user's terminal's new window size on to the worker's.
    pub fn window_changed(&self) {
        if let (Some(m), Some(tty)) = (&self.master, OUTER.iter().copied().find(|&fd| is_tty(fd))) {
            copy_window_size(tty, m.as_raw_fd());
        }
    }

    /// Waits, at most `within`, for the worker's output to be copied out (each stream ends
    /// when the last process holding it has closed it, so call this once the session's
    /// processes are gone), then restores the user's terminal.
    pub fn finish(self, within: Duration) {
        let deadline = std::time::Instant::now() + within;
        for _ in 0..self.outputs {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if self.done.recv_timeout(left).is_err() {
                break;
            }
        }
    }
}

impl Drop for Running {
    /// The user's terminal gets its modes back, and the input copy does not take it again.
    fn drop(&mut self) {
        *self.raw.lock().unwrap_or_else(|e| e.into_inner()) = Terminal::Done;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn set_nonblocking(fd: &OwnedFd) {
        // SAFETY: fcntl on a descriptor the test owns.
        unsafe {
            let fl = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
            assert_eq!(libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK), 0);
        }
    }

    /// Another process may set `O_NONBLOCK` on a description the relay reads or writes (the
    /// user's stdin, a pipe it shares): the copy waits for it instead of failing, and every
    /// byte arrives in order.
    #[test]
    fn a_copy_loses_no_byte_when_another_process_made_either_end_non_blocking() {
        let (from_r, from_w) = pipe().unwrap();
        let (to_r, to_w) = pipe().unwrap();
        set_nonblocking(&from_r);
        set_nonblocking(&to_w);
        let sent: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
        let data = sent.clone();
        let writer = std::thread::spawn(move || {
            let mut f = std::fs::File::from(from_w);
            for chunk in data.chunks(100_000) {
                std::io::Write::write_all(&mut f, chunk).unwrap();
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let reader = std::thread::spawn(move || {
            // Late, so the pipe it reads fills and the copy meets EAGAIN writing.
            std::thread::sleep(Duration::from_millis(50));
            let mut got = Vec::new();
            std::fs::File::from(to_r).read_to_end(&mut got).unwrap();
            got
        });
        copy(from_r.as_raw_fd(), to_w.as_raw_fd(), None).unwrap();
        drop(to_w);
        writer.join().unwrap();
        assert_eq!(reader.join().unwrap(), sent);
    }

    /// A pseudo-terminal's master reads `EIO` once no slave is open: the worker's terminal
    /// output ends there, after what the worker wrote before it closed its terminal.
    #[test]
    fn a_terminal_copy_ends_at_eio_with_all_the_worker_wrote() {
        // SAFETY: getuid has no preconditions.
        let (master, slave) = pty(-1, unsafe { libc::getuid() }).unwrap();
        let (out_r, out_w) = pipe().unwrap();
        let mut s = std::fs::File::from(slave);
        std::io::Write::write_all(&mut s, b"done").unwrap();
        drop(s);
        copy(master.as_raw_fd(), out_w.as_raw_fd(), Some(libc::EIO)).unwrap();
        drop(out_w);
        let mut got = String::new();
        std::fs::File::from(out_r).read_to_string(&mut got).unwrap();
        assert_eq!(got, "done");
    }

    /// A copy stops when what it writes to is gone (the reader of `pincer run`'s output
    /// exited), so the worker's next write fails as it would without the relay.
    #[test]
    fn a_copy_stops_when_its_reader_is_gone() {
        let (from_r, from_w) = pipe().unwrap();
        let (to_r, to_w) = pipe().unwrap();
        drop(to_r);
        std::io::Write::write_all(&mut std::fs::File::from(from_w), b"lost").unwrap();
        let e = copy(from_r.as_raw_fd(), to_w.as_raw_fd(), None).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EPIPE));
    }
}
