//! The corpus format's trusted part (history tasks, policies, approvals) and its validating
//! reader, below both the trusted store ([`crate::store`], which imports histories and
//! policies) and the evaluation ([`crate::eval`], which reads whole corpora). Every problem
//! is collected (not only the first) and reported with its file, line and field; unknown
//! fields are ignored, as the format allows.

use crate::access::Access;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::path::PathBuf;

pub(crate) struct Problems<'a>(pub(crate) &'a [Problem]);

impl fmt::Display for Problems<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for p in self.0 {
            writeln!(f, "  {p}")?;
        }
        Ok(())
    }
}

/// One validation problem, located by file, line (1-based, when the file is line-based) and field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file the problem is in.
    pub file: PathBuf,
    /// The 1-based line, for JSON Lines files.
    pub line: Option<usize>,
    /// The field path, e.g. `sessions[0].steps[2].access`; empty for the whole line or file.
    pub field: String,
    /// What is wrong.
    pub kind: ProblemKind,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        if !self.field.is_empty() {
            write!(f, ": field `{}`", self.field)?;
        }
        write!(f, ": {}", self.kind)
    }
}

/// What is wrong with a corpus entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProblemKind {
    /// A required file is missing or unreadable.
    #[error("cannot read file: {0}")]
    Unreadable(String),
    /// The line or file is not valid JSON / TOML.
    #[error("not valid {format}: {message}")]
    Syntax {
        /// `JSON` or `TOML`.
        format: &'static str,
        /// The parser's message.
        message: String,
    },
    /// A required field is absent.
    #[error("missing required field")]
    Missing,
    /// A field has the wrong JSON type.
    #[error("expected {0}")]
    WrongType(&'static str),
    /// A field has a value outside its allowed set.
    #[error("bad value {value:?} (expected {expected})")]
    BadValue {
        /// The value found.
        value: String,
        /// What is allowed.
        expected: &'static str,
    },
    /// An access type that is not read, write, create, delete or list.
    #[error("unknown access {0:?} (expected read, write, create, delete or list)")]
    UnknownAccess(String),
    /// A path that is empty, absolute, holds NUL, `.`/`..` or empty segments.
    #[error("path {path:?} escapes or is not a workspace path: {reason}")]
    BadPath {
        /// The path.
        path: String,
        /// Why it is rejected.
        reason: &'static str,
    },
    /// A glob pattern where only a literal path is allowed.
    #[error("glob {0:?} is not allowed here (globs appear only in policy rules and approvals)")]
    GlobNotAllowed(String),
    /// A glob that does not parse.
    #[error("invalid glob {glob:?}: {message}")]
    BadGlob {
        /// The glob.
        glob: String,
        /// The parser's message.
        message: String,
    },
    /// `needs` names an index that is not an earlier request of the same session.
    #[error("needs index {0} is not an earlier request of this session")]
    NeedsNotEarlierRequest(u64),
    /// A read, write, list or delete of a path that does not exist at that point.
    #[error("{access} of {path:?}, which does not exist at this point")]
    MissingPath {
        /// The access.
        access: Access,
        /// The path.
        path: String,
    },
    /// A create of a path that already exists.
    #[error("create of {0:?}, which already exists")]
    CreateOfExisting(String),
    /// A create whose parent directory does not exist.
    #[error("create of {0:?}, whose parent directory does not exist")]
    ParentMissing(String),
    /// A setup op on a path that does not allow it.
    #[error("setup {op} of {path:?}: {reason}")]
    BadSetup {
        /// The op.
        op: &'static str,
        /// The path.
        path: String,
        /// Why it fails.
        reason: &'static str,
    },
    /// The monitored access is never requested by any step of the sample.
    #[error("monitored {access} of {path:?} is never requested by a step of this sample")]
    MonitoredNeverRequested {
        /// The path.
        path: String,
        /// The access.
        access: Access,
    },
    /// `day` went down from one history line to the next.
    #[error("day {day} is before the previous line's day {previous}")]
    DayDecreasing {
        /// This line's day.
        day: u64,
        /// The previous line's day.
        previous: u64,
    },
    /// A sample id, history session or policy id used twice.
    #[error("duplicate {what} {value:?} (first on line {first_line})")]
    Duplicate {
        /// `id` or `session`.
        what: &'static str,
        /// The repeated value.
        value: String,
        /// Where it first appeared.
        first_line: usize,
    },
    /// A sample dated before the end of the history.
    #[error("sample day {day} is before the history's last day {last}")]
    SampleBeforeHistory {
        /// The sample's day.
        day: u64,
        /// The history's last day.
        last: u64,
    },
    /// The persona id does not equal its folder name.
    #[error("id {id:?} does not equal the folder name {folder:?}")]
    IdMismatch {
        /// The id in persona.toml.
        id: String,
        /// The folder name.
        folder: String,
    },
    /// A field that only attack samples (or only MP samples) may carry.
    #[error("{0}")]
    Inconsistent(&'static str),
    /// A list that must not be empty is empty.
    #[error("must not be empty")]
    Empty,
    /// The workspace holds something other than files and folders (e.g. a symlink).
    #[error("not a regular file or folder ({0})")]
    NotRegular(&'static str),
}

/// A path and an access type: one access annotation, approval, request or monitored access.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PathAccess {
    /// The workspace-relative path (a trailing `/` names a directory).
    pub path: String,
    /// The access type.
    pub access: Access,
}

/// An approval the user granted by hand in a past task (the path may be a glob).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    /// A literal path or a gitignore-style glob.
    pub path: String,
    /// The access types approved.
    pub access: Vec<Access>,
}

