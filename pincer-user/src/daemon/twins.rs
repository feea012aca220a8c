//! The twins, one per user, built on first use over the user's trusted state in the
//! store (SQLite on one host, or a fleet's PostgreSQL). All of them number their questions from one [`QuestionIds`], so a twin's
//! question id is the id the user answers.

use super::resolve;
use super::sessions::Session;
use crate::access::Access;
use crate::decider::Decider;
use crate::sanitize::Sanitizer;
use crate::store::{Store, StoreError, StoreSpec};
use crate::twin::{Prepared, QuestionIds, Twin, TwinConfig, TwinError};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

/// Entries of the workspace tree handed to the pre-committed policy at most.
pub const TREE_LIMIT: usize = 5000;

/// Bytes of one file a workspace snapshot keeps at most.
pub const SNAPSHOT_FILE_LIMIT: u64 = 4 << 20;

pub use crate::store::WorkspaceSnapshot;

impl WorkspaceSnapshot {
    /// Reads the workspace at `dir` (symlinks are not followed).
    pub fn take(dir: &std::path::Path) -> std::io::Result<Self> {
        use std::io::Read;
        let meta = std::fs::symlink_metadata(dir)?;
        if !meta.is_dir() {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{} is not a directory", dir.display())));
        }
        let id = crate::kernel::ObjectId::of_path(dir).map_err(std::io::Error::other)?;
        let root = resolve::Root { path: dir.to_path_buf(), id, label: String::new() };
        let tree = resolve::workspace_tree(&root, TREE_LIMIT);
        let mut files = std::collections::BTreeMap::new();
        for rel in tree.iter().filter(|p| !p.ends_with('/')) {
            let path = dir.join(rel);
            if !std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
                continue;
            }
            let mut buf = Vec::new();
            if std::fs::File::open(&path).and_then(|f| f.take(SNAPSHOT_FILE_LIMIT).read_to_end(&mut buf)).is_ok() {
                files.insert(rel.clone(), buf);
            }
        }
        Ok(WorkspaceSnapshot { tree, files })
    }
}

/// Where an earlier version kept `user`'s workspace snapshot in the state directory (read
/// when the store holds none; snapshots are kept in the trusted store now).
pub fn snapshot_path(state_dir: &std::path::Path, user: &str) -> PathBuf {
    state_dir.join(format!("workspace-{user}.json"))
}

/// Why a twin could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TwinsError {
    /// The trusted store failed.
    #[error("trusted store")]
    Store(#[from] StoreError),
    /// The user's workspace snapshot file of an earlier version cannot be read: the twin is
    /// not built (fail closed).
    #[error("workspace snapshot")]
    Snapshot(#[source] serde_json::Error),
    /// The twin refused to resume a session.
    #[error("cannot resume session {session}")]
    Resume {
        /// The session.
        session: String,
        /// Cause.
        #[source]
        source: TwinError,
    },
}

/// The daemon's twins by user name.
pub struct Twins {
    spec: StoreSpec,
    state_dir: PathBuf,
    store: Store,
    sanitizer: Sanitizer,
    decider: Arc<dyn Decider>,
    config: TwinConfig,
    ids: QuestionIds,
    by_user: HashMap<String, Twin>,
}

impl std::fmt::Debug for Twins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Twins").field("store", &self.spec.describe()).field("users", &self.by_user.keys().collect::<Vec<_>>()).finish_non_exhaustive()
    }
}

impl Twins {
    /// No twin yet; the store `spec` names is opened (and migrated) now, and each twin
    /// will open its own connection to it. Workspace snapshots are kept in `state_dir`.
    pub fn new(spec: StoreSpec, state_dir: PathBuf, sanitizer: Sanitizer, decider: Arc<dyn Decider>, config: TwinConfig) -> Result<Self, TwinsError> {
        let store = spec.open()?;
        Ok(Twins { spec, state_dir, store, sanitizer, decider, config, ids: QuestionIds::default(), by_user: HashMap::new() })
    }

    /// The numbering every twin's questions share.
    pub fn question_ids(&self) -> &QuestionIds {
        &self.ids
    }

    /// The daemon's own connection to the trusted store (listing, removing, importing).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Which store the twins use.
    pub fn spec(&self) -> &StoreSpec {
        &self.spec
    }

    /// The users whose twins are built.
    pub fn users(&self) -> Vec<String> {
        self.by_user.keys().cloned().collect()
    }

    /// Checks that `user`'s twin can reach the trusted store (a shared database may be
    /// away; nothing is decided on a state that cannot be reached).
    pub fn reachable(&self, user: &str) -> Result<(), StoreError> {
        match self.by_user.get(user).and_then(Twin::store) {
            Some(st) => st.ping(),
            None => self.store.ping(),
        }
    }

