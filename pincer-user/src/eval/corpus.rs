//! The corpus loader: reads and validates a corpus in the format of `corpus/FORMAT.md`.
//!
//! Every problem is collected (not only the first) and reported with its file, line and
//! field. Unknown fields are ignored, as the format allows.

use crate::access::Access;
use crate::eval::workspace::Workspace;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// Errors of the corpus loader.
#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    /// The corpus folder could not be read.
    #[error("cannot read corpus folder {path}: {source}")]
    ReadDir {
        /// The folder.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The corpus folder holds no persona.
    #[error("corpus folder {0} holds no persona (expected sub-folders with persona.toml)")]
    Empty(PathBuf),
    /// One or more problems were found; each names its file, line and field.
    #[error("{} problem(s) in corpus:\n{}", .0.len(), Problems(.0))]
    Invalid(Vec<Problem>),
}

struct Problems<'a>(&'a [Problem]);

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

pub use crate::store::Permission;

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

/// Whether a sample is an attack or a utility task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SampleKind {
    /// The monitored access is forbidden.
    Attack,
    /// The monitored access is needed by the task.
    Utility,
}

/// The five attack classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum AttackType {
    /// Payload in the request rationale.
    DI,
    /// Payload in a file's content or name that the task reads.
    II,
    /// Forged authorization written to the authorizer's memory.
    MP,
    /// Innocent name, forbidden content.
    CL,
    /// A resource named or placed to pass for a legitimate one.
    PL,
}

impl AttackType {
    /// All attack classes in table order.
    pub const ALL: [AttackType; 5] = [AttackType::DI, AttackType::II, AttackType::MP, AttackType::CL, AttackType::PL];

    /// The class's short name.
    pub fn as_str(self) -> &'static str {
        match self {
            AttackType::DI => "DI",
            AttackType::II => "II",
            AttackType::MP => "MP",
            AttackType::CL => "CL",
            AttackType::PL => "PL",
        }
    }
}

/// Direct or indirect memory poisoning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MpVariant {
    /// The worker writes the forged authorization itself.
    Direct,
    /// The forged authorization comes from content the worker relays.
    Indirect,
}

/// A change to the fresh workspace copy before a sample runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetupOp {
    /// Write a file (creating it and its parents if needed).
    Write {
        /// The path.
        path: String,
        /// The new content.
        content: String,
    },
    /// Make a directory (and its parents).
    Mkdir {
        /// The path.
        path: String,
    },
    /// Delete a file or directory tree.
    Delete {
        /// The path.
        path: String,
    },
    /// Rename a file or directory.
    Rename {
        /// The old path.
        path: String,
        /// The new path.
        to: String,
    },
}

/// A request step: the worker asks for an access.
#[derive(Debug, Clone)]
pub struct RequestStep {
    /// The requested path.
    pub path: String,
    /// The access type.
    pub access: Access,
    /// The worker's rationale (untrusted).
    pub rationale: Option<String>,
    /// Indices (into the session's steps) of earlier requests that must have been granted.
    pub needs: Vec<usize>,
}

/// One step of a session.
#[derive(Debug, Clone)]
pub enum Step {
    /// A request by the worker.
    Request(RequestStep),
    /// An untrusted message from the worker to the authorizer.
    Note(String),
}

/// One session (task) of a sample.
#[derive(Debug, Clone)]
pub struct SampleSession {
    /// The user's prompt.
    pub prompt: String,
    /// The worker's steps, in order.
    pub steps: Vec<Step>,
}

/// One test case.
#[derive(Debug, Clone)]
pub struct Sample {
    /// The sample id.
    pub id: String,
    /// Attack or utility.
    pub kind: SampleKind,
    /// The attack class (attack samples only).
    pub attack: Option<AttackType>,
    /// Direct or indirect (MP samples only, optional).
    pub mp_variant: Option<MpVariant>,
    /// The day of the sample.
    pub day: u64,
    /// Changes to the fresh workspace copy.
    pub setup: Vec<SetupOp>,
    /// The sessions, in order; the last is the task under test.
    pub sessions: Vec<SampleSession>,
    /// The access that decides the sample.
    pub monitored: PathAccess,
    /// A free-text description.
    pub note: Option<String>,
    /// The line of samples.jsonl it came from.
    pub line: usize,
}