/// One past task of the trusted history.
#[derive(Debug, Clone)]
pub struct HistoryTask {
    /// The day of the task (non-decreasing through the file).
    pub day: u64,
    /// The unique session id.
    pub session: String,
    /// What the user asked, verbatim.
    pub prompt: String,
    /// What the task touched.
    pub accesses: Vec<PathAccess>,
    /// Permissions the user granted by hand.
    pub approvals: Vec<Approval>,
}

/// Permission of a policy rule or a policy entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Permission {
    /// The access is allowed.
    Allow,
    /// The access is denied.
    Deny,
    /// The user must be asked.
    AskUser,
}

impl Permission {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::Allow => "allow",
            Permission::Deny => "deny",
            Permission::AskUser => "ask_user",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s {
            "allow" => Some(Permission::Allow),
            "deny" => Some(Permission::Deny),
            "ask_user" => Some(Permission::AskUser),
            _ => None,
        }
    }
}


/// A structured rule of a user policy.
#[derive(Debug, Clone)]
pub struct Rule {
    /// A gitignore-style glob over workspace paths.
    pub path_glob: String,
    /// The access types the rule covers.
    pub access: Vec<Access>,
    /// What the rule says.
    pub permission: Permission,
}

/// One of the user's own policies.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The policy id.
    pub id: String,
    /// The policy as the user wrote it.
    pub text: String,
    /// The same intent as structured rules, when the user wrote them.
    pub rules: Vec<Rule>,
}

/// Reads and validates a `history.jsonl` file: every line's fields, and across lines that
/// days never decrease and sessions are unique. Every problem is pushed with its file, line
/// and field; the valid tasks come with their line numbers. `pincer import` and `pincer
/// eval` both read histories through this function.
pub fn load_history(path: &Path, problems: &mut Vec<Problem>) -> Vec<(usize, HistoryTask)> {
    let history = read_lines(path, problems, parse_history);
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    let mut prev: Option<u64> = None;
    for (line, h) in &history {
        if let Some(p) = prev {
            if h.day < p {
                problems.push(Problem { file: path.to_path_buf(), line: Some(*line), field: "day".into(), kind: ProblemKind::DayDecreasing { day: h.day, previous: p } });
            }
        }
        prev = Some(h.day);
        if let Some(first) = seen.get(h.session.as_str()) {
            problems.push(Problem {
                file: path.to_path_buf(),
                line: Some(*line),
                field: "session".into(),
                kind: ProblemKind::Duplicate { what: "session", value: h.session.clone(), first_line: *first },
            });
        } else {
            seen.insert(&h.session, *line);
        }
    }
    history
}

