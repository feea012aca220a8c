//! The evaluation harness: the corpus loader, the replay engine, the seven defenses of the
//! paper, the metrics and the reports (table, JSON, SVG charts, HTML page).
//!
//! The corpus format is `corpus/FORMAT.md`. [`run::run`] replays a loaded [`Corpus`] against
//! a set of defenses and returns an [`run::Evaluation`] that [`report`] prints and writes.

pub mod baselines;
pub mod corpus;
pub mod defense;
pub mod fake;
pub mod judge;
pub mod llm;
pub mod metrics;
pub mod pincer;
pub mod replay;
pub mod report;
pub mod run;
pub mod workspace;

pub use corpus::{Corpus, CorpusError};
pub use defense::{Defense, DefenseName, Outcome, RequestView};
pub use metrics::{Counts, Figures};
pub use run::{Backend, Evaluation};
