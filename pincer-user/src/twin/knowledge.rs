//! What the twin knows, in the form deciders may see: the trusted state with every name
//! sanitized, a BM25 index over past prompts, the learned access intent and the user's rules
//! as sanitized globs; and the session's trusted context ([`SessionView`]).
//!
//! Both are built by the twin with its [`Sanitizer`], which they do not keep.

use super::text::{typed_names, Bm25Index, IntentModel};
use super::vote::TrustedText;
use crate::access::Access;
use crate::sanitize::{SanitizedGlob, SanitizedPath, Sanitizer, Token};
use crate::store::{AccessSource, Permission, PolicyRule, Task, TrustedState, UserPolicy};
use super::provenance::Provenance;
use super::content::{content_findings, FindingKind, MARKINGS};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

/// A rule over sanitized paths.
#[derive(Debug, Clone)]
pub struct SanRule {
    /// The glob, sanitized.
    pub glob: SanitizedGlob,
    /// Access types.
    pub access: Vec<Access>,
    /// Permission.
    pub permission: Permission,
    /// Where it came from (a policy id, or the task of an approval).
    pub source: TrustedText,
    /// True for a rule read from policy text by matching its words against the workspace
    /// tree (not a path the user wrote): it yields to what the user names and to what
    /// similar tasks used.
    pub inferred: bool,
    /// True for an inferred rule whose clause speaks of other instances than the one at hand
    /// ("another matter's billing"): it yields to what the user's words name as well.
    pub relative: bool,
}

/// One past task as deciders see it.
#[derive(Debug, Clone)]
pub struct TaskView {
    /// The user's prompt(s).
    pub prompt: TrustedText,
    /// Day.
    pub day: u32,
    /// Sanitized accesses, with whether the twin granted them.
    pub accesses: Vec<(SanitizedPath, Access, AccessSource)>,
    /// Approvals given in the task, sanitized.
    pub approvals: Vec<SanRule>,
}

/// A user policy as deciders see it.
#[derive(Debug, Clone)]
pub struct PolicyView {
    /// Policy id.
    pub id: TrustedText,
    /// The text the user wrote.
    pub text: TrustedText,
    /// Sanitized rules (structured ones, or ones read from the text's path mentions).
    pub rules: Vec<SanRule>,
    /// True if the text restricts (never, must not, ask first, ...).
    pub restrictive: bool,
    /// True if the user wrote no structured rules: every rule was read from the text.
    pub text_only: bool,
    /// True if the policy restricts reading: a structured deny or ask that covers reading,
    /// or a restrictive sentence of its text that does.
    pub restricts_reading: bool,
    /// What the text says may not go into a place ("no names in reports/"): restrictions
    /// on content, which vote 2 checks, never on access to the place.
    pub content: Vec<ContentRule>,
}

/// A content clause of a user policy over sanitized paths ([`ContentClause`]).
#[derive(Debug, Clone)]
pub struct ContentRule {
    /// The place, sanitized.
    pub glob: SanitizedGlob,
    /// The kinds of content kept out of it.
    pub kinds: Vec<FindingKind>,
    /// The policy it was read from.
    pub source: TrustedText,
}

/// Everything deciders may know from trusted state, sanitized.
#[derive(Debug, Clone, Default)]
pub struct Knowledge {
    /// Past tasks.
    pub tasks: Vec<TaskView>,
    /// User policies.
    pub policies: Vec<PolicyView>,
    /// Derived policies' rules.
    pub derived: Vec<SanRule>,
    /// Similarity index over task prompts (document `i` is `tasks[i]`).
    pub index: Bm25Index,
    /// Which prompt words go with which access types.
    pub intent: IntentModel,
    /// How many tasks touched each sanitized path.
    pub path_tasks: HashMap<SanitizedPath, u32>,
    /// Fingerprints of protected content (from the workspace when the policies were
    /// imported; empty without one).
    pub provenance: Arc<Provenance>,
    /// The workspace tree when the policies were imported, sanitized (files and directories,
    /// without the directory mark); empty without one.
    pub known: HashSet<SanitizedPath>,
    /// The word tokens of the names of protected areas: the last literal segment of every
    /// deny and ask rule.
    pub protected_names: Vec<Vec<Token>>,
    /// The files that deny and ask rules covered in that workspace (the sources of
    /// [`Knowledge::provenance`]), sanitized.
    pub protected_files: HashSet<SanitizedPath>,
    /// Indices into [`Knowledge::tasks`] of the tasks that hold approvals, ascending: vote 1
    /// looks at these instead of scanning every past task.
    pub approval_tasks: Vec<usize>,
    /// The sensitive terms of the restrictive policies, read once when policies are added.
    pub policy_terms: PolicyTerms,
    /// What the content detectors found in each file of the workspace when the policies were
    /// imported (sanitized path to the kinds found): a past task's use of a file licenses the
    /// kinds of content it held then, not what was put into it since.
    pub baseline: HashMap<SanitizedPath, Vec<FindingKind>>,
    /// A digest of each workspace file's content when the policies were imported: a secret
    /// the user's narrow allow licenses is the one the file held then, byte for byte.
    pub baseline_digest: HashMap<SanitizedPath, [u8; 32]>,
    /// Every known object (workspace tree and history) by its last segment: the namesakes a
    /// typed name may resolve to.
    pub by_name: HashMap<Token, Vec<SanitizedPath>>,
}

/// The sensitive terms of the user's restrictive policies, indexed once when the policies
/// are imported so that vote 2 does not re-read the policy text for every request.
#[derive(Debug, Clone, Default)]
pub struct PolicyTerms {
    /// The generic markings ([`MARKINGS`]) the restrictive policies' text mentions.
    pub markings: BTreeSet<&'static str>,
    /// Two-word phrases of the restrictive policies, in policy order: (policy id, phrase).
    pub phrases: Vec<(String, String)>,
    /// Each phrase's first position in [`PolicyTerms::phrases`].
    phrase_index: HashMap<String, usize>,
}

/// Generic words of policy language that do not make a phrase sensitive.
const POLICY_GENERIC: &[&str] = &[
    "never", "must", "should", "agent", "file", "files", "folder", "folders", "directory", "anything", "without", "read", "open",
    "write", "edit", "delete", "remove", "access", "touch", "ask", "first", "always", "before", "allowed", "allow", "permission",
    "user", "unless", "explicitly", "asked", "only", "modify", "change", "create", "content", "contents", "document", "documents",
    "under", "inside", "other", "those", "these", "that", "this", "with", "from", "into", "them", "they", "mine", "ever", "don't",
    "task", "tasks", "work", "working", "stop", "tell", "fine", "okay", "even", "still", "every", "project", "projects", "whatever",
    "wherever", "someone", "anyone", "nothing", "something", "copy", "copies",
];

impl PolicyTerms {
    /// Reads the terms of the restrictive policies: the markings their text mentions, and
    /// their two-word phrases ("salary data", "settlement ranges"): adjacent words of four
    /// letters or more that are not policy language.
    pub fn build(policies: &[PolicyView]) -> Self {
        let mut t = PolicyTerms::default();
        for p in policies.iter().filter(|p| p.restrictive) {
            let low = p.text.as_str().to_lowercase();
            for m in MARKINGS {
                if low.contains(m) {
                    t.markings.insert(*m);
                }
            }
            // Phrases come only from policies that restrict reading: a policy that only keeps
            // things from being changed (a signed report, an export) says nothing about
            // what may be read, so its words are no trigger for content.
            if !p.restricts_reading {
                continue;
            }
            for sentence in split_sentences(p.text.as_str()) {
                let ws: Vec<String> = sentence
                    .split(|c: char| !(c.is_alphanumeric() || c == '\''))
                    .filter(|w| !w.is_empty())
                    .map(str::to_lowercase)
                    .collect();
                for pair in ws.windows(2) {
                    let ok = |w: &String| w.len() >= 4 && !POLICY_GENERIC.contains(&w.as_str()) && !w.chars().all(|c| c.is_ascii_digit());
                    if ok(&pair[0]) && ok(&pair[1]) {
                        let phrase = format!("{} {}", pair[0], pair[1]);
                        t.phrase_index.entry(phrase.clone()).or_insert(t.phrases.len());
                        t.phrases.push((p.id.as_str().to_string(), phrase));
                    }
                }
            }
        }
        t
    }

