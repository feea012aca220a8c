//! A fleet on one PostgreSQL database (a real server, see `common/pg.rs`): daemons on the
//! host with the shipped enforcer over maps in memory and real sockets, each its own "host"
//! (own state folder, socket, audit spool and workspace copy), sharing the trusted state
//! and the audit.

use pincer::daemon::audit::{read_entries, AuditEntry, AuditLog, Event};
use pincer::daemon::config::{Config, StoreBackend, StoreConfig};
use pincer::daemon::protocol::{ApprovalScope, RequestOutcome};
use pincer::daemon::{Call, Reply};
use pincer::store::{AuditQuery, AuditRow, PgSettings, Store, UserApproval, UserPolicy};
use pincer::Access;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use crate::common;
use common::host::{approval_of, eventually, granted, Host};
use common::pg::Cluster;
use common::{config_in, OUTSIDE, TODO_PROMPT};

/// One cluster for the whole test binary (each test has its own database in it), stopped
/// when the binary exits (a `static` is never dropped).
fn cluster() -> &'static Cluster {
    static C: OnceLock<Cluster> = OnceLock::new();
    extern "C" fn stop_at_exit() {
        if let Some(c) = C.get() {
            c.stop();
        }
    }
    C.get_or_init(|| {
        let c = Cluster::start();
        // SAFETY: atexit(3) with a function that takes no locks the exiting thread may hold.
        unsafe { libc::atexit(stop_at_exit) };
        c
    })
}

fn fleet(config: &mut Config, db: &PgSettings, host: &str) {
    config.escalation.after_denials = 1;
    config.escalation.timeout_secs = 2;
    config.store = StoreConfig {
        backend: StoreBackend::Postgres,
        url: db.url.clone(),
        tls: db.tls,
        ca_file: None,
        password_file: db.password_file.clone(),
        host: host.into(),
        ..Default::default()
    };
    // The tests' user is root on every host: the same person, so the same identity.
    config.store.users.insert("root".into(), "root".into());
}

fn fleet_config(dir: &Path, db: &PgSettings, host: &str) -> Config {
    let mut config = config_in(dir);
    fleet(&mut config, db, host);
    config
}

/// One daemon of the fleet: a host of its own (own state folder, socket, audit spool and
/// workspace copy) on the database `db`.
async fn host(db: &PgSettings, name: &str) -> Host {
    host_with(db, name, |_| {}).await
}

/// As [`host`], its configuration changed by `change`.
async fn host_with(db: &PgSettings, name: &str, change: impl FnOnce(&mut Config)) -> Host {
    Host::new(|c| {
        fleet(c, db, name);
        change(c);
    })
    .await
}

/// A file whose write the persona's policy p13 asks the user about: a question at once.
const ASKS: &str = "dotfiles/gitconfig";

/// A prompt of the same task naming `rel`'s file (an approval licenses its resource for a
/// like task whose prompt points at it).
fn like_prompt(rel: &str) -> String {
    let stem = Path::new(rel).file_stem().and_then(|s| s.to_str()).expect("a file name");
    format!("{TODO_PROMPT} Then look at {stem} again.")
}

fn open_store(db: &PgSettings) -> Store {
    Store::open_postgres(db.clone()).unwrap()
}

fn shared_audit(db: &PgSettings) -> Vec<AuditEntry> {
    let rows = open_store(db).read_audit(None, &AuditQuery::default()).unwrap();
    rows.iter().map(|(_, t)| serde_json::from_str(t).unwrap()).collect()
}

/// An `always` approval given on host A grants the same request in a like task on host B
/// (whose twin was built before and learns it by notification), and `policy remove` on B
/// takes it away on A as well.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_always_approval_on_one_host_grants_on_another_and_its_removal_is_seen_by_both() {
    let tmp = tempfile::tempdir().unwrap();
    let db = cluster().database(tmp.path());
    let a = host(&db, "host-a").await;
    let b = host(&db, "host-b").await;
    a.import().await;
    // B's twin is built now, before the approval exists.
    let b0 = b.session(TODO_PROMPT).await;
    let s1 = a.session(TODO_PROMPT).await;
    let rel = a.denied_on_its_own(&s1).await;
    let r = a.approve_waiting(&s1, rel, Access::Write, ApprovalScope::Always).await;
    assert!(granted(&r), "{r:?}");
    a.end(&s1).await;
    let id = approval_of(&b.standing().await, rel, Access::Write).expect("B lists the approval given on A");
    // B's next decision uses it.
    eventually("B granting with A's approval", || async {
        let s = b.session(&like_prompt(rel)).await;
        let r = b.request(&s, rel, Access::Write).await;
        b.end(&s).await;
        granted(&r).then_some(())
    })
    .await;
    assert!(b.maps.grant_count(b0.cgroup_id) == 0, "B's earlier session got nothing from it");
    // Removed on B: A's next decision goes without it.
    assert!(matches!(b.call(Call::RemoveRule { id }).await, Reply::Ok { .. }));
    assert_eq!(approval_of(&a.standing().await, rel, Access::Write), None);
    eventually("A denying after the removal on B", || async {
        let s = a.session(&like_prompt(rel)).await;
        let r = a.request(&s, rel, Access::Write).await;
        a.end(&s).await;
        (!granted(&r)).then_some(())
    })
    .await;
    // One audit: both hosts' entries are in the shared audit, each with its host.
    let all = eventually("both hosts' entries shipped", || async {
        let all = shared_audit(&db);
        let hosts: std::collections::BTreeSet<_> = all.iter().filter_map(|e| e.host.clone()).collect();
        (hosts.len() == 2 && all.iter().any(|e| e.event == Event::RuleRemoved)).then_some(all)
    })
    .await;
    assert!(all.iter().any(|e| e.event == Event::Answer && e.host.as_deref() == Some("host-a")));
    // `pincer log --host host-b` shows B's entries only.
    match b.call(Call::Log { session: None, follow: false, host: Some("host-b".into()) }).await {
        Reply::Entry { entry } => assert_eq!(entry.host.as_deref(), Some("host-b")),
        other => panic!("{other:?}"),
    }
}

