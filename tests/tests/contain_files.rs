//! Session containment, filesystem side, against the real BPF LSM (run inside the VM as
//! root): metadata and special files, object identity (hard links outside the roots,
//! inode reuse, filesystems mounted inside a root), fds received from outside
//! processes, never-grantable objects and names, open paths, shadow sessions and spawn
//! hardening (terminal injection, user namespaces).
//!
//! Every attack runs as uid 1000 inside a session, as a worker would; each test also
//! shows the same operation succeeding for a process of the same uid outside every
//! session, so it fails if the hook it guards is removed and shows that processes
//! outside sessions stay untouched.

use pincer::kernel::{Miss, ObjectId, Scope, SessionFlags};
use pincer::Access;
use pincer_common::{ACCESS_ALL, ACCESS_CREATE, ACCESS_DELETE, ACCESS_LIST, ACCESS_READ, ACCESS_WRITE};
use pincer_tests::*;
use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The worker's uid.
const UID: u32 = WORKER_UID;
const EPERM: i32 = libc::EPERM;

fn id(path: &Path) -> ObjectId {
    ObjectId::of_path(path).unwrap_or_else(|e| panic!("stat {}: {e}", path.display()))
}

/// A protected root (owned by the worker's uid) with a gated session around it.
struct Setup {
    te: TestEnforcer,
    cg: TestCgroup,
    root: PathBuf,
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
        Self { te, cg, root }
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    fn grant(&mut self, path: &Path, scope: Scope, access: Access) {
        let obj = id(path);
        let session = self.cg.id;
        self.te.get().grant(session, obj, scope, access).expect("grant");
    }

    /// The worker (uid 1000, inside the session) runs `ops`.
    fn attack(&self, ops: &[Op]) -> Vec<i32> {
        run_as(Some(&self.cg.path), Some(UID), ops)
    }

    /// Every miss the kernel has reported so far.
    fn misses(&mut self, rt: &tokio::runtime::Runtime, stream: &mut Option<pincer::kernel::Events>) -> Vec<Miss> {
        if stream.is_none() {
            *stream = Some(rt.block_on(async { self.te.get().events() }).expect("events"));
        }
        let stream = stream.as_mut().expect("stream");
        let mut out = Vec::new();
        while let Some(m) = stream.try_next() {
            let event = m.unwrap_or_else(|e| panic!("decode event: {}", error_chain(&e)));
            out.push(event.miss().expect("a file miss, not a reach denial"));
        }
        out
    }
}

/// The same user outside every session runs `ops`.
fn outside(ops: &[Op]) -> Vec<i32> {
    run_as(None, Some(UID), ops)
}

#[test]
fn mode_owner_and_times_of_ungranted_files_need_write() {
    let mut s = Setup::new("meta");
    let (a, b) = (s.p("docs/a.txt"), s.p("docs/b.txt"));
    user_file(&a, "a");
    user_file(&b, "b");
    let ops = |p: &Path| vec![Op::Chmod(p.into()), Op::Chown(p.into()), Op::Utimes(p.into())];
    let rt = runtime();
    let mut stream = None;
    s.misses(&rt, &mut stream);
    assert_eq!(s.attack(&ops(&a)), vec![EACCES; 3], "chmod, chown and utimes of an ungranted file");
    let misses = s.misses(&rt, &mut stream);
    assert_eq!(misses.len(), 3);
    for m in &misses {
        assert_eq!((m.hook.name(), m.access.clone()), ("inode_setattr", vec![Access::Write]));
        assert_eq!(m.relative_path, PathBuf::from("docs/a.txt"));
        assert_eq!((m.dev, m.ino), (id(&a).dev, id(&a).ino));
    }
    // The same user outside the session may.
    assert_eq!(outside(&ops(&b)), vec![0; 3]);
    // A read grant is not enough; a write grant is.
    s.grant(&a, Scope::Exact, Access::Read);
    assert_eq!(s.attack(&ops(&a)), vec![EACCES; 3]);
    s.grant(&a, Scope::Exact, Access::Write);
    assert_eq!(s.attack(&ops(&a)), vec![0; 3]);
}

