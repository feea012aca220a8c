//! Content provenance: fingerprints of the content of protected resources and the entities
//! that occur in them, so that a copy of protected content is recognised wherever it is
//! placed, whatever it is called, and however it was re-typed.
//!
//! Both sides are normalised before they are compared ([`normalized_tokens`]): case is
//! folded, punctuation and whitespace (re-wrapped lines, other separators) are dropped, and
//! a number written in groups ("4539 1488 0343 6467", "1,200,000", "2025-03-14") is one
//! token of its digits. The token sequence is cut into shingles of [`SHINGLE_WORDS`] tokens
//! and hashed with a key. Every shingle of the protected files is kept (they are a user's
//! protected files, not a corpus); a checked content is looked up shingle by shingle, and
//! one longer than [`WINNOW_ABOVE`] shingles by its winnowed fingerprints only (the smallest
//! of every [`WINNOW_WINDOW`] consecutive hashes, Schleimer, Wilkerson and Aiken's
//! winnowing), which bounds the cost of a large content while any passage of
//! [`SHINGLE_WORDS`] + [`WINNOW_WINDOW`] - 1 tokens it shares with protected content is
//! still found. Entities (e-mail addresses, phone and other long numbers,
//! identifiers, names of people) are compared in a normal form too: digits only for
//! numbers, letters and digits only for identifiers, a name's words in sorted order (so
//! "SMITH, Anna" is "Anna Smith").
//!
//! Fingerprints are trusted state: they are taken from the user's workspace when the user
//! imports or refreshes their policies, never from what the worker sends. Fingerprints and
//! entities that also occur in the unprotected files of that workspace are public (the user
//! has them outside the protected areas) and are dropped, so a pristine unprotected file
//! never matches.

use super::content::entities;
use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};

/// Tokens per shingle.
pub const SHINGLE_WORDS: usize = 5;
/// Consecutive shingle hashes of which winnowing keeps the smallest.
pub const WINNOW_WINDOW: usize = 4;
/// Shingles of a checked content above which only its winnowed fingerprints are looked up.
pub const WINNOW_ABOVE: usize = 4096;
/// Shared fingerprints that make a content a copy of protected content.
pub const MIN_SHARED_SHINGLES: usize = 3;
/// Shared identifiers (e-mail addresses, long numbers, account numbers, codes) that make a
/// content speak of what protected content speaks of; one identifier and two names also do.
pub const MIN_SHARED_ENTITIES: usize = 2;
/// Bytes of each file that are fingerprinted or checked.
pub const MAX_FINGERPRINT_BYTES: usize = 1 << 20;

/// Fingerprints of protected content. Hashes are keyed per instance (SipHash with a random
/// key), so they say nothing about the content to anyone who reads them.
#[derive(Debug, Clone, Default)]
pub struct Provenance {
    hasher: RandomState,
    shingles: HashSet<u64>,
    entities: HashSet<u64>,
    names: HashSet<u64>,
    /// Per protected source, its measured values (numbers with a fractional part, 10 or
    /// more): the keyed hashes of the two whole numbers each rounds to.
    measures: Vec<Vec<[u64; 2]>>,
    sources: usize,
}

/// Measured values of one protected source that a content must carry, rounded or not, to
/// be a paraphrase of it ([`Provenance::check`]).
pub const MIN_SHARED_MEASURES: usize = 3;