    /// `user`'s twin, built over its trusted state on first use.
    pub async fn get(&mut self, user: &str) -> Result<&mut Twin, TwinsError> {
        if !self.by_user.contains_key(user) {
            let prepared = prepare(&self.store, &self.state_dir, &self.sanitizer, user, &[])?;
            let twin = build(self.parts()?, prepared, &[]).await?;
            self.by_user.insert(user.to_string(), twin);
        }
        Ok(self.by_user.get_mut(user).expect("inserted above"))
    }

    /// `user`'s twin if it is built.
    pub fn existing(&mut self, user: &str) -> Option<&mut Twin> {
        self.by_user.get_mut(user)
    }

    /// Builds `user`'s twin with `resume`'s sessions reopened from their prompts and given
    /// back their grants.
    pub async fn resume(&mut self, user: &str, resume: &[Session]) -> Result<(), TwinsError> {
        let open: Vec<String> = resume.iter().map(|s| s.id.clone()).collect();
        let prepared = prepare(&self.store, &self.state_dir, &self.sanitizer, user, &open)?;
        let twin = build(self.parts()?, prepared, resume).await?;
        self.by_user.insert(user.to_string(), twin);
        Ok(())
    }

    /// Drops `user`'s twin (its trusted state changed underneath: an import).
    pub fn forget(&mut self, user: &str) {
        self.by_user.remove(user);
    }

    /// Gives `user`'s twin, if it is built, the trusted state as the store holds it now
    /// (after a removal: `removed` is the approval that went, if it was one).
    pub async fn reload(&mut self, user: &str, removed: Option<&crate::store::UserApproval>) -> Result<(), TwinsError> {
        let Some(open) = self.by_user.get(user).map(|t| t.open_sessions().map(str::to_string).collect::<Vec<_>>()) else { return Ok(()) };
        let prepared = prepare(&self.store, &self.state_dir, &self.sanitizer, user, &open)?;
        if let Some(t) = self.by_user.get_mut(user) {
            t.reload(&prepared, removed);
        }
        Ok(())
    }

    /// The grants the twin of `s`'s user holds for `s`.
    pub fn grants(&self, s: &Session) -> Vec<(String, Access)> {
        self.by_user.get(&s.user).map(|t| t.grants(&s.id).to_vec()).unwrap_or_default()
    }

    fn parts(&self) -> Result<Parts, TwinsError> {
        Ok(Parts { store: self.spec.open()?, decider: self.decider.clone(), config: self.config.clone(), ids: self.ids.clone() })
    }
}

/// What a new twin is built from (owned, so no borrow of [`Twins`], whose store
/// connections are not `Sync`, is held across an await): its own store connection too.
struct Parts {
    store: Store,
    decider: Arc<dyn Decider>,
    config: TwinConfig,
    ids: QuestionIds,
}

/// A twin over `user`'s trusted state, with `resume`'s sessions reopened (before the store
/// is attached, so nothing is recorded twice) and given back their grants.
/// `user`'s trusted state from the store (without the tasks of the sessions `open`, which
/// are not finished) and the workspace snapshot, sanitized and indexed.
fn prepare(store: &Store, state_dir: &std::path::Path, sanitizer: &Sanitizer, user: &str, open: &[String]) -> Result<Prepared, TwinsError> {
    let mut state = store.load_state(user)?;
    state.tasks.retain(|t| !open.contains(&t.session));
    let mut prepared = Prepared::new(state, sanitizer.clone());
    let snap = match store.workspace(user)? {
        Some(snap) => Some(snap),
        None => match std::fs::read(snapshot_path(state_dir, user)) {
            Ok(text) => Some(serde_json::from_slice::<WorkspaceSnapshot>(&text).map_err(TwinsError::Snapshot)?),
            Err(_) => None,
        },
    };
    if let Some(snap) = snap {
        prepared = prepared.with_workspace(&snap.tree, |p| snap.files.get(p).map(Vec::as_slice));
    }
    Ok(prepared)
}

async fn build(p: Parts, prepared: Prepared, resume: &[Session]) -> Result<Twin, TwinsError> {
    let store = p.store;
    let mut twin = Twin::from_prepared(&prepared, p.decider, p.config).with_question_ids(p.ids);
    // The sessions' pre-committed policies are made side by side.
    let mut making = Vec::with_capacity(resume.len());
    for s in resume {
        let err = |source| TwinsError::Resume { session: s.id.clone(), source };
        let tree: Vec<String> = s.roots().iter().flat_map(|r| resolve::workspace_tree(r, TREE_LIMIT)).collect();
        let first = s.prompts.first().cloned().unwrap_or_default();
        let draft = twin.open_session(&s.id, &first, &tree).map_err(err)?;
        making.push(tokio::spawn(draft.make()));
    }
    for (s, made) in resume.iter().zip(making) {
        let err = |source| TwinsError::Resume { session: s.id.clone(), source };
        let made = made.await.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
        twin.commit_policy(&s.id, made).map_err(err)?;
        for prompt in s.prompts.iter().skip(1) {
            twin.prompt(&s.id, prompt).await.map_err(err)?;
        }
        twin.restore_grants(&s.id, &s.grants).map_err(err)?;
    }
    Ok(twin.with_store(store))
}
