use axum::{
    extract::{Path, Query, State},
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::{get, post},
    Json, Router,
};
use serde::Deserialize;
use sqlx::PgPool;
use uuid::Uuid;

use crate::db::{self, LedgerError};

#[derive(Clone)]
struct AppState {
    pool: PgPool,
    overdraft_limit: i64,
}

pub fn router(pool: PgPool, overdraft_limit: i64) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/accounts/:id", get(get_account))
        .route("/accounts/:id/postings", get(list_postings))
        .route("/transfers", post(create_transfer))
        .with_state(AppState { pool, overdraft_limit })
}

impl IntoResponse for LedgerError {
    fn into_response(self) -> Response {
        let status = match &self {
            LedgerError::NoAccount(_) => StatusCode::NOT_FOUND,
            LedgerError::Overdraft(_) | LedgerError::NonPositive => StatusCode::UNPROCESSABLE_ENTITY,
            LedgerError::Db(e) => {
                tracing::error!(error = %e, "database error");
                StatusCode::INTERNAL_SERVER_ERROR
            }
        };
        (status, Json(serde_json::json!({ "error": self.to_string() }))).into_response()
    }
}

async fn get_account(State(s): State<AppState>, Path(id): Path<Uuid>) -> Result<impl IntoResponse, LedgerError> {
    let balance = db::balance(&s.pool, id).await?;
    Ok(Json(serde_json::json!({ "id": id, "balance_cents": balance })))
}

#[derive(Deserialize)]
struct Page {
    limit: Option<i64>,
}

async fn list_postings(
    State(s): State<AppState>,
    Path(id): Path<Uuid>,
    Query(page): Query<Page>,
) -> Result<impl IntoResponse, LedgerError> {
    let limit = page.limit.unwrap_or(50).clamp(1, 500);
    Ok(Json(db::postings(&s.pool, id, limit).await?))
}

#[derive(Deserialize)]
struct TransferReq {
    from: Uuid,
    to: Uuid,
    amount_cents: i64,
}

async fn create_transfer(State(s): State<AppState>, Json(req): Json<TransferReq>) -> Result<impl IntoResponse, LedgerError> {
    let id = db::transfer(&s.pool, req.from, req.to, req.amount_cents, s.overdraft_limit).await?;
    Ok((StatusCode::CREATED, Json(serde_json::json!({ "transfer_id": id }))))
}
