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
//! later counts. The folders of the sessions' roots that the never list's scan walked are
//! watched for git's markers ([`Watch::Tree`]): a repository the user clones or makes there
//! while a session runs is found, and what its configuration names is protected too.

use super::core::Cmd;
use super::decisions::Inbox;
use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask, Watches};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A place of the user's configuration to watch.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Watch {
    /// A file, by its name in its folder (made, written, replaced, moved or removed).
    File(PathBuf),
    /// A folder: every entry of it, and its own name in its parent.
    Folder(PathBuf),
    /// A folder of a session's root or of the home, as the never list's scans walked it: an
    /// entry that tells of a git repository made, changed, moved or removed there
    /// ([`tells_of_a_repository`]) concerns its owners, and a folder made or moved in there is
    /// watched alike (with the folders in it, up to [`TREE_WALK`] entries, but not those
    /// inside a git directory) from the moment it is seen.
    Tree(PathBuf),
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

/// How many entries a folder made or moved into a watched tree is walked for, to watch the
/// folders in it and look for git's markers (a tree moved in whole, or made faster than
/// the watch was added).
const TREE_WALK: usize = 2_000;

/// How many paths that tell of a repository one change carries at most (the reading scans
/// each).
const MAX_HEARD: usize = 64;

/// How many tree folders the watch holds at most for one owner: past it, the owner's
/// trees' new folders are not watched (so no owner's sessions spend another's share; the
/// kernel's own limit is `fs.inotify.max_user_watches`).
const MAX_TREE_FOLDERS: usize = 32_768;

/// How many tree folders one watch of the configuration may give up when the kernel's
/// watches are spent (each try that the kernel refuses again gives up one more).
const GIVE_UP: usize = 8;

/// Whether the entry `name` of the tree folder `folder` tells of a git repository
/// ([`Watch::Tree`]): a `.git` (folder, file or link), the configuration in a `.git`
/// folder, or a bare repository's `HEAD` or `config` beside the other. Other files named
/// `config` or `HEAD` (a session may make them all the time) tell nothing.
fn tells_of_a_repository(folder: &Path, name: &OsStr) -> bool {
    if name == ".git" {
        return true;
    }
    if folder.file_name() == Some(OsStr::new(".git")) {
        return name == "config" || name == "config.worktree";
    }
    let other = match name.to_str() {
        Some("HEAD") => "config",
        Some("config") => "HEAD",
        _ => return false,
    };
    folder.join(other).is_file()
}

/// Whether the folder `dir` of a tree is inside a git directory, whose own folders are
/// not watched (what git writes there tells of no new repository).
fn in_git_directory(dir: &Path) -> bool {
    dir.parent().and_then(Path::file_name) == Some(OsStr::new(".git"))
}

/// What changes a file's content or name in a watched folder for `interest`: every write
/// (an editor or a program may keep the file open), and the names made, moved and removed.
/// A tree's folder is watched for names only (a build's writes would flood the queue), but
/// a `.git` folder for its configuration's writes too.
fn mask(interest: &Interest, dir: &Path) -> WatchMask {
    let names = WatchMask::CREATE | WatchMask::DELETE | WatchMask::MOVED_FROM | WatchMask::MOVED_TO;
    let writes = WatchMask::MODIFY | WatchMask::CLOSE_WRITE;
    match interest {
        Interest::Tree if dir.file_name() != Some(OsStr::new(".git")) => names,
        _ => names | writes,
    }
}

