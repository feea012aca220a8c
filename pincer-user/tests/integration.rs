//! The integration tests of `pincer-user`, one module per subject, built as one test binary
//! so that the library and its dependencies are linked once. Run one module with
//! `cargo test --release -p pincer-user --test integration MODULE::` (e.g. `fleet::`).

mod common;

mod claude_hook;
mod daemon_actor;
mod daemon_flow;
mod doctor;
mod eval_audit;
mod eval_corpus;
mod eval_defenses;
mod eval_llm;
mod eval_metrics;
mod eval_tokens;
mod fleet;
mod history_convert;
mod model_unreachable;
mod service_unit;
mod socket_framing;
mod twin_allows;
mod twin_bad_input;
mod twin_batch;
mod twin_corpus;
mod twin_generalize;
mod twin_http;
mod twin_integrity;
mod twin_reading;
mod twin_redteam;
mod twin_scope;
