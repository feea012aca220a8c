//! The PostgreSQL backend: a fleet's shared trusted state and audit.
//!
//! Each [`PgConn`] owns one connection on a thread of its own (the `postgres` client's
//! blocking API runs its own small runtime, which must not run inside the daemon's), and
//! serves statements sent to it; a broken connection is opened again before the next
//! statement, never inside a transaction (the server rolls that back, and the rest of the
//! transaction fails). [`listen`] follows the `pincer_state` notifications the schema's
//! triggers send when a user's approvals, policies or history change.
//!
//! Users' own reads run as a per-user role (`pincer_u_<user>`, no login by default) under
//! row-level security, so the database itself keeps one user's rows from another.

use super::db::{DbError, Row, Val};
use postgres::types::{ToSql, Type};
use postgres::Client;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

/// How the connection to PostgreSQL is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TlsMode {
    /// TLS required, the server's certificate checked against `ca_file` (or the system's
    /// CA certificates) and its name against the URL's host.
    #[default]
    VerifyFull,
    /// No TLS: only for a Unix socket or a loopback address on the database host itself.
    Disable,
}

/// Where and how to reach the fleet's database (`[store]` with `backend = "postgres"`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PgSettings {
    /// Connection URL without the password (`postgresql://pincer@db.example/pincer`, or
    /// `host=/run/postgresql user=pincer dbname=pincer`).
    pub url: String,
    /// TLS mode.
    pub tls: TlsMode,
    /// PEM file of the CA certificates that sign the server's certificate.
    pub ca_file: Option<PathBuf>,
    /// File holding the password (root-only: refused if group or others may read it).
    pub password_file: Option<PathBuf>,
}

/// Reads a password file: it must belong to root (or the daemon's user) and be readable by
/// its owner only; the password is its first line.
pub fn read_password_file(path: &Path) -> Result<String, DbError> {
    use std::os::unix::fs::MetadataExt;
    let bad = |why: String| DbError::Unreachable(format!("password file {}: {why}", path.display()));
    let meta = std::fs::metadata(path).map_err(|e| bad(e.to_string()))?;
    let mode = meta.mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(bad(format!("mode {mode:03o} lets group or others read it; make it root-only (chmod 600)")));
    }
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != 0 && meta.uid() != me {
        return Err(bad(format!("owned by uid {}, not by root", meta.uid())));
    }
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let pw = text.lines().next().unwrap_or("").to_string();
    if pw.is_empty() {
        return Err(bad("it is empty".into()));
    }
    Ok(pw)
}