/// Whether `inotify` has events to read within `timeout` (none: waits until it has).
fn readable(inotify: &Inotify, timeout: Option<Duration>) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    let mut fds = libc::pollfd { fd: inotify.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    let ms = timeout.map_or(-1, |t| i32::try_from(t.as_millis()).unwrap_or(i32::MAX).max(1));
    loop {
        // SAFETY: poll on one valid pollfd for the duration of the call.
        let n = unsafe { libc::poll(&mut fds, 1, ms) };
        if n >= 0 {
            return Ok(n > 0);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Who cares about the entries of one watched folder.
#[derive(Debug, Default)]
struct Watched {
    /// The owners who care about each name.
    names: BTreeMap<OsString, BTreeSet<u32>>,
    /// The owners who care about every entry.
    every: BTreeSet<u32>,
    /// The owners who watch the folder as part of a root's tree ([`Watch::Tree`]).
    trees: BTreeSet<u32>,
    /// The folder (for the folders made in a tree).
    path: Option<PathBuf>,
}

impl Watched {
    /// The owners an event about entry `name` (none: the folder itself) concerns.
    fn owners(&self, name: Option<&OsStr>) -> BTreeSet<u32> {
        let mut out = self.every.clone();
        match name {
            Some(n) => {
                out.extend(self.names.get(n).into_iter().flatten());
                if !self.trees.is_empty() && self.path.as_deref().is_some_and(|f| tells_of_a_repository(f, n)) {
                    out.extend(&self.trees);
                }
            }
            None => out.extend(self.names.values().flatten()),
        }
        out
    }

    fn is_empty(&self) -> bool {
        self.every.is_empty() && self.names.is_empty() && self.trees.is_empty()
    }
}

/// What a watch is for, in one folder.
enum Interest {
    /// One entry, by name.
    Name(OsString),
    /// Every entry.
    Every,
    /// The folder as part of a root's tree.
    Tree,
}

/// The inotify watches and who cares about each, shared by the [`ConfigWatch`] and its task
/// (which watches the folders made in a tree).
struct Folders {
    watches: Watches,
    watched: Mutex<HashMap<WatchDescriptor, Watched>>,
    /// How many tree folders each owner has (locked after `watched` when both are).
    tree_folders: Mutex<HashMap<u32, usize>>,
}

impl Folders {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<WatchDescriptor, Watched>> {
        self.watched.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Watches `dir` for `owners` with `interest`. Whether it is watched now (a tree folder:
    /// for at least one owner within [`MAX_TREE_FOLDERS`]).
    fn add(&self, owners: &BTreeSet<u32>, dir: &Path, interest: &Interest) -> bool {
        let mut owners = owners.clone();
        if matches!(interest, Interest::Tree) {
            let counts = self.tree_folders.lock().unwrap_or_else(|e| e.into_inner());
            owners.retain(|o| counts.get(o).copied().unwrap_or(0) < MAX_TREE_FOLDERS);
            if owners.is_empty() {
                tracing::warn!(folder = %dir.display(), limit = MAX_TREE_FOLDERS, "too many watched folders: not watched for repositories made in it");
                return false;
            }
        }
        // Added to what the folder is watched for already (another interest's events).
        let mut given_up = 0;
        let wd = loop {
            match self.watches.clone().add(dir, mask(interest, dir) | WatchMask::ONLYDIR | WatchMask::MASK_ADD) {
                Ok(wd) => break wd,
                // The kernel's watches are spent (a session's folders in a watched tree can
                // spend them): the user's configuration comes before a tree's folder.
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) && !matches!(interest, Interest::Tree) && given_up < GIVE_UP && self.give_up_a_tree_folder() => {
                    given_up += 1;
                }
                // A tree's folder past the kernel's watches is common (a session's build
                // tree), and would flood the log; the configuration's is not.
                Err(e) if matches!(interest, Interest::Tree) => {
                    tracing::debug!(folder = %dir.display(), error = %e, "not watched");
                    return false;
                }
                Err(e) => {
                    tracing::warn!(folder = %dir.display(), error = %e, "a file of the configuration not watched: a change to it is heard at the next reading only");
                    return false;
                }
            }
        };
        let mut watched = self.lock();
        let w = watched.entry(wd).or_default();
        w.path.get_or_insert_with(|| dir.to_path_buf());
        match interest {
            Interest::Name(n) => w.names.entry(n.clone()).or_default().extend(owners),
            Interest::Every => w.every.extend(owners),
            Interest::Tree => {
                let mut counts = self.tree_folders.lock().unwrap_or_else(|e| e.into_inner());
                for o in owners {
                    if w.trees.insert(o) {
                        *counts.entry(o).or_default() += 1;
                    }
                }
            }
        }
        true
    }

    /// Gives up the watch of the tree folder added last (an inotify instance numbers its
    /// watches in the order they are made) that no file or name of the configuration shares, to make room for a watch of the configuration that the kernel
    /// refused for want of watches (`fs.inotify.max_user_watches`, counted per uid: the
    /// daemon's and every other process of root's). Whether one was given up.
    fn give_up_a_tree_folder(&self) -> bool {
        let mut watched = self.lock();
        let newest = watched
            .iter()
            .filter(|(_, w)| w.every.is_empty() && w.names.is_empty() && !w.trees.is_empty())
            .map(|(wd, _)| wd)
            .max()
            .cloned();
        let Some(wd) = newest else { return false };
        let Some(w) = watched.remove(&wd) else { return false };
        let mut counts = self.tree_folders.lock().unwrap_or_else(|e| e.into_inner());
        for o in &w.trees {
            counts.entry(*o).and_modify(|n| *n = n.saturating_sub(1));
        }
        drop(counts);
        drop(watched);
        if let Err(e) = self.watches.clone().remove(wd) {
            tracing::debug!(error = %e, "a tree folder's watch was already gone");
        }
        tracing::warn!(folder = ?w.path, "inotify watches spent: a tree folder is no longer watched for repositories made in it, so the configuration's files are");
        true
    }

    /// The owners an event concerns: those of its folder's entry, every owner when the queue
    /// overflowed (events were lost); a folder's watch that ended (the folder went) is
    /// dropped. A folder made or moved into a tree is watched as part of it, and its
    /// owners hear of it when a git marker is found in it.
    ///
    /// Where an event tells of a repository in a tree (its marker, or a folder moved in
    /// that holds one or more entries than the walk), the path is put in `heard`: the
    /// reading it leads to reads that repository by its path, whatever the scans' bounds.
    fn concerned(&self, wd: &WatchDescriptor, mask: EventMask, name: Option<&OsStr>, heard: &mut BTreeSet<PathBuf>) -> BTreeSet<u32> {
        let (owners, trees) = {
            let mut watched = self.lock();
            if mask.contains(EventMask::Q_OVERFLOW) {
                return watched.values().flat_map(|w| w.owners(None).into_iter().chain(w.trees.iter().copied())).collect();
            }
            if mask.contains(EventMask::IGNORED) {
                // A tree's folder removed is no repository made.
                let Some(w) = watched.remove(wd) else { return BTreeSet::new() };
                let mut counts = self.tree_folders.lock().unwrap_or_else(|e| e.into_inner());
                for o in &w.trees {
                    counts.entry(*o).and_modify(|n| *n = n.saturating_sub(1));
                }
                return w.owners(None);
            }
            match watched.get(wd) {
                Some(w) => {
                    if let (false, Some(n), Some(f)) = (w.trees.is_empty(), name, w.path.as_deref()) {
                        if tells_of_a_repository(f, n) {
                            heard.insert(f.join(n));
                        }
                    }
                    (w.owners(name), w.trees.clone())
                }
                None => return BTreeSet::new(),
            }
        };
        let mut owners = owners;
        let new_folder = mask.contains(EventMask::ISDIR) && mask.intersects(EventMask::CREATE | EventMask::MOVED_TO);
        if let (true, false, Some(name)) = (new_folder, trees.is_empty(), name) {
            let Some(dir) = self.watches_path(wd).map(|d| d.join(name)) else { return owners };
            if !in_git_directory(&dir) && self.watch_tree(&trees, &dir) {
                owners.extend(&trees);
                heard.insert(dir);
            }
        }
        owners
    }

    /// The folder a watch descriptor is for.
    fn watches_path(&self, wd: &WatchDescriptor) -> Option<PathBuf> {
        self.lock().get(wd).and_then(|w| w.path.clone())
    }

    /// Watches `top` (a folder just made or moved into a tree) and the folders in it, up to
    /// [`TREE_WALK`] entries, for `owners`. Whether a git marker was found in it, or the
    /// walk stopped before its end (a folder of more entries may hold one past the walk:
    /// the reading it leads to scans it with the scans' own bounds, off this thread).
    fn watch_tree(&self, owners: &BTreeSet<u32>, top: &Path) -> bool {
        let mut found = false;
        let mut queue = std::collections::VecDeque::from([top.to_path_buf()]);
        let mut seen = 0usize;
        while let Some(dir) = queue.pop_front() {
            if !self.add(owners, &dir, &Interest::Tree) {
                continue;
            }
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for e in entries.flatten() {
                seen += 1;
                if seen > TREE_WALK {
                    return true;
                }
                found |= tells_of_a_repository(&dir, &e.file_name());
                let path = e.path();
                if e.file_type().is_ok_and(|t| t.is_dir()) && !in_git_directory(&path) {
                    queue.push_back(path);
                }
            }
        }
        found
    }
}

/// The watches of the users' configuration, with the task that turns their events into
/// [`Cmd::ConfigChanged`] for the actor.
pub struct ConfigWatch {
    folders: Arc<Folders>,
}

impl std::fmt::Debug for ConfigWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigWatch").finish_non_exhaustive()
    }
}

impl ConfigWatch {
    /// Starts the watch on a thread of its own: changes go to `inbox`. Not on the daemon's
    /// runtime: the watch looks at the folders of sessions' roots, where a session's held
    /// access (a `mkdir` waiting for the daemon's decision) keeps its folder locked, and a
    /// runtime thread waiting for that lock would keep the decision from being made.
    pub fn start(inbox: Inbox) -> std::io::Result<ConfigWatch> {
        let mut inotify = Inotify::init()?;
        let folders = Arc::new(Folders { watches: inotify.watches(), watched: Mutex::default(), tree_folders: Mutex::default() });
        let seen = folders.clone();
        std::thread::Builder::new().name("pincer-config-watch".into()).spawn(move || {
            let mut buf = vec![0u8; 16 * 1024];
            let mut last: Option<Instant> = None;
            loop {
                if let Err(e) = readable(&inotify, None) {
                    tracing::error!(error = %e, "the watch of the users' configuration failed; it is read again only when a session starts");
                    return;
                }
                let now = Instant::now();
                let settle = last.map_or(now, |l| l + GAP).max(now + SETTLE);
                // The events that come within SETTLE of the first (or before GAP has passed
                // since the last report) are one change.
                let mut owners = BTreeSet::new();
                let mut heard = BTreeSet::new();
                loop {
                    match inotify.read_events(&mut buf) {
                        Ok(events) => {
                            for e in events {
                                owners.extend(seen.concerned(&e.wd, e.mask, e.name, &mut heard));
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(e) => {
                            tracing::error!(error = %e, "the watch of the users' configuration failed; it is read again only when a session starts");
                            return;
                        }
                    }
                    let left = settle.saturating_duration_since(Instant::now());
                    if left.is_zero() || !readable(&inotify, Some(left)).unwrap_or(false) {
                        break;
                    }
                }
                if owners.is_empty() {
                    continue;
                }
                last = Some(Instant::now());
                if inbox.send(Cmd::ConfigChanged { owners: owners.into_iter().collect(), repositories: heard.into_iter().take(MAX_HEARD).collect() }).is_err() {
                    return;
                }
            }
        })?;
        Ok(ConfigWatch { folders })
    }

    /// Watches `places` for `owner`. A place whose folder does not exist yet is watched by
    /// the name of its first missing folder in the nearest folder that exists: the folder
    /// made counts as a change, and the reading it leads to watches the place itself.
    pub fn watch(&mut self, owner: u32, places: &[Watch]) {
        let owners = BTreeSet::from([owner]);
        for place in places {
            match place {
                Watch::File(p) => self.watch_name(&owners, p),
                Watch::Folder(p) => {
                    self.watch_name(&owners, p);
                    self.folders.add(&owners, p, &Interest::Every);
                }
                Watch::Tree(p) => {
                    self.folders.add(&owners, p, &Interest::Tree);
                }
            }
        }
    }

    /// Watches `path` by its name in its folder, or, where that folder does not exist, by
    /// the name of the first missing folder on its way.
    fn watch_name(&self, owners: &BTreeSet<u32>, path: &Path) {
        let mut entry = path;
        while let (Some(dir), Some(name)) = (entry.parent(), entry.file_name()) {
            if dir.is_dir() {
                self.folders.add(owners, dir, &Interest::Name(name.to_owned()));
                return;
            }
            entry = dir;
        }
    }

    /// Stops watching for `owner` (its last session ended); a folder no owner watches any
    /// more is no longer watched.
    pub fn forget(&mut self, owner: u32) {
        let mut watched = self.folders.lock();
        let mut unwatched = Vec::new();
        for (wd, w) in watched.iter_mut() {
            w.every.remove(&owner);
            w.trees.remove(&owner);
            w.names.retain(|_, owners| {
                owners.remove(&owner);
                !owners.is_empty()
            });
            if w.is_empty() {
                unwatched.push(wd.clone());
            }
        }
        for wd in unwatched {
            watched.remove(&wd);
            let _ = self.folders.watches.clone().remove(wd);
        }
        self.folders.tree_folders.lock().unwrap_or_else(|e| e.into_inner()).remove(&owner);
    }

    /// How many folders are watched.
    pub fn folders(&self) -> usize {
        self.folders.lock().len()
    }
}

/// Every place of `places` with, for a symlink or a path under one, the place it reaches:
/// the user edits the target (`~/.bashrc` linked into a dotfiles repository).
pub fn with_targets(places: Vec<Watch>) -> Vec<Watch> {
    let mut out: BTreeSet<Watch> = BTreeSet::new();
    for p in places {
        let target = match &p {
            Watch::File(f) => std::fs::canonicalize(f).ok().filter(|t| t != f).map(Watch::File),
            Watch::Folder(d) => std::fs::canonicalize(d).ok().filter(|t| t != d).map(Watch::Folder),
            // A scan follows no link.
            Watch::Tree(_) => None,
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
            Ok(Some(Cmd::ConfigChanged { owners, .. })) => Some(owners),
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

    #[tokio::test]
    async fn a_repository_made_anywhere_in_a_watched_tree_reaches_its_owner() {
        let dir = std::env::temp_dir().join(format!("pincer-tree-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("root/src")).unwrap();
        std::fs::create_dir_all(dir.join("elsewhere/moved/.git")).unwrap();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut w = ConfigWatch::start(tx).unwrap();
        w.watch(1000, &[Watch::Tree(dir.join("root")), Watch::Tree(dir.join("root/src"))]);

        // Files and folders that tell of no repository: nothing.
        std::fs::write(dir.join("root/src/main.rs"), "fn main() {}\n").unwrap();
        std::fs::create_dir_all(dir.join("root/target/debug")).unwrap();
        std::fs::write(dir.join("root/target/debug/out"), "x").unwrap();
        std::fs::write(dir.join("root/src/config"), "x").unwrap();
        std::fs::write(dir.join("root/target/HEAD"), "x").unwrap();
        assert_eq!(changed(&mut rx).await, None, "files named config and HEAD apart");
        let watched = w.folders();
        // A repository made in a folder made after the scan (git clone: the folder, then .git).
        std::fs::create_dir_all(dir.join("root/team/proj")).unwrap();
        assert_eq!(changed(&mut rx).await, None, "a new folder alone");
        std::fs::create_dir(dir.join("root/team/proj/.git")).unwrap();
        assert_eq!(changed(&mut rx).await, Some(vec![1000]), "a .git made two new folders down");
        // Its configuration, written after: heard in the new .git folder.
        std::fs::write(dir.join("root/team/proj/.git/config.lock"), "[core]\n\thooksPath = githooks\n").unwrap();
        std::fs::rename(dir.join("root/team/proj/.git/config.lock"), dir.join("root/team/proj/.git/config")).unwrap();
        assert_eq!(changed(&mut rx).await, Some(vec![1000]), "the new repository's config");
        // What git writes inside it: nothing, and its folders are not watched.
        std::fs::create_dir_all(dir.join("root/team/proj/.git/objects/ab")).unwrap();
        std::fs::write(dir.join("root/team/proj/.git/objects/ab/cdef"), "x").unwrap();
        std::fs::write(dir.join("root/team/proj/.git/index"), "x").unwrap();
        assert_eq!(changed(&mut rx).await, None, "git's own writes");
        assert_eq!(w.folders(), watched + 3, "team, proj and proj/.git: {watched}");
        // A bare repository: HEAD beside config.
        std::fs::write(dir.join("root/src/HEAD"), "ref: refs/heads/main\n").unwrap();
        assert_eq!(changed(&mut rx).await, Some(vec![1000]), "a bare repository's HEAD beside its config");
        // A tree holding a repository, moved in whole.
        std::fs::rename(dir.join("elsewhere/moved"), dir.join("root/src/moved")).unwrap();
        assert_eq!(changed(&mut rx).await, Some(vec![1000]), "a repository moved in");
        // A folder of the tree removed: no repository made.
        std::fs::remove_dir_all(dir.join("root/target")).unwrap();
        assert_eq!(changed(&mut rx).await, None);
        w.forget(1000);
        assert_eq!(w.folders(), 0, "the owner's last session ended");
        std::fs::create_dir(dir.join("root/.git")).unwrap();
        assert_eq!(changed(&mut rx).await, None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A change that tells of a repository carries where: the marker made, and a folder
    /// moved in that holds more entries than the walk (its repository may lie past it),
    /// so the reading reads them by their paths whatever its scans' bounds.
    #[tokio::test]
    async fn a_repository_heard_in_a_tree_is_carried_by_its_path() {
        let dir = std::env::temp_dir().join(format!("pincer-heard-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("root/vendor/lib")).unwrap();
        let big = dir.join("elsewhere/bundle");
        std::fs::create_dir_all(&big).unwrap();
        for i in 0..TREE_WALK + 100 {
            std::fs::write(big.join(format!("sample-{i:04}.csv")), "").unwrap();
        }
        std::fs::create_dir_all(big.join("zz-proj/.git")).unwrap();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut w = ConfigWatch::start(tx).unwrap();
        w.watch(1000, &[Watch::Tree(dir.join("root")), Watch::Tree(dir.join("root/vendor")), Watch::Tree(dir.join("root/vendor/lib"))]);
        let heard = |rx: &mut mpsc::UnboundedReceiver<Cmd>| match rx.try_recv() {
            Ok(Cmd::ConfigChanged { owners, repositories }) => Some((owners, repositories)),
            _ => None,
        };
        std::fs::create_dir(dir.join("root/vendor/lib/.git")).unwrap();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let got = heard(&mut rx).expect("the .git made");
        assert_eq!(got, (vec![1000], vec![dir.join("root/vendor/lib/.git")]));
        std::fs::rename(&big, dir.join("root/bundle")).unwrap();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let got = heard(&mut rx).expect("a folder of more entries than the walk, moved in");
        assert_eq!(got, (vec![1000], vec![dir.join("root/bundle")]));
        w.forget(1000);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
