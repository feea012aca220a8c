//! The Pincer daemon: it owns the BPF enforcement and the twins, serves the socket
//! protocol ([`protocol`]) to the user's CLI and to workers' request tools, turns kernel
//! misses into implicit requests, queues escalations for the user and writes the audit log.
//!
//! - [`config`], `/etc/pincer/pincer.toml`.
//! - [`protocol`], the versioned JSON-lines socket protocol (and who may call what).
//! - [`core`], the actor: it owns the rooms below and serves each call; it never waits
//!   on a decider.
//! - [`callers`], who may make which call (the permission matrix, session owners).
//! - [`sessions`], the open sessions, their cgroups and their persistence in `sessions.json`.
//! - [`twins`], one twin per user over the trusted store.
//! - [`pipeline`], `submit(origin, request, waiter)`: tool requests, kernel misses and
//!   approvals decided, granted, counted and audited.
//! - [`decisions`], the decisions in flight: one lane per session, votes cast in tasks of
//!   their own and sent back to the actor.
//! - [`questions`], escalated requests waiting for the user; [`fleet`], those questions
//!   listed and answered from a fleet's other hosts.
//! - [`error`], the typed errors of calls (turned into replies only by the server).
//! - [`server`], the socket server; [`client`], its client.
//! - [`peer`], caller identification (`SO_PEERCRED`, `/proc/PID/cgroup`).
//! - [`resolve`], requested paths resolved inside the roots without following symlinks.
//! - [`audit`], the JSON-lines audit log; [`ship`], its shipping to a fleet's shared audit.
//! - [`mcp`], the MCP server exposing the request tool on stdio.
//! - [`worker`], starting a worker inside its session cgroup as an unprivileged user.
//! - [`limits`], each session cgroup's `pids.max` and `memory.max`.

pub mod audit;
pub mod callers;
pub mod code_places;
pub mod client;
pub mod config;
pub mod config_watch;
pub mod contain;
pub mod core;
pub mod decisions;
pub mod error;
pub mod fleet;
pub mod layers;
pub mod limits;
pub mod login_shell;
pub mod mcp;
pub mod peer;
pub mod pipeline;
pub mod priority;
pub mod protocol;
pub mod questions;
pub mod resolve;
pub mod revoke;
pub mod server;
pub mod sessions;
pub mod ship;
pub mod twins;
pub mod users;
pub mod worker;

use crate::decider::llm::Failures;
use crate::decider::{AnthropicChat, ChatConfig, Decider, LlmDecider, OfflineDecider, OpenAiChat};
use crate::kernel::KernelEvent;
use crate::sanitize::Sanitizer;
use audit::AuditLog;
use config::{Backend, Config};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::UnixListener;
use tokio::sync::mpsc;

pub use client::{Client, ClientError};
pub use config::{ConfigError, OnMiss};
pub use protocol::{Call, Reply};

/// The daemon logs failed model calls once per burst: the first at once, then a summary at
/// most this often (each failure is still a denial).
pub const MODEL_FAILURE_LOG_EVERY: Duration = Duration::from_secs(60);