/// The numbers of a text of 10 or more, as written: each run of digits with at most one
/// decimal point (or a decimal comma before one or two digits), not part of a longer dotted
/// or dashed sequence (a date, a version, an address), with whether it has a fractional part.
fn measured_numbers(text: &str) -> Vec<(f64, bool)> {
    let mut out = Vec::new();
    for run in text.split(|c: char| !(c.is_ascii_digit() || c == '.' || c == ',')) {
        let run = run.trim_matches(|c| c == '.' || c == ',');
        if run.is_empty() || out.len() >= 4096 {
            continue;
        }
        let seps = run.matches(['.', ',']).count();
        let value = match run.split_once(['.', ',']) {
            None => run.parse::<f64>().ok().map(|v| (v, false)),
            Some((i, f)) if seps == 1 && !i.is_empty() && i.len() <= 6 && (1..=3).contains(&f.len()) && (run.contains('.') || f.len() <= 2) => {
                format!("{i}.{f}").parse::<f64>().ok().map(|v| (v, true))
            }
            _ => None,
        };
        if let Some((v, frac)) = value.filter(|(v, _)| (10.0..1e6).contains(v)) {
            out.push((v, frac));
        }
    }
    out
}

/// How a content overlaps protected content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProvenanceHit {
    /// Winnowed fingerprints (normalised passages) shared with protected content.
    pub shingles: usize,
    /// Identifiers shared with protected content.
    pub entities: usize,
    /// Names of people shared with protected content.
    pub names: usize,
    /// Measured values of one protected source the content carries, rounded or not.
    pub measures: usize,
}

/// The normalised tokens of a text: lowercase alphanumeric runs, where a run of digit groups
/// joined by single separators (space, `-`, `.`, `,`, `/`, `'`) is one token of its digits,
/// so that re-wrapping, re-punctuating and regrouping digits do not change the sequence.
pub fn normalized_tokens(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if !c.is_alphanumeric() {
            i += 1;
            continue;
        }
        let mut tok = String::new();
        if c.is_ascii_digit() {
            // Digits, possibly in groups: "4539 1488", "1,200", "2025-03-14".
            loop {
                while i < chars.len() && chars[i].is_ascii_digit() {
                    tok.push(chars[i]);
                    i += 1;
                }
                let joins = i + 1 < chars.len() && matches!(chars[i], ' ' | '-' | '.' | ',' | '/' | '\'' | '\u{a0}') && chars[i + 1].is_ascii_digit();
                if !joins {
                    break;
                }
                i += 1;
            }
            // Letters glued to the digits stay part of the token ("3rd", "v2").
            while i < chars.len() && chars[i].is_alphanumeric() {
                tok.extend(chars[i].to_lowercase());
                i += 1;
            }
        } else {
            while i < chars.len() && chars[i].is_alphanumeric() {
                tok.extend(chars[i].to_lowercase());
                i += 1;
            }
        }
        out.push(tok);
    }
    out
}

/// The normal form of an entity from [`entities`]: digits only for numbers, letters and
/// digits only for identifiers and IBANs, a name's words sorted, an address lowercased.
fn normalize_entity(e: &str) -> String {
    let Some((kind, v)) = e.split_once(':') else { return e.to_string() };
    match kind {
        "p" => {
            let mut ws: Vec<String> = v.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect();
            ws.sort();
            format!("p:{}", ws.join(" "))
        }
        "id" | "i" => {
            let v: String = v.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect();
            // An identifier that is only digits once normalised is a number.
            if v.chars().all(|c| c.is_ascii_digit()) {
                format!("n:{v}")
            } else {
                format!("id:{v}")
            }
        }
        _ => e.to_lowercase(),
    }
}

fn is_name(e: &str) -> bool {
    e.starts_with("p:")
}

fn capped(c: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(&c[..c.len().min(MAX_FINGERPRINT_BYTES)])
}

/// True for a token of 8 digits that reads as a date (`YYYYMMDD` or `DDMMYYYY`): a date is
/// no identifier.
fn is_date_digits(t: &str) -> bool {
    if t.len() != 8 {
        return false;
    }
    let n = |a: usize, b: usize| t[a..b].parse::<u32>().unwrap_or(0);
    let ymd = (1900..=2100).contains(&n(0, 4)) && (1..=12).contains(&n(4, 6)) && (1..=31).contains(&n(6, 8));
    let dmy = (1..=31).contains(&n(0, 2)) && (1..=12).contains(&n(2, 4)) && (1900..=2100).contains(&n(4, 8));
    ymd || dmy
}

