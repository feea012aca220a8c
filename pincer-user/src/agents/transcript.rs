//! Trusted history from a coding agent's own transcripts (`pincer history convert`).
//!
//! A transcript gives the user's prompts (verbatim) and the agent's tool calls with their
//! results. Each prompt becomes one past task of the history (corpus format, as `pincer
//! import` reads it); the accesses of the file-tool calls that followed it in the same
//! agent session, and succeeded, become its access annotation, with paths relative to the
//! root named by `--root`. What cannot be attributed without guessing (shell commands,
//! failed calls, calls without a result, paths outside the root, calls after an unreadable
//! line that might have been a prompt) is counted by [`Unattributed`] and left out.
//! A line that is not valid JSON or lacks a field its kind needs is an [`InputError`]
//! naming the file and line; every other line is still used.

use super::tools::{self, Need};
use crate::access::Access;
use crate::store::{check_rel_path, AccessRecord, HistoryRecord};
use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};

/// Whose transcripts are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Agent {
    /// Claude Code's project transcripts (`~/.claude/projects/*/*.jsonl`).
    ClaudeCode,
    /// Codex's session rollouts (`~/.codex/sessions/**/rollout-*.jsonl`).
    Codex,
    /// Gemini CLI's chats (`~/.gemini/tmp/<project>/chats/session-*.jsonl`).
    GeminiCli,
}

/// What was wrong with a line (or a whole file).
#[derive(Debug, thiserror::Error)]
pub enum LineProblem {
    /// The file could not be read.
    #[error("cannot read the file: {0}")]
    Unreadable(#[source] std::io::Error),
    /// Not JSON: a truncated or corrupted line.
    #[error("not valid JSON (truncated or corrupted?): {0}")]
    Json(#[source] serde_json::Error),
    /// Valid JSON but not an object.
    #[error("not a JSON object")]
    NotObject,
    /// A field the line's kind needs is missing.
    #[error("`{0}` is missing")]
    Missing(&'static str),
    /// A field has the wrong type.
    #[error("`{field}` is not {expected}")]
    WrongType {
        /// The field.
        field: &'static str,
        /// What it should be.
        expected: &'static str,
    },
    /// A time that is not RFC 3339.
    #[error("`{field}` is not an RFC 3339 time: {value:?}")]
    BadTime {
        /// The field.
        field: &'static str,
        /// Its value.
        value: String,
    },
    /// A line that needs a session before any session was named.
    #[error("a {0} before the file named its session")]
    NoSession(&'static str),
}

/// An unreadable line or file.
#[derive(Debug, thiserror::Error)]
pub struct InputError {
    /// The transcript file.
    pub file: PathBuf,
    /// The 1-based line (`None` for the whole file).
    pub line: Option<usize>,
    /// What was wrong.
    #[source]
    pub problem: LineProblem,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{l}: {}", self.file.display(), self.problem),
            None => write!(f, "{}: {}", self.file.display(), self.problem),
        }
    }
}

/// Why something in a transcript did not become history (counted, never guessed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Unattributed {
    /// A shell command: what a command line touches is not known.
    ShellCommand,
    /// A tool that is not a file tool.
    OtherTool,
    /// A tool call that failed (nothing touched).
    FailedCall,
    /// A tool call without a recorded result.
    NoResult,
    /// A file-tool call whose input names no usable path.
    BadInput,
    /// A write not known to be a create or a change of an existing file.
    CreateOrWrite,
    /// A search whose path is neither a file nor a folder where the history is converted.
    SearchTarget,
    /// A path outside `--root`.
    OutsideRoot,
    /// The `--root` folder itself (not a resource inside it).
    RootItself,
    /// A path with `.` or `..` segments.
    DotSegments,
    /// A path the history format cannot hold (not UTF-8, or glob characters in a name).
    Unrepresentable,
    /// A tool call before the first prompt of its session.
    NoPrompt,
    /// A tool call after an unreadable line and before the next prompt (the line may have
    /// been a prompt).
    AfterBadLine,
    /// A user line that is not a prompt (slash command, shell escape, interruption notice).
    NotAPrompt,
}

impl Unattributed {
    /// What is counted, in words.
    pub fn describe(self) -> &'static str {
        match self {
            Unattributed::ShellCommand => "shell commands (what a command line touches is not known)",
            Unattributed::OtherTool => "calls of tools that are not file tools",
            Unattributed::FailedCall => "failed tool calls (nothing touched)",
            Unattributed::NoResult => "tool calls without a recorded result",
            Unattributed::BadInput => "file-tool calls whose input names no usable path",
            Unattributed::CreateOrWrite => "writes not known to be a create or a change",
            Unattributed::SearchTarget => "searches of a path that is neither a file nor a folder here",
            Unattributed::OutsideRoot => "accesses outside --root",
            Unattributed::RootItself => "accesses of the --root folder itself",
            Unattributed::DotSegments => "paths with `.` or `..` segments",
            Unattributed::Unrepresentable => "paths the history format cannot hold (not UTF-8, glob characters)",
            Unattributed::NoPrompt => "tool calls before the first prompt of their session",
            Unattributed::AfterBadLine => "tool calls after an unreadable line, before the next prompt",
            Unattributed::NotAPrompt => "user lines that are not prompts (slash commands, shell escapes, interruptions)",
        }
    }
}

