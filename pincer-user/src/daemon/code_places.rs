//! Where the user's own configuration runs programs from. The never list names the
//! configuration files (`~/.bashrc`, `~/.gitconfig`, a repository's `.git/config`); the
//! places they name are wherever the user chose: the folders a shell puts on `PATH`, the
//! folder git takes hooks from (`core.hooksPath`) and the programs git runs
//! (`core.fsmonitor`, `core.pager`, `alias.x = !/path/to/script`, a filter's `clean`).
//! A session that writes one of those runs code as the user outside the session, as surely
//! as one that writes the configuration itself, so a never place's protection against
//! change follows what it names ([`code_places`]), as it follows what it loads
//! ([`super::contain::loaded_files`]).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A place the user's configuration runs programs from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CodePlace {
    /// A folder whose every entry may be run: a folder on `PATH`, git's hooks folder.
    Folder(PathBuf),
    /// One program.
    Program(PathBuf),
    /// A folder of every repository, by its path from the worktree: a relative
    /// `core.hooksPath` of the global configuration (`hooksPath = .githooks`).
    InEveryRepository(PathBuf),
}

impl CodePlace {
    /// The place's path (relative for [`CodePlace::InEveryRepository`]).
    pub fn path(&self) -> &Path {
        match self {
            CodePlace::Folder(p) | CodePlace::Program(p) | CodePlace::InEveryRepository(p) => p,
        }
    }
}

/// The largest file read for the places it names.
pub(super) const MAX_BYTES: u64 = 1 << 20;

/// Git configuration keys whose value git runs as a command (`section.key`, lower case,
/// any subsection: `filter "lfs"`'s `clean` is `filter.clean`). `alias.*` and `pager.*` are
/// matched by section.
const GIT_COMMANDS: &[&str] = &[
    "core.fsmonitor",
    "core.pager",
    "core.editor",
    "core.sshcommand",
    "core.askpass",
    "core.gitproxy",
    "sequence.editor",
    "gpg.program",
    "credential.helper",
    "diff.external",
    "diff.textconv",
    "diff.command",
    "filter.clean",
    "filter.smudge",
    "filter.process",
    "merge.driver",
    "difftool.cmd",
    "mergetool.cmd",
    "interactive.difffilter",
    "sendemail.sendmailcmd",
    "web.browser",
    "browser.cmd",
];

/// The places the configuration file `file` names as code: the folders its shell lines put
/// on `PATH` (`PATH=...`, `export PATH=...`, zsh's `path=(...)` and `path+=(...)`, fish's
/// `set -gx PATH ...`, `fish_user_paths` and `fish_add_path`, `~/.pam_environment`'s `PATH
/// DEFAULT=...`), and as git configuration its `core.hooksPath` folder and the program of
/// every key git runs as a command ([`GIT_COMMANDS`], aliases starting with `!`). Only
/// absolute paths and paths from the home (`~/`, `$HOME/`, `${HOME}/`, `@{HOME}/`) count;
/// a relative one counts from `worktree` (a repository's own `.git/config`), and not at
/// all without one. A `PATH` part that names a variable `vars` holds stands for each of
/// its values. An unreadable, binary or larger file names nothing.
pub fn code_places(file: &Path, home: Option<&Path>, worktree: Option<&Path>, vars: &ShellVariables) -> Vec<CodePlace> {
    read_text(file).map(|text| places_in(&text, home, worktree, vars)).unwrap_or_default()
}

/// A configuration file's text; `None` for one that is not a regular file, is larger than
/// [`MAX_BYTES`], or is not text (holds a NUL byte). Bytes that are not UTF-8 (a comment or
/// a name in Latin-1) are read as U+FFFD: the shell and git read bytes, and the lines
/// around them name what they name.
pub(super) fn read_text(file: &Path) -> Option<String> {
    let bytes = read_regular(file, MAX_BYTES)?;
    if bytes.contains(&0) {
        return None;
    }
    Some(match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// The bytes of the regular file `file` names (symlinks followed), if it holds at most
/// `max`; `None` for anything else. Opened by [`open_regular`].
fn read_regular(file: &Path, max: u64) -> Option<Vec<u8>> {
    use std::io::Read;
    let (f, meta) = open_regular(file)?;
    if meta.len() > max {
        return None;
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    f.take(max + 1).read_to_end(&mut bytes).ok()?;
    (bytes.len() as u64 <= max).then_some(bytes)
}

/// The regular file `file` names (symlinks followed), opened for reading, with what
/// `fstat` says of it; `None` for anything else. The daemon reads files a session may have
/// made (a repository's `.git` file, `commondir` or `config` in a folder of the
/// session's): the kind and the size are those of the object opened, not of a name that
/// may be switched between a check and the read, and the open does not wait
/// (`O_NONBLOCK`: a FIFO put at the name would otherwise hold the daemon until something
/// writes to it). A name that is not a regular file at the check is not opened at all (a
/// device's open may act).
fn open_regular(file: &Path) -> Option<(std::fs::File, std::fs::Metadata)> {
    use std::os::unix::fs::OpenOptionsExt;
    if !std::fs::metadata(file).ok()?.is_file() {
        return None;
    }
    let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY).open(file).ok()?;
    let meta = f.metadata().ok()?;
    meta.is_file().then_some((f, meta))
}

/// How many values of one variable are kept, and how many paths one `PATH` part may stand
/// for once its variables are expanded.
const MAX_VALUES: usize = 8;

/// Shell variables the user's configuration files assign (`TOOLS=~/tools`, `export
/// GOPATH="$HOME/go"`, `declare -x X=...`, fish's `set -gx TOOLS ~/tools`), each with every
/// value it is given in any of them, in any order: a `PATH` part that names one
/// (`$TOOLS/bin`, `${GOPATH}/bin`) stands for each of its values. Counting a value that a
/// branch never takes only protects more. `HOME` and `PATH` are not taken: the home is the
/// account's, and `PATH`'s own parts are what [`code_places`] looks for.
#[derive(Debug, Default, Clone)]
pub struct ShellVariables(HashMap<String, Vec<String>>);

impl ShellVariables {
    /// The assignments in the texts of the configuration files ([`read_text`]).
    pub fn of_texts(texts: &[&str]) -> Self {
        let mut vars = ShellVariables::default();
        // The functions that put their arguments on PATH, then what each call passes them.
        let adders: Vec<String> = texts.iter().flat_map(|t| path_functions(t)).collect();
        for text in texts {
            vars.read(text);
            vars.read_calls(text, &adders);
        }
        vars
    }

    /// The arguments of the calls in `text` of the functions `adders`: the values of the
    /// positional parameters (`$1`, `$@`) in their bodies.
    fn read_calls(&mut self, text: &str, adders: &[String]) {
        for line in logical_lines(text) {
            let words = shell_words(line.trim());
            if let Some((first, args)) = words.split_first() {
                if adders.iter().any(|a| a == first) {
                    args.iter().filter(|a| !a.starts_with('-')).for_each(|a| self.add(POSITIONAL, a));
                }
            }
        }
    }

    /// Takes the assignments of one file's text (`pub(super)`: what a file sources may name
    /// a variable it assigns).
    pub(super) fn read(&mut self, text: &str) {
        for line in text.lines() {
            let words = shell_words(line.trim());
            // `${X:=default}` and `${X=default}` assign where they are expanded.
            for w in &words {
                let mut rest = w.as_str();
                while let Some(i) = rest.find("${") {
                    rest = &rest[i + 2..];
                    let end = rest.find('}').unwrap_or(rest.len());
                    if let Some((name, default)) = rest[..end].split_once(":=").or_else(|| rest[..end].split_once('=')) {
                        self.add(name, default);
                    }
                }
            }
            for (i, w) in words.iter().enumerate() {
                if w == "for" && words.get(i + 2).is_some_and(|x| x == "in") {
                    // for d in ~/a/bin ~/b/bin; do PATH="$d:$PATH"; done
                    let name = words[i + 1].clone();
                    words[i + 3..].iter().take_while(|x| *x != "do").for_each(|v| self.add(&name, v));
                    break;
                }
                if let Some((name, value)) = w.split_once('=') {
                    self.add(name.strip_suffix('+').unwrap_or(name), value);
                } else if w == "set" {
                    if let Some((name, values)) = fish_set(&words[i + 1..]) {
                        values.iter().for_each(|v| self.add(name, v));
                    }
                    break;
                }
            }
        }
    }

    fn add(&mut self, name: &str, value: &str) {
        let is_name = name == POSITIONAL || (name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
        if !is_name || matches!(name, "HOME" | "PATH" | "path" | "fish_user_paths") || value.is_empty() {
            return;
        }
        let values = self.0.entry(name.to_string()).or_default();
        if values.len() < MAX_VALUES && !values.iter().any(|v| v == value) {
            values.push(value.to_string());
        }
    }

    /// `part` with each variable it names (`$NAME`, `${NAME}`) that the files assign
    /// replaced by each of its values, nested ones too (four deep); a part that names
    /// none is itself. At most [`MAX_VALUES`] results.
    pub(super) fn expand(&self, part: &str) -> Vec<String> {
        let mut out = Vec::new();
        self.expand_into(part, 0, &mut out);
        out
    }

    fn expand_into(&self, part: &str, depth: usize, out: &mut Vec<String>) {
        if out.len() >= MAX_VALUES {
            return;
        }
        let mut from = 0;
        while let Some(off) = part[from..].find('$') {
            let start = from + off;
            let after = &part[start + 1..];
            let (name, end) = match after.strip_prefix('{') {
                Some(braced) => match braced.find('}') {
                    Some(e) => (&braced[..e], start + 3 + e),
                    None => break,
                },
                None if after.starts_with(['@', '*']) => (&after[..1], start + 2),
                None => {
                    let n = after.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(after.len());
                    (&after[..n], start + 1 + n)
                }
            };
            // `${X:-word}`, `${X:=word}`, `${X-word}`: X's values, and the word.
            let (name, default) = match name.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '@' || c == '*')) {
                Some(op) if name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') => {
                    let word = name[op..].trim_start_matches(':');
                    (&name[..op], word.strip_prefix('-').or_else(|| word.strip_prefix('=')))
                }
                _ => (name, None),
            };
            let name = if name.chars().all(|c| c.is_ascii_digit()) && !name.is_empty() || name == "@" || name == "*" { POSITIONAL } else { name };
            let values: Vec<&String> = self.0.get(name).into_iter().flatten().collect();
            if depth < 4 && (!values.is_empty() || default.is_some()) {
                for v in values.into_iter().map(String::as_str).chain(default) {
                    self.expand_into(&format!("{}{v}{}", &part[..start], &part[end..]), depth + 1, out);
                }
                return;
            }
            from = end.max(start + 1);
        }
        if !out.iter().any(|o| o == part) {
            out.push(part.to_string());
        }
    }
}