/// Reads and validates a `policies.jsonl` file: every line's fields, and that ids are
/// unique. Every problem is pushed with its file, line and field. `pincer import` and
/// `pincer eval` both read policies through this function.
pub fn load_policies(path: &Path, problems: &mut Vec<Problem>) -> Vec<(usize, Policy)> {
    let policies = read_lines(path, problems, parse_policy);
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (line, p) in &policies {
        if let Some(first) = seen.get(p.id.as_str()) {
            problems.push(Problem { file: path.to_path_buf(), line: Some(*line), field: "id".into(), kind: ProblemKind::Duplicate { what: "id", value: p.id.clone(), first_line: *first } });
        } else {
            seen.insert(&p.id, *line);
        }
    }
    policies
}

/// The problems as lines of text, one per problem, each naming its file, line and field.
pub fn describe(problems: &[Problem]) -> String {
    Problems(problems).to_string()
}

/// Field-level problem collector for one line.
pub(crate) struct Ctx<'a> {
    pub(crate) file: &'a Path,
    pub(crate) line: usize,
    pub(crate) problems: &'a mut Vec<Problem>,
}

impl Ctx<'_> {
    pub(crate) fn push(&mut self, field: &str, kind: ProblemKind) {
        self.problems.push(Problem { file: self.file.to_path_buf(), line: Some(self.line), field: field.to_string(), kind });
    }

    pub(crate) fn get<'v>(&mut self, obj: &'v Value, prefix: &str, key: &str, required: bool) -> Option<&'v Value> {
        match obj.get(key) {
            None | Some(Value::Null) => {
                if required {
                    self.push(&join(prefix, key), ProblemKind::Missing);
                }
                None
            }
            Some(v) => Some(v),
        }
    }

    pub(crate) fn string(&mut self, obj: &Value, prefix: &str, key: &str, required: bool) -> Option<String> {
        match self.get(obj, prefix, key, required)? {
            Value::String(s) => Some(s.clone()),
            _ => {
                self.push(&join(prefix, key), ProblemKind::WrongType("a string"));
                None
            }
        }
    }

    pub(crate) fn uint(&mut self, obj: &Value, prefix: &str, key: &str, required: bool) -> Option<u64> {
        let v = self.get(obj, prefix, key, required)?;
        match v.as_u64() {
            Some(n) => Some(n),
            None => {
                self.push(&join(prefix, key), ProblemKind::WrongType("a non-negative integer"));
                None
            }
        }
    }

    pub(crate) fn array<'v>(&mut self, obj: &'v Value, prefix: &str, key: &str, required: bool) -> Option<&'v Vec<Value>> {
        match self.get(obj, prefix, key, required)? {
            Value::Array(a) => Some(a),
            _ => {
                self.push(&join(prefix, key), ProblemKind::WrongType("an array"));
                None
            }
        }
    }

    pub(crate) fn access(&mut self, v: &Value, field: &str) -> Option<Access> {
        match v {
            Value::String(s) => match s.parse::<Access>() {
                Ok(a) => Some(a),
                Err(_) => {
                    self.push(field, ProblemKind::UnknownAccess(s.clone()));
                    None
                }
            },
            _ => {
                self.push(field, ProblemKind::WrongType("an access type string"));
                None
            }
        }
    }

    /// An access given as one string or an array of strings.
    pub(crate) fn accesses(&mut self, obj: &Value, prefix: &str, key: &str) -> Option<Vec<Access>> {
        let field = join(prefix, key);
        match self.get(obj, prefix, key, true)? {
            Value::Array(a) => {
                let mut out = Vec::new();
                let mut ok = true;
                for (i, v) in a.iter().enumerate() {
                    match self.access(v, &format!("{field}[{i}]")) {
                        Some(x) => out.push(x),
                        None => ok = false,
                    }
                }
                if a.is_empty() {
                    self.push(&field, ProblemKind::Empty);
                    ok = false;
                }
                ok.then_some(out)
            }
            v => self.access(v, &field).map(|a| vec![a]),
        }
    }

    /// A literal workspace path.
    pub(crate) fn path(&mut self, obj: &Value, prefix: &str, key: &str) -> Option<String> {
        let p = self.string(obj, prefix, key, true)?;
        let field = join(prefix, key);
        if let Err(reason) = check_path(&p) {
            self.push(&field, ProblemKind::BadPath { path: p, reason });
            return None;
        }
        if is_glob(&p) {
            self.push(&field, ProblemKind::GlobNotAllowed(p));
            return None;
        }
        Some(p)
    }

    /// A path or glob (approvals and rules).
    pub(crate) fn glob(&mut self, obj: &Value, prefix: &str, key: &str) -> Option<String> {
        let p = self.string(obj, prefix, key, true)?;
        let field = join(prefix, key);
        if let Err(reason) = check_path(&p) {
            self.push(&field, ProblemKind::BadPath { path: p, reason });
            return None;
        }
        if let Err(e) = globset::Glob::new(&p) {
            self.push(&field, ProblemKind::BadGlob { glob: p, message: e.kind().to_string() });
            return None;
        }
        Some(p)
    }

    pub(crate) fn path_access(&mut self, v: &Value, prefix: &str) -> Option<PathAccess> {
        if !v.is_object() {
            self.push(prefix, ProblemKind::WrongType("an object"));
            return None;
        }
        let path = self.path(v, prefix, "path");
        let access = self.get(v, prefix, "access", true).and_then(|a| self.access(a, &join(prefix, "access")));
        Some(PathAccess { path: path?, access: access? })
    }
}

