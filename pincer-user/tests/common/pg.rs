//! A real PostgreSQL server for the fleet tests: a cluster of its own in a temporary folder,
//! made with Debian's `initdb` and run by `pg_ctl` as an unprivileged user (`nobody` when
//! the tests run as root, as in CI: the server refuses to run as root), listening on a free
//! loopback port. The daemons log in as `pincer` (a role with `CREATEROLE`, not a
//! superuser, so row-level security applies to the roles it takes) with a password file.
//! Missing binaries fail the test: `cargo xtask deps` installs them.

use pincer::store::{PgSettings, TlsMode};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// The password of the `pincer` role in every test cluster.
pub const PASSWORD: &str = "fleet-test-password";

/// The folder of the PostgreSQL server binaries (`PINCER_PG_BIN`, or the newest of Debian's
/// `/usr/lib/postgresql/*/bin`); panics naming the fix when there is none.
pub fn bin_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("PINCER_PG_BIN") {
        return PathBuf::from(d);
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .filter(|(_, p)| p.join("initdb").is_file())
        .collect();
    found.sort();
    match found.pop() {
        Some((_, p)) => p,
        None => panic!(
            "the fleet tests need a PostgreSQL server: no /usr/lib/postgresql/*/bin/initdb here. \
             Run `cargo xtask deps` (it installs Debian's `postgresql`), or set PINCER_PG_BIN."
        ),
    }
}

/// A running test cluster; stopped when dropped.
pub struct Cluster {
    dir: tempfile::TempDir,
    /// Its TCP port on 127.0.0.1.
    pub port: u16,
    bin: PathBuf,
    databases: AtomicU32,
    /// Server options beyond the port and the sockets (TLS).
    extra: String,
}

fn as_owner(bin: &Path, tool: &str) -> Command {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let mut c = Command::new("runuser");
        c.args(["-u", "nobody", "--"]).arg(bin.join(tool));
        c
    } else {
        Command::new(bin.join(tool))
    }
}