/// Stop the database mid-session: decisions deny (saying why) and the audit entries stay
/// in the host's spool; start it again: decisions go on, and every spooled entry is in the
/// shared audit exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_database_stopped_decisions_deny_and_the_spool_is_shipped_once_when_it_returns() {
    // A cluster of its own: this test stops its server.
    let cl = Cluster::start();
    let tmp = tempfile::tempdir().unwrap();
    let db = cl.database(tmp.path());
    let a = host(&db, "host-a").await;
    a.import().await;
    let s = a.session(TODO_PROMPT).await;
    let todo = "notes/todo.md";
    assert!(granted(&a.request(&s, todo, Access::Read).await), "the task's file is granted while the database is up");
    cl.stop_server();
    // A success vouches for the connection this long (the bound on noticing).
    tokio::time::sleep(pincer::store::pg::CHECK_EVERY).await;
    let r = a.request(&s, "notes/standup.md", Access::Read).await;
    match &r {
        Reply::Decision { granted: false, reason, .. } => assert!(reason.contains("trusted store cannot be reached"), "{reason}"),
        other => panic!("a decision without the database denies: {other:?}"),
    }
    let spooled = a.audit().len();
    cl.start_server();
    // The same session goes on after the database is back.
    let r = eventually("decisions after the database returned", || async {
        let r = a.request(&s, todo, Access::Read).await;
        granted(&r).then_some(r)
    })
    .await;
    assert!(granted(&r));
    let local = a.audit();
    assert!(local.len() > spooled);
    let shipped = eventually("the spool shipped", || async {
        let all = shared_audit(&db);
        (all.len() >= local.len()).then_some(all)
    })
    .await;
    let ids: std::collections::BTreeSet<_> = shipped.iter().map(|e| e.id.clone()).collect();
    assert_eq!(ids.len(), shipped.len(), "no entry doubled");
    for e in &local {
        assert!(ids.contains(&e.id), "entry {e:?} of the spool is in the shared audit");
    }
    assert_eq!(shipped.len(), local.len(), "nothing but the spool's entries");
    assert!(shipped.iter().any(|e| e.detail.as_deref().is_some_and(|d| d.contains("trusted store cannot be reached"))), "the denial while away is audited");
}

/// Child half of [`a_daemon_killed_mid_write_loses_no_audit_entry`]: appends entries to the
/// spool named by `PINCER_SPOOL_CHILD` until killed, printing each id once it is written.
#[test]
fn spool_child() {
    let Some(path) = std::env::var_os("PINCER_SPOOL_CHILD") else { return };
    let log = AuditLog::open(Path::new(&path)).unwrap();
    let db: PgSettings = serde_json::from_str(&std::env::var("PINCER_SPOOL_DB").unwrap()).unwrap();
    log.spool_for(pincer::store::StoreSpec::Postgres(db), pincer::daemon::users::Identities::fleet("host-k".into(), Default::default())).unwrap();
    use std::io::Write;
    let mut out = std::io::stdout();
    for i in 0.. {
        let mut e = AuditEntry::new(Event::Decision);
        e.detail = Some(format!("entry {i}"));
        log.append(&e).unwrap();
        writeln!(out, "{}", e.id).unwrap();
        out.flush().unwrap();
    }
}

/// A process writing the spool (and shipping it) is killed with SIGKILL mid-stream: every
/// entry whose append returned is in the shared audit once the spool is opened again, and
/// none twice.
#[test]
fn a_daemon_killed_mid_write_loses_no_audit_entry() {
    let tmp = tempfile::tempdir().unwrap();
    let db = cluster().database(tmp.path());
    let spool = tmp.path().join("audit.jsonl");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "fleet::spool_child", "--nocapture", "--test-threads=1"])
        .env("PINCER_SPOOL_CHILD", &spool)
        .env("PINCER_SPOOL_DB", serde_json::to_string(&db).unwrap())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut acked = Vec::new();
    {
        use std::io::BufRead;
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        while acked.len() < 300 {
            let l = lines.next().expect("the child writes").unwrap();
            if l.len() == 32 {
                acked.push(l);
            }
        }
        // SIGKILL, while it keeps writing.
        child.kill().unwrap();
        child.wait().unwrap();
        acked.extend(lines.map_while(Result::ok).filter(|l| l.len() == 32));
    }
    // The spool opened again (as a restarted daemon does) ships the rest.
    let log = AuditLog::open(&spool).unwrap();
    log.spool_for(pincer::store::StoreSpec::Postgres(db.clone()), pincer::daemon::users::Identities::fleet("host-k".into(), Default::default())).unwrap();
    let written = read_entries(&spool).unwrap().len();
    let store = open_store(&db);
    let mut rows = Vec::new();
    for _ in 0..200 {
        rows = store.read_audit(None, &AuditQuery::default()).unwrap();
        if rows.len() >= written {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let ids: std::collections::BTreeSet<String> = rows.iter().map(|(_, t)| serde_json::from_str::<AuditEntry>(t).unwrap().id).collect();
    assert_eq!(ids.len(), rows.len(), "no entry doubled");
    assert_eq!(rows.len(), written, "every complete line of the spool is shipped");
    for id in &acked {
        assert!(ids.contains(id), "entry {id}, acknowledged before the kill, is in the shared audit");
    }
}

/// Row-level security: read as one user's role, the database returns none of another
/// user's approvals, policies or audit rows, whatever the query asks for.
#[test]
fn one_user_cannot_read_anothers_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let db = cluster().database(tmp.path());
    let st = open_store(&db);
    for user in ["ann", "bob"] {
        st.add_approval(
            user,
            1,
            &UserApproval { session: format!("s-{user}"), path_glob: "docs/a.md".into(), access: Access::Read, permission: pincer::store::Permission::Allow },
        )
        .unwrap();
        st.add_policy(user, &UserPolicy { id: format!("p-{user}"), text: "Docs are fine.".into(), rules: vec![] }).unwrap();
        let row = AuditRow {
            id: format!("id-{user}"),
            time_ms: 1,
            host: "h".into(),
            session: Some(format!("s-{user}")),
            user: Some(user.into()),
            event: "decision".into(),
            entry: "{}".into(),
        };
        st.insert_audit(&[row]).unwrap();
    }
    let seen = st
        .as_user("ann", |tx| {
            let q = r#"SELECT "user" FROM audit UNION ALL SELECT "user" FROM policy UNION ALL SELECT "user" FROM task
                       UNION ALL SELECT t."user" FROM approval a JOIN task t ON t.id = a.task"#;
            Ok(tx.query(q, &[])?.iter().map(|r| r.get::<_, String>(0)).collect::<Vec<_>>())
        })
        .unwrap();
    assert_eq!(seen.len(), 4, "ann sees her own four rows: {seen:?}");
    assert!(seen.iter().all(|u| u == "ann"), "ann sees no row of bob's: {seen:?}");
    // The approvals table without the join, by id: bob's row stays invisible.
    let n: i64 = st.as_user("ann", |tx| Ok(tx.query_one("SELECT COUNT(*) FROM approval", &[])?.get(0))).unwrap();
    assert_eq!(n, 1);
    let rows = st.read_audit(Some("bob"), &AuditQuery::default()).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(st.read_audit(None, &AuditQuery::default()).unwrap().len(), 2, "root (the daemon's own role) reads every row");
    // Writing as a user's role is refused: only the twin writes trusted state.
    let e = st.as_user("ann", |tx| tx.execute(r#"INSERT INTO policy ("user", id, text, rules) VALUES ('ann', 'x', 'y', '[]')"#, &[]));
    assert!(e.is_err(), "a user's role cannot write trusted state");
}

/// `pincer store export`/`import`: a user's state moves from SQLite to PostgreSQL whole,
/// and an import over existing state is refused.
#[test]
fn a_users_state_moves_between_backends() {
    let tmp = tempfile::tempdir().unwrap();
    let db = cluster().database(tmp.path());
    let lite = Store::open(tmp.path().join("state.db")).unwrap();
    let persona = Path::new(common::PERSONA);
    lite.import_persona("ann", persona.join("history.jsonl"), persona.join("policies.jsonl")).unwrap();
    let before = lite.load_state("ann").unwrap();
    let pg = open_store(&db);
    pg.import_state("ann", &before).unwrap();
    assert_eq!(pg.load_state("ann").unwrap(), before);
    let rules = |st: &Store| st.standing("ann").unwrap().into_iter().map(|r| r.rule).collect::<Vec<_>>();
    assert_eq!(rules(&pg), rules(&lite));
    let e = pg.import_state("ann", &before).unwrap_err().to_string();
    assert!(e.contains("already has trusted state"), "{e}");
    assert_eq!(pg.schema_version().unwrap(), pg.known_version());
}

/// `pincer store export --sqlite FILE` and `pincer store import` (the CLI) move the user's
/// workspace snapshot with the state.
#[test]
fn the_store_cli_moves_a_users_state_and_workspace_snapshot_into_the_fleets_database() {
    let tmp = tempfile::tempdir().unwrap();
    let db = cluster().database(tmp.path());
    let lite_path = tmp.path().join("state.db");
    let lite = Store::open(&lite_path).unwrap();
    let persona = Path::new(common::PERSONA);
    lite.import_persona("ann", persona.join("history.jsonl"), persona.join("policies.jsonl")).unwrap();
    let snap = pincer::daemon::twins::WorkspaceSnapshot::take(&persona.join("workspace")).unwrap();
    lite.set_workspace("ann", &snap).unwrap();
    let out = tmp.path().join("ann.json");
    let pincer = |args: &[&std::ffi::OsStr]| {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_pincer")).args(args).output().unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(o.status.success(), "pincer {args:?}: {text}");
        text
    };
    let e = pincer(&["store".as_ref(), "export".as_ref(), "--sqlite".as_ref(), lite_path.as_os_str(), "--user".as_ref(), "ann".as_ref(), "--out".as_ref(), out.as_os_str()]);
    assert!(e.contains("workspace snapshot"), "{e}");
    let config = tmp.path().join("fleet.toml");
    let url = db.url.clone();
    let pw = db.password_file.clone().unwrap();
    std::fs::write(&config, format!("[store]\nbackend = \"postgres\"\nurl = \"{url}\"\ntls = \"disable\"\npassword_file = \"{}\"\n", pw.display())).unwrap();
    let i = pincer(&["store".as_ref(), "import".as_ref(), "--config".as_ref(), config.as_os_str(), "--user".as_ref(), "ann".as_ref(), out.as_os_str()]);
    assert!(i.contains("workspace snapshot"), "{i}");
    let pg = open_store(&db);
    assert_eq!(pg.load_state("ann").unwrap(), lite.load_state("ann").unwrap());
    assert_eq!(pg.workspace("ann").unwrap(), Some(snap));
}

/// The password file must be root-only; the error names the file and the fix.
#[test]
fn a_password_file_others_may_read_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let mut db = cluster().database(tmp.path());
    let pw = tmp.path().join("loose-password");
    std::fs::write(&pw, format!("{}\n", common::pg::PASSWORD)).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&pw, std::fs::Permissions::from_mode(0o644)).unwrap();
    db.password_file = Some(pw.clone());
    let e = format!("{:#}", anyhow::Error::from(Store::open_postgres(db).unwrap_err()));
    assert!(e.contains(&pw.display().to_string()) && e.contains("chmod 600"), "{e}");
}

