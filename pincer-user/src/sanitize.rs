//! The keyed PRF that hides untrusted names from deciders.
//!
//! Every path segment is replaced by a short token: HMAC-SHA256 of the segment under a
//! secret key, truncated. The same segment always gives the same token, so files in one
//! directory share a sanitized prefix and requests can be matched against history, while
//! the names themselves lose their meaning. The key never leaves this module: deciders only
//! ever see tokens.
//!
//! Besides the whole-segment token, a segment with an extension (`report.pdf`) also gets an
//! extension token (the PRF of `.pdf`), so that user rules such as `**/*.pem` can be applied
//! to sanitized requests.
//!
//! A segment named by a content hash (git's `objects/88/7242…`, a cache's `sha512/ab/cd/…`,
//! `pack-<hash>.pack`) also gets a shape token: the PRF of the name with each hash replaced
//! by one mark, and the short hex folders that fan the hashes out above it marked too. Such
//! names are new for every object, so history never holds them; their shape says that a
//! request lies in the same store as a path a past task used ([`SanitizedPath::same_store`]).

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Length of the secret key in bytes.
pub const KEY_LEN: usize = 32;
/// Hex digits of the HMAC kept in a token (40 bits: collisions are negligible for the
/// few thousand distinct names a user's workspace holds).
const TOKEN_HEX: usize = 10;
/// Shortest run of hex digits taken for a content hash (git's abbreviated names are
/// shorter; its object names are 38 digits after the fan-out folder).
const HASH_MIN_HEX: usize = 20;
/// What a content hash becomes in a shape.
const HASH_MARK: &str = "\u{1}hash\u{1}";
/// The shape of a fan-out folder (a short hex name) above a hash-named segment.
const FANOUT_SHAPE: &str = "\u{1}fanout\u{1}";

/// Errors of the sanitizer.
#[derive(Debug, thiserror::Error)]
pub enum SanitizeError {
    /// The key file could not be read.
    #[error("cannot read the sanitizer key file {path}")]
    ReadKey {
        /// The key file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The key file could not be created or written.
    #[error("cannot write the sanitizer key file {path}")]
    WriteKey {
        /// The key file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The key file exists but does not hold a key.
    #[error("sanitizer key file {path} holds {len} bytes, expected {KEY_LEN}")]
    BadKeyLength {
        /// The key file.
        path: PathBuf,
        /// What it held.
        len: usize,
    },
    /// The key file can be read by other users.
    #[error("sanitizer key file {path} has mode {mode:o}; it must not be readable by group or others (chmod 600)")]
    KeyTooOpen {
        /// The key file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The operating system's random source failed.
    #[error("cannot draw a random key: {0}")]
    Random(getrandom::Error),
}

/// The sanitizer's secret key. Its `Debug` output never shows the bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretKey([u8; KEY_LEN]);

impl SecretKey {
    /// Draws a fresh key from the operating system's random source.
    pub fn generate() -> Result<Self, SanitizeError> {
        let mut k = [0u8; KEY_LEN];
        getrandom::fill(&mut k).map_err(SanitizeError::Random)?;
        Ok(SecretKey(k))
    }

    /// Wraps given key bytes (tests and deterministic evaluation runs).
    pub fn from_bytes(bytes: [u8; KEY_LEN]) -> Self {
        SecretKey(bytes)
    }
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretKey(..)")
    }
}

/// Bytes of a token's text: `t` and [`TOKEN_HEX`] hex digits.
const TOKEN_LEN: usize = 1 + TOKEN_HEX;

/// The sanitized form of one name segment: `t` followed by hex digits. Every token has the
/// same length, so it is held inline (a copy allocates nothing) and compares, orders and
/// prints as its text does.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Token([u8; TOKEN_LEN]);

impl Token {
    /// The token's text.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("a token is ASCII")
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Token").field(&self.as_str()).finish()
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for Token {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_newtype_struct("Token", self.as_str())
    }
}

/// A sanitized path: one token per segment, plus the extension token of each segment that
/// has an extension. Only a [`Sanitizer`] can make one.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SanitizedPath {
    segs: Vec<Token>,
    exts: Vec<Option<Token>>,
    words: Vec<Vec<Token>>,
    shapes: Vec<Option<Token>>,
    dir: bool,
}

/// Hashes the segment tokens and the directory mark only: the other fields are made from
/// the same segments, so equal paths still hash alike, and a lookup of a path in the twin's
/// indexes hashes a quarter of the tokens.
impl std::hash::Hash for SanitizedPath {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.segs.hash(state);
        self.dir.hash(state);
    }
}