fn run(mut c: Command, what: &str) {
    let out = c.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(out.status.success(), "{what} failed: {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

impl Cluster {
    /// Makes and starts a cluster, and the `pincer` role.
    pub fn start() -> Cluster {
        Self::start_with_tls(None)
    }

    /// Makes and starts a cluster that serves TCP clients over TLS only (`ssl = on` with
    /// `cert` and its `key`, `hostssl` lines in `pg_hba.conf`), and the `pincer` role.
    pub fn start_tls(cert: &Path, key: &Path) -> Cluster {
        Self::start_with_tls(Some((cert, key)))
    }

    fn start_with_tls(tls: Option<(&Path, &Path)>) -> Cluster {
        let bin = bin_dir();
        let dir = tempfile::Builder::new().prefix("pincer-pg-").tempdir().unwrap();
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            // nobody owns the cluster's folder (the server refuses to run as root).
            std::os::unix::fs::chown(dir.path(), Some(65534), Some(65534)).unwrap();
        }
        let data = dir.path().join("data");
        let mut c = as_owner(&bin, "initdb");
        c.args(["-D"]).arg(&data).args(["-U", "postgres", "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync"]);
        run(c, "initdb");
        let mut extra = String::new();
        if let Some((cert, key)) = tls {
            let (crt, k) = (data.join("server.crt"), data.join("server.key"));
            std::fs::copy(cert, &crt).unwrap();
            std::fs::copy(key, &k).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&k, std::fs::Permissions::from_mode(0o600)).unwrap();
            // SAFETY: geteuid has no preconditions.
            if unsafe { libc::geteuid() } == 0 {
                for f in [&crt, &k] {
                    std::os::unix::fs::chown(f, Some(65534), Some(65534)).unwrap();
                }
            }
            let hba = data.join("pg_hba.conf");
            let text = std::fs::read_to_string(&hba).unwrap();
            let text: String = text.lines().map(|l| if l.starts_with("host ") { format!("hostssl{}\n", &l[4..]) } else { format!("{l}\n") }).collect();
            std::fs::write(&hba, text).unwrap();
            extra = " -c ssl=on -c ssl_cert_file=server.crt -c ssl_key_file=server.key".into();
        }
        let port = free_port();
        let cluster = Cluster { dir, port, bin, databases: AtomicU32::new(0), extra };
        cluster.start_server();
        cluster.superuser(&format!("CREATE ROLE pincer LOGIN CREATEROLE PASSWORD '{PASSWORD}'"), "postgres");
        cluster
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Starts the server (again).
    pub fn start_server(&self) {
        let mut c = as_owner(&self.bin, "pg_ctl");
        let opts = format!("-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200{}", self.port, self.dir.path().display(), self.extra);
        c.args(["-D"]).arg(self.data()).args(["-l"]).arg(self.dir.path().join("server.log")).args(["-o", &opts, "-w", "start"]);
        run(c, "pg_ctl start");
    }

    /// Stops the server (fast: sessions are disconnected).
    pub fn stop_server(&self) {
        let mut c = as_owner(&self.bin, "pg_ctl");
        c.args(["-D"]).arg(self.data()).args(["-m", "fast", "-w", "stop"]);
        run(c, "pg_ctl stop");
    }

    /// Runs `sql` as the superuser over the Unix socket, on its own thread (the blocking
    /// client must not run inside the test's runtime).
    pub fn superuser(&self, sql: &str, db: &str) {
        let (sql, conn) = (sql.to_string(), format!("host={} port={} user=postgres dbname={db}", self.dir.path().display(), self.port));
        std::thread::spawn(move || {
            let mut c = postgres::Client::connect(&conn, postgres::NoTls).unwrap();
            c.batch_execute(&sql).unwrap();
        })
        .join()
        .unwrap();
    }

    /// How many of the `pincer` role's TCP connections run over TLS, and how many do not.
    pub fn pincer_connections(&self) -> (i64, i64) {
        let conn = format!("host={} port={} user=postgres dbname=postgres", self.dir.path().display(), self.port);
        std::thread::spawn(move || {
            let mut c = postgres::Client::connect(&conn, postgres::NoTls).unwrap();
            let r = c
                .query_one(
                    "SELECT count(*) FILTER (WHERE s.ssl), count(*) FILTER (WHERE NOT s.ssl) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
                     WHERE a.usename = 'pincer' AND a.client_port IS NOT NULL",
                    &[],
                )
                .unwrap();
            (r.get(0), r.get(1))
        })
        .join()
        .unwrap()
    }

    /// A new database owned by `pincer`, and the settings a daemon reaches it with (TCP on
    /// loopback, no TLS, the password in a root-only file in `dir`).
    pub fn database(&self, dir: &Path) -> PgSettings {
        let name = format!("fleet_{}", self.databases.fetch_add(1, Ordering::SeqCst));
        self.superuser(&format!("CREATE DATABASE {name} OWNER pincer"), "postgres");
        let pw = dir.join("db-password");
        std::fs::write(&pw, format!("{PASSWORD}\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&pw, std::fs::Permissions::from_mode(0o600)).unwrap();
        PgSettings {
            url: format!("host=127.0.0.1 port={} user=pincer dbname={name}", self.port),
            tls: TlsMode::Disable,
            ca_file: None,
            password_file: Some(pw),
        }
    }
}

impl Cluster {
    /// Stops the server and removes its folder (what dropping it does, for a cluster kept
    /// in a `static`, which is never dropped: call it at exit).
    pub fn stop(&self) {
        let mut c = as_owner(&self.bin, "pg_ctl");
        c.args(["-D"]).arg(self.data()).args(["-m", "immediate", "-w", "stop"]);
        let _ = c.output();
        let _ = std::fs::remove_dir_all(self.dir.path());
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A test certificate authority made with the `openssl` CLI, and server certificates it
/// signs.
pub struct Ca {
    /// The CA's certificate (PEM): what a client's `ca_file` names.
    pub cert: PathBuf,
    key: PathBuf,
    dir: PathBuf,
}

fn openssl(args: &[&str], dir: &Path) {
    let out = Command::new("openssl").args(args).current_dir(dir).output().unwrap_or_else(|e| panic!("openssl (Debian's `openssl` package, `cargo xtask deps`): {e}"));
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

impl Ca {
    /// A new self-signed CA named `name`, its files in `dir`.
    pub fn new(dir: &Path, name: &str) -> Ca {
        let (cert, key) = (dir.join(format!("{name}.pem")), dir.join(format!("{name}.key")));
        let subj = format!("/CN={name}");
        openssl(
            &[
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2", "-subj", &subj,
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                "-keyout", key.to_str().unwrap(), "-out", cert.to_str().unwrap(),
            ],
            dir,
        );
        Ca { cert, key, dir: dir.to_path_buf() }
    }

    /// A server certificate and key for the names `san` (`DNS:localhost,IP:127.0.0.1`).
    pub fn server(&self, name: &str, san: &str) -> (PathBuf, PathBuf) {
        let d = &self.dir;
        let (cert, key, csr, ext) = (d.join(format!("{name}.crt")), d.join(format!("{name}.key")), d.join(format!("{name}.csr")), d.join(format!("{name}.ext")));
        std::fs::write(&ext, format!("subjectAltName={san}\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n")).unwrap();
        openssl(
            &["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", &format!("/CN={name}"), "-keyout", key.to_str().unwrap(), "-out", csr.to_str().unwrap()],
            d,
        );
        openssl(
            &[
                "x509", "-req", "-in", csr.to_str().unwrap(), "-CA", self.cert.to_str().unwrap(), "-CAkey", self.key.to_str().unwrap(), "-CAcreateserial",
                "-days", "2", "-extfile", ext.to_str().unwrap(), "-out", cert.to_str().unwrap(),
            ],
            d,
        );
        (cert, key)
    }
}