/// Eight daemons on one database: an approval given on one is used by every other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_daemons_share_one_approval() {
    let tmp = tempfile::tempdir().unwrap();
    let db = cluster().database(tmp.path());
    let mut hosts = Vec::new();
    for i in 0..8 {
        hosts.push(host(&db, &format!("host-{i}")).await);
    }
    hosts[0].import().await;
    let s = hosts[0].session(TODO_PROMPT).await;
    let rel = hosts[0].denied_on_its_own(&s).await;
    assert!(granted(&hosts[0].approve_waiting(&s, rel, Access::Write, ApprovalScope::Always).await));
    hosts[0].end(&s).await;
    for h in &hosts[1..] {
        let s = h.session(&like_prompt(rel)).await;
        let r = h.request(&s, rel, Access::Write).await;
        assert!(granted(&r), "host {} grants with host-0's approval: {r:?}", h.config.store.host);
        h.end(&s).await;
    }
    for h in &mut hosts {
        h.shutdown().await;
    }
    let _ = &tmp;
}

/// `pincer doctor` on a fleet host: the database answers, its schema is this build's, the
/// daemon's role may create the per-user roles and is no superuser; a password file others
/// may read fails the check with its fix.
#[test]
fn doctor_checks_the_connection_the_schema_and_the_roles_rights() {
    use pincer::doctor::{store_checks, Status};
    let tmp = tempfile::tempdir().unwrap();
    let db = cluster().database(tmp.path());
    let config = fleet_config(tmp.path(), &db, "host-d");
    let fresh = store_checks(&config);
    let names: Vec<_> = fresh.iter().map(|c| (c.name, c.status)).collect();
    assert_eq!(names, [("store", Status::Ok), ("store schema", Status::Warn), ("store permissions", Status::Ok)], "{fresh:?}");
    assert_eq!(fresh[1].fix.as_deref(), Some("sudo pincer store migrate"));
    open_store(&db);
    assert!(store_checks(&config).iter().all(|c| c.status == Status::Ok), "{:?}", store_checks(&config));
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(db.password_file.as_ref().unwrap(), std::fs::Permissions::from_mode(0o640)).unwrap();
    let c = &store_checks(&config)[0];
    assert_eq!(c.status, Status::Fail);
    assert!(c.detail.contains("db-password") && c.detail.contains("group or others"), "{c:?}");
}