#[test]
fn setting_and_removing_xattrs_of_ungranted_files_need_write() {
    let mut s = Setup::new("xattr");
    // user.* xattrs on tmpfs need Linux 6.6; before that only root may set
    // trusted.* there. Take the first that works outside any session.
    let candidates = [("user.pincer", Some(UID)), ("trusted.pincer", None)];
    let probe = fresh_dir("xattr-probe");
    own(&probe);
    let chosen = candidates.iter().find(|(name, uid)| {
        let f = probe.join(name);
        user_file(&f, "p");
        run_as(None, *uid, &[Op::SetXattr(f, name.to_string())]) == vec![0]
    });
    let &(name, uid) = chosen.expect("some xattr namespace works outside sessions");
    let (a, b) = (s.p("a"), s.p("b"));
    user_file(&a, "a");
    user_file(&b, "b");
    assert_eq!(run_as(None, uid, &[Op::SetXattr(b.clone(), name.into())]), vec![0]);
    let worker = |ops: &[Op]| run_as(Some(&s.cg.path), uid, ops);
    assert_eq!(worker(&[Op::SetXattr(a.clone(), name.into()), Op::RemoveXattr(b.clone(), name.into())]), vec![EACCES; 2]);
    let rt = runtime();
    let mut stream = None;
    let hooks: Vec<&str> = s.misses(&rt, &mut stream).iter().map(|m| m.hook.name()).collect();
    assert_eq!(hooks, vec!["inode_setxattr", "inode_removexattr"]);
    s.grant(&a, Scope::Exact, Access::Write);
    s.grant(&b, Scope::Exact, Access::Write);
    let worker = |ops: &[Op]| run_as(Some(&s.cg.path), uid, ops);
    assert_eq!(worker(&[Op::SetXattr(a.clone(), name.into()), Op::RemoveXattr(b.clone(), name.into())]), vec![0, 0]);
}

#[test]
fn fifos_and_unix_socket_binds_in_a_root_need_create() {
    let mut s = Setup::new("mknod");
    let dir = s.p("run");
    user_dir(&dir);
    let rt = runtime();
    let mut stream = None;
    s.misses(&rt, &mut stream);
    assert_eq!(s.attack(&[Op::Mkfifo(dir.join("fifo")), Op::BindUnix(dir.join("sock"))]), vec![EACCES, EACCES]);
    assert!(!dir.join("fifo").exists() && !dir.join("sock").exists());
    let misses = s.misses(&rt, &mut stream);
    let seen: Vec<(&str, PathBuf)> = misses.iter().map(|m| (m.hook.name(), m.relative_path.clone())).collect();
    assert_eq!(seen, vec![("inode_mknod", PathBuf::from("run/fifo")), ("inode_mknod", PathBuf::from("run/sock"))]);
    assert!(misses.iter().all(|m| m.access == vec![Access::Create]));
    // The same user outside the session may.
    assert_eq!(outside(&[Op::Mkfifo(dir.join("fifo2")), Op::BindUnix(dir.join("sock2"))]), vec![0, 0]);
    s.grant(&dir, Scope::Exact, Access::Create);
    assert_eq!(s.attack(&[Op::Mkfifo(dir.join("fifo")), Op::BindUnix(dir.join("sock"))]), vec![0, 0]);
}

#[test]
fn a_hard_link_made_outside_every_root_keeps_the_file_protected() {
    let mut s = Setup::new("outlink");
    let secret = s.p("keys/id_ed25519");
    user_file(&secret, "PRIVATE KEY");
    let elsewhere = fresh_dir("outlink-elsewhere");
    own(&elsewhere);
    // What the system lets every user read (the user's own files are gated wherever they lie).
    write_file(&elsewhere.join("free.txt"), "free");
    // The user links the file from outside every root (outside any session).
    assert_eq!(outside(&[Op::Link(secret.clone(), elsewhere.join("copy"))]), vec![0]);
    let rt = runtime();
    let mut stream = None;
    s.misses(&rt, &mut stream);
    let r = s.attack(&[
        Op::Read(elsewhere.join("copy")),
        Op::Write(elsewhere.join("copy")),
        Op::Read(elsewhere.join("free.txt")),
    ]);
    assert_eq!(r, vec![EACCES, EACCES, 0], "the link outside the roots reaches a protected file");
    let m = &s.misses(&rt, &mut stream)[0];
    assert_eq!((m.hook.name(), m.dev, m.ino), ("file_open", id(&secret).dev, id(&secret).ino));
    assert_ne!(m.flags & pincer_common::EVENT_FLAG_MULTI_LINK, 0);
    assert_eq!(outside(&[Op::Read(elsewhere.join("copy"))]), vec![0]);
    // An exact grant on the object opens it through either name.
    s.grant(&secret, Scope::Exact, Access::Read);
    assert_eq!(s.attack(&[Op::Read(elsewhere.join("copy")), Op::Read(secret)]), vec![0, 0]);
}