pub(crate) fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

/// Checks that `p` is a relative, `/`-separated workspace path that cannot escape the workspace.
pub fn check_path(p: &str) -> Result<(), &'static str> {
    if p.is_empty() {
        return Err("empty path");
    }
    if p.contains('\0') {
        return Err("contains NUL");
    }
    if p.starts_with('/') {
        return Err("absolute path");
    }
    let body = p.strip_suffix('/').unwrap_or(p);
    for seg in body.split('/') {
        match seg {
            "" => return Err("empty segment"),
            "." | ".." => return Err("`.` or `..` segment"),
            _ => {}
        }
    }
    Ok(())
}

pub use crate::glob::is_glob;

pub(crate) fn read_lines<T>(path: &Path, problems: &mut Vec<Problem>, parse: fn(&Value, &mut Ctx) -> Option<T>) -> Vec<(usize, T)> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            problems.push(Problem { file: path.to_path_buf(), line: None, field: String::new(), kind: ProblemKind::Unreadable(e.to_string()) });
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for (n, v) in crate::jsonl::parse_lines::<Value>(&text) {
        let mut ctx = Ctx { file: path, line: n, problems };
        match v {
            Err(e) => ctx.push("", ProblemKind::Syntax { format: "JSON", message: e.to_string() }),
            Ok(v) if !v.is_object() => ctx.push("", ProblemKind::WrongType("a JSON object per line")),
            Ok(v) => {
                let before = ctx.problems.len();
                if let Some(t) = parse(&v, &mut ctx) {
                    if ctx.problems.len() == before {
                        out.push((n, t));
                    }
                }
            }
        }
    }
    out
}

