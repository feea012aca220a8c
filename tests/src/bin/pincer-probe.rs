//! A probe for the VM tests that run it inside and outside a session. Most operations try
//! one IPC object and print the outcome (`ok`, or the errno):
//! `mq-open NAME` (an existing POSIX message queue), `mq-own NAME` (create, send, receive,
//! unlink one), `mq-make NAME` (create one, mode 0600, and leave it), `shm-get KEY` (an
//! existing SysV segment: prints its id), `shm-at ID` (attach it), `shm-make KEY` (create a
//! segment, mode 0600: prints its id), `key-add NAME` (a `user` key in the user keyring
//! `@u`: prints its serial), `key-read SERIAL` (read a key's payload), `key-own NAME` (a
//! key in the caller's session keyring `@s`, read back). `watch-signals FILE STOP` appends the name of every
//! `SIGINT`, `SIGQUIT` and `SIGWINCH` it receives to FILE (after a first line `ready`), one
//! per line, until the file STOP exists; then exits 5. `fork-hold N FILE` forks up to N
//! children that wait to be killed, writes `forked K` (and `errno E` of the first refused
//! fork) to FILE, then waits itself. `fork N` forks N children that exit at once and prints
//! the same. `alloc MIB` allocates and touches MIB mebibytes and prints `ok`.

use std::ffi::CString;

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(-1)
}

fn outcome(ok: bool) -> String {
    if ok { "ok".into() } else { format!("errno {}", errno()) }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(op), Some(arg)) = (args.first(), args.get(1)) else {
        eprintln!("usage: pincer-ipc-probe OP ARG");
        std::process::exit(2);
    };
    if op == "watch-signals" {
        watch_signals(arg);
    }
    if op == "background-job" {
        background_job(arg, &args[2..]);
    }
    if op == "fork-hold" || op == "fork" {
        forks(op == "fork-hold", arg.parse().expect("a count"), args.get(2).map(String::as_str));
    }
    let name = CString::new(arg.as_str()).expect("NUL in argument");
    let number = || arg.parse::<i32>().expect("a number");
    // SAFETY: plain IPC system calls on a valid C string and local buffers.
    let line = unsafe {
        match op.as_str() {
            "mq-open" => {
                let q = libc::mq_open(name.as_ptr(), libc::O_RDWR);
                let r = outcome(q >= 0);
                if q >= 0 {
                    libc::mq_close(q);
                }
                r
            }
            "mq-make" => {
                let q = libc::mq_open(name.as_ptr(), libc::O_RDWR | libc::O_CREAT | libc::O_EXCL, 0o600, std::ptr::null_mut::<libc::mq_attr>());
                outcome(q >= 0)
            }
            "mq-own" => {
                let q = libc::mq_open(name.as_ptr(), libc::O_RDWR | libc::O_CREAT | libc::O_EXCL, 0o600, std::ptr::null_mut::<libc::mq_attr>());
                if q < 0 {
                    outcome(false)
                } else {
                    let mut buf = [0u8; 8192];
                    let mut prio = 0;
                    let sent = libc::mq_send(q, b"hello".as_ptr().cast(), 5, 0) == 0;
                    let got = sent && libc::mq_receive(q, buf.as_mut_ptr().cast(), buf.len(), &mut prio) == 5 && &buf[..5] == b"hello";
                    let r = outcome(got);
                    libc::mq_close(q);
                    libc::mq_unlink(name.as_ptr());
                    r
                }
            }
            "shm-make" => {
                let id = libc::shmget(number(), 4096, libc::IPC_CREAT | libc::IPC_EXCL | 0o600);
                if id < 0 { outcome(false) } else { id.to_string() }
            }
            "shm-get" => {
                let id = libc::shmget(number(), 0, 0);
                if id < 0 { outcome(false) } else { id.to_string() }
            }
            "shm-at" => {
                let p = libc::shmat(number(), std::ptr::null(), 0);
                let ok = p as isize != -1;
                let r = outcome(ok);
                if ok {
                    libc::shmdt(p);
                }
                r
            }
            "key-add" => {
                let serial = add_key(&name, KEY_SPEC_USER_KEYRING);
                if serial < 0 { outcome(false) } else { serial.to_string() }
            }
            "key-read" => outcome(read_key(number())),
            "alloc" => {
                let mib = number() as usize;
                let mut v: Vec<u8> = Vec::with_capacity(mib << 20);
                // Touch every page so the memory is really used.
                for _ in 0..mib << 8 {
                    v.extend_from_slice(&[1u8; 4096]);
                }
                std::hint::black_box(&v);
                "ok".to_string()
            }
            "key-own" => {
                let serial = add_key(&name, KEY_SPEC_SESSION_KEYRING);
                outcome(serial >= 0 && read_key(serial as i32))
            }
            other => {
                eprintln!("unknown operation {other:?}");
                std::process::exit(2);
            }
        }
    };
    println!("{line}");
}