#[test]
fn a_grant_does_not_outlive_its_inode_or_pass_to_a_reused_number() {
    let mut s = Setup::new("reuse");
    let session = s.cg.id;
    // Deleted for good: the grant entry goes with the inode.
    let gone = s.p("gone.txt");
    user_file(&gone, "old");
    s.grant(&gone, Scope::Exact, Access::Read);
    let gone_id = id(&gone);
    assert_ne!(s.te.get().granted_bits(session, gone_id, Scope::Exact).unwrap(), 0);
    std::fs::remove_file(&gone).unwrap();
    assert_eq!(s.te.get().granted_bits(session, gone_id, Scope::Exact).unwrap(), 0, "grant outlived its inode");
    // A filesystem mounted inside the root, unmounted, and a new one mounted in
    // its place: the new one gets the same device number and the same inode
    // numbers (tmpfs counts per superblock), so its first file is the old
    // file's (dev, ino).
    let mnt = s.p("mnt");
    user_dir(&mnt);
    mount_tmpfs(&mnt);
    own(&mnt);
    let first = mnt.join("granted.txt");
    user_file(&first, "granted");
    s.grant(&first, Scope::Exact, Access::Read);
    let old = id(&first);
    assert_eq!(s.attack(&[Op::Read(first.clone())]), vec![0]);
    umount(&mnt);
    assert_eq!(s.te.get().granted_bits(session, old, Scope::Exact).unwrap(), 0, "grant outlived its filesystem");
    mount_tmpfs(&mnt);
    own(&mnt);
    let next = mnt.join("other-secret.txt");
    user_file(&next, "someone else's");
    assert_eq!(id(&next), old, "precondition: the new file reuses the granted (dev, ino)");
    assert_eq!(s.attack(&[Op::Read(next.clone())]), vec![EACCES], "the grant passed to a reused inode number");
    assert_eq!(outside(&[Op::Read(next)]), vec![0]);
    umount(&mnt);
}

#[test]
fn a_filesystem_mounted_inside_a_root_stays_protected() {
    let mut s = Setup::new("mount");
    let data = s.p("data");
    user_dir(&data);
    mount_tmpfs(&data);
    own(&data);
    let (secret, other) = (data.join("secret.txt"), data.join("other.txt"));
    user_file(&secret, "secret");
    user_file(&other, "other");
    user_dir(&data.join("dir"));
    let rt = runtime();
    let mut stream = None;
    s.misses(&rt, &mut stream);
    let r = s.attack(&[
        Op::Read(secret.clone()),
        Op::Write(secret.clone()),
        Op::Chmod(secret.clone()),
        Op::Unlink(secret.clone()),
        Op::Create(data.join("dir/new")),
    ]);
    assert_eq!(r, vec![EACCES; 5], "open and inode hooks cross the mount point");
    let read = &s.misses(&rt, &mut stream)[0];
    assert_eq!((read.root_dev, read.root_ino), (id(&s.root).dev, id(&s.root).ino));
    assert_eq!(read.relative_path, PathBuf::from("data/secret.txt"));
    assert_eq!(outside(&[Op::Read(other.clone()), Op::Write(other.clone()), Op::Unlink(other)]), vec![0, 0, 0]);
    // A subtree grant on the root reaches across the mount too.
    let root = s.root.clone();
    s.grant(&root, Scope::Subtree, Access::Read);
    assert_eq!(s.attack(&[Op::Read(secret.clone()), Op::Write(secret)]), vec![0, EACCES]);
    umount(&data);
}

