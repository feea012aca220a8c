//! Session containment around the named roots: the places where the owner keeps live
//! objects (home, `/tmp`, `/var/tmp`, `/dev/shm`, `/run/user/UID`) are gated like roots;
//! open paths (toolchain caches) bypass the twin; every session gets a private scratch
//! directory (`TMPDIR`); and never-grantable paths are refused whatever the votes, rules or
//! the user's approval say — by the daemon for every request, and by the kernel's never map
//! for the objects and names that exist when the session starts.

use crate::access::Access;
use crate::kernel::{access_bit, Enforcer, KernelError, ObjectId};
use globset::{GlobBuilder, GlobMatcher};
use serde::{Deserialize, Serialize};
use std::ffi::OsStr;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use super::config_watch::Watch;
use super::code_places::{code_places, git_section, named_in_configuration, path_of, places_in, read_text, shell_commands, shell_words, CodePlace, ShellVariables, UserEnvironment, moved_pattern, MOVABLE};
use super::users::Account;

/// Entries visited at most when a session's named roots are scanned for never-grantable
/// objects (`**/` patterns).
pub const SCAN_LIMIT: usize = 20_000;

/// How an open path may be used by every session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpenMode {
    /// Read and list.
    #[serde(rename = "ro")]
    ReadOnly,
    /// Read and list the user's objects; write, create and delete in the session's own layer
    /// over the path (see [`super::layers`]): the user's objects there never change.
    #[serde(rename = "rw")]
    ReadWrite,
    /// Read, list, write, create and delete the user's objects themselves, for every
    /// session: a directory the user and the sessions exchange files through, which no
    /// program of the user's runs or loads anything from.
    #[serde(rename = "shared")]
    Shared,
}

impl OpenMode {
    /// The access types the mode opens.
    pub fn access(self) -> &'static [Access] {
        match self {
            OpenMode::ReadOnly => &[Access::Read, Access::List],
            OpenMode::ReadWrite | OpenMode::Shared => &Access::ALL,
        }
    }
}

/// A path every session may use without asking the twin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenPath {
    /// The path (`~` is the session owner's home, `{uid}` the owner's uid).
    pub path: String,
    /// `ro` or `rw`.
    pub mode: OpenMode,
    /// For `rw`: the user's entries the session sees in its layer (paths relative to `path`,
    /// a glob per segment: `settings*.json`, `plugins/cache`); the rest is hidden from it, and
    /// it starts them afresh. Empty: it sees all of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub show: Vec<String>,
    /// For `rw`: the session's layer stays after it ends, readable by the owner (an agent's
    /// transcripts of the session, for `pincer history convert`); otherwise it is removed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retain: bool,
}

/// Paths that nothing can grant for the listed access types.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NeverRule {
    /// A glob: absolute, or `~/...` in the owner's home, or `**/...` under any root; a
    /// trailing `/**` covers the directory itself too.
    pub pattern: String,
    /// The access types refused.
    pub access: Vec<Access>,
}

/// The `[containment]` section of the configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ContainmentConfig {
    /// Places gated like roots for every session (`~`, `{uid}` expanded).
    pub protect: Vec<String>,
    /// Paths every session may use without the twin.
    pub open_paths: Vec<OpenPath>,
    /// Never-grantable paths.
    pub never: Vec<NeverRule>,
    /// Whether each session gets a scratch directory (`TMPDIR`).
    pub scratch: bool,
    /// Directory under which each session's scratch directory is made.
    pub scratch_parent: PathBuf,
    /// Whether sessions may create user namespaces.
    pub allow_userns: bool,
    /// Whether each session gets its own PID namespace (its `/proc` lists only its own
    /// processes).
    pub pid_namespace: bool,
    /// Whether each session gets its own IPC namespace (SysV objects, POSIX message queues).
    pub ipc_namespace: bool,
    /// Whether the owner's own shells are run (as the owner, outside every session) when
    /// a session starts and when their startup files change, and the environment they give
    /// their programs read for code places ([`super::login_shell`]).
    pub observe_shells: bool,
}

fn never(pattern: &str, access: &[Access]) -> NeverRule {
    NeverRule { pattern: pattern.into(), access: access.to_vec() }
}

fn open(path: &str, mode: OpenMode) -> OpenPath {
    OpenPath { path: path.into(), mode, show: vec![], retain: false }
}

/// What a session sees of the user's `~/.claude`: Claude Code's settings, instructions,
/// hooks, commands, subagents, skills, rules, output styles, plugins and key bindings.
const CLAUDE_KEEP: &[&str] = &["settings*.json", "CLAUDE.md", "hooks", "commands", "agents", "skills", "rules", "output-styles", "plugins", "keybindings.json"];
/// What a session sees of the user's `~/.codex`: its configuration, instructions, rules,
/// skills, prompts, hooks, plugins and memories. Not its stored login (`auth.json`, never
/// readable as every credential): absent from the session's view, the agent takes its key
/// from the environment rather than failing on a file it cannot read.
const CODEX_KEEP: &[&str] = &["*.toml", ".env", "AGENTS.md", "AGENTS.override.md", "hooks.json", "hooks", "rules", "skills", "prompts", "plugins", "memories"];
/// What a session sees of the user's `~/.gemini`: Gemini CLI's settings, account list,
/// instructions, commands, extensions, policies, skills, subagents and hooks; not its
/// stored login (`oauth_creds.json`, never readable), as for Codex.
const GEMINI_KEEP: &[&str] = &["settings.json", "trustedFolders.json", ".env", "*.md", "google_accounts.json", "commands", "extensions", "policies", "skills", "agents", "hooks"];

/// An agent's state directory as a read-write open path: the session sees the user's
/// configuration of the agent there (`show`), and none of its histories; the session's
/// layer (its transcripts) stays for its owner after it ends.
fn agent_state(path: &str, show: &[&str]) -> OpenPath {
    OpenPath { path: path.into(), mode: OpenMode::ReadWrite, show: show.iter().map(|k| k.to_string()).collect(), retain: true }
}

impl Default for ContainmentConfig {
    fn default() -> Self {
        use Access::*;
        const ALL: &[Access] = &Access::ALL;
        const CHANGE: &[Access] = &[Write, Create, Delete];
        // Credentials, histories (commands typed with secrets in them), browser profiles and
        // Pincer's own state: no access at all.
        let secrets = [
            "~/.ssh/**",
            "~/.gnupg/**",
            "~/.pki/**",
            "~/.aws/**",
            "~/.azure/**",
            "~/.config/gcloud/**",
            "~/.oci/**",
            "~/.kube/**",
            "~/.docker/config.json",
            "~/.config/containers/auth.json",
            "/run/user/{uid}/containers/auth.json",
            "~/.netrc",
            "~/.git-credentials",
            "~/.config/git/credentials",
            "~/.cargo/credentials",
            "~/.cargo/credentials.toml",
            "~/.npmrc",
            "~/.yarnrc",
            "~/.pypirc",
            "~/.gem/credentials",
            "~/.config/gh/hosts.yml",
            "~/.config/hub",
            "~/.pgpass",
            "~/.my.cnf",
            "~/.vault-token",
            "~/.terraform.d/credentials.tfrc.json",
            "~/.config/rclone/**",
            "~/.s3cfg",
            "~/.boto",
            "~/.config/doctl/**",
            "~/.config/op/**",
            "~/.config/github-copilot/**",
            "~/.claude/.credentials.json",
            "~/.codex/auth.json",
            "~/.gemini/oauth_creds.json",
            "~/.local/share/keyrings/**",
            "~/.password-store/**",
            "~/.mozilla/**",
            "~/.config/google-chrome/**",
            "~/.config/chromium/**",
            "~/.thunderbird/**",
            "~/.bash_history",
            "~/.zsh_history",
            "~/.local/share/fish/**",
            "~/.python_history",
            "~/.psql_history",
            "~/.mysql_history",
            "~/.sqlite_history",
            "~/.node_repl_history",
            "~/.lesshst",
            "~/.viminfo",
            "~/.config/mozilla/**",
            "~/snap/firefox/common/.mozilla/**",
            "~/snap/chromium/common/chromium/**",
            "~/snap/thunderbird/common/.thunderbird/**",
            "~/.var/app/org.mozilla.firefox/.mozilla/**",
            "~/.var/app/org.chromium.Chromium/config/chromium/**",
            "~/.var/app/com.google.Chrome/config/google-chrome/**",
            "~/.config/google-chrome-beta/**",
            "~/.config/google-chrome-unstable/**",
            "~/.config/BraveSoftware/**",
            "~/.config/microsoft-edge/**",
            "~/.config/vivaldi/**",
            "~/.config/opera/**",
            "~/.local/share/kwalletd/**",
            "~/.config/Bitwarden/**",
            "~/.config/1Password/**",
            "~/.config/composer/auth.json",
            "~/.composer/auth.json",
            "~/.config/pypoetry/auth.toml",
            "~/.huggingface/token",
            "~/.zhistory",
            "~/.histfile",
            "~/.local/share/atuin/**",
            "~/.config/pincer/**",
            "/etc/pincer/**",
            "/var/lib/pincer/**",
            "/var/log/pincer/**",
        ];
        // Where the user's shell, desktop session, systemd user instance, editors, package
        // managers and toolchains read code or configuration that runs code: readable, never
        // written, created or deleted (inside read-write open paths too: never beats open).
        let startup = [
            "~/.bashrc",
            "~/.bashrc.d/**",
            "~/.bash_profile",
            "~/.bash_login",
            "~/.bash_logout",
            "~/.bash_aliases",
            "~/.bash_completion",
            "~/.local/share/bash-completion/**",
            "~/.profile",
            "~/.inputrc",
            "~/.zshrc",
            "~/.zshenv",
            "~/.zprofile",
            "~/.zlogin",
            "~/.zlogout",
            "~/.oh-my-zsh/**",
            "~/.kshrc",
            "~/.mkshrc",
            "~/.cshrc",
            "~/.tcshrc",
            "~/.login",
            "~/.logout",
            "~/.config/fish/**",
            "~/.config/nushell/**",
            "~/.config/powershell/**",
            "~/.pam_environment",
            "~/.config/environment.d/**",
            "~/.xprofile",
            "~/.xsessionrc",
            "~/.xsession",
            "~/.xinitrc",
            "~/.Xclients",
            "~/.gnomerc",
            "~/.config/autostart/**",
            "~/.config/autostart-scripts/**",
            "~/.config/plasma-workspace/**",
            "~/.config/lxsession/**",
            "~/.config/openbox/**",
            "~/.config/i3/**",
            "~/.config/sway/**",
            "~/.config/hypr/**",
            "~/.local/share/applications/**",
            "~/.config/mimeapps.list",
            "~/.local/share/dbus-1/**",
            "~/.config/systemd/**",
            "~/.local/share/systemd/**",
            "/run/user/{uid}/systemd/**",
            "~/.config/user-tmpfiles.d/**",
            "~/.local/share/user-tmpfiles.d/**",
            "~/.vimrc",
            "~/.vim/**",
            "~/.config/nvim/**",
            "~/.emacs",
            "~/.emacs.d/**",
            "~/.config/emacs/**",
            "~/.tmux.conf",
            "~/.config/tmux/**",
            "~/.screenrc",
            "~/.gitconfig",
            "~/.config/git/**",
            "~/.config/direnv/**",
            "~/.pythonrc",
            "~/.pythonrc.py",
            "~/.config/pip/**",
            "~/.pip/**",
            "~/.pydistutils.cfg",
            "~/.condarc",
            "~/.config/uv/**",
            "~/.gemrc",
            "~/.bundle/config",
            "~/.bundle/plugin/**",
            "~/.yarnrc.yml",
            "~/.config/yarn/**",
            "~/.gradle/init.d/**",
            "~/.gradle/init.gradle",
            "~/.m2/settings.xml",
            "~/.docker/**",
            "~/.cargo/config",
            "~/.cargo/config.toml",
            "~/.cargo/env",
            "~/.cargo/env.fish",
            "~/.cargo/bin/**",
            "~/.rustup/**",
            "~/bin/**",
            "~/.local/bin/**",
            "~/.local/lib/**",
            "~/go/bin/**",
            "~/.npm-global/**",
            "~/.deno/bin/**",
            "~/.bun/bin/**",
            "~/.nvm/**",
            "~/.pyenv/**",
            "~/.rbenv/**",
            "~/.volta/**",
            "~/.sdkman/**",
            "~/.asdf/**",
            "~/.zshrc.zwc",
            "~/.config/bash_completion",
            "~/.selected_editor",
            "~/.i18n",
            "~/.lesskey",
            "~/.fzf.bash",
            "~/.fzf.zsh",
            "~/.node_modules/**",
            "~/.mavenrc",
            "~/.bunfig.toml",
            "~/.gradle/init.gradle.kts",
            "~/.gradle/gradle.properties",
            "~/.vscode/extensions/**",
            "~/.config/Code/User/**",
            "~/.vscode-server/**",
            "~/.local/share/nvim/site/**",
            "~/.local/share/gnome-shell/extensions/**",
            "~/.local/share/thumbnailers/**",
            "~/.local/share/flatpak/exports/**",
        ];
        // Under any root: git hooks and config (run by the user's next git command), and what
        // an agent loads as configuration, instructions or code: settings that grant
        // permissions or run hooks, env files, instruction and memory files, rules, commands,
        // subagents, skills and prompts (they grant tools or steer the model), and plugins
        // (they bring hooks and MCP servers). Claude Code: its settings, hooks, user config
        // (`~/.claude.json`: MCP servers, allowed tools), user memory and rules, output
        // styles. Codex: every TOML file of its home (config, profiles, managed config),
        // hooks, `.env`, AGENTS files, rules, skills, prompts, plugins and memories. Gemini
        // CLI: settings, trusted folders, `.env`, GEMINI/AGENTS files (its memory), commands,
        // extensions, policies, skills, subagents and hooks. The agents' own state beside
        // them (sessions, logs, chats, databases) stays writable.
        let agent = [
            "**/.git/hooks/**",
            "**/.git/config",
            "**/.claude/settings.json",
            "**/.claude/settings.local.json",
            "**/.claude/hooks/**",
            "**/.claude/commands/**",
            "**/.claude/agents/**",
            "**/.claude/skills/**",
            "**/.mcp.json",
            "**/.codex/config.toml",
            "**/.codex/hooks.json",
            "**/.codex/.env",
            "**/.codex/AGENTS.md",
            "**/.codex/AGENTS.override.md",
            "**/.codex/rules/**",
            "**/.codex/skills/**",
            "**/.codex/prompts/**",
            "**/.codex/hooks/**",
            "**/.codex/plugins/**",
            "**/.codex/memories/**",
            "**/.gemini/settings.json",
            "**/.gemini/trustedFolders.json",
            "**/.gemini/.env",
            "**/.gemini/GEMINI.md",
            "**/.gemini/AGENTS.md",
            "**/.gemini/commands/**",
            "**/.gemini/extensions/**",
            "**/.gemini/policies/**",
            "**/.gemini/skills/**",
            "**/.gemini/agents/**",
            "**/.gemini/hooks/**",
            "~/.claude/settings*.json",
            "~/.claude/hooks/**",
            "~/.claude/commands/**",
            "~/.claude/agents/**",
            "~/.claude/skills/**",
            "~/.claude/rules/**",
            "~/.claude/output-styles/**",
            "~/.claude/CLAUDE.md",
            "~/.claude/plugins/installed_plugins*.json",
            "~/.claude/plugins/known_marketplaces.json",
            "~/.claude/plugins/marketplaces/**",
            "~/.claude/plugins/cache/**",
            "~/.claude.json",
            "~/.codex/*.toml",
            "~/.gemini/*.md",
        ];
        ContainmentConfig {
            protect: ["~", "/tmp", "/var/tmp", "/dev/shm", "/run/user/{uid}"].map(String::from).to_vec(),
            open_paths: vec![
                open("~/.gitconfig", OpenMode::ReadOnly),
                open("~/.config/git", OpenMode::ReadOnly),
                open("~/.rustup", OpenMode::ReadOnly),
                open("~/.cargo", OpenMode::ReadWrite),
                open("~/.npm", OpenMode::ReadWrite),
                open("~/.cache/pip", OpenMode::ReadWrite),
                open("~/.local/bin", OpenMode::ReadOnly),
                open("~/.local/lib", OpenMode::ReadOnly),
                // The agents' state directories: each session writes its own layer (its
                // transcripts, sessions, shell snapshots, logs), and sees of the user's only
                // the agent's configuration and login, never the histories of the user's
                // other runs. Their never places stay refused in the layer too.
                agent_state("~/.claude", CLAUDE_KEEP),
                open("~/.claude.json", OpenMode::ReadOnly),
                agent_state("~/.codex", CODEX_KEEP),
                agent_state("~/.gemini", GEMINI_KEEP),
            ],
            never: secrets
                .iter()
                .map(|p| never(p, ALL))
                .chain(startup.iter().chain(agent.iter()).map(|p| never(p, CHANGE)))
                .collect(),
            scratch: true,
            scratch_parent: PathBuf::from("/tmp"),
            allow_userns: false,
            pid_namespace: true,
            ipc_namespace: true,
            observe_shells: true,
        }
    }
}

impl ContainmentConfig {
    /// Checks the open paths against the never-grantable rules: an open path that lies in a
    /// never place for an access its mode opens would contradict the rule (the kernel lets
    /// never win, so it would only mislead the reader) and is an error naming both. Never
    /// places inside an open path are carved out of it (never beats open); they are returned,
    /// as `(open path, never pattern)`, for the daemon to report.
    pub fn check(&self) -> Result<Vec<(String, String)>, String> {
        let sample = Account {
            name: "user".into(),
            uid: 1000,
            gid: 1000,
            home: PathBuf::from("/home/user"),
            shell: PathBuf::from("/bin/sh"),
        };
        let never = NeverList::as_written(&self.never, &sample).map_err(|e| e.to_string())?;
        let mut carved = Vec::new();
        for o in &self.open_paths {
            if (!o.show.is_empty() || o.retain) && o.mode != OpenMode::ReadWrite {
                return Err(format!("open path {:?}: show and retain are about the session's layer, and only an rw open path has one", o.path));
            }
            super::layers::Shown::new(&o.show).map_err(|e| format!("open path {:?}: {e}", o.path))?;
            let path = absolute(&o.path, &sample).map_err(|e| e.to_string())?;
            let open_bits = bits(o.mode.access());
            for r in &never.rules {
                if r.matches(&path) && r.access & open_bits != 0 {
                    return Err(format!(
                        "open path {:?} ({}) lies in the never-grantable place {:?}: remove it from open_paths",
                        o.path,
                        match o.mode {
                            OpenMode::ReadOnly => "ro",
                            OpenMode::ReadWrite => "rw",
                            OpenMode::Shared => "shared",
                        },
                        r.pattern
                    ));
                }
                let literal = r.pattern.strip_suffix("/**").unwrap_or(&r.pattern);
                if !r.anywhere
                    && Path::new(literal).starts_with(&path)
                    && Path::new(literal) != path
                    && r.access & open_bits != 0
                {
                    carved.push((o.path.clone(), r.pattern.replacen("/home/user", "~", 1)));
                }
            }
        }
        Ok(carved)
    }
}

