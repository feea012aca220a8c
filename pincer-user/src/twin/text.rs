//! Text building blocks: a word tokenizer, a BM25 index over prompts, names typed in a
//! prompt, and an access-intent model learned from which prompt words co-occur with which
//! access types in the history.

use crate::access::Access;
use std::collections::HashMap;

/// Generic English function words, ignored by similarity and intent.
const STOPWORDS: &[&str] = &[
    "a", "an", "the", "and", "or", "but", "if", "then", "so", "of", "to", "in", "on", "at", "by", "for", "with", "from",
    "into", "onto", "about", "as", "is", "are", "was", "were", "be", "been", "being", "it", "its", "this", "that", "these",
    "those", "i", "me", "my", "we", "our", "you", "your", "he", "she", "they", "them", "their", "his", "her", "please",
    "can", "could", "would", "should", "will", "shall", "may", "might", "do", "does", "did", "have", "has", "had", "not",
    "no", "yes", "all", "any", "some", "each", "every", "there", "here", "what", "which", "who", "whom", "when", "where",
    "why", "how", "up", "out", "over", "under", "again", "also", "just", "only", "too", "very", "s", "t", "let", "lets",
    "via", "per", "than", "both", "before", "after", "while", "one", "new", "now", "today", "need", "needs", "want",
];

fn is_stopword(w: &str) -> bool {
    STOPWORDS.contains(&w)
}

/// The word a sentence leads with, once function words are skipped: in an imperative prompt
/// ("Please update the guide"), its verb.
pub fn leading_word(sentence: &str) -> Option<String> {
    sentence.split(|c: char| !c.is_alphanumeric()).filter(|w| w.len() > 1).map(str::to_lowercase).find(|w| !is_stopword(w))
}

/// A light suffix stemmer (plural and common verb endings), enough to make "updates",
/// "updated" and "updating" meet.
pub fn stem(w: &str) -> String {
    let w = w.to_lowercase();
    for suf in ["ing", "ed", "es", "s"] {
        if w.len() > suf.len() + 3 && w.ends_with(suf) {
            let base = &w[..w.len() - suf.len()];
            if suf == "s" && base.ends_with('s') {
                return w;
            }
            return base.to_string();
        }
    }
    w
}

/// The stemmed content words of a text (lowercase, alphanumeric runs, no stopwords).
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| w.to_lowercase())
        .filter(|w| w.len() > 1 && !is_stopword(w))
        .map(|w| stem(&w))
        .collect()
}

/// The raw lowercase word parts of a name or text (alphanumeric runs, unstemmed, no
/// stopwords): what a path segment and a prompt word are compared on.
pub fn name_parts(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 1)
        .map(|w| w.to_lowercase())
        .filter(|w| !is_stopword(w))
        .collect()
}

/// Things in a prompt that look like file or directory names the user typed: chunks with a
/// `/`, or with a dot followed by a short extension, or inside backticks or quotes.
pub fn typed_names(prompt: &str) -> Vec<String> {
    let mut out = Vec::new();
    for chunk in prompt.split_whitespace() {
        let c = chunk.trim_matches(|c: char| matches!(c, ',' | ';' | ':' | '(' | ')' | '"' | '\'' | '`' | '!' | '?' | '<' | '>'));
        let c = c.strip_suffix('.').unwrap_or(c);
        if c.is_empty() || c.contains("://") {
            continue;
        }
        let has_slash = c.contains('/') && c.chars().any(|ch| ch.is_alphanumeric());
        let has_ext = c
            .rsplit_once('.')
            .map(|(base, ext)| {
                (!base.is_empty() || c.starts_with('.'))
                    && (1..=6).contains(&ext.len())
                    && !(base.len() == 1 && ext.len() == 1)
                    && ext.chars().all(|ch| ch.is_ascii_alphanumeric())
                    && ext.chars().any(|ch| ch.is_ascii_alphabetic())
            })
            .unwrap_or(false);
        let dotfile = c.len() > 2 && c.starts_with('.') && c[1..].chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-' || ch == '.');
        if has_slash || has_ext || dotfile {
            out.push(c.trim_start_matches("./").to_string());
        }
    }
    out
}

/// A BM25 index over documents (prompts). Documents can be added at any time; scores use
/// the current document frequencies.
#[derive(Debug, Clone, Default)]
pub struct Bm25Index {
    postings: HashMap<String, Vec<(u32, u16)>>,
    doc_len: Vec<u32>,
    total_len: u64,
}

/// BM25 term-frequency saturation.
const K1: f32 = 1.2;
/// BM25 length normalisation.
const B: f32 = 0.75;

impl Bm25Index {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a document; returns its number.
    pub fn add(&mut self, text: &str) -> usize {
        let id = self.doc_len.len() as u32;
        let ws = words(text);
        let mut tf: HashMap<String, u16> = HashMap::new();
        for w in &ws {
            *tf.entry(w.clone()).or_default() += 1;
        }
        for (w, n) in tf {
            self.postings.entry(w).or_default().push((id, n));
        }
        self.doc_len.push(ws.len() as u32);
        self.total_len += ws.len() as u64;
        id as usize
    }

