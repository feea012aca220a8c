//! The coding agents the VM tests run (`tests/tests/agent_*.rs`): pinned npm packages,
//! fetched from the npm registry with `curl` once, checked against the SHA-512 written here,
//! and unpacked into `target/agents/<name>-<version>/` (shared by every target directory of
//! the checkout, like the kernels). The VM sees each package's folder read-only at
//! [`GUEST_DIR`]`/<name>` (bound from the host's root by `vm/hostfs.rs`).

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The registry the packages come from.
pub const REGISTRY: &str = "https://registry.npmjs.org";

/// Where the guest finds each agent's package folder (`/opt/agents/claude-code/claude`,
/// `/opt/agents/codex/vendor/x86_64-unknown-linux-musl/bin/codex`,
/// `/opt/agents/gemini-cli/bundle/gemini.js`).
pub const GUEST_DIR: &str = "/opt/agents";

/// A pinned npm package holding an agent's executable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Agent {
    /// The agent's short name: its folder in the cache and under [`GUEST_DIR`].
    pub name: &'static str,
    /// The npm package (scoped).
    pub package: &'static str,
    /// The pinned version.
    pub version: &'static str,
    /// The SHA-512 of the package's tarball, in hex (the registry's `dist.integrity`).
    pub sha512: &'static str,
    /// The executable inside the unpacked `package/` folder.
    pub executable: &'static str,
}

/// Claude Code's native binary for Linux x86-64 (the package `@anthropic-ai/claude-code`
/// installs it as an optional dependency and runs it; the binary runs on its own).
pub const CLAUDE_CODE: Agent = Agent {
    name: "claude-code",
    package: "@anthropic-ai/claude-code-linux-x64",
    version: "2.1.332",
    sha512: "7f8256873c18bad2481d2702eff75838f5fab36f2db7b6400e1b0e8bccf0387ab97c53c4b94782861d8d31f8a74a0d06ad472463169e79b0b88740ea88accb73",
    executable: "claude",
};

/// Codex's static (musl) binaries for Linux x86-64: the package `@openai/codex` installs
/// this build as its optional dependency `@openai/codex-linux-x64` (published as the
/// version `<version>-linux-x64` of `@openai/codex`) and runs it; the binary runs on its own.
pub const CODEX: Agent = Agent {
    name: "codex",
    package: "@openai/codex",
    version: "0.171.0-linux-x64",
    sha512: "97ae8d664420764d82de96dc7d42c3cf8db2114079f3531503a23e638dd6a78388a84cbbdc709d999d064e37801d8db272e1f8374d1df55b0baf04f58f1b214f",
    executable: "vendor/x86_64-unknown-linux-musl/bin/codex",
};

/// Gemini CLI: one JavaScript bundle with no dependencies to install, run by the host's
/// node (20 or later).
pub const GEMINI_CLI: Agent = Agent {
    name: "gemini-cli",
    package: "@google/gemini-cli",
    version: "0.61.0",
    sha512: "75b43d034a81b4524d8ba5c1907bdf67a033a67e8f3601ff3fc876319ebb44b957f21480563ba9dfd0915aa751c59bfb61722e86b15acadafccb48ca9e4a319d",
    executable: "bundle/gemini.js",
};

/// Every agent the VM tests run.
pub const AGENTS: &[Agent] = &[CLAUDE_CODE, CODEX, GEMINI_CLI];

impl Agent {
    /// The tarball's URL in the registry (`<registry>/@scope/name/-/name-version.tgz`).
    pub fn tarball_url(&self) -> String {
        let base = self.package.rsplit('/').next().unwrap_or(self.package);
        format!("{REGISTRY}/{}/-/{base}-{}.tgz", self.package, self.version)
    }

    /// The unpacked package folder under `cache` (holds `package.json` and the executable).
    pub fn dir(&self, cache: &Path) -> PathBuf {
        cache.join(format!("{}-{}", self.name, self.version)).join("package")
    }
}

