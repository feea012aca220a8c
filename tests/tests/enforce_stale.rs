//! A verdict never outlives the state it was computed from (run inside the VM as root).
//!
//! Every test first lets the worker (uid 1000, inside a session) succeed several times at
//! the same access, so that anything remembered about the walk up from the object would
//! be warm; then the state changes (a grant or open path goes, a never-grantable entry or
//! protected root comes, an outside process of the same uid moves a directory, root moves
//! or unmounts a filesystem, a hard link appears, the session's mode changes); then the
//! same process, still running, repeats the access and must be decided on the new state.
//! Grants sit four or more levels above the object, and a never-grantable entry exists
//! somewhere unrelated, as a daemon always has some, so the walk runs all the way up.
//! The change of state is each test's only difference between the allowed and the denied
//! access, so a test fails if the kernel keeps any verdict past the change.

use pincer::kernel::{Events, Miss, ObjectId, Scope, SessionFlags};
use pincer_common::{
    ACCESS_ALL, ACCESS_CREATE, ACCESS_DELETE, ACCESS_LIST, ACCESS_READ, ACCESS_WRITE, EVENT_FLAG_MULTI_LINK,
};
use pincer_tests::*;
use std::ffi::{CString, OsStr};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// How often an access succeeds before the state changes.
const WARM: usize = 4;

/// The file every read test opens: six levels below the directory its grant is on.
const DEEP: &str = "home/proj/src/a/b/c/d/notes.txt";

fn id(path: &Path) -> ObjectId {
    ObjectId::of_path(path).unwrap_or_else(|e| panic!("stat {}: {e}", path.display()))
}

/// `WARM` copies of `op`.
fn warm(op: Op) -> Vec<Op> {
    vec![op; WARM]
}

/// `mount(2)` with `flags` and no data (as root).
fn mount_flags(source: &Path, target: &Path, flags: libc::c_ulong) {
    let (s, t) =
        (CString::new(source.as_os_str().as_bytes()).unwrap(), CString::new(target.as_os_str().as_bytes()).unwrap());
    // SAFETY: mount(2) with valid C strings and no file system type or data.
    let rc = unsafe { libc::mount(s.as_ptr(), t.as_ptr(), std::ptr::null(), flags, std::ptr::null()) };
    assert_eq!(
        rc,
        0,
        "mount {} on {} ({flags:#x}): {}",
        source.display(),
        target.display(),
        std::io::Error::last_os_error()
    );
}

/// A protected root owned by the worker's uid, a gated session around it, never-grantable
/// entries (an object and a name) in an unrelated place, and the session's miss stream.
struct Setup {
    te: TestEnforcer,
    cg: TestCgroup,
    root: PathBuf,
    rt: tokio::runtime::Runtime,
    misses: Events,
}

impl Setup {
    fn new(name: &str) -> Self {
        Self::with_flags(name, SessionFlags::ENFORCING)
    }