    /// The first phrase (in policy order) that occurs in `content`: (policy id, phrase).
    pub fn phrase_hit(&self, content: &[u8]) -> Option<(&str, &str)> {
        if self.phrases.is_empty() {
            return None;
        }
        let low = String::from_utf8_lossy(content).to_lowercase();
        let mut ws = low.split(|c: char| !(c.is_alphanumeric() || c == '\'')).filter(|w| !w.is_empty());
        let mut prev = ws.next()?;
        let mut key = String::new();
        let mut first: Option<usize> = None;
        for w in ws {
            key.clear();
            key.push_str(prev);
            key.push(' ');
            key.push_str(w);
            if let Some(&i) = self.phrase_index.get(&key) {
                first = Some(first.map_or(i, |f| f.min(i)));
            }
            prev = w;
        }
        first.map(|i| (self.phrases[i].0.as_str(), self.phrases[i].1.as_str()))
    }
}

/// Words that make a policy sentence restrictive.
const NEGATIVE: &[&str] = &["never", "not", "no", "don't", "dont", "mustn't", "shouldn't", "without", "forbidden", "prohibited", "avoid", "off-limits"];
/// Words that make a policy sentence ask the user.
const ASK: &[&str] = &["ask", "confirm", "check with", "permission", "approval", "approve"];

/// Words of [`ASK`] that are nouns: they ask the user only when they are the user's own
/// ("my approval", "permission from me"); "type approval" or "building permission" names a
/// thing, not a question to the user.
const ASK_NOUNS: &[&str] = &["permission", "approval"];

/// True if the noun at `i` is the user's: "my", "our" or "your" before it (an adjective
/// between allowed: "my explicit approval"), or "from me"/"of mine" after it.
fn user_owned(ws: &[String], i: usize) -> bool {
    let before = ws[i.saturating_sub(2)..i].iter().any(|w| matches!(w.as_str(), "my" | "our" | "your"));
    let after = ws.get(i + 1).is_some_and(|w| w == "from" || w == "of") && ws.get(i + 2).is_some_and(|w| matches!(w.as_str(), "me" | "mine" | "us"));
    before || after
}

fn lower_words(s: &str) -> Vec<String> {
    s.split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '-')).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

/// Conditions by which the user gives permission ahead ("whenever I ask", "when I ask for a
/// reconciliation"): they do not ask the agent to ask, and they restrict nothing.
const PERMISSIVE_CONDITIONS: &[&str] = &["whenever i ask", "when i ask", "if i ask", "as i ask", "once i ask", "whenever asked", "when asked", "if asked", "whenever i want", "when i want"];

/// `text` lowercased, with the permissive conditions ([`PERMISSIVE_CONDITIONS`]) taken out.
fn without_permissive_conditions(text: &str) -> String {
    let mut low = text.to_lowercase().replace(['’', '‘'], "'");
    for c in PERMISSIVE_CONDITIONS {
        while let Some(i) = low.find(c) {
            low.replace_range(i..i + c.len(), " ");
        }
    }
    low
}

/// Words by which a policy sentence permits ("fine to read", "you can update").
const PERMIT: &[&str] = &["fine", "ok", "okay", "allowed", "free", "freely", "can", "may", "welcome"];

/// True if a policy sentence permits and does not restrict: "Work contacts in
/// notes/contacts.md are fine to read". Its path mentions become allows of the accesses it
/// names.
pub fn text_permits(text: &str) -> bool {
    text_permission(text).is_none() && lower_words(&without_permissive_conditions(text)).iter().any(|w| PERMIT.contains(&w.as_str()))
}

/// Reads the permission a policy sentence expresses, if it restricts: an ask ("ask me
/// first", "check with me") or a deny ("never", "don't"). Permissive conditions ("whenever
/// I ask") are not an ask, and a sentence that only permits restricts nothing.
pub fn text_permission(text: &str) -> Option<Permission> {
    let low = without_permissive_conditions(text);
    let ws = lower_words(&low);
    if ASK.iter().any(|a| if a.contains(' ') { low.contains(a) } else { ws.iter().enumerate().any(|(i, w)| w == a && (!ASK_NOUNS.contains(a) || user_owned(&ws, i))) }) {
        return Some(Permission::AskUser);
    }
    // "Off limits" restricts; "tick items off" does not.
    if ws.iter().any(|w| NEGATIVE.contains(&w.as_str()) || w.ends_with("n't")) || low.contains("off limits") {
        return Some(Permission::Deny);
    }
    None
}

/// Access types a policy sentence speaks about (all of them if it names none).
pub fn text_accesses(text: &str) -> Vec<Access> {
    let ws = lower_words(text);
    let has = |prefixes: &[&str]| ws.iter().any(|w| prefixes.iter().any(|p| w.starts_with(p)));
    let mut v = Vec::new();
    if has(&["read", "open", "view", "see", "look", "inspect", "display", "print", "show", "cat"]) {
        v.extend([Access::Read, Access::List]);
    }
    if has(&["list", "brows", "enumerat"]) {
        v.push(Access::List);
    }
    if has(&["writ", "edit", "modif", "chang", "updat", "overwrit", "alter"]) {
        v.extend([Access::Write, Access::Create]);
    }
    if has(&["creat", "add", "mak"]) {
        v.push(Access::Create);
    }
    if has(&["delet", "remov", "eras", "unlink", "purg", "wip"]) {
        v.push(Access::Delete);
    }
    // "Don't touch" and "don't access" cover every access, reading included.
    if v.is_empty() || has(&["access", "touch"]) || has(&["anything"]) && v.len() < 2 {
        return Access::ALL.to_vec();
    }
    v.sort();
    v.dedup();
    v
}

/// The accesses a policy sentence with permission `perm` restricts: those its restricting
/// clauses name ("add tests, never remove them" restricts removing, not reading), else
/// those the whole sentence names. Permissions other than deny and ask read the sentence.
pub fn restricted_accesses(sentence: &str, perm: Permission) -> Vec<Access> {
    if perm != Permission::Allow {
        let mut v: Vec<Access> = Vec::new();
        for c in clauses(sentence).iter().filter(|c| text_permission(c) == Some(perm)) {
            let a = text_accesses(c);
            if a.len() == Access::ALL.len() {
                return text_accesses(sentence);
            }
            v.extend(a);
        }
        if !v.is_empty() {
            v.sort();
            v.dedup();
            return v;
        }
    }
    text_accesses(sentence)
}

/// Turns a path mention from policy text into a glob: a bare name matches anywhere.
pub fn mention_glob(name: &str) -> String {
    let n = name.trim_start_matches("./");
    if n.starts_with("**") || (n.contains('/') && !n.ends_with('/')) {
        return n.to_string();
    }
    if n.ends_with('/') {
        // A directory mention: that directory anywhere, and everything below it.
        return format!("**/{n}**");
    }
    format!("**/{n}")
}

/// Prepositions by which a clause puts content into a place ("no names in reports/").
const INTO: &[&str] = &["in", "into", "inside", "within", "to", "onto"];

/// Verb stems of reaching or changing a place itself: a clause with one of them speaks of
/// access to the place, not of what content goes into it.
const ACCESS_VERBS: &[&str] = &[
    "read", "open", "list", "view", "see", "look", "brows", "touch", "access", "enter", "edit", "modif", "chang", "delet", "remov",
    "rewrit", "overwrit", "eras", "renam", "consult", "search", "inspect", "updat", "alter", "visit",
];

