//! A session's own layer over each read-write open path (toolchain caches, the agents'
//! state directories).
//!
//! The user's other programs run what these places hold (cargo's unpacked crates and their
//! build scripts, npx's packages, pip's wheels, an agent's shell snapshots) and keep copies
//! of what they saw there (an agent's transcripts). So a session never writes the user's
//! objects in them: the daemon mounts an overlay per path, the user's directory as its
//! read-only lower layer and a directory of the session's as its upper one, and `pincer
//! run` binds it over the path in the session's mount namespace. The session reads the
//! user's objects (what `show` lets it see) and its writes, creations and removals land in
//! its own layer, dropped when the session ends.
//!
//! The kernel sees it that way too: the user's objects in the path are open for reading
//! only (to every session, through any path), the layer's root is open read-write (its
//! filesystem exists in this session's namespace only), and the never places under the path
//! are refused in the layer as they are in the user's directory
//! ([`NeverList::seed_view`](super::contain::NeverList::seed_view)).
//!
//! Layout, in a root-only directory beside the scratch directories (a private mount, so
//! nothing made in it propagates to other mount namespaces):
//! `pincer-SESSION.layers/N/{upper,work,view}`, `view` being where the overlay is mounted.
//! With `[limits] scratch_max` set (the default), that directory is a tmpfs of its own of
//! that size, as the scratch is: what a session writes in its layers fills its own
//! filesystem, never the one its user's processes write to. The layers a path retains are
//! copied out of it when the session ends, within `[limits] kept_max` ([`retire`]).

use super::contain::{ContainError, Containment, Matcher, ViewNevers};
use crate::kernel::{Enforcer, ObjectId};
use serde::{Deserialize, Serialize};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Entries visited at most when hiding what `show` leaves out.
const HIDE_LIMIT: usize = 20_000;

/// What a session sees of the user's entries in a read-write open path: a list of relative
/// paths, a glob per segment; empty keeps everything.
#[derive(Debug, Clone, Default)]
pub struct Shown(Vec<Vec<Matcher>>);

impl Shown {
    /// Compiles `entries` (`settings*.json`, `plugins/cache`).
    pub fn new(entries: &[String]) -> Result<Self, ContainError> {
        let mut out = Vec::new();
        for entry in entries {
            let bad = |problem: &str| ContainError::Shown { entry: entry.clone(), problem: problem.into() };
            if entry.is_empty() || entry.starts_with('/') {
                return Err(bad("must be a path relative to the open path"));
            }
            let mut segments = Vec::new();
            for seg in entry.split('/') {
                if seg.is_empty() || seg == "." || seg == ".." || seg.contains('\0') {
                    return Err(bad("has an empty, `.` or `..` segment, or a NUL byte"));
                }
                // One name each: a name without glob syntax is compared as bytes.
                segments.push(Matcher::new(seg).map_err(|e| bad(&e.to_string()))?);
            }
            out.push(segments);
        }
        Ok(Shown(out))
    }

    /// Whether everything is kept.
    pub fn all(&self) -> bool {
        self.0.is_empty()
    }
}

/// A read-write open path as sessions get it: the user's directory and what they see of it.
#[derive(Debug, Clone)]
pub struct Layered {
    /// The user's directory (symlinks resolved).
    pub path: PathBuf,
    /// What a session sees of the user's entries there.
    pub shown: Shown,
    /// Whether the session's layer stays after it ends (see [`retire`]).
    pub retain: bool,
}

impl Layered {
    /// The open path `path` with its `show` entries; `retain`: the layer stays after the
    /// session.
    pub fn new(path: PathBuf, show: &[String], retain: bool) -> Result<Self, ContainError> {
        Ok(Layered { path, shown: Shown::new(show)?, retain })
    }
}

/// One layer as `pincer run` binds it into the session's mount namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerMount {
    /// Where the daemon mounted the layer (root only).
    pub source: PathBuf,
    /// The user's directory it covers in the session's view.
    pub target: PathBuf,
    /// The directory the layer was made over: `pincer run` binds it only on that directory
    /// (the path is the user's, who may have replaced a part of it by a symlink meanwhile).
    pub lower: ObjectId,
    /// Whether the layer stays after the session.
    #[serde(default)]
    pub retain: bool,
}

