//! Containment by principle, against the real BPF LSM (run inside the VM as root): a
//! session touches only what it was granted, what it created, its scratch, the open paths
//! and what the system lets every user touch. Objects of the user's outside every root
//! are gated by their owner; the user's delegated cgroups cannot be written; watches, stat
//! of never-grantable objects and inode flag changes need the matching grant.
//!
//! Every attack runs as uid 1000 inside a session; each test also shows the same
//! operation succeeding for a process of the same uid outside every session, so it fails
//! if the check it guards is removed.

use pincer::kernel::{KernelEvent, Miss, ObjectId, Reach, Scope};
use pincer::Access;
use pincer_common::ACCESS_ALL;
use pincer_tests::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

const UID: u32 = WORKER_UID;

fn id(path: &Path) -> ObjectId {
    ObjectId::of_path(path).unwrap_or_else(|e| panic!("stat {}: {e}", path.display()))
}

/// A protected root with a gated session around it, and the session's misses.
struct Setup {
    te: TestEnforcer,
    cg: TestCgroup,
    root: PathBuf,
    rt: tokio::runtime::Runtime,
    stream: Option<pincer::kernel::Events>,
}

impl Setup {
    fn new(name: &str) -> Self {
        let mut te = TestEnforcer::shared();
        let cg = TestCgroup::new(name);
        let root = fresh_dir(name);
        own(&root);
        te.get().register_session(cg.id).expect("register session");
        te.get().add_root(&root).expect("add root");
        let mut s = Self {
            te,
            cg,
            root,
            rt: runtime(),
            stream: None,
        };
        s.events();
        s
    }

    fn grant(&mut self, path: &Path, access: Access) {
        let session = self.cg.id;
        self.te
            .get()
            .grant(session, id(path), Scope::Exact, access)
            .expect("grant");
    }

    fn attack(&self, ops: &[Op]) -> Vec<i32> {
        run_as(Some(&self.cg.path), Some(UID), ops)
    }

    /// Every event the kernel has reported so far: file misses and reach denials.
    fn events(&mut self) -> Vec<KernelEvent> {
        if self.stream.is_none() {
            self.stream = Some(
                self.rt
                    .block_on(async { self.te.get().events() })
                    .expect("events"),
            );
        }
        let stream = self.stream.as_mut().expect("stream");
        let mut out = Vec::new();
        while let Some(m) = stream.try_next() {
            out.push(m.unwrap_or_else(|e| panic!("decode event: {}", error_chain(&e))));
        }
        out
    }

    /// The file misses the kernel has reported so far.
    fn misses(&mut self) -> Vec<Miss> {
        self.events().into_iter().filter_map(KernelEvent::miss).collect()
    }
}

fn outside(ops: &[Op]) -> Vec<i32> {
    run_as(None, Some(UID), ops)
}

#[test]
fn the_users_files_outside_every_root_need_a_grant_and_the_systems_do_not() {
    let mut s = Setup::new("owned");
    // A project the user keeps outside every root (as under /srv or /opt).
    let elsewhere = fresh_dir("owned-elsewhere");
    let notes = elsewhere.join("notes.txt");
    user_file(&notes, "the user's");
    let ops = |dir: &Path, f: &Path| {
        vec![
            Op::Read(f.into()),
            Op::Write(f.into()),
            Op::Create(dir.join("new")),
            Op::Unlink(f.into()),
        ]
    };
    assert_eq!(
        s.attack(&ops(&elsewhere, &notes)),
        vec![EACCES; 4],
        "read, write, create in and unlink from the user's folder"
    );
    let misses = s.misses();
    assert!(
        !misses.is_empty() && misses.iter().all(|m| m.owned_outside_roots()),
        "gated by owner: {misses:?}"
    );
    assert!(
        misses
            .iter()
            .any(|m| m.ino == id(&notes).ino && m.access == vec![Access::Read]),
        "{misses:?}"
    );
    // A grant opens it, as under a root.
    s.grant(&notes, Access::Read);
    assert_eq!(s.attack(&[Op::Read(notes.clone())]), vec![0]);

    // What the system lets every user read stays readable.
    let system = fresh_dir("owned-system");
    let motd = system.join("motd");
    write_file(&motd, "hello");
    assert_eq!(
        s.attack(&[Op::Read(motd.clone())]),
        vec![0],
        "root's world-readable file"
    );
    // And what it lets every user write (as /dev/null), writable.
    let board = system.join("board");
    write_file(&board, "");
    std::fs::set_permissions(&board, std::fs::Permissions::from_mode(0o666)).unwrap();
    assert_eq!(s.attack(&[Op::Write(board.clone())]), vec![0], "root's world-writable file");

    // In a shared, world-writable place outside the roots, what the session makes is its own;
    // what the user made there is not.
    let shared = fresh_dir("owned-shared");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let theirs = shared.join("theirs");
    write_file(&theirs, "user's");
    own(&theirs);
    let mine = shared.join("mine");
    assert_eq!(
        s.attack(&[
            Op::Create(mine.clone()),
            Op::Write(mine.clone()),
            Op::Read(mine.clone()),
            Op::Write(theirs.clone())
        ]),
        vec![0, 0, 0, EACCES],
        "the session's own file, then the user's"
    );
    // The same user outside every session is untouched.
    let other = elsewhere.join("other.txt");
    user_file(&other, "x");
    assert_eq!(outside(&ops(&elsewhere, &other)), vec![0; 4]);
}