/// Words of a clause that speak of personal data.
const PERSONAL_WORDS: &[&str] = &[
    "name", "initial", "birth", "dob", "phone", "address", "email", "e-mail", "patient", "personal", "identif", "hospital", "ssn",
    "passport", "health", "medical", "salar", "people", "person", "employee", "client", "pseudonym",
];

/// Words of a clause that speak of credentials.
const SECRET_WORDS: &[&str] = &["credential", "password", "secret", "token", "key", "apikey", "login", "passphrase"];

fn clause_words(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '\'')).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

/// True if `text` has a verb of reaching or changing a place ([`ACCESS_VERBS`]).
fn has_access_verb(text: &str) -> bool {
    clause_words(text).iter().any(|w| ACCESS_VERBS.iter().any(|v| w.starts_with(v)))
}

/// True if, in `text`, the place `name` is where content goes: the name follows "in",
/// "into", "to" (as in "no names in reports/"), and `text` has no verb of reaching or
/// changing a place. Such a clause restricts what goes into the place, not access to it.
pub fn placed_into(text: &str, name: &str) -> bool {
    if has_access_verb(text) {
        return false;
    }
    let Some(first) = crate::sanitize::word_keys(name).into_iter().next() else { return false };
    let ws = clause_words(text);
    ws.iter().enumerate().skip(1).any(|(i, w)| crate::sanitize::word_keys(w).contains(&first) && INTO.contains(&ws[i - 1].as_str()))
}

/// The kinds of content a content clause keeps out of its place, read from its words:
/// personal data, credentials, or (when it names neither) every sensitive kind.
pub fn content_kinds(text: &str) -> Vec<FindingKind> {
    let ws = clause_words(text);
    let has = |stems: &[&str]| ws.iter().any(|w| stems.iter().any(|s| w.starts_with(s)));
    let personal = [FindingKind::PersonalData, FindingKind::PeopleTable, FindingKind::IdentityNumber];
    let secret = [FindingKind::PrivateKey, FindingKind::Token, FindingKind::SecretAssignment, FindingKind::Credential];
    let mut v = Vec::new();
    if has(PERSONAL_WORDS) {
        v.extend(personal);
    }
    if has(SECRET_WORDS) {
        v.extend(secret);
    }
    if v.is_empty() {
        v.extend(personal);
        v.extend(secret);
        v.push(FindingKind::Marking);
    }
    v
}

/// Words by which a sentence sets a place apart from what it restricts ("outside
/// matters/", "except drafts/"): the rule is about everything else, never about the place.
const EXCEPT: &[&str] = &["outside", "except", "excluding", "besides", "than", "apart", "beyond", "unlike"];

/// True if the mention `name` in `text` follows a word that sets it apart ([`EXCEPT`]).
fn excepted(text: &str, name: &str) -> bool {
    let Some(i) = text.find(name) else { return false };
    let before = clause_words(&text[..i]);
    before.last().is_some_and(|w| EXCEPT.contains(&w.as_str()))
}

/// A clause of a user policy about what content may go into a place ("no initials, names or
/// dates of birth in reports/"): it restricts that content in the place, never access to the
/// place itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContentClause {
    /// The place, as a glob over relative paths.
    pub path_glob: String,
    /// The kinds of content the clause keeps out of it.
    pub kinds: Vec<FindingKind>,
}

/// A sentence's path mentions, each marked true if the sentence speaks of content put into
/// it ([`placed_into`]) rather than of access to it. When the sentence has no verb of access
/// and one of its mentions follows "in"/"into", every mention of it is a place content goes
/// into ("no names in reports/, letters/ or minutes/").
fn mentions(sentence: &str) -> Vec<(String, bool)> {
    let names: Vec<String> = typed_names(sentence).into_iter().filter(|n| !excepted(sentence, n)).collect();
    // Only a prohibition ("no names in reports/") is a content clause; "ask me about anything
    // in finance/" asks about the place.
    if text_permission(sentence) != Some(Permission::Deny) {
        return names.into_iter().map(|n| (n, false)).collect();
    }
    let whole = names.iter().any(|n| placed_into(sentence, n));
    let mut out = Vec::new();
    for clause in clauses(sentence) {
        for n in typed_names(&clause).into_iter().filter(|n| names.contains(n)) {
            let content = whole || placed_into(&clause, &n);
            out.push((n, content));
        }
    }
    for n in names {
        if !out.iter().any(|(m, _)| *m == n) {
            out.push((n, whole));
        }
    }
    out
}

/// Rules read from a policy's text: its path mentions, with the sentence's permission. A
/// mention that a sentence puts content into ([`content_from_text`]) gives no rule.
pub fn rules_from_text(text: &str) -> Vec<PolicyRule> {
    let mut out = Vec::new();
    for sentence in split_sentences(text) {
        let Some(perm) = text_permission(&sentence).or_else(|| text_permits(&sentence).then_some(Permission::Allow)) else { continue };
        let access = restricted_accesses(&sentence, perm);
        for (name, content) in mentions(&sentence) {
            let g = mention_glob(&name);
            if !content && globset::Glob::new(&g).is_ok() && !out.iter().any(|r: &PolicyRule| r.path_glob == g) {
                out.push(PolicyRule { path_glob: g, access: access.clone(), permission: perm });
            }
        }
    }
    out
}

/// Content clauses read from a policy's text: the mentions of restrictive sentences that
/// speak of what goes into a place ("no names in reports/").
pub fn content_from_text(text: &str) -> Vec<ContentClause> {
    let mut out = Vec::new();
    for sentence in split_sentences(text) {
        if text_permission(&sentence).is_none() {
            continue;
        }
        for (name, content) in mentions(&sentence) {
            let g = mention_glob(&name);
            if content && globset::Glob::new(&g).is_ok() {
                out.push(ContentClause { path_glob: g, kinds: content_kinds(&sentence) });
            }
        }
    }
    out
}

/// The literal segments a glob starts with.
fn literal_prefix(g: &str) -> Vec<&str> {
    g.split('/').filter(|s| !s.is_empty()).take_while(|s| !crate::glob::is_glob(s)).collect()
}

/// True if two globs start with literal prefixes one of which holds the other: they speak
/// of the same part of the tree.
fn overlaps(a: &str, b: &str) -> bool {
    let (a, b) = (literal_prefix(a), literal_prefix(b));
    let n = a.len().min(b.len());
    n > 0 && a[..n] == b[..n]
}

/// The last literal segment of a glob, lowercased.
fn last_literal(g: &str) -> Option<String> {
    g.split('/').rev().find(|s| !s.is_empty() && !crate::glob::is_glob(s)).map(str::to_lowercase)
}

/// The rules of one user policy, each marked true if it was read from the text of a policy
/// that also has structured rules. Both forms count: the structured rules as written, and
/// the text's restrictions on objects the structured rules do not speak of, read
/// conservatively as asks (a reading of text may be wrong; the structured form is the
/// user's precise one for what it names). A text-only policy's rules are read from its text.
pub fn policy_rules(p: &UserPolicy) -> Vec<(PolicyRule, bool)> {
    if p.rules.is_empty() {
        return rules_from_text(&p.text).into_iter().map(|r| (r, false)).collect();
    }
    let mut out: Vec<(PolicyRule, bool)> = p.rules.iter().cloned().map(|r| (r, false)).collect();
    let named: HashSet<String> = p.rules.iter().filter_map(|r| last_literal(&r.path_glob)).collect();
    for r in rules_from_text(&p.text) {
        if r.permission == Permission::Allow || last_literal(&r.path_glob).is_some_and(|l| named.contains(&l)) {
            continue;
        }
        out.push((PolicyRule { permission: Permission::AskUser, ..r }, true));
    }
    out
}

