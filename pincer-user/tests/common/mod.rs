//! Helpers shared by the integration tests of `pincer-user`: the persona the daemon tests
//! import, a daemon configuration inside a temporary folder, and a daemon started on it with
//! the shipped enforcer over maps in memory (this host's kernel refuses LSM programs).
// Each test binary uses its own subset of these helpers.
#![allow(dead_code)]

pub mod host;
pub mod pg;
pub mod twin;

use pincer::daemon::audit::AuditLog;
use pincer::daemon::config::Config;
use pincer::daemon::core::CoreDeps;
use pincer::daemon::peer::CgroupLookup;
use pincer::daemon::{bind, run, Parts};
use pincer::decider::{Decider, OfflineDecider};
use pincer::kernel::{Enforcer, KernelEvent};
use pincer::sanitize::{Sanitizer, SecretKey};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// The shipped persona the daemon tests import.
pub const PERSONA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../corpus/software-dev");
/// A cgroup outside every session: where the user's own processes run.
pub const OUTSIDE: &str = "/sys/fs/cgroup/user.slice/user-1000.slice";
/// A prompt of the persona's kind of task.
pub const TODO_PROMPT: &str = "Update my todo: tick off the release notes item and add 'look at the ledger backups'.";

/// Copies the directory tree `from` to `to` (created if missing), files and folders only.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), &t).unwrap();
        }
    }
}

/// A copy of the persona's workspace in `dir/ws`, canonicalized (the daemon resolves roots).
pub fn persona_workspace(dir: &Path) -> PathBuf {
    let ws = dir.join("ws");
    copy_dir(&Path::new(PERSONA).join("workspace"), &ws);
    ws.canonicalize().unwrap()
}

/// The persona's history and policies, as `pincer import` sends them.
pub fn persona_state() -> (String, String) {
    let history = std::fs::read_to_string(Path::new(PERSONA).join("history.jsonl")).unwrap();
    let policies = std::fs::read_to_string(Path::new(PERSONA).join("policies.jsonl")).unwrap();
    (history, policies)
}

/// A configuration whose state, socket, audit log and cgroups all lie in `dir`, with a
/// 30 s wait for the user's answers.
pub fn config_in(dir: &Path) -> Config {
    let mut config = Config {
        state_dir: dir.join("state"),
        socket: dir.join("pincer.sock"),
        audit_log: dir.join("audit.jsonl"),
        cgroup_parent: dir.join("cg"),
        ..Config::default()
    };
    config.escalation.timeout_secs = 30;
    // The session "cgroups" here are plain directories: no limits to write (the VM tests
    // check the limits on real cgroups).
    config.limits = pincer::daemon::limits::LimitsConfig::unlimited();
    // Nor layers: a read-write open path's layer is an overlay the daemon mounts on the
    // host (the VM tests check them on real sessions).
    config.containment.open_paths.retain(|o| o.mode != pincer::daemon::contain::OpenMode::ReadWrite);
    config
}

/// A daemon running on a test's runtime.
pub struct Daemon {
    /// Send (or drop) to shut the daemon down.
    pub stop: oneshot::Sender<()>,
    /// The daemon's task; it ends after `stop`.
    pub task: tokio::task::JoinHandle<()>,
}

/// Starts the daemon on `config`'s socket with the offline decider, `enforcer` (over
/// [`pincer::kernel::MemoryMaps`]), a sanitizer of `key`, peers placed by `lookup`, and kernel events from
/// `events` if given.
pub fn start_daemon(config: &Config, enforcer: Enforcer, lookup: CgroupLookup, key: [u8; 32], events: Option<mpsc::Receiver<KernelEvent>>) -> Daemon {
    start_daemon_with(config, enforcer, lookup, key, events, Arc::new(OfflineDecider::new()))
}

/// As [`start_daemon`], with `decider` making the votes and the pre-committed policies.
pub fn start_daemon_with(config: &Config, enforcer: Enforcer, lookup: CgroupLookup, key: [u8; 32], events: Option<mpsc::Receiver<KernelEvent>>, decider: Arc<dyn Decider>) -> Daemon {
    let parts = Parts {
        core: CoreDeps {
            config: config.clone(),
            enforcer,
            decider,
            sanitizer: Sanitizer::new(SecretKey::from_bytes(key)),
            audit: Arc::new(AuditLog::open(&config.audit_log).unwrap()),
            holds: None,
        },
        lookup,
        events,
    };
    let listener = bind(&config.socket).unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        run(parts, listener, async {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    Daemon { stop, task }
}
