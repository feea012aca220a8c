//! The resources a call of one of Claude Code's file tools touches, shared by the
//! `PreToolUse` hook (which asks before the call) and the transcript converter (which
//! records what a past call touched).
//!
//! Tool inputs as in Claude Code's tools: `Read`, `Write`, `Edit`, `MultiEdit` take
//! `file_path`; `NotebookEdit` takes `notebook_path`; `Glob` takes `pattern` and an optional
//! `path`; `Grep` an optional `path`; `LS` a `path`. Relative paths are taken from the
//! call's working directory.

use crate::access::Access;
use serde_json::Value;
use std::path::{Component, Path, PathBuf};

/// Claude Code's file tools, the ones whose resources Pincer can name before they run.
pub const FILE_TOOLS: [&str; 8] = ["Read", "Write", "Edit", "MultiEdit", "NotebookEdit", "Glob", "Grep", "LS"];

/// One resource a tool call touches: an absolute path (not normalized: a `..` stays, so
/// the daemon refuses it by name) and the access.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    /// Absolute path of the resource.
    pub path: PathBuf,
    /// What the call does with it.
    pub access: Access,
}

/// What is known about a path when the resources of a call are worked out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// Nothing is there.
    Missing,
    /// A file (or anything but a directory).
    File,
    /// A directory.
    Dir,
    /// Not known.
    Unknown,
}

/// Probes the file system without following a final symbolic link; an error other than
/// "not found" is [`Probe::Unknown`].
pub fn probe_fs(p: &Path) -> Probe {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => Probe::Dir,
        Ok(_) => Probe::File,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Probe::Missing,
        Err(_) => Probe::Unknown,
    }
}

/// Why the resources of a file-tool call could not be named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// A required input field is missing.
    #[error("the {tool} call has no `{field}`")]
    MissingField {
        /// Tool name.
        tool: String,
        /// The field.
        field: &'static str,
    },
    /// An input field has the wrong JSON type.
    #[error("`{field}` of the {tool} call is not {expected}")]
    WrongType {
        /// Tool name.
        tool: String,
        /// The field.
        field: &'static str,
        /// What it should be.
        expected: &'static str,
    },
    /// A relative path with no absolute working directory to take it from.
    #[error("the {tool} call names the relative path {path:?} and no absolute working directory is known")]
    Relative {
        /// Tool name.
        tool: String,
        /// The path.
        path: String,
    },
    /// Whether the call created the file or wrote an existing one is not known.
    #[error("whether the {tool} call created {path:?} or changed an existing file is not known")]
    CreateOrWrite {
        /// Tool name.
        tool: String,
        /// The path.
        path: PathBuf,
    },
}

/// Makes `p` absolute against `cwd` without touching the file system.
pub fn absolute(tool: &str, p: &str, cwd: Option<&Path>) -> Result<PathBuf, ToolError> {
    let path = Path::new(p);
    if path.is_absolute() {
        return Ok(path.to_path_buf());
    }
    match cwd {
        Some(c) if c.is_absolute() => Ok(c.join(path)),
        _ => Err(ToolError::Relative { tool: tool.into(), path: p.into() }),
    }
}

fn string_field<'v>(tool: &str, input: &'v Value, field: &'static str, required: bool) -> Result<Option<&'v str>, ToolError> {
    match input.get(field) {
        None | Some(Value::Null) if !required => Ok(None),
        None | Some(Value::Null) => Err(ToolError::MissingField { tool: tool.into(), field }),
        Some(Value::String(s)) if s.is_empty() && required => Err(ToolError::MissingField { tool: tool.into(), field }),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ToolError::WrongType { tool: tool.into(), field, expected: "a string" }),
    }
}

/// The directory a glob pattern's literal leading components name, below `base`.
pub(crate) fn glob_base(base: PathBuf, pattern: &str) -> PathBuf {
    let parts: Vec<&str> = pattern.split('/').collect();
    let mut out = if pattern.starts_with('/') { PathBuf::from("/") } else { base };
    // The last component is a file name or a glob: only the folders before it are listed.
    for seg in &parts[..parts.len().saturating_sub(1)] {
        if crate::glob::is_glob(seg) {
            break;
        }
        if !seg.is_empty() {
            out.push(seg);
        }
    }
    out
}