impl SanitizedPath {
    /// The segment tokens, root first.
    pub fn tokens(&self) -> &[Token] {
        &self.segs
    }

    /// The extension token of segment `i`, if that segment has an extension.
    pub fn ext(&self, i: usize) -> Option<&Token> {
        self.exts.get(i).and_then(|e| e.as_ref())
    }

    /// The word tokens of segment `i` (see [`Sanitizer::word`]).
    pub fn words(&self, i: usize) -> &[Token] {
        self.words.get(i).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Number of segments.
    pub fn len(&self) -> usize {
        self.segs.len()
    }

    /// True for the empty path (the protected root itself).
    pub fn is_empty(&self) -> bool {
        self.segs.is_empty()
    }

    /// True if the original path named a directory (trailing `/`).
    pub fn is_dir(&self) -> bool {
        self.dir
    }

    /// The parent directory, or `None` for the root.
    pub fn parent(&self) -> Option<SanitizedPath> {
        if self.segs.is_empty() {
            return None;
        }
        let n = self.segs.len() - 1;
        Some(SanitizedPath {
            segs: self.segs[..n].to_vec(),
            exts: self.exts[..n].to_vec(),
            words: self.words[..n].to_vec(),
            shapes: self.shapes[..n].to_vec(),
            dir: true,
        })
    }

    /// True if `prefix`'s segments are a prefix of this path's segments.
    pub fn starts_with(&self, prefix: &SanitizedPath) -> bool {
        self.segs.len() >= prefix.segs.len() && self.segs[..prefix.segs.len()] == prefix.segs[..]
    }

    /// Number of leading segments this path shares with `other`.
    pub fn common_prefix_len(&self, other: &SanitizedPath) -> usize {
        self.segs.iter().zip(&other.segs).take_while(|(a, b)| a == b).count()
    }

    /// The last segment's token, if any.
    pub fn last(&self) -> Option<&Token> {
        self.segs.last()
    }

    /// The same path marked as a file or directory (the mark does not take part in prefix
    /// tests).
    pub fn with_dir(mut self, dir: bool) -> Self {
        self.dir = dir;
        self
    }

    /// Same segments, ignoring the directory mark.
    pub fn same_segments(&self, other: &SanitizedPath) -> bool {
        self.segs == other.segs
    }

    /// True if the two paths name objects of one content-addressed store: as many segments,
    /// each the same or both of one hash shape, at least one of them hash-named, and the
    /// same last segment's shape (`objects/88/7242…` and `objects/1f/0c3a…`, not
    /// `objects/88/` and `objects/1f/0c3a…`).
    pub fn same_store(&self, other: &SanitizedPath) -> bool {
        self.segs.len() == other.segs.len()
            && self.shapes.iter().any(Option::is_some)
            && (0..self.segs.len()).all(|i| match (&self.shapes[i], &other.shapes[i]) {
                (Some(a), Some(b)) => a == b,
                (None, None) => self.segs[i] == other.segs[i],
                _ => false,
            })
    }

    /// True if both paths have a parent and the parents have the same segments (what
    /// `parent()` of each would compare, without building them).
    pub fn same_parent(&self, other: &SanitizedPath) -> bool {
        match (self.segs.len().checked_sub(1), other.segs.len().checked_sub(1)) {
            (Some(a), Some(b)) => self.segs[..a] == other.segs[..b],
            _ => false,
        }
    }
}

impl fmt::Display for SanitizedPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.segs.iter().enumerate() {
            if i > 0 {
                f.write_str("/")?;
            }
            f.write_str(t.as_str())?;
        }
        if self.dir && !self.segs.is_empty() {
            f.write_str("/")?;
        }
        Ok(())
    }
}