/// Errors of the daemon.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The daemon must run as root.
    #[error("pincer daemon must run as root (it loads BPF programs and creates cgroups)")]
    NotRoot,
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A cgroup at or above `cgroup_parent` can be written by someone other than root.
    #[error("cgroup_parent {parent}: {dir} {problem}; sessions must sit under cgroups only root can write (a session could otherwise move a process across them with clone3(CLONE_INTO_CGROUP)), e.g. the default /sys/fs/cgroup/pincer")]
    CgroupParent {
        /// The configured `cgroup_parent`.
        parent: PathBuf,
        /// The directory or `cgroup.procs` file at fault.
        dir: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// The kernel enforcer could not be attached: the daemon never runs without it.
    #[error("cannot attach the kernel enforcement (the daemon does not run without it)")]
    Kernel(#[source] crate::kernel::KernelError),
    /// The sanitizer key could not be loaded or created.
    #[error("sanitizer key")]
    Sanitizer(#[source] crate::sanitize::SanitizeError),
    /// The decider could not be configured.
    #[error("decider")]
    Decider(#[source] crate::decider::DeciderError),
    /// The audit log could not be opened.
    #[error(transparent)]
    Audit(#[from] audit::AuditError),
    /// The actor could not start (state, resumed sessions).
    #[error(transparent)]
    Core(#[from] core::CoreError),
    /// The socket could not be bound.
    #[error("cannot listen on {path}")]
    Listen {
        /// The socket path.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

/// The name of the thread that compiles the content detectors at start (`warm_up`):
/// while it runs, the daemon is not warm yet.
pub const WARM_UP_THREAD: &str = "pincer-warm-up";

/// Builds the decider the configuration names.
pub fn decider_from_config(cfg: &config::DeciderConfig) -> Result<Arc<dyn Decider>, crate::decider::DeciderError> {
    let key_env = |default: &str| if cfg.api_key_env.is_empty() { default.to_string() } else { cfg.api_key_env.clone() };
    let chat = |default_url: &str, key: Option<String>| ChatConfig {
        base_url: if cfg.endpoint.is_empty() { default_url.to_string() } else { cfg.endpoint.clone() },
        api_key: key,
        model: cfg.model.clone(),
        timeout: Duration::from_secs(cfg.timeout_secs),
        max_tokens: 1024,
    };
    Ok(match cfg.backend {
        Backend::Offline => Arc::new(OfflineDecider::new()),
        Backend::OpenAi => {
            let key = std::env::var(key_env("OPENAI_API_KEY")).ok().filter(|k| !k.is_empty());
            Arc::new(LlmDecider::new(OpenAiChat::new(chat("https://api.openai.com/v1", key))?.with_failures(Failures::logging(MODEL_FAILURE_LOG_EVERY))))
        }
        Backend::Anthropic => {
            let env = key_env("ANTHROPIC_API_KEY");
            let key = std::env::var(&env).ok().filter(|k| !k.is_empty());
            if key.is_none() {
                return Err(crate::decider::DeciderError::MissingConfig { what: "API key", env: "the variable named by decider.api_key_env (default ANTHROPIC_API_KEY)" });
            }
            Arc::new(LlmDecider::new(AnthropicChat::new(chat("https://api.anthropic.com", key))?.with_failures(Failures::logging(MODEL_FAILURE_LOG_EVERY))))
        }
    })
}

/// Binds the daemon's socket: its directory is created (0755), a stale socket removed, and
/// the socket made connectable by every user (each call is checked by its caller's
/// credentials and cgroup).
pub fn bind(path: &Path) -> Result<UnixListener, DaemonError> {
    use std::os::unix::fs::PermissionsExt;
    let err = |source| DaemonError::Listen { path: path.into(), source };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(err(e)),
    }
    let l = UnixListener::bind(path).map_err(err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666)).map_err(err)?;
    Ok(l)
}

/// Everything a daemon runs with.
pub struct Parts {
    /// The actor's dependencies.
    pub core: core::CoreDeps,
    /// How peers' cgroups are found.
    pub lookup: peer::CgroupLookup,
    /// The kernel's events, file misses and reach denials (none: they are not read).
    pub events: Option<mpsc::Receiver<KernelEvent>>,
}

impl std::fmt::Debug for Parts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Parts").field("core", &self.core).finish_non_exhaustive()
    }
}

/// Runs the daemon on `listener` until `shutdown` completes; open sessions stay gated by
/// the pinned program and are resumed by the next daemon.
pub async fn run(parts: Parts, listener: UnixListener, shutdown: impl std::future::Future<Output = ()>) -> Result<(), DaemonError> {
    let audit = parts.core.audit.clone();
    let timeout = parts.core.config.escalation_timeout();
    let cgroup_parent = parts.core.config.cgroup_parent.clone();
    let answer_wait = Duration::from_secs(parts.core.config.store.answer_wait_secs);
    let spec = parts.core.config.store_spec();
    if spec.is_shared() {
        audit.spool_for(spec.clone(), parts.core.config.store.identities())?;
    }
    // The content detectors' patterns (several hundred regular expressions) compile on a
    // thread of their own now, not in the first decision, which would wait for them.
    if parts.core.config.warm_up {
        std::thread::Builder::new()
            .name(WARM_UP_THREAD.into())
            .spawn(crate::twin::content::warm_up)
            .map_err(|source| DaemonError::Listen { path: WARM_UP_THREAD.into(), source })?;
    }
    let core = core::Core::new(parts.core).await?;
    let (tx, rx) = mpsc::channel(256);
    let actor = tokio::spawn(core.run(rx));
    // A fleet's daemons learn each other's changes of the trusted state.
    let follow = match &spec {
        crate::store::StoreSpec::Postgres(settings) => {
            let (ntx, mut nrx) = mpsc::unbounded_channel();
            crate::store::pg::listen(settings.clone(), ntx).map_err(|source| DaemonError::Listen { path: "pincer-pg-listen".into(), source })?;
            let tx = tx.clone();
            Some(tokio::spawn(async move {
                while let Some(change) = nrx.recv().await {
                    if tx.send(core::Cmd::StateChanged(change)).await.is_err() {
                        break;
                    }
                }
            }))
        }
        _ => None,
    };
    let forward = parts.events.map(|mut events| {
        let tx = tx.clone();
        tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                let cmd = match event {
                    KernelEvent::Miss(m) => core::Cmd::Miss(m),
                    KernelEvent::Reach(r) => core::Cmd::Reach(r),
                };
                if tx.send(cmd).await.is_err() {
                    break;
                }
            }
        })
    });
    let shared = spec.is_shared().then_some(spec);
    let ctx = server::ServerCtx {
        actor: tx,
        audit,
        lookup: parts.lookup,
        escalation_timeout: timeout,
        answer_wait,
        shared,
        session_parent: cgroup_parent,
        open: Default::default(),
    };
    server::serve(listener, ctx, shutdown).await;
    if let Some(f) = forward {
        f.abort();
    }
    if let Some(f) = follow {
        // Dropping the receiver ends the listener thread.
        f.abort();
    }
    let _ = actor.await;
    Ok(())
}