/// Why the containment configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ContainError {
    /// A never pattern is not a valid glob.
    #[error("containment.never pattern {pattern:?}")]
    Pattern {
        /// The pattern.
        pattern: String,
        /// What globset said.
        #[source]
        source: globset::Error,
    },
    /// A path is neither absolute, nor in the home (`~`), nor under any root (`**/`).
    #[error("containment path {0:?} must be absolute, start with ~/ or (never patterns) with **/")]
    Relative(String),
    /// The kernel refused a map update.
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// The scratch directory could not be made.
    #[error("cannot make the session's scratch directory {}", path.display())]
    Scratch {
        /// The directory.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// An entry of an open path's `show` is not a relative path of globs.
    #[error("show entry {entry:?}: {problem}")]
    Shown {
        /// The entry.
        entry: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A session's layer over a read-write open path could not be made.
    #[error("cannot make the session's layer over {}: {what}", path.display())]
    Layer {
        /// The open path.
        path: PathBuf,
        /// The step that failed.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

fn expand(p: &str, owner: &Account) -> String {
    let p = p.replace("{uid}", &owner.uid.to_string());
    let home = owner.home.to_string_lossy();
    if p == "~" {
        home.into_owned()
    } else if let Some(rest) = p.strip_prefix("~/") {
        format!("{}/{rest}", home.trim_end_matches('/'))
    } else {
        p
    }
}

fn absolute(p: &str, owner: &Account) -> Result<PathBuf, ContainError> {
    let e = expand(p, owner);
    if !e.starts_with('/') {
        return Err(ContainError::Relative(p.into()));
    }
    Ok(PathBuf::from(e))
}

fn has_glob(segment: &str) -> bool {
    crate::glob::is_glob(segment)
}

fn bits(access: &[Access]) -> u32 {
    access.iter().fold(0, |b, a| b | access_bit(*a))
}

/// One compiled never rule.
#[derive(Debug, Clone)]
struct Never {
    pattern: String,
    matcher: Matcher,
    access: u32,
    /// Whether the pattern applies under every root (`**/...`).
    anywhere: bool,
}

/// How a never rule (or a `show` name of an open path) matches a path. Most rules name one place, and those are compared as
/// strings: a daemon compiles a few hundred rules for each owner (and once more to check the
/// configuration), and a regular expression for each was most of a session's start-up time.
#[derive(Debug, Clone)]
pub(super) enum Matcher {
    /// A pattern without glob syntax: the path itself, and with `subtree` (a pattern ending
    /// in `/**`) everything below it; the same paths its glob matches.
    Literal { path: String, subtree: bool },
    /// A `**/` pattern whose rest has no glob syntax (`**/.git/hooks`, `**/.env/**`): those
    /// components at the end of a path, and with `subtree` everything below them wherever
    /// they are; the same paths its glob matches. Most of the `**/` rules are so.
    Anywhere { tail: String, subtree: bool },
    /// A glob; for a pattern ending in `/**`, the glob of the directory it covers too.
    Glob { glob: GlobMatcher, base: Option<GlobMatcher> },
}

impl Matcher {
    /// The matcher of `pattern` (a glob of `/`-separated components, `**/` and `/**` as
    /// globset reads them).
    pub(super) fn new(pattern: &str) -> Result<Self, ContainError> {
        let (literal, subtree) = match pattern.strip_suffix("/**") {
            Some(b) => (b, true),
            None => (pattern, false),
        };
        use crate::glob::is_plain;
        if is_plain(literal) {
            return Ok(Matcher::Literal { path: literal.to_string(), subtree });
        }
        if let Some(tail) = literal.strip_prefix("**/").filter(|t| is_plain(t) && !t.split('/').any(str::is_empty)) {
            return Ok(Matcher::Anywhere { tail: tail.to_string(), subtree });
        }
        let base = if subtree && !literal.is_empty() { Some(glob(literal)?) } else { None };
        Ok(Matcher::Glob { glob: glob(pattern)?, base })
    }

    /// Whether `path` matches.
    pub(super) fn matches(&self, path: &Path) -> bool {
        match self {
            Matcher::Literal { path: lit, subtree } => {
                let p = path.as_os_str().as_encoded_bytes();
                let lit = lit.as_bytes();
                p == lit || (*subtree && p.len() > lit.len() && p.starts_with(lit) && p[lit.len()] == b'/')
            }
            Matcher::Anywhere { tail, subtree } => {
                let (p, t) = (path.as_os_str().as_encoded_bytes(), tail.as_bytes());
                // `**/` is the path's start, a leading `/`, or anything up to a `/`.
                let ends = p == t || (p.len() > t.len() && p.ends_with(t) && p[p.len() - t.len() - 1] == b'/');
                // With `/**`: the components at the start or after a `/`, then a `/`.
                let dir_at = |i: usize| p[i..].starts_with(t) && p.get(i + t.len()) == Some(&b'/');
                ends || (*subtree && (dir_at(0) || p.iter().enumerate().any(|(i, &c)| c == b'/' && dir_at(i + 1))))
            }
            Matcher::Glob { glob, base } => glob.is_match(path) || base.as_ref().is_some_and(|b| b.is_match(path)),
        }
    }
}

/// The matcher of a glob pattern, compiled once per process: a daemon compiles the same
/// rules to check its configuration, and again for each session owner (the `**/` rules
/// are the same for all), and each compile is a regular expression's.
fn glob(pattern: &str) -> Result<GlobMatcher, ContainError> {
    static COMPILED: std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<String, GlobMatcher>>> = std::sync::OnceLock::new();
    let compiled = COMPILED.get_or_init(Default::default);
    if let Some(m) = compiled.lock().unwrap_or_else(|e| e.into_inner()).get(pattern) {
        return Ok(m.clone());
    }
    let m = GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|source| ContainError::Pattern { pattern: pattern.into(), source })?;
    compiled.lock().unwrap_or_else(|e| e.into_inner()).insert(pattern.to_string(), m.clone());
    Ok(m)
}

impl Never {
    fn compile(pattern: String, access: u32, anywhere: bool) -> Result<Self, ContainError> {
        Ok(Never { matcher: Matcher::new(&pattern)?, pattern, access, anywhere })
    }

    /// The configured rule `r` compiled, `~` and `{uid}` expanded for `owner` (a `**/` rule
    /// applies under every root and is kept as written).
    fn written(r: &NeverRule, owner: &Account) -> Result<Self, ContainError> {
        let anywhere = r.pattern.starts_with("**/");
        let pattern = if anywhere { r.pattern.clone() } else { absolute(&r.pattern, owner)?.to_string_lossy().into_owned() };
        Self::compile(pattern, bits(&r.access), anywhere)
    }

    fn matches(&self, path: &Path) -> bool {
        self.matcher.matches(path)
    }

    /// For a `**/NAME` or `**/DIR/NAME` rule of literal names (with or without a
    /// trailing `/**`), the names the kernel matches at access time: `(DIR, NAME)`.
    fn kernel_pattern(&self) -> Option<(Option<&str>, &str)> {
        let rest = self.pattern.strip_prefix("**/")?;
        let rest = rest.strip_suffix("/**").unwrap_or(rest);
        let segments: Vec<&str> = rest.split('/').collect();
        if segments.iter().any(|s| s.is_empty() || has_glob(s) || *s == "." || *s == "..") {
            return None;
        }
        match segments[..] {
            [name] => Some((None, name)),
            [dir, name] => Some((Some(dir), name)),
            _ => None,
        }
    }
}

/// The never-grantable rules of one owner, compiled.
#[derive(Debug, Clone, Default)]
pub struct NeverList {
    rules: Vec<Never>,
    /// Where pinning the ancestors of a place stops (the owner's home).
    anchors: Vec<PathBuf>,
    /// The configuration the code places were read from ([`NeverList::with_code_places`]),
    /// to be watched for change.
    read_from: Vec<Watch>,
}

impl NeverList {
    /// Compiles the rules with `~` and `{uid}` expanded for `owner`. A literal place that is
    /// a symlink, or lies under one (`~/.bashrc` linked into a dotfiles repository, `~/.ssh`
    /// kept on another disk), protects its target too: the kernel checks the object an
    /// access reaches, and the link's own name only guards the link. And every symlink of
    /// the owner's met on the way to it (`~/.gitconfig -> dots/current/gitconfig` with
    /// `dots/current -> v1`, Home Manager's generations, stow's trees) is never changed
    /// either, its folders pinned as the place's are ([`derived_rules`]): retargeting one
    /// would make the place another file.
    pub fn new(rules: &[NeverRule], owner: &Account) -> Result<Self, ContainError> {
        let mut out = Vec::new();
        for r in rules {
            let rule = Never::written(r, owner)?;
            let (pattern, access, anywhere) = (rule.pattern.clone(), rule.access, rule.anywhere);
            out.push(rule);
            if anywhere {
                continue;
            }
            let (literal, tail) = match pattern.strip_suffix("/**") {
                Some(b) => (b, "/**"),
                None => (pattern.as_str(), ""),
            };
            if Path::new(literal)
                .components()
                .any(|c| has_glob(&c.as_os_str().to_string_lossy()))
            {
                continue;
            }
            for rule in derived_rules(Path::new(literal), tail, access, owner) {
                let rule = rule?;
                if !out.iter().any(|r| r.pattern == rule.pattern && r.access & rule.access == rule.access) {
                    out.push(rule);
                }
            }
        }
        Ok(NeverList {
            rules: out,
            anchors: vec![owner.home.clone()],
            read_from: vec![],
        })
    }

    /// The rules as written, with `~` and `{uid}` expanded for `owner`, and nothing read from
    /// the filesystem (no [`derived_rules`]): what the configuration's check compares the open
    /// paths with, the same on every host.
    fn as_written(rules: &[NeverRule], owner: &Account) -> Result<Self, ContainError> {
        let rules = rules.iter().map(|r| Never::written(r, owner)).collect::<Result<_, _>>()?;
        Ok(NeverList { rules, anchors: vec![owner.home.clone()], read_from: vec![] })
    }

    /// Adds `rule` unless a rule of the same pattern already refuses its access; whether it
    /// was added.
    fn add(&mut self, rule: Never) -> bool {
        if self.rules.iter().any(|r| r.pattern == rule.pattern && r.access & rule.access == rule.access) {
            return false;
        }
        self.rules.push(rule);
        true
    }

    /// Adds the rules of a literal never place found by reading the configuration (a file a
    /// never place loads, a configuration file the environment names, a place under a moved
    /// XDG base directory): the place (with everything beneath it if it is a folder, or
    /// `tail` says so) and its [`derived_rules`]; none for a place that is not the owner's
    /// to lose ([`is_owners`]). Whether any was added.
    fn add_place(&mut self, place: &Path, access: u32, owner: &Account) -> Result<bool, ContainError> {
        if !is_owners(place, owner) {
            return Ok(false);
        }
        let tail = if std::fs::metadata(place).is_ok_and(|m| m.is_dir()) { "/**" } else { "" };
        let mut added = self.add(Never::compile(format!("{}{tail}", place.display()), access, false)?);
        for rule in derived_rules(place, tail, access, owner) {
            added |= self.add(rule?);
        }
        Ok(added)
    }

    /// The rules with the places they name as code added ([`code_places`]): what the
    /// protected configuration of `owner` runs programs from is protected with it against
    /// change (the folders its shell puts on PATH, git's hooks folder and programs), as the
    /// configuration is now, with the places `env` names (the folders on the `PATH` of the
    /// user's process that started the session, [`super::code_places::of_process`]). The
    /// configuration read is the never list's literal places, the configuration files the
    /// environment names ([`UserEnvironment::configs`], never places of their own), and
    /// what each loads ([`loaded_files`], each a never place of its own with its folders
    /// pinned); the XDG base directories the shell files move (`export
    /// XDG_CONFIG_HOME=~/dots/config`, read with the variables the files set) move the never
    /// places under them as the environment's do ([`moved_rules`]), and what is there is
    /// read too. Every other path of the user's the configuration read names is the user's
    /// tools' as the environment's are ([`named_in_configuration`]: a key ssh's or git's
    /// configuration names a secret, never read), but the session roots `roots`, paths
    /// inside or above them and the home. A session's list; the configuration check uses
    /// the rules alone, which do not depend on what a home holds.
    pub fn with_code_places(mut self, owner: &Account, env: &UserEnvironment, roots: &[PathBuf]) -> Result<Self, ContainError> {
        let home = owner.home.clone();
        let mut read_from = Vec::new();
        // Each configuration file read once, for its variables and then for its places.
        let mut texts: Vec<(String, u32)> = Vec::new();
        let mut text_files: Vec<PathBuf> = Vec::new();
        let mut read: std::collections::HashSet<PathBuf> = Default::default();
        let mut visited: std::collections::HashSet<PathBuf> = Default::default();
        let mut moved: Vec<PathBuf> = Vec::new();
        // The literal places to read, with their rule's access.
        let mut queue: std::collections::VecDeque<(PathBuf, u32)> = self.rules.iter().filter_map(readable_place).collect();
        for c in &env.configs {
            self.add_place(c, CHANGE, owner)?;
            queue.push_back((c.clone(), CHANGE));
        }
        loop {
            while let Some((literal, access)) = queue.pop_front() {
                if !visited.insert(literal.clone()) {
                    continue;
                }
                // Watched by name even where it does not exist yet: the user may make it; and
                // each link on its way, which the user may switch.
                read_from.push(Watch::of(&literal));
                read_from.extend(links_on_the_way(&literal).into_iter().map(Watch::File));
                for (f, loaded) in configuration_files(&literal, &home) {
                    if loaded && !f.starts_with(&literal) && self.add_place(&f, access, owner)? {
                        queue.push_back((f.clone(), access));
                    }
                    if !read.insert(f.clone()) {
                        continue;
                    }
                    read_from.push(Watch::of(&f));
                    read_from.extend(links_on_the_way(&f).into_iter().map(Watch::File));
                    if let Some(dir) = f.parent().filter(|d| *d != literal && d.starts_with(&literal)) {
                        read_from.push(Watch::Folder(dir.to_path_buf()));
                    }
                    if let Some(t) = read_text(&f) {
                        texts.push((t, access & CHANGE));
                        text_files.push(f.clone());
                    }
                }
            }
            // The base directories the shell's own files move.
            let vars = ShellVariables::of_texts(&texts.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>());
            for m in MOVABLE {
                let from = home.join(m.default);
                let values: Vec<String> = vars.expand(&format!("${{{}}}", m.var)).iter().flat_map(|v| if m.list { v.split(':').map(str::to_string).collect() } else { vec![v.clone()] }).collect();
                for value in values {
                    let Some(to) = path_of(&value, Some(&home), None) else { continue };
                    if to == from || moved.contains(&to) || !is_movable_to(&to, owner) {
                        continue;
                    }
                    moved.push(to.clone());
                    let from = from.display().to_string();
                    let under: Vec<(String, u32)> = self.rules.iter().filter(|r| !r.anywhere).filter_map(|r| Some((moved_pattern(&r.pattern, &from, m, &to)?, r.access))).collect();
                    for (pattern, access) in under {
                        let (literal, tail) = match pattern.strip_suffix("/**") {
                            Some(b) => (b.to_string(), "/**"),
                            None => (pattern.clone(), ""),
                        };
                        self.add(Never::compile(pattern, access, false)?);
                        if literal.split('/').any(has_glob) {
                            continue;
                        }
                        for rule in derived_rules(Path::new(&literal), tail, access, owner) {
                            self.add(rule?);
                        }
                        if access & CHANGE != 0 {
                            queue.push_back((PathBuf::from(literal), access));
                        }
                    }
                }
            }
            if queue.is_empty() {
                break;
            }
        }
        self.read_from = super::config_watch::with_targets(read_from);
        let vars = ShellVariables::of_texts(&texts.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>());
        let configured = named_in_configuration(text_files.iter().map(PathBuf::as_path).zip(texts.iter().map(|(t, _)| t.as_str())), &home, roots);
        let named: Vec<Never> = texts
            .iter()
            .flat_map(|(t, access)| places_in(t, Some(&owner.home), None, &vars).into_iter().map(move |p| (p, *access)))
            .chain(env.places.iter().map(|p| (p.clone(), CHANGE)))
            .chain(env.secrets.iter().map(|p| (CodePlace::Program(p.clone()), pincer_common::ACCESS_READ | CHANGE)))
            .chain(configured.places.iter().map(|p| (p.clone(), CHANGE)))
            .chain(configured.secrets.iter().map(|p| (CodePlace::Program(p.clone()), pincer_common::ACCESS_READ | CHANGE)))
            .flat_map(|(place, access)| code_place_rules(&place, owner, access))
            .collect::<Result<_, _>>()?;
        for rule in named {
            self.add(rule);
        }
        Ok(self)
    }

    /// The configuration files and folders the code places were read from (with the targets
    /// of symlinks): a change to one may name new places.
    pub fn read_from(&self) -> &[Watch] {
        &self.read_from
    }

    /// The rules' patterns, each with its access bits (symlink targets included).
    pub fn patterns(&self) -> impl Iterator<Item = (&str, u32)> {
        self.rules.iter().map(|r| (r.pattern.as_str(), r.access))
    }

    /// The pattern that makes `access` on the absolute `path` never-grantable, if any.
    pub fn forbids(&self, path: &Path, access: Access) -> Option<&str> {
        let bit = access_bit(access);
        self.rules.iter().find(|r| r.access & bit != 0 && r.matches(path)).map(|r| r.pattern.as_str())
    }

    /// Puts the objects and names that exist now into the kernel's never map: literal
    /// paths (and their names in the parent directory, so a deleted or missing one cannot be
    /// made), directories of `/**` patterns (covering their subtree), and the matches of
    /// `**/` patterns found by a bounded scan of the named roots, and the targets of the
    /// home's hidden symlinks (a bounded scan that enters neither the named roots nor
    /// `read_only`, the read-only open paths). An object or name several rules cover gets the
    /// union of their bits (a kernel entry's bits replace the earlier ones).
    pub fn seed(&self, enforcer: &mut Enforcer, named_roots: &[PathBuf], read_only: &[PathBuf]) -> Result<Seeded, ContainError> {
        self.plan(named_roots, read_only).write(enforcer)
    }

    /// What [`NeverList::seed`] writes, found without the kernel (the scans read the
    /// filesystem only): the configuration is read again off the daemon's actor, which
    /// then writes the plan.
    pub fn plan(&self, named_roots: &[PathBuf], read_only: &[PathBuf]) -> SeedPlan {
        self.plan_heard(named_roots, read_only, &[])
    }

    /// [`NeverList::plan`], with the paths the configuration watch heard tell of a
    /// repository in a root or the home (`vendor/lib/.git` made, a folder moved in) each
    /// scanned from where it is, with a scan's own bound: the scan of a root stops after
    /// [`SCAN_LIMIT`] entries, which the session's own files may spend first.
    pub fn plan_heard(&self, named_roots: &[PathBuf], read_only: &[PathBuf], heard: &[PathBuf]) -> SeedPlan {
        let mut seeds = Seeds::default();
        let mut patterns = Vec::new();
        let mut anywhere = Vec::new();
        for r in &self.rules {
            if r.anywhere {
                if let Some((dir, name)) = r.kernel_pattern() {
                    patterns.push((dir.map(std::ffi::OsString::from), std::ffi::OsString::from(name), r.access));
                }
                anywhere.push(r);
                continue;
            }
            let literal = r.pattern.strip_suffix("/**").unwrap_or(&r.pattern);
            let path = Path::new(literal);
            if path.components().any(|c| has_glob(&c.as_os_str().to_string_lossy())) {
                // A glob inside the path: the existing matches in its literal directory.
                let dir: PathBuf = path.components().take_while(|c| !has_glob(&c.as_os_str().to_string_lossy())).collect();
                seed_matches_in(&mut seeds, r, &dir);
                continue;
            }
            seed_literal(&mut seeds, path, r.access);
            pin_ancestors(&mut seeds, path, &self.anchors);
            // What a protected file loads is protected with it, and its folders pinned as the
            // place's are: moving one away would leave the name it is loaded by free.
            for loaded in loaded_files(path, self.anchors.first().map(PathBuf::as_path)) {
                // Not the home or above it (a glob of the home's own files loads it whole).
                if self.anchors.iter().any(|a| a.starts_with(&loaded)) {
                    continue;
                }
                seed_literal(&mut seeds, &loaded, r.access);
                pin_ancestors(&mut seeds, &loaded, &self.anchors);
            }
        }
        let home = self.anchors.first().map(PathBuf::as_path);
        // A root inside another (a session's root in `/tmp`) is scanned once, as its own.
        for root in named_roots {
            let inside: Vec<PathBuf> = named_roots.iter().filter(|r| *r != root && r.starts_with(root)).cloned().collect();
            seed_scan_from(&mut seeds, &anywhere, root, root, home, &inside);
        }
        let mut started: Vec<PathBuf> = Vec::new();
        for p in heard {
            let Some(root) = named_roots.iter().map(PathBuf::as_path).chain(home).filter(|r| p.starts_with(r)).max_by_key(|r| r.as_os_str().len()) else { continue };
            let Some(start) = repository_folder(p) else { continue };
            // Once each, and not where a scan of its own already began above it.
            if !start.starts_with(root) || started.iter().any(|s| start.starts_with(s)) {
                continue;
            }
            started.push(start.clone());
            seed_scan_from(&mut seeds, &anywhere, root, &start, home, &[]);
        }
        let skip: Vec<PathBuf> = named_roots.to_vec();
        for home in &self.anchors {
            seed_hidden_targets(&mut seeds, home, &skip, read_only);
        }
        SeedPlan { patterns, seeds }
    }
}

/// The never entries a seeding of the never map writes ([`NeverList::plan`]).
#[derive(Debug, Default)]
pub struct SeedPlan {
    /// The kernel's name patterns: (the directory's name, the entry's name, access).
    patterns: Vec<(Option<std::ffi::OsString>, std::ffi::OsString, u32)>,
    seeds: Seeds,
}

impl SeedPlan {
    /// Writes the plan into the kernel's never map.
    pub fn write(self, enforcer: &mut Enforcer) -> Result<Seeded, ContainError> {
        for (dir, name, access) in &self.patterns {
            enforcer.add_never_pattern(dir.as_deref(), name, *access)?;
        }
        self.seeds.write(enforcer)
    }
}

/// Never entries made for one session's view of a read-write open path (removed when the
/// session ends: the keys name objects of its layer's filesystem, whose device number the
/// kernel gives to another filesystem later).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewNevers {
    /// Objects.
    pub objects: Vec<ObjectId>,
    /// Names in directories.
    pub names: Vec<(ObjectId, std::ffi::OsString)>,
    /// Reserved names' carries.
    pub carries: Vec<(ObjectId, std::ffi::OsString)>,
}

impl NeverList {
    /// Puts into the kernel's never map the never places under `lower` (a read-write open
    /// path) as a session reaches them through its layer mounted at `view`, on the layer's
    /// device `dev`: the kernel keys what an access reaches through the layer by the layer's
    /// inodes (a directory's number is the layer's own, a file keeps the number of the user's
    /// file), not by the user's. Literal places (with their names, missing ancestors and
    /// pinned parents) and the matches of globbed ones that exist now; `**/` rules need
    /// nothing (the kernel matches their names on every filesystem). Returns the entries made.
    pub fn seed_view(&self, enforcer: &mut Enforcer, lower: &Path, view: &Path, dev: u32) -> Result<ViewNevers, ContainError> {
        let in_view = |p: &Path| p.strip_prefix(lower).ok().map(|rel| if rel.as_os_str().is_empty() { view.to_path_buf() } else { view.join(rel) });
        let object = |p: &Path| std::fs::symlink_metadata(p).ok().map(|m| ObjectId { dev, ino: m.ino() });
        let mut seeds = Seeds::default();
        for r in self.rules.iter().filter(|r| !r.anywhere) {
            let literal = Path::new(r.pattern.strip_suffix("/**").unwrap_or(&r.pattern));
            if !literal.starts_with(lower) || literal == lower {
                continue;
            }
            if literal.components().any(|c| has_glob(&c.as_os_str().to_string_lossy())) {
                let dir: PathBuf = literal.components().take_while(|c| !has_glob(&c.as_os_str().to_string_lossy())).collect();
                let Some(vdir) = in_view(&dir) else { continue };
                let Ok(entries) = std::fs::read_dir(&vdir) else { continue };
                for e in entries.flatten().take(SCAN_LIMIT) {
                    if r.matches(&dir.join(e.file_name())) {
                        if let Some(id) = object(&vdir.join(e.file_name())) {
                            seeds.object(id, r.access);
                        }
                    }
                }
                continue;
            }
            let Some(place) = in_view(literal) else { continue };
            seed_literal_with(&mut seeds, &place, r.access, &object);
            pin_ancestors_with(&mut seeds, &place, std::slice::from_ref(&view.to_path_buf()), &object);
        }
        seeds.write_listed(enforcer)
    }
}

/// Marks what hidden entries of the home `root` name under visible names, found by a
/// bounded breadth-first scan (symlinks not followed): the target of every hidden symlink
/// (`~/.gdbinit -> ~/dots/gdbinit`, a project's `.cargo -> ../shared-cargo`) and of every
/// symlink in a hidden directory (`~/.config/nvim -> ~/dots/nvim`, `~/.local/bin/tool`).
/// `skip` is not entered: the session's named roots ([`seed_scan`] marks the targets of
/// their hidden symlinks only, since a project's `node_modules/.bin` links into packages
/// the session may rewrite anyway). Of the `shallow` directories, the read-only open paths,
/// only their own entries are looked at: they hold installed software every session reads
/// (a toolchain under `~/.rustup` alone is tens of thousands of entries), and entering
/// them spent the scan's budget before the rest of the home, and about a second of every
/// session's start in the test VM; their own entries are what the user runs (the links
/// of `~/.local/bin`, a folder on `PATH`, to a tool's real place). The kernel's hidden rule goes by the names on the way up
/// from the object reached, and a symlink followed leaves no name: marked
/// [`NEVER_HIDDEN`](pincer_common::NEVER_HIDDEN), the target is reached by a grant on it or
/// inside it, as the hidden entry is, and not by a grant above it. The git directories met
/// anywhere are protected as a root's are, and each folder walked (but the shallow ones)
/// is watched for repositories made later ([`watch_for_repositories`]).
fn seed_hidden_targets(seeds: &mut Seeds, root: &Path, skip: &[PathBuf], shallow: &[PathBuf]) {
    // (directory, inside a hidden one, its own entries only)
    let mut queue = std::collections::VecDeque::from([(root.to_path_buf(), false, false)]);
    let mut seen = 0usize;
    while let Some((dir, in_hidden, only_here)) = queue.pop_front() {
        if !only_here {
            watch_for_repositories(seeds, &dir, root);
        }
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            seen += 1;
            if seen > SCAN_LIMIT {
                return;
            }
            let hidden_name = is_hidden_name(&e.file_name());
            let Ok(kind) = e.file_type() else { continue };
            if is_git_marker(&e.file_name()) {
                // A repository anywhere in the home, not only in the session's roots.
                if let Ok(meta) = e.metadata() {
                    seed_git_entry(seeds, &dir, &e.file_name(), &meta, CHANGE, root, Some(root));
                }
            }
            if kind.is_symlink() {
                if hidden_name || in_hidden {
                    mark_target_hidden(seeds, &e.path());
                }
            } else if kind.is_dir() && !only_here && !skip.iter().any(|s| *s == e.path()) {
                let path = e.path();
                let only = shallow.iter().any(|s| *s == path);
                queue.push_back((path, in_hidden || hidden_name, only));
            }
        }
    }
}

