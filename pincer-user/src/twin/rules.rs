//! Provider token formats as data: gitleaks' maintained rule set, vendored with its licence
//! in `data/gitleaks/` (see its `README.md` for the upstream commit and how to update it),
//! and the few provider formats it lacks in `data/extra-token-rules.toml`, in the same format.
//!
//! Each rule is applied as gitleaks applies it to a file's content: its `keywords` are a
//! prefilter (one Aho-Corasick pass over the text, ASCII case-insensitive; a rule runs only
//! if one of its keywords occurs, a rule without keywords always runs), its `regex` finds
//! candidates, the secret is the `secretGroup` (or the first non-empty group, or the whole
//! match), a match whose secret has Shannon entropy at or below the rule's `entropy` is
//! dropped, and so is one that the global or the rule's allowlists allow (their `regexes`,
//! against the secret, the match or the line as `regexTarget` says, and their `stopwords`,
//! contained in the secret). Allowlists by path or commit, and rules restricted to a path,
//! do not apply: the detector reads content, never file names.
//!
//! Gitleaks writes its regexes for Go's RE2; they are compiled here with the `regex` crate on
//! bytes with Unicode classes off (`\w`, `\d`, `\s`, `\b` and `(?i)` on ASCII, as in RE2).
//! A rule whose regex does not compile is skipped with a warning, never a panic; the tests
//! list every such rule and every rule skipped on purpose ([`POLICY_SKIPS`]).

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};
use regex::bytes::{Regex, RegexBuilder};
use std::collections::BTreeSet;
use std::sync::LazyLock;

/// gitleaks' default configuration (`config/gitleaks.toml`), vendored.
pub const GITLEAKS_RULES: &str = include_str!("../../data/gitleaks/gitleaks.toml");
/// Provider formats gitleaks lacks, in gitleaks' rule format.
pub const EXTRA_RULES: &str = include_str!("../../data/extra-token-rules.toml");

/// Most matches of one rule looked at in one text.
pub const MAX_MATCHES_PER_RULE: usize = 32;
/// Compiled size limit of one rule's regex (gitleaks' context rules repeat `[\w.-]{0,50}`).
const REGEX_SIZE_LIMIT: usize = 1 << 24;

/// gitleaks rules not applied, on purpose, with the reason. Rules restricted to a path and
/// path-only rules are skipped too (the detector sees content, not names); they are listed
/// by [`RuleSet::skipped`] with that reason.
pub const POLICY_SKIPS: &[(&str, &str)] = &[(
    "generic-api-key",
    "a label and a high-entropy value, no provider's prefix: the twin's assignment detector (a secret value under a secret-like label) covers this shape with its own placeholder, identifier and ciphertext checks and names the label in the user's audit; this rule would shadow that finding with a less specific one",
)];