fn parse_history(v: &Value, c: &mut Ctx) -> Option<HistoryTask> {
    let day = c.uint(v, "", "day", true);
    let session = c.string(v, "", "session", true);
    let prompt = c.string(v, "", "prompt", true);
    let mut accesses = Vec::new();
    if let Some(a) = c.array(v, "", "accesses", true) {
        for (i, x) in a.iter().enumerate() {
            if let Some(pa) = c.path_access(x, &format!("accesses[{i}]")) {
                accesses.push(pa);
            }
        }
    }
    let mut approvals = Vec::new();
    if let Some(a) = c.array(v, "", "approvals", false) {
        for (i, x) in a.iter().enumerate() {
            let prefix = format!("approvals[{i}]");
            if !x.is_object() {
                c.push(&prefix, ProblemKind::WrongType("an object"));
                continue;
            }
            let path = c.glob(x, &prefix, "path");
            let access = c.accesses(x, &prefix, "access");
            if let (Some(path), Some(access)) = (path, access) {
                approvals.push(Approval { path, access });
            }
        }
    }
    Some(HistoryTask { day: day?, session: session?, prompt: prompt?, accesses, approvals })
}

fn parse_policy(v: &Value, c: &mut Ctx) -> Option<Policy> {
    let id = c.string(v, "", "id", true);
    let text = c.string(v, "", "text", true);
    let mut rules = Vec::new();
    if let Some(a) = c.array(v, "", "rules", false) {
        for (i, x) in a.iter().enumerate() {
            let prefix = format!("rules[{i}]");
            if !x.is_object() {
                c.push(&prefix, ProblemKind::WrongType("an object"));
                continue;
            }
            let glob = c.glob(x, &prefix, "path_glob");
            let access = c.accesses(x, &prefix, "access");
            let permission = match c.string(x, &prefix, "permission", true).as_deref() {
                Some("allow") => Some(Permission::Allow),
                Some("deny") => Some(Permission::Deny),
                Some("ask_user") => Some(Permission::AskUser),
                Some(other) => {
                    c.push(&join(&prefix, "permission"), ProblemKind::BadValue { value: other.into(), expected: "allow, deny or ask_user" });
                    None
                }
                None => None,
            };
            if let (Some(path_glob), Some(access), Some(permission)) = (glob, access, permission) {
                rules.push(Rule { path_glob, access, permission });
            }
        }
    }
    Some(Policy { id: id?, text: text?, rules })
}

/// Whether two workspace paths name the same object (a trailing `/` is ignored).
pub fn same_path(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}


#[cfg(test)]
mod tests {
    /// The code lines (comments left out) of the Rust files of `dir` under `src/`.
    fn code_lines(rel: &str) -> Vec<(String, String)> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src")
            .join(rel);
        let files: Vec<std::path::PathBuf> = if root.is_dir() {
            std::fs::read_dir(&root)
                .expect("source folder")
                .map(|e| e.expect("entry").path())
                .filter(|p| p.extension().is_some_and(|x| x == "rs"))
                .collect()
        } else {
            vec![root]
        };
        let mut out = Vec::new();
        for f in files {
            let text = std::fs::read_to_string(&f).expect("source file");
            for l in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
                out.push((f.display().to_string(), l.to_string()));
            }
        }
        out
    }

    #[test]
    fn the_twin_does_not_import_its_backends() {
        let bad: Vec<_> = code_lines("twin")
            .into_iter()
            .filter(|(_, l)| l.contains("crate::decider"))
            .collect();
        assert!(bad.is_empty(), "twin imports decider: {bad:?}");
    }

    #[test]
    fn the_store_and_the_format_do_not_import_the_evaluation() {
        let bad: Vec<_> = ["store.rs", "format.rs"]
            .iter()
            .flat_map(|f| code_lines(f))
            .filter(|(_, l)| l.contains("crate::eval") && !l.contains("\"crate::eval\""))
            .collect();
        assert!(bad.is_empty(), "imports eval: {bad:?}");
    }
}
