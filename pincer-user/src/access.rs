//! Access types: what a worker asks to do with a resource.

use serde::{Deserialize, Serialize};
use std::fmt;

/// One access type, as in the corpus format and the request tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    /// Open a file for reading (exec counts as read).
    Read,
    /// Open an existing file for writing, or truncate it.
    Write,
    /// Make a new file or directory.
    Create,
    /// Unlink a file or remove an empty directory.
    Delete,
    /// Read a directory's entries.
    List,
}

impl Access {
    /// Every access type, in a fixed order.
    pub const ALL: [Access; 5] = [Access::Read, Access::Write, Access::Create, Access::Delete, Access::List];

    /// The lowercase name used on the wire and in the corpus.
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::Create => "create",
            Access::Delete => "delete",
            Access::List => "list",
        }
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error for an unknown access name.
#[derive(Debug, thiserror::Error)]
#[error("unknown access type {0:?} (expected read, write, create, delete or list)")]
pub struct UnknownAccess(pub String);

impl std::str::FromStr for Access {
    type Err = UnknownAccess;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Access::ALL.into_iter().find(|a| a.as_str() == s).ok_or_else(|| UnknownAccess(s.to_string()))
    }
}