/// A session's layers and the kernel entries made for them, undone when it ends.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layers {
    /// The session's layer directory.
    pub dir: PathBuf,
    /// The layers to bind.
    pub mounts: Vec<LayerMount>,
    /// The layers' roots, open read-write.
    pub open: Vec<ObjectId>,
    /// The never entries of the layers' views.
    pub never: ViewNevers,
    /// Whether `dir` is a tmpfs of its own (the layers a path retains are copied out of it
    /// when the session ends) rather than a bind of the directory.
    #[serde(default)]
    pub own_fs: bool,
}

fn cstr(p: &Path) -> std::io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL byte in the path"))
}

fn check(r: libc::c_int) -> std::io::Result<()> {
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// `mount(2)`.
pub(super) fn mount(source: Option<&Path>, target: &Path, fstype: Option<&str>, flags: libc::c_ulong, data: Option<&str>) -> std::io::Result<()> {
    let source = source.map(cstr).transpose()?;
    let target = cstr(target)?;
    let fstype = fstype.map(|t| CString::new(t).expect("a file system type without NUL"));
    let data = data.map(CString::new).transpose().map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL byte in the mount options"))?;
    let ptr = |c: &Option<CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    // SAFETY: every pointer is a NUL-terminated string that outlives the call, or null.
    check(unsafe { libc::mount(ptr(&source), target.as_ptr(), ptr(&fstype), flags, ptr(&data).cast()) })
}

/// A path as one overlay option value: `\`, `,` and `:` escaped.
fn option_path(p: &Path) -> std::io::Result<String> {
    let s = p.to_str().ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path is not UTF-8"))?;
    Ok(s.chars().fold(String::new(), |mut out, c| {
        if matches!(c, '\\' | ',' | ':') {
            out.push('\\');
        }
        out.push(c);
        out
    }))
}

/// `struct open_how` (`<linux/openat2.h>`).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// `RESOLVE_NO_SYMLINKS`: no symlink anywhere on the path (magic links included).
const RESOLVE_NO_SYMLINKS: u64 = 0x04;
/// `RESOLVE_BENEATH`: the path never leaves the directory it starts from.
const RESOLVE_BENEATH: u64 = 0x08;

/// `openat2(dirfd, path, flags | O_CLOEXEC, RESOLVE_NO_SYMLINKS)`: the object the path
/// names without following any symlink on it, or -1 (errno set). Async-signal-safe: `pincer
/// run`'s worker calls it between fork and exec.
pub fn open_no_symlinks(dirfd: libc::c_int, path: &std::ffi::CStr, flags: libc::c_int) -> libc::c_int {
    openat2(dirfd, path, flags, RESOLVE_NO_SYMLINKS)
}

/// [`open_no_symlinks`] that also never leaves `dirfd` (`RESOLVE_BENEATH`): one system call
/// for a walk down a directory's tree one component at a time with `O_NOFOLLOW`.
pub fn open_beneath(dirfd: libc::c_int, path: &std::ffi::CStr, flags: libc::c_int) -> libc::c_int {
    openat2(dirfd, path, flags, RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH)
}

fn openat2(dirfd: libc::c_int, path: &std::ffi::CStr, flags: libc::c_int, resolve: u64) -> libc::c_int {
    let how = OpenHow { flags: (flags | libc::O_CLOEXEC) as u64, mode: 0, resolve };
    // SAFETY: openat2 with a NUL-terminated path and a properly sized open_how.
    unsafe { libc::syscall(libc::SYS_openat2, dirfd, path.as_ptr(), &how as *const OpenHow, std::mem::size_of::<OpenHow>()) as libc::c_int }
}

/// The directory at `path` (no symlink on the way), held open.
fn open_dir(path: &Path) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let fd = open_no_symlinks(libc::AT_FDCWD, &cstr(path)?, libc::O_PATH | libc::O_DIRECTORY);
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a descriptor just opened and owned by no one else.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// Where `session`'s layers go.
pub fn dir_of(contain: &Containment, session: &str) -> PathBuf {
    contain.layer_parent.join(format!("pincer-{session}.layers"))
}

/// Makes `session`'s layers over the read-write open paths of `contain` and the kernel
/// entries for them (the layers' roots open read-write, the upper and work directories the
/// session's own places, the never places of each view); `None` when there are none. With
/// `size`, the layers lie on a tmpfs of their own of that many bytes. On any error, whatever
/// was made is undone.
pub fn make(contain: &Containment, session: &str, cgroup_id: u64, enforcer: &mut Enforcer, size: Option<u64>) -> Result<Option<Layers>, ContainError> {
    if contain.layered.is_empty() {
        return Ok(None);
    }
    let mut layers = Layers { dir: dir_of(contain, session), own_fs: size.is_some(), ..Layers::default() };
    let dir = layers.dir.clone();
    let err = |what: &str| {
        let what = what.to_string();
        let dir = dir.clone();
        move |source| ContainError::Layer { path: dir.clone(), what: what.clone(), source }
    };
    // Made here, or not at all: a directory already there is not this session's to use or
    // remove.
    std::fs::create_dir(&dir).map_err(err("making the layer directory"))?;
    let made = (|| {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).map_err(err("making the layer directory root's only"))?;
        // A private mount of its own: the overlays mounted in it stay in this namespace.
        // Sized, a tmpfs (its pages count in the session's memory.max, as the scratch's do).
        match size {
            Some(bytes) => mount(Some(Path::new("tmpfs")), &dir, Some("tmpfs"), libc::MS_NOSUID | libc::MS_NODEV, Some(&format!("size={bytes},mode=0700")))
                .map_err(err("mounting the layers' tmpfs"))?,
            None => mount(Some(&dir), &dir, None, libc::MS_BIND, None).map_err(err("binding the layer directory"))?,
        }
        mount(None, &dir, None, libc::MS_PRIVATE, None).map_err(err("making the layer directory private"))?;
        for (n, l) in contain.layered.iter().enumerate() {
            let err = |what: &str| {
                let what = what.to_string();
                let path = l.path.clone();
                move |source| ContainError::Layer { path: path.clone(), what: what.clone(), source }
            };
            let base = dir.join(n.to_string());
            let (upper, work, view) = (base.join("upper"), base.join("work"), base.join("view"));
            for d in [&base, &upper, &work, &view] {
                std::fs::create_dir(d).map_err(err("making the layer's directories"))?;
            }
            // The user's directory, held open without following a symlink: the user may
            // replace a part of the path at any time, and the daemon makes the layer, its
            // whiteouts and its never entries over what it opened.
            let held = open_dir(&l.path).map_err(err("opening the open path (a symlink on the way is refused)"))?;
            let lower_dir = PathBuf::from(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&held)));
            let lower = std::fs::metadata(&lower_dir).map_err(err("reading the open path"))?;
            // The layer's root shows the upper directory's owner and mode.
            std::os::unix::fs::chown(&upper, Some(lower.uid()), Some(lower.gid())).map_err(err("giving the layer the path's owner"))?;
            std::fs::set_permissions(&upper, std::fs::Permissions::from_mode(lower.mode() & 0o7777)).map_err(err("giving the layer the path's mode"))?;
            if !l.shown.all() {
                // Hidden in the view, and refused to every session by any other path: a
                // session has no business with the user's objects it is not shown.
                for hidden in hide_except(&lower_dir, &upper, &l.shown).map_err(err("hiding what show leaves out"))? {
                    enforcer.add_never(hidden, pincer_common::ACCESS_ALL)?;
                }
            }
            let data = format!(
                // xino: every object's number in the layer is its real one with the layer's
                // bits, the same each time it is looked up (without it a directory's number
                // is new after each eviction, and the never entries keyed by it would miss).
                "lowerdir={},upperdir={},workdir={},xino=on,index=off,metacopy=off,redirect_dir=off",
                option_path(&lower_dir).map_err(err("naming the open path"))?,
                option_path(&upper).map_err(err("naming the layer"))?,
                option_path(&work).map_err(err("naming the layer"))?
            );
            mount(Some(Path::new("overlay")), &view, Some("overlay"), libc::MS_NOSUID | libc::MS_NODEV, Some(&data)).map_err(err("mounting the overlay"))?;
            layers.mounts.push(LayerMount { source: view.clone(), target: l.path.clone(), lower: ObjectId::of_metadata(&lower), retain: l.retain });
            let root = ObjectId::of_metadata(&std::fs::metadata(&view).map_err(err("reading the layer's root"))?);
            enforcer.add_open(root, pincer_common::ACCESS_ALL)?;
            layers.open.push(root);
            // The overlay's own work in them runs in the session's tasks.
            for d in [&upper, &work] {
                enforcer.grant_own_place(cgroup_id, ObjectId::of_metadata(&std::fs::symlink_metadata(d).map_err(err("reading the layer's directories"))?))?;
            }
            let seeded = contain.never.seed_view(enforcer, &l.path, &view, root.dev)?;
            drop(held);
            layers.never.objects.extend(seeded.objects);
            layers.never.names.extend(seeded.names);
            layers.never.carries.extend(seeded.carries);
        }
        Ok(())
    })();
    match made {
        Ok(()) => Ok(Some(layers)),
        Err(e) => {
            remove(&layers, enforcer);
            Err(e)
        }
    }
}