/// One segment of a sanitized glob.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum GlobSeg {
    /// A literal segment, sanitized.
    Exact(Token),
    /// `*.ext`: any segment with this (sanitized) extension.
    Ext(Token),
    /// `*`: any one segment.
    Any,
    /// `**`: any number of segments, including none.
    AnyDeep,
    /// A pattern with literal word parts (such as `draft-*` or `id_*`): when the rule
    /// restricts (deny, ask) it matches any segment carrying all these word tokens; when it
    /// grants it matches none.
    Words(Vec<Token>),
    /// A pattern without literal parts that cannot be applied to tokens (such as `?`):
    /// matches any one segment when the rule restricts, none when it grants.
    Opaque,
}

/// A policy glob with literal segments sanitized, so it can be matched against
/// [`SanitizedPath`]s.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SanitizedGlob {
    segs: Vec<GlobSeg>,
}

impl SanitizedGlob {
    /// The segments.
    pub fn segs(&self) -> &[GlobSeg] {
        &self.segs
    }

    /// How specific the glob is: its number of segments that are not pure wildcards.
    pub fn specificity(&self) -> usize {
        self.segs.iter().filter(|s| !matches!(s, GlobSeg::Any | GlobSeg::AnyDeep | GlobSeg::Opaque)).count()
    }

    /// Matches `path`. `broad` decides how [`GlobSeg::Opaque`] behaves: true for
    /// restricting rules (opaque matches any segment), false for granting rules (matches none).
    pub fn matches(&self, path: &SanitizedPath, broad: bool) -> bool {
        fn go(g: &[GlobSeg], p: &SanitizedPath, i: usize, broad: bool) -> bool {
            match g.split_first() {
                None => i == p.len(),
                Some((GlobSeg::AnyDeep, rest)) => (i..=p.len()).any(|j| go(rest, p, j, broad)),
                Some((seg, rest)) => {
                    if i >= p.len() {
                        return false;
                    }
                    let ok = match seg {
                        GlobSeg::Exact(t) => &p.segs[i] == t,
                        GlobSeg::Ext(t) => p.ext(i) == Some(t),
                        GlobSeg::Any => true,
                        GlobSeg::Words(ws) => broad && ws.iter().all(|w| p.words(i).contains(w)),
                        GlobSeg::Opaque => broad,
                        GlobSeg::AnyDeep => unreachable!(),
                    };
                    ok && go(rest, p, i + 1, broad)
                }
            }
        }
        go(&self.segs, path, 0, broad)
    }
}

impl fmt::Display for SanitizedGlob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.segs.iter().enumerate() {
            if i > 0 {
                f.write_str("/")?;
            }
            match s {
                GlobSeg::Exact(t) => write!(f, "{t}")?,
                GlobSeg::Ext(t) => write!(f, "*.{t}")?,
                GlobSeg::Any => f.write_str("*")?,
                GlobSeg::AnyDeep => f.write_str("**")?,
                GlobSeg::Words(ws) => write!(f, "<pattern with {}>", ws.iter().map(Token::as_str).collect::<Vec<_>>().join("+"))?,
                GlobSeg::Opaque => f.write_str("<pattern>")?,
            }
        }
        Ok(())
    }
}

/// Splits a name or word into normalised word keys: lowercase alphanumeric runs of two or
/// more characters, with a plural `s` dropped.
pub fn word_keys(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() > 1)
        .map(|w| {
            let w = w.to_lowercase();
            if w.len() > 3 && w.ends_with('s') && !w.ends_with("ss") {
                w[..w.len() - 1].to_string()
            } else {
                w
            }
        })
        .collect()
}

