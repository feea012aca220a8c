//! Pincer and Pincer-P2 under evaluation: the digital twin behind the [`Defense`] interface.

use crate::eval::corpus::Persona;
use crate::eval::defense::{Defense, DefenseName};
use crate::eval::run::RunError;

/// The twin with the offline decider, for one persona.
pub fn offline(name: DefenseName, persona: &Persona) -> Result<Box<dyn Defense>, RunError> {
    Err(RunError::Setup { persona: persona.id.clone(), defense: name, reason: "the twin is not wired into the harness yet".into() })
}

/// The twin on a chat model, for one persona.
pub fn with_model(name: DefenseName, persona: &Persona, _model: std::sync::Arc<dyn crate::decider::llm::ChatModel>, _backend: crate::eval::run::Backend) -> Result<Box<dyn Defense>, RunError> {
    Err(RunError::Setup { persona: persona.id.clone(), defense: name, reason: "the twin is not wired into the harness yet".into() })
}