fn tls_config(s: &PgSettings) -> Result<rustls::ClientConfig, DbError> {
    let bad = |why: String| DbError::Unreachable(format!("TLS settings: {why}"));
    let mut roots = rustls::RootCertStore::empty();
    match &s.ca_file {
        Some(f) => {
            use rustls::pki_types::pem::PemObject;
            let certs = rustls::pki_types::CertificateDer::pem_file_iter(f).map_err(|e| bad(format!("ca_file {}: {e}", f.display())))?;
            for c in certs {
                let c = c.map_err(|e| bad(format!("ca_file {}: {e}", f.display())))?;
                roots.add(c).map_err(|e| bad(format!("ca_file {}: {e}", f.display())))?;
            }
        }
        None => {
            for c in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(c);
            }
        }
    }
    if roots.is_empty() {
        return Err(bad("no CA certificate to check the server with (set store.ca_file)".into()));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// Opens one connection as `s` says.
pub fn connect(s: &PgSettings) -> Result<Client, DbError> {
    let mut cfg: postgres::Config = s.url.parse().map_err(|e: postgres::Error| DbError::Unreachable(format!("store.url: {e}")))?;
    if cfg.get_password().is_some() {
        return Err(DbError::Unreachable("store.url holds a password; put it in store.password_file (root-only) instead".into()));
    }
    if let Some(f) = &s.password_file {
        cfg.password(read_password_file(f)?);
    }
    cfg.connect_timeout(Duration::from_secs(5));
    cfg.application_name("pincer");
    match s.tls {
        TlsMode::Disable => {
            cfg.ssl_mode(postgres::config::SslMode::Disable);
            Ok(cfg.connect(postgres::NoTls)?)
        }
        TlsMode::VerifyFull => {
            cfg.ssl_mode(postgres::config::SslMode::Require);
            Ok(cfg.connect(tokio_postgres_rustls::MakeRustlsConnect::new(tls_config(s)?))?)
        }
    }
}

/// The connection's state on its thread.
pub struct Worker {
    settings: Arc<PgSettings>,
    client: Option<Client>,
    in_tx: bool,
    roles: HashSet<String>,
}

impl Worker {
    /// The open connection, opened again if it broke (never inside a transaction).
    pub fn client(&mut self) -> Result<&mut Client, DbError> {
        let broken = self.client.as_ref().is_none_or(Client::is_closed);
        if broken {
            if self.in_tx {
                return Err(DbError::Unreachable("the connection broke inside a transaction (rolled back)".into()));
            }
            self.client = None;
            self.client = Some(connect(&self.settings)?);
        }
        Ok(self.client.as_mut().expect("connected above"))
    }

    /// Makes sure `user`'s role exists and the daemon's role may take it, then runs `f` in a
    /// transaction as that role, so row-level security shows it only `user`'s rows.
    pub fn as_user<T>(&mut self, user: &str, f: impl FnOnce(&mut postgres::Transaction<'_>) -> Result<T, postgres::Error>) -> Result<T, DbError> {
        let role = user_role(user)?;
        if !self.roles.contains(&role) {
            self.client()?.batch_execute(&format!(
                "DO $$ BEGIN CREATE ROLE {role} NOLOGIN IN ROLE pincer_readers;
                   EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$;
                 GRANT {role} TO CURRENT_USER;"
            ))?;
            self.roles.insert(role.clone());
        }
        let mut tx = self.client()?.transaction()?;
        tx.batch_execute(&format!("SET LOCAL ROLE {role}"))?;
        let out = f(&mut tx)?;
        tx.commit()?;
        Ok(out)
    }
}

/// The quoted name of `user`'s database role; user identities are checked (letters,
/// digits, `_`, `.`, `-`, `@`, at most 50 bytes) so an identity never changes the statement.
pub fn user_role(user: &str) -> Result<String, DbError> {
    let ok = !user.is_empty() && user.len() <= 50 && user.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-@".contains(&b));
    if !ok {
        return Err(DbError::Unreachable(format!("user identity {user:?} cannot name a database role (letters, digits, `_.-@`, at most 50 bytes)")));
    }
    Ok(format!("\"pincer_u_{user}\""))
}

type Job = Box<dyn FnOnce(&mut Worker) + Send>;

/// How long a successful statement vouches for the connection: a decision within this
/// time of the last success is not preceded by a round trip of its own (a connection the
/// client saw close fails at once). So a database that goes away is noticed by the
/// decisions at most this late.
pub const CHECK_EVERY: Duration = Duration::from_millis(250);

/// One PostgreSQL connection served on its own thread.
pub struct PgConn {
    tx: mpsc::Sender<Job>,
    health: Arc<Health>,
}

/// What the connection's thread last saw: when a statement last succeeded (milliseconds
/// since the connection opened, 0 for never) and whether the connection is closed.
#[derive(Default)]
struct Health {
    last_ok_ms: std::sync::atomic::AtomicU64,
    closed: std::sync::atomic::AtomicBool,
    epoch: std::sync::OnceLock<std::time::Instant>,
}

impl Health {
    fn now_ms(&self) -> u64 {
        self.epoch.get_or_init(std::time::Instant::now).elapsed().as_millis() as u64 + 1
    }
}

impl PgConn {
    /// Connects (on a new thread) as `settings` say.
    pub fn open(settings: PgSettings) -> Result<Self, DbError> {
        let (tx, rx) = mpsc::channel::<Job>();
        let settings = Arc::new(settings);
        let (ready_tx, ready_rx) = mpsc::channel();
        let health = Arc::new(Health::default());
        let seen = health.clone();
        std::thread::Builder::new()
            .name("pincer-pg".into())
            .spawn(move || {
                let mut w = Worker { settings, client: None, in_tx: false, roles: HashSet::new() };
                let first = w.client().map(drop);
                let failed = first.is_err();
                let _ = ready_tx.send(first);
                if failed {
                    return;
                }
                while let Ok(job) = rx.recv() {
                    job(&mut w);
                    seen.closed.store(w.client.as_ref().is_none_or(Client::is_closed), std::sync::atomic::Ordering::Relaxed);
                }
            })
            .map_err(|e| DbError::Unreachable(format!("cannot start the store thread: {e}")))?;
        ready_rx.recv().map_err(|_| DbError::Unreachable("the store thread ended".into()))??;
        Ok(PgConn { tx, health })
    }

    /// Checks that the database answers: a round trip, unless a statement succeeded less
    /// than [`CHECK_EVERY`] ago on a connection still open.
    pub fn check(&self) -> Result<(), DbError> {
        use std::sync::atomic::Ordering::Relaxed;
        let h = &self.health;
        let last = h.last_ok_ms.load(Relaxed);
        if last != 0 && !h.closed.load(Relaxed) && h.now_ms().saturating_sub(last) < CHECK_EVERY.as_millis() as u64 {
            return Ok(());
        }
        self.batch("SELECT 1".into())
    }

    /// Runs `f` on the connection's thread and waits for its result.
    pub fn run<T: Send + 'static>(&self, f: impl FnOnce(&mut Worker) -> Result<T, DbError> + Send + 'static) -> Result<T, DbError> {
        let (tx, rx) = mpsc::channel();
        self.tx
            .send(Box::new(move |w| {
                let _ = tx.send(f(w));
            }))
            .map_err(|_| DbError::Unreachable("the store thread ended".into()))?;
        let r = rx.recv().map_err(|_| DbError::Unreachable("the store thread ended".into()))?;
        let h = &self.health;
        h.last_ok_ms.store(if r.is_ok() { h.now_ms() } else { 0 }, std::sync::atomic::Ordering::Relaxed);
        r
    }

    /// Runs a statement; returns the rows it changed.
    pub fn exec(&self, sql: String, args: Vec<Val>) -> Result<u64, DbError> {
        self.run(move |w| {
            let c = w.client()?;
            let st = c.prepare(&sql)?;
            let params = bind(&args, st.params());
            Ok(c.execute(&st, &refs(&params))?)
        })
    }

    /// Runs a query.
    pub fn query(&self, sql: String, args: Vec<Val>) -> Result<Vec<Row>, DbError> {
        self.run(move |w| {
            let c = w.client()?;
            let st = c.prepare(&sql)?;
            let params = bind(&args, st.params());
            Ok(c.query(&st, &refs(&params))?.iter().map(row).collect())
        })
    }

    /// Runs statements without parameters; `BEGIN`, `COMMIT` and `ROLLBACK` are followed so
    /// that a transaction never continues on a new connection.
    pub fn batch(&self, sql: String) -> Result<(), DbError> {
        self.run(move |w| {
            let word = sql.trim().to_ascii_uppercase();
            let r = w.client().and_then(|c| Ok(c.batch_execute(&sql)?));
            match word.as_str() {
                "BEGIN" => w.in_tx = r.is_ok(),
                "COMMIT" | "ROLLBACK" => w.in_tx = false,
                _ => {}
            }
            r
        })
    }
}

/// The values of `args` typed as the statement's parameters are.
fn bind(args: &[Val], types: &[Type]) -> Vec<Box<dyn ToSql + Sync + Send>> {
    args.iter()
        .zip(types.iter().chain(std::iter::repeat(&Type::TEXT)))
        .map(|(v, t)| -> Box<dyn ToSql + Sync + Send> {
            match (v, t) {
                (Val::Int(i), &Type::INT4) => Box::new(*i as i32),
                (Val::Int(i), &Type::TEXT) => Box::new(i.to_string()),
                (Val::Int(i), _) => Box::new(*i),
                (Val::Text(s), _) => Box::new(s.clone()),
                (Val::Null, &Type::INT8) => Box::new(None::<i64>),
                (Val::Null, _) => Box::new(None::<String>),
            }
        })
        .collect()
}

fn refs(p: &[Box<dyn ToSql + Sync + Send>]) -> Vec<&(dyn ToSql + Sync)> {
    p.iter().map(|b| b.as_ref() as &(dyn ToSql + Sync)).collect()
}

/// A result row as [`Val`]s.
pub fn row(r: &postgres::Row) -> Row {
    Row((0..r.len())
        .map(|i| match *r.columns()[i].type_() {
            Type::INT8 => r.get::<_, Option<i64>>(i).map_or(Val::Null, Val::Int),
            Type::INT4 => r.get::<_, Option<i32>>(i).map_or(Val::Null, |v| Val::Int(v.into())),
            _ => r.try_get::<_, Option<String>>(i).ok().flatten().map_or(Val::Null, Val::Text),
        })
        .collect())
}

/// The channel the schema's triggers notify with the user whose trusted state changed.
pub const STATE_CHANNEL: &str = "pincer_state";

/// What [`listen`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateChange {
    /// This user's trusted state changed on some host.
    User(String),
    /// The listener (re)connected: anything may have changed while it was away (answers to
    /// this host's questions included).
    All,
    /// Another host answered a question of this host (the payload: the asking host's name,
    /// [`ANSWER_CHANNEL`](super::questions::ANSWER_CHANNEL)).
    Answered(String),
}

