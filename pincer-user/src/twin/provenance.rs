//! Content provenance: fingerprints of the content of protected resources (shingled hashes
//! of their word sequences) and the entities that occur in them, so that a copy of protected
//! content is recognised wherever it is placed and whatever it is called.
//!
//! Fingerprints are trusted state: they are taken from the user's workspace when the user
//! imports or refreshes their policies, never from what the worker sends. Shingles and
//! entities that also occur in the unprotected files of that workspace are public (the user
//! has them outside the protected areas) and are dropped, so a pristine unprotected file never
//! matches.

use super::content::entities;
use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};

/// Words per shingle.
pub const SHINGLE_WORDS: usize = 6;
/// Shared shingles that make a content a copy of protected content.
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
    sources: usize,
}

/// How a content overlaps protected content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProvenanceHit {
    /// Shingles shared with protected content.
    pub shingles: usize,
    /// Identifiers shared with protected content.
    pub entities: usize,
    /// Names of people shared with protected content.
    pub names: usize,
}

fn is_name(e: &str) -> bool {
    e.starts_with("p:")
}

fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

fn capped(c: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(&c[..c.len().min(MAX_FINGERPRINT_BYTES)])
}

impl Provenance {
    /// Fingerprints `protected` contents, less what also occurs in the `public` ones.
    pub fn build<'a>(protected: impl IntoIterator<Item = &'a [u8]>, public: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let mut p = Provenance::default();
        for c in protected {
            let t = capped(c);
            p.shingles.extend(p.shingle_hashes(&t));
            for e in entities(&t) {
                let h = p.hasher.hash_one(&e);
                if is_name(&e) { p.names.insert(h) } else { p.entities.insert(h) };
            }
            p.sources += 1;
        }
        for c in public {
            let t = capped(c);
            for h in p.shingle_hashes(&t) {
                p.shingles.remove(&h);
            }
            for e in entities(&t) {
                let h = p.hasher.hash_one(&e);
                p.entities.remove(&h);
                p.names.remove(&h);
            }
        }
        p
    }

    fn shingle_hashes(&self, text: &str) -> Vec<u64> {
        let ws = words(text);
        if ws.len() < SHINGLE_WORDS {
            return if ws.len() >= 3 { vec![self.hasher.hash_one(ws.join(" "))] } else { vec![] };
        }
        ws.windows(SHINGLE_WORDS).map(|w| self.hasher.hash_one(w.join(" "))).collect()
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
    /// as protected: [`MIN_SHARED_SHINGLES`] shingles, [`MIN_SHARED_ENTITIES`] identifiers, or
    /// one identifier and two names.
    pub fn check(&self, content: &[u8]) -> Option<ProvenanceHit> {
        if self.is_empty() {
            return None;
        }
        let t = capped(content);
        let mut sh: Vec<u64> = self.shingle_hashes(&t).into_iter().filter(|h| self.shingles.contains(h)).collect();
        sh.sort_unstable();
        sh.dedup();
        let (mut en, mut na) = (0, 0);
        for e in entities(&t) {
            let h = self.hasher.hash_one(&e);
            if is_name(&e) {
                na += self.names.contains(&h) as usize;
            } else {
                en += self.entities.contains(&h) as usize;
            }
        }
        let hit = sh.len() >= MIN_SHARED_SHINGLES || en >= MIN_SHARED_ENTITIES || (en >= 1 && na >= 2);
        hit.then_some(ProvenanceHit { shingles: sh.len(), entities: en, names: na })
    }
}
