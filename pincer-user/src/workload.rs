//! The workload of the daemon's benchmarks (`cargo xtask bench daemon`, with the real
//! kernel; `pincer bench pipeline`, without it): each session's prompt and task folder, the
//! files of its rounds, and the copy of the persona's workspace each session works in. One
//! definition, so the two benchmarks measure the same decisions.

use std::path::Path;

/// The user's first prompt of every session: a read-through of the persona's code, a task
/// its history has done before, so the twin's pre-committed policy covers the sources.
pub const PROMPT: &str = "I'm picking the ledger back up. Give me a summary of what it does and how the code in src/ is laid out.";
/// Where each session's files live, relative to its workspace: the folder that prompt is about.
pub const TASK_DIR: &str = "projects/ledger/src";
/// The worker's rationale for its tool requests.
pub const RATIONALE: &str = "to see how the code is laid out";

/// The file of round `k` that the worker asks for with the tool.
pub fn tool_file(k: usize) -> String {
    format!("{TASK_DIR}/bench_req_{k:04}.rs")
}

/// The file of round `k` that the worker opens without asking (a kernel miss).
pub fn miss_file(k: usize) -> String {
    format!("{TASK_DIR}/bench_miss_{k:04}.rs")
}

/// Plain source text for file `name` of round `k`, like the files beside it.
pub fn source_text(name: &str, k: usize) -> String {
    format!("//! {name}: formatting helpers for the ledger's reports.\n\n/// The width of column {k}.\npub fn width_{k}() -> usize {{\n    {k} + 8\n}}\n")
}

/// Copies the directory tree `from` to `to` (files and folders only).
pub fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let t = to.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_dir(&e.path(), &t)?;
        } else {
            std::fs::copy(e.path(), &t)?;
        }
    }
    Ok(())
}
