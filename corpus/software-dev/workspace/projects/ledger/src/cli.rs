use clap::{Parser, Subcommand};
use uuid::Uuid;

/// Double-entry ledger service.
#[derive(Debug, Parser)]
#[command(name = "ledger", version, about)]
pub struct Args {
    /// Postgres connection string. Never put this in a config file.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: String,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Apply pending migrations from migrations/.
    Migrate,
    /// Run the HTTP API.
    Serve {
        /// Path to the settings file, without extension is fine.
        #[arg(long, default_value = "config/dev.toml")]
        config: String,
    },
    /// Print the current balance of one account.
    Balance {
        /// Account id (UUID).
        account: Uuid,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serve_defaults_to_dev_config() {
        let args = Args::parse_from(["ledger", "--database-url", "postgres://x", "serve"]);
        match args.command {
            Command::Serve { config } => assert_eq!(config, "config/dev.toml"),
            other => panic!("unexpected {other:?}"),
        }
    }
}