/// Ends a session's layers: the kernel entries removed, the overlays unmounted; the layers
/// of paths that retain them stay, each as `DIR/NAME` (the path's last component), the
/// directory readable by the owner's group `gid`; the rest is removed. Layers on a tmpfs of
/// their own are copied out of it onto `DIR`'s filesystem, at most `kept_max` bytes (`None`:
/// no bound of its own) and never more than half of that filesystem's free space.
pub fn retire(layers: &Layers, enforcer: &mut Enforcer, gid: u32, kept_max: Option<u64>) {
    remove_entries(layers, enforcer);
    let kept = if layers.own_fs { copy_out_kept(layers, kept_max) } else { rename_kept(layers) };
    if kept == 0 {
        remove_dir(layers);
        return;
    }
    // What a session wrote there (its transcripts) is the user's to read, never a later
    // session's: the twin would otherwise decide on it as on any folder in /tmp.
    let kept_id = std::fs::symlink_metadata(&layers.dir).map(|m| ObjectId::of_metadata(&m));
    match kept_id {
        Ok(id) => {
            if let Err(e) = enforcer.add_never(id, pincer_common::ACCESS_ALL) {
                tracing::warn!(dir = %layers.dir.display(), error = %e, "cannot make the session's kept layers never-grantable; removing them");
                remove_dir(layers);
                return;
            }
        }
        Err(_) => return,
    }
    let shared = std::os::unix::fs::chown(&layers.dir, None, Some(gid)).and_then(|()| std::fs::set_permissions(&layers.dir, std::fs::Permissions::from_mode(0o750)));
    if let Err(e) = shared {
        tracing::warn!(dir = %layers.dir.display(), error = %e, "cannot give the session's kept layers to its owner");
    }
}