/// A question escalated on host A is listed on host B with the host that asked, approved
/// there (`pincer approve ID --host host-a`), and A's waiting worker gets the grant, in the
/// kernel too; the answer is A's to apply once: B cannot answer it again, neither host lists
/// it any more, and A's audit says where it was answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_asked_on_one_host_is_answered_on_another_and_the_waiting_worker_gets_the_grant() {
    let tmp = tempfile::tempdir().unwrap();
    let db = cluster().database(tmp.path());
    // Long enough for the answer to travel; the wait still ends in a denial without it.
    let a = host_with(&db, "host-a", |c| c.escalation.timeout_secs = 20).await;
    let b = host(&db, "host-b").await;
    a.import().await;
    let s = a.session(TODO_PROMPT).await;
    let rel = ASKS;
    std::fs::write(a.ws.join(rel), "plain text\n").unwrap();
    let mut worker = a.ask_and_wait(&s, rel, Access::Write).await;
    let q = eventually("host-a's question listed on host-b", || async {
        b.pending().await.into_iter().find(|q| q.path == rel && q.host.as_deref() == Some("host-a"))
    })
    .await;
    assert_eq!(q.session, s.session);
    assert!(q.waiting, "{q:?}");
    assert!(!q.votes.is_empty(), "the votes that asked travel with it: {q:?}");
    // A lists its own question under its own name.
    assert!(a.pending().await.iter().any(|x| x.id == q.id && x.host.as_deref() == Some("host-a")));
    // B answers it for host-a.
    let answer = Call::Answer { question: q.id, approve: true, scope: ApprovalScope::Always, host: Some("host-a".into()) };
    match b.call(answer.clone()).await {
        Reply::Answered { applied: true, message } => assert!(message.contains("host-a acknowledged it"), "{message}"),
        other => panic!("answer on host-b: {other:?}"),
    }
    // A's worker gets the grant, and the kernel holds it.
    match worker.next().await.unwrap().unwrap() {
        Reply::Decision { granted: true, outcome: RequestOutcome::UserApproved, question, .. } => assert_eq!(question, Some(q.id)),
        other => panic!("the worker on host-a: {other:?}"),
    }
    let target = pincer::kernel::ObjectId::of_path(&a.ws.join(rel)).unwrap();
    assert!(a.maps.granted_bits(s.cgroup_id, target, pincer::kernel::Scope::Exact) & pincer::kernel::access_bit(Access::Write) != 0, "host-a's kernel grant");
    // Answered once: not again from B, and listed nowhere.
    match b.call(answer).await {
        Reply::Error { message, .. } => assert!(message.contains("no open question") && message.contains("host-a"), "{message}"),
        other => panic!("a second answer: {other:?}"),
    }
    assert!(b.pending().await.is_empty());
    assert!(a.pending().await.is_empty());
    // The `always` approval is the user's everywhere, and A's audit says where it came from.
    assert!(approval_of(&b.standing().await, rel, Access::Write).is_some());
    let answered = a.audit().into_iter().find(|e| e.event == Event::Answer && e.question == Some(q.id)).expect("host-a audits the answer");
    assert_eq!(answered.detail.as_deref(), Some("answered on host host-b"));
    assert_eq!(answered.outcome, Some(RequestOutcome::UserApproved));
    assert!(b.audit().iter().any(|e| e.event == Event::Answer && e.detail.as_deref().is_some_and(|d| d.contains("of host host-a"))), "host-b audits the answer it gave");
}

/// Fail closed: with the database stopped after host A asked, host B cannot answer (the
/// error says why) and A's waiting worker is denied when its wait runs out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_database_an_answer_from_another_host_is_refused_and_the_worker_is_denied() {
    let cl = Cluster::start();
    let tmp = tempfile::tempdir().unwrap();
    let db = cl.database(tmp.path());
    let a = host(&db, "host-a").await;
    let b = host(&db, "host-b").await;
    a.import().await;
    let s = a.session(TODO_PROMPT).await;
    let rel = ASKS;
    std::fs::write(a.ws.join(rel), "plain text\n").unwrap();
    let mut worker = a.ask_and_wait(&s, rel, Access::Write).await;
    let q = eventually("host-a's question listed on host-b", || async { b.pending().await.into_iter().find(|q| q.path == rel) }).await;
    cl.stop_server();
    tokio::time::sleep(pincer::store::pg::CHECK_EVERY).await;
    match b.call(Call::Answer { question: q.id, approve: true, scope: ApprovalScope::Always, host: Some("host-a".into()) }).await {
        Reply::Error { message, .. } => assert!(message.contains("answer a question") || message.contains("PostgreSQL"), "{message}"),
        other => panic!("an answer without the database: {other:?}"),
    }
    match worker.next().await.unwrap().unwrap() {
        Reply::Decision { granted: false, outcome: RequestOutcome::Timeout, .. } => {}
        other => panic!("the worker on host-a: {other:?}"),
    }
    let target = pincer::kernel::ObjectId::of_path(&a.ws.join(rel)).unwrap();
    assert_eq!(a.maps.granted_bits(s.cgroup_id, target, pincer::kernel::Scope::Exact) & pincer::kernel::access_bit(Access::Write), 0, "nothing granted");
    cl.start_server();
}

/// The question rows: listed for their user only, answered once and by their user only,
/// acknowledged once by the asking host; an answer on the asking host after another host's
/// is refused; a host starting again closes its open rows and never reuses their ids.
#[test]
fn a_shared_question_is_answered_once_by_its_user_and_acknowledged_once() {
    let tmp = tempfile::tempdir().unwrap();
    let db = cluster().database(tmp.path());
    let st = open_store(&db);
    let q = pincer::store::SharedQuestion {
        host: "host-a".into(),
        id: 7,
        user: "ann".into(),
        session: "s-1".into(),
        path: "notes/todo.md".into(),
        abs: "/ws/notes/todo.md".into(),
        access: Access::Write,
        reason: "asks".into(),
        votes: "[]".into(),
        waiting: true,
    };
    assert!(st.publish_question(&q).unwrap());
    assert!(!st.publish_question(&q).unwrap(), "a row of the same id is never overwritten");
    assert_eq!(st.open_questions(Some("ann")).unwrap(), vec![q.clone()]);
    assert!(st.open_questions(Some("bob")).unwrap().is_empty(), "bob does not see ann's question");
    assert_eq!(st.answer_question("host-a", 7, Some("bob"), true, "always", "host-b").unwrap(), None, "bob cannot answer it");
    assert_eq!(st.answer_question("host-a", 7, Some("ann"), true, "session", "host-b").unwrap().as_deref(), Some("s-1"));
    assert_eq!(st.answer_question("host-a", 7, None, false, "always", "host-c").unwrap(), None, "answered once");
    // The asking host's own answer now finds it answered elsewhere.
    assert!(!st.close_question("host-a", 7).unwrap());
    assert_eq!(st.question_state("host-a", 7).unwrap(), Some(pincer::store::QuestionState::Answered { by: "host-b".into() }));
    // Applied by the asking host: acknowledged once, and the answering host reads what it did.
    let answered = st.answered_questions("host-a").unwrap();
    assert_eq!(answered.len(), 1);
    assert_eq!((answered[0].question.clone(), answered[0].approve, answered[0].scope.as_str(), answered[0].by.as_str()), (q.clone(), true, "session", "host-b"));
    assert!(st.acknowledge_answer("host-a", 7, "approved (session), applied on host-a").unwrap());
    assert!(!st.acknowledge_answer("host-a", 7, "again").unwrap(), "acknowledged once");
    assert!(st.answered_questions("host-a").unwrap().is_empty());
    assert_eq!(
        st.question_state("host-a", 7).unwrap(),
        Some(pincer::store::QuestionState::Applied { by: "host-b".into(), what: "approved (session), applied on host-a".into() })
    );
    // Read as bob's role, row-level security shows none of ann's questions.
    let users = st.as_user("bob", |tx| Ok(tx.query("SELECT \"user\" FROM question", &[])?.len())).unwrap();
    assert_eq!(users, 0);
    // A daemon starting again closes its open questions and numbers new ones after its last.
    st.publish_question(&pincer::store::SharedQuestion { id: 9, ..q.clone() }).unwrap();
    assert_eq!(st.restart_questions("host-a").unwrap(), 9);
    assert_eq!(st.question_state("host-a", 9).unwrap(), Some(pincer::store::QuestionState::Closed));
    assert!(st.open_questions(None).unwrap().is_empty());
}