#[test]
fn the_users_delegated_cgroups_cannot_be_written_from_a_session() {
    let mut s = Setup::new("cgroup");
    // The user's own delegated cgroup (as systemd gives user@UID.service), with one of the
    // user's processes in it.
    let slice = TestCgroup::new("user-slice");
    for f in [
        "",
        "cgroup.procs",
        "cgroup.kill",
        "cgroup.freeze",
        "cgroup.subtree_control",
    ] {
        own(&slice.path.join(f));
    }
    let mut victim = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("spawn sleep");
    std::fs::write(slice.path.join("cgroup.procs"), victim.id().to_string())
        .expect("move the victim");
    let kill = slice.path.join("cgroup.kill");
    let freeze = slice.path.join("cgroup.freeze");
    let procs = slice.path.join("cgroup.procs");
    let got = s.attack(&[
        Op::WriteBytes(kill.clone(), b"1".to_vec()),
        Op::WriteBytes(freeze.clone(), b"1".to_vec()),
        // "0" moves the writer itself: out of the session's cgroup, its limits and the gate.
        Op::WriteBytes(procs.clone(), b"0".to_vec()),
        Op::Mkdir(slice.path.join("escape")),
    ]);
    assert_eq!(
        got,
        vec![EACCES; 4],
        "kill, freeze, move into and mkdir in the user's cgroup"
    );
    assert!(
        victim.try_wait().expect("wait").is_none(),
        "the user's process lives"
    );
    let frozen = std::fs::read_to_string(&freeze).expect("read cgroup.freeze");
    assert_eq!(frozen.trim(), "0", "not frozen");
    let misses = s.events();
    let reach: Vec<_> = misses.iter().cloned().filter_map(KernelEvent::reach).map(|r| r.reach).collect();
    assert!(
        reach
            .iter()
            .any(|r| matches!(r, Reach::Cgroup { name, .. } if name == "cgroup.kill")),
        "{misses:?}"
    );
    // Inside its own cgroup the session may make and use sub-cgroups.
    for f in ["", "cgroup.procs", "cgroup.subtree_control"] {
        own(&s.cg.path.join(f));
    }
    let sub = s.cg.path.join("sub");
    assert_eq!(
        s.attack(&[Op::Mkdir(sub.clone())]),
        vec![0],
        "a sub-cgroup of its own"
    );
    std::fs::remove_dir(&sub).expect("rmdir sub-cgroup");
    // The user outside every session may write the user's cgroup.
    assert_eq!(
        outside(&[Op::WriteBytes(freeze.clone(), b"0".to_vec())]),
        vec![0]
    );
    victim.kill().ok();
    victim.wait().ok();
}

#[test]
fn a_watch_needs_read_on_the_object_and_list_on_a_directory() {
    let mut s = Setup::new("watch");
    let docs = s.root.join("docs");
    let a = docs.join("a.txt");
    user_file(&a, "a");
    assert_eq!(
        s.attack(&[Op::Watch(a.clone()), Op::Watch(docs.clone())]),
        vec![EACCES; 2],
        "inotify on ungranted objects"
    );
    let misses = s.misses();
    assert!(
        misses.iter().all(|m| m.hook.name() == "path_notify"),
        "{misses:?}"
    );
    assert_eq!(
        outside(&[Op::Watch(a.clone()), Op::Watch(docs.clone())]),
        vec![0; 2]
    );
    s.grant(&a, Access::Read);
    s.grant(&docs, Access::List);
    assert_eq!(
        s.attack(&[Op::Watch(a.clone()), Op::Watch(docs.clone())]),
        vec![0; 2],
        "granted"
    );
}

