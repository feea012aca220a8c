//! Resource limits of a session (`[limits]`): every session's cgroup gets `pids.max` and
//! `memory.max`, and its scratch directory and its layers are each a filesystem of its own of
//! at most `scratch_max`, so a session that forks, allocates or writes without end stops at
//! its own limit while the user's processes outside it keep working. What a session leaves
//! behind (its kept layers) takes at most `kept_max` of the space the user's processes share.
//!
//! The worker runs with the user's uid, so its processes count against the user's process
//! limit (`RLIMIT_NPROC`) and share the host's memory: without a limit, a thread bomb in a
//! session leaves the user's own services unable to fork. The limits are the cgroup's, so
//! they hold for everything the session starts, whatever its uid or namespaces.
//!
//! The `pids` and `memory` controllers are enabled in `cgroup.subtree_control` of every
//! cgroup from the cgroup2 root down to `cgroup_parent`; if that is refused (e.g. a parent
//! that holds processes itself), the session is not started.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// `[limits]` of `pincer.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Tasks (processes and threads) a session may hold at once: its cgroup's `pids.max`.
    /// 0 means no limit.
    pub pids_max: u64,
    /// Memory a session may use: its cgroup's `memory.max`, as bytes with an optional
    /// `K`, `M`, `G` or `T` suffix (powers of 1024), a share of the host's memory (`"75%"`),
    /// or `"max"` for no limit.
    pub memory_max: String,
    /// The size of a session's scratch directory (`TMPDIR`), a tmpfs of its own (its pages
    /// count against `memory_max` as well), written as `memory_max` is; `"max"`: a plain
    /// directory on the filesystem of `scratch_parent`, whose space the session then shares
    /// with the user's processes (a `/tmp` it fills is full for them too). The session's
    /// layers over read-write open paths get a tmpfs of this size as well (or, with `"max"`,
    /// a plain directory beside the scratch).
    pub scratch_max: String,
    /// The most that the layers a session leaves behind (of open paths with `retain`: an
    /// agent's transcripts) take on `scratch_parent`'s filesystem when they are copied out of
    /// the session's tmpfs, written as `memory_max` is; never more than half of that
    /// filesystem's free space at the time. Files past the bound are not kept.
    pub kept_max: String,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self { pids_max: 4096, memory_max: "75%".into(), scratch_max: "25%".into(), kept_max: "256M".into() }
    }
}