/// Workspace fingerprints are shared: a snapshot imported on host A (`pincer import
/// --workspace`) is in the shared store, and host B's twin, built before, learns it by
/// notification: a new note holding a copy of protected content, granted by B before, is
/// refused after, by the content's provenance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_snapshot_imported_on_one_host_fingerprints_protected_content_on_another() {
    let tmp = tempfile::tempdir().unwrap();
    let db = cluster().database(tmp.path());
    let a = host(&db, "host-a").await;
    let b = host(&db, "host-b").await;
    a.import().await;
    // Protected content (personal/ is denied by policy p04) copied into a new note (notes/
    // may be read, policy p14).
    let todo = "notes/review-copy.md";
    let copy = std::fs::read(b.ws.join("personal/performance-review-2024.md")).unwrap();
    std::fs::write(b.ws.join(todo), &copy).unwrap();
    let s = b.session(TODO_PROMPT).await;
    let r = b.request(&s, todo, Access::Read).await;
    assert!(granted(&r), "without fingerprints the note is granted: {r:?}");
    b.end(&s).await;
    // Host A takes the snapshot (its own copy of the workspace) into the shared store.
    a.as_caller(Path::new(OUTSIDE));
    let r = a.call(Call::Import { history: String::new(), policies: String::new(), uid: None, workspace: Some(a.ws.clone()) }).await;
    assert!(matches!(&r, Reply::Ok { message } if message.contains("snapshot")), "{r:?}");
    let snap = open_store(&db).workspace("root").unwrap().expect("the snapshot is in the shared store");
    assert!(snap.files.contains_key("personal/performance-review-2024.md"));
    eventually("host-b refusing the copy with host-a's fingerprints", || async {
        let s = b.session(TODO_PROMPT).await;
        let r = b.request(&s, todo, Access::Read).await;
        b.end(&s).await;
        (!granted(&r)).then_some(r)
    })
    .await;
    let why = b.audit().into_iter().rev().find(|e| e.event == Event::Decision && e.outcome == Some(RequestOutcome::Deny)).expect("the denial is audited");
    assert!(why.votes.iter().any(|v| v.reason.contains("overlaps protected content")), "refused by provenance: {why:?}");
}