#[test]
fn stat_of_a_never_grantable_object_is_refused_and_of_others_is_not() {
    let mut s = Setup::new("stat");
    let key = s.root.join(".ssh/id_ed25519");
    user_file(&key, "secret");
    let plain = s.root.join("plain.txt");
    user_file(&plain, "plain");
    s.te.get()
        .add_never(id(&s.root.join(".ssh")), ACCESS_ALL)
        .expect("never");
    assert_eq!(
        s.attack(&[Op::Stat(key.clone()), Op::Stat(s.root.join(".ssh"))]),
        vec![EACCES; 2],
        "size and times of a secret"
    );
    assert_eq!(
        s.attack(&[Op::Stat(plain.clone())]),
        vec![0],
        "an ungranted ordinary file can be looked at"
    );
    // A secret beside ordinary files: the stats of its neighbours fill the walk cache of
    // their directory, and the secret's own entry still refuses it (then, and after).
    let (a, token, b) = (s.root.join("notes/a.txt"), s.root.join("notes/token"), s.root.join("notes/b.txt"));
    for f in [&a, &token, &b] {
        user_file(f, "x");
    }
    s.te.get().add_never(id(&token), ACCESS_ALL).expect("never");
    assert_eq!(
        s.attack(&[Op::Stat(a.clone()), Op::Stat(b.clone()), Op::Stat(token.clone()), Op::Stat(a.clone()), Op::Stat(token.clone())]),
        vec![0, 0, EACCES, 0, EACCES],
        "a never-grantable file among ordinary ones, its directory walked"
    );
    let misses = s.misses();
    assert!(
        misses
            .iter()
            .any(|m| m.hook.name() == "inode_getattr" && m.never()),
        "{misses:?}"
    );
    // A file with cache slots (an open made them: here refused, as nothing grants these
    // files) looked at again is answered from its own cached verdict (the never bits of
    // its whole walk); what changes them ends it: a never entry added later (the policy
    // generation), a move into a never place (the rename sequence).
    assert_eq!(s.attack(&[Op::Read(a.clone()), Op::Read(b.clone())]), vec![EACCES; 2]);
    assert_eq!(s.attack(&[Op::Stat(a.clone()), Op::Stat(b.clone()), Op::Stat(a.clone()), Op::Stat(b.clone())]), vec![0; 4]);
    s.te.get().add_never(id(&a), ACCESS_ALL).expect("never");
    assert_eq!(
        s.attack(&[Op::Stat(a.clone()), Op::Stat(b.clone())]),
        vec![EACCES, 0],
        "a file looked at before, then made never-grantable"
    );
    let moved = s.root.join(".ssh/b.txt");
    std::fs::rename(&b, &moved).expect("move into .ssh");
    assert_eq!(s.attack(&[Op::Stat(moved.clone())]), vec![EACCES], "a file looked at before, then moved into a never place");
    assert_eq!(outside(&[Op::Stat(key.clone())]), vec![0]);
}

#[test]
fn inode_flags_of_a_read_only_object_cannot_be_changed() {
    let mut s = Setup::new("flags");
    let a = s.root.join("a.txt");
    user_file(&a, "a");
    let b = s.root.join("b.txt");
    user_file(&b, "b");
    s.grant(&a, Access::Read);
    assert_eq!(
        s.attack(&[Op::SetFlags(a.clone())]),
        vec![EACCES],
        "FS_IOC_SETFLAGS with a read grant"
    );
    let misses = s.misses();
    assert!(
        misses
            .iter()
            .any(|m| m.hook.name() == "file_ioctl" && m.access == vec![Access::Write]),
        "{misses:?}"
    );
    assert_eq!(
        outside(&[Op::SetFlags(b.clone())]),
        vec![0],
        "the owner outside may"
    );
    s.grant(&a, Access::Write);
    assert_eq!(
        s.attack(&[Op::SetFlags(a.clone())]),
        vec![0],
        "with a write grant"
    );
}