/// `fork-hold N FILE` and `fork N` (see the module doc).
fn forks(hold: bool, n: usize, file: Option<&str>) -> ! {
    let mut forked = 0;
    let mut refused = None;
    for _ in 0..n {
        // SAFETY: fork; the child only waits (killed with its parent) or exits.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            refused = Some(errno());
            break;
        }
        if pid == 0 {
            // SAFETY: plain syscalls in the child.
            unsafe {
                if hold {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    loop {
                        libc::pause();
                    }
                }
                libc::_exit(0);
            }
        }
        forked += 1;
        if !hold {
            // SAFETY: waitpid on our own child.
            unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
        }
    }
    let line = match refused {
        Some(e) => format!("forked {forked} errno {e}"),
        None => format!("forked {forked}"),
    };
    match file {
        Some(f) => std::fs::write(f, format!("{line}\n")).expect("write the fork result"),
        None => println!("{line}"),
    }
    if hold {
        loop {
            // SAFETY: pause has no preconditions.
            unsafe { libc::pause() };
        }
    }
    std::process::exit(0);
}

/// Special key ids of `<linux/keyctl.h>`.
const KEY_SPEC_SESSION_KEYRING: i32 = -3;
const KEY_SPEC_USER_KEYRING: i32 = -4;
/// `KEYCTL_READ`.
const KEYCTL_READ: libc::c_long = 11;
/// The payload of the keys the probe adds.
const PAYLOAD: &[u8] = b"the probe's key";

/// Adds a `user` key `name` to `keyring`: its serial, or -1.
fn add_key(name: &CString, keyring: i32) -> i64 {
    // SAFETY: add_key with valid C strings and a payload buffer of the given length.
    unsafe { libc::syscall(libc::SYS_add_key, c"user".as_ptr(), name.as_ptr(), PAYLOAD.as_ptr(), PAYLOAD.len(), keyring) }
}

/// Whether the key `serial` reads back the probe's payload.
fn read_key(serial: i32) -> bool {
    let mut buf = [0u8; 64];
    // SAFETY: keyctl READ into a local buffer of the given length.
    let n = unsafe { libc::syscall(libc::SYS_keyctl, KEYCTL_READ, serial, buf.as_mut_ptr(), buf.len()) };
    n == PAYLOAD.len() as i64 && &buf[..PAYLOAD.len()] == PAYLOAD
}

/// `watch-signals FILE STOP` (see the module doc).
fn watch_signals(file: &str) -> ! {
    use std::io::Write;
    let stop = std::env::args().nth(3).expect("watch-signals FILE STOP");
    let mut out = std::fs::OpenOptions::new().create(true).append(true).open(file).expect("open the signal log");
    // SAFETY: sigset_t and siginfo_t are plain data; the signals are blocked before waiting.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGINT, libc::SIGQUIT, libc::SIGWINCH] {
            libc::sigaddset(&mut set, s);
        }
        libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        writeln!(out, "ready").unwrap();
        let tick = libc::timespec { tv_sec: 0, tv_nsec: 50_000_000 };
        loop {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let sig = libc::sigtimedwait(&set, &mut info, &tick);
            let name = match sig {
                libc::SIGINT => "INT",
                libc::SIGQUIT => "QUIT",
                libc::SIGWINCH => "WINCH",
                _ => {
                    if std::path::Path::new(&stop).exists() {
                        std::process::exit(5);
                    }
                    continue;
                }
            };
            writeln!(out, "{name}").unwrap();
        }
    }
}

/// `background-job TTY CMD...`: the user's interactive shell on terminal `TTY` running
/// `CMD &` and then `wait`: a new session whose controlling terminal is `TTY` (on stdin,
/// stdout and stderr), `CMD` in a process group of its own while the shell's group keeps
/// the terminal's foreground. Exits with `CMD`'s status; waits for as long as `CMD` is
/// stopped (a background job that reads the terminal is stopped by `SIGTTIN`).
fn background_job(tty: &str, cmd: &[String]) -> ! {
    let tty = CString::new(tty).expect("NUL in the terminal's path");
    let argv: Vec<CString> = cmd.iter().map(|a| CString::new(a.as_str()).expect("NUL in the command")).collect();
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // SAFETY: setsid/open/ioctl/dup2/fork/setpgid/execv/waitpid on local values; the
    // child only makes async-signal-safe calls before exec.
    unsafe {
        let fd = libc::open(tty.as_ptr(), libc::O_RDWR);
        if libc::setsid() < 0 || fd < 0 {
            std::process::exit(125);
        }
        let fd = if libc::ioctl(fd, libc::TIOCSCTTY, 0) == 0 { fd } else { libc::open(tty.as_ptr(), libc::O_RDWR) };
        for target in 0..3 {
            libc::dup2(fd, target);
        }
        let child = libc::fork();
        if child == 0 {
            libc::setpgid(0, 0);
            libc::execv(ptrs[0], ptrs.as_ptr());
            libc::_exit(127);
        }
        libc::setpgid(child, child);
        let mut status = 0;
        libc::waitpid(child, &mut status, 0);
        std::process::exit(if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { 128 + libc::WTERMSIG(status) });
    }
}