/// Splits text into sentences at `. ` / `; ` / newlines (a dot inside a name does not split).
pub fn split_sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        let next = chars.get(i + 1).copied();
        let end = c == '\n' || ((c == '.' || c == ';' || c == '!' || c == '?') && next.is_none_or(char::is_whitespace));
        if end {
            if !cur.trim().is_empty() {
                out.push(cur.trim().to_string());
            }
            cur.clear();
        } else {
            cur.push(c);
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

fn san_rule(z: &Sanitizer, r: &PolicyRule, source: &str) -> SanRule {
    SanRule { glob: z.glob(&r.path_glob), access: r.access.clone(), permission: r.permission, source: TrustedText::from_trusted(source), inferred: false, relative: false }
}

/// Verbs by which a policy clause speaks of reaching a place (not of what goes into it).
const REACH: &[&str] = &["open", "read", "list", "look", "view", "see", "touch", "access", "enter", "go", "browse", "stay", "keep", "use", "consult", "search"];

/// Splits a sentence into clauses at commas, semicolons, colons, dashes and `and`/`but`.
fn clauses(sentence: &str) -> Vec<String> {
    let mut out = Vec::new();
    for part in sentence.split([',', ';', ':', '(', ')']) {
        let mut cur: Vec<&str> = Vec::new();
        for w in part.split_whitespace() {
            if matches!(w.to_lowercase().as_str(), "and" | "but" | "-" | "--") && !cur.is_empty() {
                out.push(cur.join(" "));
                cur.clear();
            } else {
                cur.push(w);
            }
        }
        if !cur.is_empty() {
            out.push(cur.join(" "));
        }
    }
    out
}

/// Rules read from a text-only policy by matching its words against the workspace tree:
/// in each restrictive clause that speaks of reaching a place, the directories whose names'
/// words all occur in the clause are covered with the clause's permission; a directory
/// every word of whose name also names other places in the tree ("reports" where report
/// files lie elsewhere) is taken only if the clause's other words name its ancestors or what
/// lies in it, and of the directories a clause names only the best supported are taken. So
/// a generic word that happens to be some folder's name does not fence that folder off. A
/// clause that names nothing ("stay out of it") applies to what the sentence before it
/// named. A directory that holds more than a third of the workspace's files is not taken: a
/// word that names most of the user's work is a word of their domain, not a place their
/// policy fences off.
pub fn tree_rules(text: &str, tree: &[String]) -> Vec<PolicyRule> {
    tree_rules_marked(text, tree).into_iter().map(|(r, _)| r).collect()
}

/// True if a lowercased clause tells the agent to keep out of something: "stay out", "keep
/// out", "off limits", "hands off", or "leave" with "alone" within four words after it
/// ("leave the sheets alone").
fn keeps_out(low: &str) -> bool {
    let ws = lower_words(low);
    ["stay out", "keep out", "off limits", "off-limits", "hands off"].iter().any(|p| low.contains(p))
        || ws.iter().enumerate().any(|(i, w)| w == "leave" && ws.iter().skip(i + 1).take(4).any(|x| x == "alone"))
}

/// Words that make a clause speak of other instances than the one at hand ("another
/// matter's billing"): what the user's own words name in a task is not such an other one.
const RELATIVE: &[&str] = &["another", "other", "other's", "others", "else's", "different"];

/// [`tree_rules`], each rule marked true if its clause speaks of other instances than the
/// one at hand ([`RELATIVE`]).
pub fn tree_rules_marked(text: &str, tree: &[String]) -> Vec<(PolicyRule, bool)> {
    let files = tree.iter().filter(|t| !t.ends_with('/')).count();
    let dirs: Vec<(&str, Vec<String>)> = tree
        .iter()
        .filter(|t| t.ends_with('/'))
        .filter(|d| 3 * tree.iter().filter(|f| !f.ends_with('/') && f.starts_with(d.as_str())).count() <= files)
        .map(|t| {
            let t = t.trim_end_matches('/');
            (t, crate::sanitize::word_keys(t.rsplit('/').next().unwrap_or(t)))
        })
        .filter(|(_, ws)| !ws.is_empty())
        .collect();
    // The words of each directory's ancestors and of everything under it.
    let around: Vec<HashSet<String>> = dirs
        .iter()
        .map(|(d, own)| {
            let prefix = format!("{d}/");
            let mut ws: HashSet<String> = d.rsplit_once('/').map(|(up, _)| crate::sanitize::word_keys(up).into_iter().collect()).unwrap_or_default();
            for t in tree.iter().filter(|t| t.starts_with(&prefix)) {
                let rest = &t[prefix.len()..];
                let rest = rest.rsplit_once('.').filter(|(_, e)| !e.contains('/')).map_or(rest, |(b, _)| b);
                ws.extend(crate::sanitize::word_keys(rest));
            }
            ws.retain(|w| !own.contains(w));
            ws
        })
        .collect();
    // Whether every word of a directory's name also names an entry outside it.
    let names: Vec<(&str, Vec<String>)> = tree
        .iter()
        .map(|t| {
            let t = t.trim_end_matches('/');
            let last = t.rsplit('/').next().unwrap_or(t);
            let stem = last.rsplit_once('.').filter(|(b, _)| !b.is_empty()).map_or(last, |(b, _)| b);
            (t, crate::sanitize::word_keys(stem))
        })
        .collect();
    let ambiguous: Vec<bool> = dirs
        .iter()
        .map(|(d, own)| {
            let prefix = format!("{d}/");
            own.iter().all(|w| names.iter().any(|(t, ws)| t != d && !t.starts_with(&prefix) && ws.contains(w)))
        })
        .collect();
    let mut out: Vec<(PolicyRule, bool)> = Vec::new();
    let mut previous: Vec<String> = Vec::new();
    for sentence in split_sentences(text) {
        let mut named: Vec<String> = Vec::new();
        for clause in clauses(&sentence) {
            let low = clause.to_lowercase();
            let keys: HashSet<String> = crate::sanitize::word_keys(&clause).into_iter().collect();
            let mut hits: Vec<String> = Vec::new();
            let support_word = |w: &String| w.len() >= 4 && !POLICY_GENERIC.contains(&w.as_str());
            let mut scored: Vec<(usize, &str)> = Vec::new();
            for (((d, ws), near), ambiguous) in dirs.iter().zip(&around).zip(&ambiguous) {
                if !(ws.iter().all(|w| keys.contains(w)) && ws.iter().any(|w| w.len() >= 4)) {
                    continue;
                }
                let support = keys.iter().filter(|w| support_word(w) && near.contains(*w)).count();
                // A name whose every word also names places elsewhere in the tree needs the
                // clause's other words to say it is this one.
                if *ambiguous && support == 0 {
                    continue;
                }
                scored.push((ws.len() + support, d));
            }
            // A path the clause types says where it means; folders whose names are only
            // words of that path are not named besides it.
            let typed = typed_names(&clause);
            let typed_words: HashSet<String> = typed.iter().flat_map(|n| crate::sanitize::word_keys(n)).collect();
            scored.retain(|(_, d)| {
                let own = crate::sanitize::word_keys(d.rsplit('/').next().unwrap_or(d));
                !(own.iter().all(|w| typed_words.contains(w)) && !typed.iter().any(|n| d.ends_with(n.trim_end_matches('/'))))
            });
            let top = scored.iter().map(|x| x.0).max().unwrap_or(0);
            hits.extend(scored.iter().filter(|x| x.0 == top).map(|x| x.1.to_string()));
            for n in typed {
                hits.push(n.trim_end_matches('/').to_string());
            }
            let Some(perm) = text_permission(&clause).or_else(|| {
                keeps_out(&low).then_some(Permission::Deny)
            }) else {
                named.extend(hits);
                continue;
            };
            let ws = lower_words(&clause);
            // An ask needs no verb of reaching: "ask me about anything in finance/" asks for
            // every access.
            let reach = perm == Permission::AskUser
                || ws.iter().any(|w| REACH.iter().any(|r| w == r || (w.len() > r.len() + 1 && w.starts_with(r))))
                || keeps_out(&low);
            if !reach {
                named.extend(hits);
                continue;
            }
            let targets = if hits.is_empty() && ws.iter().any(|w| matches!(w.as_str(), "it" | "them" | "there" | "that" | "those")) {
                if named.is_empty() { previous.clone() } else { named.clone() }
            } else {
                hits.clone()
            };
            let access = text_accesses(&clause);
            let relative = ws.iter().any(|w| RELATIVE.contains(&w.as_str()));
            for t in targets {
                // A place content goes into ("no names in reports/") is a content clause,
                // not a fence around the place.
                let last = t.rsplit('/').next().unwrap_or(&t);
                if placed_into(&clause, &t) || placed_into(&clause, last) || placed_into(&sentence, last) {
                    continue;
                }
                // A directory covers what is under it; a file name anywhere.
                let is_dir = dirs.iter().any(|(d, _)| *d == t);
                let g = if is_dir { format!("{t}/**") } else { mention_glob(&t) };
                if globset::Glob::new(&g).is_ok() && !out.iter().any(|r| r.0.path_glob == g) {
                    out.push((PolicyRule { path_glob: g, access: access.clone(), permission: perm }, relative));
                    if is_dir && access.contains(&Access::List) {
                        out.push((PolicyRule { path_glob: format!("{t}/"), access: vec![Access::List], permission: perm }, relative));
                    }
                }
            }
            named.extend(hits);
        }
        previous = named;
    }
    out
}

impl Knowledge {
    /// Builds the sanitized view of a trusted state.
    pub fn build(state: &TrustedState, z: &Sanitizer) -> Self {
        let mut k = Knowledge::default();
        for t in &state.tasks {
            k.add_task(t, z);
        }
        for p in &state.policies {
            k.add_policy(p, z);
        }
        for d in &state.derived {
            for r in &d.rules {
                k.derived.push(san_rule(z, r, "derived policy"));
            }
        }
        k
    }

    /// Adds one task (a finished session, or a history line).
    pub fn add_task(&mut self, t: &Task, z: &Sanitizer) {
        let prompt = t.prompt_text();
        self.index.add(&prompt);
        self.intent.add(&prompt, t.accesses.iter().map(|(a, _)| a.access));
        let mut seen = HashSet::new();
        let accesses: Vec<_> = t
            .accesses
            .iter()
            .map(|(a, src)| {
                let sp = z.path(&a.path);
                if seen.insert(sp.clone()) {
                    let n = self.path_tasks.entry(sp.clone()).or_default();
                    *n += 1;
                    if *n == 1 {
                        self.add_name(&sp);
                    }
                }
                (sp, a.access, *src)
            })
            .collect();
        let approvals = t
            .approvals
            .iter()
            .map(|a| {
                san_rule(z, &PolicyRule { path_glob: a.path_glob.clone(), access: vec![a.access], permission: a.permission }, &format!("approval in task {}", t.session))
            })
            .collect();
        let approvals: Vec<SanRule> = approvals;
        if !approvals.is_empty() {
            self.approval_tasks.push(self.tasks.len());
        }
        self.tasks.push(TaskView { prompt: TrustedText::from_trusted(prompt), day: t.day, accesses, approvals });
    }

    /// Adds one user policy: structured rules if it has them, else rules read from its text.
    pub fn add_policy(&mut self, p: &UserPolicy, z: &Sanitizer) {
        let rules = policy_rules(p);
        let source = format!("policy {}", p.id);
        self.policies.push(PolicyView {
            id: TrustedText::from_trusted(p.id.clone()),
            text: TrustedText::from_trusted(p.text.clone()),
            rules: rules
                .iter()
                .map(|(r, inferred)| {
                    let mut sr = san_rule(z, r, &if *inferred { format!("{source} (read from its text)") } else { source.clone() });
                    sr.inferred = *inferred;
                    sr
                })
                .collect(),
            restrictive: text_permission(&p.text).is_some() || p.rules.iter().any(|r| r.permission != Permission::Allow),
            text_only: p.rules.is_empty(),
            restricts_reading: p.rules.iter().any(|r| r.permission != Permission::Allow && r.access.contains(&Access::Read))
                || split_sentences(&p.text).iter().flat_map(|s| clauses(s)).any(|c| text_permission(&c).is_some() && text_accesses(&c).contains(&Access::Read)),
            content: content_from_text(&p.text)
                .into_iter()
                .map(|c| ContentRule { glob: z.glob(&c.path_glob), kinds: c.kinds, source: TrustedText::from_trusted(source.clone()) })
                .collect(),
        });
        self.policy_terms = PolicyTerms::build(&self.policies);
    }

    /// Adds what the workspace at policy import tells (trusted): rules read from text-only
    /// policies against its tree, the sanitized tree, the names of protected areas and the
    /// fingerprints of the protected files' content. `content` gives a file's bytes.
    pub fn add_workspace<'a>(&mut self, state: &TrustedState, z: &Sanitizer, tree: &[String], content: impl Fn(&str) -> Option<&'a [u8]>) {
        // Restricted globs, each with whether the restriction covers reading.
        let mut restrict: Vec<(String, bool)> = Vec::new();
        for (pv, p) in self.policies.iter_mut().zip(&state.policies) {
            let mut rules: Vec<PolicyRule> = policy_rules(p).into_iter().map(|(r, _)| r).collect();
            let named: HashSet<String> = p.rules.iter().filter_map(|r| last_literal(&r.path_glob)).collect();
            // Places matched by the words of the text are read for text-only policies; beside
            // structured rules (the user's precise form) only the text's own path mentions
            // count ([`policy_rules`]).
            let matched = if p.rules.is_empty() { tree_rules_marked(&p.text, tree) } else { vec![] };
            for (r, relative) in matched {
                if rules.iter().any(|x| x.path_glob == r.path_glob) {
                    continue;
                }
                // Beside structured rules the text counts too, as an ask, where it speaks of
                // what they do not name.
                let r = if p.rules.is_empty() {
                    r
                } else if r.permission == Permission::Allow
                    || last_literal(&r.path_glob).is_some_and(|l| named.contains(&l))
                    || p.rules.iter().any(|x| overlaps(&x.path_glob, &r.path_glob))
                {
                    continue;
                } else {
                    PolicyRule { permission: Permission::AskUser, ..r }
                };
                let mut sr = san_rule(z, &r, &format!("policy {} (read from its text)", p.id));
                sr.inferred = true;
                sr.relative = relative;
                pv.rules.push(sr);
                pv.restrictive = true;
                rules.push(r);
            }
            restrict.extend(rules.into_iter().filter(|r| r.permission != Permission::Allow).map(|r| (r.path_glob, r.access.contains(&Access::Read))));
        }
        for d in &state.derived {
            restrict.extend(d.rules.iter().filter(|r| r.permission != Permission::Allow).map(|r| (r.path_glob.clone(), r.access.contains(&Access::Read))));
        }
        // The sources of provenance are the files whose reading is restricted: a copy of a
        // file the user only keeps from being changed (an export, a signed report) is no
        // leak.
        let mut set = globset::GlobSetBuilder::new();
        for (g, read) in &restrict {
            let g = g.trim_start_matches("./");
            let g = if let Some(d) = g.strip_suffix('/') { format!("{d}/**") } else { g.to_string() };
            if let (true, Ok(glob)) = (*read, globset::GlobBuilder::new(&g).literal_separator(true).build()) {
                set.add(glob);
            }
            // A place counts as protected for lookalikes only if its reading is restricted:
            // one only kept from being changed or deleted (a release config, source files)
            // holds nothing a lookalike could pass off.
            if let Some(last) = g.split('/').rev().find(|s| !s.is_empty() && !crate::glob::is_glob(s)).filter(|_| *read) {
                let ws = z.path(last).words(0).to_vec();
                if !ws.is_empty() && !self.protected_names.contains(&ws) {
                    self.protected_names.push(ws);
                }
            }
        }
        let set = set.build().unwrap_or_else(|_| globset::GlobSet::empty());
        let (mut protected, mut public): (Vec<&[u8]>, Vec<&[u8]>) = (vec![], vec![]);
        for t in tree {
            let sp = z.path(t).with_dir(false);
            self.add_name(&sp);
            self.known.insert(sp);
            if t.ends_with('/') {
                continue;
            }
            if let Some(c) = content(t) {
                let mut kinds: Vec<FindingKind> = content_findings(&c[..c.len().min(super::provenance::MAX_FINGERPRINT_BYTES)]).into_iter().map(|f| f.kind).collect();
                kinds.sort();
                kinds.dedup();
                self.baseline.insert(z.path(t).with_dir(false), kinds);
                self.baseline_digest.insert(z.path(t).with_dir(false), content_digest(c));
                if set.is_match(t) {
                    self.protected_files.insert(z.path(t));
                    protected.push(c);
                } else {
                    public.push(c);
                }
            }
        }
        self.provenance = Arc::new(Provenance::build(protected, public));
        self.policy_terms = PolicyTerms::build(&self.policies);
    }

    /// Indexes a known object under its last segment (once).
    fn add_name(&mut self, p: &SanitizedPath) {
        if let Some(last) = p.last() {
            let v = self.by_name.entry(last.clone()).or_default();
            if !v.iter().any(|q| q.same_segments(p)) {
                v.push(p.clone().with_dir(false));
            }
        }
    }

    /// True if `p` (or, for a directory, anything under it) was in the workspace when the
    /// policies were imported, or a past task used it.
    pub fn is_known(&self, p: &SanitizedPath) -> bool {
        let f = p.clone().with_dir(false);
        self.known.contains(&f) || self.path_tasks.contains_key(&f) || self.path_tasks.contains_key(&p.clone().with_dir(true))
    }

    /// True if `content` is what `p` held when the workspace was imported.
    pub fn baseline_content_is(&self, p: &SanitizedPath, content: &[u8]) -> bool {
        self.baseline_digest.get(&p.clone().with_dir(false)).is_some_and(|d| *d == content_digest(content))
    }

    /// True if a past task's use of `p` licenses content of `kind` in it: `p` held that kind
    /// when the workspace was imported (without a workspace, every use licenses).
    pub fn baseline_has(&self, p: &SanitizedPath, kind: FindingKind) -> bool {
        if self.known.is_empty() {
            return true;
        }
        self.baseline.get(&p.clone().with_dir(false)).is_some_and(|ks| ks.contains(&kind))
    }

    /// Every rule: policies', derived, and approvals of all tasks.
    pub fn all_rules(&self) -> impl Iterator<Item = &SanRule> {
        self.policies.iter().flat_map(|p| p.rules.iter()).chain(self.derived.iter()).chain(self.tasks.iter().flat_map(|t| t.approvals.iter()))
    }
}

