//! The offline decider: deterministic, no model. It serves the twin's offline votes
//! ([`crate::twin::votes`]); nothing in it names a particular workspace.

use super::{Decider, DeciderError, PolicyAnswer, PolicyInput, TokenUsage, Vote1Input, Vote2Input, VoteOutcome};
use crate::twin::votes::{policy_offline, vote1_offline, vote2_offline};

/// The offline decider.
#[derive(Debug, Clone, Default)]
pub struct OfflineDecider {
    _private: (),
}

impl OfflineDecider {
    /// A new offline decider.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait::async_trait]
impl Decider for OfflineDecider {
    fn name(&self) -> &str {
        "offline"
    }

    async fn vote1(&self, input: &Vote1Input<'_>) -> VoteOutcome {
        vote1_offline(input).0
    }

    async fn vote2(&self, input: &Vote2Input<'_>) -> VoteOutcome {
        vote2_offline(input, input.policy.is_some())
    }

    async fn policy(&self, input: &PolicyInput<'_>) -> Result<PolicyAnswer, DeciderError> {
        Ok(PolicyAnswer { entries: policy_offline(input), tokens: TokenUsage::default() })
    }
}