/// Runs the `pincer` CLI built with these tests against `h`'s socket, as `user` (`None`:
/// root, the tests' user); returns its exit code and output.
fn cli_as(h: &Host, user: Option<&str>, args: &[&str]) -> (i32, String) {
    let mut c = match user {
        Some(u) => {
            let mut c = std::process::Command::new("runuser");
            c.args(["-u", u, "--", env!("CARGO_BIN_EXE_pincer")]);
            c
        }
        None => std::process::Command::new(env!("CARGO_BIN_EXE_pincer")),
    };
    let out = c.args(args).arg("--socket").arg(&h.config.socket).output().unwrap();
    (out.status.code().unwrap_or(-1), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// Runs the `pincer` CLI built with these tests against `h`'s socket; returns the command
/// line as typed (with the host's name as prompt) and its output, and checks it succeeded.
fn cli(h: &Host, args: &[&str]) -> (String, String) {
    let (code, text) = cli_as(h, None, args);
    assert_eq!(code, 0, "pincer {args:?} on {}: {text}", h.config.store.host);
    (format!("{}$ pincer {}", h.config.store.host, args.join(" ")), text)
}

/// The transcript of an approval given on one host that grants on another, made with the
/// `pincer` CLI: the worker on host-a waits, `pincer pending` on host-b lists host-a's
/// question, `pincer approve ID --host host-a` on host-b answers it, the worker gets the
/// grant, and `pincer log --host host-a` shows both ends. Written to the file named by
/// `PINCER_FLEET_TRANSCRIPT` if set (`cargo test --release -p pincer-user --test integration
/// fleet::transcript -- --nocapture` prints it too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transcript_of_an_approval_given_on_one_host_that_grants_on_another() {
    let tmp = tempfile::tempdir().unwrap();
    let db = cluster().database(tmp.path());
    let a = host_with(&db, "host-a", |c| c.escalation.timeout_secs = 30).await;
    let b = host(&db, "host-b").await;
    a.import().await;
    let s = a.session(TODO_PROMPT).await;
    let rel = ASKS;
    std::fs::write(a.ws.join(rel), "plain text\n").unwrap();
    let mut t = vec![format!("# host-a: session {} asks for write on {rel}; its worker waits", s.session)];
    let mut worker = a.ask_and_wait(&s, rel, Access::Write).await;
    let q = eventually("the question on host-b", || async { b.pending().await.into_iter().find(|q| q.path == rel) }).await;
    let bin = |h: &Host, args: &[&str]| {
        let (cmd, out) = cli(h, args);
        format!("{cmd}\n{}", out.trim_end())
    };
    let listed = bin(&b, &["pending", "--host", "host-a"]);
    assert!(listed.contains("host-a") && listed.contains(rel), "{listed}");
    t.push(listed);
    let id = q.id.to_string();
    let approved = bin(&b, &["approve", &id, "--host", "host-a"]);
    assert!(approved.contains(&format!("question {id} of host host-a approved")), "{approved}");
    assert!(approved.contains("host-a acknowledged it: approved (always), applied on host-a"), "the reply waits for host-a: {approved}");
    t.push(approved);
    let r = worker.next().await.unwrap().unwrap();
    assert!(granted(&r), "{r:?}");
    t.push(format!("# host-a: the waiting worker's reply\n{}", serde_json::to_string(&r).unwrap()));
    let empty = bin(&a, &["pending"]);
    assert!(empty.contains("no pending questions"), "{empty}");
    t.push(empty);
    // The shared audit has both ends once shipped.
    eventually("both answers in the shared audit", || async {
        let all = shared_audit(&db);
        (all.iter().filter(|e| e.event == Event::Answer).count() == 2).then_some(())
    })
    .await;
    let log = bin(&b, &["log", "--host", "host-a", "--session", &s.session]);
    assert!(log.contains("answered on host host-b"), "{log}");
    t.push(log);
    let log = bin(&b, &["log", "--host", "host-b"]);
    assert!(log.contains("of host host-a"), "{log}");
    t.push(log.lines().filter(|l| l.starts_with("host-") || l.contains("Answer")).collect::<Vec<_>>().join("\n"));
    let text = t.join("\n\n") + "\n";
    eprintln!("{text}");
    if let Some(p) = std::env::var_os("PINCER_FLEET_TRANSCRIPT") {
        std::fs::write(p, &text).unwrap();
    }
}

/// Whether `settings` connect, and every connection of the `pincer` role runs over TLS
/// (`pg_stat_ssl`, read as the superuser while the store is open).
fn over_tls(cl: &Cluster, settings: &PgSettings) -> bool {
    let _st = Store::open_postgres(settings.clone()).unwrap();
    let (tls, plain) = cl.pincer_connections();
    tls > 0 && plain == 0
}

/// The connection settings against a server that takes TLS only, with a certificate of a
/// CA made here: `tls = "verify-full"` with that CA's `ca_file` connects over TLS (and an
/// `sslmode=disable` in the URL does not turn it off); another CA, or the system's CA
/// certificates, are refused, as is a certificate for another name; `tls = "disable"` gets
/// no connection from a server that wants TLS.
#[test]
fn tls_checks_the_servers_certificate_and_name_and_a_wrong_ca_is_refused() {
    use common::pg::Ca;
    let tmp = tempfile::tempdir().unwrap();
    let ca = Ca::new(tmp.path(), "pincer-test-ca");
    let other = Ca::new(tmp.path(), "other-ca");
    let (cert, key) = ca.server("db", "DNS:localhost,IP:127.0.0.1");
    let cl = Cluster::start_tls(&cert, &key);
    let plain = cl.database(tmp.path());
    let e = format!("{:#}", anyhow::Error::from(Store::open_postgres(plain.clone()).unwrap_err()));
    assert!(e.contains("no pg_hba.conf entry") || e.contains("SSL"), "no TLS, no connection: {e}");
    let verified = PgSettings { tls: pincer::store::TlsMode::VerifyFull, ca_file: Some(ca.cert.clone()), ..plain.clone() };
    assert!(over_tls(&cl, &verified), "verify-full connects over TLS");
    // By name as well as by address.
    let by_name = PgSettings { url: verified.url.replace("host=127.0.0.1", "host=localhost"), ..verified.clone() };
    assert!(over_tls(&cl, &by_name));
    // The URL cannot turn TLS off.
    let downgrade = PgSettings { url: format!("{} sslmode=disable", verified.url), ..verified.clone() };
    assert!(over_tls(&cl, &downgrade), "sslmode=disable in the URL is overridden");
    // Another CA, or the system's CA certificates: refused.
    for ca_file in [Some(other.cert.clone()), None] {
        let wrong = PgSettings { ca_file: ca_file.clone(), ..verified.clone() };
        let e = format!("{:#}", anyhow::Error::from(Store::open_postgres(wrong).unwrap_err()));
        assert!(e.to_lowercase().contains("certificate") || e.contains("CA"), "ca_file {ca_file:?} is refused: {e}");
    }
    // A certificate of the right CA for another name: refused.
    drop(cl);
    let (cert, key) = ca.server("elsewhere", "DNS:db.example.org");
    let cl = Cluster::start_tls(&cert, &key);
    let db = cl.database(tmp.path());
    let wrong_name = PgSettings { tls: pincer::store::TlsMode::VerifyFull, ca_file: Some(ca.cert.clone()), ..db };
    let e = format!("{:#}", anyhow::Error::from(Store::open_postgres(wrong_name).unwrap_err()));
    assert!(e.to_lowercase().contains("certificate") || e.contains("name"), "a certificate for another name is refused: {e}");
}

/// A user's state loaded while another host writes new tasks is one snapshot: every task
/// read has its prompt, and the load never meets a prompt of a task it did not read (it
/// used to panic then, taking the daemon's actor with it).
#[test]
fn a_state_loaded_while_another_host_writes_is_one_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let db = cluster().database(tmp.path());
    let writer = open_store(&db);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let w = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let rec = pincer::store::HistoryRecord {
                    day: 1,
                    session: format!("h{n}"),
                    prompt: format!("task {n}"),
                    accesses: vec![pincer::store::AccessRecord { path: format!("notes/{n}.md"), access: Access::Read }],
                    approvals: vec![],
                };
                writer.add_history("ann", &rec).unwrap();
                n += 1;
            }
            n
        })
    };
    let reader = open_store(&db);
    for _ in 0..300 {
        let st = reader.load_state("ann").unwrap();
        for t in &st.tasks {
            assert_eq!(t.prompts.len(), 1, "task {} read with its prompt: {t:?}", t.session);
            assert_eq!(t.accesses.len(), 1, "task {} read with its access: {t:?}", t.session);
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(w.join().unwrap() > 0);
}

/// Host-a's session asks for the write `ASKS` and waits for the user; host-b lists the
/// question; then host-a shuts down (its worker gone). Returns host-a (stopped), host-b
/// (which answers in a second), the session and the question.
async fn asked_then_down(db: &PgSettings) -> (Host, Host, pincer::daemon::protocol::SessionInfo, pincer::daemon::protocol::QuestionInfo) {
    let mut a = host_with(db, "host-a", |c| c.escalation.timeout_secs = 30).await;
    let b = host_with(db, "host-b", |c| c.store.answer_wait_secs = 1).await;
    a.import().await;
    let s = a.session(TODO_PROMPT).await;
    let (worker, q) = asked_on(&a, &b, &s).await;
    a.shutdown().await;
    drop(worker);
    (a, b, s, q)
}

/// The write `ASKS` of session `s` on host `a` waits for the user; returns the waiting
/// worker and the question as host `b` lists it.
async fn asked_on(a: &Host, b: &Host, s: &pincer::daemon::protocol::SessionInfo) -> (pincer::daemon::client::Client, pincer::daemon::protocol::QuestionInfo) {
    std::fs::write(a.ws.join(ASKS), "plain text\n").unwrap();
    let worker = a.ask_and_wait(s, ASKS, Access::Write).await;
    let q = eventually("host-a's question listed on host-b", || async { b.pending().await.into_iter().find(|q| q.path == ASKS && q.host.as_deref() == Some("host-a")) }).await;
    (worker, q)
}

/// `pincer approve ID --host host-a` while host-a is down: the answer is recorded and the
/// reply says host-a has not applied it (exit code 3). When host-a starts again it applies
/// it to the session it resumed (the grant is in its kernel, the approval in the trusted
/// state) and acknowledges it; started once more, it applies nothing twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_given_while_the_asking_host_is_down_is_applied_once_when_it_is_back() {
    let tmp = tempfile::tempdir().unwrap();
    let db = cluster().database(tmp.path());
    let (mut a, b, s, q) = asked_then_down(&db).await;
    let id = q.id.to_string();
    let (code, out) = cli_as(&b, None, &["approve", &id, "--host", "host-a"]);
    assert_eq!(code, 3, "recorded but not applied: {out}");
    assert!(out.contains("host-a has NOT applied it yet"), "{out}");
    let st = open_store(&db);
    assert!(matches!(st.question_state("host-a", q.id).unwrap(), Some(pincer::store::QuestionState::Answered { .. })));
    // host-a starts again: the answer is applied to the resumed session and acknowledged.
    a.start();
    let what = eventually("host-a acknowledging the answer", || async {
        match st.question_state("host-a", q.id).unwrap() {
            Some(pincer::store::QuestionState::Applied { what, .. }) => Some(what),
            _ => None,
        }
    })
    .await;
    assert!(what.contains("applied on host-a after it started again"), "{what}");
    let target = pincer::kernel::ObjectId::of_path(&a.ws.join(ASKS)).unwrap();
    let write = pincer::kernel::access_bit(Access::Write);
    eventually("host-a's kernel grant", || async { (a.maps.granted_bits(s.cgroup_id, target, pincer::kernel::Scope::Exact) & write != 0).then_some(()) }).await;
    let approvals = |rules: &[pincer::daemon::protocol::StandingRule]| {
        rules.iter().filter(|r| matches!(&r.rule, pincer::daemon::protocol::Rule::Approval(x) if x.path_glob == ASKS && x.access == Access::Write)).count()
    };
    assert_eq!(approvals(&a.standing().await), 1, "the always approval is recorded");
    let applied = |h: &Host| h.audit().iter().filter(|e| e.event == Event::Answer && e.question == Some(q.id) && e.detail.as_deref() == Some("answered on host host-b")).count();
    assert_eq!(applied(&a), 1);
    // Started once more: nothing applied twice; the grant stays in the kernel.
    a.restart().await;
    assert_eq!(approvals(&a.standing().await), 1, "recorded once");
    assert!(a.maps.granted_bits(s.cgroup_id, target, pincer::kernel::Scope::Exact) & write != 0);
    assert_eq!(applied(&a), 1, "applied once");
    assert!(matches!(st.question_state("host-a", q.id).unwrap(), Some(pincer::store::QuestionState::Applied { what: w, .. }) if w == what));
}