    /// Number of documents.
    pub fn len(&self) -> usize {
        self.doc_len.len()
    }

    /// True if empty.
    pub fn is_empty(&self) -> bool {
        self.doc_len.is_empty()
    }

    /// Inverse document frequency of a (stemmed) word; 0 for unknown words.
    pub fn idf(&self, w: &str) -> f32 {
        let n = self.doc_len.len() as f32;
        match self.postings.get(w) {
            Some(p) => ((n - p.len() as f32 + 0.5) / (p.len() as f32 + 0.5) + 1.0).ln(),
            None => 0.0,
        }
    }

    /// BM25 scores of every document that shares a word with `query`, best first, at most
    /// `k` of them.
    pub fn top_k(&self, query: &str, k: usize) -> Vec<(usize, f32)> {
        let n = self.doc_len.len();
        if n == 0 {
            return vec![];
        }
        let avg = (self.total_len as f32 / n as f32).max(1.0);
        let mut q = words(query);
        q.sort();
        q.dedup();
        let mut scores: HashMap<u32, f32> = HashMap::new();
        for w in &q {
            if let Some(p) = self.postings.get(w) {
                let idf = self.idf(w);
                for &(d, tf) in p {
                    let tf = tf as f32;
                    let dl = self.doc_len[d as usize] as f32;
                    *scores.entry(d).or_default() += idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * dl / avg));
                }
            }
        }
        let mut v: Vec<(usize, f32)> = scores.into_iter().map(|(d, s)| (d as usize, s)).filter(|(_, s)| *s > 0.0).collect();
        v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        v.truncate(k);
        v
    }
}

/// Which prompt words go with which access types, learned from the history: for every word,
/// in how many tasks it appeared and in how many of those the task made each access type.
#[derive(Debug, Clone, Default)]
pub struct IntentModel {
    word_tasks: HashMap<String, [u32; 6]>,
    base: [u32; 6],
}

fn slot(a: Access) -> usize {
    match a {
        Access::Read => 0,
        Access::Write => 1,
        Access::Create => 2,
        Access::Delete => 3,
        Access::List => 4,
    }
}

/// Occurrences a word needs before its own statistics are trusted over the prior.
const PRIOR_WEIGHT: f32 = 2.0;

impl IntentModel {
    /// An empty model.
    pub fn new() -> Self {
        Self::default()
    }

    /// Learns from one task: its prompt and the access types it made.
    pub fn add(&mut self, prompt: &str, accesses: impl IntoIterator<Item = Access>) {
        let mut made = [false; 5];
        for a in accesses {
            made[slot(a)] = true;
        }
        let mut ws = words(prompt);
        ws.sort();
        ws.dedup();
        for w in ws {
            let e = self.word_tasks.entry(w).or_default();
            e[5] += 1;
            for (c, m) in e.iter_mut().zip(made) {
                *c += m as u32;
            }
        }
        self.base[5] += 1;
        for (c, m) in self.base.iter_mut().zip(made) {
            *c += m as u32;
        }
    }

    /// The base rate of tasks that made access `a`.
    pub fn base_rate(&self, a: Access) -> f32 {
        if self.base[5] == 0 {
            return 0.0;
        }
        self.base[slot(a)] as f32 / self.base[5] as f32
    }

    /// Probability that a task with this prompt makes access `a`: the largest smoothed
    /// per-word rate among the prompt's words (shrunk towards the base rate for rare words),
    /// with the word that gave it.
    pub fn score(&self, prompt: &str, a: Access) -> (f32, Option<String>) {
        let base = self.base_rate(a);
        let mut best = (0.0f32, None);
        for w in words(prompt) {
            if let Some(e) = self.word_tasks.get(&w) {
                let n = e[5] as f32;
                let k = e[slot(a)] as f32;
                let p = (k + PRIOR_WEIGHT * base * 0.5) / (n + PRIOR_WEIGHT);
                if p > best.0 {
                    best = (p, Some(w));
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bm25_ranks_shared_rare_words_first() {
        let mut ix = Bm25Index::new();
        ix.add("Add a verbose flag to the ledger CLI");
        ix.add("Summarize the meeting notes from Monday");
        ix.add("Fix the ledger parser bug");
        let top = ix.top_k("update the ledger CLI help", 3);
        assert_eq!(top[0].0, 0);
        assert!(top.iter().all(|(d, _)| *d != 1));
    }

    #[test]
    fn typed_names_found() {
        let n = typed_names("Update `src/cli.rs` and README.md, then check notes/ (not e.g. this).");
        assert_eq!(n, vec!["src/cli.rs", "README.md", "notes/"]);
    }

    #[test]
    fn intent_learns_write_words() {
        let mut m = IntentModel::new();
        for _ in 0..4 {
            m.add("Fix the parser", [Access::Read, Access::Write]);
            m.add("Summarize the report", [Access::Read]);
        }
        m.add("Remove old logs", [Access::Delete, Access::List]);
        assert!(m.score("fix it", Access::Write).0 > 0.6);
        assert!(m.score("summarize it", Access::Write).0 < 0.2);
        assert!(m.score("summarize it", Access::Delete).0 < 0.2);
        assert!(m.score("remove the logs", Access::Delete).0 > 0.3);
    }
}
