//! Resolution of a worker's requested path inside its session's protected roots without
//! following any symlink and never out of the root (`openat2` with `RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS`, and a walk of `O_NOFOLLOW` opens to name what was wrong), so the
//! grant goes to the object actually found (its device and inode), not to a name.

use crate::access::Access;
use crate::kernel::ObjectId;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// Longest path accepted (bytes), as the kernel's `PATH_MAX`.
pub const MAX_PATH: usize = 4096;
/// Longest path component accepted (bytes), as the kernel's `NAME_MAX`.
pub const MAX_NAME: usize = 255;
/// Content read for vote 2 at most (bytes).
pub const MAX_CONTENT: usize = 64 * 1024;

/// Why a path could not be resolved. Every one of them is a denial.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The path is empty.
    #[error("empty path")]
    Empty,
    /// The path holds a NUL byte.
    #[error("the path holds a NUL byte")]
    Nul,
    /// The path is longer than the kernel accepts.
    #[error("the path is {len} bytes long (at most {MAX_PATH})")]
    TooLong {
        /// Its length.
        len: usize,
    },
    /// A component is longer than the kernel accepts.
    #[error("path component of {len} bytes (at most {MAX_NAME})")]
    NameTooLong {
        /// Its length.
        len: usize,
    },
    /// The path is relative (the request tool makes paths absolute).
    #[error("{0:?} is not absolute")]
    Relative(PathBuf),
    /// The path has a `..` component.
    #[error("{0:?} has a `..` component; name the resource directly")]
    DotDot(PathBuf),
    /// The path is outside every protected root of the session.
    #[error("{0:?} is outside every protected root of this session")]
    OutsideRoots(PathBuf),
    /// The path names a protected root itself.
    #[error("{0:?} is a protected root itself; request paths inside it")]
    IsRoot(PathBuf),
    /// A component (or the resource) is a symbolic link.
    #[error("{0:?} is a symbolic link; request the file it points to inside the root")]
    Symlink(PathBuf),
    /// A directory on the way is missing or not a directory.
    #[error("{0:?} does not exist or is not a directory")]
    NotADirectory(PathBuf),
    /// The resource does not exist (for any access but `create`).
    #[error("{0:?} does not exist")]
    NotFound(PathBuf),
    /// `create` of a file (or other non-directory) that exists.
    #[error("{0:?} already exists; ask for write access to change it")]
    Exists(PathBuf),
    /// `list` of something that is not a directory.
    #[error("{0:?} is not a directory; only directories can be listed")]
    NotListable(PathBuf),
    /// `read` or `write` of a directory.
    #[error("{0:?} is a directory; ask for list access")]
    IsDirectory(PathBuf),
    /// The root changed since the session started.
    #[error("protected root {0:?} is no longer the directory the session registered")]
    RootChanged(PathBuf),
    /// A system call failed.
    #[error("cannot examine {path:?}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

/// A protected root of a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    /// Absolute, canonical directory.
    pub path: PathBuf,
    /// Its object id when the session started.
    pub id: ObjectId,
    /// Prefix of the twin's paths under this root (empty for a session's single root).
    pub label: String,
}

/// A resolved request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Index of the root in the session's list.
    pub root: usize,
    /// The resource's absolute path (normalized, inside the root).
    pub abs: PathBuf,
    /// The path as the twin sees it: relative to the root (with the root's label), a
    /// trailing `/` for a directory.
    pub rel: String,
    /// The object to put the grant on: the resource itself, or for `create` of a new name
    /// its parent (for `create` in an existing folder, the folder).
    pub target: ObjectId,
    /// Whether the resource is a directory.
    pub is_dir: bool,
    /// Up to [`MAX_CONTENT`] bytes of a regular file's content (for vote 2).
    pub content: Option<Vec<u8>>,
    /// Whether the resource, or a folder between it and its root, is kept more private
    /// than its folder ([`kept_private`]).
    pub kept_private: bool,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ResolveError + '_ {
    move |source| ResolveError::Io { path: path.into(), source }
}

fn cstr(p: &Path) -> Result<CString, ResolveError> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| ResolveError::Nul)
}

