//! The interface every evaluated defense implements, and the defense names.

use crate::access::Access;
use crate::decider::TokenUsage;
use async_trait::async_trait;
use std::fmt;

/// A defense's answer to one request: the twin's [`Outcome`] (grant, deny, or ask the user,
/// which is counted as not granted and counted separately), shared by every defense.
pub use crate::twin::Outcome;
use crate::twin::VoteRecord;

/// One request as the replay engine hands it to a defense. Each defense decides for itself
/// which parts it may look at (the paper gives each a different view).
#[derive(Debug, Clone, Copy)]
pub struct RequestView<'a> {
    /// The requested workspace path (untrusted: the worker chose it).
    pub path: &'a str,
    /// The access type.
    pub access: Access,
    /// The worker's rationale (untrusted).
    pub rationale: Option<&'a str>,
    /// The current content of the resource (a file's bytes, or a directory's entries one per line).
    pub content: Option<&'a [u8]>,
}

/// A defense under evaluation. One value serves all samples of one persona; its per-sample
/// state is reset by [`Defense::begin_sample`]. Every method fails closed: an internal error
/// becomes a [`Outcome::Deny`], never a grant.
#[async_trait]
pub trait Defense: Send {
    /// The defense's name.
    fn name(&self) -> DefenseName;
    /// Starts a sample: forget everything learned from the previous one (the persona's trusted
    /// state is restored), `day` is the sample's day.
    async fn begin_sample(&mut self, day: u64);
    /// A session (task) begins with the user's prompt; `tree` lists the workspace (directories
    /// end in `/`).
    async fn start_session(&mut self, prompt: &str, tree: &[String]);
    /// An untrusted message from the worker to the authorizer.
    async fn note(&mut self, text: &str);
    /// Decides one request.
    async fn decide(&mut self, req: &RequestView<'_>) -> Outcome;
    /// The current session ends; its grants are revoked.
    async fn end_session(&mut self);
    /// Tokens spent so far (a running total).
    fn tokens(&self) -> TokenUsage;
    /// The votes behind the last [`Defense::decide`], for the audit; `None` for a defense
    /// that does not vote (only Pincer and Pincer-P2 do).
    fn last_votes(&self) -> Option<&[VoteRecord]> {
        None
    }
}

/// The seven defenses of the evaluation (named in JSON as on the command line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum DefenseName {
    /// No gating: every request is granted.
    #[serde(rename = "nanoclaw")]
    Nanoclaw,
    /// A judge with generic safety instructions; sees name, content and rationale; no history.
    #[serde(rename = "static-judge")]
    StaticJudge,
    /// A judge with all history whose own state also keeps what the worker tells it.
    #[serde(rename = "dynamic-judge")]
    DynamicJudge,
    /// A policy generated at the prompt, enforced by glob matching.
    #[serde(rename = "conseca+")]
    ConsecaPlus,
    /// The same policy enforced by a judge that sees names and rationale.
    #[serde(rename = "conseca-judge+")]
    ConsecaJudgePlus,
    /// The digital twin.
    #[serde(rename = "pincer")]
    Pincer,
    /// The digital twin whose vote 2 also sees the pre-committed policy.
    #[serde(rename = "pincer-p2")]
    PincerP2,
}

/// A defense name that is not one of the seven.
#[derive(Debug, thiserror::Error)]
#[error("unknown defense {0:?} (expected one of: nanoclaw, static-judge, dynamic-judge, conseca+, conseca-judge+, pincer, pincer-p2)")]
pub struct UnknownDefense(pub String);

impl DefenseName {
    /// All seven, in table order.
    pub const ALL: [DefenseName; 7] = [
        DefenseName::Nanoclaw,
        DefenseName::StaticJudge,
        DefenseName::DynamicJudge,
        DefenseName::ConsecaPlus,
        DefenseName::ConsecaJudgePlus,
        DefenseName::Pincer,
        DefenseName::PincerP2,
    ];

    /// The name used on the command line and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            DefenseName::Nanoclaw => "nanoclaw",
            DefenseName::StaticJudge => "static-judge",
            DefenseName::DynamicJudge => "dynamic-judge",
            DefenseName::ConsecaPlus => "conseca+",
            DefenseName::ConsecaJudgePlus => "conseca-judge+",
            DefenseName::Pincer => "pincer",
            DefenseName::PincerP2 => "pincer-p2",
        }
    }
}

impl fmt::Display for DefenseName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for DefenseName {
    type Err = UnknownDefense;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DefenseName::ALL.into_iter().find(|d| d.as_str() == s).ok_or_else(|| UnknownDefense(s.to_string()))
    }
}

/// NanoClaw as deployed: no gating, every request is granted.
#[derive(Debug, Default)]
pub struct Nanoclaw;

#[async_trait]
impl Defense for Nanoclaw {
    fn name(&self) -> DefenseName {
        DefenseName::Nanoclaw
    }
    async fn begin_sample(&mut self, _day: u64) {}
    async fn start_session(&mut self, _prompt: &str, _tree: &[String]) {}
    async fn note(&mut self, _text: &str) {}
    async fn decide(&mut self, _req: &RequestView<'_>) -> Outcome {
        Outcome::Grant
    }
    async fn end_session(&mut self) {}
    fn tokens(&self) -> TokenUsage {
        TokenUsage::default()
    }
}