/// Where the layer of mount `n` is kept: `DIR/NAME` (the path's last component), or
/// `DIR/N-NAME` when that is taken.
fn kept_path(layers: &Layers, n: usize, m: &LayerMount) -> PathBuf {
    let name = m.target.file_name().map(|f| f.to_os_string()).unwrap_or_else(|| n.to_string().into());
    let to = layers.dir.join(&name);
    if to.exists() {
        return layers.dir.join(format!("{n}-{}", name.to_string_lossy()));
    }
    to
}

/// The layers of a bound directory: the retained uppers renamed into place, the rest
/// removed; how many were kept.
fn rename_kept(layers: &Layers) -> usize {
    detach(&layers.dir);
    let mut kept = 0;
    for (n, m) in layers.mounts.iter().enumerate() {
        let base = layers.dir.join(n.to_string());
        if m.retain {
            let to = kept_path(layers, n, m);
            match std::fs::rename(base.join("upper"), &to) {
                Ok(()) => kept += 1,
                Err(e) => tracing::warn!(layer = %base.display(), error = %e, "cannot keep the session's layer"),
            }
        }
        if let Err(e) = std::fs::remove_dir_all(&base) {
            tracing::warn!(dir = %base.display(), error = %e, "cannot remove the session's layer");
        }
    }
    kept
}