/// The name [`ShellVariables`] keeps the positional parameters under (`$1`, `$@`): every
/// argument of every call of a function that puts them on `PATH`.
const POSITIONAL: &str = "@";

/// The shell functions `text` defines (`name() {`, `function name {`) whose body puts a
/// positional parameter on `PATH` (`pathadd() { PATH="$1:$PATH"; }`).
fn path_functions(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in logical_lines(text) {
        let t = line.trim();
        let words = shell_words(t);
        let defined = match words.as_slice() {
            [f, name, ..] if f == "function" => Some(name.trim_end_matches("()").to_string()),
            [name, ..] if name.ends_with("()") && name.len() > 2 => Some(name.trim_end_matches("()").to_string()),
            [name, parens, ..] if parens == "()" => Some(name.clone()),
            _ => None,
        };
        if let Some(name) = defined {
            current = Some(name);
        }
        if let Some(name) = &current {
            let positional = ["$1", "${1}", "$@", "${@}", "$*"].iter().any(|p| t.contains(p));
            if positional && !path_folders(t).is_empty() && !out.contains(name) {
                out.push(name.clone());
            }
        }
        if t == "}" || t.ends_with("; }") || t.ends_with(";}") || t.ends_with(" }") {
            current = None;
        }
    }
    out
}

/// Variables of the environment whose value is a list of folders programs are run or
/// loaded from: the shell's and the loader's, the interpreters' module search paths (a
/// module there is what the user's next `import` loads, searched before the standard
/// library), git's own program folder and its template folder (whose hooks every new
/// repository gets).
const FOLDER_LISTS: &[&str] = &[
    "PATH",
    "LD_LIBRARY_PATH",
    "PYTHONPATH",
    "PERL5LIB",
    "PERLLIB",
    "NODE_PATH",
    "RUBYLIB",
    "GUILE_LOAD_PATH",
    "GUILE_LOAD_COMPILED_PATH",
    "R_LIBS",
    "R_LIBS_USER",
    "ERL_LIBS",
    "OCAMLPATH",
    "GCONV_PATH",
    "GIT_EXEC_PATH",
    "GIT_TEMPLATE_DIR",
];

/// Variables of the environment whose value names a folder of startup files (zsh reads
/// every one of its startup files from `ZDOTDIR`).
const FOLDERS: &[&str] = &["ZDOTDIR"];

/// Variables of the environment whose value is a command, a program or a file that the
/// user's shell or tools run or load: editors, pagers, git's and ssh's programs, `less`'s
/// input filter, the shell's prompt command and startup files, Python's startup file,
/// preloaded libraries, node's options (`--require`), git's global configuration.
const PROGRAMS: &[&str] = &[
    "EDITOR",
    "VISUAL",
    "PAGER",
    "MANPAGER",
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
    "GIT_PAGER",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_ASKPASS",
    "GIT_EXTERNAL_DIFF",
    "SSH_ASKPASS",
    "SUDO_ASKPASS",
    "BROWSER",
    "LESSOPEN",
    "LESSCLOSE",
    "PROMPT_COMMAND",
    "BASH_ENV",
    "ENV",
    "PYTHONSTARTUP",
    "LD_PRELOAD",
    "LD_AUDIT",
    "NODE_OPTIONS",
    "PERL5OPT",
    "RUBYOPT",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "SHELL",
];

