//! An in-memory workspace: the pristine tree of a persona, copied per sample and changed by
//! the sample's setup and by the creates and deletes that defenses grant.

use crate::eval::corpus::{ProblemKind, SetupOp};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A workspace that could not be loaded.
#[derive(Debug, thiserror::Error)]
#[error("{}: {kind}", path.display())]
pub struct WorkspaceError {
    /// The file or folder at fault.
    pub path: PathBuf,
    /// What is wrong.
    pub kind: ProblemKind,
}

/// Files (with content) and directories, keyed by workspace-relative path without trailing `/`.
///
/// File contents are shared (`Arc`), so a per-sample copy is cheap.
#[derive(Debug, Clone, Default)]
pub struct Workspace {
    files: BTreeMap<String, Arc<[u8]>>,
    dirs: BTreeSet<String>,
}

fn key(p: &str) -> &str {
    p.trim_end_matches('/')
}

fn parent(p: &str) -> Option<&str> {
    key(p).rsplit_once('/').map(|(a, _)| a)
}

impl Workspace {
    /// Reads every file and folder under `root` (dotfiles included); symlinks are rejected.
    pub fn load(root: &Path) -> Result<Workspace, WorkspaceError> {
        let mut w = Workspace::default();
        w.walk(root, root)?;
        Ok(w)
    }

    fn walk(&mut self, root: &Path, dir: &Path) -> Result<(), WorkspaceError> {
        let err = |path: &Path, e: std::io::Error| WorkspaceError { path: path.to_path_buf(), kind: ProblemKind::Unreadable(e.to_string()) };
        let mut entries: Vec<_> = std::fs::read_dir(dir).map_err(|e| err(dir, e))?.collect::<Result<_, _>>().map_err(|e| err(dir, e))?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let p = e.path();
            let rel = p.strip_prefix(root).expect("walked path lies under the root").to_string_lossy().replace('\\', "/");
            let ft = e.file_type().map_err(|e| err(&p, e))?;
            if ft.is_dir() {
                self.dirs.insert(rel);
                self.walk(root, &p)?;
            } else if ft.is_file() {
                let content = std::fs::read(&p).map_err(|e| err(&p, e))?;
                self.files.insert(rel, content.into());
            } else {
                return Err(WorkspaceError { path: p, kind: ProblemKind::NotRegular(if ft.is_symlink() { "symlink" } else { "special file" }) });
            }
        }
        Ok(())
    }

    /// Whether a file or directory exists at `p`.
    pub fn exists(&self, p: &str) -> bool {
        let k = key(p);
        self.files.contains_key(k) || self.dirs.contains(k)
    }

    /// Whether `p` is a directory.
    pub fn is_dir(&self, p: &str) -> bool {
        self.dirs.contains(key(p))
    }

    /// Whether the parent of `p` exists (the workspace root always does).
    pub fn parent_exists(&self, p: &str) -> bool {
        parent(p).is_none_or(|d| self.dirs.contains(d))
    }

    /// The content of the file at `p`, if it is a file.
    pub fn content(&self, p: &str) -> Option<&[u8]> {
        self.files.get(key(p)).map(|c| &**c)
    }

    /// The names of a directory's entries (directories with a trailing `/`).
    pub fn list(&self, p: &str) -> Vec<String> {
        let k = key(p);
        let prefix = if k.is_empty() { String::new() } else { format!("{k}/") };
        let direct = |q: &&String| q.starts_with(&prefix) && !q[prefix.len()..].contains('/');
        let mut out: Vec<String> = self.dirs.iter().filter(direct).map(|d| format!("{}/", &d[prefix.len()..])).collect();
        out.extend(self.files.keys().filter(direct).map(|f| f[prefix.len()..].to_string()));
        out
    }

    /// Every path in the tree (directories with a trailing `/`), sorted.
    pub fn tree(&self) -> Vec<String> {
        let mut out: Vec<String> = self.dirs.iter().map(|d| format!("{d}/")).chain(self.files.keys().cloned()).collect();
        out.sort();
        out
    }

    /// The number of files.
    pub fn file_count(&self) -> usize {
        self.files.len()
    }

    fn mkdirs(&mut self, p: &str) {
        let mut cur = String::new();
        for seg in key(p).split('/') {
            if !cur.is_empty() {
                cur.push('/');
            }
            cur.push_str(seg);
            self.dirs.insert(cur.clone());
        }
    }

    /// Creates an empty file, or a directory when `p` ends in `/`.
    pub fn create(&mut self, p: &str) {
        if p.ends_with('/') {
            self.mkdirs(p);
        } else {
            self.files.insert(key(p).to_string(), Arc::from(&b""[..]));
        }
    }

    /// Removes a file or a directory with everything under it.
    pub fn remove(&mut self, p: &str) {
        let k = key(p).to_string();
        let prefix = format!("{k}/");
        self.files.remove(&k);
        self.dirs.remove(&k);
        self.files.retain(|f, _| !f.starts_with(&prefix));
        self.dirs.retain(|d| !d.starts_with(&prefix));
    }

    /// Applies one setup op; on failure returns the op name, the path and why.
    pub fn apply(&mut self, op: &SetupOp) -> Result<(), (&'static str, String, &'static str)> {
        match op {
            SetupOp::Write { path, content } => {
                if self.is_dir(path) {
                    return Err(("write", path.clone(), "a directory exists at this path"));
                }
                if let Some(d) = parent(path) {
                    if self.files.contains_key(d) {
                        return Err(("write", path.clone(), "its parent is a file"));
                    }
                    self.mkdirs(d);
                }
                self.files.insert(key(path).to_string(), Arc::from(content.as_bytes()));
            }
            SetupOp::Mkdir { path } => {
                if self.files.contains_key(key(path)) {
                    return Err(("mkdir", path.clone(), "a file exists at this path"));
                }
                self.mkdirs(path);
            }
            SetupOp::Delete { path } => {
                if !self.exists(path) {
                    return Err(("delete", path.clone(), "nothing exists at this path"));
                }
                self.remove(path);
            }
            SetupOp::Rename { path, to } => {
                if !self.exists(path) {
                    return Err(("rename", path.clone(), "nothing exists at this path"));
                }
                if self.exists(to) {
                    return Err(("rename", to.clone(), "the target already exists"));
                }
                let (from, dest) = (key(path).to_string(), key(to).to_string());
                if dest.starts_with(&format!("{from}/")) {
                    return Err(("rename", to.clone(), "the target lies inside the source"));
                }
                if let Some(d) = parent(&dest) {
                    self.mkdirs(d);
                }
                let moved = |p: &str| -> Option<String> {
                    if p == from {
                        Some(dest.clone())
                    } else {
                        p.strip_prefix(&format!("{from}/")).map(|rest| format!("{dest}/{rest}"))
                    }
                };
                let files: Vec<(String, Arc<[u8]>)> = self.files.iter().filter_map(|(k, v)| moved(k).map(|n| (n, v.clone()))).collect();
                let dirs: Vec<String> = self.dirs.iter().filter_map(|d| moved(d)).collect();
                self.remove(&from);
                self.files.extend(files);
                self.dirs.extend(dirs);
            }
        }
        Ok(())
    }
}