/// How many files [`loaded_files`] finds at most from one file: includes are followed
/// until they name no new file (git follows them ten deep, a shell without end), a cycle
/// stopping where a file is met again.
const LOAD_FILES: usize = 64;

/// The files that the file at `path` loads when the user's tools read it, followed until
/// none is new (at most [`LOAD_FILES`]): git's `[include]` and `[includeIf ...]` `path =`
/// entries (relative to the including file, `~/` in `home`), a shell's `source FILE` and
/// `. FILE` (a path relative to the home at a command's start: the user's shells start
/// there), tmux's `source-file`, vim's `source`/`so`, emacs's `(load "FILE")` and
/// `(load-file "FILE")`, and ssh's `Include` (relative to `~/.ssh`); a glob loads its
/// literal folder whole. A never place's protection follows what it loads: `~/.gitconfig`
/// including a file in a project folder, `~/.bashrc` sourcing `~/dotfiles/aliases.sh`.
/// Unreadable, binary or larger files load nothing.
pub fn loaded_files(path: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut next = 0;
    let mut file = path.to_path_buf();
    loop {
        for p in loads_of(&file, home) {
            if out.len() >= LOAD_FILES {
                return out;
            }
            if p != path && !out.contains(&p) {
                out.push(p);
            }
        }
        let Some(f) = out.get(next) else { return out };
        file = f.clone();
        next += 1;
    }
}

/// The access bits that change an object: what a never place's protection of the code its
/// configuration names covers.
const CHANGE: u32 = pincer_common::ACCESS_WRITE | pincer_common::ACCESS_CREATE | pincer_common::ACCESS_DELETE;

/// How many files of a protected configuration folder (`~/.bashrc.d`, `~/.config/fish`)
/// are read for the places they name, two levels deep: enough for a real one whole (a
/// framework's hundreds of plugins and snippets).
const CONFIG_DIR_FILES: usize = 4096;

/// The configuration files a never place is made of: the file itself, or the files of a
/// protected folder (two levels, at most [`CONFIG_DIR_FILES`]), each with what it loads;
/// each with whether it is a loaded one.
fn configuration_files(place: &Path, home: &Path) -> Vec<(PathBuf, bool)> {
    let mut files = Vec::new();
    match std::fs::symlink_metadata(place) {
        Ok(m) if m.is_dir() => {
            let mut dirs = vec![(place.to_path_buf(), 0)];
            while let Some((dir, depth)) = dirs.pop() {
                let Ok(entries) = std::fs::read_dir(&dir) else { continue };
                for e in entries.flatten() {
                    let Ok(t) = e.file_type() else { continue };
                    if t.is_dir() && depth < 1 {
                        dirs.push((e.path(), depth + 1));
                    } else if t.is_file() && files.len() < CONFIG_DIR_FILES {
                        files.push(e.path());
                    }
                }
            }
        }
        Ok(_) => files.push(place.to_path_buf()),
        Err(_) => return vec![],
    }
    let mut out: Vec<(PathBuf, bool)> = files.iter().map(|f| (f.clone(), false)).collect();
    for f in &files {
        for l in loaded_files(f, Some(home)) {
            if !out.iter().any(|(o, _)| *o == l) {
                out.push((l, true));
            }
        }
    }
    out
}

/// A literal never place the configuration is read from: a rule's path without glob
/// syntax (not under every root) that refuses change, with its access.
fn readable_place(r: &Never) -> Option<(PathBuf, u32)> {
    let pattern = r.pattern.strip_suffix("/**").unwrap_or(&r.pattern);
    (!r.anywhere && r.access & CHANGE != 0 && !pattern.split('/').any(has_glob)).then(|| (PathBuf::from(pattern), r.access))
}

/// Whether `path` is the owner's to lose: not the home or a folder above it, and its
/// nearest existing part the owner's (not a system folder, which a session cannot change
/// anyway).
fn is_owners(path: &Path, owner: &Account) -> bool {
    !owner.home.starts_with(path) && path.ancestors().find_map(|a| std::fs::symlink_metadata(a).ok()).is_some_and(|m| m.uid() == owner.uid)
}

/// The symlinks met on the way to `path` as the kernel resolves it, in the order met: at
/// each component, and through the components of each link's target in turn (a link on
/// the way to a link's target). A missing component ends the walk; at most 40 links.
fn links_on_the_way(path: &Path) -> Vec<PathBuf> {
    let mut links: Vec<PathBuf> = Vec::new();
    if !path.is_absolute() {
        return links;
    }
    let parts = |p: &Path| -> Vec<std::ffi::OsString> {
        p.components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n.to_os_string()),
                Component::ParentDir => Some("..".into()),
                _ => None,
            })
            .collect()
    };
    let mut rest: std::collections::VecDeque<std::ffi::OsString> = parts(path).into();
    let mut at = PathBuf::from("/");
    let mut hops = 0;
    while let Some(name) = rest.pop_front() {
        if name == ".." {
            at.pop();
            continue;
        }
        let next = at.join(&name);
        let Ok(meta) = std::fs::symlink_metadata(&next) else { break };
        if !meta.file_type().is_symlink() {
            at = next;
            continue;
        }
        hops += 1;
        let Ok(target) = std::fs::read_link(&next) else { break };
        if hops > 40 {
            break;
        }
        if !links.contains(&next) {
            links.push(next);
        }
        if target.is_absolute() {
            at = PathBuf::from("/");
        }
        for part in parts(&target).into_iter().rev() {
            rest.push_front(part);
        }
    }
    links
}

/// The rules a literal never place `literal` (`tail`: `/**` for a folder and all beneath
/// it, or empty) adds besides its own: the target its path resolves to where a symlink is on
/// the way, and each symlink of the owner's on the way ([`links_on_the_way`]; not the home
/// or above it) refused change, so none can be replaced, removed or moved (its folders are
/// pinned as a literal place's are, [`pin_ancestors`]) to make the place another file.
fn derived_rules(literal: &Path, tail: &str, access: u32, owner: &Account) -> Vec<Result<Never, ContainError>> {
    let mut out = Vec::new();
    let target = resolve_existing(literal);
    if target != literal {
        out.push(Never::compile(format!("{}{tail}", target.to_string_lossy()), access, false));
    }
    out.extend(link_rules(literal, access, owner));
    out
}

/// The rules that refuse change to each symlink of the owner's on the way to `literal`
/// ([`derived_rules`]), the place itself left to its own rule.
fn link_rules(literal: &Path, access: u32, owner: &Account) -> Vec<Result<Never, ContainError>> {
    if access & CHANGE == 0 {
        return vec![];
    }
    links_on_the_way(literal)
        .into_iter()
        .filter(|link| link != literal && !owner.home.starts_with(link) && std::fs::symlink_metadata(link).is_ok_and(|m| m.uid() == owner.uid))
        .map(|link| Never::compile(link.to_string_lossy().into_owned(), access & CHANGE, false))
        .collect()
}

/// The never rules that protect `place` against change with `access`: a folder and all
/// beneath it, or one program, and the target of a symlink on the way as well (as for a
/// listed place). None for a place that is not the user's to lose: the root, the home or
/// a folder above it (a `PATH` that names the home cannot make the home never-writable),
/// or a place whose nearest existing part is not the owner's (the system's folders, which
/// a session cannot change anyway).
fn code_place_rules(place: &CodePlace, owner: &Account, access: u32) -> Vec<Result<Never, ContainError>> {
    if let CodePlace::InEveryRepository(rel) = place {
        // As `**/.git/hooks/**`: wherever it appears, the kernel matching its names.
        return vec![Never::compile(format!("**/{}/**", rel.display()), access, true)];
    }
    let path = place.path();
    if owner.home.starts_with(path) {
        tracing::warn!(place = %path.display(), "the user's configuration runs programs from the home or above it; not protected as a whole");
        return vec![];
    }
    let Some(existing) = path.ancestors().find_map(|a| std::fs::symlink_metadata(a).ok()) else { return vec![] };
    if existing.uid() != owner.uid {
        return vec![];
    }
    let real = resolve_existing(path);
    let mut paths = vec![path.to_path_buf()];
    if real != path && !owner.home.starts_with(&real) {
        paths.push(real);
    }
    let tail = match place {
        CodePlace::Folder(_) | CodePlace::InEveryRepository(_) => "/**",
        CodePlace::Program(_) => "",
    };
    let mut out: Vec<Result<Never, ContainError>> = paths.into_iter().map(|p| Never::compile(format!("{}{tail}", p.display()), access, false)).collect();
    // The links on its way, as a listed place's.
    out.extend(link_rules(path, access, owner));
    out
}

/// The files one file names as loaded (see [`loaded_files`]).
fn loads_of(file: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    let Some(text) = read_text(file) else { return vec![] };
    let here = file.parent().unwrap_or(Path::new("/"));
    // ssh takes a relative `Include` from `~/.ssh` in a user's configuration, from the
    // including file's folder (`/etc/ssh`) in the system's.
    let ssh_dir = match home {
        Some(h) if file.starts_with(h) => h.join(".ssh"),
        _ => here.to_path_buf(),
    };
    // The file's own variables and loops name what it sources (`DOTS=~/dots; . "$DOTS/x"`,
    // `for f in ~/dots/*.sh; do . "$f"; done`).
    let mut vars = ShellVariables::default();
    vars.read(&text);
    let mut out: Vec<PathBuf> = Vec::new();
    let mut push = |p: PathBuf| {
        // A glob loads whatever its folder holds, a file made there later too.
        let literal: PathBuf = p.components().take_while(|c| !has_glob(&c.as_os_str().to_string_lossy())).collect();
        if !out.contains(&literal) {
            out.push(literal);
        }
    };
    let mut in_include = false;
    for line in text.lines() {
        let mut t = line.trim();
        if let Some((section, rest)) = git_section(t) {
            in_include = section == "include" || section == "includeif";
            // `[include] path = x` on the header's line.
            t = rest.trim();
            if t.is_empty() {
                continue;
            }
        }
        if in_include {
            if let Some((k, v)) = t.split_once('=') {
                if k.trim().eq_ignore_ascii_case("path") {
                    path_of(v.trim().trim_matches('"'), home, Some(here)).into_iter().for_each(&mut push);
                }
            }
            continue;
        }
        // `source FILE` or `. FILE` anywhere on the line, from the root or the home.
        let words = shell_words(t);
        for pair in words.windows(2) {
            if pair[0] == "source" || pair[0] == "." {
                vars.expand(&pair[1]).iter().filter_map(|w| path_of(w, home, None)).for_each(&mut push);
            }
        }
        for command in shell_commands(t) {
            let (first, args) = command.split_first().expect("a command has a word");
            let args: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
            let expanded = |w: &str| vars.expand(w);
            match first.as_str() {
                // A shell's, at a command's start: relative to the shell's working folder,
                // which for the user's login and interactive shells is the home.
                // A relative word counts where it reads as a file's path (`dots/x.sh`,
                // `.aliases`), not as prose a protected folder's text may hold ("source
                // code").
                "source" | "." => {
                    for w in args.first().into_iter().flat_map(|w| expanded(w)) {
                        let rooted = w.starts_with(['/', '~', '$']);
                        if rooted || w.trim_end_matches('.').contains(['/', '.']) {
                            path_of(&w, home, home).into_iter().for_each(&mut push);
                        }
                    }
                }
                // tmux: `source-file [-Fnqv] PATH...`, relative to the file or the working
                // folder (the home, as the shell's).
                "source-file" => {
                    for w in args.iter().flat_map(|w| expanded(w)) {
                        path_of(&w, home, Some(here)).into_iter().for_each(&mut push);
                        path_of(&w, home, home).into_iter().for_each(&mut push);
                    }
                }
                // vim: `:source`, `:so` (any abbreviation), from the root or the home.
                w if matches!(w.trim_start_matches(':'), "so" | "sou" | "sour" | "sourc" | "source") => {
                    for w in args.first().into_iter().flat_map(|w| expanded(w)) {
                        path_of(&w, home, None).into_iter().for_each(&mut push);
                    }
                }
                // ssh: `Include PATH...` (or `Include=PATH`), any case.
                w if w.eq_ignore_ascii_case("include") || w.to_ascii_lowercase().starts_with("include=") => {
                    let inline = w.split_once('=').map(|(_, v)| v.to_string()).filter(|v| !v.is_empty());
                    for w in inline.iter().chain(args.iter().copied()) {
                        path_of(w, home, Some(&ssh_dir)).into_iter().for_each(&mut push);
                    }
                }
                _ => {}
            }
        }
        // emacs: `(load "FILE")` (FILE.elc, FILE.el or FILE, where it has no suffix) and
        // `(load-file "FILE")`, from the root or the home.
        for (name, exact) in lisp_loads(t) {
            let Some(p) = path_of(&name, home, None) else { continue };
            if !exact && !name.ends_with(".el") && !name.ends_with(".elc") {
                push(PathBuf::from(format!("{}.el", p.display())));
                push(PathBuf::from(format!("{}.elc", p.display())));
            }
            push(p);
        }
    }
    out
}