/// An error in a rule file or one of its rules.
#[derive(Debug, thiserror::Error)]
pub enum RuleError {
    /// The file is not valid TOML in gitleaks' configuration format.
    #[error("rule file does not parse: {0}")]
    Parse(#[from] toml::de::Error),
    /// A rule's or an allowlist's regex does not compile with the `regex` crate.
    #[error("rule {id}: regex does not compile: {source}")]
    Regex {
        /// The rule's id (`global allowlist` for the global one).
        id: String,
        /// The compiler's error.
        #[source]
        source: Box<regex::Error>,
    },
    /// The keyword prefilter could not be built.
    #[error("keyword prefilter: {0}")]
    Keywords(#[from] aho_corasick::BuildError),
}

#[derive(Debug, Default, serde::Deserialize)]
struct RawConfig {
    #[serde(default)]
    allowlist: Option<RawAllowlist>,
    #[serde(default)]
    allowlists: Vec<RawAllowlist>,
    #[serde(default)]
    rules: Vec<RawRule>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawRule {
    id: String,
    #[serde(default)]
    regex: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    entropy: f64,
    #[serde(default)]
    secret_group: usize,
    #[serde(default)]
    keywords: Vec<String>,
    #[serde(default)]
    allowlist: Option<RawAllowlist>,
    #[serde(default)]
    allowlists: Vec<RawAllowlist>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawAllowlist {
    #[serde(default)]
    condition: Option<String>,
    #[serde(default)]
    regex_target: Option<String>,
    #[serde(default)]
    regexes: Vec<String>,
    #[serde(default)]
    stopwords: Vec<String>,
    #[serde(default)]
    paths: Vec<String>,
    #[serde(default)]
    commits: Vec<String>,
}

/// What an allowlist's regexes are matched against.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Target {
    Secret,
    Match,
    Line,
}

/// One allowlist, compiled.
#[derive(Debug)]
struct Allowlist {
    /// `condition = "AND"`: every check it has must allow.
    and: bool,
    /// It has path or commit checks, which never hold on content alone.
    has_path_or_commit: bool,
    target: Target,
    regexes: Vec<Regex>,
    stopwords: Option<AhoCorasick>,
}

impl Allowlist {
    fn compile(id: &str, raw: RawAllowlist) -> Result<Self, RuleError> {
        let regexes = raw.regexes.iter().map(|r| compile(id, r)).collect::<Result<Vec<_>, _>>()?;
        let stopwords = if raw.stopwords.is_empty() { None } else { Some(AhoCorasickBuilder::new().ascii_case_insensitive(true).build(&raw.stopwords)?) };
        let target = match raw.regex_target.as_deref() {
            Some("match") => Target::Match,
            Some("line") => Target::Line,
            _ => Target::Secret,
        };
        Ok(Allowlist { and: raw.condition.as_deref().is_some_and(|c| c.eq_ignore_ascii_case("and")), has_path_or_commit: !raw.paths.is_empty() || !raw.commits.is_empty(), target, regexes, stopwords })
    }

    /// True if this allowlist allows a finding (gitleaks' `checkFindingAllowed`).
    fn allows(&self, secret: &[u8], whole: &[u8], line: &[u8]) -> bool {
        let target = match self.target {
            Target::Secret => secret,
            Target::Match => whole,
            Target::Line => line,
        };
        let regex = !secret.is_empty() && self.regexes.iter().any(|r| r.is_match(target));
        let stop = !secret.is_empty() && self.stopwords.as_ref().is_some_and(|s| s.is_match(secret));
        if self.and {
            // A path or commit check is never met on content: an AND allowlist with one
            // allows nothing here.
            !self.has_path_or_commit && (self.regexes.is_empty() || regex) && (self.stopwords.is_none() || stop) && (!self.regexes.is_empty() || self.stopwords.is_some())
        } else {
            regex || stop
        }
    }
}

/// One rule, compiled.
#[derive(Debug)]
pub struct Rule {
    /// The rule's id (gitleaks' `id`, e.g. `github-pat`): what a finding names.
    pub id: String,
    regex: Regex,
    entropy: f64,
    secret_group: usize,
    allowlists: Vec<Allowlist>,
}

/// A rule that is not applied, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Skipped {
    /// The rule's id.
    pub id: String,
    /// Why it is not applied.
    pub reason: String,
}

/// The compiled rules with their keyword prefilter and the global allowlists.
#[derive(Debug)]
pub struct RuleSet {
    rules: Vec<Rule>,
    /// Rules without keywords: always run.
    always: Vec<usize>,
    /// The keywords of all rules, lowercased, and the rules each keyword selects.
    keywords: Option<AhoCorasick>,
    keyword_rules: Vec<Vec<usize>>,
    global: Vec<Allowlist>,
    skipped: Vec<Skipped>,
}

/// Rewrites the RE2 syntax the `regex` crate reads differently: a `{` that starts no valid
/// repetition (`{n}`, `{n,}`, `{n,m}`) is a literal in RE2 and an error here, so it is
/// escaped; inside a class, `[` (not `[:`), `&` and `~` are literals in RE2 and nesting or
/// set operators here, so they are escaped too.
pub fn re2_to_rust(pattern: &str) -> String {
    let cs: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut i = 0;
    let mut in_class = false;
    while i < cs.len() {
        let c = cs[i];
        if c == '\\' {
            out.push(c);
            if let Some(&n) = cs.get(i + 1) {
                out.push(n);
            }
            i += 2;
            continue;
        }
        if in_class {
            match c {
                '[' if cs.get(i + 1) == Some(&':') => {
                    // A POSIX class `[:alnum:]`: copied to its closing `:]`.
                    let end = (i + 2..cs.len().saturating_sub(1)).find(|&j| cs[j] == ':' && cs[j + 1] == ']').map_or(i + 1, |j| j + 2);
                    out.extend(&cs[i..end]);
                    i = end;
                    continue;
                }
                '[' | '&' | '~' => {
                    out.push('\\');
                    out.push(c);
                }
                '-' if cs.get(i + 1) == Some(&'-') => out.push_str("\\-"),
                ']' => {
                    in_class = false;
                    out.push(c);
                }
                _ => out.push(c),
            }
            i += 1;
            continue;
        }
        match c {
            '[' => {
                in_class = true;
                out.push(c);
                i += 1;
                // `[^]...]` and `[]...]`: a `]` first in a class is a literal.
                if cs.get(i) == Some(&'^') {
                    out.push('^');
                    i += 1;
                }
                if cs.get(i) == Some(&']') {
                    out.push_str("\\]");
                    i += 1;
                }
                continue;
            }
            '{' => {
                let rest: String = cs[i + 1..].iter().take(24).collect();
                let valid = rest.find('}').is_some_and(|end| {
                    let body = &rest[..end];
                    let (a, b) = body.split_once(',').unwrap_or((body, "0"));
                    !a.is_empty() && a.bytes().all(|x| x.is_ascii_digit()) && b.bytes().all(|x| x.is_ascii_digit())
                });
                if !valid {
                    out.push('\\');
                }
                out.push(c);
            }
            '}' => {
                // A `}` that closes no repetition: a literal in both, escaped for clarity.
                let open = out.rfind('{').is_some_and(|o| !out[o..].contains('}') && !out[..o].ends_with('\\'));
                if !open {
                    out.push('\\');
                }
                out.push(c);
            }
            _ => out.push(c),
        }
        i += 1;
    }
    out
}

/// Compiles one gitleaks regex: RE2 syntax read as RE2 reads it ([`re2_to_rust`]), on
/// bytes, Unicode classes off (as RE2's ASCII classes).
fn compile(id: &str, pattern: &str) -> Result<Regex, RuleError> {
    RegexBuilder::new(&re2_to_rust(pattern)).unicode(false).size_limit(REGEX_SIZE_LIMIT).build().map_err(|e| RuleError::Regex { id: id.to_string(), source: Box::new(e) })
}

/// Shannon entropy in bits per byte, as gitleaks computes it for ASCII secrets.
fn entropy(s: &[u8]) -> f64 {
    if s.is_empty() {
        return 0.0;
    }
    let mut counts = [0u32; 256];
    for &b in s {
        counts[b as usize] += 1;
    }
    let n = s.len() as f64;
    counts.iter().filter(|&&c| c > 0).map(|&c| c as f64 / n).map(|p| -p * p.log2()).sum()
}

impl RuleSet {
    /// Builds a rule set from rule files in gitleaks' format, in order (a later file's rule
    /// with an id already seen is skipped). A rule that cannot be compiled is skipped and
    /// listed by [`RuleSet::skipped`] with the compiler's message; an error is returned only
    /// for a file that does not parse or a prefilter that cannot be built.
    pub fn from_files(files: &[&str], policy_skips: &[(&str, &str)]) -> Result<Self, RuleError> {
        let mut rules = Vec::new();
        let mut keywords_of: Vec<Vec<String>> = Vec::new();
        let mut global = Vec::new();
        let mut skipped = Vec::new();
        let mut seen = BTreeSet::new();
        for file in files {
            let raw: RawConfig = toml::from_str(file)?;
            for a in raw.allowlist.into_iter().chain(raw.allowlists) {
                match Allowlist::compile("global allowlist", a) {
                    Ok(a) => global.push(a),
                    Err(e) => skipped.push(Skipped { id: "global allowlist".into(), reason: e.to_string() }),
                }
            }
            for r in raw.rules {
                if !seen.insert(r.id.clone()) {
                    skipped.push(Skipped { id: r.id, reason: "a rule of this id came earlier".into() });
                    continue;
                }
                if let Some((_, why)) = policy_skips.iter().find(|(id, _)| *id == r.id) {
                    skipped.push(Skipped { id: r.id, reason: (*why).to_string() });
                    continue;
                }
                let Some(pattern) = r.regex.as_deref() else {
                    skipped.push(Skipped { id: r.id, reason: "a path-only rule (it matches file names; the detector reads content)".into() });
                    continue;
                };
                if r.path.is_some() {
                    skipped.push(Skipped { id: r.id, reason: "restricted to a file path (the detector reads content, not names)".into() });
                    continue;
                }
                let compiled = compile(&r.id, pattern).and_then(|regex| {
                    let allowlists = r.allowlist.into_iter().chain(r.allowlists).map(|a| Allowlist::compile(&r.id, a)).collect::<Result<Vec<_>, _>>()?;
                    Ok(Rule { id: r.id.clone(), regex, entropy: r.entropy, secret_group: r.secret_group, allowlists })
                });
                match compiled {
                    Ok(rule) => {
                        rules.push(rule);
                        keywords_of.push(r.keywords.iter().map(|k| k.to_ascii_lowercase()).collect());
                    }
                    Err(e) => {
                        tracing::warn!(rule = %r.id, error = %e, "secret rule skipped: its regex does not compile");
                        skipped.push(Skipped { id: r.id, reason: e.to_string() });
                    }
                }
            }
        }
        let mut words: Vec<String> = Vec::new();
        let mut keyword_rules: Vec<Vec<usize>> = Vec::new();
        let mut always = Vec::new();
        for (i, ks) in keywords_of.iter().enumerate() {
            if ks.is_empty() {
                always.push(i);
            }
            for k in ks {
                let at = match words.iter().position(|w| w == k) {
                    Some(at) => at,
                    None => {
                        words.push(k.clone());
                        keyword_rules.push(Vec::new());
                        words.len() - 1
                    }
                };
                keyword_rules[at].push(i);
            }
        }
        let keywords = if words.is_empty() { None } else { Some(AhoCorasickBuilder::new().ascii_case_insensitive(true).match_kind(MatchKind::Standard).kind(Some(AhoCorasickKind::DFA)).build(&words)?) };
        Ok(RuleSet { rules, always, keywords, keyword_rules, global, skipped })
    }

    /// The rules applied.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The rules not applied, each with its reason.
    pub fn skipped(&self) -> &[Skipped] {
        &self.skipped
    }

    /// The rules whose keywords occur in `text` (and those without keywords), in rule order.
    fn candidates(&self, text: &[u8]) -> Vec<usize> {
        let mut on = vec![false; self.rules.len()];
        for &i in &self.always {
            on[i] = true;
        }
        if let Some(ac) = &self.keywords {
            let mut seen = vec![false; self.keyword_rules.len()];
            let mut left = seen.len();
            for m in ac.find_overlapping_iter(text) {
                let k = m.pattern().as_usize();
                if !seen[k] {
                    seen[k] = true;
                    for &i in &self.keyword_rules[k] {
                        on[i] = true;
                    }
                    left -= 1;
                    if left == 0 {
                        break;
                    }
                }
            }
        }
        on.iter().enumerate().filter(|(_, &b)| b).map(|(i, _)| i).collect()
    }

    /// The ids of the rules that find a secret in `text`, each once, in rule order. `accept`
    /// is asked (with the rule's id) about each secret that passes the rule's entropy and the allowlists (the
    /// caller's own exclusions: ciphertext, public keys, documented examples); the secret
    /// itself is never returned. At most the first
    /// [`MAX_INSPECT_BYTES`](super::secrets::MAX_INSPECT_BYTES) of `text` are read.
    pub fn matching_rules(&self, text: &str, accept: impl Fn(&str, &str) -> bool) -> Vec<&str> {
        let bytes = super::secrets::inspected(text).as_bytes();
        let mut out = Vec::new();
        for i in self.candidates(bytes) {
            let rule = &self.rules[i];
            if self.rule_finds(rule, bytes, &accept) {
                out.push(rule.id.as_str());
            }
        }
        out
    }

    fn rule_finds(&self, rule: &Rule, text: &[u8], accept: &impl Fn(&str, &str) -> bool) -> bool {
        for caps in rule.regex.captures_iter(text).take(MAX_MATCHES_PER_RULE) {
            let Some(whole) = caps.get(0) else { continue };
            // gitleaks trims line breaks around the match.
            let mut w = whole.as_bytes();
            while let [b'\n', rest @ ..] = w {
                w = rest;
            }
            while let [rest @ .., b'\n'] = w {
                w = rest;
            }
            let secret = if caps.len() >= 2 {
                if rule.secret_group > 0 {
                    match caps.get(rule.secret_group) {
                        Some(g) => g.as_bytes(),
                        None => continue,
                    }
                } else {
                    (1..caps.len()).filter_map(|g| caps.get(g)).map(|g| g.as_bytes()).find(|g| !g.is_empty()).unwrap_or(w)
                }
            } else {
                w
            };
            if rule.entropy != 0.0 && entropy(secret) <= rule.entropy {
                continue;
            }
            let start = text[..whole.start()].iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
            let end = text[whole.end()..].iter().position(|&b| b == b'\n').map_or(text.len(), |p| whole.end() + p);
            let line = &text[start..end.max(start)];
            if self.global.iter().chain(&rule.allowlists).any(|a| a.allows(secret, w, line)) {
                continue;
            }
            if accept(&rule.id, &String::from_utf8_lossy(secret)) {
                return true;
            }
        }
        false
    }
}

/// The detector's rules: gitleaks' then the extra formats, compiled once. A file that does
/// not parse leaves the set without that file's rules (logged), never a panic.
pub fn rule_set() -> &'static RuleSet {
    static SET: LazyLock<RuleSet> = LazyLock::new(|| {
        RuleSet::from_files(&[GITLEAKS_RULES, EXTRA_RULES], POLICY_SKIPS).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "secret rules not loaded; trying gitleaks' rules alone");
            RuleSet::from_files(&[GITLEAKS_RULES], POLICY_SKIPS).unwrap_or_else(|e| {
                tracing::warn!(error = %e, "gitleaks' secret rules not loaded");
                RuleSet { rules: Vec::new(), always: Vec::new(), keywords: None, keyword_rules: Vec::new(), global: Vec::new(), skipped: vec![Skipped { id: "all".into(), reason: e.to_string() }] }
            })
        })
    });
    &SET
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rules of the vendored files that are not applied, each with why. A rule that stops
    /// compiling, or a new path rule upstream, makes
    /// `every_rule_compiles_or_is_skipped_with_a_reason` fail until it is listed here.
    const EXPECTED_SKIPS: &[(&str, &str)] = &[
        ("freemius-secret-key", "restricted to a file path"),
        ("hashicorp-tf-password", "restricted to a file path"),
        ("kubernetes-secret-yaml", "restricted to a file path"),
        ("nuget-config-password", "restricted to a file path"),
        ("pkcs12-file", "a path-only rule"),
    ];

    #[test]
    fn every_rule_compiles_or_is_skipped_with_a_reason() {
        let set = RuleSet::from_files(&[GITLEAKS_RULES, EXTRA_RULES], POLICY_SKIPS).expect("the vendored rules parse");
        let uncompiled: Vec<&Skipped> = set.skipped().iter().filter(|s| s.reason.contains("does not compile")).collect();
        assert!(uncompiled.is_empty(), "rules whose regexes do not compile: {uncompiled:#?}");
        for s in set.skipped() {
            let expected = EXPECTED_SKIPS.iter().chain(POLICY_SKIPS).any(|(id, why)| *id == s.id && s.reason.contains(why));
            assert!(expected, "rule {} skipped and not on the list: {}", s.id, s.reason);
        }
        for (id, _) in EXPECTED_SKIPS.iter().chain(POLICY_SKIPS) {
            assert!(set.skipped().iter().any(|s| s.id == *id), "{id} is listed as skipped but is applied (or gone upstream)");
        }
        let total = GITLEAKS_RULES.matches("\n[[rules]]").count() + EXTRA_RULES.matches("\n[[rules]]").count();
        assert_eq!(set.rules().len() + set.skipped().len(), total);
        assert!(set.rules().len() >= 200, "{}", set.rules().len());
        assert!(set.keywords.is_some());
    }

    #[test]
    fn re2_syntax_is_read_as_re2_reads_it() {
        assert_eq!(re2_to_rust(r"^\$(?:\d+|{\d+})$"), r"^\$(?:\d+|\{\d+\})$");
        assert_eq!(re2_to_rust(r"a{2,3}b{4}c{5,}"), r"a{2,3}b{4}c{5,}");
        assert_eq!(re2_to_rust(r"\{\{[ \t]*[\w ().|]+[ \t]*}}"), r"\{\{[ \t]*[\w ().|]+[ \t]*\}\}");
        assert_eq!(re2_to_rust(r"[[:alnum:]&~[]"), r"[[:alnum:]\&\~\[]");
        assert_eq!(re2_to_rust(r"[^]]x"), r"[^\]]x");
        let r = compile("t", r"import[ \t]+{[ \t\w,]+}[ \t]+from").expect("compiles");
        assert!(r.is_match(b"import { a, b } from"));
        let r = compile("t", r"^\{\d{0,2}}$").expect("compiles");
        assert!(r.is_match(b"{12}") && !r.is_match(b"{123}"));
    }

    #[test]
    fn keywords_select_rules_and_allowlists_apply() {
        let toml = r#"
[allowlist]
stopwords = ["notreal"]
[[rules]]
id = "demo-token"
regex = '''\b(dmo_[a-z0-9]{12})\b'''
entropy = 2.5
keywords = ["dmo_"]
[[rules.allowlists]]
regexes = ['''^dmo_0+$''']
[[rules.allowlists]]
regexTarget = "line"
regexes = ['''# fixture''']
[[rules.allowlists]]
condition = "AND"
paths = ['''tests/''']
regexes = ['''.''']
"#;
        let set = RuleSet::from_files(&[toml], &[]).expect("parses");
        let yes = |t: &str| !set.matching_rules(t, |_, _| true).is_empty();
        assert!(yes("token = dmo_a8k2m4q9z7x1"));
        assert!(!yes("token = DMO_a8k2m4q9z7x1"), "the keyword is case-insensitive, the regex is not");
        assert!(!yes("token = dmo_000000000000"), "low entropy and allowlisted");
        assert!(!yes("token = dmo_aaaaaaaaaaab"), "low entropy");
        assert!(!yes("token = dmo_notreal12345"), "a global stopword");
        assert!(!yes("token = dmo_a8k2m4q9z7x1 # fixture"), "a line allowlist");
        assert!(!yes("nothing here"));
        // The caller's exclusion is asked last.
        assert!(set.matching_rules("dmo_a8k2m4q9z7x1", |_, _| false).is_empty());
        assert_eq!(set.matching_rules("dmo_a8k2m4q9z7x1", |_, _| true), vec!["demo-token"]);
    }

    #[test]
    fn a_rule_that_does_not_compile_is_skipped_not_a_panic() {
        let toml = "[[rules]]\nid = \"bad\"\nregex = '''(?P<x'''\nkeywords = [\"x\"]\n[[rules]]\nid = \"good\"\nregex = '''good_[0-9]{4}'''\n";
        let set = RuleSet::from_files(&[toml], &[]).expect("parses");
        assert_eq!(set.rules().len(), 1);
        assert_eq!(set.skipped()[0].id, "bad");
        assert_eq!(set.matching_rules("a good_1234 x", |_, _| true), vec!["good"]);
        assert!(matches!(RuleSet::from_files(&["[[rules]]\nid = 3"], &[]), Err(RuleError::Parse(_))));
    }
}