fn open_at(dir: Option<&OwnedFd>, name: &Path, flags: i32) -> std::io::Result<OwnedFd> {
    let c = CString::new(name.as_os_str().as_bytes()).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    let dfd = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    // SAFETY: `c` is a valid NUL-terminated string; the returned fd is owned below.
    let fd = unsafe { libc::openat(dfd, c.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by openat and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `rel` (normal components only) under `dir` in one system call: no symlink on the way and
/// never out of `dir`, as a walk of `O_NOFOLLOW` opens would find it.
fn open_beneath(dir: &OwnedFd, rel: &Path, flags: i32) -> std::io::Result<OwnedFd> {
    let c = CString::new(rel.as_os_str().as_bytes()).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    let fd = super::layers::open_beneath(dir.as_raw_fd(), &c, flags);
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by openat2 and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Up to [`MAX_CONTENT`] bytes of the regular file `fd` of `size` bytes, read into a buffer
/// of that size (one read, and one that finds the end, for a file that did not grow).
fn read_content(fd: OwnedFd, size: i64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut buf = Vec::with_capacity(usize::try_from(size).unwrap_or(0).min(MAX_CONTENT) + 1);
    std::fs::File::from(fd).take(MAX_CONTENT as u64).read_to_end(&mut buf)?;
    Ok(buf)
}

fn stat_fd(fd: &OwnedFd) -> std::io::Result<libc::stat> {
    // SAFETY: a zeroed `stat` is a valid out-parameter.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fd is open; st is a valid pointer.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st)
}

fn stat_at(dir: &OwnedFd, name: &Path) -> std::io::Result<libc::stat> {
    let c = CString::new(name.as_os_str().as_bytes()).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: a zeroed `stat` is a valid out-parameter.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: dir is open, c is NUL-terminated, st is valid.
    if unsafe { libc::fstatat(dir.as_raw_fd(), c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st)
}

fn object(st: &libc::stat) -> ObjectId {
    let dev = st.st_dev;
    ObjectId { dev: pincer_common::kernel_dev(libc::major(dev), libc::minor(dev)), ino: st.st_ino }
}

fn kind(st: &libc::stat) -> u32 {
    st.st_mode & libc::S_IFMT
}

/// Checks the shape of an untrusted path: not empty, no NUL, not too long, absolute, no `..`.
pub fn check_shape(path: &str) -> Result<PathBuf, ResolveError> {
    if path.is_empty() {
        return Err(ResolveError::Empty);
    }
    if path.contains('\0') {
        return Err(ResolveError::Nul);
    }
    if path.len() > MAX_PATH {
        return Err(ResolveError::TooLong { len: path.len() });
    }
    let p = PathBuf::from(path);
    if !p.is_absolute() {
        return Err(ResolveError::Relative(p));
    }
    for c in p.components() {
        match c {
            Component::ParentDir => return Err(ResolveError::DotDot(p)),
            Component::Normal(n) if n.len() > MAX_NAME => return Err(ResolveError::NameTooLong { len: n.len() }),
            _ => {}
        }
    }
    Ok(p)
}

/// Resolves `path` for `access` inside `roots` without following any symlink.
pub fn resolve(roots: &[Root], path: &str, access: Access) -> Result<Resolved, ResolveError> {
    let p = check_shape(path)?;
    let norm: PathBuf = p.components().collect();
    let (ri, root) = roots
        .iter()
        .enumerate()
        .filter(|(_, r)| norm.starts_with(&r.path))
        .max_by_key(|(_, r)| r.path.components().count())
        .ok_or_else(|| ResolveError::OutsideRoots(norm.clone()))?;
    let rest: Vec<PathBuf> = norm
        .strip_prefix(&root.path)
        .expect("prefix checked")
        .components()
        .map(|c| PathBuf::from(c.as_os_str()))
        .collect();
    let Some((last, dirs)) = rest.split_last() else {
        return Err(ResolveError::IsRoot(norm));
    };
    let _ = cstr(&norm)?;
    let mut dir = open_at(None, &root.path, libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW).map_err(io(&root.path))?;
    let st = stat_fd(&dir).map_err(io(&root.path))?;
    if object(&st) != root.id {
        return Err(ResolveError::RootChanged(root.path.clone()));
    }
    let mut so_far = root.path.clone();
    // The directories in one call; on any failure, the walk below names what was wrong.
    if !dirs.is_empty() {
        let between: PathBuf = dirs.iter().collect();
        if let Ok(fd) = open_beneath(&dir, &between, libc::O_PATH | libc::O_DIRECTORY) {
            dir = fd;
            so_far.push(&between);
        }
    }
    let walked = so_far.components().count() - root.path.components().count();
    for d in &dirs[walked..] {
        so_far.push(d);
        match stat_at(&dir, d) {
            Ok(st) if kind(&st) == libc::S_IFLNK => return Err(ResolveError::Symlink(so_far)),
            Ok(st) if kind(&st) != libc::S_IFDIR => return Err(ResolveError::NotADirectory(so_far)),
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Err(ResolveError::NotADirectory(so_far)),
            Err(e) => return Err(ResolveError::Io { path: so_far, source: e }),
        }
        dir = open_at(Some(&dir), d, libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW).map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) | Some(libc::ENOTDIR) => ResolveError::Symlink(so_far.clone()),
            _ => ResolveError::Io { path: so_far.clone(), source: e },
        })?;
    }
    let full = so_far.join(last);
    let kept_private = kept_private(&root.path, &full);
    let mut rel = twin_path(root, rest.iter(), false);
    let st = match stat_at(&dir, last) {
        Ok(st) => Some(st),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => None,
        Err(e) => return Err(ResolveError::Io { path: full, source: e }),
    };
    let Some(st) = st else {
        if access == Access::Create {
            let parent = stat_fd(&dir).map_err(io(&full))?;
            return Ok(Resolved { root: ri, abs: full, rel, target: object(&parent), is_dir: false, content: None, kept_private });
        }
        return Err(ResolveError::NotFound(full));
    };
    if kind(&st) == libc::S_IFLNK {
        return Err(ResolveError::Symlink(full));
    }
    let is_dir = kind(&st) == libc::S_IFDIR;
    if is_dir {
        rel.push('/');
    }
    match access {
        // `create` in an existing folder: any visible name there, the grant on the folder.
        Access::Create if !is_dir => return Err(ResolveError::Exists(full)),
        Access::List if !is_dir => return Err(ResolveError::NotListable(full)),
        Access::Read | Access::Write if is_dir => return Err(ResolveError::IsDirectory(full)),
        _ => {}
    }
    let mut content = None;
    if kind(&st) == libc::S_IFREG && matches!(access, Access::Read | Access::Write | Access::Delete) {
        // Read through a descriptor of the same inode: a swap after the stat is caught.
        if let Ok(fd) = open_at(Some(&dir), last, libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK) {
            if stat_fd(&fd).map(|s| object(&s) == object(&st)).unwrap_or(false) {
                content = read_content(fd, st.st_size).ok();
            }
        }
    }
    Ok(Resolved { root: ri, abs: full, rel, target: object(&st), is_dir, content, kept_private })
}

/// Whether `mode` (an object's) is kept more private than `dir_mode` (its folder's): a
/// file or directory whose mode gives its group and others nothing, in a folder whose mode
/// gives them something. The kernel's rule (`kept_private` in `pincer.bpf.c`): its owner,
/// or the tool that wrote it (ssh, gpg, KeePassXC, a browser's logins, a shell's history),
/// withheld what its surroundings give, so a grant on a folder above it does not reach it.
pub fn is_kept_private(mode: u32, dir_mode: u32) -> bool {
    let kind = mode & libc::S_IFMT;
    (kind == libc::S_IFREG || kind == libc::S_IFDIR) && mode & 0o077 == 0 && dir_mode & 0o077 != 0
}

/// Whether `abs`, or a folder between it and `root` (a directory above it), is kept more
/// private than the folder it is in ([`is_kept_private`]), read now without following
/// symlinks. A part that does not exist (a new name) ends the reading; any other failure
/// to read a mode, or a path outside `root`, counts as kept private (fail closed: the twin
/// then grants only on the user's word).
pub fn kept_private(root: &Path, abs: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let (Ok(rest), Ok(top)) = (abs.strip_prefix(root), std::fs::symlink_metadata(root)) else { return true };
    let (mut at, mut dir_mode) = (root.to_path_buf(), top.mode());
    for c in rest.components() {
        at.push(c);
        let m = match std::fs::symlink_metadata(&at) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return false,
            Err(_) => return true,
        };
        if is_kept_private(m.mode(), dir_mode) {
            return true;
        }
        dir_mode = m.mode();
    }
    false
}

/// The path as the twin sees it: the components under `root`, after the root's label, with
/// a trailing `/` for a directory. The one place both the request tool's paths and the
/// kernel's are spelled for the twin.
pub fn twin_path<P: AsRef<Path>>(root: &Root, components: impl IntoIterator<Item = P>, is_dir: bool) -> String {
    let mut rel = String::new();
    if !root.label.is_empty() {
        rel.push_str(&root.label);
        rel.push('/');
    }
    let parts: Vec<String> = components.into_iter().map(|c| c.as_ref().to_string_lossy().into_owned()).collect();
    rel.push_str(&parts.join("/"));
    if is_dir {
        rel.push('/');
    }
    rel
}

/// Up to [`MAX_CONTENT`] bytes of the regular file the kernel named by `object`, found at
/// `relative` under `root` without following any symlink. The name only leads to a
/// descriptor; the content is returned only if that descriptor is the kernel's object
/// (same device and inode) and the root is still the registered one, so a name swapped
/// since the miss yields nothing.
pub fn content_of(root: &Root, relative: &Path, id: ObjectId) -> Option<Vec<u8>> {
    let comps: Vec<&std::ffi::OsStr> = relative
        .components()
        .map(|c| match c {
            Component::Normal(n) => Some(n),
            _ => None,
        })
        .collect::<Option<_>>()?;
    if comps.is_empty() {
        return None;
    }
    let dir = open_at(None, &root.path, libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW).ok()?;
    if object_of_fd(&dir)? != root.id {
        return None;
    }
    let rel: PathBuf = comps.iter().collect();
    let fd = open_beneath(&dir, &rel, libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK).ok()?;
    let st = stat_fd(&fd).ok()?;
    if kind(&st) != libc::S_IFREG || object(&st) != id {
        return None;
    }
    read_content(fd, st.st_size).ok()
}

fn object_of_fd(fd: &OwnedFd) -> Option<ObjectId> {
    stat_fd(fd).ok().map(|st| object(&st))
}

/// The workspace tree under a root for the pre-committed policy: relative paths, `/` after
/// directories, symlinks not followed, at most `limit` entries.
pub fn workspace_tree(root: &Root, limit: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack: Vec<(PathBuf, String)> = vec![(root.path.clone(), root.label.clone())];
    while let Some((dir, rel)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            if out.len() >= limit {
                return out;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            let r = if rel.is_empty() { name } else { format!("{rel}/{name}") };
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                out.push(format!("{r}/"));
                stack.push((e.path(), r));
            } else if ft.is_file() {
                out.push(r);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, Vec<Root>) {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("ws");
        std::fs::create_dir_all(root.join("docs/sub")).unwrap();
        std::fs::write(root.join("docs/a.md"), "alpha").unwrap();
        std::fs::write(d.path().join("outside.txt"), "secret").unwrap();
        std::os::unix::fs::symlink(d.path().join("outside.txt"), root.join("docs/link")).unwrap();
        std::os::unix::fs::symlink(d.path(), root.join("up")).unwrap();
        let root = root.canonicalize().unwrap();
        let id = ObjectId::of_path(&root).unwrap();
        (d, vec![Root { path: root, id, label: String::new() }])
    }

    /// What its owner keeps more private than its folder is told apart by the modes alone:
    /// a 0600 file or a 0700 folder (and what lies in it) among 0755 folders is; the same
    /// in a folder that is as private (a umask of 077), a symlink, or a new name in a plain
    /// folder is not. The resolved request carries it.
    #[test]
    fn an_object_kept_more_private_than_its_folder_is_told_by_the_modes() {
        use std::os::unix::fs::PermissionsExt;
        let (_d, roots) = setup();
        let root = &roots[0].path;
        let mode = |p: &str, m: u32| std::fs::set_permissions(root.join(p), std::fs::Permissions::from_mode(m)).unwrap();
        std::fs::write(root.join("docs/Passwords.kdbx"), "x").unwrap();
        std::fs::create_dir_all(root.join("docs/private/deep")).unwrap();
        std::fs::write(root.join("docs/private/deep/plain.md"), "x").unwrap();
        std::fs::create_dir_all(root.join("closed")).unwrap();
        std::fs::write(root.join("closed/key"), "x").unwrap();
        mode("docs", 0o755);
        mode("docs/a.md", 0o644);
        mode("docs/Passwords.kdbx", 0o600);
        mode("docs/private", 0o700);
        mode("docs/private/deep/plain.md", 0o644);
        mode("closed", 0o700);
        mode("closed/key", 0o600);
        let kept = |p: &str| kept_private(root, &root.join(p));
        assert!(!kept("docs/a.md"), "a plain document");
        assert!(kept("docs/Passwords.kdbx"), "a 0600 file among 0755 folders");
        assert!(kept("docs/private/deep/plain.md"), "a plain file inside a 0700 folder");
        assert!(kept("docs/private/new.md"), "a new name inside a 0700 folder");
        assert!(!kept("docs/new.md"), "a new name in a plain folder");
        assert!(!kept("docs/link"), "a symlink (its mode is 0777)");
        assert!(kept_private(root, Path::new("/elsewhere/x")), "outside the root: fail closed");
        assert!(kept("docs/a.md/under-a-file"), "a mode that cannot be read (ENOTDIR): fail closed");
        // A 0700 folder among 0755 ones is kept private itself; a 0600 file in it is as
        // private as its folder, not more.
        assert!(kept("closed"));
        assert!(!is_kept_private(0o100600, 0o040700), "as private as its folder");
        assert!(is_kept_private(0o100600, 0o040750), "its folder gives the group something");
        assert!(!is_kept_private(0o100640, 0o040755), "the group may read it");
        assert!(!is_kept_private(0o020600, 0o040755), "a device node is not a file of the user's making");
        assert!(resolve(&roots, root.join("docs/Passwords.kdbx").to_str().unwrap(), Access::Read).unwrap().kept_private);
        assert!(!resolve(&roots, root.join("docs/a.md").to_str().unwrap(), Access::Read).unwrap().kept_private);
    }

    fn p(roots: &[Root], rel: &str) -> String {
        roots[0].path.join(rel).to_string_lossy().into_owned()
    }

    #[test]
    fn file_resolves_to_its_inode_with_content() {
        let (_d, roots) = setup();
        let r = resolve(&roots, &p(&roots, "docs/a.md"), Access::Read).unwrap();
        assert_eq!(r.rel, "docs/a.md");
        assert_eq!(r.target, ObjectId::of_path(&roots[0].path.join("docs/a.md")).unwrap());
        assert_eq!(r.content.as_deref(), Some(&b"alpha"[..]));
        let r = resolve(&roots, &p(&roots, "docs/sub"), Access::List).unwrap();
        assert_eq!(r.rel, "docs/sub/");
        assert!(r.is_dir);
    }

    #[test]
    fn create_targets_the_parent_directory() {
        let (_d, roots) = setup();
        let r = resolve(&roots, &p(&roots, "docs/new.md"), Access::Create).unwrap();
        assert_eq!(r.target, ObjectId::of_path(&roots[0].path.join("docs")).unwrap());
        assert_eq!(r.rel, "docs/new.md");
        assert!(matches!(resolve(&roots, &p(&roots, "docs/a.md"), Access::Create), Err(ResolveError::Exists(p)) if p == roots[0].path.join("docs/a.md")));
        let r = resolve(&roots, &p(&roots, "docs"), Access::Create).unwrap();
        assert_eq!((r.target, r.rel.as_str(), r.is_dir), (ObjectId::of_path(&roots[0].path.join("docs")).unwrap(), "docs/", true), "create in an existing folder");
    }

    #[test]
    fn escapes_and_bad_shapes_are_refused_with_clear_errors() {
        let (_d, roots) = setup();
        assert!(matches!(resolve(&roots, &p(&roots, "docs/link"), Access::Read), Err(ResolveError::Symlink(_))));
        assert!(matches!(resolve(&roots, &p(&roots, "up/outside.txt"), Access::Read), Err(ResolveError::Symlink(_))));
        assert!(matches!(resolve(&roots, &p(&roots, "docs/../../outside.txt"), Access::Read), Err(ResolveError::DotDot(_))));
        assert!(matches!(resolve(&roots, "/etc/passwd", Access::Read), Err(ResolveError::OutsideRoots(_))));
        assert!(matches!(resolve(&roots, "docs/a.md", Access::Read), Err(ResolveError::Relative(_))));
        assert!(matches!(resolve(&roots, "/a\0b", Access::Read), Err(ResolveError::Nul)));
        assert!(matches!(resolve(&roots, "", Access::Read), Err(ResolveError::Empty)));
        let long = format!("/{}", "x".repeat(300));
        assert!(matches!(resolve(&roots, &long, Access::Read), Err(ResolveError::NameTooLong { len: 300 })));
        let huge = format!("/{}", "a/".repeat(3000));
        assert!(matches!(resolve(&roots, &huge, Access::Read), Err(ResolveError::TooLong { .. })));
        assert!(matches!(resolve(&roots, &p(&roots, "docs/none.md"), Access::Read), Err(ResolveError::NotFound(_))));
        assert!(matches!(resolve(&roots, &p(&roots, "docs/a.md"), Access::List), Err(ResolveError::NotListable(_))));
        assert!(matches!(resolve(&roots, &p(&roots, "docs"), Access::Read), Err(ResolveError::IsDirectory(_))));
        assert!(matches!(resolve(&roots, &roots[0].path.to_string_lossy(), Access::List), Err(ResolveError::IsRoot(_))));
    }

    #[test]
    fn kernel_object_content_is_read_only_from_that_object() {
        let (_d, roots) = setup();
        let a = ObjectId::of_path(&roots[0].path.join("docs/a.md")).unwrap();
        assert_eq!(content_of(&roots[0], Path::new("docs/a.md"), a).as_deref(), Some(&b"alpha"[..]));
        // Another object under that name (swapped since the miss), a link, or a directory: none.
        let sub = ObjectId::of_path(&roots[0].path.join("docs/sub")).unwrap();
        assert_eq!(content_of(&roots[0], Path::new("docs/a.md"), sub), None);
        assert_eq!(content_of(&roots[0], Path::new("docs/link"), a), None);
        assert_eq!(content_of(&roots[0], Path::new("docs/sub"), sub), None);
        assert_eq!(content_of(&roots[0], Path::new("up/outside.txt"), a), None);
        // Deeper down, and a symlink on the way that stays inside the root: refused too.
        std::fs::write(roots[0].path.join("docs/sub/b.md"), "beta").unwrap();
        std::os::unix::fs::symlink(roots[0].path.join("docs/sub"), roots[0].path.join("inner")).unwrap();
        let b = ObjectId::of_path(&roots[0].path.join("docs/sub/b.md")).unwrap();
        assert_eq!(content_of(&roots[0], Path::new("docs/sub/b.md"), b).as_deref(), Some(&b"beta"[..]));
        assert_eq!(content_of(&roots[0], Path::new("inner/b.md"), b), None);
        let inner = roots[0].path.join("inner/b.md");
        assert!(matches!(resolve(&roots, inner.to_str().unwrap(), Access::Read), Err(ResolveError::Symlink(p)) if p.ends_with("inner")));
        let deep = resolve(&roots, roots[0].path.join("docs/sub/b.md").to_str().unwrap(), Access::Read).unwrap();
        assert_eq!((deep.target, deep.content.as_deref()), (b, Some(&b"beta"[..])));
        assert_eq!(twin_path(&roots[0], ["docs", "sub"], true), "docs/sub/");
        let labelled = Root { label: "ws".into(), ..roots[0].clone() };
        assert_eq!(twin_path(&labelled, ["docs", "a.md"], false), "ws/docs/a.md");
    }

    #[test]
    fn tree_lists_files_and_dirs_without_following_links() {
        let (_d, roots) = setup();
        let t = workspace_tree(&roots[0], 100);
        assert!(t.contains(&"docs/".to_string()) && t.contains(&"docs/a.md".to_string()) && t.contains(&"docs/sub/".to_string()));
        assert!(!t.iter().any(|x| x.contains("outside")));
    }
}