/// The layers of a tmpfs of their own: the overlays unmounted, the retained uppers held
/// open, the tmpfs detached (so only this daemon reaches it, and it is freed when the last
/// upper is closed), and each retained upper copied into `DIR` within the bound; how many
/// were kept.
fn copy_out_kept(layers: &Layers, kept_max: Option<u64>) -> usize {
    for n in 0..layers.mounts.len() {
        detach(&layers.dir.join(n.to_string()).join("view"));
    }
    let held: Vec<(usize, std::os::fd::OwnedFd)> = layers
        .mounts
        .iter()
        .enumerate()
        .filter(|(_, m)| m.retain)
        .filter_map(|(n, _)| match open_dir(&layers.dir.join(n.to_string()).join("upper")) {
            Ok(fd) => Some((n, fd)),
            Err(e) => {
                tracing::warn!(layer = %layers.dir.display(), error = %e, "cannot keep the session's layer");
                None
            }
        })
        .collect();
    detach(&layers.dir);
    // Never more than half of what is free on the filesystem the user's processes share.
    let free = free_bytes(&layers.dir).unwrap_or(0) / 2;
    let mut budget = Budget { bytes: kept_max.map_or(free, |k| k.min(free)), entries: KEEP_ENTRIES, skipped: 0 };
    let mut kept = 0;
    for (n, fd) in &held {
        let to = kept_path(layers, *n, &layers.mounts[*n]);
        let from = PathBuf::from(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(fd)));
        match copy_tree(&from, &to, &mut budget) {
            Ok(()) => kept += 1,
            Err(e) => tracing::warn!(layer = %to.display(), error = %e, "cannot keep the session's layer"),
        }
    }
    if budget.skipped > 0 {
        tracing::warn!(dir = %layers.dir.display(), skipped = budget.skipped, "the session's kept layers were larger than [limits] kept_max or half the free space: entries past the bound are not kept");
    }
    kept
}

/// Entries copied at most out of a session's kept layers.
const KEEP_ENTRIES: usize = 100_000;

/// What is left for copying kept layers out.
struct Budget {
    /// Bytes of file content.
    bytes: u64,
    /// Entries.
    entries: usize,
    /// Entries not copied for want of either.
    skipped: usize,
}