/// A write to `file`: `write` if it exists, else `create` of its topmost missing ancestor
/// (a folder the call makes, or the file itself).
fn write_or_create(tool: &str, file: PathBuf, probe: &dyn Fn(&Path) -> Probe) -> Result<Vec<Need>, ToolError> {
    match probe(&file) {
        Probe::File | Probe::Dir => Ok(vec![Need { path: file, access: Access::Write }]),
        Probe::Unknown => Err(ToolError::CreateOrWrite { tool: tool.into(), path: file }),
        Probe::Missing => {
            let mut top = file;
            while let Some(parent) = top.parent().map(Path::to_path_buf) {
                if parent.as_os_str().is_empty() || probe(&parent) != Probe::Missing {
                    break;
                }
                top = parent;
            }
            Ok(vec![Need { path: top, access: Access::Create }])
        }
    }
}

/// The resources a call of `tool` with `input`, made in `cwd`, touches; `None` when `tool`
/// is not one of [`FILE_TOOLS`]. `probe` says what is at a path (the hook asks the file
/// system; the transcript converter answers from the call's recorded result).
pub fn resources(tool: &str, input: &Value, cwd: Option<&Path>, probe: &dyn Fn(&Path) -> Probe) -> Option<Result<Vec<Need>, ToolError>> {
    if !FILE_TOOLS.contains(&tool) {
        return None;
    }
    Some(file_tool(tool, input, cwd, probe))
}

fn file_tool(tool: &str, input: &Value, cwd: Option<&Path>, probe: &dyn Fn(&Path) -> Probe) -> Result<Vec<Need>, ToolError> {
    if !input.is_object() {
        return Err(ToolError::WrongType { tool: tool.into(), field: "tool_input", expected: "an object" });
    }
    let need = |path: PathBuf, access| Need { path, access };
    let required = |field| -> Result<PathBuf, ToolError> {
        let p = string_field(tool, input, field, true)?.expect("required fields are present");
        absolute(tool, p, cwd)
    };
    let optional_dir = |field| -> Result<PathBuf, ToolError> {
        match string_field(tool, input, field, false)? {
            Some(p) => absolute(tool, p, cwd),
            None => match cwd {
                Some(c) if c.is_absolute() => Ok(c.to_path_buf()),
                _ => Err(ToolError::Relative { tool: tool.into(), path: ".".into() }),
            },
        }
    };
    Ok(match tool {
        "Read" => vec![need(required("file_path")?, Access::Read)],
        "Write" => write_or_create(tool, required("file_path")?, probe)?,
        "Edit" | "MultiEdit" | "NotebookEdit" => {
            let file = required(if tool == "NotebookEdit" { "notebook_path" } else { "file_path" })?;
            match probe(&file) {
                // An edit of a missing file makes it (Edit with an empty `old_string`).
                Probe::Missing => write_or_create(tool, file, probe)?,
                _ => vec![need(file.clone(), Access::Read), need(file, Access::Write)],
            }
        }
        "Glob" => {
            let pattern = string_field(tool, input, "pattern", true)?.expect("required fields are present");
            let base = if pattern.starts_with('/') { PathBuf::from("/") } else { optional_dir("path")? };
            vec![need(glob_base(base, pattern), Access::List)]
        }
        "Grep" => {
            let p = optional_dir("path")?;
            let access = if probe(&p) == Probe::Dir || input.get("path").is_none() { Access::List } else { Access::Read };
            vec![need(p, access)]
        }
        "LS" => vec![need(required("path")?, Access::List)],
        _ => unreachable!("checked against FILE_TOOLS"),
    })
}