/// The files a line of Lisp loads: `(load "FILE" ...)` (with `false`: emacs tries suffixes)
/// and `(load-file "FILE")` (with `true`).
fn lisp_loads(line: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for (i, _) in line.match_indices("(load") {
        let rest = &line[i + "(load".len()..];
        let (rest, exact) = match rest.strip_prefix("-file") {
            Some(r) => (r, true),
            None => (rest, false),
        };
        if !rest.starts_with(char::is_whitespace) {
            continue;
        }
        if let Some(quoted) = rest.trim_start().strip_prefix('"') {
            if let Some(end) = quoted.find('"') {
                out.push((quoted[..end].to_string(), exact));
            }
        }
    }
    out
}

/// The never entries a seeding makes, each with the union of the bits of the rules that
/// make it, written once each.
#[derive(Debug, Default)]
struct Seeds {
    objects: std::collections::HashMap<ObjectId, u32>,
    names: std::collections::HashMap<(ObjectId, std::ffi::OsString), u32>,
    /// Reserved names a `mkdir` may make, with the template the new directory gets.
    carries: std::collections::HashMap<(ObjectId, std::ffi::OsString), u64>,
    /// The configuration of the git directories found, whose change may name new places.
    read_from: Vec<Watch>,
}

/// What a seeding of the never map did.
#[derive(Debug, Default)]
pub struct Seeded {
    /// The entries made.
    pub entries: usize,
    /// The configuration the places it protects as code were read from, besides the never
    /// list's own ([`NeverList::read_from`]): each git directory's `config` and what it
    /// includes.
    pub read_from: Vec<Watch>,
}

impl Seeds {
    fn object(&mut self, id: ObjectId, access: u32) {
        *self.objects.entry(id).or_default() |= access;
    }

    fn name(&mut self, dir: ObjectId, name: &OsStr, access: u32) {
        *self.names.entry((dir, name.to_owned())).or_default() |= access;
    }

    fn carry(&mut self, dir: ObjectId, name: &OsStr, template: u64) {
        self.carries.insert((dir, name.to_owned()), template);
    }

    /// Writes every entry; returns what it wrote.
    fn write_listed(self, enforcer: &mut Enforcer) -> Result<ViewNevers, ContainError> {
        let out = ViewNevers {
            objects: self.objects.keys().copied().collect(),
            names: self.names.keys().cloned().collect(),
            carries: self.carries.keys().cloned().collect(),
        };
        self.write(enforcer)?;
        Ok(out)
    }

    /// Writes every entry; returns what it did.
    fn write(self, enforcer: &mut Enforcer) -> Result<Seeded, ContainError> {
        let n = self.objects.len() + self.names.len();
        for (id, access) in self.objects {
            enforcer.add_never(id, access)?;
        }
        // A template's names before the carries that name it: a `mkdir` that finds a
        // carry finds its names.
        for ((dir, name), access) in self.names {
            enforcer.add_never_name(dir, &name, access)?;
        }
        for ((dir, name), template) in self.carries {
            enforcer.add_never_carry(dir, &name, template)?;
        }
        Ok(Seeded { entries: n, read_from: super::config_watch::with_targets(self.read_from) })
    }
}