/// An answer given while host-a is down to a question whose session did not survive
/// (its cgroup is gone when host-a starts again): acknowledged as expired, nothing granted
/// or recorded, and the reply of a later look says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_for_a_session_that_ended_while_the_host_was_down_is_acknowledged_as_expired() {
    let tmp = tempfile::tempdir().unwrap();
    let db = cluster().database(tmp.path());
    let (mut a, b, s, q) = asked_then_down(&db).await;
    assert!(matches!(b.call(Call::Answer { question: q.id, approve: true, scope: ApprovalScope::Always, host: Some("host-a".into()) }).await, Reply::Answered { applied: false, .. }));
    std::fs::remove_dir(&s.cgroup).unwrap();
    a.start();
    let st = open_store(&db);
    let what = eventually("host-a acknowledging the answer", || async {
        match st.question_state("host-a", q.id).unwrap() {
            Some(pincer::store::QuestionState::Applied { what, .. }) => Some(what),
            _ => None,
        }
    })
    .await;
    assert!(what.starts_with("expired:") && what.contains(&s.session) && what.contains("nothing granted or recorded"), "{what}");
    assert_eq!(approval_of(&a.standing().await, ASKS, Access::Write), None, "nothing recorded");
    assert!(a.audit().iter().any(|e| e.event == Event::Answer && e.question == Some(q.id) && e.detail.as_deref().is_some_and(|d| d.contains("expired"))), "the expiry is audited");
}

/// Users are their fleet identity, not their login name: `nobody` is mapped to
/// `team-ops` on host-a and host-b, and not on host-c, where the same login name is
/// someone else (`nobody@host-c`). On host-b nobody lists and may answer team-ops's
/// question of host-a; on host-c nobody neither lists nor answers it, and the database,
/// read as nobody@host-c's role, returns none of team-ops's rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_same_named_user_on_a_host_not_mapped_to_the_identity_cannot_read_or_answer_its_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let db = cluster().database(tmp.path());
    let ops = |c: &mut Config| {
        c.store.users.insert("nobody".into(), "team-ops".into());
    };
    let a = host_with(&db, "host-a", |c| {
        ops(c);
        c.escalation.timeout_secs = 30;
    })
    .await;
    let b = host_with(&db, "host-b", ops).await;
    let c = host(&db, "host-c").await;
    // nobody's CLI reaches every host's socket.
    for h in [&a, &b, &c] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(h.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    a.as_caller(Path::new(OUTSIDE));
    let (history, policies) = common::persona_state();
    assert!(matches!(a.call(Call::Import { history, policies, uid: Some(65534), workspace: None }).await, Reply::Ok { .. }));
    let s = match a.call(Call::CreateSession { owner_uid: 65534, roots: vec![a.ws.clone()], prompt: TODO_PROMPT.into(), mode: Default::default() }).await {
        Reply::Session(s) => s,
        other => panic!("{other:?}"),
    };
    let (_worker, q) = asked_on(&a, &b, &s).await;
    let st = open_store(&db);
    assert_eq!(st.open_questions(None).unwrap().iter().map(|r| r.user.as_str()).collect::<Vec<_>>(), ["team-ops"]);
    let id = q.id.to_string();
    // host-c's nobody: not listed, not answerable.
    let (code, out) = cli_as(&c, Some("nobody"), &["pending"]);
    assert!(code == 0 && out.contains("no pending questions"), "{out}");
    let (code, out) = cli_as(&c, Some("nobody"), &["approve", &id, "--host", "host-a"]);
    assert!(code != 0 && out.contains("no open question"), "host-c's nobody cannot answer team-ops's question: {out}");
    // host-b's nobody is team-ops: listed there.
    let (code, out) = cli_as(&b, Some("nobody"), &["pending"]);
    assert!(code == 0 && out.contains(ASKS) && out.contains("host-a"), "{out}");
    // The database keeps team-ops's rows from nobody@host-c's role.
    eventually("team-ops's audit rows shipped", || async { (!st.read_audit(Some("team-ops"), &AuditQuery::default()).unwrap().is_empty()).then_some(()) }).await;
    let seen = st
        .as_user("nobody@host-c", |tx| {
            let q = r#"SELECT "user" FROM audit UNION ALL SELECT "user" FROM question UNION ALL SELECT "user" FROM task UNION ALL SELECT "user" FROM policy"#;
            Ok(tx.query(q, &[])?.len())
        })
        .unwrap();
    assert_eq!(seen, 0, "nobody@host-c reads none of team-ops's rows");
    let (code, out) = cli_as(&c, Some("nobody"), &["log", "--host", "host-a"]);
    assert!(code == 0 && !out.contains(&s.session), "host-c's nobody reads none of team-ops's audit: {out}");
    // An answer from host-b's nobody is team-ops's, and host-a applies it.
    let (code, out) = cli_as(&b, Some("nobody"), &["approve", &id, "--host", "host-a"]);
    assert!(code == 0 && out.contains("acknowledged it"), "{out}");
}

