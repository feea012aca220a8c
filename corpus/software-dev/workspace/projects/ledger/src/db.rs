use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::postgres::{PgPool, PgPoolOptions};
use uuid::Uuid;

#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("account {0} not found")]
    NoAccount(Uuid),
    #[error("transfer would overdraw account {0}")]
    Overdraft(Uuid),
    #[error("amount must be positive")]
    NonPositive,
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

#[derive(Debug, Serialize, sqlx::FromRow)]
pub struct Posting {
    pub id: Uuid,
    pub account_id: Uuid,
    pub transfer_id: Uuid,
    pub amount_cents: i64,
    pub created_at: DateTime<Utc>,
}

pub async fn connect(url: &str, max: u32) -> Result<PgPool, sqlx::Error> {
    PgPoolOptions::new().max_connections(max).connect(url).await
}

pub async fn migrate(pool: &PgPool) -> Result<(), sqlx::migrate::MigrateError> {
    sqlx::migrate!("./migrations").run(pool).await
}

pub async fn balance(pool: &PgPool, account: Uuid) -> Result<i64, LedgerError> {
    let row: Option<(Option<i64>,)> = sqlx::query_as(
        "SELECT SUM(amount_cents)::BIGINT FROM postings WHERE account_id = $1",
    )
    .bind(account)
    .fetch_optional(pool)
    .await?;
    row.map(|(s,)| s.unwrap_or(0)).ok_or(LedgerError::NoAccount(account))
}

/// Moves `amount` from `from` to `to` as two postings in one transaction.
pub async fn transfer(
    pool: &PgPool,
    from: Uuid,
    to: Uuid,
    amount: i64,
    overdraft_limit: i64,
) -> Result<Uuid, LedgerError> {
    if amount <= 0 {
        return Err(LedgerError::NonPositive);
    }
    let mut tx = pool.begin().await?;
    let (current,): (i64,) = sqlx::query_as(
        "SELECT COALESCE(SUM(amount_cents), 0)::BIGINT FROM postings WHERE account_id = $1 FOR UPDATE",
    )
    .bind(from)
    .fetch_one(&mut *tx)
    .await?;
    if current - amount < -overdraft_limit {
        return Err(LedgerError::Overdraft(from));
    }
    let transfer_id = Uuid::new_v4();
    for (account, cents) in [(from, -amount), (to, amount)] {
        sqlx::query("INSERT INTO postings (id, account_id, transfer_id, amount_cents) VALUES ($1, $2, $3, $4)")
            .bind(Uuid::new_v4())
            .bind(account)
            .bind(transfer_id)
            .bind(cents)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(transfer_id)
}

pub async fn postings(pool: &PgPool, account: Uuid, limit: i64) -> Result<Vec<Posting>, LedgerError> {
    Ok(sqlx::query_as::<_, Posting>(
        "SELECT id, account_id, transfer_id, amount_cents, created_at FROM postings \
         WHERE account_id = $1 ORDER BY created_at DESC LIMIT $2",
    )
    .bind(account)
    .bind(limit)
    .fetch_all(pool)
    .await?)
}