/// `path` with every symlink in its longest existing prefix resolved; the components past
/// that prefix are kept as they are (`path` itself when nothing resolves differently).
fn resolve_existing(path: &Path) -> PathBuf {
    let mut prefix = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(&prefix) {
            return rest
                .iter()
                .rev()
                .fold(real, |p: PathBuf, c: &std::ffi::OsString| p.join(c));
        }
        match (prefix.file_name().map(OsStr::to_os_string), prefix.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                prefix = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// The object `path` names itself (a symlink is not followed), with the kernel's device
/// encoding.
fn object(path: &Path) -> Option<ObjectId> {
    std::fs::symlink_metadata(path).ok().map(|m| ObjectId::of_metadata(&m))
}

fn seed_literal(seeds: &mut Seeds, path: &Path, access: u32) {
    seed_literal_with(seeds, path, access, &object)
}

/// [`seed_literal`] with the kernel's key of each object given by `object`.
fn seed_literal_with(seeds: &mut Seeds, path: &Path, access: u32, object: &dyn Fn(&Path) -> Option<ObjectId>) {
    if let Some(id) = object(path) {
        seeds.object(id, access);
    }
    if let (Some(parent), Some(name)) = (path.parent(), path.file_name()) {
        if let Some(dir) = object(parent) {
            seeds.name(dir, name, access);
            return;
        }
    }
    // Some ancestors do not exist yet (`~/.config` of `~/.config/systemd/user`). The
    // first missing one is reserved in the existing directory above it: nothing can be
    // made under that name but a directory, by `mkdir`, and the kernel gives that new
    // directory, as it is made, the names of a template: the next missing name, reserved
    // the same way with a template of its own, down to the place itself with the rule's
    // bits. So the path to a never place is built only as a path on which the place is
    // never-grantable, by a session or by the user's own tools (a toolchain's first run
    // makes its home), and no tree prepared elsewhere can be moved in.
    let mut missing = Vec::new();
    let mut at = path;
    let (base, base_path) = loop {
        let (Some(parent), Some(name)) = (at.parent(), at.file_name()) else { return };
        missing.push(name);
        if let Some(dir) = object(parent) {
            break (dir, parent);
        }
        at = parent;
    };
    // `missing` runs from the place up: the place's own name first.
    let (place, between) = missing.split_first().expect("the place's own name");
    let (mut dir, mut prefix) = (base, base_path.to_path_buf());
    for name in between.iter().rev() {
        prefix.push(name);
        let template = template_id(&prefix);
        seeds.name(dir, name, pincer_common::NEVER_RESERVED);
        seeds.carry(dir, name, template);
        dir = ObjectId { dev: pincer_common::NEVER_CARRY_DEV, ino: template };
    }
    seeds.name(dir, place, access);
}

/// The id of the template of names a directory made at `path` gets (see
/// [`seed_literal_with`]): the first 8 bytes of the SHA-256 of the path, the same in
/// every seeding and for every daemon, so entries written for one session stay right for
/// the next.
fn template_id(path: &Path) -> u64 {
    use sha2::Digest;
    use std::os::unix::ffi::OsStrExt;
    let digest = sha2::Sha256::digest(path.as_os_str().as_bytes());
    u64::from_le_bytes(digest[..8].try_into().expect("32 bytes"))
}

/// Pins the existing directories between the place's anchor (the home for a home place,
/// `/` otherwise; excluded) and the place (excluded): a session may then neither remove nor
/// rename them, so it cannot move an ancestor away and rebuild the path to the place in a
/// directory of its own.
fn pin_ancestors(seeds: &mut Seeds, place: &Path, anchors: &[PathBuf]) {
    pin_ancestors_with(seeds, place, anchors, &object)
}

/// [`pin_ancestors`] with the kernel's key of each object given by `object`.
fn pin_ancestors_with(seeds: &mut Seeds, place: &Path, anchors: &[PathBuf], object: &dyn Fn(&Path) -> Option<ObjectId>) {
    let anchor = anchors
        .iter()
        .filter(|a| place.starts_with(a) && place != a.as_path())
        .max_by_key(|a| a.as_os_str().len());
    let mut dir = place.parent();
    while let Some(d) = dir {
        if anchor.is_some_and(|a| d == a.as_path()) || d.parent().is_none() {
            break;
        }
        if let Some(id) = object(d) {
            seeds.object(id, pincer_common::NEVER_PINNED);
        }
        dir = d.parent();
    }
}

fn seed_matches_in(seeds: &mut Seeds, r: &Never, dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten().take(SCAN_LIMIT) {
        let p = e.path();
        if r.matches(&p) {
            if let Some(id) = object(&p) {
                seeds.object(id, r.access);
            }
        }
    }
}

fn is_hidden_name(name: &OsStr) -> bool {
    name.as_encoded_bytes().first() == Some(&b'.')
}

/// Marks the object the symlink `link` points to (if it resolves) as one a hidden entry
/// names ([`seed_hidden_targets`]).
fn mark_target_hidden(seeds: &mut Seeds, link: &Path) {
    if let Ok(target) = std::fs::metadata(link) {
        seeds.object(ObjectId::of_metadata(&target), pincer_common::NEVER_HIDDEN);
    }
}

/// Bounded breadth-first scan of the named root `root` (symlinks not followed), one walk
/// for every `**/` rule and the hidden symlinks; each folder walked is watched for git
/// repositories made in it later ([`watch_for_repositories`]). The matches of the rules, and for a rule
/// whose last segment is a literal name, that name reserved in the directories where it
/// would match (the root itself, and directories named by the rule's literal parent
/// segment), so the object cannot be created later; and the target of each hidden symlink
/// marked as [`seed_hidden_targets`] marks it.
#[cfg(test)]
fn seed_scan(seeds: &mut Seeds, rules: &[&Never], root: &Path, home: Option<&Path>) {
    seed_scan_from(seeds, rules, root, root, home, &[])
}

/// The folder a scan starts from for a path that told of a repository: the worktree of a
/// `.git` (or of a `.git` folder's `config`), the folder of a bare repository's `HEAD` or
/// `config`, a folder itself (one moved in); `None` for one that is gone.
fn repository_folder(p: &Path) -> Option<PathBuf> {
    let name = p.file_name()?;
    let parent = p.parent()?;
    let start = if name == ".git" {
        parent.to_path_buf()
    } else if parent.file_name() == Some(OsStr::new(".git")) {
        parent.parent()?.to_path_buf()
    } else if (name == "HEAD" || name == "config") && !p.is_dir() {
        parent.to_path_buf()
    } else {
        p.to_path_buf()
    };
    start.is_dir().then_some(start)
}

/// [`seed_scan`] of `root` walking from `start`, a folder in it (what lies above is
/// anchored at `root`), with a bound of its own.
fn seed_scan_from(seeds: &mut Seeds, rules: &[&Never], root: &Path, start: &Path, home: Option<&Path>, skip: &[PathBuf]) {
    // Each rule with the literal name it reserves, if any, and whether its parent is literal.
    let plans: Vec<(&Never, Option<&str>, bool)> = rules
        .iter()
        .map(|r| {
            let segments: Vec<&str> = r.pattern.trim_end_matches("/**").split('/').collect();
            let last = segments.last().copied().filter(|s| !has_glob(s) && !s.is_empty() && !r.pattern.ends_with("/**"));
            let literal_parent = segments.len() >= 2 && !has_glob(segments[segments.len() - 2]);
            (*r, last, literal_parent)
        })
        .collect();
    let mut queue = std::collections::VecDeque::from([start.to_path_buf()]);
    let mut seen = 0usize;
    while let Some(dir) = queue.pop_front() {
        watch_for_repositories(seeds, &dir, root);
        let mut dir_id = None;
        for (r, last, literal_parent) in &plans {
            let Some(name) = last else { continue };
            if (dir == root || *literal_parent) && r.matches(&dir.join(name)) {
                if let Some(id) = *dir_id.get_or_insert_with(|| object(&dir)) {
                    seeds.name(id, OsStr::new(name), r.access);
                }
            }
        }
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            seen += 1;
            if seen > SCAN_LIMIT {
                return;
            }
            let p = e.path();
            let Ok(meta) = std::fs::symlink_metadata(&p) else { continue };
            if meta.file_type().is_symlink() && is_hidden_name(&e.file_name()) {
                mark_target_hidden(seeds, &p);
            }
            seed_git_entry(seeds, &dir, &e.file_name(), &meta, CHANGE, root, home);
            for (r, _, _) in &plans {
                if r.matches(&p) {
                    seeds.object(ObjectId::of_metadata(&meta), r.access);
                    pin_ancestors(seeds, &p, std::slice::from_ref(&root.to_path_buf()));
                }
            }
            if meta.is_dir() && !skip.contains(&p) {
                queue.push_back(p);
            }
        }
    }
}

/// Watches `dir`, a folder a scan of `root` walked, for repositories made in it later
/// ([`Watch::Tree`]); not a folder inside a git directory (its `config` is watched by name).
fn watch_for_repositories(seeds: &mut Seeds, dir: &Path, root: &Path) {
    if !dir.ancestors().skip(1).any(|a| a.file_name() == Some(OsStr::new(".git")) && a.starts_with(root)) {
        seeds.read_from.push(Watch::Tree(dir.to_path_buf()));
    }
}

/// What a scan learns of git from one entry `entry` of the directory `dir`: the `config`
/// of a `.git` folder makes it a repository's git directory; a `HEAD` file beside a
/// `config` file makes `dir` one whatever its name (a bare `proj.git`); a `.git` file
/// (`gitdir: PATH`, a linked worktree or a submodule) names one, and the common directory
/// it shares (`commondir`); a `.git` link names the directory it reaches. Each is
/// protected with `access` ([`seed_git_dir`]).
fn seed_git_entry(seeds: &mut Seeds, dir: &Path, entry: &OsStr, meta: &std::fs::Metadata, access: u32, root: &Path, home: Option<&Path>) {
    if !is_git_marker(entry) {
        return;
    }
    // A link counts by what it names: a `.git` link to a git directory kept elsewhere (its
    // files' names there are not `.git`'s, which the kernel's `**/.git/...` patterns
    // match), a linked `HEAD` or `config`.
    let (is_file, is_dir) = if meta.is_symlink() {
        std::fs::metadata(dir.join(entry)).map_or((false, false), |m| (m.is_file(), m.is_dir()))
    } else {
        (meta.is_file(), false)
    };
    if entry == ".git" && is_dir {
        if let Ok(real) = std::fs::canonicalize(dir.join(entry)) {
            if !holds_root_or_home(&real, root, home) {
                seed_git_dir(seeds, &real, dir, access, root, home);
            }
        }
        return;
    }
    if !is_file {
        return;
    }
    let dot_git = dir.file_name() == Some(OsStr::new(".git"));
    if entry == "config" && dot_git {
        seed_git_dir(seeds, dir, dir.parent().unwrap_or(dir), access, root, home);
    } else if entry == "HEAD" && !dot_git && dir.join("config").is_file() {
        seed_git_dir(seeds, dir, dir, access, root, home);
    } else if entry == ".git" && meta.len() <= 4096 {
        // Watched by name, as a git directory's `config` is: git rewrites a `.git` file in
        // place (`git worktree repair`, `absorbgitdirs`), which changes no name in the
        // tree's folder, and so may the `commondir` it leads to.
        seeds.read_from.push(Watch::File(dir.join(".git")));
        let Some(text) = read_text(&dir.join(".git")) else { return };
        let Some(named) = text.lines().find_map(|l| l.strip_prefix("gitdir:")).and_then(|g| path_of(g.trim(), None, Some(dir))) else { return };
        seed_git_dir(seeds, &named, dir, access, root, home);
        seeds.read_from.push(Watch::File(named.join("commondir")));
        if let Some(common) = read_text(&named.join("commondir")).and_then(|c| path_of(c.trim(), None, Some(&named))) {
            seed_git_dir(seeds, &common, dir, access, root, home);
        }
    }
}

/// Whether the entry named `name` may tell a scan of a git directory: `HEAD`, `config`,
/// `.git` ([`seed_git_entry`]).
fn is_git_marker(name: &OsStr) -> bool {
    name == "HEAD" || name == "config" || name == ".git"
}

/// Whether `p` is `root`, the home, or a folder above either: protecting it against change
/// would make them never-writable.
fn holds_root_or_home(p: &Path, root: &Path, home: Option<&Path>) -> bool {
    root.starts_with(p) || home.is_some_and(|h| h.starts_with(p))
}

/// Protects with `access` a git directory `git` of the worktree `worktree`: its `config`
/// (and `config.worktree`), what the configuration includes, its `hooks` folder, and the
/// places each of those files names as code ([`code_places`]: relative ones from the
/// worktree, `~/` from `home`); the folders above each are pinned up to `root`, so none can
/// be moved away and its name filled.
fn seed_git_dir(seeds: &mut Seeds, git: &Path, worktree: &Path, access: u32, root: &Path, home: Option<&Path>) {
    // A git directory that names its worktree (`core.worktree`, as `git init
    // --separate-git-dir` and a bare dotfiles repository set) takes its relative places
    // from there, as git does.
    let named_worktree = core_worktree(git);
    let worktree = named_worktree.as_deref().unwrap_or(worktree);
    let anchor = [root.to_path_buf()];
    let protect = |seeds: &mut Seeds, p: &Path| {
        seed_literal(seeds, p, access);
        pin_ancestors(seeds, p, &anchor);
    };
    // What a link names is what git runs or reads: the target of a `hooks` link, of each
    // hook that is a link, and of a linked configuration; not the home, a root or a folder
    // above them, which would make them never-writable.
    let protect_target = |seeds: &mut Seeds, p: &Path| {
        if let Ok(real) = std::fs::canonicalize(p) {
            if real != p && !holds_root_or_home(&real, root, home) {
                protect(seeds, &real);
            }
        }
    };
    let hooks = git.join("hooks");
    protect(seeds, &hooks);
    protect_target(seeds, &hooks);
    if let Ok(entries) = std::fs::read_dir(&hooks) {
        for e in entries.flatten().take(CONFIG_DIR_FILES) {
            if e.file_type().is_ok_and(|t| t.is_symlink()) {
                protect_target(seeds, &e.path());
            }
        }
    }
    for name in ["config", "config.worktree"] {
        let config = git.join(name);
        // Watched by name: `git config --worktree` may make it.
        seeds.read_from.push(Watch::File(config.clone()));
        if !config.is_file() {
            continue;
        }
        let mut files = vec![config.clone()];
        files.extend(loaded_files(&config, home));
        seeds.read_from.extend(files.iter().skip(1).cloned().map(Watch::File));
        for f in files {
            protect(seeds, &f);
            protect_target(seeds, &f);
            for place in code_places(&f, home, Some(worktree), &ShellVariables::default()) {
                if !holds_root_or_home(place.path(), root, home) {
                    protect(seeds, place.path());
                }
            }
        }
    }
}

/// The worktree the configuration of the git directory `git` names (`core.worktree` in
/// its `config` or `config.worktree`, the last one set): a relative one is taken from the
/// git directory, as git takes it.
fn core_worktree(git: &Path) -> Option<PathBuf> {
    let mut found = None;
    for name in ["config", "config.worktree"] {
        let Some(text) = read_text(&git.join(name)) else { continue };
        let mut section = String::new();
        for line in text.lines() {
            let mut t = line.trim();
            if let Some((name, rest)) = git_section(t) {
                section = name;
                t = rest.trim();
            }
            if section != "core" {
                continue;
            }
            let Some((key, value)) = t.split_once('=') else { continue };
            if key.trim().eq_ignore_ascii_case("worktree") {
                let value = value.trim().trim_matches('"').trim();
                if let Some(p) = path_of(value, None, Some(git)) {
                    found = Some(p);
                }
            }
        }
    }
    found
}

/// The never rules with each one under a default XDG base directory (`~/.config/git/**`)
/// added again under where `moved` puts that directory (`XDG_CONFIG_HOME=~/dots/config`:
/// `~/dots/config/git/**`), with the same access.
/// The same for every variable of [`MOVABLE`] (`GNUPGHOME=~/dots/gnupg`: `~/dots/gnupg/**`;
/// `AWS_SHARED_CREDENTIALS_FILE=~/w/creds`, which `~/.aws/**` held: `~/w/creds`), each
/// [`moved_pattern`]; only to a place that may hold them ([`is_movable_to`]:
/// `HISTFILE=/dev/null` moves nothing).
fn moved_rules(rules: &[NeverRule], moved: &[(&'static str, PathBuf)], owner: &Account) -> Vec<NeverRule> {
    let mut out = rules.to_vec();
    for (var, to) in moved {
        let Some(m) = MOVABLE.iter().find(|m| m.var == *var) else { continue };
        if !is_movable_to(to, owner) {
            continue;
        }
        let from = format!("~/{}", m.default);
        for r in rules {
            if let Some(pattern) = moved_pattern(&r.pattern, &from, m, to) {
                if !out.iter().any(|o| o.pattern == pattern && o.access == r.access) {
                    out.push(NeverRule { pattern, access: r.access.clone() });
                }
            }
        }
    }
    out
}

/// Whether a tool's variable may move never places to `to`: not the home, the root or a
/// folder above them, nor the system's own files (`/dev/null`, `/proc/...`): a file or a
/// folder, or a name not made yet.
fn is_movable_to(to: &Path, owner: &Account) -> bool {
    !owner.home.starts_with(to)
        && !["/dev", "/proc", "/sys"].iter().any(|s| to.starts_with(s))
        && std::fs::metadata(to).map_or(true, |m| m.is_file() || m.is_dir())
}

/// The containment of one owner's sessions, with paths expanded.
#[derive(Debug, Clone)]
pub struct Containment {
    /// Places gated like roots (those that exist).
    pub protect: Vec<PathBuf>,
    /// Open paths with the access bits the kernel gives every session on the user's objects
    /// there (those that exist; a read-write one is read-only there, its writes go to the
    /// session's layer).
    pub open: Vec<(PathBuf, u32)>,
    /// The read-only open paths (those that exist), as configured.
    pub read_only: Vec<PathBuf>,
    /// The read-write open paths (existing directories, symlinks resolved) that each session
    /// writes through a layer of its own.
    pub layered: Vec<super::layers::Layered>,
    /// Where each session's layers are made (beside the scratch directories).
    pub layer_parent: PathBuf,
    /// The never-grantable rules.
    pub never: NeverList,
    /// Where scratch directories are made (`None`: no scratch directory).
    pub scratch_parent: Option<PathBuf>,
    /// Whether sessions may create user namespaces.
    pub allow_userns: bool,
    /// The namespaces of its own each session's worker is started in.
    pub namespaces: super::worker::Namespaces,
}

impl Containment {
    /// The containment for `owner`'s sessions; `env` is what the environment of the user's
    /// process that starts the session tells: the places its variables name as code, and
    /// the XDG base directories moved from their defaults, where the never list's places
    /// under the defaults are never-grantable too.
    /// `roots` are the roots of the owner's sessions: what the configuration names there,
    /// inside or above them is not made the user's tools' ([`NeverList::with_code_places`]).
    pub fn for_owner(cfg: &ContainmentConfig, owner: &Account, env: &UserEnvironment, roots: &[PathBuf]) -> Result<Self, ContainError> {
        let mut protect = Vec::new();
        for p in &cfg.protect {
            let p = absolute(p, owner)?;
            // "/" as a home (an account without one) would gate the whole system.
            if p.components().any(|c| c != Component::RootDir) && p.is_dir() && !protect.contains(&p) {
                protect.push(p);
            }
        }
        let never = NeverList::new(&moved_rules(&cfg.never, &env.moved, owner), owner)?.with_code_places(owner, env, roots)?;
        let mut open = Vec::new();
        let mut layered = Vec::new();
        let mut read_only = Vec::new();
        for o in &cfg.open_paths {
            let p = absolute(&o.path, owner)?;
            if !p.exists() {
                continue;
            }
            // The place as it is now (a symlink, or under one, made since the configuration
            // was checked): one in a never place is not opened, nor layered (a layer over
            // `~/.ssh` would show the keys under another name).
            let real = std::fs::canonicalize(&p).ok();
            let reached = real.as_deref().unwrap_or(&p);
            if let Some(rule) = o.mode.access().iter().find_map(|&a| never.forbids(reached, a)) {
                tracing::warn!(open_path = %o.path, reaches = %reached.display(), never = %rule, "an open path that reaches a never-grantable place is not opened");
                continue;
            }
            if o.mode == OpenMode::ReadOnly {
                read_only.push(p.clone());
            }
            let on_the_users = if o.mode == OpenMode::Shared { o.mode } else { OpenMode::ReadOnly };
            open.push((p.clone(), bits(on_the_users.access())));
            if o.mode == OpenMode::ReadWrite {
                // A file cannot be layered: it stays read-only to sessions.
                if let Some(real) = real.filter(|r| r.is_dir()) {
                    layered.push(super::layers::Layered::new(real, &o.show, o.retain)?);
                }
            }
        }
        Ok(Containment {
            protect,
            open,
            read_only,
            layered,
            layer_parent: cfg.scratch_parent.clone(),
            never,
            scratch_parent: cfg.scratch.then(|| cfg.scratch_parent.clone()),
            allow_userns: cfg.allow_userns,
            namespaces: super::worker::Namespaces { pid: cfg.pid_namespace, ipc: cfg.ipc_namespace },
        })
    }

    /// Why `access` on `path` can never be granted by a grant the daemon places: a new
    /// hidden entry directly in a protected root (`~/.newrc`). The grant for a `create` goes on
    /// the folder, and the kernel's grant on a root does not reach the hidden entries in it
    /// (the configuration and state of the user's tools), so no vote or approval could let
    /// it through; `None` otherwise.
    pub fn hidden_in_root(&self, path: &Path, access: Access) -> Option<String> {
        let (parent, name) = (path.parent()?, path.file_name()?);
        (access == Access::Create && name.as_encoded_bytes().first() == Some(&b'.') && self.protect.iter().any(|r| r == parent))
            .then(|| format!("a new hidden entry of the protected folder {}", parent.display()))
    }

    /// Opens the open paths in the kernel (global: every session may use them), and the
    /// `pincer` executable itself for reading, wherever it is installed: the worker runs
    /// `pincer request` to ask.
    pub fn apply_open(&self, enforcer: &mut Enforcer) -> Result<(), ContainError> {
        for (p, b) in &self.open {
            if let Some(id) = object(p) {
                enforcer.add_open(id, *b)?;
            }
        }
        if let Some(id) = std::env::current_exe().ok().and_then(|exe| object(&exe)) {
            enforcer.add_open(id, access_bit(Access::Read))?;
        }
        Ok(())
    }

    /// Where the scratch directory of `session` goes, if sessions get one.
    pub fn scratch_dir(&self, session: &str) -> Option<PathBuf> {
        self.scratch_parent.as_ref().map(|p| p.join(format!("pincer-{session}")))
    }

    /// Makes the session's scratch directory (0700, owned by the owner) and grants it to
    /// the session in full as its own place (no never pattern applies inside); returns its
    /// path (`None` when sessions get none). With `size`, the directory is a tmpfs of that
    /// many bytes (`[limits] scratch_max`): what the session writes there fills its own
    /// filesystem, never the space of `scratch_parent` that the user's processes write to.
    pub fn make_scratch(&self, enforcer: &mut Enforcer, session: &str, cgroup_id: u64, owner: &Account, size: Option<u64>) -> Result<Option<PathBuf>, ContainError> {
        let Some(dir) = self.scratch_dir(session) else { return Ok(None) };
        let err = |source| ContainError::Scratch { path: dir.clone(), source };
        std::fs::create_dir(&dir).map_err(err)?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).map_err(err)?;
        if let Some(bytes) = size {
            let data = format!("size={bytes},mode=0700,uid={},gid={}", owner.uid, owner.gid);
            super::layers::mount(Some(Path::new("tmpfs")), &dir, Some("tmpfs"), libc::MS_NOSUID | libc::MS_NODEV, Some(&data)).map_err(err)?;
        }
        std::os::unix::fs::chown(&dir, Some(owner.uid), Some(owner.gid)).map_err(err)?;
        let id = ObjectId::of_metadata(&std::fs::symlink_metadata(&dir).map_err(err)?);
        enforcer.grant_own_place(cgroup_id, id)?;
        Ok(Some(dir))
    }
}

/// Removes a session's scratch directory (symlinks inside are removed, not followed), its
/// tmpfs unmounted first where it has one.
pub fn remove_scratch(dir: &Path) {
    // Not through a symlink: a plain scratch is the owner's to replace with one.
    super::layers::detach(dir);
    if let Err(e) = std::fs::remove_dir_all(dir) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot remove the session's scratch directory");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner() -> Account {
        Account { name: "u".into(), uid: 1000, gid: 1000, home: PathBuf::from("/home/u"), shell: PathBuf::from("/bin/sh") }
    }

    #[test]
    fn a_protected_file_protects_what_it_loads() {
        let d = tempfile::tempdir().unwrap();
        let h = d.path();
        std::fs::create_dir_all(h.join("work/git")).unwrap();
        std::fs::write(h.join(".gitconfig"), "[user]\n\tname = U\n[include]\n\tpath = ~/work/git/id.gitconfig\n[includeIf \"gitdir:~/oss/\"]\n\tpath = oss.gitconfig\n").unwrap();
        std::fs::write(h.join("work/git/id.gitconfig"), "[include]\n\tpath = more.gitconfig\n").unwrap();
        std::fs::write(h.join(".bashrc"), "export X=1\nsource ~/dotfiles/aliases.sh\n. \"$HOME/.bash_extra\"\nsource relative.sh\n").unwrap();
        let git = loaded_files(&h.join(".gitconfig"), Some(h));
        assert_eq!(git, [h.join("work/git/id.gitconfig"), h.join("oss.gitconfig"), h.join("work/git/more.gitconfig")]);
        let sh = loaded_files(&h.join(".bashrc"), Some(h));
        assert_eq!(sh, [h.join("dotfiles/aliases.sh"), h.join(".bash_extra"), h.join("relative.sh")], "a relative source from the home, where the user's shells start");
        // A file that includes itself, binary content and a missing file load nothing more.
        std::fs::write(h.join("loop"), "[include]\npath = loop\n").unwrap();
        assert!(loaded_files(&h.join("loop"), Some(h)).is_empty());
        std::fs::write(h.join("bin"), [0u8, 159, 146, 150]).unwrap();
        assert!(loaded_files(&h.join("bin"), Some(h)).is_empty());
        assert!(loaded_files(&h.join("missing"), Some(h)).is_empty());
    }

    /// What the protected configuration names as code is protected against change with it:
    /// a folder `~/.bashrc` (or a file it sources) puts on PATH, the hooks folder and a
    /// program of `~/.gitconfig`; not the home itself, nor a folder of the system's.
    #[test]
    fn the_places_the_users_configuration_runs_programs_from_are_never_changed() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path().canonicalize().unwrap();
        let uid = std::fs::metadata(&h).unwrap().uid();
        let account = Account { home: h.clone(), uid, ..owner() };
        for d in ["tools/bin", "more/bin", "git/hooks", "scripts", "dotfiles", "theirs/bin", "vtools/bin", "started/bin"] {
            std::fs::create_dir_all(h.join(d)).unwrap();
        }
        // A folder of another user's on PATH (as root, the test can make one).
        let theirs = std::os::unix::fs::lchown(h.join("theirs/bin"), Some(uid + 4242), None).is_ok();
        std::os::unix::fs::symlink(h.join("dotfiles"), h.join("linked")).unwrap();
        std::fs::write(h.join(".bashrc"), "export PATH=\"$HOME/tools/bin:$HOME:$HOME/theirs/bin:$PATH\"\nsource ~/dotfiles/path.sh\nPATH=$PATH:~/linked\n").unwrap();
        std::fs::write(h.join("dotfiles/path.sh"), "PATH=~/more/bin:$PATH\n").unwrap();
        std::fs::write(h.join(".gitconfig"), "[core]\n\thooksPath = ~/git/hooks\n\tfsmonitor = ~/scripts/fsmon.sh\n").unwrap();
        std::fs::create_dir_all(h.join(".config/git")).unwrap();
        std::fs::write(h.join(".config/git/config"), "[core]\n\thooksPath = .githooks\n").unwrap();
        // A variable one file assigns and another puts on PATH.
        std::fs::write(h.join(".profile"), "VTOOLS=\"$HOME/vtools\"\n").unwrap();
        std::fs::write(h.join(".zshrc"), "export PATH=\"$VTOOLS/bin:$PATH\"\n").unwrap();
        let n = NeverList::new(&ContainmentConfig::default().never, &account).unwrap();
        assert!(n.forbids(&h.join("tools/bin/git"), Access::Create).is_none(), "the rules alone do not read the home");
        // The PATH of the process that started the session, however its shell built it.
        let running = [CodePlace::Folder(h.join("started/bin")), CodePlace::Folder(h.clone()), CodePlace::Folder("/usr/bin".into())];
        let n = n.with_code_places(&account, &UserEnvironment { places: running.to_vec(), ..Default::default() }, &[]).unwrap();
        for (place, what) in [
            ("tools/bin/git", "a folder on PATH"),
            ("more/bin/ls", "a folder a sourced file puts on PATH"),
            ("vtools/bin/ls", "a folder on PATH through a variable another file assigns"),
            ("started/bin/ls", "a folder on the PATH of the process that started the session"),
            ("git/hooks/pre-commit", "git's hooks folder"),
            ("scripts/fsmon.sh", "a program git runs"),
        ] {
            assert!(n.forbids(&h.join(place), Access::Write).is_some() && n.forbids(&h.join(place), Access::Create).is_some(), "{what}: {place}");
            assert!(n.forbids(&h.join(place), Access::Read).is_none(), "{what} stays readable: {place}");
        }
        assert!(n.forbids(&h.join("scripts/other.sh"), Access::Create).is_none(), "beside the program");
        assert!(n.forbids(&h.join("any/proj/.githooks/pre-commit"), Access::Create).is_some(), "a relative hooksPath of the global configuration: that folder of every repository");
        assert!(n.forbids(&h.join("linked/x"), Access::Create).is_some() && n.forbids(&h.join("dotfiles/x"), Access::Create).is_some(), "a symlinked folder on PATH, by the link and by its target");
        assert!(n.forbids(&h.join("notes.txt"), Access::Create).is_none(), "the home on PATH is not protected as a whole");
        if theirs {
            assert!(n.forbids(&h.join("theirs/bin/x"), Access::Create).is_none(), "another user's folder is not this user's to lose");
        }
        // The kernel gets the folders as objects, their contents covered beneath them.
        let maps = crate::kernel::MemoryMaps::default();
        n.seed(&mut maps.enforcer(), &[], &[]).unwrap();
        assert_eq!(maps.never_bits(object(&h.join("tools/bin")).unwrap()), Some(CHANGE));
        assert_eq!(maps.never_bits(object(&h.join("tools")).unwrap()), Some(pincer_common::NEVER_PINNED), "the folder above is pinned: moving it away would leave the name on PATH free");
        // What the places were read from is watched for change, a file that does not exist
        // yet by its name, a sourced file by the link and by its target.
        for (watch, what) in [
            (Watch::File(h.join(".bashrc")), "a startup file"),
            (Watch::File(h.join("dotfiles/path.sh")), "a file it sources"),
            (Watch::File(h.join(".bash_profile")), "a startup file the user may make"),
            (Watch::Folder(h.join(".config/git")), "git's configuration folder"),
            (Watch::File(h.join(".config/git/config")), "a file of it"),
        ] {
            assert!(n.read_from().contains(&watch), "{what}: {watch:?} not in {:?}", n.read_from());
        }
    }

    /// A repository's own `.git/config` found in a root: the visible folder it names as
    /// `core.hooksPath` is protected in the kernel with it.
    #[test]
    fn a_repositorys_hooks_folder_in_a_root_is_never_changed() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(ws.join("proj/.git")).unwrap();
        std::fs::create_dir_all(ws.join("proj/githooks")).unwrap();
        std::fs::write(ws.join("proj/.git/config"), "[core]\n\thooksPath = githooks\n").unwrap();
        let list = NeverList::new(&ContainmentConfig::default().never, &owner()).unwrap();
        let maps = crate::kernel::MemoryMaps::default();
        list.seed(&mut maps.enforcer(), std::slice::from_ref(&ws), &[]).unwrap();
        let bits = maps.never_bits(object(&ws.join("proj/githooks")).unwrap()).unwrap_or(0);
        assert_eq!(bits & CHANGE, CHANGE, "githooks/: {bits:#x}");
    }

    /// A git directory that names its worktree (`core.worktree`) takes a relative
    /// `core.hooksPath` from that worktree, as git does, not from the git directory.
    #[test]
    fn a_git_directorys_relative_places_count_from_its_core_worktree() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(ws.join("tree/githooks")).unwrap();
        std::fs::create_dir_all(ws.join("dots.git")).unwrap();
        std::fs::write(ws.join("dots.git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(ws.join("dots.git/config"), format!("[core]\n\tbare = false\n\tworktree = {}\n\thooksPath = githooks\n", ws.join("tree").display())).unwrap();
        // A relative `core.worktree` counts from the git directory.
        std::fs::create_dir_all(ws.join("rel/git")).unwrap();
        std::fs::create_dir_all(ws.join("rel/wt/hooks2")).unwrap();
        std::fs::write(ws.join("rel/git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(ws.join("rel/git/config"), "[core]\n\thooksPath = hooks2\n[core]\n\tworktree = ../wt\n").unwrap();
        let list = NeverList::new(&ContainmentConfig::default().never, &owner()).unwrap();
        let maps = crate::kernel::MemoryMaps::default();
        list.seed(&mut maps.enforcer(), std::slice::from_ref(&ws), &[]).unwrap();
        for p in [ws.join("tree/githooks"), ws.join("rel/wt/hooks2")] {
            let bits = maps.never_bits(object(&p).unwrap()).unwrap_or(0);
            assert_eq!(bits & CHANGE, CHANGE, "{}: {bits:#x}", p.display());
        }
    }

    /// A repository the watch heard of is read by its path, though the scan of its root
    /// stops before it (the session's own files spent the bound first).
    #[test]
    fn a_repository_heard_of_is_read_past_the_scans_bound() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        for i in 0..SCAN_LIMIT + 500 {
            std::fs::write(ws.join(format!("gen-{i:05}.o")), "").unwrap();
        }
        std::fs::create_dir_all(ws.join("zz/vendor/lib/.git")).unwrap();
        std::fs::create_dir_all(ws.join("zz/vendor/lib/team-hooks")).unwrap();
        std::fs::write(ws.join("zz/vendor/lib/.git/config"), "[core]\n\thooksPath = team-hooks\n").unwrap();
        let list = NeverList::new(&ContainmentConfig::default().never, &owner()).unwrap();
        let hooks = ws.join("zz/vendor/lib/team-hooks");
        let maps = crate::kernel::MemoryMaps::default();
        list.plan(std::slice::from_ref(&ws), &[]).write(&mut maps.enforcer()).unwrap();
        assert_eq!(maps.never_bits(object(&hooks).unwrap()).unwrap_or(0) & CHANGE, 0, "control: the root's scan stops before it");
        let maps = crate::kernel::MemoryMaps::default();
        list.plan_heard(std::slice::from_ref(&ws), &[], &[ws.join("zz/vendor/lib/.git")]).write(&mut maps.enforcer()).unwrap();
        assert_eq!(maps.never_bits(object(&hooks).unwrap()).unwrap_or(0) & CHANGE, CHANGE, "read by its path");
        let maps = crate::kernel::MemoryMaps::default();
        list.plan_heard(std::slice::from_ref(&ws), &[], &[ws.join("zz")]).write(&mut maps.enforcer()).unwrap();
        assert_eq!(maps.never_bits(object(&hooks).unwrap()).unwrap_or(0) & CHANGE, CHANGE, "a folder moved in, scanned");
    }

    /// A worktree's `.git` file, and the `commondir` of the git directory it names, are
    /// watched by name: git rewrites them in place, which changes no name in the folder.
    #[test]
    fn a_worktrees_git_file_and_its_commondir_are_watched_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(ws.join("gitdirs/a")).unwrap();
        std::fs::write(ws.join("gitdirs/a/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(ws.join("gitdirs/a/config"), "[core]\n").unwrap();
        std::fs::create_dir_all(ws.join("wt")).unwrap();
        std::fs::write(ws.join("wt/.git"), format!("gitdir: {}\n", ws.join("gitdirs/a").display())).unwrap();
        let list = NeverList::new(&ContainmentConfig::default().never, &owner()).unwrap();
        let maps = crate::kernel::MemoryMaps::default();
        let seeded = list.seed(&mut maps.enforcer(), std::slice::from_ref(&ws), &[]).unwrap();
        for f in ["wt/.git", "gitdirs/a/commondir"] {
            assert!(seeded.read_from.contains(&Watch::File(ws.join(f))), "{f} not in {:?}", seeded.read_from);
        }
    }

    /// A git directory is found by what it holds, in the roots and anywhere in the home:
    /// a bare repository's `config` and `hooks`, the one a worktree's `.git` file names,
    /// a repository's include and the places it names (`~/` from the home, `..` above the
    /// worktree), a repository outside the roots, and the git directory a worktree's `.git`
    /// link reaches; each with the folders above pinned.
    #[test]
    fn git_directories_are_found_by_what_they_hold() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path().canonicalize().unwrap();
        let account = Account { home: h.clone(), ..owner() };
        let ws = h.join("ws");
        let w = |p: &str, text: &str| {
            let p = h.join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        w("ws/proj.git/HEAD", "ref: refs/heads/main\n");
        w("ws/proj.git/config", "[core]\n\tbare = true\n");
        w("ws/proj.git/hooks/pre-commit", "#!/bin/sh\n");
        w("ws/proj.git/worktrees/main/commondir", "../..\n");
        w("ws/main/.git", &format!("gitdir: {}/proj.git/worktrees/main\n", ws.display()));
        w("ws/app/.git/config", "[include]\n\tpath = ../project.gitconfig\n[core]\n\thooksPath = ../shared-hooks\n");
        w("ws/app/project.gitconfig", "[core]\n\tfsmonitor = ~/team/fsmon.sh\n");
        w("ws/shared-hooks/pre-push", "#!/bin/sh\n");
        w("team/fsmon.sh", "#!/bin/sh\n");
        w("other/.git/config", "[core]\n\thooksPath = githooks\n");
        w("other/githooks/pre-commit", "#!/bin/sh\n");
        // A worktree whose `.git` is a link to a git directory kept elsewhere.
        w("gitdirs/linked/config", "[core]\n\tbare = false\n");
        std::fs::create_dir_all(ws.join("linked")).unwrap();
        std::os::unix::fs::symlink(h.join("gitdirs/linked"), ws.join("linked/.git")).unwrap();
        let list = NeverList::new(&ContainmentConfig::default().never, &account).unwrap();
        let maps = crate::kernel::MemoryMaps::default();
        list.seed(&mut maps.enforcer(), std::slice::from_ref(&ws), &[]).unwrap();
        for place in ["ws/proj.git/config", "ws/proj.git/hooks", "ws/app/project.gitconfig", "ws/shared-hooks", "team/fsmon.sh", "other/githooks", "gitdirs/linked/config"] {
            let bits = maps.never_bits(object(&h.join(place)).unwrap()).unwrap_or(0);
            assert_eq!(bits & CHANGE, CHANGE, "{place}: {bits:#x}");
        }
        assert_eq!(maps.never_bits(object(&ws.join("proj.git")).unwrap()), Some(pincer_common::NEVER_PINNED), "the bare repository cannot be moved away");
        assert_eq!(maps.never_bits(object(&ws.join("main")).unwrap()), None, "the worktree itself stays the session's to change");
        // Each git directory's configuration is watched (`config.worktree` by its name),
        // with what it includes.
        let seeded = list.seed(&mut maps.enforcer(), std::slice::from_ref(&ws), &[]).unwrap();
        for f in ["ws/proj.git/config", "ws/app/.git/config", "ws/app/.git/config.worktree", "ws/app/project.gitconfig", "gitdirs/linked/config"] {
            assert!(seeded.read_from.contains(&Watch::File(h.join(f))), "{f} not in {:?}", seeded.read_from);
        }
        // The root's folders are watched for repositories made later; a git directory's
        // own folders are not.
        for d in ["ws", "ws/app", "ws/app/.git", "ws/proj.git", "ws/shared-hooks"] {
            assert!(seeded.read_from.contains(&Watch::Tree(h.join(d))), "{d} not watched as a tree");
        }
        for d in ["ws/app/.git/x", "ws/proj.git/hooks"] {
            std::fs::create_dir_all(h.join(d)).unwrap();
        }
        let seeded = list.seed(&mut maps.enforcer(), std::slice::from_ref(&ws), &[]).unwrap();
        assert!(!seeded.read_from.contains(&Watch::Tree(h.join("ws/app/.git/x"))), "a folder inside .git");
    }

    /// A session may make a repository of its own in a root, and the next scan reads it:
    /// FIFOs at every name the scan reads (a worktree's `.git` file and the `commondir`
    /// beside the git directory it names, a `.git/config`, a bare repository's `config`)
    /// neither hold the scan nor name anything, and the scan still finds the user's
    /// repository beside them.
    #[test]
    fn fifos_where_a_scan_reads_git_files_do_not_hold_it() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path().canonicalize().unwrap();
        let account = Account { home: h.clone(), ..owner() };
        let ws = h.join("ws");
        let fifo = |p: &str| {
            let p = h.join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: mkfifo on a NUL-terminated path.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo {}", p.display());
        };
        std::fs::create_dir_all(ws.join("gd")).unwrap();
        std::fs::write(ws.join("wt/.git").parent().map(|d| { std::fs::create_dir_all(d).unwrap(); d.join(".git") }).unwrap(), format!("gitdir: {}/gd\n", ws.display())).unwrap();
        fifo("ws/gd/commondir");
        fifo("ws/fifo-wt/.git");
        fifo("ws/app/.git/config");
        std::fs::write(ws.join("bare-ish").join("HEAD").parent().map(|d| { std::fs::create_dir_all(d).unwrap(); d.join("HEAD") }).unwrap(), "ref: refs/heads/main\n").unwrap();
        fifo("ws/bare-ish/config");
        std::fs::create_dir_all(ws.join("users/.git")).unwrap();
        std::fs::write(ws.join("users/.git/config"), "[core]\n\thooksPath = hooks\n").unwrap();
        std::fs::create_dir_all(ws.join("users/hooks")).unwrap();
        let list = NeverList::new(&ContainmentConfig::default().never, &account).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let roots = vec![ws.clone()];
        std::thread::spawn(move || {
            let plan = list.plan(&roots, &[]);
            let maps = crate::kernel::MemoryMaps::default();
            plan.write(&mut maps.enforcer()).unwrap();
            let _ = tx.send(maps);
        });
        let maps = rx.recv_timeout(std::time::Duration::from_secs(20)).expect("the scan is held by a FIFO");
        let bits = maps.never_bits(object(&ws.join("users/hooks")).unwrap()).unwrap_or(0);
        assert_eq!(bits & CHANGE, CHANGE, "the user's repository beside the FIFOs: {bits:#x}");
    }

    /// With `XDG_CONFIG_HOME` moved in the starter's environment, the never list's places
    /// under `~/.config` are never-grantable where it points too, with the same access.
    #[test]
    fn the_never_places_move_with_the_users_xdg_config_home() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path().canonicalize().unwrap();
        let account = Account { home: h.clone(), ..owner() };
        let env = UserEnvironment { moved: vec![("XDG_CONFIG_HOME", h.join("dots/config"))], ..Default::default() };
        let c = Containment::for_owner(&ContainmentConfig::default(), &account, &env, &[]).unwrap();
        assert!(c.never.forbids(&h.join("dots/config/git/config"), Access::Write).is_some(), "git's configuration, moved");
        assert!(c.never.forbids(&h.join("dots/config/git/config"), Access::Read).is_none(), "still readable");
        assert!(c.never.forbids(&h.join("dots/config/gcloud/credentials.db"), Access::Read).is_some(), "a secret, moved, with its access");
        assert!(c.never.forbids(&h.join("dots/notes.md"), Access::Write).is_none(), "beside it");
        let plain = Containment::for_owner(&ContainmentConfig::default(), &account, &UserEnvironment::default(), &[]).unwrap();
        assert!(plain.never.forbids(&h.join("dots/config/git/config"), Access::Write).is_none(), "control: not moved");
    }

    /// A shell file sourced on a guarded line (`[ -f X ] && . X`) is loaded.
    #[test]
    fn a_file_sourced_on_a_guarded_line_is_loaded() {
        let d = tempfile::tempdir().unwrap();
        let h = d.path();
        std::fs::write(h.join(".bashrc"), "[ -f ~/work/env.sh ] && . ~/work/env.sh\nif [ -n \"$PS1\" ]; then source \"$HOME/work/ps1.sh\"; fi\ncd . && ls\n").unwrap();
        assert_eq!(loaded_files(&h.join(".bashrc"), Some(h)), [h.join("work/env.sh"), h.join("work/ps1.sh")]);
        // Through the file's variables and a loop over a glob: the glob's folder, whole.
        std::fs::write(h.join(".zshrc"), "DOTS=\"$HOME/dots\"\nsource \"$DOTS/env.sh\"\nfor f in ~/dots/shell/*.sh; do . \"$f\"; done\n").unwrap();
        assert_eq!(loaded_files(&h.join(".zshrc"), Some(h)), [h.join("dots/env.sh"), h.join("dots/shell")]);
    }

    /// A shell's `source`/`.` of a relative path at a command's start loads it from the
    /// home; a `.` that is an argument (`cd .`), or a word that is not a file's path, loads
    /// nothing.
    #[test]
    fn a_shell_file_sources_a_relative_path_from_the_home() {
        let d = tempfile::tempdir().unwrap();
        let h = d.path();
        std::fs::write(h.join(".bashrc"), "[ -f dots/aliases.sh ] && . dots/aliases.sh\nif true; then source ./dots/env.sh; fi\ncd . && ls\nsource code is here\n").unwrap();
        assert_eq!(loaded_files(&h.join(".bashrc"), Some(h)), [h.join("dots/aliases.sh"), h.join("dots/env.sh")]);
    }

    /// Includes are followed until none is new: the tenth file of a chain, and a cycle ends.
    #[test]
    fn includes_are_followed_until_none_is_new() {
        let d = tempfile::tempdir().unwrap();
        let h = d.path();
        std::fs::create_dir_all(h.join("inc")).unwrap();
        std::fs::write(h.join(".gitconfig"), "[include]\n\tpath = ~/inc/1.inc\n").unwrap();
        for i in 1..10 {
            std::fs::write(h.join(format!("inc/{i}.inc")), format!("[include]\n\tpath = {}.inc\n", i + 1)).unwrap();
        }
        std::fs::write(h.join("inc/10.inc"), "[include]\n\tpath = 1.inc\n").unwrap();
        let got = loaded_files(&h.join(".gitconfig"), Some(h));
        assert_eq!(got, (1..=10).map(|i| h.join(format!("inc/{i}.inc"))).collect::<Vec<_>>());
    }

    /// The loading forms of the other tools whose configuration the never list holds:
    /// tmux's `source-file`, vim's `so`/`source`, emacs's `load`/`load-file`, ssh's
    /// `Include` (relative to `~/.ssh`, a glob loading its folder).
    #[test]
    fn the_files_tmux_vim_emacs_and_ssh_configuration_loads_are_loaded() {
        let d = tempfile::tempdir().unwrap();
        let h = d.path();
        std::fs::create_dir_all(h.join(".ssh")).unwrap();
        let cases: [(&str, &str, Vec<PathBuf>); 4] = [
            (".tmux.conf", "set -g mouse on\nsource-file ~/dots/tmux/theme.conf\nsource-file -q ~/dots/tmux/local/*.conf\n", vec![h.join("dots/tmux/theme.conf"), h.join("dots/tmux/local")]),
            (".vimrc", "set nu\nso ~/dots/vim/plugins.vim\n:source $HOME/dots/vim/keys.vim\n", vec![h.join("dots/vim/plugins.vim"), h.join("dots/vim/keys.vim")]),
            (
                ".emacs",
                "(setq x 1)\n(load \"~/dots/emacs/local.el\")\n(load-file \"~/dots/emacs/keys.el\")\n(load \"~/dots/emacs/more\" nil t)\n(loader \"~/no\")\n",
                vec![h.join("dots/emacs/local.el"), h.join("dots/emacs/keys.el"), h.join("dots/emacs/more.el"), h.join("dots/emacs/more.elc"), h.join("dots/emacs/more")],
            ),
            (".ssh/config", "Host *\n  Include ~/dots/ssh/work.conf config.d/*\ninclude=/etc/ssh/extra.conf\n", vec![h.join("dots/ssh/work.conf"), h.join(".ssh/config.d"), PathBuf::from("/etc/ssh/extra.conf")]),
        ];
        for (file, text, want) in cases {
            std::fs::write(h.join(file), text).unwrap();
            assert_eq!(loaded_files(&h.join(file), Some(h)), want, "{file}");
        }
    }

    /// A file a never place loads is a never place of its own: its folders are pinned, and
    /// one that a protected folder's file loads (`~/.ssh/config`'s `Include`) is protected.
    #[test]
    fn a_loaded_file_is_protected_with_its_folders_pinned() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path().canonicalize().unwrap();
        let uid = std::fs::metadata(&h).unwrap().uid();
        let account = Account { home: h.clone(), uid, ..owner() };
        std::fs::create_dir_all(h.join("work/git")).unwrap();
        std::fs::write(h.join("work/git/id.gitconfig"), "[user]\n\temail = me@work\n").unwrap();
        std::fs::write(h.join(".gitconfig"), "[include]\n\tpath = ~/work/git/id.gitconfig\n").unwrap();
        std::fs::create_dir_all(h.join(".ssh")).unwrap();
        std::fs::create_dir_all(h.join("dots/ssh")).unwrap();
        std::fs::write(h.join("dots/ssh/work.conf"), "Host w\n").unwrap();
        std::fs::write(h.join(".ssh/config"), "Include ~/dots/ssh/work.conf\n").unwrap();
        let n = NeverList::new(&ContainmentConfig::default().never, &account).unwrap();
        let maps = crate::kernel::MemoryMaps::default();
        n.seed(&mut maps.enforcer(), &[], &[]).unwrap();
        for d in ["work/git", "work"] {
            assert_eq!(maps.never_bits(object(&h.join(d)).unwrap()), Some(pincer_common::NEVER_PINNED), "{d} of the included file is pinned");
        }
        let n = n.with_code_places(&account, &UserEnvironment::default(), &[]).unwrap();
        assert!(n.forbids(&h.join("dots/ssh/work.conf"), Access::Write).is_some(), "the file ~/.ssh/config includes");
        assert!(n.forbids(&h.join("work/git/id.gitconfig"), Access::Write).is_some(), "the file ~/.gitconfig includes");
        assert!(n.read_from().contains(&Watch::File(h.join("dots/ssh/work.conf"))), "and it is watched");
        let maps = crate::kernel::MemoryMaps::default();
        n.seed(&mut maps.enforcer(), &[], &[]).unwrap();
        assert!(maps.never_bits(object(&h.join("dots/ssh/work.conf")).unwrap()).is_some_and(|b| b & CHANGE == CHANGE));
        assert_eq!(maps.never_bits(object(&h.join("dots/ssh")).unwrap()), Some(pincer_common::NEVER_PINNED));
    }

    /// Every path of the user's the configuration names is the user's tools': the keys
    /// ssh's `IdentityFile` and `CertificateFile` and git's `user.signingKey` and
    /// `http.sslKey` name are secrets, never read; a certificate is never changed but read;
    /// a folder is a code place. The home, a session's root and a folder above it, a file
    /// the configuration loads, a commented line and a section header are not protected.
    #[test]
    fn every_path_the_users_configuration_names_is_the_users_tools() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path().canonicalize().unwrap();
        let uid = std::fs::metadata(&h).unwrap().uid();
        let account = Account { home: h.clone(), uid, ..owner() };
        for d in ["keys", "tools", "work/proj", "old", "sect", ".ssh"] {
            std::fs::create_dir_all(h.join(d)).unwrap();
        }
        for k in ["id_work", "id_work-cert.pub", "signing", "client.key", "old/id", "sect/x", "work/proj/notes"] {
            std::fs::write(h.join(k), "-----BEGIN OPENSSH PRIVATE KEY-----\n").unwrap();
        }
        std::fs::write(h.join("keys/ca.pem"), "-----BEGIN CERTIFICATE-----\n").unwrap();
        std::fs::write(h.join("keys/work.conf"), "Host w\n").unwrap();
        std::fs::write(h.join("keys/git.inc"), "[user]\n\temail = me@work\n").unwrap();
        std::fs::write(
            h.join(".ssh/config"),
            "Include ~/keys/work.conf\nHost *.corp\n    IdentityFile ~/id_work\n    CertificateFile ~/id_work-cert.pub\n# IdentityFile ~/old/id\n    ControlPath ~/tools/cm-%r@%h\n",
        )
        .unwrap();
        let gitconfig = format!(
            "[user]\n\tsigningKey = ~/signing\n[gpg]\n\tformat = ssh\n[http]\n\tsslKey = {}\n\tsslCAInfo = ~/keys/ca.pem\n[includeIf \"gitdir:~/sect/\"]\n\tpath = ~/keys/git.inc\n[safe]\n\tdirectory = {}\n\tdirectory = ~/work\n\tdirectory = ~/work/proj/notes\n\tdirectory = ~/\n",
            h.join("client.key").display(),
            h.display()
        );
        std::fs::write(h.join(".gitconfig"), gitconfig).unwrap();
        let n = NeverList::new(&ContainmentConfig::default().never, &account).unwrap();
        let n = n.with_code_places(&account, &UserEnvironment::default(), &[h.join("work/proj")]).unwrap();
        for k in ["id_work", "id_work-cert.pub", "signing", "client.key"] {
            assert!(n.forbids(&h.join(k), Access::Read).is_some(), "{k}, a key the configuration names, is never read");
            assert!(n.forbids(&h.join(k), Access::Write).is_some(), "{k} is never changed");
        }
        assert!(n.forbids(&h.join("keys/ca.pem"), Access::Read).is_none(), "a certificate is read");
        assert!(n.forbids(&h.join("keys/ca.pem"), Access::Write).is_some(), "and never changed");
        assert!(n.forbids(&h.join("tools/new"), Access::Create).is_some(), "a folder the configuration names is a code place");
        assert!(n.forbids(&h.join("keys/git.inc"), Access::Read).is_none(), "a file the configuration loads stays readable");
        for (p, what) in [("notes.txt", "the home"), ("work/x", "a folder above a root"), ("old/id", "a commented line"), ("sect/x", "a section header")] {
            assert!(n.forbids(&h.join(p), Access::Read).is_none() && n.forbids(&h.join(p), Access::Write).is_none(), "{what} is not protected: {p}");
        }
        // (git's own reading makes a file a value names a program, never changed.)
        assert!(n.forbids(&h.join("work/proj/notes"), Access::Read).is_none(), "a file in a root is no secret");
    }

    /// Every symlink of the user's on the way to a never place (`~/.gitconfig ->
    /// dots/current/gitconfig`, `dots/current -> v1`, `v1 -> store/v1`) is never changed, its
    /// folders pinned, and watched by its name; the place resolves through all of them.
    #[test]
    fn a_symlink_on_the_way_to_a_never_place_is_never_changed_and_watched() {
        use std::os::unix::fs::symlink;
        let home = tempfile::tempdir().unwrap();
        let h = home.path().canonicalize().unwrap();
        let uid = std::fs::metadata(&h).unwrap().uid();
        let account = Account { home: h.clone(), uid, ..owner() };
        std::fs::create_dir_all(h.join("dots/store/v1")).unwrap();
        std::fs::write(h.join("dots/store/v1/gitconfig"), "[user]\n\tname = u\n").unwrap();
        symlink("store/v1", h.join("dots/v1")).unwrap();
        symlink("v1", h.join("dots/current")).unwrap();
        symlink(h.join("dots/current/gitconfig"), h.join(".gitconfig")).unwrap();
        let n = NeverList::new(&ContainmentConfig::default().never, &account).unwrap();
        for link in ["dots/current", "dots/v1"] {
            for a in [Access::Write, Access::Delete] {
                assert!(n.forbids(&h.join(link), a).is_some(), "{link}: {a:?}");
            }
            assert!(n.forbids(&h.join(link), Access::Read).is_none(), "{link} stays readable");
        }
        assert!(n.forbids(&h.join("dots/store/v1/gitconfig"), Access::Write).is_some(), "the place's target");
        assert!(n.forbids(&h.join("dots/notes"), Access::Write).is_none(), "beside them");
        let maps = crate::kernel::MemoryMaps::default();
        n.seed(&mut maps.enforcer(), &[], &[]).unwrap();
        let lobject = |p: &str| ObjectId::of_metadata(&std::fs::symlink_metadata(h.join(p)).unwrap());
        assert!(maps.never_bits(lobject("dots/current")).is_some_and(|b| b & CHANGE == CHANGE), "the link itself");
        assert_eq!(maps.never_name_bits(object(&h.join("dots")).unwrap(), OsStr::new("current")), Some(CHANGE), "its name");
        assert_eq!(maps.never_bits(object(&h.join("dots")).unwrap()), Some(pincer_common::NEVER_PINNED), "its folder");
        let n = n.with_code_places(&account, &UserEnvironment::default(), &[]).unwrap();
        for link in ["dots/current", "dots/v1"] {
            assert!(n.read_from().contains(&Watch::File(h.join(link))), "{link} not watched: {:?}", n.read_from());
        }
    }

    /// The configuration files the starter's environment names (`GIT_CONFIG_GLOBAL`) are
    /// read with the never list's, watched, and protected: what the user adds there later
    /// is read when the configuration is read again.
    #[test]
    fn the_configuration_the_environment_names_is_read_watched_and_protected() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path().canonicalize().unwrap();
        let uid = std::fs::metadata(&h).unwrap().uid();
        let account = Account { home: h.clone(), uid, ..owner() };
        std::fs::create_dir_all(h.join("work/hooks")).unwrap();
        let gc = h.join("work/gitconfig");
        std::fs::write(&gc, "[user]\n\tname = u\n").unwrap();
        let env = UserEnvironment { configs: vec![gc.clone()], ..Default::default() };
        let c = Containment::for_owner(&ContainmentConfig::default(), &account, &env, &[]).unwrap();
        assert!(c.never.read_from().contains(&Watch::File(gc.clone())), "watched: {:?}", c.never.read_from());
        assert!(c.never.forbids(&gc, Access::Write).is_some(), "the file itself");
        assert!(c.never.forbids(&h.join("work/hooks/pre-commit"), Access::Create).is_none(), "named by nothing yet");
        std::fs::write(&gc, "[core]\n\thooksPath = ~/work/hooks\n").unwrap();
        let c = Containment::for_owner(&ContainmentConfig::default(), &account, &env, &[]).unwrap();
        assert!(c.never.forbids(&h.join("work/hooks/pre-commit"), Access::Create).is_some(), "named once the user adds it");
    }

    /// `XDG_CONFIG_HOME` moved by the shell's own startup files (read with the variables
    /// they set) moves the never places under it as the environment does, and what is
    /// there is read.
    #[test]
    fn the_never_places_move_with_the_xdg_config_home_the_shell_files_set() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path().canonicalize().unwrap();
        let uid = std::fs::metadata(&h).unwrap().uid();
        let account = Account { home: h.clone(), uid, ..owner() };
        std::fs::create_dir_all(h.join("dots/config/git")).unwrap();
        std::fs::create_dir_all(h.join("dots/hooks")).unwrap();
        std::fs::write(h.join("dots/config/git/config"), "[core]\n\thooksPath = ~/dots/hooks\n").unwrap();
        std::fs::write(h.join(".bashrc"), "DOTS=\"$HOME/dots\"\nexport XDG_CONFIG_HOME=\"$DOTS/config\"\n").unwrap();
        let c = Containment::for_owner(&ContainmentConfig::default(), &account, &UserEnvironment::default(), &[]).unwrap();
        assert!(c.never.forbids(&h.join("dots/config/git/config"), Access::Write).is_some(), "git's configuration, moved");
        assert!(c.never.forbids(&h.join("dots/config/systemd/user/x.service"), Access::Create).is_some(), "user units, moved");
        assert!(c.never.forbids(&h.join("dots/config/gcloud/credentials.db"), Access::Read).is_some(), "a secret, moved, with its access");
        assert!(c.never.forbids(&h.join("dots/hooks/pre-commit"), Access::Create).is_some(), "what the moved configuration names");
        assert!(c.never.read_from().contains(&Watch::File(h.join("dots/config/git/config"))), "read and watched");
        assert!(c.never.forbids(&h.join("dots/notes.md"), Access::Write).is_some(), "the folder `DOTS` names is the user's tools' (a code place)");
        assert!(c.never.forbids(&h.join("notes.md"), Access::Write).is_none(), "beside them");
    }

    /// The tools' own variables move the never places they keep, from the starter's
    /// environment (`GNUPGHOME`, `AWS_SHARED_CREDENTIALS_FILE` that `~/.aws/**` held,
    /// `KUBECONFIG` a list, `CARGO_HOME`'s credentials and code, `NPM_CONFIG_USERCONFIG`)
    /// and from the shell's own files (`HISTFILE` in `~/.bashrc`); a place not the
    /// owner's (`HISTFILE=/dev/null`) moves nothing.
    #[test]
    fn the_never_places_move_with_the_tools_variables() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path().canonicalize().unwrap();
        let uid = std::fs::metadata(&h).unwrap().uid();
        let account = Account { home: h.clone(), uid, ..owner() };
        std::fs::create_dir_all(h.join("w/gnupg")).unwrap();
        std::fs::create_dir_all(h.join("w/cargo/bin")).unwrap();
        std::fs::write(h.join(".bashrc"), "HISTFILE=~/w/logs/bash_history\nexport PSQL_HISTORY=/dev/null\n").unwrap();
        let env = of_env(&[
            ("GNUPGHOME", h.join("w/gnupg")),
            ("AWS_SHARED_CREDENTIALS_FILE", h.join("w/aws-creds")),
            ("KUBECONFIG", PathBuf::from(format!("{}:{}", h.join("w/kube/a").display(), h.join("w/kube/b").display()))),
            ("CARGO_HOME", h.join("w/cargo")),
            ("NPM_CONFIG_USERCONFIG", h.join("w/npmrc")),
        ], &h);
        let c = Containment::for_owner(&ContainmentConfig::default(), &account, &env, &[]).unwrap();
        for (p, access) in [
            ("w/gnupg/private-keys-v1.d/k.key", Access::Read),
            ("w/aws-creds", Access::Read),
            ("w/kube/a", Access::Read),
            ("w/kube/b", Access::Read),
            ("w/cargo/credentials.toml", Access::Read),
            ("w/cargo/config.toml", Access::Write),
            ("w/cargo/bin/cargo-x", Access::Create),
            ("w/npmrc", Access::Read),
            ("w/logs/bash_history", Access::Read),
        ] {
            assert!(c.never.forbids(&h.join(p), access).is_some(), "{p}: {access:?}");
        }
        assert!(c.never.forbids(&h.join("w/notes.md"), Access::Read).is_none(), "beside them");
        assert!(c.never.forbids(Path::new("/dev/null"), Access::Read).is_none(), "not the owner's");
    }

    fn of_env(vars: &[(&str, PathBuf)], home: &Path) -> UserEnvironment {
        let text: String = vars.iter().map(|(k, v)| format!("{k}={}\0", v.display())).collect();
        super::super::code_places::of_environment_text(&text, home, &[])
    }

    /// Every file of a protected folder is read, far past a few dozen (a framework's
    /// snippets in `~/.bashrc.d`).
    #[test]
    fn every_file_of_a_protected_configuration_folder_is_read() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path().canonicalize().unwrap();
        let uid = std::fs::metadata(&h).unwrap().uid();
        let account = Account { home: h.clone(), uid, ..owner() };
        std::fs::create_dir_all(h.join(".bashrc.d")).unwrap();
        for i in 0..300 {
            std::fs::create_dir_all(h.join(format!("t{i}/bin"))).unwrap();
            std::fs::write(h.join(format!(".bashrc.d/{i}.sh")), format!("export PATH=\"$HOME/t{i}/bin:$PATH\"\n")).unwrap();
        }
        let n = NeverList::new(&ContainmentConfig::default().never, &account).unwrap().with_code_places(&account, &UserEnvironment::default(), &[]).unwrap();
        let open: Vec<usize> = (0..300).filter(|i| n.forbids(&h.join(format!("t{i}/bin/git")), Access::Create).is_none()).collect();
        assert!(open.is_empty(), "folders not protected: {open:?}");
    }

    #[test]
    fn a_new_hidden_entry_of_a_protected_root_is_never_grantable() {
        let home = tempfile::tempdir().unwrap();
        let account = Account { home: home.path().to_path_buf(), ..owner() };
        let c = Containment::for_owner(&ContainmentConfig::default(), &account, &UserEnvironment::default(), &[]).unwrap();
        let h = home.path();
        assert!(c.hidden_in_root(&h.join(".newrc"), Access::Create).is_some());
        assert!(c.hidden_in_root(&h.join(".newrc"), Access::Write).is_none(), "an existing one: the twin decides");
        assert!(c.hidden_in_root(&h.join("notes.txt"), Access::Create).is_none());
        assert!(c.hidden_in_root(&h.join("proj/.env"), Access::Create).is_none(), "not directly in the root");
    }

    /// An open path that is now a symlink into a never place (`~/.npm -> ~/.ssh`, made after
    /// the configuration was checked) is neither opened nor layered; the same path as a
    /// directory of its own is both.
    #[test]
    fn an_open_path_that_reaches_a_never_place_is_not_opened() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path().canonicalize().unwrap();
        let account = Account { home: h.clone(), ..owner() };
        std::fs::create_dir_all(h.join(".ssh")).unwrap();
        std::fs::write(h.join(".ssh/id_ed25519"), "key").unwrap();
        std::os::unix::fs::symlink(h.join(".ssh"), h.join(".npm")).unwrap();
        std::fs::create_dir_all(h.join(".local")).unwrap();
        std::os::unix::fs::symlink(h.join(".ssh"), h.join(".local/bin")).unwrap();
        let c = Containment::for_owner(&ContainmentConfig::default(), &account, &UserEnvironment::default(), &[]).unwrap();
        assert!(!c.open.iter().any(|(p, _)| p.ends_with(".npm") || p.ends_with(".local/bin")), "opened: {:?}", c.open);
        assert!(!c.layered.iter().any(|l| l.path.starts_with(h.join(".ssh"))), "a layer over ~/.ssh");
        std::fs::remove_file(h.join(".npm")).unwrap();
        std::fs::create_dir(h.join(".npm")).unwrap();
        let c = Containment::for_owner(&ContainmentConfig::default(), &account, &UserEnvironment::default(), &[]).unwrap();
        assert!(c.open.iter().any(|(p, _)| *p == h.join(".npm")), "control: a directory of its own is open");
        assert!(c.layered.iter().any(|l| l.path == h.join(".npm")), "control: and layered");
    }

    #[test]
    fn default_never_list_refuses_secrets_startup_files_and_hooks_but_lets_them_be_read() {
        let n = NeverList::new(&ContainmentConfig::default().never, &owner()).unwrap();
        assert!(n.forbids(Path::new("/home/u/.ssh/id_ed25519"), Access::Read).is_some());
        assert!(n.forbids(Path::new("/home/u/.ssh"), Access::List).is_some(), "the directory itself");
        assert!(n.forbids(Path::new("/home/u/.bashrc"), Access::Write).is_some());
        assert!(n.forbids(Path::new("/home/u/.bashrc"), Access::Read).is_none());
        assert!(n.forbids(Path::new("/home/u/.config/autostart/x.desktop"), Access::Create).is_some());
        assert!(n.forbids(Path::new("/srv/w/proj/.git/hooks/pre-commit"), Access::Create).is_some());
        assert!(n.forbids(Path::new("/srv/w/proj/.git/config"), Access::Write).is_some());
        assert!(n.forbids(Path::new("/srv/w/proj/.git/config"), Access::Read).is_none(), "git must read it");
        assert!(n.forbids(Path::new("/srv/w/proj/.claude/settings.local.json"), Access::Write).is_some());
        assert!(n.forbids(Path::new("/srv/w/.mcp.json"), Access::Create).is_some());
        assert!(n.forbids(Path::new("/srv/w/proj/src/main.rs"), Access::Write).is_none());
        assert!(n.forbids(Path::new("/home/u/notes/ssh.txt"), Access::Read).is_none());
    }

    #[test]
    fn an_object_several_rules_cover_is_seeded_with_the_union_of_their_bits() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        let env = ws.join(".env");
        std::fs::write(&env, "KEY=v").unwrap();
        let rules = [
            NeverRule { pattern: env.to_string_lossy().into_owned(), access: vec![Access::Read] },
            NeverRule { pattern: "**/.env".into(), access: vec![Access::Write, Access::Delete] },
        ];
        let list = NeverList::new(&rules, &owner()).unwrap();
        let maps = crate::kernel::MemoryMaps::default();
        let n = list.seed(&mut maps.enforcer(), std::slice::from_ref(&ws), &[]).unwrap().entries;
        let union = bits(&[Access::Read, Access::Write, Access::Delete]);
        let (file, parent) = (object(&env).unwrap(), object(&ws).unwrap());
        // The kernel's entries replace their bits: one write per object, with every rule's.
        assert_eq!(maps.never_bits(file), Some(union), "the object");
        assert_eq!(maps.never_name_bits(parent, OsStr::new(".env")), Some(union), "its name");
        assert_eq!(maps.never_dir_count(parent), Some(1), "one name in the directory");
        // Plus the pins of the place's existing ancestors (below `/`).
        let pins = ws.ancestors().count() - 1;
        assert_eq!(n, 2 + pins, "one entry per object and per name");
    }

    #[test]
    fn literal_anywhere_rules_become_kernel_patterns_and_the_others_stay_scanned() {
        use pincer_common::{NEVER_PAIR_DEV, NEVER_PATTERN_DEV};
        let wcd = [Access::Write, Access::Create, Access::Delete];
        let rule = |p: &str, a: &[Access]| NeverRule { pattern: p.into(), access: a.to_vec() };
        let rules = [
            rule("**/.git/hooks/**", &wcd),
            rule("**/.git/config", &[Access::Write]),
            rule("**/.mcp.json", &[Access::Create]),
            rule("**/.codex/**", &wcd),
            rule("**/a/b/c", &wcd),
            rule("**/*.pem", &[Access::Read]),
            rule("**/keys/*.pem", &[Access::Read]),
        ];
        let list = NeverList::new(&rules, &owner()).unwrap();
        let maps = crate::kernel::MemoryMaps::default();
        list.seed(&mut maps.enforcer(), &[], &[]).unwrap();
        let entry = |dev: u32, ino: u64, name: &str| maps.never_name_bits(ObjectId { dev, ino }, OsStr::new(name));
        let git = entry(NEVER_PATTERN_DEV, 0, ".git").expect("the directory word");
        let word = (git >> pincer_common::NEVER_PATTERN_WORD_SHIFT) & 0xff;
        assert_eq!((word, git & pincer_common::NEVER_PATTERN_BITS), (1, pincer_common::NEVER_PATTERN_PINNED), "a pinned word, not a never place itself");
        assert_eq!(entry(NEVER_PAIR_DEV, word.into(), "hooks"), Some(bits(&wcd)));
        assert_eq!(entry(NEVER_PAIR_DEV, word.into(), "config"), Some(pincer_common::ACCESS_WRITE));
        for name in ["hooks", "config"] {
            assert_eq!(entry(NEVER_PATTERN_DEV, 0, name), Some(1 << pincer_common::NEVER_PATTERN_MASK_SHIFT), "{name} pairs with .git");
        }
        assert_eq!(entry(NEVER_PATTERN_DEV, 0, ".mcp.json"), Some(pincer_common::ACCESS_CREATE));
        assert_eq!(entry(NEVER_PATTERN_DEV, 0, ".codex"), Some(bits(&wcd)));
        for name in ["a", "b", "c", "*.pem", "keys"] {
            assert_eq!(entry(NEVER_PATTERN_DEV, 0, name), None, "{name}: three names or a glob are scanned, not matched");
        }
        assert!(maps.state().never_patterns > 0, "the walk reads names");
        // Seeding again (every session start) changes nothing.
        list.seed(&mut maps.enforcer(), &[], &[]).unwrap();
        assert_eq!(entry(NEVER_PATTERN_DEV, 0, ".git"), Some(git));
        assert_eq!(entry(NEVER_PAIR_DEV, word.into(), "hooks"), Some(bits(&wcd)));
    }

    #[test]
    fn the_first_missing_ancestor_of_a_never_place_is_reserved_and_carries_the_rest_of_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap();
        std::fs::create_dir(home.join(".config")).unwrap();
        let account = Account { home: home.clone(), ..owner() };
        let rules = [
            NeverRule { pattern: "~/.config/systemd/user/**".into(), access: vec![Access::Write, Access::Create, Access::Delete] },
            NeverRule { pattern: "~/.config/systemd/user.conf".into(), access: vec![Access::Write] },
        ];
        let list = NeverList::new(&rules, &account).unwrap();
        let maps = crate::kernel::MemoryMaps::default();
        list.seed(&mut maps.enforcer(), &[], &[]).unwrap();
        let config = object(&home.join(".config")).unwrap();
        // `~/.config/systemd` is missing: only a mkdir makes it, and the new directory gets
        // the template's names (both places below it, the same template for both).
        assert_eq!(maps.never_name_bits(config, OsStr::new("systemd")), Some(pincer_common::NEVER_RESERVED), "~/.config/systemd is reserved");
        let template = maps.never_carry(config, OsStr::new("systemd")).expect("a mkdir carries");
        assert_eq!(template, template_id(&home.join(".config/systemd")), "the same id in every seeding");
        let t = ObjectId { dev: pincer_common::NEVER_CARRY_DEV, ino: template };
        assert_eq!(maps.never_name_bits(t, OsStr::new("user")), Some(bits(&[Access::Write, Access::Create, Access::Delete])));
        assert_eq!(maps.never_name_bits(t, OsStr::new("user.conf")), Some(bits(&[Access::Write])));
        assert_eq!(maps.never_dir_count(t), None, "a template is no directory");
        // Two missing levels: each reserved with a template of its own.
        std::fs::remove_dir(home.join(".config")).unwrap();
        let maps = crate::kernel::MemoryMaps::default();
        list.seed(&mut maps.enforcer(), &[], &[]).unwrap();
        let home_id = object(&home).unwrap();
        assert_eq!(maps.never_name_bits(home_id, OsStr::new(".config")), Some(pincer_common::NEVER_RESERVED));
        let t1 = ObjectId { dev: pincer_common::NEVER_CARRY_DEV, ino: maps.never_carry(home_id, OsStr::new(".config")).unwrap() };
        assert_eq!(maps.never_name_bits(t1, OsStr::new("systemd")), Some(pincer_common::NEVER_RESERVED));
        let t2 = ObjectId { dev: pincer_common::NEVER_CARRY_DEV, ino: maps.never_carry(t1, OsStr::new("systemd")).unwrap() };
        assert_eq!(t2.ino, template);
        assert_eq!(maps.never_name_bits(t2, OsStr::new("user")), Some(bits(&[Access::Write, Access::Create, Access::Delete])));
        std::fs::create_dir(home.join(".config")).unwrap();
        let config = object(&home.join(".config")).unwrap();
        // Once the parent exists, the place's own name is reserved with the rule's bits.
        std::fs::create_dir(home.join(".config/systemd")).unwrap();
        let maps = crate::kernel::MemoryMaps::default();
        list.seed(&mut maps.enforcer(), &[], &[]).unwrap();
        let systemd = object(&home.join(".config/systemd")).unwrap();
        assert_eq!(maps.never_name_bits(systemd, OsStr::new("user")), Some(bits(&[Access::Write, Access::Create, Access::Delete])));
        assert_eq!(maps.never_name_bits(config, OsStr::new("systemd")), None, "an existing ancestor is not reserved");
    }

    #[test]
    fn the_default_list_covers_code_places_beyond_the_shell_rc_files() {
        let n = NeverList::new(&ContainmentConfig::default().never, &owner()).unwrap();
        for p in [
            "/home/u/.bash_aliases",
            "/home/u/.local/share/systemd/user/evil.service",
            "/home/u/.config/systemd/user.conf",
            "/home/u/.local/share/dbus-1/services/org.x.service",
            "/home/u/.local/share/applications/x.desktop",
            "/home/u/.cargo/env",
            "/home/u/.cargo/bin/git",
            "/home/u/.cargo/config.toml",
            "/home/u/bin/ls",
            "/home/u/.config/pip/pip.conf",
            "/home/u/.vimrc",
            "/home/u/.zshrc.zwc",
            "/home/u/.vscode/extensions/x/extension.js",
            "/home/u/.local/share/nvim/site/plugin/x.lua",
            "/home/u/.local/share/gnome-shell/extensions/x/extension.js",
            "/home/u/.gradle/gradle.properties",
            "/home/u/src/app/.claude/hooks/check.sh",
            "/home/u/src/app/.claude/commands/deploy.md",
        ] {
            assert!(n.forbids(Path::new(p), Access::Create).is_some(), "{p}");
            assert!(
                n.forbids(Path::new(p), Access::Read).is_none(),
                "{p} stays readable"
            );
        }
        // Browser profiles where current browsers keep them (Firefox 143's XDG folder, snaps,
        // Flatpaks, the Chromium family) and credential files of package managers.
        for p in [
            "/home/u/.config/mozilla/firefox/x.default/logins.json",
            "/home/u/snap/firefox/common/.mozilla/firefox/x.default/cookies.sqlite",
            "/home/u/.var/app/org.mozilla.firefox/.mozilla/firefox/x/key4.db",
            "/home/u/.config/BraveSoftware/Brave-Browser/Default/Login Data",
            "/home/u/.config/microsoft-edge/Default/Cookies",
            "/home/u/.config/composer/auth.json",
            "/home/u/.config/pypoetry/auth.toml",
            "/home/u/.zhistory",
        ] {
            assert!(n.forbids(Path::new(p), Access::Read).is_some(), "{p} is not readable");
        }
        assert!(
            n.forbids(
                Path::new("/home/u/.cargo/registry/cache/x.crate"),
                Access::Write
            )
            .is_none(),
            "the cache stays open"
        );
        assert!(n
            .forbids(Path::new("/home/u/.bash_history"), Access::Read)
            .is_some());
    }

    #[test]
    fn a_rule_without_glob_syntax_matches_what_its_glob_matches() {
        let paths = [
            "/home/u/.ssh", "/home/u/.ssh/", "/home/u/.ssh/id", "/home/u/.ssh/a/b", "/home/u/.sshx", "/home/u/.ss",
            "/home/u", "/home/u/.bashrc", "/home/u/.bashrc.d", "/home/u/.bashrc/x", "/", "/x", "/home/u/x/.ssh",
            "/home/u/a b/c", "/home/u/é",
        ];
        for pattern in ["/home/u/.ssh/**", "/home/u/.bashrc", "/**", "/home/u/a b/**", "/home/u/é"] {
            let literal = Matcher::new(pattern).unwrap();
            assert!(matches!(literal, Matcher::Literal { .. }), "{pattern}");
            let base = pattern.strip_suffix("/**").filter(|b| !b.is_empty()).map(|b| glob(b).unwrap());
            let globbed = Matcher::Glob { glob: glob(pattern).unwrap(), base };
            for p in paths {
                assert_eq!(literal.matches(Path::new(p)), globbed.matches(Path::new(p)), "{pattern} on {p}");
            }
        }
        for pattern in ["**/.git/*", "/home/u/.claude/settings*.json", "/home/u/[ab]", "/home/u/\\*", "**/a/{b,c}"] {
            assert!(matches!(Matcher::new(pattern).unwrap(), Matcher::Glob { .. }), "{pattern}");
        }
    }

    #[test]
    fn a_rule_anywhere_without_glob_syntax_matches_what_its_glob_matches() {
        let paths = [
            ".git/hooks", ".git/hooks/x", "/.git/hooks", "/.git/hooks/", "/r/.git/hooks", "/r/.git/hooks/pre-commit",
            "/r/.git/hooks/a/b", "/r/x.git/hooks", "/r/.git/hooksx", "/r/.git/hooks.d/x", "/r/.git", "/r/.git/config",
            "/r/.git/config/x", "/a/.env", "/a/.env/", "/a/.envrc", "/a/b.env", "/.env/x/.env", "x/.git/hooks/y", "/", "",
            "/r/.git/.git/hooks", "/a/.env.d/.env", "/a/é/.env",
        ];
        for pattern in ["**/.git/hooks", "**/.git/hooks/**", "**/.env", "**/.env/**", "**/.git/config", "**/é/.env"] {
            let fast = Matcher::new(pattern).unwrap();
            assert!(matches!(fast, Matcher::Anywhere { .. }), "{pattern}");
            let base = pattern.strip_suffix("/**").map(|b| glob(b).unwrap());
            let globbed = Matcher::Glob { glob: glob(pattern).unwrap(), base };
            for p in paths {
                assert_eq!(fast.matches(Path::new(p)), globbed.matches(Path::new(p)), "{pattern} on {p:?}");
            }
        }
    }

    #[test]
    fn the_targets_of_hidden_symlinks_are_marked_hidden() {
        use std::os::unix::fs::symlink;
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        for d in ["dots/nvim", "dots/shared-cargo", "dots/proj", ".config", "work/app/node_modules/pkg/bin", "work/app/node_modules/.bin", "plain"] {
            std::fs::create_dir_all(h.join(d)).unwrap();
        }
        for f in ["dots/gdbinit", "dots/visible", "work/app/node_modules/pkg/bin/cli.js", "plain/file"] {
            std::fs::write(h.join(f), "x").unwrap();
        }
        symlink(h.join("dots/gdbinit"), h.join(".gdbinit")).unwrap();
        symlink("../shared-cargo", h.join("dots/proj/.cargo")).unwrap();
        symlink(h.join("dots/nvim"), h.join(".config/nvim")).unwrap();
        symlink(h.join("dots/visible"), h.join("dots/visible-link")).unwrap();
        symlink("../pkg/bin/cli.js", h.join("work/app/node_modules/.bin/cli")).unwrap();
        symlink(h.join("plain/file"), h.join("work/app/.tool")).unwrap();
        let id = |p: &str| ObjectId::of_metadata(&std::fs::metadata(h.join(p)).unwrap());
        let roots = [h.join("work/app")];
        let mut seeds = Seeds::default();
        for r in &roots {
            seed_scan(&mut seeds, &[], r, None);
        }
        seed_hidden_targets(&mut seeds, h, &roots, &[]);
        let hidden = |p: &str| seeds.objects.get(&id(p)).is_some_and(|b| b & pincer_common::NEVER_HIDDEN != 0);
        for p in ["dots/gdbinit", "dots/shared-cargo", "dots/nvim", "plain/file"] {
            assert!(hidden(p), "{p} is named by a hidden entry");
        }
        for p in ["dots/visible", "work/app/node_modules/pkg/bin/cli.js", "dots", "work/app"] {
            assert!(!hidden(p), "{p} is named by no hidden entry (or by a link in a named root's hidden folder)");
        }
    }

    /// A read-only open path (a toolchain of more entries than the scan's budget) is not
    /// entered: a hidden symlink deeper in the rest of the home is still found, where a scan
    /// that enters the toolchain spends its budget there first.
    #[test]
    fn the_scan_for_hidden_symlinks_looks_only_at_the_own_entries_of_read_only_open_paths() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let h = dir.path().canonicalize().unwrap();
        let toolchain = h.join(".rustup/toolchains/stable/lib");
        std::fs::create_dir_all(&toolchain).unwrap();
        for i in 0..SCAN_LIMIT {
            std::fs::write(toolchain.join(format!("f{i}")), "").unwrap();
        }
        std::fs::write(h.join("tool"), "").unwrap();
        symlink(h.join("tool"), toolchain.join(".tool")).unwrap();
        std::fs::create_dir_all(h.join("dots")).unwrap();
        std::fs::write(h.join("dots/zshrc"), "").unwrap();
        let deep = h.join(".config/a/b/c/d");
        std::fs::create_dir_all(&deep).unwrap();
        symlink(h.join("dots/zshrc"), deep.join("rc")).unwrap();
        // A folder on PATH, itself a read-only open path: its own links are looked at.
        std::fs::create_dir_all(h.join(".local/bin")).unwrap();
        std::fs::create_dir_all(h.join("src/mytool")).unwrap();
        std::fs::write(h.join("src/mytool/run"), "").unwrap();
        symlink(h.join("src/mytool/run"), h.join(".local/bin/mytool")).unwrap();
        let id = |p: &str| ObjectId::of_metadata(&std::fs::metadata(h.join(p)).unwrap());
        let hidden = |seeds: &Seeds, p: &str| seeds.objects.get(&id(p)).is_some_and(|b| b & pincer_common::NEVER_HIDDEN != 0);
        let mut seeds = Seeds::default();
        let read_only = [h.join(".rustup"), h.join(".local/bin")];
        seed_hidden_targets(&mut seeds, &h, &[], &read_only);
        assert!(hidden(&seeds, "dots/zshrc"), "a hidden link deeper than the toolchain is found");
        assert!(!hidden(&seeds, "tool"), "the read-only open path is not entered below its own entries");
        assert!(hidden(&seeds, "src/mytool/run"), "a link of a read-only open path's own entries marks its target");
        let mut entered = Seeds::default();
        seed_hidden_targets(&mut entered, &h, &[], &[]);
        assert!(!hidden(&entered, "dots/zshrc"), "control: entering the toolchain spends the budget before the deep link");
    }

    #[test]
    fn a_symlinked_never_place_protects_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(home.join("dotfiles")).unwrap();
        std::fs::write(home.join("dotfiles/bashrc"), "alias ll='ls -l'\n").unwrap();
        std::os::unix::fs::symlink(home.join("dotfiles/bashrc"), home.join(".bashrc")).unwrap();
        std::fs::create_dir_all(home.join("vault/ssh")).unwrap();
        std::fs::write(home.join("vault/ssh/id_ed25519"), "key").unwrap();
        std::os::unix::fs::symlink(home.join("vault/ssh"), home.join(".ssh")).unwrap();
        let account = Account {
            home: home.clone(),
            ..owner()
        };
        let list = NeverList::new(&ContainmentConfig::default().never, &account).unwrap();
        assert!(
            list.forbids(&home.join("dotfiles/bashrc"), Access::Write)
                .is_some(),
            "the startup file's target"
        );
        assert!(
            list.forbids(&home.join("vault/ssh/id_ed25519"), Access::Read)
                .is_some(),
            "the secret directory's target"
        );
        assert!(
            list.forbids(&home.join("dotfiles/vimrc.md"), Access::Write)
                .is_none(),
            "only the target"
        );
        let maps = crate::kernel::MemoryMaps::default();
        list.seed(&mut maps.enforcer(), &[], &[]).unwrap();
        assert!(maps
            .never_bits(object(&home.join("dotfiles/bashrc")).unwrap())
            .is_some_and(|b| b & pincer_common::ACCESS_WRITE != 0));
        assert!(maps
            .never_bits(object(&home.join("vault/ssh")).unwrap())
            .is_some_and(|b| b & pincer_common::ACCESS_READ != 0));
    }

    #[test]
    fn an_open_path_inside_a_never_place_is_refused_and_never_places_inside_one_are_carved_out() {
        let carved = ContainmentConfig::default().check().unwrap();
        for n in ["~/.claude/settings*.json", "~/.claude/hooks/**", "~/.claude/.credentials.json", "~/.claude/plugins/cache/**"] {
            assert!(carved.iter().any(|(o, c)| o == "~/.claude" && c == n), "{n} is carved out of ~/.claude: {carved:?}");
        }
        assert!(
            carved
                .iter()
                .any(|(o, n)| o == "~/.cargo" && n == "~/.cargo/bin/**"),
            "{carved:?}"
        );
        assert!(
            carved
                .iter()
                .any(|(o, n)| o == "~/.cargo" && n == "~/.cargo/env"),
            "{carved:?}"
        );
        let mut cfg = ContainmentConfig::default();
        cfg.open_paths.push(open("~/.ssh", OpenMode::ReadOnly));
        let e = cfg.check().unwrap_err();
        assert!(e.contains("~/.ssh") && e.contains("never-grantable"), "{e}");
        let mut cfg = ContainmentConfig::default();
        cfg.open_paths.push(open("~/.config/systemd/user", OpenMode::ReadWrite));
        assert!(cfg.check().is_err(), "rw in a place never changed");
        let mut cfg = ContainmentConfig::default();
        cfg.open_paths.push(open("~/.config/systemd/user", OpenMode::ReadOnly));
        assert!(cfg.check().is_ok(), "reading it is allowed");
        let mut cfg = ContainmentConfig::default();
        cfg.open_paths.push(OpenPath { show: vec!["x".into()], ..open("~/.cache/tool", OpenMode::ReadOnly) });
        let e = cfg.check().unwrap_err();
        assert!(e.contains("~/.cache/tool") && e.contains("show"), "{e}");
        let mut cfg = ContainmentConfig::default();
        cfg.open_paths.push(OpenPath { show: vec!["../.ssh".into()], ..open("~/.cache/tool", OpenMode::ReadWrite) });
        let e = cfg.check().unwrap_err();
        assert!(e.contains("../.ssh"), "{e}");
    }

    #[test]
    fn the_ancestors_of_a_never_place_below_the_home_are_pinned() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(home.join(".config/systemd/user")).unwrap();
        std::fs::create_dir_all(home.join("proj/.git/hooks")).unwrap();
        let account = Account {
            home: home.clone(),
            ..owner()
        };
        let rules = [
            NeverRule {
                pattern: "~/.config/systemd/user/**".into(),
                access: vec![Access::Write, Access::Create, Access::Delete],
            },
            NeverRule {
                pattern: "**/.git/hooks/**".into(),
                access: vec![Access::Write, Access::Create, Access::Delete],
            },
        ];
        let list = NeverList::new(&rules, &account).unwrap();
        let maps = crate::kernel::MemoryMaps::default();
        list.seed(&mut maps.enforcer(), std::slice::from_ref(&home), &[])
            .unwrap();
        let pinned = |p: &str| {
            maps.never_bits(object(&home.join(p)).unwrap())
                .is_some_and(|b| b & pincer_common::NEVER_PINNED != 0)
        };
        assert!(
            pinned(".config") && pinned(".config/systemd"),
            "between the home and the place"
        );
        assert!(
            pinned("proj/.git") && pinned("proj"),
            "between the root and a match"
        );
        assert!(
            !pinned(".config/systemd/user"),
            "the place itself carries its rule's bits"
        );
        assert!(
            maps.never_bits(object(&home).unwrap()).is_none(),
            "not the home itself"
        );
    }

    #[test]
    fn paths_must_be_absolute_home_or_anywhere() {
        let bad = [NeverRule { pattern: "secrets/**".into(), access: vec![Access::Read] }];
        assert!(matches!(NeverList::new(&bad, &owner()), Err(ContainError::Relative(_))));
        let glob = [NeverRule { pattern: "/a/[".into(), access: vec![Access::Read] }];
        assert!(matches!(NeverList::new(&glob, &owner()), Err(ContainError::Pattern { .. })));
    }

    #[test]
    fn expansion_of_home_and_uid() {
        assert_eq!(expand("~", &owner()), "/home/u");
        assert_eq!(expand("~/.ssh/**", &owner()), "/home/u/.ssh/**");
        assert_eq!(expand("/run/user/{uid}", &owner()), "/run/user/1000");
    }
}