/// The name with every content hash in it (a run of at least [`HASH_MIN_HEX`] hex digits,
/// with a digit and a letter, between non-alphanumeric characters or the ends) replaced by
/// one mark; `None` if it has none.
fn hash_shape(name: &str) -> Option<String> {
    let mut out = String::new();
    let mut found = false;
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        if !c.is_ascii_alphanumeric() {
            out.push(c);
            rest = &rest[c.len_utf8()..];
            continue;
        }
        let end = rest.find(|c: char| !c.is_ascii_alphanumeric()).unwrap_or(rest.len());
        let run = &rest[..end];
        rest = &rest[end..];
        let hex = run.len() >= HASH_MIN_HEX
            && run.bytes().all(|b| b.is_ascii_hexdigit())
            && run.bytes().any(|b| b.is_ascii_digit())
            && run.bytes().any(|b| b.is_ascii_alphabetic());
        if hex {
            out.push_str(HASH_MARK);
            found = true;
        } else {
            out.push_str(run);
        }
    }
    found.then_some(out)
}

/// A fan-out folder's name: two hex digits (git's objects, npm's and pip's caches).
pub fn is_fanout(name: &str) -> bool {
    name.len() == 2 && name.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Domains of the PRF ([`Sanitizer::prf`]'s first argument): segment, extension, word, shape.
const DOMAINS: usize = 4;
/// Most inputs remembered per table of a [`Memo`]; a full table is emptied and fills again.
const MEMO_MAX: usize = 1 << 14;
/// Most paths remembered ([`Memo::paths`]; a sanitized path is a few hundred bytes).
const MEMO_PATHS_MAX: usize = 1 << 12;
/// Longest name (bytes) whose token is remembered: a file name's limit on Linux. Longer
/// inputs (the worker chooses the names it touches) are computed each time, so the tables
/// stay within about 20 MB whatever names come.
const MEMO_NAME_MAX: usize = 255;
/// Longest path (bytes) whose sanitized form is remembered.
const MEMO_PATH_MAX: usize = 1024;

/// A table of a [`Memo`]: outputs by input.
type MemoTable<T> = std::sync::Mutex<std::collections::HashMap<Box<str>, T>>;

/// What a sanitizer has computed, by input: the tokens of each PRF domain and whole
/// sanitized paths. The PRF is a pure function of the key, the domain and the input (and a
/// sanitized path of the path and the PRF), so a remembered output is the output the
/// sanitizer would compute again: nothing here can go stale. It belongs to one key: it is
/// made with the sanitizer's HMAC ([`Sanitizer::new`]) and shared only by clones of that
/// sanitizer, which hold the same key. Outputs are not secret (deciders see them); the
/// inputs are names the twin holds anyway, and never leave it.
#[derive(Default)]
struct Memo {
    tokens: [MemoTable<Token>; DOMAINS],
    paths: MemoTable<SanitizedPath>,
}

/// The output remembered for `input` in `table`, or `make`'s, remembered (a full table,
/// `max` inputs, is emptied first).
/// An input longer than `longest` is computed and not remembered.
fn remembered<T: Clone>(table: &MemoTable<T>, (max, longest): (usize, usize), input: &str, make: impl FnOnce() -> T) -> T {
    if input.len() > longest {
        return make();
    }
    let lock = || table.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(t) = lock().get(input) {
        return t.clone();
    }
    let t = make();
    let mut table = lock();
    if table.len() >= max {
        table.clear();
    }
    table.insert(input.into(), t.clone());
    t
}

/// The keyed PRF over names. Holds the key; hands out only tokens.
#[derive(Clone)]
pub struct Sanitizer {
    /// HMAC-SHA-256 keyed once: its inner and outer pads are hashed here, not per token.
    mac: Hmac<Sha256>,
    /// Tokens and paths already computed under this key (a decision sanitizes the same
    /// path twice, and the same folder and word names again and again; one PRF is two
    /// SHA-256 blocks).
    memo: std::sync::Arc<Memo>,
}

impl fmt::Debug for Sanitizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Sanitizer { key: .. }")
    }
}

