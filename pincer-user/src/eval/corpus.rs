//! The corpus loader: reads and validates a corpus in the format of `corpus/FORMAT.md` (the
//! trusted part of the format, history and policies, is read by [`crate::format`]).
//!
//! Every problem is collected (not only the first) and reported with its file, line and
//! field. Unknown fields are ignored, as the format allows.

use crate::access::Access;
pub use crate::format::{check_path, describe, is_glob, load_history, load_policies, same_path, Approval, HistoryTask, PathAccess, Permission, Policy, Problem, ProblemKind, Rule};
use crate::format::{join, read_lines, Ctx, Problems};
use crate::eval::workspace::Workspace;
use serde_json::Value;
use std::collections::BTreeMap;
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
