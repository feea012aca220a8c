//! Enforcement tests against the real BPF LSM (run inside the VM as root).

use pincer::kernel::{Enforcer, EnforcerConfig, Hook, ObjectId, Scope};
use pincer::Access;
use pincer_tests::*;
use std::path::{Path, PathBuf};

fn id(path: &Path) -> ObjectId {
    ObjectId::of_path(path).unwrap_or_else(|e| panic!("stat {}: {e}", path.display()))
}

/// A protected root with a gated session around it.
struct Setup {
    te: TestEnforcer,
    cg: TestCgroup,
    root: PathBuf,
}

impl Setup {
    fn new(name: &str) -> Self {
        let mut te = TestEnforcer::shared();
        let cg = TestCgroup::new(name);
        let root = fresh_dir(name);
        te.get().register_session(cg.id).expect("register session");
        te.get().add_root(&root).expect("add root");
        Self { te, cg, root }
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    fn grant(&mut self, rel: &str, scope: Scope, access: Access) {
        let obj = id(&self.p(rel));
        let session = self.cg.id;
        self.te.get().grant(session, obj, scope, access).expect("grant");
    }

    fn run(&self, ops: &[Op]) -> Vec<i32> {
        run_in(&self.cg, ops)
    }
}

#[test]
fn ungranted_read_in_root_is_denied_and_miss_reports_path_and_access() {
    let mut s = Setup::new("miss");
    write_file(&s.p("docs/plan.txt"), "secret plan");
    let rt = runtime();
    let mut misses = rt.block_on(async { s.te.get().events() }).expect("events");
    let results = run_as(Some(&s.cg.path), Some(1000), &[Op::Read(s.p("docs/plan.txt"))]);
    assert_eq!(results, vec![EACCES], "ungranted read must be denied");
    let miss = rt
        .block_on(async { misses.next().await })
        .unwrap_or_else(|e| panic!("event stream: {}", error_chain(&e)))
        .miss()
        .expect("a file miss");
    assert_eq!(miss.session, s.cg.id);
    assert_eq!(miss.uid, 1000);
    assert_eq!(miss.access, vec![Access::Read]);
    assert_eq!(miss.hook, Hook::FileOpen);
    assert_eq!(miss.relative_path, PathBuf::from("docs/plan.txt"));
    assert_eq!(miss.name, "plan.txt");
    let file = id(&s.p("docs/plan.txt"));
    let parent = id(&s.p("docs"));
    let root = id(&s.root);
    assert_eq!((miss.dev, miss.ino), (file.dev, file.ino));
    assert_eq!((miss.parent_dev, miss.parent_ino), (parent.dev, parent.ino));
    assert_eq!((miss.root_dev, miss.root_ino), (root.dev, root.ino));
    assert!(misses.try_next().is_none(), "exactly one miss expected");
    // The same read by a process outside the session is not touched.
    assert_eq!(run_as(None, Some(1000), &[Op::Read(s.p("docs/plan.txt"))]), vec![0]);
}

#[test]
fn exact_read_grant_allows_read_but_not_write() {
    let mut s = Setup::new("exact");
    write_file(&s.p("a.txt"), "a");
    write_file(&s.p("b.txt"), "b");
    s.grant("a.txt", Scope::Exact, Access::Read);
    let r = s.run(&[Op::Read(s.p("a.txt")), Op::Write(s.p("a.txt")), Op::Read(s.p("b.txt")), Op::Truncate(s.p("a.txt"))]);
    assert_eq!(r, vec![0, EACCES, EACCES, EACCES]);
    s.grant("a.txt", Scope::Exact, Access::Write);
    let r = s.run(&[Op::Write(s.p("a.txt")), Op::Truncate(s.p("a.txt"))]);
    assert_eq!(r, vec![0, 0]);
}

#[test]
fn subtree_grant_covers_deep_file_and_nothing_outside_it() {
    let mut s = Setup::new("subtree");
    write_file(&s.p("proj/src/a/b/c/d/e/f/deep.rs"), "fn main() {}");
    write_file(&s.p("proj/README"), "readme");
    write_file(&s.p("other/notes.txt"), "notes");
    s.grant("proj", Scope::Subtree, Access::Read);
    let r = s.run(&[
        Op::Read(s.p("proj/src/a/b/c/d/e/f/deep.rs")),
        Op::Read(s.p("proj/README")),
        Op::Read(s.p("other/notes.txt")),
        Op::List(s.p("proj/src")),
        Op::Write(s.p("proj/README")),
        Op::Read(s.p("proj/../other/notes.txt")),
    ]);
    assert_eq!(r, vec![0, 0, EACCES, EACCES, EACCES, EACCES]);
    s.grant("proj", Scope::Subtree, Access::List);
    assert_eq!(s.run(&[Op::List(s.p("proj/src")), Op::List(s.root.clone())]), vec![0, EACCES]);
}

#[test]
fn create_needs_create_grant_on_parent_and_creator_can_use_the_new_file() {
    let mut s = Setup::new("create");
    std::fs::create_dir_all(s.p("out")).unwrap();
    let r = s.run(&[Op::Create(s.p("out/new.txt")), Op::Mkdir(s.p("out/sub")), Op::Create(s.p("top.txt"))]);
    assert_eq!(r, vec![EACCES, EACCES, EACCES]);
    assert!(!s.p("out/new.txt").exists());
    // The miss names the new entry and its parent directory.
    let rt = runtime();
    let mut misses = rt.block_on(async { s.te.get().events() }).expect("events");
    let first = misses.try_next().expect("a miss for the create").expect("decodes").miss().expect("a file miss");
    assert_eq!(first.hook, Hook::InodeCreate);
    assert_eq!(first.access, vec![Access::Create]);
    assert_eq!(first.relative_path, PathBuf::from("out/new.txt"));
    assert_eq!(first.ino, 0, "the new object has no inode yet");
    let out = id(&s.p("out"));
    assert_eq!((first.parent_dev, first.parent_ino), (out.dev, out.ino));
    let second = misses.try_next().expect("a miss for the mkdir").expect("decodes").miss().expect("a file miss");
    assert_eq!((second.hook, second.relative_path.clone()), (Hook::InodeMkdir, PathBuf::from("out/sub")));
    s.grant("out", Scope::Exact, Access::Create);
    let r = s.run(&[
        Op::Create(s.p("out/new.txt")),
        Op::Read(s.p("out/new.txt")),
        Op::Write(s.p("out/new.txt")),
        Op::Mkdir(s.p("out/sub")),
        Op::Create(s.p("out/sub/inner.txt")),
        Op::Create(s.p("top.txt")),
    ]);
    // An exact create grant covers direct children only; in a directory the session made
    // itself it may make, and use what it made.
    assert_eq!(r, vec![0, 0, 0, 0, 0, EACCES]);
    let created = id(&s.p("out/new.txt"));
    let bits = s.te.get().granted_bits(s.cg.id, created, Scope::Exact).unwrap();
    assert_ne!(bits & pincer_common::ACCESS_CREATED_BY_SESSION, 0, "creation recorded");
    let sub = id(&s.p("out/sub"));
    let made = s.te.get().granted_bits(s.cg.id, sub, Scope::Exact).unwrap();
    assert_ne!(made & pincer_common::ACCESS_CREATED_BY_SESSION, 0, "the new directory's exact grant recorded");
    assert_eq!(s.te.get().granted_bits(s.cg.id, sub, Scope::Subtree).unwrap(), 0, "on the directory, not beneath it");
    assert_eq!(s.run(&[Op::Read(s.p("out/sub/inner.txt")), Op::Unlink(s.p("out/sub/inner.txt")), Op::Rmdir(s.p("out/sub"))]), vec![0, 0, 0]);
    // Another session gets nothing from it.
    let other = TestCgroup::new("create-other");
    s.te.get().register_session(other.id).unwrap();
    assert_eq!(run_in(&other, &[Op::Read(s.p("out/new.txt"))]), vec![EACCES]);
}

#[test]
fn unlink_rmdir_and_rename_need_their_grants() {
    let mut s = Setup::new("delete");
    write_file(&s.p("x.txt"), "x");
    std::fs::create_dir_all(s.p("empty")).unwrap();
    std::fs::create_dir_all(s.p("dest")).unwrap();
    let r = s.run(&[
        Op::Unlink(s.p("x.txt")),
        Op::Rmdir(s.p("empty")),
        Op::Rename(s.p("x.txt"), s.p("dest/y.txt")),
    ]);
    assert_eq!(r, vec![EACCES, EACCES, EACCES]);
    s.grant("x.txt", Scope::Exact, Access::Delete);
    // Delete on the old name alone is not enough: the new parent needs create.
    assert_eq!(s.run(&[Op::Rename(s.p("x.txt"), s.p("dest/y.txt"))]), vec![EACCES]);
    assert!(s.p("x.txt").exists());
    s.grant("dest", Scope::Exact, Access::Create);
    assert_eq!(s.run(&[Op::Rename(s.p("x.txt"), s.p("dest/y.txt"))]), vec![0]);
    // The grant follows the inode: the moved file can still be deleted.
    assert_eq!(s.run(&[Op::Unlink(s.p("dest/y.txt")), Op::Rmdir(s.p("empty"))]), vec![0, EACCES]);
    s.grant("empty", Scope::Exact, Access::Delete);
    assert_eq!(s.run(&[Op::Rmdir(s.p("empty"))]), vec![0]);
    assert!(!s.p("empty").exists());
    // Renaming over an existing file replaces its content, as an editor's save does:
    // it needs write on the file replaced (delete is not enough, nor needed).
    write_file(&s.p("dest/a"), "a");
    write_file(&s.p("dest/b"), "b");
    s.grant("dest/a", Scope::Exact, Access::Delete);
    assert_eq!(s.run(&[Op::Rename(s.p("dest/a"), s.p("dest/b"))]), vec![EACCES]);
    s.grant("dest/b", Scope::Exact, Access::Delete);
    assert_eq!(s.run(&[Op::Rename(s.p("dest/a"), s.p("dest/b"))]), vec![EACCES]);
    s.grant("dest/b", Scope::Exact, Access::Write);
    assert_eq!(s.run(&[Op::Rename(s.p("dest/a"), s.p("dest/b"))]), vec![0]);
    assert_eq!(std::fs::read_to_string(s.p("dest/b")).unwrap(), "a");
    // A directory renamed over an empty one removes it: that needs delete.
    std::fs::create_dir_all(s.p("dest/d1")).unwrap();
    std::fs::create_dir_all(s.p("dest/d2")).unwrap();
    s.grant("dest/d1", Scope::Exact, Access::Delete);
    s.grant("dest/d2", Scope::Exact, Access::Write);
    assert_eq!(s.run(&[Op::Rename(s.p("dest/d1"), s.p("dest/d2"))]), vec![EACCES]);
    s.grant("dest/d2", Scope::Exact, Access::Delete);
    assert_eq!(s.run(&[Op::Rename(s.p("dest/d1"), s.p("dest/d2"))]), vec![0]);
}

#[test]
fn hard_link_to_ungranted_file_cannot_be_made_and_existing_link_stays_denied() {
    let mut s = Setup::new("link");
    write_file(&s.p("secret.key"), "KEY");
    write_file(&s.p("work/ok.txt"), "ok");
    s.grant("work", Scope::Subtree, Access::Read);
    s.grant("work", Scope::Subtree, Access::Create);
    let r = s.run(&[Op::Link(s.p("secret.key"), s.p("work/copy")), Op::Read(s.p("work/ok.txt"))]);
    assert_eq!(r, vec![EACCES, 0]);
    assert!(!s.p("work/copy").exists());
    // A link made by someone else inside the granted subtree still reaches the
    // secret's inode, which has no grant.
    std::fs::hard_link(s.p("secret.key"), s.p("work/planted")).unwrap();
    assert_eq!(s.run(&[Op::Read(s.p("work/planted")), Op::Read(s.p("secret.key"))]), vec![EACCES, EACCES]);
    // A link to a file the session may read is allowed.
    assert_eq!(s.run(&[Op::Link(s.p("work/ok.txt"), s.p("work/ok2.txt"))]), vec![0]);
}

#[test]
fn symlink_in_root_pointing_at_ungranted_file_is_denied() {
    let mut s = Setup::new("symlink");
    write_file(&s.p("secret.key"), "KEY");
    std::fs::create_dir_all(s.p("work")).unwrap();
    s.grant("work", Scope::Subtree, Access::Read);
    s.grant("work", Scope::Subtree, Access::Create);
    std::os::unix::fs::symlink(s.p("secret.key"), s.p("work/planted")).unwrap();
    let r = s.run(&[
        Op::Read(s.p("work/planted")),
        Op::Symlink(s.p("secret.key"), s.p("work/own")),
        Op::Read(s.p("work/own")),
        Op::Symlink(PathBuf::from("../secret.key"), s.p("work/rel")),
        Op::Read(s.p("work/rel")),
    ]);
    assert_eq!(r, vec![EACCES, 0, EACCES, 0, EACCES]);
}

#[test]
fn other_cgroups_and_files_outside_roots_are_untouched() {
    let mut s = Setup::new("scope");
    write_file(&s.p("secret.txt"), "s");
    let outside = fresh_dir("outside");
    write_file(&outside.join("free.txt"), "free");
    let r = s.run(&[
        Op::Read(outside.join("free.txt")),
        Op::Write(outside.join("free.txt")),
        Op::Create(outside.join("new.txt")),
        Op::Unlink(outside.join("new.txt")),
        Op::Read(PathBuf::from("/proc/self/status")),
        Op::Read(s.p("secret.txt")),
    ]);
    assert_eq!(r, vec![0, 0, 0, 0, 0, EACCES]);
    let ungated = TestCgroup::new("ungated");
    let r = run_in(&ungated, &[Op::Read(s.p("secret.txt")), Op::Write(s.p("secret.txt")), Op::Create(s.p("n"))]);
    assert_eq!(r, vec![0, 0, 0]);
    // A child cgroup of a session is gated too.
    let child = s.cg.path.join("child");
    std::fs::create_dir(&child).unwrap();
    assert_eq!(run_as(Some(&child), None, &[Op::Read(s.p("secret.txt"))]), vec![EACCES]);
    let _ = std::fs::remove_dir(&child);
    let _ = s.te.get();
}

#[test]
fn revocation_takes_effect_on_the_next_open() {
    let mut s = Setup::new("revoke");
    write_file(&s.p("a.txt"), "a");
    write_file(&s.p("dir/b.txt"), "b");
    s.grant("a.txt", Scope::Exact, Access::Read);
    s.grant("a.txt", Scope::Exact, Access::Write);
    s.grant("dir", Scope::Subtree, Access::Read);
    assert_eq!(s.run(&[Op::Read(s.p("a.txt")), Op::Read(s.p("dir/b.txt"))]), vec![0, 0]);
    let (session, a) = (s.cg.id, id(&s.p("a.txt")));
    s.te.get().revoke(session, a, Scope::Exact, Access::Read).unwrap();
    assert_eq!(s.run(&[Op::Read(s.p("a.txt")), Op::Write(s.p("a.txt"))]), vec![EACCES, 0]);
    let removed = s.te.get().revoke_session(session, true).unwrap();
    assert_eq!(removed, 2);
    assert_eq!(s.run(&[Op::Write(s.p("a.txt")), Op::Read(s.p("dir/b.txt"))]), vec![EACCES, EACCES]);
}

const LOADER_PIN_ENV: &str = "PINCER_TEST_LOADER_PIN";
const LOADER_READY_ENV: &str = "PINCER_TEST_LOADER_READY";

/// Not a test on its own: the loader process of
/// `killing_the_loader_keeps_enforcement_and_a_new_loader_reattaches`.
#[test]
fn loader_process() {
    let (Ok(pin), Ok(ready)) = (std::env::var(LOADER_PIN_ENV), std::env::var(LOADER_READY_ENV)) else { return };
    let config = EnforcerConfig { pin_dir: PathBuf::from(pin), ..EnforcerConfig::default() };
    let mut enforcer = Enforcer::attach_or_reuse(&config).unwrap_or_else(|e| panic!("{}", error_chain(&e)));
    let args: Vec<String> = std::fs::read_to_string(&ready).unwrap().split_whitespace().map(String::from).collect();
    let session: u64 = args[0].parse().unwrap();
    enforcer.register_session(session).unwrap();
    enforcer.add_root(Path::new(&args[1])).unwrap();
    std::fs::write(&ready, "ready").unwrap();
    loop {
        std::thread::park();
    }
}

#[test]
fn killing_the_loader_keeps_enforcement_and_a_new_loader_reattaches() {
    let cg = TestCgroup::new("loader");
    let root = fresh_dir("loader");
    write_file(&root.join("f.txt"), "f");
    let pin = PathBuf::from("/sys/fs/bpf").join(format!("pincer-loader-{}", std::process::id()));
    let ready = fresh_dir("loader-ready").join("ready");
    std::fs::write(&ready, format!("{} {}", cg.id, root.display())).unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "loader_process", "--nocapture", "--test-threads=1"])
        .env(LOADER_PIN_ENV, &pin)
        .env(LOADER_READY_ENV, &ready)
        .spawn()
        .expect("spawn loader");
    // Wait (bounded) for the loader to report it is ready.
    let mut ready_seen = false;
    for _ in 0..1200 {
        if std::fs::read_to_string(&ready).map(|s| s == "ready").unwrap_or(false) {
            ready_seen = true;
            break;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("loader exited early: {status}");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(ready_seen, "loader never became ready");
    child.kill().expect("SIGKILL loader");
    child.wait().unwrap();
    // The loader is gone; the pinned program still denies.
    assert_eq!(run_in(&cg, &[Op::Read(root.join("f.txt"))]), vec![EACCES]);
    assert!(Enforcer::pinned_complete(&pin));
    // A new loader re-attaches to the pinned maps and its grants take effect.
    let config = EnforcerConfig { pin_dir: pin.clone(), ..EnforcerConfig::default() };
    let mut enforcer = Enforcer::attach_or_reuse(&config).unwrap_or_else(|e| panic!("{}", error_chain(&e)));
    enforcer.grant(cg.id, id(&root.join("f.txt")), Scope::Exact, Access::Read).unwrap();
    assert_eq!(run_in(&cg, &[Op::Read(root.join("f.txt"))]), vec![0]);
    enforcer.unpin().unwrap();
    assert!(!pin.exists());
    // (Detaching after unpin is asynchronous on newer kernels, so it is not
    // asserted here.)
}

#[test]
fn full_ring_buffer_counts_its_drops() {
    let mut te = TestEnforcer::load_with_ring("drops", 4096);
    let cg = TestCgroup::new("drops");
    let root = fresh_dir("drops");
    write_file(&root.join("f"), "f");
    te.get().register_session(cg.id).unwrap();
    te.get().add_root(&root).unwrap();
    let rt = runtime();
    let mut misses = rt.block_on(async { te.get().events() }).unwrap();
    let before = te.get().drops().unwrap();
    const N: usize = 10;
    let ops: Vec<Op> = (0..N).map(|_| Op::Read(root.join("f"))).collect();
    assert_eq!(run_in(&cg, &ops), vec![EACCES; N]);
    let mut received = 0;
    while let Some(m) = misses.try_next() {
        m.unwrap();
        received += 1;
    }
    let dropped = te.get().drops().unwrap() - before;
    assert!(received >= 1, "some misses fit in the buffer");
    assert!(dropped >= 1, "a 4 KiB buffer cannot hold {N} misses");
    assert_eq!(received as u64 + dropped, N as u64, "every miss is either delivered or counted");
}

#[test]
fn exec_counts_as_read() {
    let mut s = Setup::new("exec");
    std::fs::create_dir_all(s.p("bin")).unwrap();
    let program = s.p("bin/tool");
    std::fs::copy(std::env::current_exe().unwrap(), &program).unwrap();
    // Outside the session the copy runs.
    assert_eq!(run_as(None, None, &[Op::Exec(program.clone())]), vec![0]);
    assert_eq!(s.run(&[Op::Exec(program.clone())]), vec![EACCES]);
    s.grant("bin/tool", Scope::Exact, Access::Read);
    assert_eq!(s.run(&[Op::Exec(program)]), vec![0]);
}

#[test]
fn an_entry_left_behind_fails_the_next_test_naming_its_map() {
    let mut te = TestEnforcer::shared();
    let cg = TestCgroup::new("leftover");
    let root = fresh_dir("leftover");
    te.get().register_session(cg.id).unwrap();
    te.get().add_root(&root).unwrap();
    // As a test killed before it cleaned up: its entries stay in the shared program.
    std::mem::forget(te);
    let Err(refused) = std::panic::catch_unwind(TestEnforcer::shared) else { panic!("the next test must not start on leftovers") };
    let message = refused.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.contains("pincer_sessions: 1") && message.contains("pincer_roots: 1"), "{message}");
    clear_policy(Path::new(SHARED_PIN_DIR));
    assert!(policy_entries(Path::new(SHARED_PIN_DIR)).iter().all(|(_, n)| *n == 0));
    drop(TestEnforcer::shared());
}