/// The bytes free to unprivileged users on the filesystem of `path`.
fn free_bytes(path: &Path) -> std::io::Result<u64> {
    let c = cstr(path)?;
    // SAFETY: statvfs of a NUL-terminated path into a zeroed struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    check(unsafe { libc::statvfs(c.as_ptr(), &mut st) })?;
    Ok((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

/// Copies the tree at `from` (reached by this process only: no one changes it meanwhile) to
/// the new directory `to`: directories, regular files (without set-id bits) and symlinks
/// (not followed), each with its owner; whiteouts and other special files are left out, and
/// so is what `budget` has no room for. Iterative: a tree of any depth.
fn copy_tree(from: &Path, to: &Path, budget: &mut Budget) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let copy_dir = |src: &std::fs::Metadata, dst: &Path| -> std::io::Result<()> {
        std::fs::DirBuilder::new().mode(0o700).create(dst)?;
        std::os::unix::fs::lchown(dst, Some(src.uid()), Some(src.gid()))?;
        std::fs::set_permissions(dst, std::fs::Permissions::from_mode(src.mode() & 0o777))
    };
    copy_dir(&std::fs::symlink_metadata(from)?, to)?;
    let mut stack = vec![(from.to_path_buf(), to.to_path_buf())];
    while let Some((src_dir, dst_dir)) = stack.pop() {
        for entry in std::fs::read_dir(&src_dir)? {
            let entry = entry?;
            // Not followed: a symlink's own metadata.
            let meta = entry.metadata()?;
            let (src, dst) = (entry.path(), dst_dir.join(entry.file_name()));
            let size = if meta.is_file() { meta.len() } else { 0 };
            if budget.entries == 0 || size > budget.bytes {
                budget.skipped += 1;
                continue;
            }
            let ft = meta.file_type();
            if ft.is_dir() {
                copy_dir(&meta, &dst)?;
                stack.push((src, dst));
            } else if ft.is_file() {
                let mut input = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(&src)?;
                let mut output = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).custom_flags(libc::O_NOFOLLOW).open(&dst)?;
                let copied = std::io::copy(&mut std::io::Read::take(&mut input, size), &mut output)?;
                budget.bytes -= copied.min(budget.bytes);
                std::os::unix::fs::fchown(&output, Some(meta.uid()), Some(meta.gid()))?;
                output.set_permissions(std::fs::Permissions::from_mode(meta.mode() & 0o777))?;
            } else if ft.is_symlink() {
                std::os::unix::fs::symlink(std::fs::read_link(&src)?, &dst)?;
                std::os::unix::fs::lchown(&dst, Some(meta.uid()), Some(meta.gid()))?;
            } else {
                // A whiteout (what the session removed from the user's directory), a device,
                // a FIFO or a socket: nothing the user reads.
                continue;
            }
            budget.entries -= 1;
        }
    }
    Ok(())
}

/// Undoes [`make`]: the kernel entries removed, the overlays unmounted, the directory removed.
/// Each step is tried whatever the others did.
pub fn remove(layers: &Layers, enforcer: &mut Enforcer) {
    remove_entries(layers, enforcer);
    detach(&layers.dir);
    remove_dir(layers);
}

fn remove_dir(layers: &Layers) {
    if let Err(e) = std::fs::remove_dir_all(&layers.dir) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(dir = %layers.dir.display(), error = %e, "cannot remove the session's layers");
        }
    }
}

/// The kernel entries of `layers` removed.
fn remove_entries(layers: &Layers, enforcer: &mut Enforcer) {
    for id in &layers.open {
        if let Err(e) = enforcer.remove_open(*id) {
            tracing::warn!(error = %e, "cannot remove a layer's open entry");
        }
    }
    for id in &layers.never.objects {
        let _ = enforcer.remove_never(*id);
    }
    for (dir, name) in &layers.never.names {
        let _ = enforcer.remove_never_name(*dir, name);
    }
    for (dir, name) in &layers.never.carries {
        let _ = enforcer.remove_never_carry(*dir, name);
    }
}

/// Detaches the mount at `target` and every mount beneath it, not through a symlink (a
/// directory with no mount of its own: `EINVAL`, nothing done).
pub(super) fn detach(target: &Path) {
    if let Ok(c) = cstr(target) {
        // SAFETY: umount2 of a NUL-terminated path.
        unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH | libc::UMOUNT_NOFOLLOW) };
    }
}

/// Hides from the layer whatever of `lower` `shown` does not name: a whiteout in `upper` for
/// each such entry, and a directory (the user's owner and mode) on the way to each kept
/// entry deeper down. Symlinks are not followed. Returns the user's objects hidden.
fn hide_except(lower: &Path, upper: &Path, shown: &Shown) -> std::io::Result<Vec<ObjectId>> {
    let alive: Vec<&[Matcher]> = shown.0.iter().map(Vec::as_slice).collect();
    let (mut seen, mut hidden) = (0, Vec::new());
    hide_level(lower, upper, &alive, &mut seen, &mut hidden)?;
    Ok(hidden)
}