/// Where a line is: file index and line number, for a stable order.
pub(crate) type Order = (usize, usize);

/// A user prompt found in a transcript.
#[derive(Debug, Clone)]
pub(crate) struct Prompt {
    pub session: String,
    pub at: i64,
    pub order: Order,
    pub text: String,
}

/// The resources a successful file-tool call touched.
#[derive(Debug, Clone)]
pub(crate) struct Touch {
    pub session: String,
    pub at: i64,
    pub order: Order,
    pub needs: Vec<Need>,
    pub after_bad_line: bool,
}

/// What the parsers found.
#[derive(Debug, Default)]
pub(crate) struct Parsed {
    pub prompts: Vec<Prompt>,
    pub touches: Vec<Touch>,
    pub skipped: Vec<Unattributed>,
    pub errors: Vec<InputError>,
}

impl Parsed {
    pub fn error(&mut self, file: &Path, line: usize, problem: LineProblem) {
        self.errors.push(InputError { file: file.into(), line: Some(line), problem });
    }

    /// Records the outcome of one file-tool call (or why it has none).
    pub fn call(&mut self, session: &str, at: i64, order: Order, after_bad_line: bool, result: Result<Vec<Need>, Unattributed>) {
        match result {
            Ok(needs) => self.touches.push(Touch { session: session.into(), at, order, needs, after_bad_line }),
            Err(why) => self.skipped.push(why),
        }
    }
}

/// The result of a conversion.
#[derive(Debug, Default)]
pub struct Conversion {
    /// The history, oldest first (one task per prompt).
    pub history: Vec<HistoryRecord>,
    /// Unreadable lines and files.
    pub errors: Vec<InputError>,
    /// What was left out, by reason.
    pub unattributed: BTreeMap<Unattributed, u64>,
    /// Prompts and tool calls seen twice (the same transcript given twice, or a resumed
    /// session's copy), dropped.
    pub repeated: u64,
}

impl Conversion {
    /// Accesses written.
    pub fn accesses(&self) -> usize {
        self.history.iter().map(|h| h.accesses.len()).sum()
    }

    /// The history as JSON lines (the corpus's `history.jsonl`).
    pub fn to_jsonl(&self) -> String {
        let mut s = String::new();
        for h in &self.history {
            s.push_str(&serde_json::to_string(h).expect("history records serialize"));
            s.push('\n');
        }
        s
    }

