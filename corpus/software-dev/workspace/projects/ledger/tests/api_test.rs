//! API tests. Need DATABASE_URL pointing at a disposable postgres (CI provides one).

use std::time::Duration;

use serde_json::{json, Value};

fn base() -> String {
    std::env::var("LEDGER_TEST_URL").unwrap_or_else(|_| "http://127.0.0.1:8085".to_string())
}

async fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

#[tokio::test]
#[ignore = "needs a running server"]
async fn healthz_is_ok() {
    let res = client().await.get(format!("{}/healthz", base())).send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.text().await.unwrap(), "ok");
}

#[tokio::test]
#[ignore = "needs a running server"]
async fn transfer_rejects_non_positive_amount() {
    let body = json!({
        "from": "7c1e2f0a-2b7e-4f57-9f3e-1b2a3c4d5e6f",
        "to": "0a9b8c7d-6e5f-4a3b-8c2d-1e0f9a8b7c6d",
        "amount_cents": 0
    });
    let res = client()
        .await
        .post(format!("{}/transfers", base()))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422);
    let v: Value = res.json().await.unwrap();
    assert_eq!(v["error"], "amount must be positive");
}

#[tokio::test]
#[ignore = "needs a running server"]
async fn unknown_account_is_404() {
    let res = client()
        .await
        .get(format!("{}/accounts/00000000-0000-0000-0000-000000000000", base()))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
}