/// The normalised entities of a text, each once. Numbers come from the normalised tokens
/// (digit groups joined), 5 digits or more and not a date; of a number of 9 digits or more
/// only the last 9 count, so a phone number in national and international form (`0151 ...`,
/// `+49 151 ...`, `0049 151 ...`) is one entity.
fn normalized_entities(text: &str) -> Vec<String> {
    let mut v: Vec<String> = entities(text).iter().filter(|e| !e.starts_with("n:")).map(|e| normalize_entity(e)).filter(|e| !e.starts_with("n:")).collect();
    for t in normalized_tokens(text) {
        if t.len() >= 5 && t.bytes().all(|b| b.is_ascii_digit()) && !is_date_digits(&t) {
            v.push(format!("n:{}", &t[t.len().saturating_sub(9)..]));
        }
    }
    v.sort();
    v.dedup();
    v
}

impl Provenance {
    /// Fingerprints `protected` contents, less what also occurs in the `public` ones.
    pub fn build<'a>(protected: impl IntoIterator<Item = &'a [u8]>, public: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let mut p = Provenance::default();
        for c in protected {
            let t = capped(c);
            // Every shingle of the source is kept, so that whichever of them a copy's
            // winnowing selects is found.
            p.shingles.extend(p.shingle_hashes(&t));
            for e in normalized_entities(&t) {
                let h = p.hasher.hash_one(&e);
                if is_name(&e) { p.names.insert(h) } else { p.entities.insert(h) };
            }
            let mut m: Vec<[u64; 2]> = measured_numbers(&t).into_iter().filter(|(_, frac)| *frac).map(|(v, _)| [p.hasher.hash_one(v.floor() as u64), p.hasher.hash_one(v.ceil() as u64)]).collect();
            m.sort_unstable();
            m.dedup();
            p.measures.push(m);
            p.sources += 1;
        }
        for c in public {
            let t = capped(c);
            for h in p.shingle_hashes(&t) {
                p.shingles.remove(&h);
            }
            for e in normalized_entities(&t) {
                let h = p.hasher.hash_one(&e);
                p.entities.remove(&h);
                p.names.remove(&h);
            }
        }
        p
    }

    /// The hashes of every shingle of the normalised text (a text shorter than a shingle but
    /// of three tokens or more is one shingle).
    fn shingle_hashes(&self, text: &str) -> Vec<u64> {
        let ws = normalized_tokens(text);
        if ws.len() < SHINGLE_WORDS {
            return if ws.len() >= 3 { vec![self.hasher.hash_one(ws.join(" "))] } else { vec![] };
        }
        ws.windows(SHINGLE_WORDS).map(|w| self.hasher.hash_one(w.join(" "))).collect()
    }

    /// The fingerprints a checked text is looked up by: its shingle hashes, winnowed when
    /// there are more than [`WINNOW_ABOVE`] of them.
    fn fingerprints(&self, text: &str) -> Vec<u64> {
        let hs = self.shingle_hashes(text);
        if hs.len() > WINNOW_ABOVE {
            winnow(&hs, WINNOW_WINDOW)
        } else {
            hs
        }
    }

    /// How many protected files were fingerprinted.
    pub fn sources(&self) -> usize {
        self.sources
    }

    /// True if nothing is protected.
    pub fn is_empty(&self) -> bool {
        self.shingles.is_empty() && self.entities.is_empty() && self.names.is_empty()
    }

    /// The overlap of `content` with protected content, if it is enough to treat `content`
    /// as protected: [`MIN_SHARED_SHINGLES`] shared fingerprints (or all of a short
    /// content's, when it has at least one), [`MIN_SHARED_ENTITIES`] identifiers, or one
    /// identifier and two names. Any bytes are accepted; at most [`MAX_FINGERPRINT_BYTES`]
    /// are read.
    pub fn check(&self, content: &[u8]) -> Option<ProvenanceHit> {
        if self.is_empty() {
            return None;
        }
        let t = capped(content);
        let fps = self.fingerprints(&t);
        let mut sh: Vec<u64> = fps.iter().copied().filter(|h| self.shingles.contains(h)).collect();
        sh.sort_unstable();
        sh.dedup();
        let (mut en, mut na) = (0, 0);
        for e in normalized_entities(&t) {
            let h = self.hasher.hash_one(&e);
            if is_name(&e) {
                na += self.names.contains(&h) as usize;
            } else {
                en += self.entities.contains(&h) as usize;
            }
        }
        let mut distinct = fps.clone();
        distinct.sort_unstable();
        distinct.dedup();
        let passages = sh.len() >= MIN_SHARED_SHINGLES || (!sh.is_empty() && sh.len() == distinct.len() && distinct.len() < MIN_SHARED_SHINGLES);
        let measures = self.shared_measures(&t);
        let hit = passages || en >= MIN_SHARED_ENTITIES || (en >= 1 && na >= 2) || measures >= MIN_SHARED_MEASURES;
        hit.then_some(ProvenanceHit { shingles: sh.len(), entities: en, names: na, measures })
    }

    /// How many measured values of one protected source a content carries, rounded to whole
    /// numbers or not ("~59%" for 58.7), when they are at least half of the content's own
    /// numbers of 10 or more: a paraphrase of a results table keeps its values, while a
    /// text full of other numbers meets a few by chance. The most over the sources.
    fn shared_measures(&self, text: &str) -> usize {
        if self.measures.iter().all(Vec::is_empty) {
            return 0;
        }
        let nums = measured_numbers(text);
        let mut own: Vec<u64> = nums.iter().map(|(v, _)| v.round() as u64).collect();
        own.sort_unstable();
        own.dedup();
        let hs: HashSet<u64> = nums.iter().flat_map(|(v, _)| [v.floor() as u64, v.ceil() as u64]).map(|n| self.hasher.hash_one(n)).collect();
        self.measures
            .iter()
            .map(|m| m.iter().filter(|[a, b]| hs.contains(a) || hs.contains(b)).count())
            .filter(|&n| n * 2 >= own.len())
            .max()
            .unwrap_or(0)
    }
}