impl Sanitizer {
    /// A sanitizer with the given key.
    pub fn new(key: SecretKey) -> Self {
        Sanitizer { mac: <Hmac<Sha256> as Mac>::new_from_slice(&key.0).expect("HMAC takes any key length"), memo: Default::default() }
    }

    /// Loads the key from `path`, or creates the file (mode 0600, fresh random key) if it
    /// does not exist. A file readable by group or others is refused.
    pub fn load_or_create(path: impl AsRef<Path>) -> Result<Self, SanitizeError> {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let path = path.as_ref();
        match std::fs::read(path) {
            Ok(bytes) => {
                let mode = std::fs::metadata(path)
                    .map_err(|source| SanitizeError::ReadKey { path: path.into(), source })?
                    .permissions()
                    .mode();
                if mode & 0o077 != 0 {
                    return Err(SanitizeError::KeyTooOpen { path: path.into(), mode: mode & 0o777 });
                }
                let key: [u8; KEY_LEN] = bytes
                    .as_slice()
                    .try_into()
                    .map_err(|_| SanitizeError::BadKeyLength { path: path.into(), len: bytes.len() })?;
                Ok(Sanitizer::new(SecretKey(key)))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let key = SecretKey::generate()?;
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(path)
                    .map_err(|source| SanitizeError::WriteKey { path: path.into(), source })?;
                f.write_all(&key.0)
                    .and_then(|_| f.sync_all())
                    .map_err(|source| SanitizeError::WriteKey { path: path.into(), source })?;
                Ok(Sanitizer::new(key))
            }
            Err(source) => Err(SanitizeError::ReadKey { path: path.into(), source }),
        }
    }

    /// The token of `s` in `domain` (remembered: [`Memo`]).
    fn prf(&self, domain: u8, s: &str) -> Token {
        remembered(&self.memo.tokens[usize::from(domain)], (MEMO_MAX, MEMO_NAME_MAX), s, || self.prf_uncached(domain, s))
    }

    /// The PRF itself: `t` and the first [`TOKEN_HEX`] hex digits of
    /// HMAC-SHA-256(key, domain || s).
    fn prf_uncached(&self, domain: u8, s: &str) -> Token {
        let mut mac = self.mac.clone();
        mac.update(&[domain]);
        mac.update(s.as_bytes());
        let out = mac.finalize().into_bytes();
        let mut t = [0u8; TOKEN_LEN];
        t[0] = b't';
        hex::encode_to_slice(&out[..TOKEN_HEX / 2], &mut t[1..]).expect("TOKEN_HEX digits fit");
        Token(t)
    }

    /// The token of one name segment.
    pub fn segment(&self, s: &str) -> Token {
        self.prf(0, s)
    }

    /// The token of a word (a name part or a prompt word), normalised by [`word_keys`]: a
    /// request segment `meeting-notes.md` carries the word tokens of `meeting` and `note`,
    /// which equal the word tokens of those words typed in a prompt.
    pub fn word(&self, w: &str) -> Option<Token> {
        word_keys(w).first().map(|k| self.prf(2, k))
    }

    /// The token of an extension (given without the dot, lowercase is applied).
    pub fn extension(&self, ext: &str) -> Token {
        self.prf(1, &ext.to_ascii_lowercase())
    }

    fn ext_of(&self, seg: &str) -> Option<Token> {
        let dot = seg.rfind('.')?;
        if dot == 0 || dot + 1 == seg.len() {
            // `.env` style names: the whole name is the extension.
            if dot == 0 && seg.len() > 1 {
                return Some(self.extension(&seg[1..]));
            }
            return None;
        }
        Some(self.extension(&seg[dot + 1..]))
    }