/// Whether `p` holds a `..` (or, after the start, a `.`) component.
pub fn has_dot_segments(p: &Path) -> bool {
    p.components().any(|c| matches!(c, Component::ParentDir | Component::CurDir))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn none(_: &Path) -> Probe {
        Probe::File
    }

    fn res(tool: &str, input: Value, probe: &dyn Fn(&Path) -> Probe) -> Vec<(String, Access)> {
        resources(tool, &input, Some(Path::new("/w")), probe).unwrap().unwrap().into_iter().map(|n| (n.path.display().to_string(), n.access)).collect()
    }

    #[test]
    fn every_file_tool_names_its_resources() {
        assert_eq!(res("Read", json!({"file_path": "/w/a.md"}), &none), [("/w/a.md".into(), Access::Read)]);
        assert_eq!(res("Read", json!({"file_path": "notes/a.md", "offset": 3}), &none), [("/w/notes/a.md".into(), Access::Read)]);
        assert_eq!(res("Write", json!({"file_path": "/w/a.md", "content": "x"}), &none), [("/w/a.md".into(), Access::Write)]);
        let missing_dir = |p: &Path| if p.starts_with("/w/new") { Probe::Missing } else { Probe::Dir };
        assert_eq!(res("Write", json!({"file_path": "/w/new/deep/a.md", "content": "x"}), &missing_dir), [("/w/new".into(), Access::Create)]);
        let missing_file = |p: &Path| if p == Path::new("/w/a.md") { Probe::Missing } else { Probe::Dir };
        assert_eq!(res("Write", json!({"file_path": "/w/a.md"}), &missing_file), [("/w/a.md".into(), Access::Create)]);
        assert_eq!(res("Edit", json!({"file_path": "/w/a.md", "old_string": "a", "new_string": "b"}), &none), [("/w/a.md".into(), Access::Read), ("/w/a.md".into(), Access::Write)]);
        assert_eq!(res("MultiEdit", json!({"file_path": "/w/a.md", "edits": []}), &none).len(), 2);
        assert_eq!(res("NotebookEdit", json!({"notebook_path": "/w/n.ipynb", "new_source": ""}), &none), [("/w/n.ipynb".into(), Access::Read), ("/w/n.ipynb".into(), Access::Write)]);
        assert_eq!(res("Glob", json!({"pattern": "src/**/*.rs"}), &none), [("/w/src".into(), Access::List)]);
        assert_eq!(res("Glob", json!({"pattern": "*.md", "path": "/w/notes"}), &none), [("/w/notes".into(), Access::List)]);
        assert_eq!(res("Glob", json!({"pattern": "/w/docs/*.md"}), &none), [("/w/docs".into(), Access::List)]);
        let dir = |_: &Path| Probe::Dir;
        assert_eq!(res("Grep", json!({"pattern": "fn main", "path": "/w/src"}), &dir), [("/w/src".into(), Access::List)]);
        assert_eq!(res("Grep", json!({"pattern": "fn main", "path": "/w/src/main.rs"}), &none), [("/w/src/main.rs".into(), Access::Read)]);
        assert_eq!(res("Grep", json!({"pattern": "x"}), &none), [("/w".into(), Access::List)]);
        assert_eq!(res("LS", json!({"path": "/w/notes"}), &none), [("/w/notes".into(), Access::List)]);
    }

    #[test]
    fn other_tools_are_not_file_tools_and_bad_input_is_named() {
        assert!(resources("Bash", &json!({"command": "cat /w/a"}), None, &none).is_none());
        assert!(resources("mcp__pincer__request_resource", &json!({}), None, &none).is_none());
        let e = resources("Read", &json!({}), None, &none).unwrap().unwrap_err();
        assert!(e.to_string().contains("file_path"), "{e}");
        let e = resources("Read", &json!({"file_path": 3}), None, &none).unwrap().unwrap_err();
        assert!(e.to_string().contains("not a string"), "{e}");
        let e = resources("Read", &json!({"file_path": "a.md"}), None, &none).unwrap().unwrap_err();
        assert!(matches!(e, ToolError::Relative { .. }), "{e}");
        let e = resources("Read", &json!("x"), None, &none).unwrap().unwrap_err();
        assert!(e.to_string().contains("tool_input"), "{e}");
        let unknown = |_: &Path| Probe::Unknown;
        let e = resources("Write", &json!({"file_path": "/w/a"}), None, &unknown).unwrap().unwrap_err();
        assert!(matches!(e, ToolError::CreateOrWrite { .. }), "{e}");
    }

    #[test]
    fn dot_dot_is_kept_for_the_daemon_to_refuse() {
        let r = res("Read", json!({"file_path": "/w/notes/../secrets/k"}), &none);
        assert_eq!(r[0].0, "/w/notes/../secrets/k");
        assert!(has_dot_segments(Path::new(&r[0].0)));
        assert!(!has_dot_segments(Path::new("/w/notes/a")));
    }
}