/// A digest of a content (SHA-256).
fn content_digest(c: &[u8]) -> [u8; 32] {
    use sha2::Digest as _;
    sha2::Sha256::digest(c).into()
}

/// How many similar past tasks a session looks at.
pub const SIMILAR_K: usize = 6;

/// The session's trusted context: the user's prompts, the past tasks most similar to them,
/// the names and words the user typed (sanitized), and the twin's grants in this session.
#[derive(Debug, Clone, Default)]
pub struct SessionView {
    /// The user's prompts in this session.
    pub prompts: Vec<TrustedText>,
    /// Past tasks most similar to the prompts: index into [`Knowledge::tasks`], weight in
    /// 0..=1 (the best is 1).
    pub similar: Vec<(usize, f32)>,
    /// Names the user typed (paths, file names), sanitized.
    pub typed: Vec<SanitizedPath>,
    /// Word tokens of the prompts.
    pub words: HashSet<Token>,
    /// The prompts' words (normalised by [`crate::sanitize::word_keys`]) in order, each with
    /// its token: a query can leave out the words a resource's name carries.
    pub word_list: Vec<(String, Token)>,
    /// The twin's grants in this session.
    pub grants: Vec<(SanitizedPath, Access)>,
    /// Objects this session created.
    pub created: Vec<SanitizedPath>,
    /// The user's answers to questions in this session.
    pub approvals: Vec<SanRule>,
}

