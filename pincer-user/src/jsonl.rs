//! The one reader of JSON-lines text (the corpus and history files, the audit log): each
//! non-blank line is parsed on its own and keeps its 1-based line number, so a bad line is
//! reported where it is and costs nothing else.

use serde::de::DeserializeOwned;

/// The non-blank lines of `text`, each with its 1-based line number and parsed as `T`.
pub fn parse_lines<T: DeserializeOwned>(text: &str) -> impl Iterator<Item = (usize, Result<T, serde_json::Error>)> + '_ {
    text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()).map(|(i, l)| (i + 1, serde_json::from_str(l)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_keep_their_numbers_and_bad_lines_stay_alone() {
        let got: Vec<(usize, Result<u32, _>)> = parse_lines("1\n\n  \nx\n3\n").collect();
        assert_eq!(got.len(), 3);
        assert_eq!((got[0].0, got[0].1.as_ref().ok()), (1, Some(&1)));
        assert!(got[1].0 == 4 && got[1].1.is_err());
        assert_eq!((got[2].0, got[2].1.as_ref().ok()), (5, Some(&3)));
    }
}
