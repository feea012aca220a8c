//! `pincer run [--root DIR]... [--user NAME] --prompt TEXT -- COMMAND...`: runs a worker in
//! a new gated session and prints the session's summary when it exits. The worker's
//! stdin, stdout and stderr are its own, relayed (see [`super::relay`]).

use super::conn::{runtime, Conn};
use super::relay::{Relay, Running};
use anyhow::Context;
use clap::Args;
use crate::daemon::client::Client;
use crate::daemon::protocol::{SessionInfo, SessionMode};
use crate::daemon::users;
use crate::daemon::worker::{self, WorkerSpec};
use crate::daemon::{Call, Reply};
use std::path::PathBuf;
use std::process::ExitCode;

/// The session mode on the command line.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Mode {
    /// Deny misses (the default).
    Enforce,
    /// Report misses and let them through.
    Shadow,
}

/// Arguments of `pincer run`.
#[derive(Args)]
pub struct RunArgs {
    /// A protected root (repeatable; default: the configuration's `default_roots`).
    #[arg(long = "root", value_name = "DIR")]
    roots: Vec<PathBuf>,
    /// The unprivileged user the worker runs as, who owns the session (default: $SUDO_UID).
    #[arg(long)]
    user: Option<String>,
    /// The user's first prompt (the twin makes the session's pre-committed policy from it).
    #[arg(long)]
    prompt: String,
    /// `enforce` denies every miss; `shadow` lets misses through and reports them, so the
    /// audit log shows what enforcing would deny (never-grantable paths stay denied).
    #[arg(long, value_enum, default_value_t = Mode::Enforce)]
    mode: Mode,
    #[command(flatten)]
    conn: Conn,
    /// The worker command.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<String>,
}

fn error_reply(r: Reply) -> anyhow::Error {
    match r {
        Reply::Error { message, .. } => anyhow::anyhow!("{message}"),
        other => anyhow::anyhow!("unexpected reply: {other:?}"),
    }
}

/// The summary printed when a session ends.
pub fn summary(s: &SessionInfo, revoked: usize) -> String {
    let c = &s.counters;
    format!(
        "pincer: session {} ended: {} requests, {} grants, {} denials, {} escalations, {} kernel misses; \
         tokens {} in / {} out ({} calls); {} grants revoked",
        s.session, c.requests, c.grants, c.denials, c.escalations, c.misses, c.tokens.input, c.tokens.output, c.tokens.calls, revoked
    )
}