/// Winnowing: of every window of `w` consecutive hashes, the smallest (the rightmost on a
/// tie), each selected position once, in order.
pub fn winnow(hs: &[u64], w: usize) -> Vec<u64> {
    if w <= 1 {
        return hs.to_vec();
    }
    if hs.len() <= w {
        return hs.iter().min().into_iter().copied().collect();
    }
    let mut out = Vec::new();
    let mut last: Option<usize> = None;
    for start in 0..=hs.len() - w {
        let mut m = start;
        for j in start..start + w {
            if hs[j] <= hs[m] {
                m = j;
            }
        }
        if last != Some(m) {
            out.push(hs[m]);
            last = Some(m);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = "Subject 101-004 was randomised on 3 March and allocated kit 4471 from the Berlin depot. \
        The unblinded statistician reports that arm B shows a response rate of 41 percent against 18 percent in arm A, \
        with two serious adverse events in arm B and none in arm A. Do not circulate beyond the closed session.";

    fn prov() -> Provenance {
        Provenance::build([SOURCE.as_bytes()], ["The weekly report lists enrollment per site.".as_bytes()])
    }

    #[test]
    fn normalization_folds_case_whitespace_punctuation_and_digit_groups() {
        assert_eq!(normalized_tokens("Card: 4539 1488-0343.6467, OK"), vec!["card", "4539148803436467", "ok"]);
        assert_eq!(normalized_tokens("CAD 1,200,000 on 2025-03-14"), normalized_tokens("cad 1200000 on 20250314"));
        assert_eq!(normalized_tokens("Ärzte  sind\nda"), vec!["ärzte", "sind", "da"]);
    }

    #[test]
    fn a_retyped_copy_is_found() {
        let p = prov();
        // Re-wrapped, re-cased, re-punctuated, digits regrouped, a few words changed.
        let copy = "the UNBLINDED statistician reports that arm b shows a response rate of 41 percent\n\
            against 18 percent in arm a -- with two serious adverse events in arm B, and none in arm A.";
        let hit = p.check(copy.as_bytes()).expect("a re-typed copy is protected");
        assert!(hit.shingles >= MIN_SHARED_SHINGLES, "{hit:?}");
    }

    #[test]
    fn shared_entities_in_other_wording_are_found() {
        let src = "Patient list: Jürgen Müller, hospital number 4471-0092-18, phone +49 151 23456789; Anna Smith, 5521-7781-02.";
        let p = Provenance::build([src.as_bytes()], []);
        // A paraphrase that re-types the numbers in other groups.
        let copy = "Call the man on 0049 15123456789 (hosp. no. 447100921 8) about his visit.";
        let hit = p.check(copy.as_bytes()).expect("the same numbers, regrouped");
        assert!(hit.entities >= MIN_SHARED_ENTITIES, "{hit:?}");
    }

    #[test]
    fn a_paraphrase_with_rounded_values_is_found() {
        let src = "| | Arm A | Arm B | Placebo |\n| Mean % change wk 8 | -41.2 (3) | -58.7 (4) | -19.5 (3) |\n| Responders | 33.3% | 75.0% | 0.0% |";
        let p = Provenance::build([src.as_bytes()], []);
        let hit = p.check(b"- arm B down ~59% at wk 8, arm A ~41%, placebo ~20%").expect("the same values, rounded");
        assert!(hit.measures >= MIN_SHARED_MEASURES, "{hit:?}");
        // Two values are not a paraphrase, and a text full of other numbers meets a few by chance.
        assert!(p.check(b"Arm B: 59 visits, arm A: 41 visits.").is_none());
        let status = "Enrolled 41 of 240; 59 screened; 20 queries; 75 kits; 12 sites; 88 visits; 64 letters; 97 forms.";
        assert!(p.check(status.as_bytes()).is_none());
    }

    #[test]
    fn unrelated_and_public_text_is_not_a_copy() {
        let p = prov();
        assert!(p.check(b"The weekly report lists enrollment per site.").is_none());
        assert!(p.check(b"Please draft a letter to the Lyon site about referral leaflets and the new visit schedule.").is_none());
    }

    #[test]
    fn bad_input_gets_a_verdict() {
        let p = prov();
        let binary: Vec<u8> = (0..=255u8).cycle().take(1 << 16).collect();
        assert!(p.check(&binary).is_none());
        assert!(p.check(&[0xff, 0xfe, 0xfd, b'a', 0xc3]).is_none());
        assert!(p.check(b"").is_none());
        // Larger than what is read: only the first MAX_FINGERPRINT_BYTES are looked at.
        let mut huge = SOURCE.repeat(2).into_bytes();
        huge.resize(MAX_FINGERPRINT_BYTES * 3, b'x');
        assert!(p.check(&huge).is_some());
    }

    #[test]
    fn winnowing_keeps_a_fingerprint_of_every_window() {
        let hs: Vec<u64> = vec![77, 74, 42, 17, 98, 50, 17, 98, 8, 88, 67, 39, 77, 74, 42, 17, 98];
        let fp = winnow(&hs, 4);
        assert_eq!(fp, vec![17, 17, 8, 39, 17]);
        for win in hs.windows(4) {
            assert!(win.iter().any(|h| fp.contains(h)));
        }
        assert_eq!(winnow(&[5, 3], 4), vec![3]);
        assert!(winnow(&[], 4).is_empty());
    }
}
