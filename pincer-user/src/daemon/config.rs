//! The daemon's configuration file (`/etc/pincer/pincer.toml` unless overridden): every
//! setting has a default, unknown keys are an error naming the key.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where the configuration is read from unless `--config` or `PINCER_CONFIG` says otherwise.
pub const DEFAULT_CONFIG: &str = "/etc/pincer/pincer.toml";
/// The daemon's socket unless configured otherwise.
pub const DEFAULT_SOCKET: &str = "/run/pincer/pincer.sock";

/// Errors reading the configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read configuration {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML for this schema (the message names the key and line).
    #[error("invalid configuration {path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Cause.
        #[source]
        source: Box<toml::de::Error>,
    },
    /// A value is out of range.
    #[error("invalid configuration {path}: {field}: {problem}")]
    Value {
        /// The file.
        path: PathBuf,
        /// The key.
        field: &'static str,
        /// What is wrong.
        problem: String,
    },
}

/// What the daemon does with an access the kernel denied because no grant covered it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnMiss {
    /// Treat it as an implicit request (no rationale) and let the twin decide; a grant lets
    /// the worker's retry succeed.
    Decide,
    /// Only record it in the audit log.
    Record,
}

pub use crate::decider::Backend;

/// Which Pincer variant the twin runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VariantName {
    /// Votes 1, 2, 3 as in the paper.
    Pincer,
    /// Vote 2 also sees the pre-committed policy.
    PincerP2,
}

/// `[decider]`: the model behind the twin's votes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeciderConfig {
    /// `offline`, `openai` or `anthropic`.
    pub backend: Backend,
    /// Endpoint base URL (empty: the provider's public API).
    pub endpoint: String,
    /// Model name (required for `openai` and `anthropic`).
    pub model: String,
    /// Environment variable holding the API key (the key is never written to this file).
    pub api_key_env: String,
    /// Timeout of one model call in seconds; a timeout is a deny.
    pub timeout_secs: u64,
    /// `pincer` or `pincer-p2`.
    pub variant: VariantName,
}

impl Default for DeciderConfig {
    fn default() -> Self {
        DeciderConfig {
            backend: Backend::Offline,
            endpoint: String::new(),
            model: String::new(),
            api_key_env: String::new(),
            timeout_secs: 60,
            variant: VariantName::Pincer,
        }
    }
}

impl DeciderConfig {
    /// The chat settings of `backend` from these values, with the environment as override
    /// ([`crate::decider::ChatConfig::resolve`]): what `pincer eval` and `pincer bench` use.
    pub fn chat(&self, backend: Backend) -> Result<crate::decider::ChatConfig, crate::decider::DeciderError> {
        crate::decider::ChatConfig::resolve(backend, &self.endpoint, &self.model, &self.api_key_env, std::time::Duration::from_secs(self.timeout_secs))
    }
}

/// `[escalation]`: when and how long the user is asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EscalationConfig {
    /// Denials of the same request in a session after which a further ask goes to the user.
    pub after_denials: u32,
    /// How long a worker's request waits for the user's answer before it is denied.
    pub timeout_secs: u64,
    /// How long the kernel grant of an approval of scope `once` stays, for the access that
    /// follows the answer (an open file stays open after it is taken back).
    pub once_secs: u64,
}

impl Default for EscalationConfig {
    fn default() -> Self {
        EscalationConfig { after_denials: 2, timeout_secs: 300, once_secs: 30 }
    }
}

/// Which database keeps the trusted state (and, for `postgres`, the fleet's audit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreBackend {
    /// The embedded SQLite file `state.db` in `state_dir` (one host).
    #[default]
    Sqlite,
    /// A PostgreSQL database shared by a fleet of hosts.
    Postgres,
}