/// Creates the session, runs the worker, forwards signals, ends the session.
pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        anyhow::bail!("pincer run needs root to place the worker in its session cgroup and drop to --user; run it with sudo");
    }
    let account = match (&args.user, std::env::var("SUDO_UID").ok().and_then(|u| u.parse::<u32>().ok())) {
        (Some(name), _) => users::by_name(name)?,
        (None, Some(uid)) => users::by_uid(uid),
        (None, None) => anyhow::bail!("name the unprivileged user the worker runs as with --user (or run under sudo)"),
    };
    if account.uid == 0 {
        anyhow::bail!("the worker must not run as root: name an unprivileged user with --user");
    }
    let socket = args.conn.socket()?;
    let rt = runtime()?;
    rt.block_on(async move {
        let mut client = Client::connect(&socket).await?;
        let roots = args.roots.iter().map(|r| std::path::absolute(r).unwrap_or_else(|_| r.clone())).collect();
        let info = match client.call(Call::CreateSession { owner_uid: account.uid, roots, prompt: args.prompt.clone(), mode: match args.mode { Mode::Enforce => SessionMode::Enforce, Mode::Shadow => SessionMode::Shadow } }).await? {
            Reply::Session(info) => info,
            other => return Err(error_reply(other).context("cannot create the session")),
        };
        eprintln!(
            "pincer: session {} for {} (cgroup {}, cgroup_id {}, roots {}), pre-committed policy of {} entries",
            info.session,
            account.name,
            info.cgroup.display(),
            info.cgroup_id,
            info.roots.iter().map(|r| r.display().to_string()).collect::<Vec<_>>().join(", "),
            info.policy_entries
        );
        let spec = WorkerSpec {
            cgroup: info.cgroup.clone(),
            uid: account.uid,
            gid: account.gid,
            command: args.command.clone(),
            env: vec![
                ("PINCER_SESSION".into(), info.session.clone()),
                ("PINCER_SOCKET".into(), socket.to_string_lossy().into_owned()),
                ("HOME".into(), account.home.to_string_lossy().into_owned()),
                ("USER".into(), account.name.clone()),
                ("LOGNAME".into(), account.name.clone()),
            ]
            .into_iter()
            .chain(info.scratch.iter().map(|d| ("TMPDIR".to_string(), d.to_string_lossy().into_owned())))
            .collect(),
            namespaces: info.namespaces,
            layers: info.layers.clone(),
        };
        let started = Relay::prepare(account.uid).context("cannot give the worker streams of its own").and_then(|relay| {
            let mut c = worker::command(&spec)?;
            let [stdin, stdout, stderr] = relay.worker_stdio()?;
            c.stdin(stdin).stdout(stdout).stderr(stderr);
            let child = c.spawn().with_context(|| format!("cannot start {:?}", args.command[0]))?;
            Ok((child, relay.start()?))
        });
        let (status, relay) = match started {
            Ok((mut child, relay)) => (wait_forwarding_signals(&mut child, &relay).await, Some(relay)),
            Err(e) => (Err(e), None),
        };
        // The session ends whatever happened to the worker: grants revoked, cgroup removed.
        let mut client = Client::connect(&socket).await?;
        let ended = client.call(Call::EndSession { session: info.session.clone() }).await;
        // Its processes are gone, and with them every holder of the worker's streams: the
        // last of its output is copied out and the user's terminal gets its modes back.
        if let Some(relay) = relay {
            relay.finish(OUTPUT_DRAIN);
        }
        match ended? {
            Reply::Summary { session, revoked } => eprintln!("{}", summary(&session, revoked)),
            other => eprintln!("pincer: cannot end session {}: {}", info.session, error_reply(other)),
        }
        let status = status?;
        use std::os::unix::process::ExitStatusExt;
        let code = status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
        Ok(ExitCode::from(code.clamp(0, 255) as u8))
    })
}

/// How long `pincer run` waits, once the session has ended, for the worker's last output.
const OUTPUT_DRAIN: std::time::Duration = std::time::Duration::from_secs(5);

/// Waits for the worker, forwarding `SIGINT`, `SIGTERM`, `SIGHUP` and `SIGQUIT` sent to
/// `pincer run`, and passing window changes on to the worker's terminal.
async fn wait_forwarding_signals(child: &mut tokio::process::Child, relay: &Running) -> anyhow::Result<std::process::ExitStatus> {
    use tokio::signal::unix::{signal, SignalKind};
    let pid = child.id().context("the worker has no pid")? as i32;
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
    let mut quit = signal(SignalKind::quit())?;
    let mut winch = signal(SignalKind::window_change())?;
    loop {
        let sig = tokio::select! {
            st = child.wait() => return Ok(st?),
            _ = int.recv() => libc::SIGINT,
            _ = term.recv() => libc::SIGTERM,
            _ = hup.recv() => libc::SIGHUP,
            _ = quit.recv() => libc::SIGQUIT,
            _ = winch.recv() => {
                relay.window_changed();
                continue;
            }
        };
        // SAFETY: kill(2) on the worker's pid.
        unsafe { libc::kill(pid, sig) };
    }
}

/// Arguments of the hidden `pincer session-init` (see [`worker::session_init`]).
#[derive(Args)]
pub struct InitArgs {
    /// The user id the command runs as.
    #[arg(long)]
    pub(super) uid: u32,
    /// The group id the command runs as.
    #[arg(long)]
    pub(super) gid: u32,
    /// The command.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub(super) command: Vec<String>,
}

/// Runs the session's init and exits with the command's status.
pub fn session_init(args: InitArgs) -> anyhow::Result<ExitCode> {
    let code = worker::session_init(args.uid, args.gid, &args.command)?;
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}