/// Variables of the environment whose value is a configuration file the user's tools read
/// as the never list's own (git's global and system configuration, the startup file of a
/// non-interactive bash or of `sh`): read for what it names and loads, watched, and
/// protected as a never place ([`UserEnvironment::configs`]). `ZDOTDIR` ([`FOLDERS`]) is a
/// folder of them.
const CONFIGS: &[&str] = &["GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "BASH_ENV", "ENV"];

/// What the environment of the user's process that started a session tells of where the
/// user's tools run and read code ([`of_process`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserEnvironment {
    /// The places its variables name.
    pub places: Vec<CodePlace>,
    /// The variables of [`MOVABLE`] (`XDG_CONFIG_HOME`, `GNUPGHOME`, `CARGO_HOME`,
    /// `KUBECONFIG`, ...) where they are not the defaults: the never list's places there
    /// move with them (a list variable once for each of its paths).
    pub moved: Vec<(&'static str, PathBuf)>,
    /// The configuration files (and folders of them) its variables name ([`CONFIGS`],
    /// `ZDOTDIR`): never places of their own, read again with the never list's whenever the
    /// configuration is, so a change the user makes to one later counts.
    pub configs: Vec<PathBuf>,
    /// The user's files that its variables name as data, neither a program nor a public
    /// certificate ([`named_paths`]): credentials (`GOOGLE_APPLICATION_CREDENTIALS`, the key
    /// in `GIT_SSH_COMMAND`'s `-i`), histories, a tool's configuration. Never read nor
    /// changed by a session.
    pub secrets: Vec<PathBuf>,
}

impl UserEnvironment {
    /// Adds what `other` tells: its places, and its moved base directories (a directory
    /// moved in either is never-grantable at both places).
    pub fn merge(&mut self, other: &UserEnvironment) {
        for p in &other.places {
            if !self.places.contains(p) {
                self.places.push(p.clone());
            }
        }
        for m in &other.moved {
            if !self.moved.contains(m) {
                self.moved.push(m.clone());
            }
        }
        for c in &other.configs {
            if !self.configs.contains(c) {
                self.configs.push(c.clone());
            }
        }
        for c in &other.secrets {
            if !self.secrets.contains(c) {
                self.secrets.push(c.clone());
            }
        }
    }
}

/// Variables whose value names where a process is or what it is, not where the user's
/// tools keep code, data or credentials: the working folders, the home, the temporary and
/// runtime folders (shared places, gated as roots are), the session's own.
const NOT_TOOL_PLACES: &[&str] = &["PWD", "OLDPWD", "HOME", "TMPDIR", "TMP", "TEMP", "TEMPDIR", "XDG_RUNTIME_DIR", "PINCER_SOCKET", "PINCER_SESSION", "PINCER_CONFIG"];

/// How many paths [`named_paths`] looks at in one environment at most.
const NAMED_PATHS_MAX: usize = 512;

/// How many distinct paths [`named_in_configuration`] looks at in one reading of the
/// configuration at most: the never places' folders are read whole (a shell framework's
/// plugins), and what they name must not use up the bound before the files after them.
const CONFIGURATION_PATHS_MAX: usize = 4096;

/// Every absolute path of the user's that a variable's value names, wherever it stands in
/// the value: a list (`XDG_DATA_DIRS`, `CLASSPATH`, `GEM_PATH`), a command's argument
/// (`ssh -i ~/keys/deploy`), an option's value (`-javaagent:/x/a.jar`,
/// `JAVA_TOOL_OPTIONS`), a file (`GOOGLE_APPLICATION_CREDENTIALS`). Whatever variable names
/// it, a path in the environment of the user's process is where the user's tools run,
/// load or read something from: the user's configuration of them, not the session's work.
/// Not read: [`NOT_TOOL_PLACES`]' variables; each path is classified by [`named_path`].
fn named_paths(name: &str, value: &str, home: &Path, roots: &[PathBuf], seen: &mut usize, env: &mut UserEnvironment) {
    if NOT_TOOL_PLACES.contains(&name) || name.starts_with("PINCER_") {
        return;
    }
    for p in path_words(value, home) {
        if !named_path(p, home, roots, NAMED_PATHS_MAX, seen, env) {
            return;
        }
    }
}

/// The absolute paths and paths from the home (`~/`) among the words of `value`, split at
/// list, assignment and option separators (`:`, `=`, `,`, `;`), blanks and quotes.
fn path_words<'a>(value: &'a str, home: &'a Path) -> impl Iterator<Item = PathBuf> + 'a {
    value.split(|c: char| c == ':' || c == '=' || c == ',' || c == ';' || c.is_whitespace() || c == '"' || c == '\'').filter_map(move |w| match w.strip_prefix("~/") {
        Some(rest) => Some(home.join(rest)),
        None if w.starts_with('/') => Some(PathBuf::from(w)),
        None => None,
    })
}

/// Classifies one path the user's configuration names (a variable of the starter's
/// environment, [`named_paths`]; a configuration file's setting, [`named_in_configuration`])
/// into `env`: a folder is a code place as a `PATH` folder is; an executable file a
/// program; any other regular file a secret, never read either, but a public certificate
/// (which TLS clients in the session need to read). A search template (`LUA_PATH`'s
/// `/x/lua/?.lua`, a `%s` or a glob) names the folder it searches. Not classified: paths
/// that are a session root, inside one or above one, the home or above it, paths that do
/// not exist or are not the user's (`code_place_rules` checks the owner). Each path looked
/// at on the filesystem counts in `seen`; `false` once more than `max` were.
fn named_path(p: PathBuf, home: &Path, roots: &[PathBuf], max: usize, seen: &mut usize, env: &mut UserEnvironment) -> bool {
    let p: PathBuf = p.components().take_while(|c| !c.as_os_str().to_string_lossy().contains(['?', '*', '%'])).collect();
    if p.components().any(|c| c == std::path::Component::ParentDir) || home.starts_with(&p) || roots.iter().any(|r| p.starts_with(r) || r.starts_with(&p)) {
        return true;
    }
    *seen += 1;
    if *seen > max {
        return false;
    }
    let real = p.canonicalize().unwrap_or_else(|_| p.clone());
    if home.starts_with(&real) || roots.iter().any(|r| real.starts_with(r) || r.starts_with(&real)) {
        return true;
    }
    let Ok(meta) = std::fs::metadata(&p) else { return true };
    use std::os::unix::fs::PermissionsExt;
    let place = if meta.is_dir() {
        CodePlace::Folder(p.clone())
    } else if !meta.is_file() {
        return true;
    } else if meta.permissions().mode() & 0o111 != 0 {
        CodePlace::Program(p.clone())
    } else {
        let head = read_head(&p, CERTIFICATE_HEAD).unwrap_or_default();
        if !head.trim_ascii_start().starts_with(b"-----BEGIN CERTIFICATE-----") && !env.secrets.contains(&p) {
            env.secrets.push(p.clone());
        }
        CodePlace::Program(p.clone())
    };
    if !env.places.contains(&place) {
        env.places.push(place);
    }
    true
}

/// How much of a named file is read to tell a public certificate: its first bytes.
const CERTIFICATE_HEAD: usize = 4096;

/// The first `max` bytes (at most) of the regular file `file` names, opened by
/// [`open_regular`].
fn read_head(file: &Path, max: usize) -> Option<Vec<u8>> {
    use std::io::Read;
    let (f, _) = open_regular(file)?;
    let mut bytes = Vec::with_capacity(max);
    f.take(max as u64).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// Every path of the user's that the user's configuration files name, whatever the
/// setting: ssh's `IdentityFile ~/keys/id_work`, git's `user.signingKey` and `http.sslKey`,
/// a shell's `export X=~/tools`, a tool's `"cafile": "/x/ca.pem"`. As a variable of the
/// starter's environment ([`named_paths`]), a path a configuration file names is where the
/// user's tools run, load or read something from, classified the same way ([`named_path`]):
/// a key it names is a secret, never read. `files` are the configuration files read, each
/// with its text, in the order read. Not read: comment lines (`#`, `;`, `//`) and a `#`
/// comment after a blank, section headers (git's `[includeIf "gitdir:~/work/"]` names where a
/// setting applies), a JSON object's keys (an agent's record of the projects it ran in),
/// the files that record what the user did rather than configure a tool (a history,
/// `.viminfo`: [`is_record`]), and the configuration files themselves (a file a shell
/// sources is read by it: a loaded file, protected as one). `$HOME/` and `${HOME}/` count
/// as `~/`. At most [`CONFIGURATION_PATHS_MAX`] distinct paths are looked at.
pub fn named_in_configuration<'a>(files: impl Iterator<Item = (&'a Path, &'a str)>, home: &Path, roots: &[PathBuf]) -> UserEnvironment {
    let mut env = UserEnvironment::default();
    let files: Vec<(&Path, &str)> = files.collect();
    let read: std::collections::HashSet<&Path> = files.iter().map(|(f, _)| *f).collect();
    let mut looked: std::collections::HashSet<PathBuf> = Default::default();
    let mut seen = 0;
    for (file, text) in &files {
        if is_record(file) {
            continue;
        }
        for line in logical_lines(text) {
            let mut t = line.trim();
            if t.starts_with('#') || t.starts_with(';') || t.starts_with("//") {
                continue;
            }
            if let Some((_, rest)) = git_section(t) {
                t = rest.trim();
            }
            let t = without_comment(t);
            let t = without_json_keys(t).replace("${HOME}/", "~/").replace("$HOME/", "~/");
            for p in path_words(&t, home) {
                if read.contains(p.as_path()) || !looked.insert(p.clone()) {
                    continue;
                }
                if !named_path(p, home, roots, CONFIGURATION_PATHS_MAX, &mut seen, &mut env) {
                    return env;
                }
            }
        }
    }
    env
}

/// Whether the configuration file `file` records what the user did (a shell's, a REPL's or
/// a pager's history, vim's `.viminfo`) rather than configures a tool: the paths it names
/// are where the user worked, not where a tool reads.
fn is_record(file: &Path) -> bool {
    let name = file.file_name().map(|n| n.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
    ["hist", "hst", "viminfo"].iter().any(|r| name.contains(r))
}

/// A line without a comment that follows a blank (`x=1 # ~/note`).
fn without_comment(line: &str) -> &str {
    let bytes = line.as_bytes();
    for i in 1..bytes.len() {
        if bytes[i] == b'#' && bytes[i - 1].is_ascii_whitespace() {
            return &line[..i];
        }
    }
    line
}

/// A line with each JSON object key (a quoted string followed by `:`) left out.
fn without_json_keys(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(open) = rest.find('"') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find('"') else {
            out.push_str(&rest[open..]);
            return out;
        };
        let string = &rest[open..open + close + 2];
        rest = &after[close + 1..];
        if !rest.trim_start().starts_with(':') {
            out.push_str(string);
        }
    }
    out.push_str(rest);
    out
}

/// The places the environment of the user's process `pid` (the one that started a
/// session) runs programs from, read from `/proc/PID/environ`, whatever built it (`eval
/// "$(tool init)"`, a shell function, a file [`code_places`] does not follow): the folders
/// on its `PATH` ([`FOLDER_LISTS`], absolute parts only), its [`FOLDERS`], and the paths
/// in its [`PROGRAMS`]; the configuration files among those ([`CONFIGS`]) and `ZDOTDIR`
/// are kept as [`UserEnvironment::configs`], read with the never list's. Nothing for a
/// process that is gone or an environment larger than [`MAX_BYTES`].
pub fn of_process(pid: u32, home: &Path, roots: &[PathBuf]) -> UserEnvironment {
    let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else { return UserEnvironment::default() };
    of_environ(&env, home, roots)
}

/// [`of_process`] of an environment as `/proc/PID/environ` gives it (`NAME=value`
/// entries, each ended by a NUL); nothing for one larger than [`MAX_BYTES`].
pub fn of_environ(env: &[u8], home: &Path, roots: &[PathBuf]) -> UserEnvironment {
    if env.len() as u64 > MAX_BYTES {
        return UserEnvironment::default();
    }
    of_environment(env.split(|b| *b == 0).filter_map(|kv| {
        let eq = kv.iter().position(|b| *b == b'=')?;
        Some((OsStr::from_bytes(&kv[..eq]), OsStr::from_bytes(&kv[eq + 1..])))
    }), home, roots)
}

/// [`of_process`] of an environment's text (`NAME=value` entries, each ended by a NUL).
#[cfg(test)]
pub(super) fn of_environment_text(text: &str, home: &Path, roots: &[PathBuf]) -> UserEnvironment {
    of_environment(text.split('\0').filter_map(|kv| kv.split_once('=')).map(|(k, v)| (OsStr::new(k), OsStr::new(v))), home, roots)
}

/// [`of_process`] of an environment's variables.
fn of_environment<'a>(vars: impl Iterator<Item = (&'a OsStr, &'a OsStr)>, home: &Path, roots: &[PathBuf]) -> UserEnvironment {
    let vars: Vec<(&OsStr, &OsStr)> = vars.collect();
    let all: HashMap<String, String> = vars.iter().filter_map(|(k, v)| Some((k.to_str()?.to_string(), v.to_str()?.to_string()))).collect();
    let mut env = UserEnvironment::default();
    let mut push = |p: CodePlace| {
        if !env.places.contains(&p) {
            env.places.push(p);
        }
    };
    for (name, value) in vars {
        let Some(name) = name.to_str() else { continue };
        if FOLDER_LISTS.contains(&name) {
            path_value(value).into_iter().for_each(&mut push);
        } else if FOLDERS.contains(&name) {
            for place in path_value(value).into_iter().take(1) {
                if !env.configs.iter().any(|c| c == place.path()) {
                    env.configs.push(place.path().to_path_buf());
                }
                push(place);
            }
        } else if PROGRAMS.contains(&name) {
            let Some(value) = value.to_str() else { continue };
            for (p, _) in command_paths(&value.replace(':', " "), Some(home), None) {
                if p.is_absolute() {
                    if CONFIGS.contains(&name) && !env.configs.contains(&p) {
                        env.configs.push(p.clone());
                    }
                    push(CodePlace::Program(p));
                }
            }
        }
        if let Some(m) = MOVABLE.iter().find(|m| m.var == name) {
            for part in value.as_bytes().split(|b| m.list && *b == b':') {
                let p = Path::new(OsStr::from_bytes(part));
                if p.is_absolute() && p != home.join(m.default) && !p.components().any(|c| c == std::path::Component::ParentDir) && !env.moved.iter().any(|(v, q)| *v == m.var && q == p) {
                    env.moved.push((m.var, p.to_path_buf()));
                }
            }
        }
    }
    for (key, value) in git_settings(&all) {
        let (section, name) = match key.split_once('.') {
            Some((section, rest)) => (section.to_ascii_lowercase(), rest.rsplit('.').next().unwrap_or(rest).to_ascii_lowercase()),
            None => continue,
        };
        if (section == "include" || section == "includeif") && name == "path" {
            // A configuration git includes: read with the never list's.
            if let Some(p) = path_of(&value, Some(home), None) {
                if !env.configs.contains(&p) {
                    env.configs.push(p.clone());
                }
                push(CodePlace::Program(p));
            }
            continue;
        }
        git_places(&section, &name, &value, Some(home), None).into_iter().for_each(&mut push);
    }
    let mut seen = 0;
    let mut names: Vec<&String> = all.keys().collect();
    names.sort();
    for name in names {
        named_paths(name, &all[name], home, roots, &mut seen, &mut env);
    }
    env
}

/// The git settings an environment gives (`GIT_CONFIG_COUNT` with `GIT_CONFIG_KEY_<n>` and
/// `GIT_CONFIG_VALUE_<n>`, and `GIT_CONFIG_PARAMETERS`' `'key'='value'` words, what `git -c`
/// passes on): each key (`section[.subsection].key`) with its value.
fn git_settings(vars: &HashMap<String, String>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let count: usize = vars.get("GIT_CONFIG_COUNT").and_then(|c| c.trim().parse().ok()).unwrap_or(0);
    for i in 0..count.min(1000) {
        if let (Some(k), Some(v)) = (vars.get(&format!("GIT_CONFIG_KEY_{i}")), vars.get(&format!("GIT_CONFIG_VALUE_{i}"))) {
            out.push((k.clone(), v.clone()));
        }
    }
    if let Some(params) = vars.get("GIT_CONFIG_PARAMETERS") {
        for word in shell_words(params) {
            if let Some((k, v)) = word.split_once('=') {
                out.push((k.to_string(), v.to_string()));
            }
        }
    }
    out
}

