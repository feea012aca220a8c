//! Command-line interface: one file per subcommand.

mod approve;
mod bench;
mod conn;
mod daemon;
mod deny;
mod doctor;
mod eval;
mod history;
mod hook;
mod import;
mod log;
mod mcp;
mod pending;
mod policy;
mod prompt;
mod relay;
mod request;
mod run;
mod store;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Pincer: least privilege for AI coding agents, enforced at the resource.
#[derive(Parser)]
#[command(name = "pincer", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Replay a persona corpus against the seven defenses and report Table 2.
    Eval(eval::EvalArgs),
    /// Benchmarks (`pincer bench decide`: latency of an offline three-vote decision).
    Bench(bench::BenchArgs),
    /// The daemon (root): kernel enforcement, twins, the socket protocol, the audit log.
    Daemon(daemon::DaemonArgs),
    /// Run a worker command in a new gated session (root; the worker runs as --user).
    Run(run::RunArgs),
    /// A later prompt of the user in an open session.
    Prompt(prompt::PromptArgs),
    /// The worker's resource request tool: exits 0 if granted, 1 with the reason if denied.
    Request(request::RequestArgs),
    /// The resource request tool as an MCP server on stdio (`request_resource`).
    Mcp(mcp::McpArgs),
    /// Questions waiting for the user.
    Pending(pending::PendingArgs),
    /// Approve a pending question (`--scope once|session|always`, default always).
    Approve(approve::ApproveArgs),
    /// Deny a pending question.
    Deny(approve::AnswerArgs),
    /// Your standing approvals and policies (`pincer policy list`, `pincer policy remove ID`).
    Policy(policy::PolicyArgs),
    /// The audit log of your sessions.
    Log(log::LogArgs),
    /// Import trusted history and policies (corpus format) into the twin's state.
    Import(import::ImportArgs),
    /// Agent hooks (`pincer hook claude-code`: Claude Code's PreToolUse hook).
    Hook(hook::HookArgs),
    /// Trusted history from an agent's own transcripts (`pincer history convert`).
    History(history::HistoryArgs),
    /// The trusted store: `migrate` its schema, `export`/`import` a user's state between
    /// backends (root).
    Store(store::StoreArgs),
    /// Check that this host can run the daemon; prints the fix for each failure.
    Doctor(doctor::DoctorArgs),
    /// A session's init (started by `pincer run` in the session's PID namespace).
    #[command(name = "session-init", hide = true)]
    SessionInit(run::InitArgs),
}

/// Parses the command line, runs the subcommand and maps errors to an exit code.
pub fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    match try_main(parse(std::env::args_os().collect())) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("pincer: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The session's init (`pincer session-init`, started by `pincer run` for every session)
/// is parsed alone: building the parser of every subcommand was most of its start-up.
#[derive(Parser)]
#[command(name = "pincer session-init")]
struct InitCli {
    #[command(flatten)]
    args: run::InitArgs,
}

/// The command line `args` (the program's name first), parsed; exits with clap's message
/// on an error or a request for help.
fn parse(args: Vec<std::ffi::OsString>) -> Cli {
    if args.get(1).is_some_and(|a| a == crate::daemon::worker::INIT_SUBCOMMAND) {
        return Cli { command: Command::SessionInit(InitCli::parse_from(&args[1..]).args) };
    }
    Cli::parse_from(args)
}

fn try_main(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Eval(args) => eval::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Daemon(args) => daemon::run(args),
        Command::Run(args) => run::run(args),
        Command::Prompt(args) => prompt::run(args),
        Command::Request(args) => request::run(args),
        Command::Mcp(args) => mcp::run(args),
        Command::Pending(args) => pending::run(args),
        Command::Approve(args) => approve::run(args),
        Command::Deny(args) => deny::run(args),
        Command::Policy(args) => policy::run(args),
        Command::Log(args) => log::run(args),
        Command::Import(args) => import::run(args),
        Command::Hook(args) => hook::run(args),
        Command::History(args) => history::run(args),
        Command::Store(args) => store::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::SessionInit(args) => run::session_init(args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_init_is_parsed_alone_and_as_before() {
        let line = |a: &[&str]| a.iter().map(std::ffi::OsString::from).collect::<Vec<_>>();
        let Command::SessionInit(args) = parse(line(&["pincer", "session-init", "--uid=1000", "--gid=100", "--", "sh", "-c", "x"])).command else {
            panic!("not the session's init");
        };
        assert_eq!((args.uid, args.gid, args.command.as_slice()), (1000, 100, ["sh", "-c", "x"].map(String::from).as_slice()));
        assert!(InitCli::try_parse_from(["session-init", "--uid=1"]).is_err(), "--gid and the command are required");
        assert!(matches!(parse(line(&["pincer", "doctor"])).command, Command::Doctor(_)));
    }
}