impl SessionView {
    /// Adds a user prompt and recomputes the similar tasks.
    pub fn add_prompt(&mut self, prompt: &str, k: &Knowledge, z: &Sanitizer) {
        self.prompts.push(TrustedText::from_trusted(prompt));
        for n in typed_names(prompt) {
            if crate::glob::is_glob(&n) {
                continue;
            }
            self.typed.push(z.path(&n));
        }
        for w in crate::sanitize::word_keys(prompt) {
            if let Some(t) = z.word(&w) {
                self.words.insert(t.clone());
                self.word_list.push((w, t));
            }
        }
        self.refresh(k);
    }

    /// Recomputes the similar tasks (after the knowledge grew).
    pub fn refresh(&mut self, k: &Knowledge) {
        let q = self.query();
        let top = k.index.top_k(&q, SIMILAR_K);
        let best = top.first().map(|t| t.1).unwrap_or(0.0);
        self.similar = top.into_iter().map(|(i, s)| (i, if best > 0.0 { s / best } else { 0.0 })).collect();
    }

    /// All prompts joined.
    pub fn query(&self) -> String {
        self.prompts.iter().map(TrustedText::as_str).collect::<Vec<_>>().join("\n")
    }
}

/// Why a location is (or is not) in the session's scope.
#[derive(Debug, Clone, PartialEq)]
pub struct Evidence {
    /// Strength in 0..=1.
    pub score: f32,
    /// Human-readable reason.
    pub why: String,
    /// The user typed this exact resource in a prompt.
    pub typed: bool,
    /// A similar past task touched this exact resource.
    pub exact_history: bool,
    /// The prompt's words describe this resource's name (most of its words were typed).
    pub described: bool,
    /// A similar past task used a resource in the same folder.
    pub worked_folder: bool,
    /// How many words of the resource's own name occur in the prompts.
    pub name_hits: usize,
}

impl Evidence {
    /// The user's prompt points at this very resource (by path or by the words of its name).
    pub fn named(&self) -> bool {
        self.typed || self.described
    }

    /// The prompt points at this resource in a folder the user works in: a similar task used
    /// that folder and the prompt carries a word of the resource's own name.
    pub fn asked_here(&self) -> bool {
        self.worked_folder && self.name_hits > 0
    }
}

/// Strength of a similar task's exact access to the same resource.
const W_EXACT: f32 = 1.0;
/// Strength of a similar task's access beside the requested resource (same directory).
const W_SIBLING: f32 = 0.6;
/// Strength of a similar task's access two levels up.
const W_COUSIN: f32 = 0.3;
/// Strength of any past task's access to the same resource.
const W_ANY_TASK: f32 = 0.35;
/// Strength per path segment carrying a word the user typed.
const W_WORD: f32 = 0.2;
/// Weakest similarity of a past task that still counts.
const MIN_SIMILARITY: f32 = 0.3;

fn bump(best: &mut (f32, String), score: f32, why: impl FnOnce() -> String) {
    if score > best.0 {
        *best = (score, why());
    }
}