/// The agents' cache, `target/agents/` of the checkout.
pub fn cache() -> PathBuf {
    crate::vm::workspace_root().join("target").join("agents")
}

/// Makes sure `agent` is unpacked under `cache` (fetching and checking it when missing) and
/// returns its package folder.
pub fn ensure(agent: &Agent, cache: &Path) -> Result<PathBuf> {
    let dir = agent.dir(cache);
    if dir.join(agent.executable).is_file() {
        return Ok(dir);
    }
    let top = dir.parent().context("the package folder has a parent")?.to_owned();
    std::fs::create_dir_all(cache).with_context(|| format!("creating {}", cache.display()))?;
    let tmp = cache.join(format!(".{}-{}-{}", agent.name, agent.version, std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    let result = fetch_into(agent, &tmp);
    if let Err(e) = result {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    if std::fs::rename(&tmp, &top).is_err() {
        let _ = std::fs::remove_dir_all(&tmp); // another run unpacked it first
    }
    if !dir.join(agent.executable).is_file() {
        bail!("{} {}: no `{}` in {}", agent.package, agent.version, agent.executable, dir.display());
    }
    Ok(dir)
}

fn fetch_into(agent: &Agent, tmp: &Path) -> Result<()> {
    let url = agent.tarball_url();
    let tgz = tmp.join("package.tgz");
    eprintln!("xtask: fetching {} {} from {url}", agent.package, agent.version);
    let status = Command::new("curl")
        .args(["--fail", "--silent", "--show-error", "--location", "--retry", "3", "--output"])
        .arg(&tgz)
        .arg(&url)
        .status()
        .context("running curl (install it with `cargo xtask deps`)")?;
    if !status.success() {
        bail!("curl {url} failed ({status})");
    }
    let out = Command::new("sha512sum").arg(&tgz).output().context("running sha512sum")?;
    let digest = String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap_or_default().to_owned();
    if !out.status.success() || digest != agent.sha512 {
        bail!("{url}: SHA-512 {digest} is not the pinned {}", agent.sha512);
    }
    let status = Command::new("tar").arg("-xzf").arg(&tgz).arg("-C").arg(tmp).status().context("running tar")?;
    if !status.success() {
        bail!("unpacking {} failed ({status})", tgz.display());
    }
    std::fs::remove_file(&tgz).with_context(|| format!("removing {}", tgz.display()))?;
    Ok(())
}

/// Fetches every agent of [`AGENTS`] into [`cache`] (those already there are kept) and
/// returns their (name, package folder).
pub fn ensure_all() -> Result<Vec<(&'static str, PathBuf)>> {
    let cache = cache();
    AGENTS.iter().map(|a| Ok((a.name, ensure(a, &cache).with_context(|| format!("fetching {} {}", a.package, a.version))?))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tarball_url_is_the_registrys_scoped_form() {
        assert_eq!(
            CLAUDE_CODE.tarball_url(),
            "https://registry.npmjs.org/@anthropic-ai/claude-code-linux-x64/-/claude-code-linux-x64-2.1.332.tgz"
        );
        assert_eq!(CLAUDE_CODE.dir(Path::new("/t/agents")), Path::new("/t/agents/claude-code-2.1.332/package"));
        // A platform build published as a version of the main package.
        assert_eq!(CODEX.tarball_url(), "https://registry.npmjs.org/@openai/codex/-/codex-0.171.0-linux-x64.tgz");
        assert!(AGENTS.iter().all(|a| a.sha512.len() == 128 && a.sha512.bytes().all(|b| b.is_ascii_hexdigit())));
    }

    #[test]
    fn an_unpacked_package_is_not_fetched_again() {
        let cache = tempfile::tempdir().unwrap();
        let dir = CLAUDE_CODE.dir(cache.path());
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("claude"), "#!/bin/sh\n").unwrap();
        // No network, no curl call: the folder is returned as it is.
        assert_eq!(ensure(&CLAUDE_CODE, cache.path()).unwrap(), dir);
    }
}