    /// The summary for stderr.
    pub fn summary(&self, files: usize) -> String {
        let mut s = format!("converted {} tasks with {} accesses from {files} files", self.history.len(), self.accesses());
        if !self.errors.is_empty() {
            s.push_str(&format!("; {} unreadable lines or files (listed above)", self.errors.len()));
        }
        if self.repeated > 0 {
            s.push_str(&format!("; {} repeated entries dropped", self.repeated));
        }
        for (why, n) in &self.unattributed {
            s.push_str(&format!("\n  not attributed: {n} {}", why.describe()));
        }
        s
    }
}

/// Milliseconds since the Unix epoch of an RFC 3339 time (`2025-06-10T12:34:56.789Z`,
/// `...+02:00`), or `None`.
pub fn parse_time(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        t.bytes().all(|c| c.is_ascii_digit()).then(|| t.parse().ok())?
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (y, mo, d, h, mi, sec) = (num(0..4)?, num(5..7)?, num(8..10)?, num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut ms = 0;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return None;
        }
        let frac = &s[start..i.min(start + 3)];
        ms = frac.parse::<i64>().ok()? * 10_i64.pow(3 - frac.len() as u32);
    }
    let offset = match s.get(i..)? {
        "Z" | "z" => 0,
        tz if tz.len() == 6 && matches!(tz.as_bytes()[0], b'+' | b'-') && tz.as_bytes()[3] == b':' => {
            let (oh, om) = (num(i + 1..i + 3)?, num(i + 4..i + 6)?);
            let sign = if tz.starts_with('-') { -1 } else { 1 };
            sign * (oh * 3600 + om * 60)
        }
        _ => return None,
    };
    // Days from the civil date (H. Hinnant's algorithm).
    let yy = if mo <= 2 { y - 1 } else { y };
    let era = yy.div_euclid(400);
    let yoe = yy - era * 400;
    let doy = (153 * (if mo > 2 { mo - 3 } else { mo + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 86_400 + h * 3600 + mi * 60 + sec) - offset) * 1000 + ms)
}

const DAY_MS: i64 = 86_400_000;

/// The root-relative history path of `path`, or why it has none.
fn relative(path: &Path, access: Access, roots: &[PathBuf]) -> Result<String, Unattributed> {
    if tools::has_dot_segments(path) {
        return Err(Unattributed::DotSegments);
    }
    let rel = roots.iter().find_map(|r| path.strip_prefix(r).ok()).ok_or(Unattributed::OutsideRoot)?;
    if rel.as_os_str().is_empty() {
        return Err(Unattributed::RootItself);
    }
    let mut rel = rel.to_str().ok_or(Unattributed::Unrepresentable)?.to_string();
    if access == Access::List {
        rel.push('/');
    }
    check_rel_path("path", &rel, false).map_err(|_| Unattributed::Unrepresentable)?;
    Ok(rel)
}

/// Reads `files` (transcripts of `agent`) and builds the history of the tasks they hold,
/// with paths relative to `root`.
pub fn convert(agent: Agent, files: &[PathBuf], root: &Path) -> Conversion {
    let mut parsed = Parsed::default();
    for (i, file) in files.iter().enumerate() {
        let text = match std::fs::read(file) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) => {
                parsed.errors.push(InputError { file: file.clone(), line: None, problem: LineProblem::Unreadable(e) });
                continue;
            }
        };
        match agent {
            Agent::ClaudeCode => super::claude::parse(i, file, &text, &mut parsed),
            Agent::Codex => super::codex::parse(i, file, &text, &mut parsed),
            Agent::GeminiCli => super::gemini::parse(i, file, &text, &mut parsed),
        }
    }
    attribute(parsed, root)
}