/// A variable that moves where a tool keeps what the never list names under its default
/// (`GNUPGHOME` moves `~/.gnupg`, `KUBECONFIG` moves `~/.kube/config`): the never list's
/// places at or under the default, and the default itself where a rule's folder holds it,
/// are never places at the variable's value too, with the same access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Movable {
    /// The variable.
    pub var: &'static str,
    /// Its default, from the home.
    pub default: &'static str,
    /// Whether it names a folder (else a file).
    pub folder: bool,
    /// Whether its value is a `:`-separated list of them.
    pub list: bool,
}

const fn movable(var: &'static str, default: &'static str, folder: bool) -> Movable {
    Movable { var, default, folder, list: false }
}

/// The variables that move the never list's places: the XDG base directories, and the
/// tools' own homes and files for credentials, histories and the configuration that runs
/// code.
pub const MOVABLE: &[Movable] = &[
    movable("XDG_CONFIG_HOME", ".config", true),
    movable("XDG_DATA_HOME", ".local/share", true),
    movable("GNUPGHOME", ".gnupg", true),
    movable("PASSWORD_STORE_DIR", ".password-store", true),
    movable("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials", false),
    movable("AWS_CONFIG_FILE", ".aws/config", false),
    movable("AZURE_CONFIG_DIR", ".azure", true),
    movable("CLOUDSDK_CONFIG", ".config/gcloud", true),
    movable("OCI_CLI_CONFIG_FILE", ".oci/config", false),
    Movable { var: "KUBECONFIG", default: ".kube/config", folder: false, list: true },
    movable("DOCKER_CONFIG", ".docker", true),
    movable("REGISTRY_AUTH_FILE", ".config/containers/auth.json", false),
    movable("GH_CONFIG_DIR", ".config/gh", true),
    movable("CARGO_HOME", ".cargo", true),
    movable("RUSTUP_HOME", ".rustup", true),
    movable("NPM_CONFIG_USERCONFIG", ".npmrc", false),
    movable("npm_config_userconfig", ".npmrc", false),
    movable("PYPIRC", ".pypirc", false),
    movable("NETRC", ".netrc", false),
    movable("PGPASSFILE", ".pgpass", false),
    movable("VAULT_CONFIG_PATH", ".vault-token", false),
    movable("BOTO_CONFIG", ".boto", false),
    movable("HF_TOKEN_PATH", ".huggingface/token", false),
    movable("RCLONE_CONFIG", ".config/rclone/rclone.conf", false),
    movable("HISTFILE", ".bash_history", false),
    movable("PSQL_HISTORY", ".psql_history", false),
    movable("MYSQL_HISTFILE", ".mysql_history", false),
    movable("NODE_REPL_HISTORY", ".node_repl_history", false),
    movable("PYTHON_HISTORY", ".python_history", false),
    movable("SQLITE_HISTORY", ".sqlite_history", false),
    movable("LESSHISTFILE", ".lesshst", false),
    movable("INPUTRC", ".inputrc", false),
    movable("NVM_DIR", ".nvm", true),
    movable("PYENV_ROOT", ".pyenv", true),
    movable("RBENV_ROOT", ".rbenv", true),
    movable("VOLTA_HOME", ".volta", true),
    movable("SDKMAN_DIR", ".sdkman", true),
    movable("ASDF_DATA_DIR", ".asdf", true),
    movable("GEMRC", ".gemrc", false),
];

/// The pattern a never rule's `pattern` takes where `m` moves its default, written `from`
/// (`~/.gnupg`, or the same from the home's path), to `to`: a rule at or under the default
/// moves with it (`~/.cargo/bin/**` to `TO/bin/**`); a rule of a folder that holds the
/// default (`~/.aws/**` holding `~/.aws/credentials`) gives the place moved (`TO`, or
/// `TO/**` for a folder). `None` for a rule that has nothing to do with it.
pub fn moved_pattern(pattern: &str, from: &str, m: &Movable, to: &Path) -> Option<String> {
    if pattern == from {
        return Some(to.display().to_string());
    }
    if let Some(rest) = pattern.strip_prefix(from).and_then(|r| r.strip_prefix('/')) {
        return Some(format!("{}/{rest}", to.display()));
    }
    let folder = pattern.strip_suffix("/**")?;
    if folder.contains(['*', '?', '[', '{']) || !from.strip_prefix(folder).is_some_and(|r| r.starts_with('/')) {
        return None;
    }
    Some(if m.folder { format!("{}/**", to.display()) } else { to.display().to_string() })
}

/// The folders of a `PATH` value: its absolute parts without `..`.
fn path_value(value: &OsStr) -> Vec<CodePlace> {
    let mut out: Vec<CodePlace> = Vec::new();
    for part in value.as_bytes().split(|b| *b == b':') {
        let p = Path::new(OsStr::from_bytes(part));
        if p.is_absolute() && !p.components().any(|c| c == std::path::Component::ParentDir) {
            let place = CodePlace::Folder(p.to_path_buf());
            if !out.contains(&place) {
                out.push(place);
            }
        }
    }
    out
}

/// [`code_places`] of a file's text.
pub(super) fn places_in(text: &str, home: Option<&Path>, worktree: Option<&Path>, vars: &ShellVariables) -> Vec<CodePlace> {
    let mut out = Vec::new();
    let mut push = |p: CodePlace| {
        if !out.contains(&p) {
            out.push(p);
        }
    };
    let mut section = String::new();
    for line in logical_lines(text) {
        let mut t = line.trim();
        if t.starts_with('#') || t.starts_with(';') || t.is_empty() {
            continue;
        }
        if let Some((name, rest)) = git_section(t) {
            // `[core]`, `[filter "lfs"]`, `[core] hooksPath = x` (not a shell's `[ -d x ]`).
            section = name;
            t = rest.trim();
            if t.is_empty() {
                continue;
            }
        }
        if !section.is_empty() {
            if let Some((key, value)) = t.split_once('=') {
                let key = key.trim().to_ascii_lowercase();
                let value = unquote(strip_git_comment(value));
                git_places(&section, &key, value, home, worktree).into_iter().for_each(&mut push);
                continue;
            }
        }
        // The programs a shell line names: an alias's command, and the variables the
        // environment runs ([`PROGRAMS`]: `export EDITOR=~/x/edit.sh`), from the root or
        // the home.
        for value in program_values(t).iter().flat_map(|v| vars.expand(v)) {
            for (p, rooted) in command_paths(&value, home, None) {
                if rooted {
                    push(CodePlace::Program(p));
                }
            }
        }
        // The commands ssh's and tmux's configuration runs (`ProxyCommand`, `Match exec`,
        // `run-shell`, `#(...)`), from the root or the home.
        for command in run_commands(t) {
            for (p, rooted) in command_paths(&command, home, None) {
                if rooted {
                    push(CodePlace::Program(p));
                }
            }
        }
        // A part that names a variable stands for each of its values, which may hold
        // several parts (`MYPATH="$HOME/x/bin:$PATH"`).
        for dir in path_folders(t).iter().flat_map(|d| vars.expand(d)) {
            for part in split_path_value(&dir) {
                if let Some(p) = path_of(&part, home, None) {
                    push(CodePlace::Folder(p));
                }
            }
        }
    }
    out
}

/// The places one git configuration entry names as code: the folder of `core.hooksPath`
/// and of `init.templateDir` (whose hooks every new repository gets); every path in the
/// value of a key git runs as a command ([`is_command_key`]: the program, and the script
/// an interpreter runs, `!bash ~/x/deploy.sh`); and for any other key, every path from
/// the root or the home in its value that names an existing file (`gpg.ssh.
/// defaultKeyCommand`, a key git learns later). `include` paths are loaded files
/// ([`super::contain::loaded_files`]).
fn git_places(section: &str, key: &str, value: &str, home: Option<&Path>, worktree: Option<&Path>) -> Vec<CodePlace> {
    if section == "include" || section == "includeif" {
        return vec![];
    }
    match (section, key) {
        ("core", "hookspath") if worktree.is_none() && is_relative_folder(value) => return vec![CodePlace::InEveryRepository(normalize(Path::new(value)))],
        ("core", "hookspath") | ("init", "templatedir") => return path_of(value, home, worktree).map(CodePlace::Folder).into_iter().collect(),
        _ => {}
    }
    let command = is_command_key(section, key, value);
    let value = if section == "alias" { value.trim_start_matches('!') } else { value };
    let mut out = Vec::new();
    for (p, rooted) in command_paths(value, home, worktree) {
        if (command || (rooted && std::fs::metadata(&p).is_ok_and(|m| m.is_file()))) && !out.contains(&CodePlace::Program(p.clone())) {
            out.push(CodePlace::Program(p));
        }
    }
    out
}

/// Every path a command line names (a program, the script an interpreter runs, an
/// option's file: `--file=~/x`; a quoted word with blanks is a command of its own, `sh -c
/// 'exec ~/x.sh'`), as [`path_of`] takes it, each with whether it was written from the root
/// or the home (not relative). URLs and bare names are not paths.
fn command_paths(command: &str, home: Option<&Path>, worktree: Option<&Path>) -> Vec<(PathBuf, bool)> {
    let words: Vec<String> = shell_words(command).into_iter().flat_map(|w| if w.contains(char::is_whitespace) { shell_words(&w) } else { vec![w] }).collect();
    let mut out = Vec::new();
    for word in &words {
        let word = word.rsplit_once('=').map_or(word.as_str(), |(_, v)| v);
        let word = word.trim_start_matches('|');
        if word.contains("://") || !word.contains('/') {
            continue;
        }
        let rooted = word.starts_with('/') || word.starts_with('~') || word.starts_with('$') || word.starts_with('@');
        if let Some(p) = path_of(word, home, worktree) {
            out.push((p, rooted));
        }
    }
    out
}

/// Whether `value` is a relative folder below where it is taken from (`.githooks`,
/// `tools/hooks`; not `~/x`, `$X/y`, `../x`, nor `.`).
fn is_relative_folder(value: &str) -> bool {
    let p = Path::new(value);
    !value.is_empty()
        && !value.starts_with(['/', '~', '$', '@'])
        && p.components().all(|c| matches!(c, std::path::Component::Normal(_) | std::path::Component::CurDir))
        && p.components().any(|c| matches!(c, std::path::Component::Normal(_)))
}