/// Why a session's limits could not be set.
#[derive(Debug, thiserror::Error)]
pub enum LimitError {
    /// `memory_max`, `scratch_max` or `kept_max` is not a size, a percentage or `max`.
    #[error("{0:?}: expected bytes with an optional K, M, G or T suffix, a percentage such as \"75%\", or \"max\"")]
    MemorySyntax(String),
    /// The host's memory size could not be read for a percentage.
    #[error("cannot read the host's memory size from /proc/meminfo for the limit {0:?}")]
    MemTotal(String),
    /// The session's directory is not a cgroup (not on the cgroup2 filesystem).
    #[error("{} is not a cgroup (no cgroup.controllers): limits cannot be set; put cgroup_parent on the cgroup2 filesystem or set [limits] pids_max = 0 and memory_max = \"max\"", .0.display())]
    NotCgroup(PathBuf),
    /// A controller is not available in the cgroup2 hierarchy.
    #[error("the cgroup {} does not offer the {controller} controller (cgroup.controllers: {available:?}); the session's limits cannot be set", path.display())]
    Controller {
        /// The cgroup that lacks it.
        path: PathBuf,
        /// The controller.
        controller: &'static str,
        /// What the cgroup offers.
        available: String,
    },
    /// A cgroup file could not be read or written.
    #[error("cannot {op} {}", path.display())]
    Io {
        /// `read` or `write`.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

/// The controllers the limits need.
const CONTROLLERS: [&str; 2] = ["pids", "memory"];

impl LimitsConfig {
    /// No limit at all (`pids_max = 0`, `memory_max = "max"`): nothing is written.
    pub fn unlimited() -> Self {
        Self { pids_max: 0, memory_max: "max".into(), scratch_max: "max".into(), kept_max: "max".into() }
    }

    /// Whether this sets no cgroup limit (the scratch's size is not the cgroup's).
    pub fn is_unlimited(&self) -> bool {
        self.pids_max == 0 && self.memory_max.trim() == "max"
    }

    /// Checks the configuration without touching the system (at config load): the name of
    /// the field in error with its error.
    pub fn check(&self) -> Result<(), (&'static str, LimitError)> {
        parse_memory(&self.memory_max, 1 << 30).map_err(|e| ("limits.memory_max", e))?;
        parse_memory(&self.kept_max, 1 << 30).map_err(|e| ("limits.kept_max", e))?;
        match parse_memory(&self.scratch_max, 1 << 30) {
            Ok(Some(0)) => Err(LimitError::MemorySyntax(self.scratch_max.clone())),
            r => r.map(|_| ()),
        }
        .map_err(|e| ("limits.scratch_max", e))
    }

    /// The value written to `memory.max`: bytes, or `max`.
    pub fn memory_max_value(&self) -> Result<String, LimitError> {
        Ok(match sized(&self.memory_max)? {
            Some(bytes) => bytes.to_string(),
            None => "max".into(),
        })
    }

    /// The size of a session's scratch filesystem in bytes (`None`: a plain directory).
    pub fn scratch_bytes(&self) -> Result<Option<u64>, LimitError> {
        sized(&self.scratch_max)
    }

    /// The most bytes a session's kept layers take when copied out (`None`: no bound of
    /// its own; half the free space still bounds it).
    pub fn kept_bytes(&self) -> Result<Option<u64>, LimitError> {
        sized(&self.kept_max)
    }

    /// Enables the controllers from the cgroup2 root down to `parent` and writes the limits
    /// into the session's cgroup `cgroup` (a child of `parent`).
    /// With limits configured, a `cgroup` that is no cgroup (no `cgroup.controllers`) is an
    /// error, never a session without limits.
    pub fn apply(&self, parent: &Path, cgroup: &Path) -> Result<(), LimitError> {
        if self.is_unlimited() {
            return Ok(());
        }
        if !cgroup.join("cgroup.controllers").is_file() {
            return Err(LimitError::NotCgroup(cgroup.to_path_buf()));
        }
        enable_controllers(parent)?;
        let pids = if self.pids_max == 0 { "max".to_string() } else { self.pids_max.to_string() };
        write(&cgroup.join("pids.max"), &pids)?;
        write(&cgroup.join("memory.max"), &self.memory_max_value()?)?;
        Ok(())
    }
}

/// A size as configured: `Some(bytes)`, or `None` for `max`; a percentage is of the host's
/// memory.
fn sized(text: &str) -> Result<Option<u64>, LimitError> {
    let total = if text.trim().ends_with('%') { mem_total().ok_or_else(|| LimitError::MemTotal(text.to_string()))? } else { 0 };
    parse_memory(text, total)
}

/// Parses `memory_max`: `Some(bytes)`, or `None` for `max`; a percentage is of `total`.
fn parse_memory(text: &str, total: u64) -> Result<Option<u64>, LimitError> {
    let bad = || LimitError::MemorySyntax(text.to_string());
    let t = text.trim();
    if t == "max" {
        return Ok(None);
    }
    if let Some(pct) = t.strip_suffix('%') {
        let pct: f64 = pct.trim().parse().map_err(|_| bad())?;
        if !(pct > 0.0 && pct <= 100.0) {
            return Err(bad());
        }
        return Ok(Some(((total as f64) * pct / 100.0) as u64));
    }
    let (digits, unit) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => (&t[..i], t[i..].trim()),
        None => (t, ""),
    };
    let shift = match unit {
        "" => 0,
        "K" | "k" | "KiB" => 10,
        "M" | "m" | "MiB" => 20,
        "G" | "g" | "GiB" => 30,
        "T" | "t" | "TiB" => 40,
        _ => return Err(bad()),
    };
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let bytes = n.checked_mul(1u64 << shift).ok_or_else(bad)?;
    if bytes == 0 {
        return Err(bad());
    }
    Ok(Some(bytes))
}

/// `MemTotal` of `/proc/meminfo` in bytes.
fn mem_total() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The cgroups from the cgroup2 root (the topmost directory with `cgroup.controllers`) down
/// to `dir`, root first.
fn ancestry(dir: &Path) -> Vec<PathBuf> {
    let mut chain: Vec<PathBuf> = dir.ancestors().take_while(|p| p.join("cgroup.controllers").is_file()).map(Path::to_path_buf).collect();
    chain.reverse();
    chain
}

/// Enables [`CONTROLLERS`] in `cgroup.subtree_control` of every cgroup from the root down
/// to `parent`, so `parent`'s children have them.
fn enable_controllers(parent: &Path) -> Result<(), LimitError> {
    for dir in ancestry(parent) {
        let available = read(&dir.join("cgroup.controllers"))?;
        let enabled = read(&dir.join("cgroup.subtree_control"))?;
        for c in CONTROLLERS {
            if !available.split_whitespace().any(|a| a == c) {
                return Err(LimitError::Controller { path: dir.clone(), controller: c, available: available.trim().to_string() });
            }
            if !enabled.split_whitespace().any(|e| e == c) {
                write(&dir.join("cgroup.subtree_control"), &format!("+{c}"))?;
            }
        }
    }
    Ok(())
}

fn read(path: &Path) -> Result<String, LimitError> {
    std::fs::read_to_string(path).map_err(|source| LimitError::Io { op: "read", path: path.into(), source })
}

fn write(path: &Path, value: &str) -> Result<(), LimitError> {
    std::fs::write(path, value).map_err(|source| LimitError::Io { op: "write", path: path.into(), source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_sizes_parse_with_units_percentages_and_max() {
        assert_eq!(parse_memory("max", 0).unwrap(), None);
        assert_eq!(parse_memory("1048576", 0).unwrap(), Some(1 << 20));
        assert_eq!(parse_memory("64M", 0).unwrap(), Some(64 << 20));
        assert_eq!(parse_memory("2 GiB", 0).unwrap(), Some(2 << 30));
        assert_eq!(parse_memory("75%", 1000).unwrap(), Some(750));
        for bad in ["", "0", "-1", "12X", "150%", "0%", "%", "M", "99999999999999999999T"] {
            let e = parse_memory(bad, 1000).unwrap_err().to_string();
            assert!(e.contains(&format!("{bad:?}")) && e.contains("expected bytes"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_defaults_limit_both_and_check() {
        let d = LimitsConfig::default();
        assert!(d.pids_max > 0 && d.memory_max != "max");
        d.check().unwrap();
        // A percentage becomes bytes of this host's memory.
        let bytes: u64 = d.memory_max_value().unwrap().parse().unwrap();
        assert!(bytes > 0 && bytes < mem_total().unwrap());
        let scratch = d.scratch_bytes().unwrap().expect("the default scratch is a filesystem of its own");
        assert!(scratch > 0 && scratch < bytes, "the scratch fits in the session's memory: {scratch}");
        assert_eq!(LimitsConfig::unlimited().scratch_bytes().unwrap(), None);
        // A scratch of size 0 would be a tmpfs without limit: refused with its field.
        let (field, e) = LimitsConfig { scratch_max: "0%".into(), ..d.clone() }.check().unwrap_err();
        assert_eq!(field, "limits.scratch_max", "{e}");
        // What a session leaves behind is bounded by default, and a bad bound is named.
        assert_eq!(d.kept_bytes().unwrap(), Some(256 << 20));
        let (field, e) = LimitsConfig { kept_max: "lots".into(), ..d.clone() }.check().unwrap_err();
        assert_eq!(field, "limits.kept_max", "{e}");
    }

    #[test]
    fn controllers_are_enabled_from_the_root_down_and_a_missing_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("cg");
        let parent = root.join("pincer");
        std::fs::create_dir_all(&parent).unwrap();
        for d in [&root, &parent] {
            std::fs::write(d.join("cgroup.controllers"), "cpu memory pids\n").unwrap();
            std::fs::write(d.join("cgroup.subtree_control"), "").unwrap();
        }
        assert_eq!(ancestry(&parent), [root.clone(), parent.clone()]);
        let session = parent.join("s1");
        std::fs::create_dir(&session).unwrap();
        let limits = LimitsConfig { pids_max: 64, memory_max: "64M".into(), scratch_max: "max".into(), kept_max: "max".into() };
        let e = limits.apply(&parent, &session).unwrap_err().to_string();
        assert!(e.contains("not a cgroup") && e.contains("s1"), "{e}");
        LimitsConfig::unlimited().apply(&parent, &session).unwrap();
        assert!(std::fs::read_dir(&session).unwrap().next().is_none(), "no limit, nothing written");
        std::fs::write(session.join("cgroup.controllers"), "").unwrap();
        limits.apply(&parent, &session).unwrap();
        assert_eq!(std::fs::read_to_string(session.join("pids.max")).unwrap(), "64");
        assert_eq!(std::fs::read_to_string(session.join("memory.max")).unwrap(), (64u64 << 20).to_string());
        // (A plain file keeps the last write: the memory controller was enabled last.)
        assert_eq!(std::fs::read_to_string(parent.join("cgroup.subtree_control")).unwrap(), "+memory");
        std::fs::write(parent.join("cgroup.controllers"), "cpu\n").unwrap();
        let e = limits.apply(&parent, &session).unwrap_err().to_string();
        assert!(e.contains("pids controller") && e.contains("pincer"), "{e}");
    }
}