    fn with_flags(name: &str, flags: SessionFlags) -> Self {
        let mut te = TestEnforcer::shared();
        let cg = TestCgroup::new(name);
        let root = fresh_dir(name);
        own(&root);
        te.get().register_session_with(cg.id, flags).expect("register session");
        te.get().add_root(&root).expect("add root");
        let unrelated = fresh_dir(&format!("{name}-unrelated"));
        user_file(&unrelated.join("keys/id_ed25519"), "PRIVATE KEY");
        te.get().add_never(id(&unrelated.join("keys")), ACCESS_ALL).expect("add never");
        te.get().add_never_name(id(&unrelated), OsStr::new(".env"), ACCESS_ALL).expect("add never name");
        let rt = runtime();
        let misses = rt.block_on(async { te.get().events() }).expect("events");
        Self { te, cg, root, rt, misses }
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    fn grant(&mut self, rel: &str, scope: Scope, bits: u32) {
        let (session, obj) = (self.cg.id, id(&self.p(rel)));
        self.te.get().grant_bits(session, obj, scope, bits).expect("grant");
    }

    fn revoke(&mut self, rel: &str, scope: Scope, bits: u32) {
        let (session, obj) = (self.cg.id, id(&self.p(rel)));
        self.te.get().revoke_bits(session, obj, scope, bits).expect("revoke");
    }

    /// The worker runs `stages` in one process; `between(self, i)` runs after stage `i`.
    fn staged(&mut self, stages: &[Vec<Op>], mut between: impl FnMut(&mut Self, usize)) -> Vec<Vec<i32>> {
        let cgroup = self.cg.path.clone();
        run_staged(Some(&cgroup), Some(WORKER_UID), stages, |i| between(self, i))
    }

    /// Every miss reported since the last call.
    fn drain(&mut self) -> Vec<Miss> {
        let _guard = self.rt.enter();
        let mut out = Vec::new();
        while let Some(m) = self.misses.try_next() {
            let event = m.unwrap_or_else(|e| panic!("decode event: {}", error_chain(&e)));
            out.push(event.miss().expect("a file miss, not a reach denial"));
        }
        out
    }
}

/// The same user outside every session runs `ops`.
fn outside(ops: &[Op]) -> Vec<i32> {
    run_as(None, Some(WORKER_UID), ops)
}

/// The hook, missing access bits and never flag of each miss.
fn summary(misses: &[Miss]) -> Vec<(&'static str, u32, bool)> {
    misses.iter().map(|m| (m.hook.name(), m.access_bits, m.never())).collect()
}

#[test]
fn revoking_a_subtree_grant_high_above_the_file_denies_the_next_open() {
    let mut s = Setup::new("stale-revoke");
    user_file(&s.p(DEEP), "notes");
    user_file(&s.p("home/proj/src/a/b/c/d/sibling.txt"), "sibling");
    s.grant("home/proj", Scope::Subtree, ACCESS_READ | ACCESS_WRITE | ACCESS_LIST);
    let (file, sibling, dir) = (s.p(DEEP), s.p("home/proj/src/a/b/c/d/sibling.txt"), s.p("home/proj/src/a/b/c/d"));
    let mut first = warm(Op::Read(file.clone()));
    first.extend([Op::Write(file.clone()), Op::Read(sibling.clone()), Op::List(dir.clone())]);
    let stages = [
        first,
        vec![Op::Read(file.clone()), Op::Write(file.clone()), Op::Read(sibling.clone()), Op::List(dir.clone())],
        vec![Op::Read(file.clone()), Op::Read(sibling.clone()), Op::List(dir.clone())],
    ];
    let r = s.staged(&stages, |s, i| {
        s.drain();
        match i {
            // Write alone goes: read and list stay.
            0 => s.revoke("home/proj", Scope::Subtree, ACCESS_WRITE),
            _ => s.revoke("home/proj", Scope::Subtree, ACCESS_READ | ACCESS_LIST),
        }
    });
    assert_eq!(r[0], vec![0; WARM + 3]);
    assert_eq!(r[1], vec![0, EACCES, 0, 0], "the write bit outlived its revocation");
    assert_eq!(r[2], vec![EACCES; 3], "the read and list bits outlived their revocation");
    let misses = s.drain();
    assert_eq!(
        summary(&misses),
        vec![("file_open", ACCESS_READ, false), ("file_open", ACCESS_READ, false), ("file_open", ACCESS_LIST, false)]
    );
    assert_eq!(misses[0].relative_path, PathBuf::from(DEEP));
    assert_eq!((misses[0].root_dev, misses[0].root_ino), (id(&s.root).dev, id(&s.root).ino));
    assert_eq!(outside(&[Op::Read(file)]), vec![0]);
}

#[test]
fn revoking_a_subtree_grant_without_any_never_entry_denies_the_next_open() {
    // Without never-grantable entries the walk may stop at the grant: the same revocation.
    let mut te = TestEnforcer::shared();
    let cg = TestCgroup::new("stale-bare");
    let root = fresh_dir("stale-bare");
    own(&root);
    te.get().register_session(cg.id).unwrap();
    te.get().add_root(&root).unwrap();
    let file = root.join(DEEP);
    user_file(&file, "notes");
    te.get().grant_bits(cg.id, id(&root.join("home/proj")), Scope::Subtree, ACCESS_READ).unwrap();
    let stages = [warm(Op::Read(file.clone())), vec![Op::Read(file.clone())]];
    let r = run_staged(Some(&cg.path), Some(WORKER_UID), &stages, |_| {
        te.get().revoke_bits(cg.id, id(&root.join("home/proj")), Scope::Subtree, ACCESS_READ).unwrap();
    });
    assert_eq!(r, vec![vec![0; WARM], vec![EACCES]]);
}

#[test]
fn ending_the_session_grants_denies_the_next_open() {
    let mut s = Setup::new("stale-end");
    user_file(&s.p(DEEP), "notes");
    s.grant("home/proj", Scope::Subtree, ACCESS_READ);
    s.grant(DEEP, Scope::Exact, ACCESS_WRITE);
    let file = s.p(DEEP);
    let stages = [
        vec![Op::Read(file.clone()), Op::Write(file.clone()), Op::Read(file.clone()), Op::Write(file.clone())],
        vec![Op::Read(file.clone()), Op::Write(file.clone())],
    ];
    let r = s.staged(&stages, |s, _| {
        let session = s.cg.id;
        assert_eq!(s.te.get().revoke_session(session, true).unwrap(), 2);
    });
    assert_eq!(r, vec![vec![0; 4], vec![EACCES, EACCES]]);
}

#[test]
fn narrowing_or_removing_an_open_path_denies_the_next_open() {
    let mut s = Setup::new("stale-open");
    let lib = s.p("home/.cache/registry/pkg/v1/src/lib.rs");
    user_file(&lib, "pub fn f() {}");
    let (src, cache) = (s.p("home/.cache/registry/pkg/v1/src"), s.p("home/.cache"));
    s.te.get().add_open(id(&cache), ACCESS_READ | ACCESS_LIST).unwrap();
    let mut first = warm(Op::Read(lib.clone()));
    first.push(Op::List(src.clone()));
    let stages = [first, vec![Op::Read(lib.clone()), Op::List(src.clone())], vec![Op::List(src.clone())]];
    let r = s.staged(&stages, |s, i| match i {
        // Replaced by list only, then removed.
        0 => s.te.get().add_open(id(&cache), ACCESS_LIST).unwrap(),
        _ => s.te.get().remove_open(id(&cache)).unwrap(),
    });
    assert_eq!(r[0], vec![0; WARM + 1]);
    assert_eq!(r[1], vec![EACCES, 0], "read outlived the open path's narrowing");
    assert_eq!(r[2], vec![EACCES], "list outlived the open path's removal");
    let misses = s.drain();
    assert_eq!(summary(&misses), vec![("file_open", ACCESS_READ, false), ("file_open", ACCESS_LIST, false)]);
    assert_eq!(misses[0].relative_path, PathBuf::from("home/.cache/registry/pkg/v1/src/lib.rs"));
}

#[test]
fn a_new_never_entry_between_the_file_and_its_grant_denies_the_next_open() {
    let mut s = Setup::new("stale-never");
    user_file(&s.p(DEEP), "notes");
    user_file(&s.p("home/proj/src/main.rs"), "fn main() {}");
    s.grant("home/proj", Scope::Subtree, ACCESS_READ);
    let (file, above) = (s.p(DEEP), s.p("home/proj/src/main.rs"));
    let mut first = warm(Op::Read(file.clone()));
    first.push(Op::Read(above.clone()));
    let stages = [first, vec![Op::Read(file.clone()), Op::Read(above.clone())]];
    let r = s.staged(&stages, |s, _| {
        s.drain();
        let b = id(&s.p("home/proj/src/a/b"));
        s.te.get().add_never(b, ACCESS_READ).unwrap();
    });
    assert_eq!(r, vec![vec![0; WARM + 1], vec![EACCES, 0]], "a grant outlived a new never-grantable directory");
    let misses = s.drain();
    assert_eq!(summary(&misses), vec![("file_open", ACCESS_READ, true)]);
    assert!(misses[0].relative_path.ends_with(DEEP), "{:?}", misses[0].relative_path);
}

#[test]
fn a_new_never_name_on_the_path_or_of_the_file_denies_the_next_access() {
    let mut s = Setup::new("stale-never-name");
    user_file(&s.p(DEEP), "notes");
    user_file(&s.p("home/proj/src/a/b/c/d/sibling.txt"), "sibling");
    user_file(&s.p("home/proj/src/x/y/z/w/other.txt"), "other");
    user_dir(&s.p("home/proj/src/x/y/z/w/out"));
    s.grant("home/proj", Scope::Subtree, ACCESS_READ | ACCESS_CREATE);
    let (file, sibling, other) =
        (s.p(DEEP), s.p("home/proj/src/a/b/c/d/sibling.txt"), s.p("home/proj/src/x/y/z/w/other.txt"));
    let out = s.p("home/proj/src/x/y/z/w/out");
    let mut first = warm(Op::Read(file.clone()));
    first.extend([Op::Read(sibling.clone()), Op::Read(other.clone())]);
    first.extend((0..WARM).map(|n| Op::Create(out.join(format!("made-{n}")))));
    let stages = [
        first,
        // The name of a directory on the path (`b` in `a`).
        vec![Op::Read(file.clone()), Op::Read(sibling.clone()), Op::Read(other.clone())],
        // The file's own name.
        vec![Op::Read(other.clone()), Op::Create(out.join("made-next"))],
        // The name of an entry still to be created.
        vec![Op::Create(out.join("hooks")), Op::Create(out.join("made-last"))],
    ];
    let mut seen = Vec::new();
    let r = s.staged(&stages, |s, i| {
        seen.push(summary(&s.drain()));
        let (dir, name) = match i {
            0 => ("home/proj/src/a", "b"),
            1 => ("home/proj/src/x/y/z/w", "other.txt"),
            _ => ("home/proj/src/x/y/z/w/out", "hooks"),
        };
        let dir = id(&s.p(dir));
        s.te.get().add_never_name(dir, OsStr::new(name), ACCESS_READ | ACCESS_CREATE).unwrap();
    });
    assert_eq!(r[0], vec![0; 2 * WARM + 2]);
    assert_eq!(r[1], vec![EACCES, EACCES, 0], "a grant outlived a new never name of a directory on the path");
    assert_eq!(r[2], vec![EACCES, 0], "a grant outlived a new never name of the file");
    assert_eq!(r[3], vec![EACCES, 0], "a create grant outlived a new never name of the new entry");
    assert!(!out.join("hooks").exists());
    seen.push(summary(&s.drain()));
    let never_read = ("file_open", ACCESS_READ, true);
    assert_eq!(seen[1..], [vec![never_read; 2], vec![never_read], vec![("inode_create", ACCESS_CREATE, true)]]);
}

#[test]
fn a_new_protected_root_above_a_free_file_denies_the_next_access() {
    let mut s = Setup::new("stale-root");
    // Free: the system's, open to every user (the user's own objects are gated wherever
    // they lie).
    let free = fresh_dir("stale-root-free");
    let file = free.join("u/work/x/y/z/draft.txt");
    write_file(&file, "draft");
    let dir = free.join("u/work/x/y/z");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
    let mut d = dir.clone();
    while d != free {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        d.pop();
    }
    let mut first = warm(Op::Read(file.clone()));
    first.push(Op::Write(file.clone()));
    first.extend((0..WARM).map(|n| Op::Create(dir.join(format!("new-{n}")))));
    let stages = [first, vec![Op::Read(file.clone()), Op::Write(file.clone()), Op::Create(dir.join("new-next"))]];
    let r = s.staged(&stages, |s, _| {
        s.drain();
        s.te.get().add_root_id(id(&free.join("u"))).unwrap();
    });
    assert_eq!(r[0], vec![0; 2 * WARM + 1], "outside every root the file is free");
    assert_eq!(r[1], vec![EACCES; 3], "a file stayed free under a new protected root");
    let misses = s.drain();
    assert_eq!(
        summary(&misses),
        vec![
            ("file_open", ACCESS_READ, false),
            ("file_open", ACCESS_WRITE, false),
            ("inode_create", ACCESS_CREATE, false)
        ]
    );
    assert_eq!(misses[0].relative_path, PathBuf::from("work/x/y/z/draft.txt"));
    assert_eq!((misses[0].root_dev, misses[0].root_ino), (id(&free.join("u")).dev, id(&free.join("u")).ino));
    assert_eq!(outside(&[Op::Read(file)]), vec![0]);
}

#[test]
fn a_directory_an_outside_process_moves_out_of_the_grant_is_denied_at_its_new_place() {
    let mut s = Setup::new("stale-move-dir");
    user_file(&s.p(DEEP), "notes");
    user_dir(&s.p("home/attic"));
    s.grant("home/proj", Scope::Subtree, ACCESS_READ | ACCESS_CREATE);
    let d = s.p("home/proj/src/a/b/c/d");
    let moved = s.p("home/attic/d");
    let mut first = warm(Op::Read(d.join("notes.txt")));
    first.extend((0..WARM).map(|n| Op::Create(d.join(format!("new-{n}")))));
    let stages = [first, vec![Op::Read(moved.join("notes.txt")), Op::Create(moved.join("new-next"))]];
    let r = s.staged(&stages, |s, _| {
        s.drain();
        // The user's own process, outside every session, moves the file's directory.
        assert_eq!(outside(&[Op::Rename(d.clone(), moved.clone())]), vec![0]);
    });
    assert_eq!(r[0], vec![0; 2 * WARM]);
    assert_eq!(r[1], vec![EACCES, EACCES], "the grant followed a directory moved out of its subtree");
    let misses = s.drain();
    assert_eq!(summary(&misses), vec![("file_open", ACCESS_READ, false), ("inode_create", ACCESS_CREATE, false)]);
    assert_eq!(misses[0].relative_path, PathBuf::from("home/attic/d/notes.txt"));
    assert_eq!(misses[1].relative_path, PathBuf::from("home/attic/d/new-next"));
}

#[test]
fn a_directory_moved_out_of_the_grant_far_above_the_file_denies_the_next_open() {
    // Only an ancestor four levels up moves: the file's own directory stays put.
    let mut s = Setup::new("stale-move-up");
    user_file(&s.p(DEEP), "notes");
    user_dir(&s.p("home/attic"));
    s.grant("home/proj", Scope::Subtree, ACCESS_READ | ACCESS_LIST);
    let (a, moved) = (s.p("home/proj/src/a"), s.p("home/attic/a"));
    let mut first = warm(Op::Read(s.p(DEEP)));
    first.push(Op::List(s.p("home/proj/src/a/b/c/d")));
    let stages = [first, vec![Op::Read(moved.join("b/c/d/notes.txt")), Op::List(moved.join("b/c/d"))]];
    let r = s.staged(&stages, |s, _| {
        s.drain();
        assert_eq!(outside(&[Op::Rename(a.clone(), moved.clone())]), vec![0]);
    });
    assert_eq!(
        r,
        vec![vec![0; WARM + 1], vec![EACCES, EACCES]],
        "the grant followed an ancestor moved out of its subtree"
    );
    let misses = s.drain();
    assert_eq!(summary(&misses), vec![("file_open", ACCESS_READ, false), ("file_open", ACCESS_LIST, false)]);
    assert_eq!(misses[0].relative_path, PathBuf::from("home/attic/a/b/c/d/notes.txt"));
}

#[test]
fn a_directory_an_outside_process_moves_into_a_never_grantable_directory_is_denied() {
    let mut s = Setup::new("stale-move-never");
    user_file(&s.p(DEEP), "notes");
    user_dir(&s.p("home/vault/sealed"));
    // Everything under home is granted: only the never entry can deny.
    s.grant("home", Scope::Subtree, ACCESS_READ);
    let vault = id(&s.p("home/vault"));
    s.te.get().add_never(vault, ACCESS_READ).unwrap();
    let (b, moved) = (s.p("home/proj/src/a/b"), s.p("home/vault/sealed/b"));
    let stages = [warm(Op::Read(s.p(DEEP))), vec![Op::Read(moved.join("c/d/notes.txt"))]];
    let r = s.staged(&stages, |s, _| {
        s.drain();
        assert_eq!(outside(&[Op::Rename(b.clone(), moved.clone())]), vec![0]);
    });
    assert_eq!(r, vec![vec![0; WARM], vec![EACCES]], "a directory moved into a never-grantable one stayed readable");
    let misses = s.drain();
    assert_eq!(summary(&misses), vec![("file_open", ACCESS_READ, true)]);
    assert!(misses[0].relative_path.ends_with("home/vault/sealed/b/c/d/notes.txt"), "{:?}", misses[0].relative_path);
}

#[test]
fn a_directory_moved_under_or_renamed_to_a_never_name_is_denied() {
    let mut s = Setup::new("stale-move-never-name");
    user_file(&s.p(DEEP), "notes");
    user_file(&s.p("home/proj/src/e/f/g/keys/k.pem"), "KEY");
    user_dir(&s.p("home/.ssh"));
    s.grant("home", Scope::Subtree, ACCESS_READ);
    let home = id(&s.p("home"));
    s.te.get().add_never_name(home, OsStr::new(".ssh"), ACCESS_READ).unwrap();
    s.te.get().add_never_name(home, OsStr::new(".gnupg"), ACCESS_READ).unwrap();
    let (b, under) = (s.p("home/proj/src/a/b"), s.p("home/.ssh/b"));
    let (keys, renamed) = (s.p("home/proj/src/e/f/g/keys"), s.p("home/.gnupg"));
    let mut first = warm(Op::Read(s.p(DEEP)));
    first.extend(warm(Op::Read(keys.join("k.pem"))));
    let stages = [first, vec![Op::Read(under.join("c/d/notes.txt")), Op::Read(renamed.join("k.pem"))]];
    let r = s.staged(&stages, |s, _| {
        s.drain();
        // Into the directory a never name covers, and to the never name itself.
        assert_eq!(
            outside(&[Op::Rename(b.clone(), under.clone()), Op::Rename(keys.clone(), renamed.clone())]),
            vec![0, 0]
        );
    });
    assert_eq!(
        r,
        vec![vec![0; 2 * WARM], vec![EACCES, EACCES]],
        "directories moved under a never name stayed readable"
    );
    assert_eq!(summary(&s.drain()), vec![("file_open", ACCESS_READ, true); 2]);
}

/// What the never patterns match from a directory to the top is kept per directory
/// (`pattern_cached`), under the rename stamp. A folder an outside process renames to a
/// pattern's directory word (`deploy/hooks`, visible names, so no other rule refuses) makes
/// its `hooks` a never place at once: a write to a hook the session wrote before (the open's
/// check goes through the object's directory) and a new hook (the create's check, through
/// the new name's directory) are both refused.
#[test]
fn a_folder_renamed_to_a_never_pattern_directory_is_refused_writes_at_once() {
    let mut s = Setup::new("stale-pattern");
    user_file(&s.p("home/repo/meta/hooks/pre-commit"), "#!/bin/sh\n");
    s.grant("home", Scope::Subtree, ACCESS_READ | ACCESS_WRITE | ACCESS_CREATE);
    let wcd = ACCESS_WRITE | ACCESS_CREATE | ACCESS_DELETE;
    s.te.get().add_never_pattern(Some(OsStr::new("deploy")), OsStr::new("hooks"), wcd).unwrap();
    let (meta, deploy) = (s.p("home/repo/meta"), s.p("home/repo/deploy"));
    let mut first = warm(Op::Write(meta.join("hooks/pre-commit")));
    first.push(Op::Create(meta.join("hooks/post-checkout")));
    let stages = [first, vec![Op::Write(deploy.join("hooks/pre-commit")), Op::Create(deploy.join("hooks/post-merge"))]];
    let r = s.staged(&stages, |s, _| {
        s.drain();
        assert_eq!(outside(&[Op::Rename(meta.clone(), deploy.clone())]), vec![0]);
    });
    assert_eq!(r, vec![vec![0; WARM + 1], vec![EACCES, EACCES]], "the hooks of a folder renamed to a pattern's word stayed writable");
}

#[test]
fn a_filesystem_moved_out_of_the_grant_is_denied_at_its_new_mount_point() {
    let mut s = Setup::new("stale-mount-move");
    let (mnt, moved) = (s.p("home/proj/src/a/b/mnt"), s.p("home/attic/mnt"));
    user_dir(&mnt);
    user_dir(&moved);
    mount_tmpfs(&mnt);
    own(&mnt);
    for name in ["notes.txt", "old-0", "old-1", "old-2", "old-3", "old-next"] {
        user_file(&mnt.join("x/y").join(name), name);
    }
    s.grant("home/proj", Scope::Subtree, ACCESS_READ | ACCESS_CREATE | ACCESS_DELETE);
    let mut first = warm(Op::Read(mnt.join("x/y/notes.txt")));
    first.extend((0..WARM).map(|n| Op::Create(mnt.join(format!("x/y/new-{n}")))));
    first.extend((0..WARM).map(|n| Op::Unlink(mnt.join(format!("x/y/old-{n}")))));
    let there = moved.join("x/y");
    let stages = [
        first,
        vec![Op::Read(there.join("notes.txt")), Op::Create(there.join("new-next")), Op::Unlink(there.join("old-next"))],
    ];
    let r = s.staged(&stages, |s, _| {
        s.drain();
        mount_flags(&mnt, &moved, libc::MS_MOVE);
    });
    umount(&moved);
    assert_eq!(r[0], vec![0; 3 * WARM]);
    assert_eq!(r[1], vec![EACCES; 3], "the grant followed a filesystem moved out of its subtree");
    let misses = s.drain();
    assert_eq!(
        summary(&misses),
        vec![
            ("file_open", ACCESS_READ, false),
            ("inode_create", ACCESS_CREATE, false),
            ("inode_unlink", ACCESS_DELETE, false)
        ]
    );
    assert_eq!(misses[0].relative_path, PathBuf::from("home/attic/mnt/x/y/notes.txt"));
}

#[test]
fn a_bind_mount_moved_out_of_the_grant_is_denied_at_its_new_mount_point() {
    // The source lies on a filesystem mounted in an ungranted part of the root, so its
    // files are readable only through the bind mount in the granted subtree: the walk
    // goes up the source filesystem and crosses at its top to the bind's mount point.
    let mut s = Setup::new("stale-bind-move");
    let (fs, view, moved) = (s.p("home/vault/fs"), s.p("home/proj/src/a/b/view"), s.p("home/attic/view"));
    for dir in [&fs, &view, &moved] {
        user_dir(dir);
    }
    mount_tmpfs(&fs);
    own(&fs);
    user_file(&fs.join("shared/x/notes.txt"), "notes");
    mount_flags(&fs.join("shared"), &view, libc::MS_BIND);
    s.grant("home/proj", Scope::Subtree, ACCESS_READ);
    // The source path first, so the last accesses before the move (the ones a
    // cache would keep) go through the bind mount.
    let mut first = vec![Op::Read(fs.join("shared/x/notes.txt"))];
    first.extend(warm(Op::Read(view.join("x/notes.txt"))));
    let stages = [first, vec![Op::Read(moved.join("x/notes.txt"))]];
    let r = s.staged(&stages, |s, _| {
        s.drain();
        mount_flags(&view, &moved, libc::MS_MOVE);
    });
    umount(&moved);
    umount(&fs);
    let mut expected = vec![EACCES];
    expected.extend([0; WARM]);
    assert_eq!(r[0], expected, "readable through the granted bind mount only");
    assert_eq!(r[1], vec![EACCES], "the grant followed a bind mount moved out of its subtree");
    let misses = s.drain();
    assert_eq!(summary(&misses), vec![("file_open", ACCESS_READ, false)]);
    // (The path runs up the source filesystem, then from the bind's mount point.)
    let path = &misses[0].relative_path;
    assert!(path.starts_with("home/attic/view") && path.ends_with("x/notes.txt"), "{path:?}");
}

#[test]
fn a_directory_seen_through_two_mounts_is_judged_by_each_and_unmounting_the_granted_one_leaves_nothing() {
    let mut s = Setup::new("stale-two-mounts");
    let (mnt, view) = (s.p("home/proj/src/a/b/mnt"), s.p("home/attic/view"));
    user_dir(&mnt);
    user_dir(&view);
    mount_tmpfs(&mnt);
    own(&mnt);
    user_file(&mnt.join("x/y/notes.txt"), "notes");
    mount_flags(&mnt, &view, libc::MS_BIND);
    s.grant("home/proj", Scope::Subtree, ACCESS_READ);
    let (granted, ungranted) = (mnt.join("x/y/notes.txt"), view.join("x/y/notes.txt"));
    let mut first = warm(Op::Read(granted.clone()));
    first.extend([Op::Read(ungranted.clone()), Op::Read(granted.clone()), Op::Read(ungranted.clone())]);
    let stages = [first, vec![Op::Read(ungranted.clone())]];
    let r = s.staged(&stages, |s, _| {
        s.drain();
        umount(&mnt);
    });
    umount(&view);
    let mut expected = vec![0; WARM];
    expected.extend([EACCES, 0, EACCES]);
    assert_eq!(r[0], expected, "the same directory through an ungranted mount point");
    assert_eq!(r[1], vec![EACCES], "the grant outlived its mount point");
    let misses = s.drain();
    assert_eq!(summary(&misses), vec![("file_open", ACCESS_READ, false)]);
    assert_eq!(misses[0].relative_path, PathBuf::from("home/attic/view/x/y/notes.txt"));
}

#[test]
fn revoking_create_delete_and_write_grants_denies_the_next_inode_operation() {
    let mut s = Setup::new("stale-inode");
    let out = s.p("home/proj/src/a/b/c/out");
    user_dir(&out);
    for n in 0..=WARM {
        user_file(&out.join(format!("old-{n}")), "old");
        user_dir(&out.join(format!("empty-{n}")));
    }
    user_file(&out.join("kept.txt"), "kept");
    s.grant("home/proj", Scope::Subtree, ACCESS_CREATE | ACCESS_DELETE | ACCESS_WRITE);
    let ops = |n: usize| {
        vec![
            Op::Create(out.join(format!("new-{n}"))),
            Op::Mkdir(out.join(format!("dir-{n}"))),
            Op::Unlink(out.join(format!("old-{n}"))),
            Op::Rmdir(out.join(format!("empty-{n}"))),
            Op::Chmod(out.join("kept.txt")),
            Op::Truncate(out.join("kept.txt")),
        ]
    };
    let first: Vec<Op> = (0..WARM).flat_map(ops).collect();
    let stages = [first, ops(WARM)];
    let r = s.staged(&stages, |s, _| {
        s.drain();
        s.revoke("home/proj", Scope::Subtree, ACCESS_CREATE | ACCESS_DELETE | ACCESS_WRITE);
    });
    assert_eq!(r[0], vec![0; 6 * WARM]);
    assert_eq!(r[1], vec![EACCES; 6], "create, delete or write outlived its revocation");
    assert!(!out.join(format!("new-{WARM}")).exists() && out.join(format!("old-{WARM}")).exists());
    let hooks: Vec<&str> = s.drain().iter().map(|m| m.hook.name()).collect();
    assert_eq!(
        hooks,
        vec!["inode_create", "inode_mkdir", "inode_unlink", "inode_rmdir", "inode_setattr", "inode_setattr"]
    );
}

#[test]
fn a_hard_link_an_outside_process_adds_takes_the_file_out_of_its_subtree_grant() {
    // A file with several links is opened by an exact grant only; linking changes
    // neither a grant, a dentry's place nor a mount.
    let mut s = Setup::new("stale-link");
    user_file(&s.p(DEEP), "notes");
    user_dir(&s.p("home/attic"));
    s.grant("home/proj", Scope::Subtree, ACCESS_READ);
    let file = s.p(DEEP);
    let link = s.p("home/attic/notes-link");
    let stages = [warm(Op::Read(file.clone())), vec![Op::Read(file.clone())]];
    let r = s.staged(&stages, |s, _| {
        s.drain();
        assert_eq!(outside(&[Op::Link(file.clone(), link.clone())]), vec![0]);
    });
    assert_eq!(r, vec![vec![0; WARM], vec![EACCES]], "a subtree grant opened a file that gained a second link");
    let misses = s.drain();
    assert_eq!(summary(&misses), vec![("file_open", ACCESS_READ, false)]);
    assert_ne!(misses[0].flags & EVENT_FLAG_MULTI_LINK, 0);
}

#[test]
fn a_shadow_session_switched_to_enforcing_is_denied_on_the_next_open() {
    let mut s = Setup::with_flags("stale-shadow", SessionFlags { shadow: true, ..SessionFlags::ENFORCING });
    user_file(&s.p(DEEP), "notes");
    let file = s.p(DEEP);
    let stages = [warm(Op::Read(file.clone())), vec![Op::Read(file.clone())]];
    let r = s.staged(&stages, |s, _| {
        let misses = s.drain();
        assert_eq!(misses.len(), WARM);
        assert!(misses.iter().all(Miss::shadow_allowed));
        let session = s.cg.id;
        s.te.get().register_session_with(session, SessionFlags::ENFORCING).unwrap();
    });
    assert_eq!(r, vec![vec![0; WARM], vec![EACCES]], "a shadow allow outlived the switch to enforcing");
    let misses = s.drain();
    assert_eq!(misses.len(), 1);
    assert!(!misses[0].shadow_allowed());
}

#[test]
fn another_session_gets_nothing_from_a_granted_session_warm_walks() {
    let mut s = Setup::new("stale-other");
    user_file(&s.p(DEEP), "notes");
    s.grant("home/proj", Scope::Subtree, ACCESS_READ);
    // A second session whose id is alike in its low bits (as a table per object indexed
    // by session id would put the two together).
    let other = (0..16)
        .map(|n| TestCgroup::new(&format!("stale-other-{n}")))
        .find(|c| c.id & 7 == s.cg.id & 7)
        .expect("a cgroup id alike in its low bits");
    s.te.get().register_session(other.id).unwrap();
    let file = s.p(DEEP);
    let stages = [warm(Op::Read(file.clone())), vec![Op::Read(file.clone())], vec![Op::Read(file.clone())]];
    let r = s.staged(&stages, |_, _| {
        assert_eq!(run_as(Some(&other.path), Some(WORKER_UID), &[Op::Read(file.clone())]), vec![EACCES]);
    });
    assert_eq!(r, vec![vec![0; WARM], vec![0], vec![0]]);
    let misses = s.drain();
    assert_eq!(misses.len(), 2);
    assert!(misses.iter().all(|m| m.session == other.id));
}

#[test]
fn entries_on_the_file_itself_are_decided_on_the_next_open() {
    let mut s = Setup::new("stale-own");
    let (opened, subtree) = (s.p("home/misc/a/b/c/opened.txt"), s.p("home/misc/a/b/c/subtree.txt"));
    user_file(&opened, "open path on the file");
    user_file(&subtree, "subtree grant on the file");
    user_file(&s.p(DEEP), "notes");
    let file = s.p(DEEP);
    s.te.get().add_open(id(&opened), ACCESS_READ).unwrap();
    s.grant("home/misc/a/b/c/subtree.txt", Scope::Subtree, ACCESS_READ);
    s.grant("home/proj", Scope::Subtree, ACCESS_READ);
    let all = || vec![Op::Read(opened.clone()), Op::Read(subtree.clone()), Op::Read(file.clone())];
    let stages = [(0..WARM).flat_map(|_| all()).collect(), all(), all(), all()];
    let r = s.staged(&stages, |s, i| match i {
        0 => s.te.get().remove_open(id(&opened)).unwrap(),
        1 => s.revoke("home/misc/a/b/c/subtree.txt", Scope::Subtree, ACCESS_READ),
        _ => s.te.get().add_never(id(&file), ACCESS_READ).unwrap(),
    });
    assert_eq!(r[0], vec![0; 3 * WARM]);
    assert_eq!(r[1], vec![EACCES, 0, 0], "the file's own open path outlived its removal");
    assert_eq!(r[2], vec![EACCES, EACCES, 0], "the file's own subtree grant outlived its revocation");
    assert_eq!(r[3], vec![EACCES, EACCES, EACCES], "a grant outlived a never entry on the file itself");
    let never: Vec<bool> = s.drain().iter().map(Miss::never).collect();
    assert_eq!(never, vec![false, false, false, false, false, true]);
}