/// Whether git runs the value of `section.key` as a command: the keys of [`GIT_COMMANDS`],
/// `pager.*`, an alias that starts with `!`, a `path` of a tool's section, and every key
/// whose name says it is one (`*cmd`, `*command`, `*program`, `*helper`, `*driver`,
/// `*tunnel`, `*editor`, `*askpass`, `*proxy`, `*textconv`, `*pack`).
fn is_command_key(section: &str, key: &str, value: &str) -> bool {
    const ENDINGS: &[&str] = &["cmd", "command", "program", "helper", "driver", "tunnel", "editor", "askpass", "proxy", "textconv", "uploadpack", "receivepack", "fsmonitor"];
    let full = format!("{section}.{key}");
    GIT_COMMANDS.contains(&full.as_str())
        || section == "pager"
        || (section == "alias" && value.starts_with('!'))
        || (key == "path" && matches!(section, "difftool" | "mergetool" | "man" | "browser" | "web"))
        || (section != "http" && section != "remote" && ENDINGS.iter().any(|e| key.ends_with(e)))
        || (section == "remote" && (key == "uploadpack" || key == "receivepack"))
}

/// A git section header at the start of `line`: its name in lower case (the part before
/// a subsection or a dot) and what follows the `]` on the line. `None` for a line that is
/// not one (a shell's `[ -d x ]` or `[[ ... ]]`).
pub(super) fn git_section(line: &str) -> Option<(String, &str)> {
    let rest = line.strip_prefix('[')?;
    let name_len = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '-')).unwrap_or(rest.len());
    if name_len == 0 || !rest.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return None;
    }
    let after = rest[name_len..].trim_start();
    let after = match after.strip_prefix('"') {
        Some(sub) => sub[sub.find('"')? + 1..].trim_start(),
        None => after,
    };
    let tail = after.strip_prefix(']')?;
    let name = rest[..name_len].split('.').next().unwrap_or("").to_ascii_lowercase();
    Some((name, tail))
}

/// A git value without a comment that follows it outside quotes (`x ; note`, `x # note`).
fn strip_git_comment(value: &str) -> &str {
    let mut quoted = false;
    for (i, c) in value.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ';' | '#' if !quoted => return value[..i].trim(),
            _ => {}
        }
    }
    value.trim()
}