/// Whether the name `t` (the tokens of a path's last segments) the user typed or described
/// resolves to `p` in the task's context: `p` is the only known object (in the workspace
/// tree or the history) whose path ends with `t`, or, of
/// several namesakes, the only one in a folder that the session's similar tasks used, or
/// else the only one whose folders the prompt's words name. A name never licenses every
/// object that bears it.
pub fn resolves_to(k: &Knowledge, s: &SessionView, t: &[Token], p: &SanitizedPath) -> bool {
    let n = t.len();
    let Some(last) = t.last() else { return true };
    let namesakes: Vec<&SanitizedPath> = k.by_name.get(last).map_or(vec![], |v| v.iter().filter(|q| q.len() >= n && q.tokens()[q.len() - n..] == t[..]).collect());
    if namesakes.len() <= 1 {
        return true;
    }
    let in_context = |q: &SanitizedPath| {
        s.similar.iter().filter(|(_, w)| *w >= MIN_SIMILARITY).any(|&(ti, _)| k.tasks[ti].accesses.iter().any(|(sp, _, _)| sp.same_segments(q) || (sp.same_parent(q) && q.len() > 1)))
    };
    let here: Vec<&SanitizedPath> = namesakes.iter().copied().filter(|q| in_context(q)).collect();
    if here.len() == 1 {
        return here[0].same_segments(p);
    }
    // Else the prompt's words may name the folder: "the alpha costs" among alpha/ and beta/.
    // Only the folders where the namesakes differ tell them apart.
    let common = namesakes.iter().map(|q| q.common_prefix_len(namesakes[0])).min().unwrap_or(0);
    let worded: Vec<&SanitizedPath> = namesakes.into_iter().filter(|q| (common..q.len().saturating_sub(1)).any(|i| q.words(i).iter().any(|w| s.words.contains(w)))).collect();
    worded.len() == 1 && worded[0].same_segments(p)
}

/// Location evidence for a sanitized request in a session, from trusted context only.
pub fn location_evidence(k: &Knowledge, s: &SessionView, p: &SanitizedPath) -> Evidence {
    let mut best = (0.0f32, "no trusted evidence for this location".to_string());
    let mut typed = false;
    let mut exact_history = false;
    let mut worked_folder = false;
    // The strongest evidence of each independent kind: the prompt (what the user typed or
    // whose words name the place), similar past tasks, this session's grants, any past task.
    let mut kinds = [0.0f32; 4];
    let mut kind = |k: usize, sc: f32| kinds[k] = kinds[k].max(sc);
    for t in &s.typed {
        let n = t.len();
        if n == 0 {
            continue;
        }
        if p.len() >= n && p.tokens()[p.len() - n..] == t.tokens()[..] {
            if !resolves_to(k, s, t.tokens(), p) {
                bump(&mut best, 0.3, || format!("the user named {t}, but more than one place bears that name and the task's context does not single this one out"));
                continue;
            }
            typed = true;
            kind(0, 1.0);
            bump(&mut best, 1.0, || format!("the user named {t} in the prompt"));
        } else if p.tokens().windows(n).any(|w| w == t.tokens()) {
            kind(0, 0.8);
            bump(&mut best, 0.8, || format!("inside {t}, which the user named in the prompt"));
        } else if p.len() == n && p.same_parent(t) && n > 1 {
            kind(0, 0.5);
            bump(&mut best, 0.5, || format!("beside {t}, which the user named"));
        }
    }
    for &(ti, w) in &s.similar {
        if w < MIN_SIMILARITY {
            continue;
        }
        let task = &k.tasks[ti];
        for (sp, _, _) in &task.accesses {
            if sp.same_segments(p) {
                exact_history = true;
                kind(1, W_EXACT * w);
                bump(&mut best, W_EXACT * w, || format!("a similar past task (similarity {w:.2}) used {sp}"));
            } else if p.is_dir() && sp.starts_with(p) {
                kind(1, 0.9 * w);
                bump(&mut best, 0.9 * w, || format!("a similar past task (similarity {w:.2}) used files under {p}"));
            } else if sp.same_parent(p) && p.len() > 1 {
                worked_folder = true;
                kind(1, W_SIBLING * w);
                bump(&mut best, W_SIBLING * w, || format!("beside {sp}, used by a similar past task (similarity {w:.2})"));
            } else if sp.same_store(p) {
                // Content-named objects are new each time: the store is the place.
                kind(1, W_SIBLING * w);
                bump(&mut best, W_SIBLING * w, || format!("in the content-addressed store of {sp}, used by a similar past task (similarity {w:.2})"));
            } else if p.len() > 2 && sp.len() == p.len() && sp.common_prefix_len(p) == p.len() - 2 {
                kind(1, W_COUSIN * w);
                bump(&mut best, W_COUSIN * w, || format!("near {sp}, used by a similar past task (similarity {w:.2})"));
            }
        }
    }
    for (sp, _) in &s.grants {
        if sp.same_parent(p) && p.len() > 1 {
            kind(2, 0.4);
            bump(&mut best, 0.4, || format!("beside {sp}, granted earlier in this session"));
        }
    }
    if let Some(&n) = k.path_tasks.get(&p.clone().with_dir(false)).or_else(|| k.path_tasks.get(&p.clone().with_dir(true))) {
        let sc = (W_ANY_TASK + 0.05 * (n as f32 - 1.0)).min(0.5);
        kind(3, sc);
        bump(&mut best, sc, || format!("{n} past task(s) used {p}"));
    }
    let mut described = false;
    let mut name_hits = 0;
    if let Some(last) = p.len().checked_sub(1) {
        let ws = p.words(last);
        let hit = ws.iter().filter(|w| s.words.contains(*w)).count();
        name_hits = hit;
        // The words of a name describe the one object of that name in the task's context.
        if ((ws.len() == 1 && hit == 1) || (hit >= 2 && 3 * hit >= 2 * ws.len())) && resolves_to(k, s, &p.tokens()[last..], p) {
            described = true;
            let sc = if hit >= 2 { 0.85 } else { 0.7 };
            kind(0, sc);
            bump(&mut best, sc, || format!("the prompt's words name {p} ({hit} of its {} words)", ws.len()));
        }
    }
    let word_hits = (0..p.len()).filter(|&i| p.words(i).iter().any(|w| s.words.contains(w))).count();
    if word_hits > 0 {
        kind(0, (W_WORD * word_hits as f32).min(0.45));
        bump(&mut best, (W_WORD * word_hits as f32).min(0.45), || format!("{word_hits} segment(s) of {p} carry words of the prompt"));
    }
    // Independent kinds of evidence add up (as a noisy-or): a file several past tasks used,
    // whose folder the prompt's words name, is more in scope than either says alone. A
    // single kind is never more than it is on its own.
    let combined = 1.0 - kinds.iter().map(|k| 1.0 - k).product::<f32>();
    let several = kinds.iter().filter(|k| **k > 0.0).count() > 1;
    if several && combined > best.0 + 0.005 {
        let others = kinds.iter().filter(|k| **k > 0.0).count() - 1;
        best = (combined, format!("{}, with {others} other kind(s) of evidence (together {combined:.2})", best.1));
    }
    Evidence { score: best.0, why: best.1, typed, exact_history, described, worked_folder, name_hits }
}