/// Runs the real daemon: root check, kernel enforcement attached (or re-attached from its
/// pins), twins over the SQLite state, misses from the ring buffer, until SIGTERM or SIGINT.
pub async fn run_kernel_daemon(config: Config) -> Result<(), DaemonError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(DaemonError::NotRoot);
    }
    if let Some((dir, problem)) = sessions::writable_above(&config.cgroup_parent) {
        return Err(DaemonError::CgroupParent { parent: config.cgroup_parent.clone(), dir, problem });
    }
    // Everything the daemon creates is its own (state, audit log, staging files); the
    // socket is made connectable explicitly where it is bound.
    // SAFETY: umask(2) has no preconditions.
    unsafe { libc::umask(0o077) };
    let kcfg = crate::kernel::EnforcerConfig { pin_dir: config.pin_dir.clone(), reach: crate::kernel::ReachConfig::with_trusted_socket(&config.socket), held_programs: config.hold.enabled, ..Default::default() };
    let mut enforcer = crate::kernel::Enforcer::attach_or_reuse(&kcfg).map_err(DaemonError::Kernel)?;
    // An address the host gains later is this host's too: the list is read again on every
    // announced change, through a handle of its own on the pinned maps.
    let mut watch = crate::kernel::AddressWatch::new().map_err(|e| DaemonError::Kernel(crate::kernel::KernelError::HostAddresses(e)))?;
    let mut addresses = crate::kernel::Enforcer::reuse(&config.pin_dir).map_err(DaemonError::Kernel)?;
    tokio::spawn(async move {
        loop {
            if let Err(e) = watch.changed().await {
                tracing::error!(error = %e, "address watch failed: addresses added from now on are not known as this host's");
                break;
            }
            if let Err(e) = addresses.refresh_local_routes() {
                tracing::error!(error = %e, "cannot refresh this host's addresses");
            }
        }
    });
    let (holds, anchor) = start_hold(&config, &mut enforcer);
    let mut events = enforcer.events().map_err(DaemonError::Kernel)?;
    let (etx, erx) = mpsc::channel(1024);
    tokio::spawn(async move {
        loop {
            match events.next().await {
                Ok(event) => {
                    if etx.send(event).await.is_err() {
                        break;
                    }
                }
                Err(e) if ends_the_stream(&e) => {
                    tracing::error!(error = %e, "event stream failed");
                    break;
                }
                Err(e) => tracing::error!(error = %e, "skipped a kernel event that cannot be read"),
            }
        }
    });
    std::fs::create_dir_all(&config.state_dir).map_err(|source| DaemonError::Listen { path: config.state_dir.clone(), source })?;
    let sanitizer = Sanitizer::load_or_create(config.state_dir.join("prf.key")).map_err(DaemonError::Sanitizer)?;
    let decider = decider_from_config(&config.decider).map_err(DaemonError::Decider)?;
    let audit = Arc::new(AuditLog::open(&config.audit_log)?);
    let listener = bind(&config.socket)?;
    tracing::info!(socket = %config.socket.display(), decider = decider.name(), "pincer daemon ready");
    eprintln!("pincer daemon: listening on {} (decider {})", config.socket.display(), decider.name());
    if let Err(e) = crate::service::notify_ready() {
        tracing::warn!(error = %e, "cannot tell systemd the daemon is ready");
    }
    let parts = Parts {
        core: core::CoreDeps { config, enforcer, decider, sanitizer, audit, holds: holds.clone() },
        lookup: peer::kernel_lookup(),
        events: Some(erx),
    };
    let shutdown = async {
        terminated().await;
        tracing::info!("shutting down; enforcement stays pinned");
    };
    let result = run(parts, listener, shutdown).await;
    // Threads still held find no new grant: their accesses are denied.
    if let Some(h) = &holds {
        h.release_all();
    }
    drop(anchor);
    result
}