/// `[store]`: where the trusted state lives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// `sqlite` (default) or `postgres`.
    pub backend: StoreBackend,
    /// PostgreSQL connection URL, without a password (`postgresql://pincer@db.example/pincer`).
    pub url: String,
    /// `verify-full` (default: TLS, the server's certificate and name checked) or `disable`
    /// (only for a Unix socket or loopback).
    pub tls: crate::store::TlsMode,
    /// PEM file of the CA that signs the server's certificate (default: the system's CAs).
    pub ca_file: Option<PathBuf>,
    /// Root-only file holding the database password (never on the command line).
    pub password_file: Option<PathBuf>,
    /// This host's name in the shared audit (default: the kernel's host name).
    pub host: String,
    /// Who this host's users are in the fleet (`[store.users]`, login name = fleet
    /// identity): the identity names their trusted state, questions and audit rows in the
    /// shared store. A user not listed is `name@host`, this host's alone: a login name is
    /// no identity across hosts (the same name elsewhere may be someone else).
    pub users: std::collections::BTreeMap<String, String>,
    /// How long `pincer approve|deny ID --host H` waits for host H to apply the answer
    /// (seconds) before it says that H has not applied it yet.
    pub answer_wait_secs: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            backend: StoreBackend::Sqlite,
            url: String::new(),
            tls: Default::default(),
            ca_file: None,
            password_file: None,
            host: String::new(),
            users: Default::default(),
            answer_wait_secs: 5,
        }
    }
}

impl StoreConfig {
    /// This host's name in the shared audit.
    pub fn host_name(&self) -> String {
        if !self.host.is_empty() {
            return self.host.clone();
        }
        std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_else(|_| "localhost".into())
    }

    /// Who this host's accounts are in the store ([`StoreConfig::users`]).
    pub fn identities(&self) -> super::users::Identities {
        match self.backend {
            StoreBackend::Sqlite => super::users::Identities::local(),
            StoreBackend::Postgres => super::users::Identities::fleet(self.host_name(), self.users.clone()),
        }
    }
}

/// `[hold]`: how a miss waits for its decision on kernels that can hold it (Linux 6.12).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HoldConfig {
    /// Hold misses where the kernel accepts the held `file_open` (false: every miss is
    /// denied at once and the worker retries, and a daemon that loads the program attaches
    /// the plain `file_open`).
    pub enabled: bool,
    /// The longest a worker's access waits for the decision (milliseconds); then it is
    /// denied.
    pub max_ms: u64,
    /// The longest a held change of a name or an attribute waits (milliseconds, at most
    /// `max_ms`): its hook keeps a folder (or the file) locked meanwhile, so the user's own
    /// lookups and listings there wait too. A session holds one such access at a time, and
    /// none for a while after one was denied.
    pub locked_max_ms: u64,
    /// Where the hold's FUSE filesystem (the anchor's executable) is mounted.
    pub mountpoint: PathBuf,
    /// How many threads of one session may wait in a hold at once (the kernel counts
    /// them); a miss beyond it is denied at once, so one session cannot take the places
    /// (`HOLD_MAX`, 4096 over every session) the others need.
    pub per_session: u32,
}

impl Default for HoldConfig {
    fn default() -> Self {
        HoldConfig { enabled: true, max_ms: 5000, locked_max_ms: 1000, mountpoint: PathBuf::from("/run/pincer/hold"), per_session: 256 }
    }
}

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Directory of the twin's SQLite state (`state.db`), the sanitizer key (`prf.key`) and the
    /// open sessions (`sessions.json`).
    pub state_dir: PathBuf,
    /// The daemon's Unix socket.
    pub socket: PathBuf,
    /// The audit log (JSON lines, appended).
    pub audit_log: PathBuf,
    /// bpffs directory where the BPF program's maps and links are pinned.
    pub pin_dir: PathBuf,
    /// cgroup v2 directory under which each session gets its own cgroup.
    pub cgroup_parent: PathBuf,
    /// What to do with kernel misses: `decide` or `record`.
    pub on_miss: OnMiss,
    /// Protected roots used when `pincer run` names none.
    pub default_roots: Vec<PathBuf>,
    /// Compile the content detectors' patterns on a thread of their own when the daemon
    /// starts (else each at its first use, in the decision that needs it).
    pub warm_up: bool,
    /// Decider settings.
    pub decider: DeciderConfig,
    /// Escalation settings.
    pub escalation: EscalationConfig,
    /// Session containment: protected places, open paths, scratch directory,
    /// never-grantable paths, user namespaces.
    pub containment: super::contain::ContainmentConfig,
    /// Each session's resource limits (`pids.max`, `memory.max` of its cgroup).
    pub limits: super::limits::LimitsConfig,
    /// Where the trusted state lives: SQLite on this host or a fleet's PostgreSQL.
    pub store: StoreConfig,
    /// Holding a miss until it is decided.
    pub hold: HoldConfig,
    /// The daemon's niceness (-20 to 19; what it starts gets back the niceness it started
    /// with): held accesses wait for the daemon, so it runs ahead of the sessions that make
    /// it work ([`super::priority`]).
    pub nice: i32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            state_dir: PathBuf::from("/var/lib/pincer"),
            socket: PathBuf::from(DEFAULT_SOCKET),
            audit_log: PathBuf::from("/var/log/pincer/audit.jsonl"),
            pin_dir: PathBuf::from(crate::kernel::DEFAULT_PIN_DIR),
            cgroup_parent: PathBuf::from("/sys/fs/cgroup/pincer"),
            on_miss: OnMiss::Decide,
            default_roots: vec![],
            warm_up: true,
            decider: DeciderConfig::default(),
            escalation: EscalationConfig::default(),
            containment: Default::default(),
            limits: Default::default(),
            store: Default::default(),
            hold: Default::default(),
            nice: -10,
        }
    }
}