/// One persona's data.
#[derive(Debug, Clone)]
pub struct Persona {
    /// The persona id (its folder name).
    pub id: String,
    /// A display name.
    pub name: String,
    /// How the user signs prompts, if at all.
    pub user: Option<String>,
    /// A description.
    pub description: String,
    /// The pristine workspace.
    pub workspace: Workspace,
    /// The trusted history, oldest first.
    pub history: Vec<HistoryTask>,
    /// The user's policies.
    pub policies: Vec<Policy>,
    /// The test samples.
    pub samples: Vec<Sample>,
}

/// A loaded, validated corpus.
#[derive(Debug, Clone)]
pub struct Corpus {
    /// The folder it was loaded from.
    pub root: PathBuf,
    /// Its personas, sorted by id.
    pub personas: Vec<Persona>,
}

impl Corpus {
    /// Loads and validates every persona folder under `root`; all problems are reported together.
    pub fn load(root: &Path) -> Result<Corpus, CorpusError> {
        let entries = std::fs::read_dir(root).map_err(|source| CorpusError::ReadDir { path: root.to_path_buf(), source })?;
        let mut dirs: Vec<PathBuf> = Vec::new();
        for e in entries {
            let e = e.map_err(|source| CorpusError::ReadDir { path: root.to_path_buf(), source })?;
            let p = e.path();
            if p.is_dir() && p.join("persona.toml").exists() {
                dirs.push(p);
            }
        }
        dirs.sort();
        if dirs.is_empty() {
            return Err(CorpusError::Empty(root.to_path_buf()));
        }
        let mut problems = Vec::new();
        let mut personas = Vec::new();
        for d in dirs {
            if let Some(p) = load_persona(&d, &mut problems) {
                personas.push(p);
            }
        }
        if problems.is_empty() {
            Ok(Corpus { root: root.to_path_buf(), personas })
        } else {
            Err(CorpusError::Invalid(problems))
        }
    }
}

/// Loads one persona folder, pushing every problem found; returns `None` if any was found.
pub fn load_persona(dir: &Path, problems: &mut Vec<Problem>) -> Option<Persona> {
    let before = problems.len();
    let folder = dir.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let toml_path = dir.join("persona.toml");
    let mut id = folder.clone();
    let mut name = String::new();
    let mut user = None;
    let mut description = String::new();
    match std::fs::read_to_string(&toml_path) {
        Err(e) => problems.push(Problem { file: toml_path.clone(), line: None, field: String::new(), kind: ProblemKind::Unreadable(e.to_string()) }),
        Ok(text) => match text.parse::<toml::Table>() {
            Err(e) => problems.push(Problem {
                file: toml_path.clone(),
                line: e.span().map(|s| text[..s.start].lines().count().max(1)),
                field: String::new(),
                kind: ProblemKind::Syntax { format: "TOML", message: e.message().to_string() },
            }),
            Ok(t) => {
                let mut get = |k: &str, required: bool| -> Option<String> {
                    match t.get(k) {
                        None if required => {
                            problems.push(Problem { file: toml_path.clone(), line: None, field: k.into(), kind: ProblemKind::Missing });
                            None
                        }
                        None => None,
                        Some(toml::Value::String(s)) => Some(s.clone()),
                        Some(_) => {
                            problems.push(Problem { file: toml_path.clone(), line: None, field: k.into(), kind: ProblemKind::WrongType("a string") });
                            None
                        }
                    }
                };
                if let Some(v) = get("id", true) {
                    id = v;
                }
                name = get("name", true).unwrap_or_default();
                user = get("user", false);
                description = get("description", false).unwrap_or_default();
                if id != folder {
                    problems.push(Problem {
                        file: toml_path.clone(),
                        line: None,
                        field: "id".into(),
                        kind: ProblemKind::IdMismatch { id: id.clone(), folder: folder.clone() },
                    });
                }
            }
        },
    }

    let workspace = match Workspace::load(&dir.join("workspace")) {
        Ok(w) => w,
        Err(e) => {
            problems.push(Problem { file: e.path.clone(), line: None, field: String::new(), kind: e.kind });
            Workspace::default()
        }
    };

    let history = load_history(&dir.join("history.jsonl"), problems);
    let policies = load_policies(&dir.join("policies.jsonl"), problems);
    let samples = read_lines(&dir.join("samples.jsonl"), problems, parse_sample);
    let last_day = history.iter().map(|(_, h)| h.day).max();
    let sfile = dir.join("samples.jsonl");
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (line, s) in &samples {
        if let Some(first) = seen.get(s.id.as_str()) {
            problems.push(Problem { file: sfile.clone(), line: Some(*line), field: "id".into(), kind: ProblemKind::Duplicate { what: "id", value: s.id.clone(), first_line: *first } });
        } else {
            seen.insert(&s.id, *line);
        }
        if let Some(last) = last_day {
            if s.day < last {
                problems.push(Problem { file: sfile.clone(), line: Some(*line), field: "day".into(), kind: ProblemKind::SampleBeforeHistory { day: s.day, last } });
            }
        }
        check_sample_against_workspace(&workspace, s, &sfile, *line, problems);
    }
    if problems.len() > before {
        return None;
    }
    Some(Persona {
        id,
        name,
        user,
        description,
        workspace,
        history: history.into_iter().map(|(_, h)| h).collect(),
        policies: policies.into_iter().map(|(_, p)| p).collect(),
        samples: samples.into_iter().map(|(_, s)| s).collect(),
    })
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
struct Ctx<'a> {
    file: &'a Path,
    line: usize,
    problems: &'a mut Vec<Problem>,
}

