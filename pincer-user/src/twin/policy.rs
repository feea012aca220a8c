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
    /// The entries that are literal paths, by path: a check looks these up instead of
    /// matching each (a policy may hold many, one per file similar tasks used).
    literal: std::collections::HashMap<String, Vec<usize>>,
    /// The entries that are globs, matched together: one pass over a path finds all that
    /// match it, however many there are.
    globs: globset::GlobSet,
    /// The index in `entries` of each glob of `globs`, in the set's order.
    globbed: Vec<usize>,
    /// Why the policy is empty, if generation failed (audited in vote 3's reason).
    pub failure: Option<String>,
}

impl PrecommittedPolicy {
    /// Compiles entries; an entry whose glob does not compile is dropped (which can only
    /// deny more).
    pub fn new(entries: Vec<PolicyEntry>) -> Self {
        let mut kept = Vec::new();
        let mut literal: std::collections::HashMap<String, Vec<usize>> = Default::default();
        let mut set = globset::GlobSetBuilder::new();
        let mut globbed = Vec::new();
        for e in entries {
            let g = e.path_glob.trim_start_matches("./");
            let g = if let Some(d) = g.strip_suffix('/') { format!("{d}/**") } else { g.to_string() };
            if !crate::glob::is_glob(&g) && !g.is_empty() {
                literal.entry(g).or_default().push(kept.len());
                kept.push(e);
            } else if let Ok(glob) = globset::GlobBuilder::new(&g).literal_separator(true).build() {
                set.add(glob);
                globbed.push(kept.len());
                kept.push(e);
            }
        }
        match set.build() {
            Ok(globs) => PrecommittedPolicy { entries: kept, literal, globs, globbed, failure: None },
            // Each glob compiled alone, so only the set's size can fail it: the policy then
            // covers nothing (which can only deny more), and says why.
            Err(e) => Self::failed(format!("its {} globs do not compile together: {e}", globbed.len())),
        }
    }

    /// An empty policy (everything uncovered, so denied) recording why.
    pub fn failed(cause: String) -> Self {
        PrecommittedPolicy {
            entries: vec![],
            literal: Default::default(),
            globs: globset::GlobSet::empty(),
            globbed: vec![],
            failure: Some(cause),
        }
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
        let mut literal: Vec<usize> = [p, path].into_iter().flat_map(|k| self.literal.get(k).into_iter().flatten()).copied().collect();
        // `p` and `path` may be the same key: each literal entry counts once.
        literal.sort_unstable();
        literal.dedup();
        // The globs that match either form of the path, found in one pass each.
        let mut matched = Vec::new();
        if !self.globbed.is_empty() {
            self.globs.matches_candidate_into(&globset::Candidate::new(p), &mut matched);
            if p.len() != path.len() {
                let mut more = Vec::new();
                self.globs.matches_candidate_into(&globset::Candidate::new(path), &mut more);
                matched.extend(more);
                matched.sort_unstable();
                matched.dedup();
            }
        }
        for i in literal.into_iter().chain(matched.into_iter().map(|g| self.globbed[g])) {
            let e = &self.entries[i];
            if !e.access.contains(&access) {
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
    fn globs_are_matched_together_and_the_most_specific_decides() {
        // Many globs, matched in one pass: each is found, whatever its place in the set.
        let mut es: Vec<PolicyEntry> = (0..300).map(|i| entry(&format!("src/m{i}/*.rs"), &[Access::Read], Permission::Allow)).collect();
        es.push(entry("src/**", &[Access::Read, Access::Write], Permission::AskUser));
        es.push(entry("src/m250/gen/", &[Access::Write], Permission::Deny));
        es.push(entry("**/*.key", &[Access::Read], Permission::Deny));
        let pol = PrecommittedPolicy::new(es);
        assert_eq!(pol.check("src/m299/lib.rs", Access::Read).verdict, Verdict::Allow, "the glob naming the folder is more specific than src/**");
        assert_eq!(pol.check("src/m299/lib.rs", Access::Write).verdict, Verdict::AskUser, "only src/** covers a write");
        // `*` does not cross a `/`: the nested file falls to src/**.
        assert_eq!(pol.check("src/m3/deep/lib.rs", Access::Read).verdict, Verdict::AskUser);
        // A folder entry covers what is under it and the folder itself (with or without `/`).
        assert_eq!(pol.check("src/m250/gen/out.rs", Access::Write).verdict, Verdict::Deny);
        assert_eq!(pol.check("src/m250/gen/", Access::Write).verdict, Verdict::Deny);
        assert_eq!(pol.check("src/m250/gen/out.rs", Access::Read).verdict, Verdict::AskUser, "the deny is of another access");
        // A deny decides over a more specific allow.
        assert_eq!(pol.check("src/m7/server.key", Access::Read).verdict, Verdict::Deny);
        assert_eq!(pol.check("docs/readme.md", Access::Read).verdict, Verdict::Deny, "uncovered");
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
