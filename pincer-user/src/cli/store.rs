//! `pincer store migrate|export|import`: the trusted store's schema and a user's state
//! moved between backends. Run as root on a host whose configuration names the store
//! (`[store]`); `--sqlite FILE` names a SQLite file instead, so a state can be exported from
//! one backend and imported into the other.

use anyhow::Context;
use clap::{Args, Subcommand};
use crate::daemon::config::Config;
use crate::store::{Store, StoreSpec, TrustedState, WorkspaceSnapshot};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `pincer store`.
#[derive(Args)]
pub struct StoreArgs {
    #[command(subcommand)]
    command: StoreCommand,
    /// Configuration file naming the store (default: $PINCER_CONFIG or /etc/pincer/pincer.toml).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// Use this SQLite file instead of the configured store.
    #[arg(long, global = true, value_name = "FILE")]
    sqlite: Option<PathBuf>,
}

#[derive(Subcommand)]
enum StoreCommand {
    /// Create or upgrade the store's schema to this build's version (the daemon does it at
    /// start too).
    Migrate,
    /// Write a user's whole trusted state as JSON (to stdout, or --out).
    Export {
        /// The user whose state is exported, as the store names them (SQLite: the login
        /// name; a fleet's database: the fleet identity `[store.users]` maps them to).
        #[arg(long)]
        user: String,
        /// Write here instead of stdout (created 0600).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Write a state exported by `pincer store export` into this store, for a user who has
    /// no state in it yet.
    Import {
        /// The user whose state it becomes, as the store names them (a fleet's database: the
        /// fleet identity `[store.users]` maps them to, or `name@host` for an unmapped one).
        #[arg(long)]
        user: String,
        /// The exported JSON file.
        file: PathBuf,
    },
}

/// What `pincer store export` writes: the user's trusted state and, if the store holds one,
/// their workspace snapshot (an export without it, as earlier versions wrote, imports too).
#[derive(serde::Serialize, serde::Deserialize)]
struct Exported {
    #[serde(flatten)]
    state: TrustedState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    workspace: Option<WorkspaceSnapshot>,
}

fn spec(args: &StoreArgs) -> anyhow::Result<StoreSpec> {
    if let Some(f) = &args.sqlite {
        return Ok(StoreSpec::Sqlite(f.clone()));
    }
    Ok(Config::load(args.config.as_deref())?.store_spec())
}

/// Runs the subcommand.
pub fn run(args: StoreArgs) -> anyhow::Result<ExitCode> {
    let spec = spec(&args)?;
    match &args.command {
        StoreCommand::Migrate => {
            let store = match &spec {
                StoreSpec::Postgres(s) => Store::connect_postgres(s.clone())?,
                other => other.open()?,
            };
            let (before, after) = store.migrate()?;
            println!("{}: schema version {before} -> {after}", spec.describe());
        }
        StoreCommand::Export { user, out } => {
            let store = spec.open()?;
            let state = store.load_state(user)?;
            let workspace = store.workspace(user)?;
            let snapshot = workspace.as_ref().map(|w| format!(" and a workspace snapshot of {} entries", w.tree.len())).unwrap_or_default();
            let exported = Exported { state, workspace };
            let text = serde_json::to_string_pretty(&exported)?;
            let state = &exported.state;
            match out {
                Some(p) => {
                    use std::io::Write;
                    use std::os::unix::fs::OpenOptionsExt;
                    let mut f =
                        std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(p).with_context(|| format!("creating {}", p.display()))?;
                    f.write_all(text.as_bytes())?;
                    eprintln!(
                        "exported {} tasks and {} policies{snapshot} of {user} from {} to {}",
                        state.tasks.len(),
                        state.policies.len(),
                        spec.describe(),
                        p.display()
                    );
                }
                None => println!("{text}"),
            }
        }
        StoreCommand::Import { user, file } => {
            let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
            let exported: Exported =
                serde_json::from_str(&text).with_context(|| format!("{} is not a state written by `pincer store export`", file.display()))?;
            let store = spec.open()?;
            let sum = store.import_state(user, &exported.state)?;
            let mut snapshot = String::new();
            if let Some(w) = &exported.workspace {
                store.set_workspace(user, w)?;
                snapshot = format!(" and a workspace snapshot of {} entries", w.tree.len());
            }
            println!("imported {} tasks and {} policies{snapshot} for {user} into {}", sum.tasks, sum.policies, spec.describe());
        }
    }
    Ok(ExitCode::SUCCESS)
}