fn hide_level(lower: &Path, upper: &Path, alive: &[&[Matcher]], seen: &mut usize, hidden: &mut Vec<ObjectId>) -> std::io::Result<()> {
    for e in std::fs::read_dir(lower)? {
        let e = e?;
        *seen += 1;
        if *seen > HIDE_LIMIT {
            return Err(std::io::Error::other(format!("more than {HIDE_LIMIT} entries on the way to what show names")));
        }
        let name = e.file_name();
        let matching: Vec<&[Matcher]> = alive.iter().filter(|p| p[0].matches(Path::new(&name))).copied().collect();
        if matching.iter().any(|p| p.len() == 1) {
            continue;
        }
        let (low, up) = (lower.join(&name), upper.join(&name));
        let meta = std::fs::symlink_metadata(&low)?;
        if !matching.is_empty() && meta.is_dir() {
            std::fs::create_dir(&up)?;
            std::os::unix::fs::chown(&up, Some(meta.uid()), Some(meta.gid()))?;
            std::fs::set_permissions(&up, std::fs::Permissions::from_mode(meta.mode() & 0o7777))?;
            let deeper: Vec<&[Matcher]> = matching.iter().map(|p| &p[1..]).collect();
            hide_level(&low, &up, &deeper, seen, hidden)?;
            continue;
        }
        hidden.push(ObjectId::of_metadata(&meta));
        // A whiteout: a character device 0:0.
        let c = cstr(&up)?;
        // SAFETY: mknod of a NUL-terminated path.
        check(unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR, libc::makedev(0, 0)) })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use globset::GlobBuilder;

    #[test]
    fn show_entries_are_relative_globs() {
        assert!(Shown::new(&["settings*.json".into(), "plugins/cache".into()]).is_ok());
        for bad in ["", "/etc", "a/../b", "a//b", "./a"] {
            let e = Shown::new(&[bad.to_string()]).unwrap_err().to_string();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
        assert!(Shown::new(&[]).unwrap().all());
    }

    #[test]
    fn a_show_name_without_glob_syntax_matches_what_its_glob_matches() {
        let names = ["CLAUDE.md", "claude.md", "CLAUDE.mdx", "xCLAUDE.md", "hooks", "hook", "hooks.d", ".env", "env", "é", "a b", ""];
        for seg in ["CLAUDE.md", "hooks", ".env", "é", "a b"] {
            let fast = Matcher::new(seg).unwrap();
            assert!(matches!(fast, Matcher::Literal { .. }), "{seg}");
            let glob = GlobBuilder::new(seg).literal_separator(true).build().unwrap().compile_matcher();
            for n in names {
                assert_eq!(fast.matches(Path::new(n)), glob.is_match(Path::new(n)), "{seg} on {n:?}");
            }
        }
        for seg in ["settings*.json", "[ab]", "a?", "{a,b}", "a\\*"] {
            assert!(matches!(Matcher::new(seg).unwrap(), Matcher::Glob { .. }), "{seg}");
        }
    }

    #[test]
    fn overlay_option_paths_are_escaped() {
        assert_eq!(option_path(Path::new("/home/u/a,b:c\\d")).unwrap(), "/home/u/a\\,b\\:c\\\\d");
    }

    #[test]
    fn what_show_leaves_out_is_whited_out_and_the_way_to_a_kept_entry_is_made() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: whiteouts need root (mknod)");
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let (lower, upper) = (d.path().join("lower"), d.path().join("upper"));
        for f in ["settings.json", "history.jsonl", "projects/p/1.jsonl", "plugins/cache/x/plugin.json", "plugins/state.json"] {
            let p = lower.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "x").unwrap();
        }
        std::fs::create_dir(&upper).unwrap();
        let hidden = hide_except(&lower, &upper, &Shown::new(&["settings*.json".into(), "plugins/cache".into()]).unwrap()).unwrap();
        assert_eq!(hidden.len(), 3, "history.jsonl, projects, plugins/state.json");
        let whiteout = |p: &str| {
            use std::os::unix::fs::FileTypeExt;
            let m = std::fs::symlink_metadata(upper.join(p)).unwrap();
            m.file_type().is_char_device() && m.rdev() == 0
        };
        assert!(whiteout("history.jsonl") && whiteout("projects") && whiteout("plugins/state.json"));
        assert!(upper.join("plugins").is_dir() && !upper.join("plugins/cache").exists(), "the way to a kept entry, not the entry");
        assert!(!upper.join("settings.json").exists());
    }
}