/// Evidence that a new object is the same kind of place as one a similar past task created
/// in, for another existing instance: `p` differs from (a prefix of) a path that a similar
/// task created in exactly one segment besides its own name, and the place up to that
/// segment exists ("a new folder for site B, as similar tasks made for site A"); or `p` is a
/// new entry of an existing sibling of a folder such a task created (a content store's
/// bucket). Only for creating: it never licenses reading or changing what the other
/// instance holds.
pub fn analog_evidence(k: &Knowledge, s: &SessionView, p: &SanitizedPath) -> Option<(f32, String)> {
    let m = p.len();
    let mut best: Option<(f32, String)> = None;
    for &(ti, w) in &s.similar {
        if w < MIN_SIMILARITY {
            continue;
        }
        for (sp, acc, _) in &k.tasks[ti].accesses {
            if *acc != Access::Create || m < 2 {
                continue;
            }
            // Inside another existing instance of a folder the task created: what it put in
            // its own was new, and is in no history.
            if sp.is_dir() && sp.len() + 1 == m && m >= 3 {
                let Some(folder) = p.parent() else { continue };
                if folder.same_parent(sp) && !folder.same_segments(sp) && k.is_known(&folder.clone().with_dir(true)) {
                    let sc = W_SIBLING * w;
                    if best.as_ref().is_none_or(|b| sc > b.0) {
                        best = Some((sc, format!("in an existing folder of the kind {sp}, which a similar past task (similarity {w:.2}) created")));
                    }
                }
                continue;
            }
            if sp.len() < m {
                continue;
            }
            let own = if sp.len() == m { m - 1 } else { m };
            let diff: Vec<usize> = (0..own).filter(|&j| sp.tokens()[j] != p.tokens()[j]).collect();
            let [i] = diff[..] else { continue };
            let mut prefix = p.clone();
            while prefix.len() > i + 1 {
                prefix = prefix.parent().expect("longer than i + 1");
            }
            if i == 0 || !k.is_known(&prefix.with_dir(true)) {
                continue;
            }
            let sc = W_SIBLING * w;
            if best.as_ref().is_none_or(|b| sc > b.0) {
                best = Some((sc, format!("the same kind of place as {sp}, which a similar past task (similarity {w:.2}) created, for another existing instance")));
            }
        }
    }
    best
}

/// Intent the user's own words carry for a change: the learned intent of the word each of the
/// session's prompt sentences leads with (in an imperative, its verb). Unlike
/// [`intent_evidence`] it takes nothing from what similar tasks did, so a past task that made
/// the change cannot lend its intent to a prompt that does not ask for it.
pub fn leading_intent(k: &Knowledge, s: &SessionView, a: Access) -> (f32, String) {
    let mut best = (0.0f32, format!("no sentence of the prompt leads with a word that asks for {a}"));
    for p in &s.prompts {
        for sentence in split_sentences(p.as_str()) {
            let Some(w) = super::text::leading_word(&sentence) else { continue };
            let (wp, _) = k.intent.score(&w, a);
            let sc = (wp * 1.6).min(1.0);
            bump(&mut best, sc, || format!("the prompt leads with \"{w}\", which goes with {a} in {:.0}% of past tasks", wp * 100.0));
        }
    }
    best
}

/// The words of `p`'s own name that tell it from its siblings (the other entries of its
/// folder in the workspace tree or the history): a word every sibling's name carries too
/// ("2024" in a folder of 2024 reviews) points at none of them in particular.
pub fn distinctive_words<'a>(k: &Knowledge, p: &'a SanitizedPath) -> Vec<&'a Token> {
    let Some(last) = p.len().checked_sub(1) else { return vec![] };
    let Some(parent) = p.parent() else { return vec![] };
    let ws = p.words(last);
    let mut siblings: Vec<&[Token]> = Vec::new();
    let mut seen: HashSet<&Token> = HashSet::new();
    for q in k.known.iter().chain(k.path_tasks.keys()) {
        if q.len() == p.len() && !q.same_segments(p) && q.parent().is_some_and(|qp| qp.same_segments(&parent)) && seen.insert(q.last().expect("non-empty")) {
            siblings.push(q.words(last));
        }
    }
    ws.iter().filter(|w| !siblings.iter().all(|sw| sw.contains(w)) || siblings.is_empty()).collect()
}

/// How like a past task the session is once the words of `p`'s name are left out of its
/// prompts (relative to the best match of that query, 0 if it is not among the
/// [`SIMILAR_K`] best): what the task is about, not which resource it mentions.
pub fn similarity_without_name(k: &Knowledge, s: &SessionView, p: &SanitizedPath, task: usize) -> f32 {
    let name: HashSet<&Token> = (0..p.len()).flat_map(|i| p.words(i)).collect();
    let q: Vec<&str> = s.word_list.iter().filter(|(_, t)| !name.contains(t)).map(|(w, _)| w.as_str()).collect();
    let top = k.index.top_k(&q.join(" "), SIMILAR_K);
    let best = top.first().map_or(0.0, |t| t.1);
    top.iter().find(|(i, _)| *i == task).map_or(0.0, |(_, sc)| if best > 0.0 { sc / best } else { 0.0 })
}

/// Intent evidence for an access type in a session: reads and lists need none; writes,
/// creates and deletes need a prompt that asks for them, learned from the history.
pub fn intent_evidence(k: &Knowledge, s: &SessionView, p: &SanitizedPath, a: Access) -> (f32, String) {
    if matches!(a, Access::Read | Access::List) {
        return (1.0, format!("{a} needs no write intent"));
    }
    let mut best = (0.0f32, format!("nothing in the prompt or similar tasks asks for {a}"));
    for &(ti, w) in &s.similar {
        if w < MIN_SIMILARITY {
            continue;
        }
        for (sp, acc, _) in &k.tasks[ti].accesses {
            if *acc != a && !(a == Access::Write && *acc == Access::Create) && !(a == Access::Create && *acc == Access::Write) {
                continue;
            }
            let same = sp.same_segments(p);
            let sc = if same { w } else { 0.8 * w };
            bump(&mut best, sc, || format!("a similar past task (similarity {w:.2}) made {acc} accesses"));
        }
    }
    let q = s.query();
    let (wp, word) = k.intent.score(&q, a);
    if let Some(word) = word {
        let sc = (wp * 1.6).min(1.0);
        bump(&mut best, sc, || format!("the prompt word \"{word}\" goes with {a} in {:.0}% of past tasks", wp * 100.0));
    }
    best
}

#[cfg(test)]
mod reading_tests {
    use super::*;

    #[test]
    fn a_noun_of_approval_that_is_not_the_users_asks_nothing() {
        assert_eq!(text_permission("The specs in specs/ are what certification approval sees: add requirements, never remove them."), Some(Permission::Deny));
        assert_eq!(text_permission("Changes to specs/ need my approval."), Some(Permission::AskUser));
        assert_eq!(text_permission("Edit specs/ only with permission from me."), Some(Permission::AskUser));
        assert_eq!(text_permission("Ask me before editing specs/."), Some(Permission::AskUser));
    }

    #[test]
    fn a_restriction_covers_the_accesses_its_own_clause_names() {
        let s = "The specs in specs/ are what the auditors see: add requirements, never remove them.";
        assert_eq!(restricted_accesses(s, Permission::Deny), vec![Access::Delete]);
        let r = rules_from_text(s);
        assert!(r.iter().all(|r| !r.access.contains(&Access::Read)), "{r:?}");
        // "Don't touch" still covers every access.
        assert_eq!(restricted_accesses("Don't touch private/, it's mine.", Permission::Deny).len(), Access::ALL.len());
    }

    #[test]
    fn leave_them_alone_fences_what_the_sentence_before_named() {
        let tree: Vec<String> = ["calibration/", "calibration/unit-offsets.csv", "calibration/README.md", "src/", "src/a.c", "src/b.c", "src/c.c", "docs/", "docs/x.md", "docs/y.md"].iter().map(|s| s.to_string()).collect();
        let r = tree_rules("The calibration sheets hold every unit's factory offsets. Leave them alone; the scripts are fine to edit.", &tree);
        assert!(r.iter().any(|r| r.path_glob == "calibration/**" && r.permission == Permission::Deny && r.access.contains(&Access::Read)), "{r:?}");
    }
}