    /// Sanitizes a `/`-separated relative path segment by segment. Empty segments and a
    /// leading `./` are dropped; a trailing `/` marks a directory.
    pub fn path(&self, p: &str) -> SanitizedPath {
        remembered(&self.memo.paths, (MEMO_PATHS_MAX, MEMO_PATH_MAX), p, || self.path_uncached(p))
    }

    /// [`Sanitizer::path`], computed.
    fn path_uncached(&self, p: &str) -> SanitizedPath {
        let dir = p.ends_with('/');
        let mut segs = Vec::new();
        let mut exts = Vec::new();
        let mut words = Vec::new();
        let raw: Vec<&str> = p.split('/').filter(|s| !s.is_empty() && *s != ".").collect();
        let mut shapes: Vec<Option<String>> = raw.iter().map(|s| hash_shape(s)).collect();
        // The short hex folders right above a hash-named segment fan the store out.
        for i in (0..raw.len()).rev() {
            if shapes[i].as_deref().is_some_and(|s| s != FANOUT_SHAPE) {
                let mut j = i;
                while j > 0 && shapes[j - 1].is_none() && is_fanout(raw[j - 1]) {
                    shapes[j - 1] = Some(FANOUT_SHAPE.to_string());
                    j -= 1;
                }
            }
        }
        let shapes = shapes.into_iter().map(|s| s.map(|s| self.prf(3, &s))).collect();
        for s in raw {
            segs.push(self.segment(s));
            exts.push(self.ext_of(s));
            let stem = match s.rfind('.') {
                Some(d) if d > 0 => &s[..d],
                _ => s,
            };
            let mut ws: Vec<Token> = word_keys(stem).iter().map(|w| self.prf(2, w)).collect();
            ws.dedup();
            words.push(ws);
        }
        SanitizedPath { segs, exts, words, shapes, dir }
    }

