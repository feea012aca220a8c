//! The one test for glob syntax in workspace paths. Policy rules, approvals and
//! pre-committed policy entries are gitignore-style globs (`globset`): `*`, `**`, `?`,
//! `[...]` and `{a,b}`; every other path is literal.

/// The characters that make a path a glob.
pub const GLOB_META: [char; 4] = ['*', '?', '[', '{'];

/// Whether `p` holds glob syntax (any of [`GLOB_META`]).
pub fn is_glob(p: &str) -> bool {
    p.contains(GLOB_META)
}

/// Whether globset's glob of `p` (backslash escapes on) matches only the text `p` itself:
/// no glob syntax, and nothing else it reads specially (a closing bracket or brace, an
/// escape). Such a pattern can be compared as bytes instead of compiled.
pub fn is_plain(p: &str) -> bool {
    !is_glob(p) && !p.contains([']', '}', '\\'])
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