#[test]
fn an_fd_received_from_an_outside_process_is_checked_like_an_open() {
    let mut s = Setup::new("recv");
    let secret = s.p("secret.txt");
    user_file(&secret, "secret");
    let mut pair = [0; 2];
    // SAFETY: socketpair with a valid out array.
    assert_eq!(unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, pair.as_mut_ptr()) }, 0);
    let rt = runtime();
    let mut stream = None;
    s.misses(&rt, &mut stream);
    // A deputy of the same uid outside the session sends the fd over SCM_RIGHTS.
    assert_eq!(outside(&[Op::SendFd(pair[0], secret.clone())]), vec![0]);
    assert_eq!(s.attack(&[Op::RecvFdRead(pair[1])]), vec![EACCES], "SCM_RIGHTS fd of an ungranted file");
    let m = &s.misses(&rt, &mut stream)[0];
    assert_eq!((m.hook.name(), m.access.clone()), ("file_receive", vec![Access::Read]));
    assert_eq!(m.relative_path, PathBuf::from("secret.txt"));
    // Outside the session the same fd passes.
    assert_eq!(outside(&[Op::SendFd(pair[0], secret.clone())]), vec![0]);
    assert_eq!(outside(&[Op::RecvFdRead(pair[1])]), vec![0]);
    s.grant(&secret, Scope::Exact, Access::Read);
    assert_eq!(outside(&[Op::SendFd(pair[0], secret.clone())]), vec![0]);
    assert_eq!(s.attack(&[Op::RecvFdRead(pair[1])]), vec![0]);

    // pidfd_getfd of a victim process of the same uid that holds the other file open.
    let victim_file = s.p("victim.txt");
    user_file(&victim_file, "victim");
    let path = CString::new(victim_file.as_os_str().as_bytes()).unwrap();
    // SAFETY: fork; the child only makes syscalls and pauses until killed.
    let (victim, fd) = unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_RDONLY);
        assert!(fd >= 0);
        let pid = libc::fork();
        assert!(pid >= 0);
        if pid == 0 {
            if libc::setresgid(UID, UID, UID) != 0 || libc::setresuid(UID, UID, UID) != 0 {
                libc::_exit(102);
            }
            libc::prctl(libc::PR_SET_DUMPABLE, 1);
            loop {
                libc::pause();
            }
        }
        libc::close(fd);
        (pid, fd)
    };
    std::thread::sleep(std::time::Duration::from_millis(200));
    let inside = s.attack(&[Op::PidfdGetfd(victim, fd)]);
    let outside_result = outside(&[Op::PidfdGetfd(victim, fd)]);
    // SAFETY: kill and reap the victim forked above.
    unsafe {
        libc::kill(victim, libc::SIGKILL);
        libc::waitpid(victim, std::ptr::null_mut(), 0);
    }
    assert!(inside == vec![EACCES] || inside == vec![EPERM], "pidfd_getfd of an ungranted file: {inside:?}");
    assert_eq!(outside_result, vec![0]);
}

#[test]
fn terminal_injection_is_refused_in_sessions() {
    ensure_devpts();
    let mut s = Setup::new("tiocsti");
    let rt = runtime();
    let mut stream = None;
    s.misses(&rt, &mut stream);
    assert_eq!(s.attack(&[Op::Tiocsti, Op::Tioclinux]), vec![EPERM, EPERM]);
    let misses = s.misses(&rt, &mut stream);
    assert_eq!(misses.len(), 2);
    assert!(misses.iter().all(|m| m.hook.name() == "file_ioctl" && m.never()));
    // Outside a session the kernel's own rules decide (6.1 allows TIOCSTI on the
    // caller's terminal; 6.12 refuses it with EIO; TIOCLINUX fails with EINVAL
    // on a pty): never this hook's EPERM.
    let r = outside(&[Op::Tiocsti, Op::Tioclinux]);
    assert!(r.iter().all(|e| *e != EPERM), "outside results: {r:?}");
}

#[test]
fn user_namespaces_need_the_session_flag() {
    let mut s = Setup::new("userns");
    assert_eq!(s.attack(&[Op::UnshareUser]), vec![EPERM]);
    assert_eq!(outside(&[Op::UnshareUser]), vec![0]);
    let rt = runtime();
    let mut stream = None;
    let misses = s.misses(&rt, &mut stream);
    assert_eq!(misses.iter().map(|m| m.hook.name()).collect::<Vec<_>>(), vec!["userns_create"]);
    let session = s.cg.id;
    let flags = SessionFlags { allow_userns: true, ..SessionFlags::ENFORCING };
    s.te.get().register_session_with(session, flags).unwrap();
    assert_eq!(s.attack(&[Op::UnshareUser]), vec![0]);
}

