//! The user's configuration, watched while sessions run. The places a session never changes
//! include those the user's configuration names as code (the folders `~/.bashrc` puts on
//! `PATH`, git's `core.hooksPath`, what a repository's `.git/config` runs: see
//! [`super::code_places`]). They are read from files, and the user edits those files while a
//! session runs (`git config --global core.hooksPath ...`, a line added to `~/.bashrc`). So
//! the daemon watches each file the places were read from (by its name in its folder, since
//! editors and git replace a file by renaming a new one over it) and each configuration
//! folder, and a change has the actor read the owner's configuration again and put what it
//! now names into the kernel's never map ([`Cmd::ConfigChanged`]), for the sessions already
//! running. A file that does not exist yet is watched by its name too: one the user makes
//! later counts.

use super::core::Cmd;
use super::decisions::Inbox;
use futures_util::StreamExt;
use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask, Watches};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A place of the user's configuration to watch.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Watch {
    /// A file, by its name in its folder (made, written, replaced, moved or removed).
    File(PathBuf),
    /// A folder: every entry of it, and its own name in its parent.
    Folder(PathBuf),
}

impl Watch {
    /// `path` as it is now: a folder, or else a file (one that does not exist yet too).
    pub fn of(path: &Path) -> Watch {
        if path.is_dir() {
            Watch::Folder(path.to_path_buf())
        } else {
            Watch::File(path.to_path_buf())
        }
    }
}

/// How long a change waits for the changes that come with it (git's lock file and rename,
/// an editor's backup) before the owners hear of it once.
const SETTLE: Duration = Duration::from_millis(20);

/// The least time between two reports of changes: a folder some program writes all the
/// time (a browser's profile among the never places) costs the actor a reading of the
/// configuration at most this often.
const GAP: Duration = Duration::from_millis(500);

/// What changes a file's content or name in a watched folder (a write is seen when its file
/// is closed).
fn mask() -> WatchMask {
    WatchMask::CLOSE_WRITE | WatchMask::CREATE | WatchMask::DELETE | WatchMask::MOVED_FROM | WatchMask::MOVED_TO
}

/// Who cares about the entries of one watched folder.
#[derive(Debug, Default)]
struct Watched {
    /// The owners who care about each name.
    names: BTreeMap<OsString, BTreeSet<u32>>,
    /// The owners who care about every entry.
    every: BTreeSet<u32>,
}

impl Watched {
    /// The owners an event about entry `name` (none: the folder itself) concerns.
    fn owners(&self, name: Option<&OsString>) -> BTreeSet<u32> {
        let mut out = self.every.clone();
        match name {
            Some(n) => out.extend(self.names.get(n).into_iter().flatten()),
            None => out.extend(self.names.values().flatten()),
        }
        out
    }
}

/// The watches of the users' configuration, with the task that turns their events into
/// [`Cmd::ConfigChanged`] for the actor.
pub struct ConfigWatch {
    watches: Watches,
    watched: Arc<Mutex<HashMap<WatchDescriptor, Watched>>>,
}

impl std::fmt::Debug for ConfigWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigWatch").finish_non_exhaustive()
    }
}

impl ConfigWatch {
    /// Starts the watch (on the current tokio runtime): changes go to `inbox`.
    pub fn start(inbox: Inbox) -> std::io::Result<ConfigWatch> {
        let stream = Inotify::init()?.into_event_stream(vec![0u8; 16 * 1024])?;
        let watches = stream.watches();
        let watched: Arc<Mutex<HashMap<WatchDescriptor, Watched>>> = Arc::default();
        let seen = watched.clone();
        tokio::spawn(async move {
            let mut stream = stream;
            let mut last: Option<tokio::time::Instant> = None;
            while let Some(first) = stream.next().await {
                let mut owners = BTreeSet::new();
                let mut next = Some(first);
                let now = tokio::time::Instant::now();
                let settle = last.map_or(now, |l| l + GAP).max(now + SETTLE);
                // The events that come within SETTLE of the first (or before GAP has passed
                // since the last report) are one change.
                while let Some(event) = next {
                    match event {
                        Ok(e) => owners.extend(concerned(&seen, &e.wd, e.mask, e.name.as_ref())),
                        Err(e) => {
                            tracing::error!(error = %e, "the watch of the users' configuration failed; it is read again only when a session starts");
                            return;
                        }
                    }
                    next = tokio::time::timeout_at(settle, stream.next()).await.ok().flatten();
                }
                if owners.is_empty() {
                    continue;
                }
                last = Some(tokio::time::Instant::now());
                if inbox.send(Cmd::ConfigChanged { owners: owners.into_iter().collect() }).is_err() {
                    return;
                }
            }
        });
        Ok(ConfigWatch { watches, watched })
    }

    /// Watches `places` for `owner`. A place whose folder does not exist is not watched (its
    /// parent's watch, where one is asked for, sees the folder made).
    pub fn watch(&mut self, owner: u32, places: &[Watch]) {
        for place in places {
            let (dir, name) = match place {
                Watch::File(p) => match (p.parent(), p.file_name()) {
                    (Some(d), Some(n)) => (d, Some(n)),
                    _ => continue,
                },
                Watch::Folder(p) => {
                    if let (Some(d), Some(n)) = (p.parent(), p.file_name()) {
                        self.add(owner, d, Some(n.to_owned()));
                    }
                    (p.as_path(), None)
                }
            };
            self.add(owner, dir, name.map(ToOwned::to_owned));
        }
    }

