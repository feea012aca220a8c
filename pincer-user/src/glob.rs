//! The one test for glob syntax in workspace paths. Policy rules, approvals and
//! pre-committed policy entries are gitignore-style globs (`globset`): `*`, `**`, `?`,
//! `[...]` and `{a,b}`; every other path is literal.

/// The characters that make a path a glob.
pub const GLOB_META: [char; 4] = ['*', '?', '[', '{'];

/// Whether `p` holds glob syntax (any of [`GLOB_META`]).
pub fn is_glob(p: &str) -> bool {
    p.contains(GLOB_META)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_and_literals() {
        for g in ["secrets/**", "*.env", "a?.md", "[ab].txt", "{src,docs}/x"] {
            assert!(is_glob(g), "{g}");
        }
        for p in ["notes/todo.md", "projects/ledger/", "a-b_c.d"] {
            assert!(!is_glob(p), "{p}");
        }
    }
}