/// A file's lines with a line that ends in a backslash joined to the next (shells and git
/// both continue a line so).
fn logical_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in text.lines() {
        match line.strip_suffix('\\') {
            Some(head) => cur.push_str(head),
            None => {
                cur.push_str(line);
                out.push(std::mem::take(&mut cur));
            }
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The parts of a `PATH` value: split at the `:` outside `${...}`, with the expansions of
/// `PATH` itself dropped from each (`$HOME/x/bin${PATH:+:${PATH}}` is `$HOME/x/bin`).
fn split_path_value(value: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut depth = 0usize;
    let mut chars = value.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '$' if chars.peek() == Some(&'{') => {
                depth += 1;
                cur.push(c);
            }
            '}' if depth > 0 => {
                depth -= 1;
                cur.push(c);
            }
            ':' if depth == 0 => parts.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    parts.push(cur);
    parts.into_iter().map(|p| drop_path_expansions(&p)).filter(|p| !p.is_empty() && !is_path_variable(p)).collect()
}

/// Where in `inner`, which follows an `open` bracket, the bracket that closes it stands
/// (brackets nested in between counted); `None` if none does.
fn closing(inner: &str, open: char, close: char) -> Option<usize> {
    let mut depth = 1usize;
    for (j, c) in inner.char_indices() {
        if c == open {
            depth += 1;
        } else if c == close {
            depth -= 1;
            if depth == 0 {
                return Some(j);
            }
        }
    }
    None
}

/// `part` without the expansions of `PATH` in it (`${PATH}`, `${PATH:+:${PATH}}`,
/// `${PATH:-}`, `$PATH`).
fn drop_path_expansions(part: &str) -> String {
    let mut out = String::new();
    let mut rest = part;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(inner) = after.strip_prefix('{').filter(|b| b.starts_with("PATH") && !b[4..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')) {
            // Skip to the matching brace.
            rest = closing(inner, '{', '}').map_or("", |j| &inner[j + 1..]);
        } else if after.starts_with("PATH") && !after[4..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
            rest = &after[4..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// The commands one shell line names as programs: the values of an `alias` and of the
/// assignments of [`PROGRAMS`] (`NAME=...`, `export NAME=...`, fish's `set -gx NAME ...`).
fn program_values(line: &str) -> Vec<String> {
    let words = shell_words(line);
    let mut out = Vec::new();
    let is_alias = words.first().is_some_and(|w| w == "alias");
    for (i, w) in words.iter().enumerate() {
        if let Some((name, value)) = w.split_once('=') {
            if is_alias || PROGRAMS.contains(&name) {
                out.push(value.to_string());
            }
        } else if w == "set" {
            if let Some((_, values)) = fish_set(&words[i + 1..]).filter(|(name, _)| PROGRAMS.contains(&name.as_str())) {
                out.extend(values.iter().cloned());
            }
            break;
        }
    }
    out
}

/// ssh's keywords whose value is a command it runs or a library it loads.
const SSH_COMMANDS: &[&str] = &["proxycommand", "knownhostscommand", "localcommand", "pkcs11provider", "securitykeyprovider", "xauthlocation"];

/// tmux's commands whose arguments are shell commands it runs (`run-shell`, `if-shell`'s
/// condition, a popup's or a new pane's command), and the options whose value is one.
const TMUX_COMMANDS: &[&str] = &[
    "run-shell",
    "run",
    "if-shell",
    "display-popup",
    "popup",
    "new-window",
    "neww",
    "split-window",
    "splitw",
    "pipe-pane",
    "pipep",
    "respawn-pane",
    "respawnp",
    "respawn-window",
    "respawnw",
    "default-command",
    "default-shell",
];

/// tmux's commands that hold another command or an option's value after their own words
/// (`bind x run-shell ...`, `set -g default-command ...`, `set-hook -g h 'run ...'`).
const TMUX_HOLDERS: &[&str] = &["bind", "bind-key", "set", "set-option", "setw", "set-window-option", "set-hook", "if-shell"];

/// The commands one line of ssh's or tmux's configuration runs: the value of ssh's
/// [`SSH_COMMANDS`] (`ProxyCommand ~/x/proxy.sh %h %p`, `Key=value` too) and of `Match
/// exec`, the arguments of tmux's [`TMUX_COMMANDS`] (`run-shell ~/x/init.sh`, and inside a
/// binding, an option or a hook), and every `#(...)` tmux runs where it expands a format
/// (`status-right "#(~/x/status.sh)"`).
fn run_commands(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let t = line.trim();
    let end = t.find(|c: char| c.is_whitespace() || c == '=').unwrap_or(t.len());
    let (keyword, rest) = (t[..end].to_ascii_lowercase(), t[end..].trim_start().trim_start_matches('=').trim());
    if SSH_COMMANDS.contains(&keyword.as_str()) {
        out.push(rest.to_string());
    } else if keyword == "match" {
        let words = shell_words(rest);
        for (i, w) in words.iter().enumerate() {
            if w.eq_ignore_ascii_case("exec") {
                out.extend(words.get(i + 1).cloned());
            }
        }
    }
    tmux_commands(t, 0, &mut out);
    let mut rest = t;
    while let Some(i) = rest.find("#(") {
        let inner = &rest[i + 2..];
        let stop = closing(inner, '(', ')').unwrap_or(inner.len());
        out.push(inner[..stop].to_string());
        rest = &inner[stop..];
    }
    out
}

/// The arguments of the tmux commands of [`TMUX_COMMANDS`] in `line` ([`run_commands`]): a
/// quoted argument with blanks is a command line of its own, read again (three deep).
fn tmux_commands(line: &str, depth: usize, out: &mut Vec<String>) {
    for words in split_commands(line) {
        let first = words.first().map(String::as_str).unwrap_or("");
        let starts = if TMUX_COMMANDS.contains(&first) {
            Some(1)
        } else if TMUX_HOLDERS.contains(&first) {
            words.iter().position(|w| TMUX_COMMANDS.contains(&w.as_str())).map(|i| i + 1)
        } else {
            None
        };
        let Some(from) = starts else { continue };
        for w in words[from..].iter().filter(|w| !w.starts_with('-')) {
            if w.contains(char::is_whitespace) && depth < 3 {
                tmux_commands(w, depth + 1, out);
            }
            out.push(w.clone());
        }
    }
}

/// The folders one shell line puts on `PATH` (unexpanded; `$PATH` and other variables'
/// parts left out).
fn path_folders(line: &str) -> Vec<String> {
    let words = shell_words(line);
    let mut out = Vec::new();
    let mut keep = |w: &str| {
        let w = w.trim();
        if !w.is_empty() && !is_path_variable(w) {
            out.push(w.to_string());
        }
    };
    for (i, w) in words.iter().enumerate() {
        // PATH=a:b, PATH+=a, export PATH=..., PATH DEFAULT=... OVERRIDE=...
        if let Some(v) = w.strip_prefix("PATH=").or_else(|| w.strip_prefix("PATH+=")) {
            keep(v);
        } else if let Some(v) = w.strip_prefix("path+=").filter(|v| !v.starts_with('(')) {
            // zsh: path+=~/x/bin
            keep(v);
        } else if *w == "PATH" && i + 1 < words.len() && (words[i + 1].starts_with("DEFAULT=") || words[i + 1].starts_with("OVERRIDE=")) {
            for next in &words[i + 1..] {
                if let Some(v) = next.strip_prefix("DEFAULT=").or_else(|| next.strip_prefix("OVERRIDE=")) {
                    keep(v);
                }
            }
        } else if let Some(v) = w.strip_prefix("path=(").or_else(|| w.strip_prefix("path+=(")) {
            // zsh: path=(a b $path)
            keep(v.trim_end_matches(')'));
            for next in &words[i + 1..] {
                keep(next.trim_end_matches(')'));
                if next.ends_with(')') {
                    break;
                }
            }
        } else if *w == "set" {
            // fish: set [-gxU...] PATH|fish_user_paths a b $PATH
            if let Some((_, values)) = fish_set(&words[i + 1..]).filter(|(name, _)| *name == "PATH" || *name == "fish_user_paths") {
                values.iter().for_each(|v| keep(v));
            }
            break;
        } else if *w == "fish_add_path" {
            words[i + 1..].iter().filter(|x| !x.starts_with('-')).for_each(|v| keep(v));
            break;
        }
    }
    out
}

/// fish's `set [-gxU...] NAME VALUE...`, from the words after `set`: the name and its
/// values.
fn fish_set(after: &[String]) -> Option<(&String, &[String])> {
    let at = after.iter().position(|x| !x.starts_with('-'))?;
    Some((&after[at], &after[at + 1..]))
}

/// Whether a `PATH` part is the variable's old value (`$PATH`, `${PATH}`, zsh's `$path`,
/// fish's `$fish_user_paths`).
fn is_path_variable(w: &str) -> bool {
    matches!(w, "$PATH" | "${PATH}" | "$path" | "${path[@]}" | "$fish_user_paths" | "@{PATH}")
}

/// A line split into words at blanks and `;`, `&`, `|`, with quotes removed (a quoted part
/// stays in one word).
pub(super) fn shell_words(line: &str) -> Vec<String> {
    split_commands(line).into_iter().flatten().collect()
}

/// A line's simple commands (split at `;`, `&`, `&&`, `|`, `||` outside quotes), each as
/// its words ([`shell_words`]) without the words that open a compound command before it
/// (`then`, `do`, `else`, `{`, `!`, ...): the first word of each is the command it runs.
pub(super) fn shell_commands(line: &str) -> Vec<Vec<String>> {
    const OPENERS: &[&str] = &["then", "do", "else", "elif", "if", "while", "until", "{", "(", "!", "time", "command", "builtin"];
    split_commands(line)
        .into_iter()
        .map(|words| {
            let skip = words.iter().take_while(|w| OPENERS.contains(&w.as_str())).count();
            words.into_iter().skip(skip).collect::<Vec<_>>()
        })
        .filter(|command| !command.is_empty())
        .collect()
}

/// A line's words, with quotes removed, grouped by the `;`, `&` and `|` outside quotes
/// that end each command; a `#` that starts a word ends the line.
fn split_commands(line: &str) -> Vec<Vec<String>> {
    let mut commands = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '"' | '\'') => quote = Some(c),
            (None, c) if c.is_whitespace() || c == ';' || c == '&' || c == '|' => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                if !c.is_whitespace() && !words.is_empty() {
                    commands.push(std::mem::take(&mut words));
                }
            }
            (None, '#') if word.is_empty() => break,
            (None, c) => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    if !words.is_empty() {
        commands.push(words);
    }
    commands
}

/// A value without the quotes git allows around it.
fn unquote(v: &str) -> &str {
    v.trim().trim_matches('"').trim()
}

/// `raw` as an absolute path: from the home for `~/`, `$HOME/`, `${HOME}/` and `@{HOME}/`,
/// from `worktree` for a relative path, with `..` taken lexically; `None` for one that
/// names another variable, or a relative one with no worktree.
pub(super) fn path_of(raw: &str, home: Option<&Path>, worktree: Option<&Path>) -> Option<PathBuf> {
    let raw = raw.trim();
    if raw.is_empty() {
        return None;
    }
    let from_home = ["~/", "$HOME/", "${HOME}/", "@{HOME}/"].iter().find_map(|h| raw.strip_prefix(h));
    let path = match (from_home, home) {
        (Some(r), Some(h)) => h.join(r),
        (Some(_), None) => return None,
        (None, _) if raw == "~" || raw == "$HOME" || raw == "${HOME}" => home?.to_path_buf(),
        (None, _) if raw.starts_with('/') => PathBuf::from(raw),
        (None, _) if raw.starts_with('~') || raw.contains('$') => return None,
        (None, _) => worktree?.join(raw),
    };
    if path.to_string_lossy().contains('$') {
        return None;
    }
    Some(normalize(&path))
}

/// `path` with `.` and `..` taken lexically (`/a/b/../c` is `/a/c`; never above `/`), as
/// git and a shell take a relative part from where they run.
fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folders(text: &str) -> Vec<PathBuf> {
        folders_with(text, &ShellVariables::default())
    }

    fn folders_with(text: &str, vars: &ShellVariables) -> Vec<PathBuf> {
        places_in(text, Some(Path::new("/home/u")), None, vars).into_iter().filter_map(|p| matches!(p, CodePlace::Folder(_)).then(|| p.path().to_path_buf())).collect()
    }

    #[test]
    fn the_folders_shell_lines_put_on_path_are_found_in_every_shells_form() {
        let text = r#"
# export PATH="$HOME/commented:$PATH"
export PATH="$HOME/tools/bin:$PATH"
PATH=~/a/bin:/opt/b/bin:$PATH; export PATH
[ -d "$HOME/.x" ] && PATH="$PATH:${HOME}/c/bin"
path=(~/d/bin $path)
path+=(/srv/e/bin)
set -gx PATH ~/f/bin $PATH
set -U fish_user_paths $HOME/g/bin $fish_user_paths
fish_add_path --prepend ~/h/bin
PATH DEFAULT=@{HOME}/i/bin:${PATH}
export PATH="$GOPATH/bin:$PATH"
export PATH="relative/bin:$PATH"
export PATH="$HOME/x/../up/bin:$PATH"
export PATH="$HOME/j/bin${PATH:+:${PATH}}"
export PATH="${PATH:+${PATH}:}/opt/k/bin"
path+=~/l/bin
export PATH="$HOME/m/bin:\
/opt/n/bin:$PATH"
cd ~/projects
"#;
        let f = folders(text);
        let want: Vec<PathBuf> = [
            "/home/u/tools/bin",
            "/home/u/a/bin",
            "/opt/b/bin",
            "/home/u/c/bin",
            "/home/u/d/bin",
            "/srv/e/bin",
            "/home/u/f/bin",
            "/home/u/g/bin",
            "/home/u/h/bin",
            "/home/u/i/bin",
            "/home/u/up/bin",
            "/home/u/j/bin",
            "/opt/k/bin",
            "/home/u/l/bin",
            "/home/u/m/bin",
            "/opt/n/bin",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(f, want, "`..` is taken lexically, `PATH`'s own expansions are dropped, a continued line is one; other variables, relative parts, comments and other lines name nothing");
    }

    #[test]
    fn git_names_its_hooks_folder_and_the_programs_it_runs() {
        let text = r#"
[user]
	name = U
	signingkey = ~/.ssh/id.pub
[core]
	hooksPath = ~/git/hooks
	fsmonitor = "/home/u/bin/fsmon --fast"
	pager = less -R
	editor = vim
[alias]
	st = status
	sync = !~/scripts/sync.sh --all
[filter "lfs"]
	clean = git-lfs clean -- %f
	smudge = /opt/lfs/bin/smudge %f
[safe]
	directory = /home/u/proj
"#;
        let places = places_in(text, Some(Path::new("/home/u")), None, &ShellVariables::default());
        assert_eq!(
            places,
            vec![
                CodePlace::Folder("/home/u/git/hooks".into()),
                CodePlace::Program("/home/u/bin/fsmon".into()),
                CodePlace::Program("/home/u/scripts/sync.sh".into()),
                CodePlace::Program("/opt/lfs/bin/smudge".into()),
            ],
            "a command found on PATH (less, vim, git-lfs) and values that are not commands (a key, a safe directory) name no place"
        );
    }

    /// Git's other forms: a key on its section's line, a comment after a value, a value
    /// continued on the next line; every path of a command (the script an interpreter
    /// runs, an option's file); keys named as commands that no list holds; the template
    /// folder; and for any other key, a path that names an existing file.
    #[test]
    fn git_names_programs_in_every_form_it_reads() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        std::fs::create_dir_all(h.join("keys")).unwrap();
        std::fs::write(h.join("keys/cmd.sh"), "#!/bin/sh\n").unwrap();
        let text = r#"
[core] hooksPath = ~/hooks ; the team's
[alias]
	deploy = !bash ~/tools/deploy.sh --prod
	fmt = "!sh -c 'exec ~/tools/fmt.sh'"
[credential]
	helper = store --file=~/store/creds
[gpg "ssh"]
	defaultKeyCommand = ~/tools/key.sh
[trailer "sign"]
	cmd = ~/tools/trailer.sh
[imap]
	tunnel = "ssh -q host ~/tools/tunnel.sh"
[difftool "mine"]
	path = ~/tools/difftool
[init]
	templateDir = ~/git-template
[sequence]
	editor = ~/tools/\
ed.sh
[http]
	proxy = http://proxy.example:8080
[something]
	else = ~/keys/cmd.sh
	missing = ~/keys/none.sh
"#;
        let places = places_in(text, Some(h), None, &ShellVariables::default());
        let want = vec![
            CodePlace::Folder(h.join("hooks")),
            CodePlace::Program(h.join("tools/deploy.sh")),
            CodePlace::Program(h.join("tools/fmt.sh")),
            CodePlace::Program(h.join("store/creds")),
            CodePlace::Program(h.join("tools/key.sh")),
            CodePlace::Program(h.join("tools/trailer.sh")),
            CodePlace::Program(h.join("tools/tunnel.sh")),
            CodePlace::Program(h.join("tools/difftool")),
            CodePlace::Folder(h.join("git-template")),
            CodePlace::Program(h.join("tools/ed.sh")),
            CodePlace::Program(h.join("keys/cmd.sh")),
        ];
        assert_eq!(places, want, "a URL, and a file no command key names that does not exist, name nothing");
    }

    #[test]
    fn a_repositorys_relative_hooks_folder_counts_from_its_worktree() {
        let text = "[core]\n\trepositoryformatversion = 0\n\thooksPath = githooks\n[alias]\n\tfmt = !scripts/fmt.sh\n";
        let wt = Path::new("/home/u/proj");
        assert_eq!(places_in(text, None, Some(wt), &ShellVariables::default()), vec![CodePlace::Folder("/home/u/proj/githooks".into()), CodePlace::Program("/home/u/proj/scripts/fmt.sh".into())]);
        assert_eq!(
            places_in(text, Some(Path::new("/home/u")), None, &ShellVariables::default()),
            vec![CodePlace::InEveryRepository("githooks".into())],
            "a relative hooks folder of the global configuration names a folder in every repository (the alias's relative script, none)"
        );
        let up = "[core]\n\thooksPath = ../shared-hooks\n[alias]\n\tx = !~/bin/x.sh\n";
        assert_eq!(
            places_in(up, Some(Path::new("/home/u")), Some(wt), &ShellVariables::default()),
            vec![CodePlace::Folder("/home/u/shared-hooks".into()), CodePlace::Program("/home/u/bin/x.sh".into())],
            "a folder above the worktree, and a program from the home"
        );
    }

    /// A `PATH` part that names a variable the configuration assigns stands for each of its
    /// values, wherever it is assigned (another file, a fish `set`, a nested variable, a
    /// value of several parts); one no file assigns names nothing.
    #[test]
    fn a_path_part_that_names_a_variable_stands_for_its_values() {
        let mut vars = ShellVariables::default();
        vars.read("TOOLS=~/tools\nexport GOPATH=\"$HOME/go\"\ndeclare -x OPT=/opt/x\n[ -d /srv ] && TOOLS=/srv/tools\nset -gx FISHBIN ~/fish/bin\nMINE=\"$TOOLS/mine\"\nMYPATH=\"$HOME/my/bin:$PATH\"\nHOME=/elsewhere\n");
        let text = "export PATH=\"$TOOLS/bin:${GOPATH}/bin:$OPT/bin:$PATH\"\nfish_add_path $FISHBIN\nPATH=$MINE/bin:$PATH\nPATH=$MYPATH\nPATH=$UNSET/bin:$PATH\n";
        let want: Vec<PathBuf> = ["/home/u/tools/bin", "/home/u/go/bin", "/opt/x/bin", "/srv/tools/bin", "/home/u/fish/bin", "/home/u/tools/mine/bin", "/srv/tools/mine/bin", "/home/u/my/bin"].iter().map(PathBuf::from).collect();
        assert_eq!(folders_with(text, &vars), want);
        let mut looped = ShellVariables::default();
        looped.read("for d in ~/p/bin /opt/q/bin; do\n  PATH=\"$d:$PATH\"\ndone\n");
        assert_eq!(folders_with("PATH=\"$d:$PATH\"\n", &looped), vec![PathBuf::from("/home/u/p/bin"), PathBuf::from("/opt/q/bin")], "a loop's variable stands for each word");
        assert_eq!(folders("export PATH=\"$TOOLS/bin:$PATH\"\n"), Vec::<PathBuf>::new(), "without the assignment");
        // Defaults where a variable is expanded, and a function that puts its argument on PATH.
        let rc = PathBuf::from(std::env::temp_dir()).join(format!("pincer-rc-{}", std::process::id()));
        std::fs::write(&rc, "pathadd() { case \":$PATH:\" in *\":$1:\"*) ;; *) PATH=\"$1:$PATH\" ;; esac; }\npathadd \"$HOME/fn/bin\"\nexport T=\"${T:-$HOME/dflt}\"\nPATH=\"$T/bin:$PATH\"\n: \"${A:=$HOME/assign}\"\nPATH=\"$A/bin:$PATH\"\n").unwrap();
        let text = read_text(&rc).unwrap();
        let vars = ShellVariables::of_texts(&[&text]);
        std::fs::remove_file(&rc).unwrap();
        assert_eq!(folders_with(&text, &vars), vec![PathBuf::from("/home/u/fn/bin"), PathBuf::from("/home/u/dflt/bin"), PathBuf::from("/home/u/assign/bin")], "a function's $1, ${{X:-default}} and ${{X:=default}}");
        let mut looping = ShellVariables::default();
        looping.read("A=$B/a\nB=$A/b\n");
        assert!(folders_with("PATH=$A:$PATH\n", &looping).is_empty(), "variables that name each other end");
    }

    /// The folders on a process's `PATH`: its absolute parts, once each.
    #[test]
    fn a_path_value_names_its_absolute_folders() {
        let got = path_value(OsStr::new("/home/u/bin:relative:/usr/bin::/home/u/../x:/home/u/bin:/opt/y"));
        assert_eq!(got, vec![CodePlace::Folder("/home/u/bin".into()), CodePlace::Folder("/usr/bin".into()), CodePlace::Folder("/opt/y".into())]);
        let me = of_process(std::process::id(), Path::new("/home/u"), &[]);
        let path = std::env::var_os("PATH").unwrap_or_default();
        assert!(path_value(&path).iter().all(|p| me.places.contains(p)), "this process's own PATH, read from /proc");
    }

    /// Every path of the user's a variable names, whatever the variable: folders are code
    /// places, executables programs, other files secrets (never read), but a public
    /// certificate (never changed, but read); the working folders, a session's root and what
    /// is in it are not read.
    #[test]
    fn every_path_the_starters_environment_names_is_the_users_tools() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        for d in ["gradle", "gems", "lua", "ws/.venv", "elsewhere"] {
            std::fs::create_dir_all(h.join(d)).unwrap();
        }
        std::fs::write(h.join("gcp.json"), "{\"private_key\": \"...\"}").unwrap();
        std::fs::write(h.join("deploy"), "-----BEGIN OPENSSH PRIVATE KEY-----\n").unwrap();
        std::fs::write(h.join("ca.pem"), "\n-----BEGIN CERTIFICATE-----\n").unwrap();
        std::fs::write(h.join("wrap"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(h.join("wrap"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let p = |r: &str| h.join(r).display().to_string();
        let vars = [
            ("GRADLE_USER_HOME", p("gradle")),
            ("GEM_PATH", format!("/usr/lib/ruby/gems:{}", p("gems"))),
            ("LUA_PATH", format!("{}/?.lua;;", p("lua"))),
            ("GOOGLE_APPLICATION_CREDENTIALS", p("gcp.json")),
            ("GIT_SSH_COMMAND", format!("ssh -o IdentitiesOnly=yes -i {}", p("deploy"))),
            ("JAVA_TOOL_OPTIONS", format!("-javaagent:{}", p("wrap"))),
            ("NODE_EXTRA_CA_CERTS", p("ca.pem")),
            ("VIRTUAL_ENV", p("ws/.venv")),
            ("OLDPWD", p("elsewhere")),
            ("MISSING", p("nothing-here")),
        ];
        let got = of_environment(vars.iter().map(|(k, v)| (OsStr::new(*k), OsStr::new(v.as_str()))), h, &[h.join("ws")]);
        for want in [CodePlace::Folder(h.join("gradle")), CodePlace::Folder(h.join("gems")), CodePlace::Folder(h.join("lua")), CodePlace::Program(h.join("wrap")), CodePlace::Program(h.join("gcp.json")), CodePlace::Program(h.join("deploy"))] {
            assert!(got.places.contains(&want), "{want:?} is a place of the user's tools: {:?}", got.places);
        }
        let mut secrets = got.secrets.clone();
        secrets.sort();
        assert_eq!(secrets, vec![h.join("deploy"), h.join("gcp.json")], "the files named as data are secrets, not the certificate nor the program");
        assert!(got.places.contains(&CodePlace::Program(h.join("ca.pem"))), "the certificate the user's TLS clients trust is not changed (it is read)");
        for not in ["ws/.venv", "elsewhere", "nothing-here"] {
            assert!(!got.places.iter().any(|c| c.path() == h.join(not)), "{not} is no place of the user's tools: {:?}", got.places);
        }
    }

    /// A configuration file's settings name the user's tools' paths as the environment's
    /// variables do, `$HOME/` as `~/`; its comments, section headers and JSON object keys,
    /// a history, and the configuration files read themselves name none.
    #[test]
    fn every_path_a_configuration_file_names_is_classified_as_the_environments() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        for d in ["tools", "proj", "typed"] {
            std::fs::create_dir_all(h.join(d)).unwrap();
        }
        for f in ["kube.key", "old.key", "sourced.sh"] {
            std::fs::write(h.join(f), "secret\n").unwrap();
        }
        std::fs::write(h.join("ca.pem"), "-----BEGIN CERTIFICATE-----\n").unwrap();
        let files = [
            (h.join(".bashrc"), "export TOOLS=\"$HOME/tools\"\n. ~/sourced.sh\nX=1 # ~/old.key\n".to_string()),
            (h.join(".kube/config"), format!("users:\n- user:\n    client-key: {}\n    certificate-authority: ~/ca.pem\n", h.join("kube.key").display())),
            (h.join(".claude.json"), format!("{{\"projects\": {{\"{}\": {{}}}}}}\n", h.join("proj").display())),
            (h.join(".bash_history"), "cd ~/typed\n".to_string()),
            (h.join("sourced.sh"), "# nothing\n".to_string()),
        ];
        let got = named_in_configuration(files.iter().map(|(f, t)| (f.as_path(), t.as_str())), h, &[]);
        assert_eq!(got.secrets, vec![h.join("kube.key")], "the key, not the certificate, the file sourced nor a comment's");
        for want in [CodePlace::Folder(h.join("tools")), CodePlace::Program(h.join("ca.pem")), CodePlace::Program(h.join("kube.key"))] {
            assert!(got.places.contains(&want), "{want:?}: {:?}", got.places);
        }
        for not in ["proj", "typed", "sourced.sh", "old.key"] {
            assert!(!got.places.iter().any(|c| c.path() == h.join(not)), "{not} is not named as a setting: {:?}", got.places);
        }
    }

    /// The environment of the process that started a session: its `PATH` and library
    /// folders, zsh's startup folder, and the paths of the programs and startup files its
    /// variables name; a git configuration it names adds what that names.
    #[test]
    fn the_starters_environment_names_folders_programs_and_startup_files() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        std::fs::write(h.join("gitconfig"), "[core]\n\thooksPath = ~/hooks\n").unwrap();
        let gc = h.join("gitconfig").display().to_string();
        let vars = [
            ("PATH", "/home/u/bin:relative:/usr/bin".to_string()),
            ("LD_LIBRARY_PATH", "/home/u/lib".into()),
            ("ZDOTDIR", "/home/u/zsh".into()),
            ("EDITOR", "vim".into()),
            ("GIT_SSH_COMMAND", "ssh -F ~/ssh/conf -i /home/u/keys/id".into()),
            ("LESSOPEN", "|/home/u/bin/lesspipe.sh %s".into()),
            ("LD_PRELOAD", "/home/u/lib/a.so:/home/u/lib/b.so".into()),
            ("NODE_OPTIONS", "--require /home/u/node/hook.js".into()),
            ("GIT_CONFIG_GLOBAL", gc.clone()),
            ("HOME", "/home/u".into()),
            ("OTHER", "/home/u/other".into()),
            ("XDG_CONFIG_HOME", "/home/u/dots/config".into()),
            ("XDG_DATA_HOME", format!("{}/.local/share", h.display())),
        ];
        let got = of_environment(vars.iter().map(|(k, v)| (OsStr::new(*k), OsStr::new(v.as_str()))), h, &[]);
        assert_eq!(got.moved, vec![("XDG_CONFIG_HOME", PathBuf::from("/home/u/dots/config"))], "a base directory at its default is not moved");
        assert_eq!(got.configs, vec![PathBuf::from("/home/u/zsh"), PathBuf::from(&gc)], "the configuration it names, read with the never list's (what it names, then and later)");
        let got = got.places;
        let want = vec![
            CodePlace::Folder("/home/u/bin".into()),
            CodePlace::Folder("/usr/bin".into()),
            CodePlace::Folder("/home/u/lib".into()),
            CodePlace::Folder("/home/u/zsh".into()),
            CodePlace::Program(h.join("ssh/conf")),
            CodePlace::Program("/home/u/keys/id".into()),
            CodePlace::Program("/home/u/bin/lesspipe.sh".into()),
            CodePlace::Program("/home/u/lib/a.so".into()),
            CodePlace::Program("/home/u/lib/b.so".into()),
            CodePlace::Program("/home/u/node/hook.js".into()),
            CodePlace::Program(gc.into()),
        ];
        assert_eq!(got, want, "a bare program name, HOME and other variables name nothing");
    }

    /// The programs ssh's and tmux's configuration runs: `ProxyCommand`, `Match exec`,
    /// `KnownHostsCommand` (in either form), `run-shell` and `run` (in a binding too),
    /// `if-shell`'s condition, a `#(...)` in an option; `ProxyJump`, a bare program and an
    /// unrelated shell line name nothing.
    #[test]
    fn ssh_and_tmux_name_the_programs_they_run() {
        let ssh = "Match exec \"~/x/on-vpn.sh\"\n    ProxyJump none\nHost *.corp\n    ProxyCommand ~/x/proxy.sh %h %p\n    KnownHostsCommand=/opt/x/kh.sh %H\n    ProxyCommand nc %h %p\n    IdentityFile ~/.ssh/id\n";
        let tmux = "run-shell ~/x/init.sh\nset -g status-right \"#(~/x/status.sh) %H:%M\"\nrun -b '~/.tmux/plugins/tpm/tpm'\nbind r if-shell '~/x/cond.sh' 'run-shell \"~/x/then.sh\"'\nset -g default-command ~/x/shell.sh\nnpm run build\n";
        let got = |t: &str| places_in(t, Some(Path::new("/home/u")), None, &ShellVariables::default());
        let p = |s: &str| CodePlace::Program(PathBuf::from(s));
        assert_eq!(got(ssh), vec![p("/home/u/x/on-vpn.sh"), p("/home/u/x/proxy.sh"), p("/opt/x/kh.sh")]);
        assert_eq!(
            got(tmux),
            vec![p("/home/u/x/init.sh"), p("/home/u/x/status.sh"), p("/home/u/.tmux/plugins/tpm/tpm"), p("/home/u/x/cond.sh"), p("/home/u/x/then.sh"), p("/home/u/x/shell.sh")]
        );
        assert!(got("if [ -d ~/projects ]; then cd ~/projects; fi\n").is_empty(), "a shell's own if names nothing");
    }

    /// The starter's environment: the interpreters' module folders, git's program and
    /// template folders, and the git settings it gives (`GIT_CONFIG_COUNT`,
    /// `GIT_CONFIG_PARAMETERS`) name code places; the tools' homes and files it moves
    /// (`GNUPGHOME`, `KUBECONFIG` a list, `CARGO_HOME`, `HISTFILE`) are moved.
    #[test]
    fn the_starters_module_folders_git_settings_and_tool_homes_are_read() {
        let vars = [
            ("PYTHONPATH", "/w/pylib:/w/py2"),
            ("PERL5LIB", "/w/perl5"),
            ("NODE_PATH", "/w/node"),
            ("RUBYLIB", "/w/ruby"),
            ("GIT_EXEC_PATH", "/w/git-core"),
            ("GIT_TEMPLATE_DIR", "/w/templates"),
            ("GIT_CONFIG_COUNT", "2"),
            ("GIT_CONFIG_KEY_0", "core.hooksPath"),
            ("GIT_CONFIG_VALUE_0", "/w/hooks"),
            ("GIT_CONFIG_KEY_1", "alias.x"),
            ("GIT_CONFIG_VALUE_1", "!~/bin/x.sh"),
            ("GIT_CONFIG_PARAMETERS", "'core.fsmonitor'='/w/fsmon'"),
            ("GNUPGHOME", "/w/gnupg"),
            ("KUBECONFIG", "/w/kube/a:/w/kube/b"),
            ("CARGO_HOME", "/w/cargo"),
            ("HISTFILE", "/home/u/.bash_history"),
        ];
        let got = of_environment(vars.iter().map(|(k, v)| (OsStr::new(*k), OsStr::new(*v))), Path::new("/home/u"), &[]);
        let f = |s: &str| CodePlace::Folder(PathBuf::from(s));
        for want in [f("/w/pylib"), f("/w/py2"), f("/w/perl5"), f("/w/node"), f("/w/ruby"), f("/w/git-core"), f("/w/templates"), f("/w/hooks"), CodePlace::Program("/home/u/bin/x.sh".into()), CodePlace::Program("/w/fsmon".into())] {
            assert!(got.places.contains(&want), "{want:?} in {:?}", got.places);
        }
        let moved: Vec<(&str, PathBuf)> = vec![("GNUPGHOME", "/w/gnupg".into()), ("KUBECONFIG", "/w/kube/a".into()), ("KUBECONFIG", "/w/kube/b".into()), ("CARGO_HOME", "/w/cargo".into())];
        assert_eq!(got.moved, moved, "HISTFILE at its default is not moved");
    }

    /// A never rule moves with the variable that moves its default: a rule under it, the
    /// default itself, and a rule of a folder that holds it.
    #[test]
    fn a_never_rule_moves_with_its_tools_variable() {
        let m = |v: &str| *MOVABLE.iter().find(|m| m.var == v).unwrap();
        let to = Path::new("/w/x");
        assert_eq!(moved_pattern("~/.cargo/credentials.toml", "~/.cargo", &m("CARGO_HOME"), to).as_deref(), Some("/w/x/credentials.toml"));
        assert_eq!(moved_pattern("~/.cargo/bin/**", "~/.cargo", &m("CARGO_HOME"), to).as_deref(), Some("/w/x/bin/**"));
        assert_eq!(moved_pattern("~/.gnupg/**", "~/.gnupg", &m("GNUPGHOME"), to).as_deref(), Some("/w/x/**"));
        assert_eq!(moved_pattern("~/.aws/**", "~/.aws/credentials", &m("AWS_SHARED_CREDENTIALS_FILE"), to).as_deref(), Some("/w/x"));
        assert_eq!(moved_pattern("~/.npmrc", "~/.npmrc", &m("NPM_CONFIG_USERCONFIG"), to).as_deref(), Some("/w/x"));
        assert_eq!(moved_pattern("~/.cargo2/x", "~/.cargo", &m("CARGO_HOME"), to), None);
        assert_eq!(moved_pattern("~/.awsx/**", "~/.aws/credentials", &m("AWS_SHARED_CREDENTIALS_FILE"), to), None);
    }

    /// A configuration file with a byte that is not UTF-8 (a Latin-1 comment or name) names
    /// what its lines name; one with a NUL byte is not text.
    #[test]
    fn a_configuration_file_with_bytes_that_are_not_utf8_names_its_places() {
        let dir = tempfile::tempdir().unwrap();
        let rc = dir.path().join("bashrc");
        std::fs::write(&rc, b"# Gr\xf6\xdfe der Fenster\nexport PATH=\"$HOME/tools/bin:$PATH\"\n").unwrap();
        let gc = dir.path().join("gitconfig");
        std::fs::write(&gc, b"[user]\n\tname = J\xfcrgen\n[core]\n\thooksPath = ~/hooks\n").unwrap();
        let home = Some(Path::new("/home/u"));
        let none = ShellVariables::default();
        assert_eq!(code_places(&rc, home, None, &none), vec![CodePlace::Folder("/home/u/tools/bin".into())]);
        assert_eq!(code_places(&gc, home, None, &none), vec![CodePlace::Folder("/home/u/hooks".into())]);
        std::fs::write(&rc, b"export PATH=\"$HOME/tools/bin:$PATH\"\n\0\x7fELF").unwrap();
        assert!(read_text(&rc).is_none(), "binary");
    }

    /// A line's simple commands, each from its command word.
    #[test]
    fn a_line_splits_into_its_commands() {
        let got = shell_commands("[ -f a.sh ] && . a.sh; if x; then source 'b c.sh'; fi | cat # ; . d.sh");
        let want: Vec<Vec<String>> = [vec!["[", "-f", "a.sh", "]"], vec![".", "a.sh"], vec!["x"], vec!["source", "b c.sh"], vec!["fi"], vec!["cat"]]
            .iter()
            .map(|c| c.iter().map(|w| w.to_string()).collect())
            .collect();
        assert_eq!(got, want);
    }

    /// A shell line's programs outside `PATH`: an alias's command and the variables the
    /// environment runs; a bare name or another variable names nothing.
    #[test]
    fn a_shell_line_names_the_programs_of_aliases_and_program_variables() {
        let text = "alias k=\"$HOME/x/kube.sh --ctx\"\nexport EDITOR=~/x/edit.sh\nPROMPT_COMMAND=\"$HOME/x/prompt.sh\"\nexport LESSOPEN=\"| $HOME/x/lesspipe.sh %s\"\nset -gx VISUAL ~/x/visual.sh\nexport PAGER=less\nexport OTHER=~/x/other.sh\n";
        let programs: Vec<CodePlace> = places_in(text, Some(Path::new("/home/u")), None, &ShellVariables::default());
        let want: Vec<CodePlace> = ["kube.sh", "edit.sh", "prompt.sh", "lesspipe.sh", "visual.sh"].iter().map(|n| CodePlace::Program(Path::new("/home/u/x").join(n))).collect();
        assert_eq!(programs, want);
    }
}