    /// Stops watching for `owner` (its last session ended); a folder no owner watches any
    /// more is no longer watched.
    pub fn forget(&mut self, owner: u32) {
        let mut watched = self.watched.lock().unwrap_or_else(|e| e.into_inner());
        let mut unwatched = Vec::new();
        for (wd, w) in watched.iter_mut() {
            w.every.remove(&owner);
            w.names.retain(|_, owners| {
                owners.remove(&owner);
                !owners.is_empty()
            });
            if w.every.is_empty() && w.names.is_empty() {
                unwatched.push(wd.clone());
            }
        }
        for wd in unwatched {
            watched.remove(&wd);
            let _ = self.watches.remove(wd);
        }
    }

    /// How many folders are watched.
    pub fn folders(&self) -> usize {
        self.watched.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    fn add(&mut self, owner: u32, dir: &Path, name: Option<OsString>) {
        let wd = match self.watches.add(dir, mask() | WatchMask::ONLYDIR) {
            Ok(wd) => wd,
            Err(e) => {
                tracing::debug!(folder = %dir.display(), error = %e, "not watched");
                return;
            }
        };
        let mut watched = self.watched.lock().unwrap_or_else(|e| e.into_inner());
        let w = watched.entry(wd).or_default();
        match name {
            Some(n) => {
                w.names.entry(n).or_default().insert(owner);
            }
            None => {
                w.every.insert(owner);
            }
        }
    }
}

/// The owners an event concerns: those of its folder's entry, every owner when the queue
/// overflowed (events were lost); a folder's watch that ended (the folder went) is dropped.
fn concerned(watched: &Mutex<HashMap<WatchDescriptor, Watched>>, wd: &WatchDescriptor, mask: EventMask, name: Option<&OsString>) -> BTreeSet<u32> {
    let mut watched = watched.lock().unwrap_or_else(|e| e.into_inner());
    if mask.contains(EventMask::Q_OVERFLOW) {
        return watched.values().flat_map(|w| w.owners(None)).collect();
    }
    if mask.contains(EventMask::IGNORED) {
        return watched.remove(wd).map(|w| w.owners(None)).unwrap_or_default();
    }
    watched.get(wd).map(|w| w.owners(name)).unwrap_or_default()
}

/// Every place of `places` with, for a symlink or a path under one, the place it reaches:
/// the user edits the target (`~/.bashrc` linked into a dotfiles repository).
pub fn with_targets(places: Vec<Watch>) -> Vec<Watch> {
    let mut out: BTreeSet<Watch> = BTreeSet::new();
    for p in places {
        let target = match &p {
            Watch::File(f) => std::fs::canonicalize(f).ok().filter(|t| t != f).map(Watch::File),
            Watch::Folder(d) => std::fs::canonicalize(d).ok().filter(|t| t != d).map(Watch::Folder),
        };
        out.extend(target);
        out.insert(p);
    }
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::mpsc;

    async fn changed(rx: &mut mpsc::UnboundedReceiver<Cmd>) -> Option<Vec<u32>> {
        match tokio::time::timeout(Duration::from_secs(2), rx.recv()).await {
            Ok(Some(Cmd::ConfigChanged { owners })) => Some(owners),
            _ => None,
        }
    }

    #[tokio::test]
    async fn a_change_to_a_watched_file_reaches_its_owners_once_and_others_do_not() {
        let dir = std::env::temp_dir().join(format!("pincer-watch-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("conf.d")).unwrap();
        std::fs::write(dir.join(".gitconfig"), "[user]\n").unwrap();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut w = ConfigWatch::start(tx).unwrap();
        w.watch(1000, &[Watch::File(dir.join(".gitconfig")), Watch::File(dir.join(".bashrc")), Watch::Folder(dir.join("conf.d"))]);
        w.watch(1001, &[Watch::File(dir.join(".profile"))]);

        // An unwatched name in a watched folder: nothing.
        std::fs::write(dir.join(".bash_history"), "ls\n").unwrap();
        assert_eq!(changed(&mut rx).await, None);
        // git's way: a lock file written, then renamed over the file. One change.
        std::fs::write(dir.join(".gitconfig.lock"), "[core]\n\thooksPath = x\n").unwrap();
        std::fs::rename(dir.join(".gitconfig.lock"), dir.join(".gitconfig")).unwrap();
        assert_eq!(changed(&mut rx).await, Some(vec![1000]));
        assert_eq!(changed(&mut rx).await, None, "one change, heard once");
        // A file that did not exist, made.
        std::fs::write(dir.join(".bashrc"), "PATH=~/x:$PATH\n").unwrap();
        assert_eq!(changed(&mut rx).await, Some(vec![1000]));
        // Any file of a watched folder.
        std::fs::write(dir.join("conf.d/new.sh"), "x\n").unwrap();
        assert_eq!(changed(&mut rx).await, Some(vec![1000]));
        std::fs::write(dir.join(".profile"), "x\n").unwrap();
        assert_eq!(changed(&mut rx).await, Some(vec![1001]));
        // The owner's last session ended: its places are no longer watched, the other's are.
        assert_eq!(w.folders(), 2);
        w.forget(1000);
        assert_eq!(w.folders(), 1, "the folder 1001 shares stays, conf.d goes");
        std::fs::write(dir.join(".gitconfig"), "[user]\n").unwrap();
        std::fs::write(dir.join("conf.d/other.sh"), "x\n").unwrap();
        assert_eq!(changed(&mut rx).await, None);
        std::fs::write(dir.join(".profile"), "y\n").unwrap();
        assert_eq!(changed(&mut rx).await, Some(vec![1001]));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
