//! Vote 3: the pre-committed policy made at a session's first prompt. A request it does not
//! cover is denied.

use crate::access::Access;
use super::vote::VoteOutcome;
use crate::store::Permission;
use serde::Serialize;

/// One entry of a pre-committed policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct PolicyEntry {
    /// Glob over raw relative paths.
    pub path_glob: String,
    /// Access types covered.
    pub access: Vec<Access>,
    /// Free-form operations the entry is meant for (audit only).
    #[serde(default)]
    pub operations: Vec<String>,
    /// Allow, deny or ask the user.
    pub permission: Permission,
    /// Why (shown only with untrusted content).
    #[serde(default)]
    pub rationale: String,
}

/// A pre-committed policy: made at the session's first prompt; uncovered requests are denied.
#[derive(Debug, Clone)]
pub struct PrecommittedPolicy {
    entries: Vec<PolicyEntry>,
    /// Each entry's matcher; `None` for a literal path, which is found in `literal`.
    matchers: Vec<Option<globset::GlobMatcher>>,
    /// The entries that are literal paths, by path: a check looks these up instead of
    /// matching each (a policy may hold many, one per file similar tasks used).
    literal: std::collections::HashMap<String, Vec<usize>>,
    /// The indices of the entries that are globs.
    globbed: Vec<usize>,
    /// Why the policy is empty, if generation failed (audited in vote 3's reason).
    pub failure: Option<String>,
}

impl PrecommittedPolicy {
    /// Compiles entries; an entry whose glob does not compile is dropped (which can only
    /// deny more).
    pub fn new(entries: Vec<PolicyEntry>) -> Self {
        let mut kept = Vec::new();
        let mut matchers = Vec::new();
        let mut literal: std::collections::HashMap<String, Vec<usize>> = Default::default();
        let mut globbed = Vec::new();
        for e in entries {
            let g = e.path_glob.trim_start_matches("./");
            let g = if let Some(d) = g.strip_suffix('/') { format!("{d}/**") } else { g.to_string() };
            if !crate::glob::is_glob(&g) && !g.is_empty() {
                literal.entry(g).or_default().push(kept.len());
                matchers.push(None);
                kept.push(e);
            } else if let Ok(glob) = globset::GlobBuilder::new(&g).literal_separator(true).build() {
                globbed.push(kept.len());
                matchers.push(Some(glob.compile_matcher()));
                kept.push(e);
            }
        }
        PrecommittedPolicy { entries: kept, matchers, literal, globbed, failure: None }
    }

    /// An empty policy (everything uncovered, so denied) recording why.
    pub fn failed(cause: String) -> Self {
        PrecommittedPolicy { entries: vec![], matchers: vec![], literal: Default::default(), globbed: vec![], failure: Some(cause) }
    }

    /// The entries.
    pub fn entries(&self) -> &[PolicyEntry] {
        &self.entries
    }

    /// Vote 3: a deny entry always wins; otherwise the most specific matching entry decides
    /// (a literal path is the most specific), ask_user winning a tie with allow; uncovered
    /// requests are denied.
    pub fn check(&self, path: &str, access: Access) -> VoteOutcome {
        self.check_in_session(path, access, &[])
    }