/// `pincer bench fleet` runs each host as a daemon process of its own (its own socket,
/// configuration and spool) on one database, with a worker process per session: the run
/// names distinct daemon processes, and the shared audit holds the decisions of every host,
/// each asked by a worker process of its own, once.
#[test]
fn the_fleet_bench_runs_separate_daemon_processes_on_one_database() {
    let tmp = tempfile::tempdir().unwrap();
    let db = cluster().database(tmp.path());
    let config = tmp.path().join("fleet.toml");
    std::fs::write(
        &config,
        format!("[store]\nbackend = \"postgres\"\nurl = \"{}\"\ntls = \"disable\"\npassword_file = \"{}\"\n", db.url, db.password_file.as_ref().unwrap().display()),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pincer"))
        .args(["bench", "fleet", "--daemons", "2", "--sessions", "2", "--decisions", "3", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let pids: Vec<u32> = text.lines().find_map(|l| l.strip_prefix("postgres: daemon processes ")).expect("the run names its daemons").split(' ').map(|p| p.parse().unwrap()).collect();
    assert_eq!(pids.len(), 2);
    assert!(pids[0] != pids[1] && !pids.contains(&std::process::id()), "a process per host: {pids:?}");
    assert!(text.lines().any(|l| l.starts_with("sqlite ")) && text.lines().any(|l| l.starts_with("postgres ")), "{text}");
    let decisions: Vec<AuditEntry> = shared_audit(&db).into_iter().filter(|e| e.event == Event::Decision).collect();
    assert_eq!(decisions.len(), 2 * 2 * 3, "every request decided and shipped once");
    let hosts: std::collections::BTreeSet<_> = decisions.iter().filter_map(|e| e.host.clone()).collect();
    assert_eq!(hosts.len(), 2, "{hosts:?}");
    let workers: std::collections::BTreeSet<_> = decisions.iter().filter_map(|e| e.request.as_ref().and_then(|r| r.pid)).collect();
    assert_eq!(workers.len(), 4, "a worker process per session");
}

/// A daemon process (`pincer bench fleet-daemon`: the daemon's code over maps in memory)
/// killed with SIGKILL while a worker keeps it deciding and writing its spool: started
/// again on the same configuration, it ships the spool, and every complete line of it is in
/// the shared audit exactly once.
#[test]
fn a_daemon_process_killed_with_sigkill_mid_write_loses_and_doubles_no_audit_entry() {
    use std::io::Write;
    let tmp = tempfile::tempdir().unwrap();
    let db = cluster().database(tmp.path());
    let ws = common::persona_workspace(tmp.path());
    let mut config = fleet_config(tmp.path(), &db, "host-k");
    config.containment.scratch = false;
    config.containment.scratch_parent = tmp.path().to_path_buf();
    config.hold.enabled = false;
    let file = tmp.path().join("pincer.toml");
    std::fs::write(&file, config.to_toml().unwrap()).unwrap();
    let daemon = || {
        let d = std::process::Command::new(env!("CARGO_BIN_EXE_pincer")).args(["bench", "fleet-daemon", "--config"]).arg(&file).spawn().unwrap();
        for _ in 0..3000 {
            if std::os::unix::net::UnixStream::connect(&config.socket).is_ok() {
                return d;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("the daemon does not listen");
    };
    let mut d = daemon();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let call = |c: Call| rt.block_on(pincer::daemon::client::call_once(&config.socket, c)).unwrap();
    let (history, policies) = common::persona_state();
    assert!(matches!(call(Call::Import { history, policies, uid: None, workspace: None }), Reply::Ok { .. }));
    let s = match call(Call::CreateSession { owner_uid: 0, roots: vec![ws.clone()], prompt: TODO_PROMPT.into(), mode: Default::default() }) {
        Reply::Session(s) => s,
        other => panic!("{other:?}"),
    };
    let mut worker = std::process::Command::new(env!("CARGO_BIN_EXE_pincer"))
        .args(["bench", "fleet-worker", "--socket"])
        .arg(&config.socket)
        .arg("--ws")
        .arg(&ws)
        .args(["--count", "1000000", "--seed", "1"])
        .env("PINCER_BENCH_CGROUP", &s.cgroup)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    worker.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let lines = || std::fs::read(&config.audit_log).unwrap().iter().filter(|b| **b == b'\n').count();
    let before = lines();
    while lines() < before + 200 {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // SIGKILL, while the worker keeps it writing.
    d.kill().unwrap();
    d.wait().unwrap();
    let _ = worker.kill();
    let _ = worker.wait();
    let mut d = daemon();
    let written = read_entries(&config.audit_log).unwrap();
    let ids: std::collections::BTreeSet<_> = written.iter().map(|e| e.id.clone()).collect();
    assert_eq!(ids.len(), written.len());
    let shipped = {
        let mut all = shared_audit(&db);
        for _ in 0..600 {
            if all.len() >= written.len() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
            all = shared_audit(&db);
        }
        all
    };
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(d.id() as i32, libc::SIGTERM) };
    d.wait().unwrap();
    let shipped_ids: std::collections::BTreeSet<_> = shipped.iter().map(|e| e.id.clone()).collect();
    assert_eq!(shipped_ids.len(), shipped.len(), "no entry doubled");
    for id in &ids {
        assert!(shipped_ids.contains(id), "entry {id} of the spool is in the shared audit");
    }
    assert!(written.iter().filter(|e| e.event == Event::Decision).count() >= 200, "the daemon was deciding when it was killed");
}