    /// Sanitizes a policy glob: literal segments become tokens, `*.ext` becomes an extension
    /// match, `*` and `**` stay, any other pattern becomes [`GlobSeg::Opaque`]. A glob ending
    /// in `/` matches the directory and everything below it.
    pub fn glob(&self, g: &str) -> SanitizedGlob {
        let mut segs: Vec<GlobSeg> = Vec::new();
        for s in g.split('/').filter(|s| !s.is_empty() && *s != ".") {
            let meta = crate::glob::is_glob(s);
            let seg = if !meta {
                GlobSeg::Exact(self.segment(s))
            } else if s == "**" {
                GlobSeg::AnyDeep
            } else if s == "*" {
                GlobSeg::Any
            } else if let Some(ext) = s.strip_prefix("*.").filter(|e| !crate::glob::is_glob(e) && !e.contains('.')) {
                GlobSeg::Ext(self.extension(ext))
            } else {
                let lit: String = s.chars().map(|c| if matches!(c, '*' | '?' | '[' | ']' | '{' | '}') { ' ' } else { c }).collect();
                let ws: Vec<Token> = word_keys(&lit).iter().map(|w| self.prf(2, w)).collect();
                if ws.is_empty() {
                    GlobSeg::Opaque
                } else {
                    GlobSeg::Words(ws)
                }
            };
            segs.push(seg);
        }
        if g.ends_with('/') {
            segs.push(GlobSeg::AnyDeep);
        }
        SanitizedGlob { segs }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(k: u8) -> Sanitizer {
        Sanitizer::new(SecretKey::from_bytes([k; KEY_LEN]))
    }

    #[test]
    fn remembered_tokens_and_paths_are_the_ones_computed_under_the_same_key() {
        let (a, b) = (s(1), s(2));
        for p in ["projects/ledger/src/main.rs", "notes/", ".git/objects/88/7242aa0c1d9e3f4b5a6c7d8e9f0a1b2c3d4e5f60", "a/b.tar.gz"] {
            for _ in 0..2 {
                assert_eq!(a.path(p), a.path_uncached(p), "{p}");
                assert_eq!(a.clone().path(p), a.path_uncached(p), "a clone shares the key and what it remembers");
                assert_eq!(b.path(p), b.path_uncached(p), "another key remembers its own");
            }
            assert_ne!(a.path(p), b.path(p));
        }
        for d in 0..DOMAINS as u8 {
            assert_eq!(a.prf(d, "ledger"), a.prf_uncached(d, "ledger"));
            assert_eq!(a.prf(d, "ledger"), a.prf_uncached(d, "ledger"));
        }
        assert_eq!(a.prf(0, "x").as_str().len(), TOKEN_LEN);
        assert_eq!(format!("{:?}", a.prf(0, "x")), format!("Token({:?})", a.prf(0, "x").as_str()));
    }

    /// The worker chooses the names it touches: names past a file name's limit are not
    /// remembered, and a table never holds more than its bound.
    #[test]
    fn what_is_remembered_stays_bounded_whatever_names_come() {
        let a = s(3);
        let long = "n".repeat(MEMO_NAME_MAX + 1);
        assert_eq!(a.prf(0, &long), a.prf_uncached(0, &long));
        let long_path = format!("{}/x", "d/".repeat(MEMO_PATH_MAX));
        assert_eq!(a.path(&long_path), a.path_uncached(&long_path));
        let held = |t: &MemoTable<Token>| t.lock().unwrap().len();
        assert!(!a.memo.tokens[0].lock().unwrap().contains_key(long.as_str()), "a name past the limit is not remembered");
        assert_eq!(a.memo.paths.lock().unwrap().len(), 0, "a path past the limit is not remembered");
        for i in 0..MEMO_MAX + 10 {
            a.prf(1, &format!("name-{i}"));
        }
        assert!(held(&a.memo.tokens[1]) <= MEMO_MAX);
    }

    #[test]
    fn same_parent_is_what_comparing_parents_gives() {
        let k = s(1);
        let paths = ["a/b/c.txt", "a/b/d.txt", "a/x/c.txt", "a/b", "a", "b/c.txt", "a/b/c/d.txt"];
        for x in paths {
            for y in paths {
                let (px, py) = (k.path(x), k.path(y));
                let slow = px.parent().zip(py.parent()).is_some_and(|(a, b)| a.same_segments(&b));
                assert_eq!(px.same_parent(&py), slow, "{x} and {y}");
            }
        }
    }

    #[test]
    fn deterministic() {
        assert_eq!(s(1).path("a/b/c.txt"), s(1).path("a/b/c.txt"));
        assert_eq!(s(1).segment("x"), s(1).segment("x"));
    }

    #[test]
    fn different_keys_unrelated() {
        let a = s(1).path("projects/app/main.rs");
        let b = s(2).path("projects/app/main.rs");
        for (x, y) in a.tokens().iter().zip(b.tokens()) {
            assert_ne!(x, y);
        }
    }

    #[test]
    fn no_text_survives() {
        let p = "secrets/prod.env";
        let out = s(3).path(p).to_string();
        for seg in ["secrets", "prod", "env"] {
            assert!(!out.contains(seg), "{out} leaks {seg}");
        }
    }

    #[test]
    fn prefixes_shared_exactly_with_directories() {
        let z = s(4);
        let a = z.path("p/q/r.txt");
        let b = z.path("p/q/s.txt");
        let c = z.path("p/x/r.txt");
        assert_eq!(a.common_prefix_len(&b), 2);
        assert_eq!(a.common_prefix_len(&c), 1);
        assert_eq!(a.parent(), b.parent());
        assert_ne!(a.parent(), c.parent());
        assert!(a.starts_with(&z.path("p/q/")));
        assert!(!c.starts_with(&z.path("p/q/")));
    }

    #[test]
    fn globs_match_sanitized_paths() {
        let z = s(5);
        let g = z.glob("secrets/**");
        assert!(g.matches(&z.path("secrets/a/b"), false));
        assert!(!g.matches(&z.path("public/a"), false));
        let e = z.glob("**/*.pem");
        assert!(e.matches(&z.path("x/y/key.PEM"), false));
        assert!(!e.matches(&z.path("x/y/key.txt"), false));
        let d = z.glob("**/.env");
        assert!(d.matches(&z.path("a/.env"), false));
        let o = z.glob("notes/draft-*");
        assert!(o.matches(&z.path("notes/draft-1"), true));
        assert!(!o.matches(&z.path("notes/final-1"), true));
        assert!(!o.matches(&z.path("notes/draft-1"), false));
        let q = z.glob("notes/?");
        assert!(q.matches(&z.path("notes/a"), true));
        assert!(!q.matches(&z.path("notes/a"), false));
    }

    #[test]
    fn names_of_one_content_addressed_store_share_a_shape() {
        let k = s(1);
        let a = k.path("calc/.git/objects/88/7242454f5feb3a7bb8767c769715e1739cfdaa");
        let b = k.path("calc/.git/objects/1f/0c3a9be2d41f5e6a7b8c9d0e1f2a3b4c5d6e7f80");
        assert!(a.same_store(&b) && b.same_store(&a));
        assert!(!a.same_segments(&b));
        // Packs: the hash inside a name with a prefix and an extension.
        let p1 = k.path("calc/.git/objects/pack/pack-4b825dc642cb6eb9a060e54bf8d69288fbee4904.pack");
        let p2 = k.path("calc/.git/objects/pack/pack-0123456789abcdef0123456789abcdef01234567.pack");
        let idx = k.path("calc/.git/objects/pack/pack-0123456789abcdef0123456789abcdef01234567.idx");
        assert!(p1.same_store(&p2) && !p1.same_store(&idx));
        // Several fan-out levels (pip's wheel cache).
        let w1 = k.path(".cache/pip/wheels/3f/2a/9b/0c1d2e3f4a5b6c7d8e9f0a1b2c3d/x.whl");
        let w2 = k.path(".cache/pip/wheels/aa/bb/cc/9f8e7d6c5b4a3f2e1d0c9b8a7f6e/x.whl");
        assert!(w1.same_store(&w2));
    }

    #[test]
    fn a_store_is_not_another_place_or_an_ordinary_name() {
        let k = s(1);
        let obj = k.path("calc/.git/objects/88/7242454f5feb3a7bb8767c769715e1739cfdaa");
        // Another repository's store, a fan-out folder alone, a hex name elsewhere.
        assert!(!obj.same_store(&k.path("other/.git/objects/1f/0c3a9be2d41f5e6a7b8c9d0e1f2a3b4c5d6e7f80")));
        assert!(!obj.same_store(&k.path("calc/.git/objects/88/")));
        assert!(!obj.same_store(&k.path("calc/.git/refs/88/0c3a9be2d41f5e6a7b8c9d0e1f2a3b4c5d6e7f80")));
        // Names with no hash have no shape: two files in one folder are not one store.
        assert!(!k.path("calc/a.py").same_store(&k.path("calc/b.py")));
        // Long words, all-digit numbers and short hex are not hashes.
        for name in ["deadbeefdeadbeefdeadbeef", "12345678901234567890123", "abc123", "ab12cd34ef56ab78cd9"] {
            assert!(hash_shape(name).is_none(), "{name}");
        }
        assert!(hash_shape("état-0123456789abcdef0123.log").is_some());
        // The shape is a token: no hex of the name survives.
        let text = format!("{:?}", obj.shapes);
        assert!(!text.contains("7242454f"), "{text}");
    }

    #[test]
    fn key_file_is_created_private_and_reloaded() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("key");
        let a = Sanitizer::load_or_create(&p).unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        let b = Sanitizer::load_or_create(&p).unwrap();
        assert_eq!(a.segment("x"), b.segment("x"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(Sanitizer::load_or_create(&p), Err(SanitizeError::KeyTooOpen { .. })));
    }
}