#[test]
fn never_grantable_objects_and_names_beat_grants_open_paths_and_shadow_mode() {
    let mut s = Setup::new("never");
    user_file(&s.p(".ssh/id_ed25519"), "PRIVATE KEY");
    user_file(&s.p("proj/src/main.rs"), "fn main() {}");
    user_file(&s.p("proj/.git/config"), "[core]");
    user_file(&s.p("proj/.git/HEAD"), "ref: refs/heads/main");
    user_file(&s.p("proj/.git/hooks/pre-push.sample"), "#!/bin/sh");
    let elsewhere = fresh_dir("never-elsewhere");
    user_file(&elsewhere.join("token"), "t");
    let root = s.root.clone();
    let session = s.cg.id;
    let e = s.te.get();
    e.grant_bits(session, id(&root), Scope::Subtree, ACCESS_ALL).unwrap();
    // `.git` is hidden: the root's grant does not reach it; a grant of its own does.
    e.grant_bits(session, id(&root.join("proj/.git")), Scope::Subtree, ACCESS_ALL).unwrap();
    e.add_never(id(&root.join(".ssh")), ACCESS_ALL).unwrap();
    e.add_never(id(&root.join("proj/.git/hooks")), ACCESS_WRITE | ACCESS_CREATE | ACCESS_DELETE).unwrap();
    let protect = ACCESS_WRITE | ACCESS_CREATE | ACCESS_DELETE;
    e.add_never_name(id(&root.join("proj/.git")), OsStr::new("config"), protect).unwrap();
    e.add_never_name(id(&root), OsStr::new(".bashrc"), protect).unwrap();
    e.add_never(id(&elsewhere), ACCESS_READ).unwrap();
    let rt = runtime();
    let mut stream = None;
    s.misses(&rt, &mut stream);
    let attack = |s: &Setup| {
        s.attack(&[
            Op::Read(s.p(".ssh/id_ed25519")),
            Op::List(s.p(".ssh")),
            Op::Read(s.p("proj/src/main.rs")),
            Op::Read(s.p("proj/.git/config")),
            Op::Read(s.p("proj/.git/hooks/pre-push.sample")),
            Op::Write(s.p("proj/.git/config")),
            Op::Chmod(s.p("proj/.git/config")),
            Op::Unlink(s.p("proj/.git/config")),
            Op::Rename(s.p("proj/.git/HEAD"), s.p("proj/.git/config")),
            Op::Create(s.p("proj/.git/hooks/pre-commit")),
            Op::Rename(s.p("proj/.git/hooks"), s.p("proj/.git/h2")),
            Op::Create(s.p(".bashrc")),
            Op::Read(elsewhere.join("token")),
            Op::Create(s.p("proj/new.rs")),
        ])
    };
    let expected = vec![EACCES, EACCES, 0, 0, 0, EACCES, EACCES, EACCES, EACCES, EACCES, EACCES, EACCES, EACCES, 0];
    assert_eq!(attack(&s), expected, "never-grantable despite a subtree grant of everything");
    let misses = s.misses(&rt, &mut stream);
    let seen: Vec<(&str, PathBuf)> = misses.iter().map(|m| (m.hook.name(), m.relative_path.clone())).collect();
    assert_eq!(misses.len(), 10, "one miss per denial: {seen:?}");
    assert!(misses.iter().all(|m| m.never()), "every denial says never-grantable: {misses:?}");
    // The subtree grant covered the access before the walk met the root, so the
    // path runs up to the filesystem's top (absolute without its leading `/`).
    assert!(misses[0].relative_path.ends_with(".ssh/id_ed25519"), "{:?}", misses[0].relative_path);
    assert_eq!(misses[8].hook.name(), "inode_create");
    assert!(misses[8].relative_path.ends_with(".bashrc"), "{:?}", misses[8].relative_path);
    // The user's own processes are untouched.
    assert_eq!(outside(&[Op::Read(s.p(".ssh/id_ed25519")), Op::Write(s.p("proj/.git/config"))]), vec![0, 0]);
    // A name entry holds for a file the user re-creates.
    std::fs::remove_file(s.p("proj/.git/config")).unwrap();
    assert_eq!(s.attack(&[Op::Create(s.p("proj/.git/config"))]), vec![EACCES]);
    user_file(&s.p("proj/.git/config"), "[core]");
    assert_eq!(s.attack(&[Op::Write(s.p("proj/.git/config"))]), vec![EACCES]);
    // Neither an open path nor shadow mode lets them through.
    std::fs::remove_file(s.p("proj/new.rs")).unwrap();
    s.te.get().add_open(id(&root.join(".ssh")), ACCESS_READ | ACCESS_LIST).unwrap();
    s.te.get().register_session_with(session, SessionFlags { shadow: true, ..SessionFlags::ENFORCING }).unwrap();
    assert_eq!(attack(&s), expected);
    // Removing the entries restores the grants.
    s.te.get().remove_never(id(&root.join(".ssh"))).unwrap();
    s.te.get().remove_never_name(id(&root.join("proj/.git")), OsStr::new("config")).unwrap();
    assert_eq!(s.attack(&[Op::Read(s.p(".ssh/id_ed25519")), Op::Write(s.p("proj/.git/config"))]), vec![0, 0]);
}

