mod api;
mod cli;
mod db;

use anyhow::Context;
use clap::Parser;
use tracing_subscriber::EnvFilter;

#[derive(Debug, serde::Deserialize)]
pub struct Settings {
    pub listen: String,
    pub database_max_connections: u32,
    pub log_format: String,
    pub overdraft_limit_cents: i64,
}

fn load_settings(path: &str) -> anyhow::Result<Settings> {
    let cfg = config::Config::builder()
        .add_source(config::File::with_name(path))
        .add_source(config::Environment::with_prefix("LEDGER"))
        .build()
        .with_context(|| format!("reading config {path}"))?;
    Ok(cfg.try_deserialize()?)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = cli::Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::from_default_env())
        .init();

    match args.command {
        cli::Command::Migrate => {
            let pool = db::connect(&args.database_url, 2).await?;
            db::migrate(&pool).await?;
            tracing::info!("migrations applied");
        }
        cli::Command::Serve { config } => {
            let settings = load_settings(&config)?;
            let pool = db::connect(&args.database_url, settings.database_max_connections).await?;
            let app = api::router(pool, settings.overdraft_limit_cents);
            let listener = tokio::net::TcpListener::bind(&settings.listen).await?;
            tracing::info!(listen = %settings.listen, "ledger serving");
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = tokio::signal::ctrl_c().await;
                })
                .await?;
        }
        cli::Command::Balance { account } => {
            let pool = db::connect(&args.database_url, 1).await?;
            let cents = db::balance(&pool, account).await?;
            println!("{account}: {}.{:02}", cents / 100, (cents % 100).abs());
        }
    }
    Ok(())
}
