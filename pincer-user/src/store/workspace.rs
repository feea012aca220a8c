//! A user's workspace snapshot in the trusted store: the tree and the files' content as
//! they were when the user imported their policies, from which each twin derives the known
//! places and the fingerprints of protected content. Kept in the store like history,
//! approvals and policies, so every host of a fleet builds the same fingerprints (each
//! twin keys its own hashes: what is shared is the snapshot, never a host's keyed hashes).

use super::db::Val;
use super::{sql, Store, StoreError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A user's workspace as it was when they imported their policies (trusted state: taken on
/// the user's channel, never from a workspace a worker may have changed since).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceSnapshot {
    /// Paths relative to the workspace, `/` after a directory.
    pub tree: Vec<String>,
    /// Regular files' content by path (base64 in JSON; arrays of bytes, as older snapshot
    /// files hold them, are read too).
    #[serde(with = "content")]
    pub files: BTreeMap<String, Vec<u8>>,
}

mod content {
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::collections::BTreeMap;

    pub fn serialize<S: Serializer>(files: &BTreeMap<String, Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        let b64 = base64::engine::general_purpose::STANDARD;
        files.iter().map(|(k, v)| (k, b64.encode(v))).collect::<BTreeMap<_, _>>().serialize(s)
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Content {
        Base64(String),
        Bytes(Vec<u8>),
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, Vec<u8>>, D::Error> {
        let b64 = base64::engine::general_purpose::STANDARD;
        BTreeMap::<String, Content>::deserialize(d)?
            .into_iter()
            .map(|(k, c)| match c {
                Content::Bytes(b) => Ok((k, b)),
                Content::Base64(t) => b64.decode(t).map(|b| (k.clone(), b)).map_err(|e| serde::de::Error::custom(format!("file {k:?}: {e}"))),
            })
            .collect()
    }
}

impl Store {
    /// Records `user`'s workspace snapshot, replacing the one before (every host of a fleet
    /// reloads the user's twin when it changes).
    pub fn set_workspace(&self, user: &str, snap: &WorkspaceSnapshot) -> Result<(), StoreError> {
        let text = serde_json::to_string(snap).expect("snapshots serialize");
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0);
        self.db
            .exec(
                r#"INSERT INTO workspace ("user", snapshot, taken_ms) VALUES (?1, ?2, ?3)
                   ON CONFLICT ("user") DO UPDATE SET snapshot = excluded.snapshot, taken_ms = excluded.taken_ms"#,
                &[user.into(), text.into(), Val::Int(now)],
            )
            .map_err(sql("store the workspace snapshot"))?;
        Ok(())
    }

    /// `user`'s workspace snapshot, if one was recorded; a snapshot that does not parse is
    /// [`StoreError::BadSnapshot`] (the twin is not built on part of its trusted state).
    pub fn workspace(&self, user: &str) -> Result<Option<WorkspaceSnapshot>, StoreError> {
        let r = self.db.query(r#"SELECT snapshot FROM workspace WHERE "user" = ?1"#, &[user.into()]).map_err(sql("load the workspace snapshot"))?;
        r.first().map(|r| serde_json::from_str(&r.text(0)).map_err(|source| StoreError::BadSnapshot { user: user.to_string(), source })).transpose()
    }
}