/// Follows the trusted state's changes and the answers to questions on a thread of its own:
/// each notification is passed to `tx`; after every (re)connection [`StateChange::All`] is
/// sent. Ends when `tx` is closed.
pub fn listen(settings: PgSettings, tx: tokio::sync::mpsc::UnboundedSender<StateChange>) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new().name("pincer-pg-listen".into()).spawn(move || {
        let mut first = true;
        while !tx.is_closed() {
            let mut client = match connect(&settings).and_then(|mut c| {
                c.batch_execute(&format!("LISTEN {STATE_CHANNEL}; LISTEN {}", super::questions::ANSWER_CHANNEL)).map(|()| c).map_err(DbError::from)
            }) {
                Ok(c) => c,
                Err(e) => {
                    if first {
                        tracing::warn!(error = %e, "cannot follow the fleet's state changes yet; retrying");
                    }
                    first = false;
                    std::thread::sleep(Duration::from_millis(250));
                    continue;
                }
            };
            first = true;
            if tx.send(StateChange::All).is_err() {
                return;
            }
            while !client.is_closed() && !tx.is_closed() {
                {
                    let mut n = client.notifications();
                    let mut it = n.timeout_iter(Duration::from_millis(250));
                    loop {
                        use postgres::fallible_iterator::FallibleIterator;
                        match it.next() {
                            Ok(Some(note)) => {
                                let payload = note.payload().to_string();
                                let change = if note.channel() == super::questions::ANSWER_CHANNEL { StateChange::Answered(payload) } else { StateChange::User(payload) };
                                if tx.send(change).is_err() {
                                    return;
                                }
                            }
                            Ok(None) | Err(_) => break,
                        }
                    }
                }
                // A quiet connection is checked, so a dead server is noticed.
                if client.is_closed() || client.simple_query("").is_err() {
                    break;
                }
            }
        }
    })
}