/// The other filesystem ioctls that change the object itself, each taken through a
/// read-only descriptor (the kernel asks only for the owner): fs-verity (the file read-only
/// for good), an encryption policy on the user's empty folder, the generation number.
/// The VM's filesystems support none of them, so what the test tells apart is Pincer's
/// refusal (`EACCES`, with a write miss) from the filesystem's own answer, which the owner
/// outside gets and a session with a write grant gets too.
#[test]
fn filesystem_ioctls_that_change_a_read_only_object_need_write() {
    const FS_IOC_ENABLE_VERITY: u32 = 0x4080_6685;
    const FS_IOC_SET_ENCRYPTION_POLICY: u32 = 0x800c_6613;
    const FS_IOC_SETVERSION: u32 = 0x4008_7602;
    let mut s = Setup::new("fs-ioctls");
    let a = s.root.join("a.txt");
    user_file(&a, "a");
    let folder = s.root.join("empty");
    user_dir(&folder);
    s.grant(&a, Access::Read);
    s.grant(&folder, Access::Read);
    s.grant(&folder, Access::List);
    let ops = |a: &Path, folder: &Path| {
        vec![
            Op::Ioctl(a.to_path_buf(), FS_IOC_ENABLE_VERITY),
            Op::Ioctl(folder.to_path_buf(), FS_IOC_SET_ENCRYPTION_POLICY),
            Op::Ioctl(a.to_path_buf(), FS_IOC_SETVERSION),
        ]
    };
    let owner = outside(&ops(&a, &folder));
    assert!(owner.iter().all(|e| *e != EACCES), "control: the owner outside gets the filesystem's answer: {owner:?}");
    assert_eq!(s.attack(&ops(&a, &folder)), vec![EACCES; 3], "with read grants only (the owner outside got {owner:?})");
    let misses = s.misses();
    assert_eq!(
        misses.iter().filter(|m| m.hook.name() == "file_ioctl" && m.access == vec![Access::Write]).count(),
        3,
        "{misses:?}"
    );
    s.grant(&a, Access::Write);
    s.grant(&folder, Access::Write);
    assert_eq!(s.attack(&ops(&a, &folder)), owner, "with write grants, the filesystem answers as it does the owner");
}

#[test]
fn an_ancestor_of_a_never_place_cannot_be_moved_away_to_rebuild_the_path() {
    use pincer_common::{ACCESS_CREATE, ACCESS_DELETE, ACCESS_WRITE, NEVER_PINNED};
    let mut s = Setup::new("pinned");
    let units = s.root.join(".config/systemd/user");
    user_dir(&units);
    user_dir(&s.root.join(".config/other"));
    own(&s.root.join(".config"));
    own(&s.root.join(".config/systemd"));
    let e = s.te.get();
    e.add_never(id(&units), ACCESS_WRITE | ACCESS_CREATE | ACCESS_DELETE)
        .expect("never");
    e.add_never(id(&s.root.join(".config")), NEVER_PINNED)
        .expect("pin");
    e.add_never(id(&s.root.join(".config/systemd")), NEVER_PINNED)
        .expect("pin");
    // Even a session granted everything under the root and, since a grant on the root
    // does not reach its hidden entries, under `.config` too (a broad task the twin allowed).
    let session = s.cg.id;
    for a in Access::ALL {
        for dir in [s.root.clone(), s.root.join(".config")] {
            s.te.get().grant(session, id(&dir), Scope::Subtree, a).expect("grant");
        }
    }
    let got = s.attack(&[
        Op::Rename(s.root.join(".config"), s.root.join(".config-old")),
        Op::Rename(
            s.root.join(".config/systemd"),
            s.root.join(".config/systemd-old"),
        ),
        Op::Mkdir(units.join("../../systemd2")),
        Op::Create(units.join("evil.service")),
    ]);
    assert_eq!(
        got,
        vec![EACCES, EACCES, 0, EACCES],
        "the pinned ancestors stay; a sibling may be made; no unit"
    );
    let misses = s.misses();
    assert!(
        misses
            .iter()
            .filter(|m| m.access == vec![Access::Delete])
            .all(Miss::never),
        "{misses:?}"
    );
    // What is not an ancestor of a never place moves freely.
    assert_eq!(
        s.attack(&[Op::Rename(
            s.root.join(".config/other"),
            s.root.join(".config/other2")
        )]),
        vec![0]
    );
    // The user outside every session may move them.
    assert_eq!(
        outside(&[Op::Rename(
            s.root.join(".config"),
            s.root.join(".config-old")
        )]),
        vec![0]
    );
}