fn attribute(parsed: Parsed, root: &Path) -> Conversion {
    let mut out = Conversion { errors: parsed.errors, ..Default::default() };
    let mut roots = vec![std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf())];
    if let Ok(real) = root.canonicalize() {
        if !roots.contains(&real) {
            roots.push(real);
        }
    }
    for why in parsed.skipped {
        *out.unattributed.entry(why).or_default() += 1;
    }
    // Prompts, oldest first, without repeats.
    let mut prompts = parsed.prompts;
    prompts.sort_by_key(|p| (p.at, p.order));
    let mut seen = HashSet::new();
    prompts.retain(|p| {
        let fresh = seen.insert((p.session.clone(), p.at, p.text.clone()));
        if !fresh {
            out.repeated += 1;
        }
        fresh
    });
    let first_day = prompts.first().map(|p| p.at.div_euclid(DAY_MS)).unwrap_or(0);
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut tasks: Vec<HistoryRecord> = prompts
        .iter()
        .map(|p| {
            let n = counts.entry(&p.session).or_default();
            *n += 1;
            HistoryRecord {
                day: u32::try_from(p.at.div_euclid(DAY_MS) - first_day).unwrap_or(u32::MAX),
                session: format!("{}-{n}", p.session),
                prompt: p.text.clone(),
                accesses: vec![],
                approvals: vec![],
            }
        })
        .collect();
    // Each call goes to the latest prompt of its session at or before it.
    let mut by_session: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, p) in prompts.iter().enumerate() {
        by_session.entry(&p.session).or_default().push(i);
    }
    let mut touches = parsed.touches;
    touches.sort_by_key(|t| (t.at, t.order));
    let mut seen_touch = HashSet::new();
    for t in touches {
        let key: Vec<(PathBuf, Access)> = t.needs.iter().map(|n| (n.path.clone(), n.access)).collect();
        if !seen_touch.insert((t.session.clone(), t.at, key)) {
            out.repeated += 1;
            continue;
        }
        if t.after_bad_line {
            *out.unattributed.entry(Unattributed::AfterBadLine).or_default() += 1;
            continue;
        }
        let owner = by_session.get(t.session.as_str()).and_then(|idx| idx.iter().rev().find(|&&i| (prompts[i].at, prompts[i].order) <= (t.at, t.order)));
        let Some(&task) = owner else {
            *out.unattributed.entry(Unattributed::NoPrompt).or_default() += 1;
            continue;
        };
        for n in t.needs {
            match relative(&n.path, n.access, &roots) {
                Ok(path) => {
                    let rec = AccessRecord { path, access: n.access };
                    if !tasks[task].accesses.contains(&rec) {
                        tasks[task].accesses.push(rec);
                    }
                }
                Err(why) => *out.unattributed.entry(why).or_default() += 1,
            }
        }
    }
    out.history = std::mem::take(&mut tasks);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_times_parse_to_epoch_millis() {
        assert_eq!(parse_time("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_time("1970-01-02T00:00:00.5Z"), Some(86_400_500));
        assert_eq!(parse_time("2025-05-26T07:27:40.079Z"), Some(1_748_244_460_079));
        assert_eq!(parse_time("2025-05-26T09:27:40.079+02:00"), Some(1_748_244_460_079));
        assert_eq!(parse_time("2024-02-29T00:00:00Z"), Some(1_709_164_800_000));
        for bad in ["", "2025-05-26", "2025-13-01T00:00:00Z", "2025-05-26T07:27:40", "2025-05-26T07:27:40.Z", "yesterday at noon!!"] {
            assert_eq!(parse_time(bad), None, "{bad}");
        }
    }

    #[test]
    fn paths_outside_the_root_or_with_dots_are_not_guessed() {
        let roots = [PathBuf::from("/w")];
        assert_eq!(relative(Path::new("/w/a/b.md"), Access::Read, &roots), Ok("a/b.md".into()));
        assert_eq!(relative(Path::new("/w/a"), Access::List, &roots), Ok("a/".into()));
        assert_eq!(relative(Path::new("/etc/passwd"), Access::Read, &roots), Err(Unattributed::OutsideRoot));
        assert_eq!(relative(Path::new("/w"), Access::List, &roots), Err(Unattributed::RootItself));
        assert_eq!(relative(Path::new("/w/a/../b"), Access::Read, &roots), Err(Unattributed::DotSegments));
        assert_eq!(relative(Path::new("/w/pages/[id].tsx"), Access::Read, &roots), Err(Unattributed::Unrepresentable));
    }
}