/// Completes on SIGTERM or SIGINT.
async fn terminated() {
    use tokio::signal::unix::{signal, SignalKind};
    match (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) {
        (Ok(mut t), Ok(mut i)) => {
            tokio::select! { _ = t.recv() => {}, _ = i.recv() => {} }
        }
        _ => std::future::pending::<()>().await,
    }
}

/// Runs the daemon on `config` as [`run_kernel_daemon`] does (its socket, store, audit log
/// and decider; sanitizer key in the state folder), but over `enforcer` and without kernel
/// misses, callers placed by `lookup`, until SIGTERM or SIGINT. `pincer bench fleet` runs
/// its daemons so, over maps in memory, where the kernel refuses LSM programs: nothing is
/// enforced, so it serves nothing but a benchmark.
pub async fn run_unenforced(config: Config, enforcer: crate::kernel::Enforcer, lookup: peer::CgroupLookup) -> Result<(), DaemonError> {
    std::fs::create_dir_all(&config.state_dir).map_err(|source| DaemonError::Listen { path: config.state_dir.clone(), source })?;
    let sanitizer = Sanitizer::load_or_create(config.state_dir.join("prf.key")).map_err(DaemonError::Sanitizer)?;
    let decider = decider_from_config(&config.decider).map_err(DaemonError::Decider)?;
    let audit = Arc::new(AuditLog::open(&config.audit_log)?);
    let listener = bind(&config.socket)?;
    let parts = Parts { core: core::CoreDeps { config, enforcer, decider, sanitizer, audit, holds: None }, lookup, events: None };
    run(parts, listener, terminated()).await
}

/// Whether an error from the kernel's event stream ends it. One record that
/// cannot be read is skipped: the kernel denied that access already, and the
/// records after it still need deciding. Only a failed poll ends the stream.
fn ends_the_stream(e: &crate::kernel::KernelError) -> bool {
    matches!(e, crate::kernel::KernelError::Poll(_))
}

/// Starts holding misses when configured and the kernel holds them: the FUSE mount, its
/// anchor, and the anchor's pid in the kernel's map. Otherwise (or if any step fails, which
/// is logged) the map says "no anchor" and every miss is denied at once.
fn start_hold(config: &Config, enforcer: &mut crate::kernel::Enforcer) -> (Option<crate::kernel::hold::Holds>, Option<crate::kernel::hold::Anchor>) {
    use crate::kernel::hold::{Anchor, Holds};
    let off = |enforcer: &mut crate::kernel::Enforcer| {
        if let Err(e) = enforcer.set_hold_anchor(0, 0) {
            tracing::error!(error = %e, "cannot clear the hold anchor");
        }
        (None, None)
    };
    if !config.hold.enabled {
        tracing::info!("holding misses is off ([hold] enabled = false): a miss is denied at once");
        return off(enforcer);
    }
    if !enforcer.holds_misses() {
        tracing::info!("this kernel does not hold misses (no held file_open): a miss is denied at once and retried");
        return off(enforcer);
    }
    let holds = Holds::new(std::time::Duration::from_millis(config.hold.max_ms), tokio::runtime::Handle::current())
        .with_locked_max(std::time::Duration::from_millis(config.hold.locked_max_ms));
    match Anchor::start(&config.hold.mountpoint, &config.pin_dir, holds.clone()) {
        Ok(anchor) => match enforcer.set_hold_anchor(anchor.pid(), config.hold.per_session) {
            Ok(()) => {
                tracing::info!(anchor = anchor.pid(), mount = %anchor.mountpoint().display(), max_ms = config.hold.max_ms, per_session = config.hold.per_session, "misses are held until decided");
                (Some(holds), Some(anchor))
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot name the hold anchor; a miss is denied at once");
                off(enforcer)
            }
        },
        Err(e) => {
            tracing::error!(error = %error::chain(&e), "cannot start the hold; a miss is denied at once");
            off(enforcer)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::KernelError;

    #[test]
    fn a_record_that_cannot_be_read_is_skipped_and_a_failed_poll_ends_the_stream() {
        assert!(!ends_the_stream(&KernelError::ShortEvent { kind: "miss_event", len: 10, expected: 100 }));
        assert!(!ends_the_stream(&KernelError::UnknownEvent { record: 99, len: 352 }));
        assert!(ends_the_stream(&KernelError::Poll(std::io::Error::from(std::io::ErrorKind::Other))));
    }
}