impl Config {
    /// Parses a configuration text; `path` names the file in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let cfg: Config = toml::from_str(text).map_err(|e| ConfigError::Parse { path: path.into(), source: Box::new(e) })?;
        cfg.check(path)?;
        Ok(cfg)
    }

    /// Reads the configuration at `path`. A missing file at the default location gives the
    /// defaults; a missing file named explicitly is an error.
    pub fn load(path: Option<&Path>) -> Result<Self, ConfigError> {
        let explicit = path.map(Path::to_path_buf).or_else(|| std::env::var_os("PINCER_CONFIG").map(PathBuf::from));
        let p = explicit.clone().unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG));
        match std::fs::read_to_string(&p) {
            Ok(text) => Self::parse(&text, &p),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && explicit.is_none() => Ok(Config::default()),
            Err(source) => Err(ConfigError::Read { path: p, source }),
        }
    }

    fn check(&self, path: &Path) -> Result<(), ConfigError> {
        let bad = |field, problem: &str| Err(ConfigError::Value { path: path.into(), field, problem: problem.into() });
        for (field, p) in [("state_dir", &self.state_dir), ("socket", &self.socket), ("audit_log", &self.audit_log), ("pin_dir", &self.pin_dir), ("cgroup_parent", &self.cgroup_parent)] {
            if !p.is_absolute() {
                return bad(field, "must be an absolute path");
            }
        }
        match self.containment.check() {
            Ok(carved) => {
                for (open, never) in carved {
                    tracing::info!(open_path = %open, never = %never, "a never-grantable place inside an open path stays refused");
                }
            }
            Err(problem) => return bad("containment.open_paths", &problem),
        }
        if self.default_roots.iter().any(|r| !r.is_absolute()) {
            return bad("default_roots", "every root must be an absolute path");
        }
        if !(1..=600_000).contains(&self.hold.max_ms) {
            return bad("hold.max_ms", "must be between 1 and 600000");
        }
        if !(1..=self.hold.max_ms).contains(&self.hold.locked_max_ms) {
            return bad("hold.locked_max_ms", "must be between 1 and hold.max_ms");
        }
        if !(1..=pincer_common::HOLD_MAX).contains(&self.hold.per_session) {
            return bad("hold.per_session", "must be between 1 and 4096");
        }
        if !self.hold.mountpoint.is_absolute() {
            return bad("hold.mountpoint", "must be an absolute path");
        }
        if !(-20..=19).contains(&self.nice) {
            return bad("nice", "must be between -20 and 19");
        }
        if self.escalation.timeout_secs == 0 {
            return bad("escalation.timeout_secs", "must be at least 1");
        }
        if self.decider.timeout_secs == 0 {
            return bad("decider.timeout_secs", "must be at least 1");
        }
        if self.decider.backend != Backend::Offline && self.decider.model.trim().is_empty() {
            return bad("decider.model", "a model name is required for the openai and anthropic backends");
        }
        if let Err((field, e)) = self.limits.check() {
            return bad(field, &e.to_string());
        }
        if self.store.backend == StoreBackend::Postgres {
            if self.store.url.trim().is_empty() {
                return bad("store.url", "the postgres backend needs a connection URL");
            }
            if let Err(e) = self.store.url.parse::<postgres::Config>() {
                return bad("store.url", &e.to_string());
            }
            if self.store.url.parse::<postgres::Config>().is_ok_and(|c| c.get_password().is_some()) {
                return bad("store.url", "holds a password; put it in store.password_file (root-only) instead");
            }
            // Every identity names a database role (and so do unmapped `name@host` ones).
            for id in self.store.users.values().chain(std::iter::once(&format!("user@{}", self.store.host_name()))) {
                if let Err(e) = crate::store::pg::user_role(id) {
                    return bad("store.users", &e.to_string());
                }
            }
        }
        for (field, p) in [("store.ca_file", &self.store.ca_file), ("store.password_file", &self.store.password_file)] {
            if p.as_ref().is_some_and(|p| !p.is_absolute()) {
                return bad(field, "must be an absolute path");
            }
        }
        Ok(())
    }

    /// The configuration as a file says it (what [`Config::load`] reads back).
    pub fn to_toml(&self) -> Result<String, toml::ser::Error> {
        toml::to_string(self)
    }

    /// The trusted store this configuration names.
    pub fn store_spec(&self) -> crate::store::StoreSpec {
        match self.store.backend {
            StoreBackend::Sqlite => crate::store::StoreSpec::Sqlite(self.state_dir.join("state.db")),
            StoreBackend::Postgres => crate::store::StoreSpec::Postgres(crate::store::PgSettings {
                url: self.store.url.clone(),
                tls: self.store.tls,
                ca_file: self.store.ca_file.clone(),
                password_file: self.store.password_file.clone(),
            }),
        }
    }

    /// How long a worker's request waits for the user.
    pub fn escalation_timeout(&self) -> Duration {
        Duration::from_secs(self.escalation.timeout_secs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_config_file_parses_to_the_defaults() {
        let text = include_str!("../../../etc/pincer.toml");
        let cfg = Config::parse(text, Path::new("etc/pincer.toml")).unwrap();
        assert_eq!(cfg, Config::default());
    }

    #[test]
    fn unknown_key_and_bad_value_are_named() {
        let e = Config::parse("on_mis = \"decide\"\n", Path::new("x.toml")).unwrap_err().to_string();
        assert!(e.contains("on_mis") && e.contains("x.toml"), "{e}");
        let e = Config::parse("on_miss = \"maybe\"\n", Path::new("x.toml")).unwrap_err().to_string();
        assert!(e.contains("maybe"), "{e}");
        let e = Config::parse("socket = \"rel.sock\"\n", Path::new("x.toml")).unwrap_err().to_string();
        assert!(e.contains("socket"), "{e}");
        let e = Config::parse("[decider]\nbackend = \"openai\"\n", Path::new("x.toml")).unwrap_err().to_string();
        assert!(e.contains("decider.model"), "{e}");
        let e = Config::parse("[store]\nbackend = \"postgres\"\n", Path::new("x.toml")).unwrap_err().to_string();
        assert!(e.contains("store.url"), "{e}");
        let e = Config::parse("[store]\nbackend = \"postgres\"\nurl = \"postgresql://u:pw@db/x\"\n", Path::new("x.toml")).unwrap_err().to_string();
        assert!(e.contains("store.url") && e.contains("password_file"), "{e}");
        let e = Config::parse("[store]\nbackend = \"postgres\"\nurl = \"host=db user=p\"\nhost = \"h\"\n[store.users]\nann = \"ann\\\" OR\"\n", Path::new("x.toml")).unwrap_err().to_string();
        assert!(e.contains("store.users"), "an identity that cannot name a role: {e}");
        let e = Config::parse("[store]\nbackend = \"mysql\"\n", Path::new("x.toml")).unwrap_err().to_string();
        assert!(e.contains("mysql"), "{e}");
        let e = Config::parse("[limits]\nmemory_max = \"lots\"\n", Path::new("x.toml")).unwrap_err().to_string();
        assert!(e.contains("limits.memory_max") && e.contains("lots"), "{e}");
        let e = Config::parse("nice = -21\n", Path::new("x.toml")).unwrap_err().to_string();
        assert!(e.contains("nice") && e.contains("-20"), "{e}");
    }

    #[test]
    fn missing_explicit_file_is_an_error() {
        let e = Config::load(Some(Path::new("/nonexistent/pincer.toml"))).unwrap_err();
        assert!(matches!(e, ConfigError::Read { .. }));
    }
}
