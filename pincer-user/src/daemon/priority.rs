//! The daemon's CPU priority.
//!
//! A session's held access waits for the daemon, and the daemon shares the CPUs with the
//! sessions' processes: scheduled as their equal, it gets one share among theirs, and the
//! busier the sessions are, the longer each of their held accesses waits. So the daemon's
//! threads run at a higher priority than the sessions' processes (`nice` in the
//! configuration, -10 by default), as auditd's `priority_boost` does for the audit
//! daemon. The daemon only runs when sessions ask it to decide, so the boost never gives it
//! more CPU than their requests need.
//!
//! Threads inherit their niceness, and so do processes: what the daemon starts (the user's
//! login shell, read for its environment) gets back the niceness the daemon started with
//! before it runs anything. A session's worker is started by `pincer run`, which keeps the
//! niceness it was run with; the worker's start restores it all the same, so a worker
//! started from a raised process would not inherit the boost either.

use std::sync::atomic::{AtomicI32, Ordering};

/// The niceness the process had before [`raise`] (what its children get back);
/// [`NOT_RAISED`] until then.
static STARTED_WITH: AtomicI32 = AtomicI32::new(NOT_RAISED);
const NOT_RAISED: i32 = i32::MIN;

/// Sets the calling thread's niceness to `nice` (the threads it starts from then on inherit
/// it), after remembering the one it had for [`restore_in_child`].
pub fn raise(nice: i32) -> std::io::Result<()> {
    STARTED_WITH.store(current()?, Ordering::Relaxed);
    set(nice)
}

/// Sets the calling thread's niceness (async-signal-safe).
fn set(nice: i32) -> std::io::Result<()> {
    // SAFETY: setpriority on the calling thread (PRIO_PROCESS with 0 is the caller's thread).
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The calling thread's niceness.
pub fn current() -> std::io::Result<i32> {
    // getpriority can return -1 as a value: errno tells a failure apart.
    // SAFETY: errno is this thread's; getpriority has no preconditions.
    unsafe {
        *libc::__errno_location() = 0;
        let n = libc::getpriority(libc::PRIO_PROCESS, 0);
        if n == -1 && *libc::__errno_location() != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(n)
    }
}

/// In a child, between fork and exec: back to the niceness the process had before
/// [`raise`] (nothing to do if it never raised its own). Raising a niceness needs no
/// privilege, so this works after the child has dropped root too. Only async-signal-safe
/// calls.
pub fn restore_in_child() -> std::io::Result<()> {
    let nice = STARTED_WITH.load(Ordering::Relaxed);
    if nice == NOT_RAISED {
        return Ok(());
    }
    set(nice)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_gets_back_the_niceness_the_daemon_started_with() {
        // Run in a thread of its own: niceness is per thread, and the test's other threads
        // keep theirs. Raising the niceness (lowering the priority) needs no privilege.
        std::thread::spawn(|| {
            let before = current().unwrap();
            // Not raised: a child keeps what it inherits.
            restore_in_child().unwrap();
            assert_eq!(current().unwrap(), before);
            let boosted = (before + 5).min(19);
            raise(boosted).unwrap();
            assert_eq!(current().unwrap(), boosted);
            let mut cmd = std::process::Command::new("sh");
            cmd.args(["-c", "cut -d' ' -f19 /proc/self/stat"]);
            let inherited = String::from_utf8(cmd.output().unwrap().stdout).unwrap();
            assert_eq!(inherited.trim(), boosted.to_string(), "a child inherits the thread's niceness");
            use std::os::unix::process::CommandExt;
            // SAFETY: restore_in_child makes one async-signal-safe call.
            unsafe {
                cmd.pre_exec(restore_in_child);
            }
            let restored = String::from_utf8(cmd.output().unwrap().stdout).unwrap();
            // The child's niceness is what the thread had before the raise: only the
            // daemon's own threads keep the raise.
            assert_eq!(restored.trim(), before.to_string());
        })
        .join()
        .unwrap();
    }
}