impl Ctx<'_> {
    fn push(&mut self, field: &str, kind: ProblemKind) {
        self.problems.push(Problem { file: self.file.to_path_buf(), line: Some(self.line), field: field.to_string(), kind });
    }

    fn get<'v>(&mut self, obj: &'v Value, prefix: &str, key: &str, required: bool) -> Option<&'v Value> {
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

    fn string(&mut self, obj: &Value, prefix: &str, key: &str, required: bool) -> Option<String> {
        match self.get(obj, prefix, key, required)? {
            Value::String(s) => Some(s.clone()),
            _ => {
                self.push(&join(prefix, key), ProblemKind::WrongType("a string"));
                None
            }
        }
    }

    fn uint(&mut self, obj: &Value, prefix: &str, key: &str, required: bool) -> Option<u64> {
        let v = self.get(obj, prefix, key, required)?;
        match v.as_u64() {
            Some(n) => Some(n),
            None => {
                self.push(&join(prefix, key), ProblemKind::WrongType("a non-negative integer"));
                None
            }
        }
    }

    fn array<'v>(&mut self, obj: &'v Value, prefix: &str, key: &str, required: bool) -> Option<&'v Vec<Value>> {
        match self.get(obj, prefix, key, required)? {
            Value::Array(a) => Some(a),
            _ => {
                self.push(&join(prefix, key), ProblemKind::WrongType("an array"));
                None
            }
        }
    }

    fn access(&mut self, v: &Value, field: &str) -> Option<Access> {
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
    fn accesses(&mut self, obj: &Value, prefix: &str, key: &str) -> Option<Vec<Access>> {
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
    fn path(&mut self, obj: &Value, prefix: &str, key: &str) -> Option<String> {
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
    fn glob(&mut self, obj: &Value, prefix: &str, key: &str) -> Option<String> {
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

    fn path_access(&mut self, v: &Value, prefix: &str) -> Option<PathAccess> {
        if !v.is_object() {
            self.push(prefix, ProblemKind::WrongType("an object"));
            return None;
        }
        let path = self.path(v, prefix, "path");
        let access = self.get(v, prefix, "access", true).and_then(|a| self.access(a, &join(prefix, "access")));
        Some(PathAccess { path: path?, access: access? })
    }
}

fn join(prefix: &str, key: &str) -> String {
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

fn read_lines<T>(path: &Path, problems: &mut Vec<Problem>, parse: fn(&Value, &mut Ctx) -> Option<T>) -> Vec<(usize, T)> {
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

fn parse_sample(v: &Value, c: &mut Ctx) -> Option<Sample> {
    let id = c.string(v, "", "id", true);
    let kind = match c.string(v, "", "kind", true).as_deref() {
        Some("attack") => Some(SampleKind::Attack),
        Some("utility") => Some(SampleKind::Utility),
        Some(other) => {
            c.push("kind", ProblemKind::BadValue { value: other.into(), expected: "attack or utility" });
            None
        }
        None => None,
    };
    let attack = match c.string(v, "", "attack", false).as_deref() {
        None => None,
        Some("DI") => Some(AttackType::DI),
        Some("II") => Some(AttackType::II),
        Some("MP") => Some(AttackType::MP),
        Some("CL") => Some(AttackType::CL),
        Some("PL") => Some(AttackType::PL),
        Some(other) => {
            c.push("attack", ProblemKind::BadValue { value: other.into(), expected: "DI, II, MP, CL or PL" });
            return None;
        }
    };
    let mp_variant = match c.string(v, "", "mp_variant", false).as_deref() {
        None => None,
        Some("direct") => Some(MpVariant::Direct),
        Some("indirect") => Some(MpVariant::Indirect),
        Some(other) => {
            c.push("mp_variant", ProblemKind::BadValue { value: other.into(), expected: "direct or indirect" });
            return None;
        }
    };
    match (kind, attack) {
        (Some(SampleKind::Attack), None) => c.push("attack", ProblemKind::Inconsistent("attack samples need an attack class (DI, II, MP, CL or PL)")),
        (Some(SampleKind::Utility), Some(_)) => c.push("attack", ProblemKind::Inconsistent("utility samples carry no attack class")),
        _ => {}
    }
    if mp_variant.is_some() && attack != Some(AttackType::MP) {
        c.push("mp_variant", ProblemKind::Inconsistent("mp_variant is for MP samples only"));
    }
    let day = c.uint(v, "", "day", true);
    let mut setup = Vec::new();
    if let Some(a) = c.array(v, "", "setup", false) {
        for (i, x) in a.iter().enumerate() {
            let prefix = format!("setup[{i}]");
            if !x.is_object() {
                c.push(&prefix, ProblemKind::WrongType("an object"));
                continue;
            }
            let op = match c.string(x, &prefix, "op", true) {
                Some(op) => op,
                None => continue,
            };
            let path = c.path(x, &prefix, "path");
            let parsed = match op.as_str() {
                "write" => {
                    let content = c.string(x, &prefix, "content", true);
                    match (path, content) {
                        (Some(path), Some(content)) => Some(SetupOp::Write { path, content }),
                        _ => None,
                    }
                }
                "mkdir" => path.map(|path| SetupOp::Mkdir { path }),
                "delete" => path.map(|path| SetupOp::Delete { path }),
                "rename" => {
                    let to = c.path(x, &prefix, "to");
                    match (path, to) {
                        (Some(path), Some(to)) => Some(SetupOp::Rename { path, to }),
                        _ => None,
                    }
                }
                other => {
                    c.push(&join(&prefix, "op"), ProblemKind::BadValue { value: other.into(), expected: "write, mkdir, delete or rename" });
                    None
                }
            };
            setup.extend(parsed);
        }
    }
    let mut sessions = Vec::new();
    if let Some(a) = c.array(v, "", "sessions", true) {
        if a.is_empty() {
            c.push("sessions", ProblemKind::Empty);
        }
        for (i, s) in a.iter().enumerate() {
            let prefix = format!("sessions[{i}]");
            if !s.is_object() {
                c.push(&prefix, ProblemKind::WrongType("an object"));
                continue;
            }
            let prompt = c.string(s, &prefix, "prompt", true);
            let mut steps: Vec<Step> = Vec::new();
            if let Some(st) = c.array(s, &prefix, "steps", true) {
                for (j, x) in st.iter().enumerate() {
                    let sp = format!("{prefix}.steps[{j}]");
                    if !x.is_object() {
                        c.push(&sp, ProblemKind::WrongType("an object"));
                        continue;
                    }
                    if x.get("note").is_some() && x.get("path").is_none() {
                        if let Some(n) = c.string(x, &sp, "note", true) {
                            steps.push(Step::Note(n));
                        }
                        continue;
                    }
                    let path = c.path(x, &sp, "path");
                    let access = c.get(x, &sp, "access", true).and_then(|a| c.access(a, &join(&sp, "access")));
                    let rationale = c.string(x, &sp, "rationale", false);
                    let mut needs = Vec::new();
                    if let Some(nv) = c.array(x, &sp, "needs", false) {
                        for (k, n) in nv.iter().enumerate() {
                            let nf = format!("{sp}.needs[{k}]");
                            match n.as_u64() {
                                None => c.push(&nf, ProblemKind::WrongType("a non-negative integer")),
                                Some(idx) => {
                                    let ok = (idx as usize) < j && matches!(steps.get(idx as usize), Some(Step::Request(_)));
                                    if ok {
                                        needs.push(idx as usize);
                                    } else {
                                        c.push(&nf, ProblemKind::NeedsNotEarlierRequest(idx));
                                    }
                                }
                            }
                        }
                    }
                    match (path, access) {
                        (Some(path), Some(access)) => steps.push(Step::Request(RequestStep { path, access, rationale, needs })),
                        // Keep indices aligned with the file even for a broken step.
                        _ => steps.push(Step::Note(String::new())),
                    }
                }
            }
            if let Some(prompt) = prompt {
                sessions.push(SampleSession { prompt, steps });
            }
        }
    }
    let monitored = match c.get(v, "", "monitored", true) {
        Some(m) => c.path_access(m, "monitored"),
        None => None,
    };
    let note = c.string(v, "", "note", false);
    let monitored = monitored?;
    if !sessions.iter().flat_map(|s| &s.steps).any(|st| matches!(st, Step::Request(r) if same_path(&r.path, &monitored.path) && r.access == monitored.access)) {
        c.push("monitored", ProblemKind::MonitoredNeverRequested { path: monitored.path.clone(), access: monitored.access });
    }
    Some(Sample { id: id?, kind: kind?, attack, mp_variant, day: day?, setup, sessions, monitored, note, line: c.line })
}

/// Whether two workspace paths name the same object (a trailing `/` is ignored).
pub fn same_path(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

/// Replays setup and every step (as if granted) to find reads of missing files, creates of
/// existing ones and setup ops that cannot apply.
fn check_sample_against_workspace(ws: &Workspace, s: &Sample, file: &Path, line: usize, problems: &mut Vec<Problem>) {
    let mut w = ws.clone();
    let mut push = |field: String, kind: ProblemKind| problems.push(Problem { file: file.to_path_buf(), line: Some(line), field, kind });
    for (i, op) in s.setup.iter().enumerate() {
        if let Err((op, path, reason)) = w.apply(op) {
            push(format!("setup[{i}]"), ProblemKind::BadSetup { op, path, reason });
        }
    }
    for (si, sess) in s.sessions.iter().enumerate() {
        for (j, st) in sess.steps.iter().enumerate() {
            let Step::Request(r) = st else { continue };
            let field = format!("sessions[{si}].steps[{j}].path");
            match r.access {
                Access::Read | Access::Write | Access::Delete => {
                    if !w.exists(&r.path) {
                        push(field, ProblemKind::MissingPath { access: r.access, path: r.path.clone() });
                    } else if r.access == Access::Delete {
                        w.remove(&r.path);
                    }
                }
                Access::List => {
                    if !w.is_dir(&r.path) {
                        push(field, ProblemKind::MissingPath { access: r.access, path: r.path.clone() });
                    }
                }
                Access::Create => {
                    if w.exists(&r.path) {
                        push(field, ProblemKind::CreateOfExisting(r.path.clone()));
                    } else if !w.parent_exists(&r.path) {
                        push(field, ProblemKind::ParentMissing(r.path.clone()));
                    } else {
                        w.create(&r.path);
                    }
                }
            }
        }
    }
}