#[test]
fn a_shadow_session_reports_misses_and_lets_them_through() {
    let mut s = Setup::with_flags("shadow", SessionFlags { shadow: true, ..SessionFlags::ENFORCING });
    user_file(&s.p("a.txt"), "a");
    let rt = runtime();
    let mut stream = None;
    s.misses(&rt, &mut stream);
    assert_eq!(s.attack(&[Op::Read(s.p("a.txt")), Op::Write(s.p("a.txt")), Op::Create(s.p("new.txt"))]), vec![0, 0, 0]);
    let misses = s.misses(&rt, &mut stream);
    let seen: Vec<(&str, Vec<Access>, bool)> = misses.iter().map(|m| (m.hook.name(), m.access.clone(), m.shadow_allowed())).collect();
    assert_eq!(
        seen,
        vec![
            ("file_open", vec![Access::Read], true),
            ("file_open", vec![Access::Write], true),
            ("inode_create", vec![Access::Create], true),
        ]
    );
    assert!(misses.iter().all(|m| !m.never()));
    // The same root under an enforcing session stays closed.
    let enforcing = TestCgroup::new("shadow-enforcing");
    s.te.get().register_session(enforcing.id).unwrap();
    assert_eq!(run_as(Some(&enforcing.path), Some(UID), &[Op::Read(s.p("a.txt"))]), vec![EACCES]);
}

#[test]
fn open_paths_grant_their_bits_to_every_session() {
    let mut s = Setup::new("open");
    user_file(&s.p("cache/pkg/lib.rs"), "pub fn f() {}");
    let cache = s.p("cache");
    s.te.get().add_open(id(&cache), ACCESS_READ | ACCESS_LIST).unwrap();
    let ops = [
        Op::Read(s.p("cache/pkg/lib.rs")),
        Op::List(s.p("cache/pkg")),
        Op::Write(s.p("cache/pkg/lib.rs")),
        Op::Create(s.p("cache/new")),
        Op::Read(s.p("cache/../outside-cache")),
    ];
    user_file(&s.p("outside-cache"), "x");
    assert_eq!(s.attack(&ops), vec![0, 0, EACCES, EACCES, EACCES]);
    let other = TestCgroup::new("open-other");
    s.te.get().register_session(other.id).unwrap();
    assert_eq!(run_as(Some(&other.path), Some(UID), &ops[..1]), vec![0]);
    s.te.get().add_open(id(&cache), ACCESS_READ | ACCESS_LIST | ACCESS_WRITE | ACCESS_CREATE | ACCESS_DELETE).unwrap();
    assert_eq!(s.attack(&[Op::Write(s.p("cache/pkg/lib.rs")), Op::Create(s.p("cache/new"))]), vec![0, 0]);
    s.te.get().remove_open(id(&cache)).unwrap();
    assert_eq!(s.attack(&ops[..1]), vec![EACCES]);
}