    /// [`PrecommittedPolicy::check`] in a session that has created `created` (paths, folders
    /// ending in `/` or not): a request under a folder the session created, with this policy's
    /// allow, that no entry covers is allowed too (the policy licensed the new folder, so it
    /// licenses what goes into it); a deny or ask entry that covers it still decides.
    pub fn check_in_session(&self, path: &str, access: Access, created: &[String]) -> VoteOutcome {
        fn specificity(g: &str) -> usize {
            if !crate::glob::is_glob(g) {
                return usize::MAX;
            }
            g.split('/').filter(|s| !s.is_empty() && !crate::glob::is_glob(s)).count()
        }
        let p = path.trim_end_matches('/');
        let mut best: Option<(usize, bool, &PolicyEntry)> = None;
        let literal = [p, path].into_iter().flat_map(|k| self.literal.get(k).into_iter().flatten()).copied();
        let mut seen_literal: Vec<usize> = Vec::new();
        // The two forms of the path as globs read them, made once for all the entries.
        let candidates = (!self.globbed.is_empty()).then(|| (globset::Candidate::new(p), globset::Candidate::new(path)));
        for i in literal.chain(self.globbed.iter().copied()) {
            let e = &self.entries[i];
            // An entry of another access is passed over before its glob is matched (the
            // glob's result would not count); a path without a trailing `/` is one form.
            if self.matchers[i].is_some() && !e.access.contains(&access) {
                continue;
            }
            let hit = match (&self.matchers[i], &candidates) {
                (Some(m), Some((cp, cpath))) => m.is_match_candidate(cp) || (p.len() != path.len() && m.is_match_candidate(cpath)),
                (Some(m), None) => m.is_match(p) || m.is_match(path),
                (None, _) => {
                    // `p` and `path` may be the same key: each literal entry counts once.
                    if seen_literal.contains(&i) {
                        continue;
                    }
                    seen_literal.push(i);
                    true
                }
            };
            if !e.access.contains(&access) || !hit {
                continue;
            }
            let ask = match e.permission {
                Permission::Deny => return VoteOutcome::deny(format!("pre-committed policy denies {access} on {}", e.path_glob)),
                Permission::AskUser => true,
                Permission::Allow => false,
            };
            let spec = specificity(e.path_glob.trim_end_matches('/'));
            let better = match &best {
                None => true,
                Some((bs, bask, _)) => spec > *bs || (spec == *bs && ask && !*bask),
            };
            if better {
                best = Some((spec, ask, e));
            }
        }
        match best {
            Some((_, true, e)) => VoteOutcome::ask(format!("pre-committed policy asks the user for {access} on {}", e.path_glob)),
            Some((_, false, e)) => VoteOutcome::allow(format!("pre-committed policy allows {access} on {}", e.path_glob)),
            None => match &self.failure {
                Some(c) => VoteOutcome::deny(format!("no pre-committed policy ({c})")),
                None => match created.iter().map(|c| c.trim_end_matches('/')).find(|c| !c.is_empty() && p.len() > c.len() && p.starts_with(*c) && p.as_bytes()[c.len()] == b'/') {
                    Some(c) if access != Access::Delete => VoteOutcome::allow(format!("{access} inside {c}/, which this session created under the pre-committed policy")),
                    _ => VoteOutcome::deny(format!("{access} on this path is not covered by the pre-committed policy")),
                },
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::twin::vote::Verdict;

    fn entry(glob: &str, access: &[Access], permission: Permission) -> PolicyEntry {
        PolicyEntry { path_glob: glob.into(), access: access.to_vec(), operations: vec![], permission, rationale: String::new() }
    }

    #[test]
    fn literal_entries_are_found_by_path_and_rank_as_most_specific() {
        let mut es: Vec<PolicyEntry> = (0..500).map(|i| entry(&format!("docs/f{i}.md"), &[Access::Read], Permission::Allow)).collect();
        es.push(entry("docs/**", &[Access::Read], Permission::AskUser));
        es.push(entry("docs/secret.md", &[Access::Read], Permission::Deny));
        let pol = PrecommittedPolicy::new(es);
        // The literal allow is more specific than the folder's ask.
        assert_eq!(pol.check("docs/f7.md", Access::Read).verdict, Verdict::Allow);
        // A deny decides whatever else matches.
        assert_eq!(pol.check("docs/secret.md", Access::Read).verdict, Verdict::Deny);
        // An uncovered file under the folder asks; another access is uncovered.
        assert_eq!(pol.check("docs/other.md", Access::Read).verdict, Verdict::AskUser);
        assert_eq!(pol.check("docs/f7.md", Access::Write).verdict, Verdict::Deny);
    }

    #[test]
    fn what_goes_into_a_folder_the_session_created_is_covered() {
        let pol = PrecommittedPolicy::new(vec![entry("exports/*", &[Access::Create], Permission::Allow), entry("exports/*/bad.csv", &[Access::Create], Permission::Deny)]);
        let created = vec!["exports/2025-03-21/".to_string()];
        assert_eq!(pol.check("exports/2025-03-21/status.csv", Access::Create).verdict, Verdict::Deny, "not covered without the session's folder");
        assert_eq!(pol.check_in_session("exports/2025-03-21/status.csv", Access::Create, &created).verdict, Verdict::Allow);
        // A deny entry still decides, a delete is not licensed, and a namesake prefix is no parent.
        assert_eq!(pol.check_in_session("exports/2025-03-21/bad.csv", Access::Create, &created).verdict, Verdict::Deny);
        assert_eq!(pol.check_in_session("exports/2025-03-21/status.csv", Access::Delete, &created).verdict, Verdict::Deny);
        assert_eq!(pol.check_in_session("exports/2025-03-21-x/status.csv", Access::Create, &created).verdict, Verdict::Deny);
    }
}
