//! Credentials recognised by structure and content, not by file name: private key blocks
//! (PEM, OpenSSH, PuTTY, age), provider tokens in their published formats (gitleaks' rule
//! set, kept as data with its licence: [`super::rules`]), logins in the shapes tools store them (netrc, a registry's
//! `auth`, `user:password@` in URLs, `-u user:pass` and `Authorization` headers in commands),
//! cloud credential files, tokens in a URL's path or query, and all of these again inside
//! base64 or hex, decoded at most [`MAX_DECODE_DEPTH`] times.
//!
//! Ciphertext (an encrypted file's armour, SOPS values, sealed secrets: high-entropy bytes
//! that decode to no text) and public keys or certificates are not secrets. Every check is
//! bounded: at most [`MAX_INSPECT_BYTES`] of a content are read, at most [`MAX_BLOBS`]
//! encoded values decoded, so that no input (binary, invalid UTF-8, very large, deeply
//! nested) can make the detector panic or run long.

use super::content::{entropy, Finding, FindingKind, Gate};
use base64::Engine as _;
use regex::Regex;
use std::sync::OnceLock;

/// Bytes of a content the detectors read; a longer content is reported as
/// [`FindingKind::Oversize`] besides what its first part holds.
pub const MAX_INSPECT_BYTES: usize = 1 << 20;
/// How many times an encoded value is decoded (base64 inside base64, hex inside base64).
pub const MAX_DECODE_DEPTH: usize = 2;
/// Most encoded values decoded in one content, over all depths.
pub const MAX_BLOBS: usize = 256;

struct Compiled {
    private_key: Regex,
    putty: Regex,
    netrc: Regex,
    registry_auth: Regex,
    auth_header: Regex,
    cli_user: Regex,
    cli_password: Regex,
    url_login: Regex,
    url: Regex,
    query_secret: Regex,
    cloud_secret: Regex,
    base64: Regex,
    hex: Regex,
    byte_list: Regex,
    labelled_hex: Regex,
    psk: Regex,
}

fn compiled() -> &'static Compiled {
    static C: OnceLock<Compiled> = OnceLock::new();
    C.get_or_init(|| {
        Compiled {
            private_key: Regex::new(r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY(?: BLOCK)?-----").expect("regex"),
            putty: Regex::new(r"PuTTY-User-Key-File-\d+:[^\n]*\n(?s:.{0,2000}?)Private-Lines:").expect("regex"),
            netrc: Regex::new(r"(?m)(?:^|\s)(?:machine\s+\S+|default)\s+(?:login\s+(\S+)\s+)?password\s+(\S+)").expect("regex"),
            registry_auth: Regex::new(r#""(?:auth|identitytoken|registrytoken)"\s*:\s*"([A-Za-z0-9+/=_.-]{8,})""#).expect("regex"),
            auth_header: Regex::new(r"(?i)\b(?:proxy-)?authorization\s*[:=]\s*['\x22]?\s*(basic|bearer|token|digest)\s+([A-Za-z0-9._~+/=-]{8,})").expect("regex"),
            cli_user: Regex::new(r#"(?:^|\s)(?:-u|--user|--basic-auth|--auth)[=\s]+['"]?([^\s:'"]{1,64}):([^\s'"]{4,128})"#).expect("regex"),
            cli_password: Regex::new(r#"(?:^|\s)(?:--password|--passwd|--pass|--token|--api-key|--secret|-p)(?:=|\s+)?['"]?([^\s'"-][^\s'"]{5,127})"#).expect("regex"),
            url_login: Regex::new(r"\b[a-zA-Z][a-zA-Z0-9+.-]{1,15}://([^/\s:@'\x22]{1,64}):([^/\s@'\x22]{1,128})@([A-Za-z0-9.-]+)").expect("regex"),
            url: Regex::new(r#"\bhttps?://[^\s'"<>`)\]]{4,2048}"#).expect("regex"),
            query_secret: Regex::new(r"(?i)[?&;](?:access_token|token|api_?key|apikey|key|sig|signature|secret|client_secret|password|passwd|auth|x-amz-signature|x-amz-security-token|x-goog-signature|code_secret)=([^&\s#'\x22]{12,})").expect("regex"),
            cloud_secret: Regex::new(r"(?im)^\s*(?:aws_secret_access_key|aws_session_token|azure_client_secret|client_secret|refresh_token)\s*[:=]\s*['\x22]?([A-Za-z0-9/+=._~-]{16,})").expect("regex"),
            base64: Regex::new(r"[A-Za-z0-9+/_-]{24,}={0,2}").expect("regex"),
            hex: Regex::new(r"\b[0-9a-fA-F]{32,}\b").expect("regex"),
            // A C or Python initializer of bytes: `name[] = { 0x30, 0x77, ... }` (the name, if
            // any, and the list), at least 16 bytes.
            byte_list: Regex::new(r"(?:([A-Za-z_][A-Za-z0-9_]*)\s*\[\s*\w*\s*\]\s*=\s*)?[{\[(]\s*((?:0x[0-9a-fA-F]{1,2}\s*,\s*){15,}0x[0-9a-fA-F]{1,2})\s*,?\s*[}\])]").expect("regex"),
            // A label and a 128-, 192- or 256-bit hex value after it on its line.
            labelled_hex: Regex::new(r#"(?im)\b([a-z0-9_.-]*[a-z0-9]+)["']?[ \t]*[:=]?[ \t]*["']?(?:0x)?([0-9a-f]{32}|[0-9a-f]{48}|[0-9a-f]{64})["']?(?:$|[\s,;])"#).expect("regex"),
            // A Wi-Fi network's pre-shared key (wpa_supplicant, hostapd, NetworkManager).
            psk: Regex::new(r#"(?im)^[ \t]*(?:psk|wpa_passphrase|wpa_psk|sae_password)[ \t]*=[ \t]*"?([^"\s]{8,63})"?"#).expect("regex"),
        }
    })
}

/// The positions of the patterns in [`secrets_gate`].
const G_PRIVATE_KEY: usize = 0;
const G_NETRC: usize = 1;
const G_REGISTRY_AUTH: usize = 2;
const G_AUTH_HEADER: usize = 3;
const G_CLI_USER: usize = 4;
const G_CLI_PASSWORD: usize = 5;
const G_URL_LOGIN: usize = 6;
const G_PSK: usize = 7;
const G_CLOUD_SECRET: usize = 8;

/// The gate of the searches of [`scan`] over the whole text (the order of the `G_`
/// positions): one pass says which of them can find anything.
fn secrets_gate() -> &'static Gate {
    static G: OnceLock<Gate> = OnceLock::new();
    G.get_or_init(|| {
        let c = compiled();
        Gate::new([&c.private_key, &c.netrc, &c.registry_auth, &c.auth_header, &c.cli_user, &c.cli_password, &c.url_login, &c.psk, &c.cloud_secret].map(Regex::as_str))
    })
}

/// Compiles the secret scan's patterns and rules now ([`super::content::warm_up`]).
pub fn warm_up() {
    let _ = (compiled(), secrets_gate(), super::rules::rule_set());
}

/// Rules whose secret is a private key rather than a token.
const PRIVATE_KEY_RULES: &[&str] = &["private-key", "age-secret-key"];

/// Marks of encrypted content: armour and envelopes whose body is ciphertext.
const CIPHERTEXT_MARKS: &[&str] = &[
    "-----BEGIN PGP MESSAGE-----",
    "-----BEGIN AGE ENCRYPTED FILE-----",
    "age-encryption.org/v1",
    "$ANSIBLE_VAULT;",
    "ENC[AES256_GCM,",
    "kind: SealedSecret",
    "\"kind\": \"SealedSecret\"",
    "vault:v1:",
    "-----BEGIN ENCRYPTED MESSAGE-----",
];

/// True if `text` is (or wraps) ciphertext: an encrypted file's armour or envelope.
pub fn is_ciphertext_document(text: &str) -> bool {
    CIPHERTEXT_MARKS.iter().any(|m| text.contains(m))
}

/// True if a single value is ciphertext or a public key, not a secret: an encrypted value's
/// envelope, a public key or recipient, or a long base64 value that decodes to bytes that are
/// not text (what encryption produces).
pub fn is_not_secret_value(v: &str) -> bool {
    let v = v.trim_matches(|c| c == '"' || c == '\'');
    if v.starts_with("ENC[") || v.starts_with("vault:v") || v.starts_with("$ANSIBLE_VAULT") || v.starts_with("AgB") && v.len() > 200 {
        return true;
    }
    if ["ssh-rsa", "ssh-ed25519", "ssh-dss", "ecdsa-sha2-", "sk-ssh-", "sk-ecdsa-", "AAAAB3NzaC1", "AAAAC3NzaC1", "AAAAE2VjZHNh"].iter().any(|p| v.starts_with(p)) {
        return true;
    }
    if v.len() == 62 && v.starts_with("age1") {
        return true;
    }
    v.len() >= 64 && decode_base64(v).is_some_and(|b| !is_text(&b) && !is_der_private_key(&b))
}

/// True if decoded bytes are text: valid UTF-8, mostly printable.
fn is_text(b: &[u8]) -> bool {
    let Ok(s) = std::str::from_utf8(b) else { return false };
    let n = s.chars().count().max(1);
    let printable = s.chars().filter(|c| !c.is_control() || matches!(c, '\n' | '\r' | '\t')).count();
    printable * 100 >= n * 95
}

fn decode_base64(s: &str) -> Option<Vec<u8>> {
    let t = s.trim_end_matches('=');
    let e = &base64::engine::general_purpose::STANDARD_NO_PAD;
    let u = &base64::engine::general_purpose::URL_SAFE_NO_PAD;
    if t.contains(['-', '_']) {
        u.decode(t).ok()
    } else {
        e.decode(t).ok()
    }
}

/// A password that is a real secret rather than a placeholder, a variable or a default.
fn real_password(user: &str, pass: &str) -> bool {
    !pass.is_empty() && pass != user && !super::content::placeholder(pass) && !pass.starts_with(['$', '%', '{', '<']) && pass.chars().any(|c| c.is_alphanumeric())
}

/// A high-entropy token: `min_len` characters or more, mixing letters and digits, of entropy
/// 3.0 bits per character or more, and not all one case of hex (a hash or an id).
fn strong_token(v: &str, min_len: usize) -> bool {
    if v.len() < min_len || super::content::placeholder(v) {
        return false;
    }
    let lower = v.chars().any(|c| c.is_ascii_lowercase());
    let upper = v.chars().any(|c| c.is_ascii_uppercase());
    let digit = v.chars().any(|c| c.is_ascii_digit());
    let hex_only = v.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
    (lower || upper) && digit && !(hex_only && !(lower && upper)) && entropy(v) >= 3.0
}

/// Words in a URL's host or path that mark it as a capability URL (whoever holds it may
/// post or act): webhooks, bots, triggers.
const CAPABILITY_WORDS: &[&str] = &["hook", "hooks", "webhook", "webhooks", "webhookb2", "bot", "trigger", "triggers", "services", "callback", "incoming", "notify"];

/// Secrets in `text`, by structure and content, decoding nested encodings (bounded). The
/// findings say what kind of secret was found, never its value.
///
/// Any text is accepted: at most [`MAX_INSPECT_BYTES`] of it are read, and a longer one also
/// yields a [`FindingKind::Oversize`] finding (what the rest holds is unknown).
pub fn secret_findings(text: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    let head = inspected(text);
    if head.len() < text.len() {
        out.push(Finding { kind: FindingKind::Oversize, what: format!("{} bytes, of which the first {} were inspected", text.len(), head.len()) });
    }
    let mut blobs = 0;
    scan(head, 0, &mut blobs, &mut out);
    out.sort_by(|a, b| a.kind.cmp(&b.kind).then(a.what.cmp(&b.what)));
    out.dedup();
    out
}

/// The part of `text` the detectors read: its first [`MAX_INSPECT_BYTES`], cut at a
/// character boundary.
pub fn inspected(text: &str) -> &str {
    let mut cut = text.len().min(MAX_INSPECT_BYTES);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    &text[..cut]
}

fn push(out: &mut Vec<Finding>, kind: FindingKind, what: impl Into<String>, depth: usize) {
    let what = what.into();
    let what = if depth > 0 { format!("{what}, inside an encoded value") } else { what };
    if !out.iter().any(|f| f.kind == kind && f.what == what) {
        out.push(Finding { kind, what });
    }
}

fn scan(text: &str, depth: usize, blobs: &mut usize, out: &mut Vec<Finding>) {
    let c = compiled();
    // A search the gate found nothing for is skipped: it would find nothing.
    let gate = secrets_gate().may_match(text);
    let hits = |g: usize, re: &'static Regex| (if gate[g] { Some(re.captures_iter(text)) } else { None }).into_iter().flatten();
    // Private keys, in any armour; JSON strings hold them with `\n` escapes, which the
    // armour line does not need.
    if let Some(m) = gate[G_PRIVATE_KEY].then(|| c.private_key.captures(text)).flatten() {
        let what = if m[1].trim().is_empty() { "a private key block".to_string() } else { format!("a private key block ({})", m[1].trim().to_lowercase()) };
        push(out, FindingKind::PrivateKey, what, depth);
    }
    if c.putty.is_match(text) {
        push(out, FindingKind::PrivateKey, "a PuTTY private key", depth);
    }
    // Provider token formats: gitleaks' rules (and the few it lacks), by rule id. A
    // documented example is not a secret; nor is a value of a generic rule (a label and a
    // value, no provider's prefix) that is ciphertext or a public key. A provider's prefix
    // says what a value is, however random its bytes.
    for id in super::rules::rule_set().matching_rules(text, |id, secret| !secret.ends_with("EXAMPLE") && !(id.starts_with("generic") && is_not_secret_value(secret))) {
        let kind = if PRIVATE_KEY_RULES.contains(&id) { FindingKind::PrivateKey } else { FindingKind::Token };
        push(out, kind, format!("a credential in a known token format ({id})"), depth);
    }
    for m in hits(G_NETRC, &c.netrc).take(16) {
        let user = m.get(1).map_or("", |u| u.as_str());
        if real_password(user, &m[2]) {
            push(out, FindingKind::Credential, "a netrc login (machine, login and password)", depth);
            break;
        }
    }
    for m in hits(G_REGISTRY_AUTH, &c.registry_auth).take(16) {
        let v = &m[1];
        let login = decode_base64(v).and_then(|b| String::from_utf8(b).ok()).and_then(|s| s.split_once(':').map(|(u, p)| real_password(u, p)));
        if login == Some(true) || (login.is_none() && strong_token(v, 16)) {
            push(out, FindingKind::Credential, "a registry login (a `user:password` auth value)", depth);
            break;
        }
    }
    for m in hits(G_AUTH_HEADER, &c.auth_header).take(16) {
        let (scheme, v) = (m[1].to_ascii_lowercase(), &m[2]);
        if scheme == "basic" {
            if let Some((u, p)) = decode_base64(v).and_then(|b| String::from_utf8(b).ok()).and_then(|s| s.split_once(':').map(|(u, p)| (u.to_string(), p.to_string()))) {
                if real_password(&u, &p) {
                    push(out, FindingKind::Credential, "an HTTP Basic login in an Authorization header", depth);
                }
            }
        } else if strong_token(v, 16) {
            push(out, FindingKind::Token, "a bearer token in an Authorization header", depth);
        }
    }
    for m in hits(G_CLI_USER, &c.cli_user).take(16) {
        if real_password(&m[1], &m[2]) {
            push(out, FindingKind::Credential, "a `user:password` login on a command line", depth);
            break;
        }
    }
    for m in hits(G_CLI_PASSWORD, &c.cli_password).take(16) {
        let v = &m[1];
        if !v.chars().all(|ch| ch.is_ascii_digit()) && real_password("", v) && (strong_token(v, 8) || super::content::strong_secret(v)) {
            push(out, FindingKind::Credential, "a password or token given to a command", depth);
            break;
        }
    }
    for m in hits(G_URL_LOGIN, &c.url_login).take(32) {
        let (user, pass, host) = (&m[1], &m[2], m[3].to_ascii_lowercase());
        let local = host == "localhost" || host.starts_with("127.") || host == "0.0.0.0";
        // A local default (`postgres:postgres@localhost`, lowercase letters only on a local
        // host) is a development convenience, not a secret.
        let default = local && pass.chars().all(|ch| ch.is_ascii_lowercase());
        if real_password(user, pass) && !super::content::placeholder(user) && !default {
            push(out, FindingKind::Credential, "a URL with a user name and password", depth);
            break;
        }
    }
    // Every URL of `url_tokens` has a scheme's `://`.
    if text.contains("://") {
        url_tokens(c, text, depth, out);
    }
    key_material(c, text, depth, out);
    for m in hits(G_PSK, &c.psk).take(16) {
        if !super::content::placeholder(&m[1]) {
            push(out, FindingKind::Credential, "a Wi-Fi network's pre-shared key", depth);
            break;
        }
    }
    for m in hits(G_CLOUD_SECRET, &c.cloud_secret).take(16) {
        if strong_token(&m[1], 16) && !is_not_secret_value(&m[1]) {
            push(out, FindingKind::Token, "a cloud or OAuth client secret in a credential file", depth);
            break;
        }
    }
    if depth >= MAX_DECODE_DEPTH {
        if encoded_further(c, text, blobs) {
            push(out, FindingKind::Oversize, format!("an encoded value nested deeper than the {MAX_DECODE_DEPTH} decodings inspected"), depth);
        }
    } else {
        decode_nested(c, text, depth, blobs, out);
    }
}

/// Tokens carried by URLs: in the query (`?token=`, `sig=`, `key=`) or as a high-entropy
/// path segment of a capability URL (a webhook, a bot).
fn url_tokens(c: &Compiled, text: &str, depth: usize, out: &mut Vec<Finding>) {
    for m in c.url.find_iter(text).take(256) {
        let u = m.as_str();
        if let Some(q) = c.query_secret.captures(u) {
            if strong_token(&q[1], 12) {
                push(out, FindingKind::Token, "a token in a URL's query", depth);
                continue;
            }
        }
        let rest = u.split_once("://").map_or(u, |(_, r)| r);
        let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
        let path = path.split(['?', '#']).next().unwrap_or("");
        let words = |s: &str| s.split(|ch: char| !ch.is_ascii_alphanumeric()).map(str::to_ascii_lowercase).collect::<Vec<_>>();
        let capability = words(host).iter().chain(words(path).iter()).any(|w| CAPABILITY_WORDS.contains(&w.as_str()));
        let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        // A bot token in the path (`/bot<id>:<secret>/`), or a webhook's secret segment.
        let bot = segs.iter().any(|s| s.starts_with("bot") && s.contains(':') && strong_token(s.split_once(':').map_or("", |x| x.1), 20));
        if bot || (capability && segs.iter().any(|s| strong_token(s, 20))) {
            push(out, FindingKind::Token, "a capability URL (a webhook or bot URL carrying its secret)", depth);
        }
    }
}

/// True if `b` is a private key in DER: a SEC1 EC key (`SEQUENCE { INTEGER 1, OCTET
/// STRING ...`), a PKCS#8 key (`SEQUENCE { INTEGER 0|1, SEQUENCE { OID ...`) or a PKCS#1
/// RSA key (`SEQUENCE { INTEGER 0, INTEGER modulus ...`). Public keys (`SEQUENCE {
/// SEQUENCE ...`), certificates and encrypted PKCS#8 have no leading version integer.
pub fn is_der_private_key(b: &[u8]) -> bool {
    if b.len() < 16 || b[0] != 0x30 {
        return false;
    }
    // The outer length: short form, or long form in one or two bytes.
    let (len, at) = match b[1] {
        n if n < 0x80 => (n as usize, 2),
        0x81 => (b[2] as usize, 3),
        0x82 => (((b[2] as usize) << 8) | b[3] as usize, 4),
        _ => return false,
    };
    // A key cut short (a partial array) still shows its header; a length beyond the data is
    // allowed, one shorter than the header is not.
    if len < 8 || b.len() < at + 5 {
        return false;
    }
    let r = &b[at..];
    match r {
        [0x02, 0x01, 0x01, 0x04, n, ..] => matches!(*n, 0x18..=0x42),
        [0x02, 0x01, 0x00 | 0x01, 0x30, ..] => true,
        [0x02, 0x01, 0x00, 0x02, 0x81 | 0x82, ..] => true,
        _ => false,
    }
}

/// Words near a byte list or hex value that say it is a published example (a test vector),
/// not a key in use.
const EXAMPLE_WORDS: &[&str] = &["test vector", "known-answer", "known answer", "fips", "rfc", "nist", "appendix", "example"];

/// True if `bytes` look like key material: not a run of one value or a counting sequence,
/// and most values distinct.
fn random_bytes(bytes: &[u8]) -> bool {
    let n = bytes.len();
    let distinct = bytes.iter().collect::<std::collections::BTreeSet<_>>().len();
    let counting = bytes.windows(2).all(|w| w[1].wrapping_sub(w[0]) == bytes[1].wrapping_sub(bytes[0]));
    n >= 16 && !counting && distinct * 4 >= n * 3
}

/// Raw key material by structure: byte lists and hex values that are a DER private key,
/// and byte lists or 128/192/256-bit hex values whose label names a key (`device_key`,
/// `ota_hmac`, `LTK`, a `*_key` column), unless the text calls them a published example.
fn key_material(c: &Compiled, text: &str, depth: usize, out: &mut Vec<Finding>) {
    // Every form below holds a byte list or a run of 32 hex digits: most texts hold neither.
    if !text.contains("0x") && !c.hex.is_match(text) {
        return;
    }
    let low = text.to_ascii_lowercase();
    let example = EXAMPLE_WORDS.iter().any(|w| low.contains(w));
    for m in c.byte_list.captures_iter(text).take(64) {
        let bytes: Vec<u8> = m[2].split(',').filter_map(|x| u8::from_str_radix(x.trim().trim_start_matches("0x").trim_start_matches("0X"), 16).ok()).collect();
        if is_der_private_key(&bytes) {
            push(out, FindingKind::PrivateKey, "a private key in DER, written as a byte array", depth);
            return;
        }
        let named_key = m.get(1).is_some_and(|n| key_label(n.as_str()));
        if named_key && !example && random_bytes(&bytes) {
            push(out, FindingKind::SecretAssignment, "key bytes in an array named as a key", depth);
            return;
        }
    }
    // Delimited tables: a column whose header names a key and whose cells are hex keys.
    let lines: Vec<&str> = text.lines().take(2000).collect();
    if let Some((hi, header)) = lines.iter().enumerate().take(20).find(|(_, l)| l.contains(',') || l.contains('\t') || l.contains(';')) {
        let sep = [',', '\t', ';'].into_iter().max_by_key(|s| header.matches(*s).count()).unwrap_or(',');
        let cols: Vec<bool> = header.split(sep).map(|h| key_label(h.trim().trim_matches('"'))).collect();
        if cols.iter().any(|&k| k) {
            let hits = lines[hi + 1..].iter().filter(|l| l.split(sep).zip(&cols).any(|(v, &k)| k && hex_key(v.trim().trim_matches('"')))).count();
            if hits >= 1 && !example {
                push(out, FindingKind::SecretAssignment, "a table column of keys", depth);
                return;
            }
        }
    }
    for m in c.labelled_hex.captures_iter(text).take(64) {
        let v = &m[2];
        if let Ok(b) = hex::decode(v) {
            if is_der_private_key(&b) {
                push(out, FindingKind::PrivateKey, "a private key in DER, written in hex", depth);
                return;
            }
        }
        if key_label(&m[1]) && hex_key(v) && !example {
            push(out, FindingKind::SecretAssignment, "a hex key under a label that names a key", depth);
            return;
        }
    }
}

/// Words of a label that name secret key material (a key, a pre-shared or long-term key, an
/// HMAC secret), and words that make it something else (a public key, a key's id or hash).
const KEY_WORDS: &[&str] = &["key", "keys", "ltk", "irk", "csrk", "psk", "hmac", "kek", "dek", "secret", "passkey", "seed", "nonce_key", "aes", "cmac"];
const NOT_KEY_WORDS: &[&str] = &["pub", "public", "id", "hash", "sha", "sha1", "sha256", "md5", "fingerprint", "uuid", "commit", "checksum", "crc", "digest", "name", "path", "file", "len", "size", "type"];

/// True if a label names secret key material ([`KEY_WORDS`], none of [`NOT_KEY_WORDS`]).
fn key_label(label: &str) -> bool {
    let ws: Vec<String> = label.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_ascii_lowercase).collect();
    let lower = label.to_ascii_lowercase();
    let ends = KEY_WORDS.iter().any(|k| ws.iter().any(|w| w == k || (w.len() > k.len() + 2 && w.ends_with(k))));
    ends && !ws.iter().any(|w| NOT_KEY_WORDS.contains(&w.as_str()) || w.starts_with("pub")) && !lower.contains("public")
}

/// True if `v` is a 128-, 192- or 256-bit value in hex that looks random.
fn hex_key(v: &str) -> bool {
    let v = v.trim_start_matches("0x");
    matches!(v.len(), 32 | 48 | 64) && v.chars().all(|c| c.is_ascii_hexdigit()) && hex::decode(v).is_ok_and(|b| random_bytes(&b)) && entropy(v) >= 3.0
}

/// True if a base64 value of `text`, already decoded [`MAX_DECODE_DEPTH`] times, decodes to
/// text once more: what that text holds is not inspected, so it is not taken for clear (a
/// third encoding must not hide a key).
fn encoded_further(c: &Compiled, text: &str, blobs: &mut usize) -> bool {
    for m in c.base64.find_iter(text) {
        if *blobs >= MAX_BLOBS {
            break;
        }
        *blobs += 1;
        if decode_base64(m.as_str()).is_some_and(|b| b.len() >= 16 && is_text(&b)) {
            return true;
        }
    }
    false
}

/// Decodes base64 and hex values that decode to text and scans the text again.
fn decode_nested(c: &Compiled, text: &str, depth: usize, blobs: &mut usize, out: &mut Vec<Finding>) {
    let mut decoded: Vec<Vec<u8>> = Vec::new();
    for m in c.base64.find_iter(text) {
        if *blobs >= MAX_BLOBS {
            break;
        }
        let s = m.as_str();
        // Words and paths are not encodings: a value needs digits or mixed case to be one.
        if !(s.chars().any(|ch| ch.is_ascii_digit() || ch == '+' || ch == '/') || (s.chars().any(|ch| ch.is_ascii_uppercase()) && s.chars().any(|ch| ch.is_ascii_lowercase()))) {
            continue;
        }
        *blobs += 1;
        match decode_base64(s) {
            Some(b) if b.len() >= 8 && is_text(&b) => decoded.push(b),
            Some(b) if is_der_private_key(&b) => push(out, FindingKind::PrivateKey, "a private key in DER, encoded in base64", depth),
            _ => {}
        }
    }
    for m in c.hex.find_iter(text) {
        if *blobs >= MAX_BLOBS {
            break;
        }
        let s = m.as_str();
        if s.len() % 2 != 0 {
            continue;
        }
        *blobs += 1;
        if let Some(b) = hex::decode(s).ok().filter(|b| is_text(b)) {
            decoded.push(b);
        }
    }
    for b in decoded {
        let t = String::from_utf8_lossy(&b);
        scan(&t, depth + 1, blobs, out);
        // A decoded `user:password` pair is a login wherever it was stored encoded.
        if let Some((u, p)) = t.trim().split_once(':') {
            if !u.is_empty() && !u.contains(char::is_whitespace) && u.len() <= 64 && !p.contains(char::is_whitespace) && real_password(u, p) && super::content::strong_secret(p) {
                push(out, FindingKind::Credential, "an encoded `user:password` login", depth + 1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(s: &str) -> Vec<FindingKind> {
        secret_findings(s).into_iter().map(|f| f.kind).collect()
    }

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    const PEM: &str = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n-----END RSA PRIVATE KEY-----\n";

    #[test]
    fn kubeconfig_client_key_data_is_a_private_key() {
        let kc = format!(
            "apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\n",
            b64("-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----\n"),
            b64(PEM)
        );
        assert!(kinds(&kc).contains(&FindingKind::PrivateKey), "{:?}", secret_findings(&kc));
    }

    #[test]
    fn a_certificate_alone_is_not_a_secret() {
        let kc = format!("clusters:\n- cluster:\n    certificate-authority-data: {}\n    server: https://10.0.0.1:6443\n", b64("-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----\n"));
        assert!(kinds(&kc).is_empty(), "{:?}", secret_findings(&kc));
    }

    #[test]
    fn docker_config_auth_is_a_login() {
        let cfg = format!("{{\"auths\": {{\"registry.example.net\": {{\"auth\": \"{}\"}}}}}}", b64("deploy:Zt8#qLw2!vRm"));
        assert!(kinds(&cfg).contains(&FindingKind::Credential));
    }

    #[test]
    fn netrc_is_a_login() {
        assert!(kinds("machine api.internal.net\n  login deploy\n  password s3cr3tPass\n").contains(&FindingKind::Credential));
        assert!(kinds("machine git.corp login bot password hunter2x").contains(&FindingKind::Credential));
    }

    #[test]
    fn logins_in_urls_and_commands() {
        assert!(kinds("DATABASE_URL=postgres://app:pa55word@db.prod.internal:5432/app").contains(&FindingKind::Credential));
        assert!(kinds("curl -u admin:Tr0ub4dor https://ci.internal/api").contains(&FindingKind::Credential));
        assert!(kinds("mysql -h db -u root --password=Xk9vB2mQ7p").contains(&FindingKind::Credential));
        let basic = format!("curl -H 'Authorization: Basic {}' https://x.internal", b64("ops:W1nter!2024"));
        assert!(kinds(&basic).contains(&FindingKind::Credential));
        assert!(kinds("Authorization: Bearer 8f3kQz91LmN0pXr7TuVw2yZa").contains(&FindingKind::Token));
        // Local defaults and placeholders are not secrets.
        assert!(kinds("postgres://postgres:postgres@localhost/dev").is_empty());
        assert!(kinds("postgres://user:${DB_PASSWORD}@db/app").is_empty());
        assert!(kinds("docker run -p 8080:8080 app").is_empty());
    }

    #[test]
    fn cloud_credential_files() {
        let aws = "[default]\naws_access_key_id = AKIAQ3EGVP7XYZL2MN4R\naws_secret_access_key = 9hJk2LmN4pQr6StUv8WxYz0aBcDeFgHiJkLmNoPq\n";
        assert!(kinds(aws).contains(&FindingKind::Token));
        let gcp = "{\"type\": \"service_account\", \"project_id\": \"p\", \"private_key_id\": \"1a2b\", \"private_key\": \"-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\\n-----END PRIVATE KEY-----\\n\"}";
        assert!(kinds(gcp).contains(&FindingKind::PrivateKey));
        let azure = "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFy==;EndpointSuffix=core.windows.net";
        assert!(kinds(azure).contains(&FindingKind::Token));
    }

    #[test]
    fn keys_in_any_armour() {
        assert!(kinds("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\n").contains(&FindingKind::PrivateKey));
        let age = "AGE-SECRET-KEY-1GFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGF";
        assert_eq!(age.len(), "AGE-SECRET-KEY-1".len() + 58);
        assert!(kinds(age).contains(&FindingKind::PrivateKey));
        assert!(kinds("PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nPublic-Lines: 2\nAAAA\nPrivate-Lines: 1\nAAAA\n").contains(&FindingKind::PrivateKey));
    }

    #[test]
    fn tokens_in_urls() {
        assert!(kinds("notify: https://hooks.chat.example/services/T0A1B2C3D/B4E5F6G7H/Xy9aQ2mN7pL4kR8sT1vW6zB3").contains(&FindingKind::Token));
        assert!(kinds("see https://api.example.com/v1/export?format=csv&access_token=Qm9Zx81LkT7pRv2NwYc4").contains(&FindingKind::Token));
        assert!(kinds("https://api.telegram.org/bot123456789:AAHk3mZq9LxP2vR7tY5uW8oN1bC4dE6fG0h/sendMessage").contains(&FindingKind::Token));
        // Ordinary links are not tokens.
        assert!(kinds("https://github.com/org/repo/commit/4f9c1e2d3b5a6978c0d1e2f3a4b5c6d7e8f90a1b").is_empty());
        assert!(kinds("https://docs.example.com/guide/getting-started?page=2").is_empty());
    }

    #[test]
    fn nested_encodings_are_decoded_a_bounded_number_of_times() {
        let once = b64(PEM);
        assert!(kinds(&once).contains(&FindingKind::PrivateKey));
        let twice = b64(&once);
        assert!(kinds(&twice).contains(&FindingKind::PrivateKey));
        let hexed = hex::encode(format!("token: ghp_{}", "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"));
        assert!(kinds(&hexed).contains(&FindingKind::Token));
        // Deeper than the bound: not decoded, and no hang.
        let mut deep = PEM.to_string();
        for _ in 0..12 {
            deep = b64(&deep);
        }
        let t = std::time::Instant::now();
        let _ = secret_findings(&deep);
        assert!(t.elapsed() < std::time::Duration::from_secs(2));
    }

    #[test]
    fn ciphertext_and_public_keys_are_not_secrets() {
        let sops = "db_password: ENC[AES256_GCM,data:Qx8vN2mL,iv:7yTk3Lq9Pz1Rw5Vb8Nc2Xd4Fg6Hj0Km=,tag:Ab3Cd5Ef7Gh9Ij1Kl3Mn5Op==,type:str]\nsops:\n    age:\n        - recipient: age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p\n";
        assert!(kinds(sops).is_empty(), "{:?}", secret_findings(sops));
        let pgp = "-----BEGIN PGP MESSAGE-----\n\nhQEMA5mvTjbYpLrHAQf/Xk3Lq9Pz1Rw5Vb8Nc2Xd4Fg6Hj0Km7yTk3Lq9Pz1Rw5Vb8\n-----END PGP MESSAGE-----\n";
        assert!(kinds(pgp).is_empty(), "{:?}", secret_findings(pgp));
        assert!(kinds("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl dana@laptop").is_empty());
        assert!(kinds("-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAu1SU1LfVLPHCozMxH2Mo\n-----END PUBLIC KEY-----").is_empty());
        assert!(is_not_secret_value("AgBy3i4OJSWK+PiTySYZZA9rO43cGDEq3P0Q7mNzD9k2gfvqP5Jd4Zs8k1QnfWpXeVb5GcHyD2sKm0Lr7Nt9Uw3Ex6Ia1Jo4Kp7Mq0Rs3Tv6Wy9Zb2Cd5Fg8Hj1Lm4No7Pq0St3Uv6Wx9Ya2Bc5De8Fh1Gk4Jm7Ln0Oq3Pr6Su9Tw2Vx5Yz8Ab1Cd4Ef7Gh0Ij3Kl6Mn9Op2Qr5St8Uv1Wx4Yz7"));
    }

    #[test]
    fn bad_input_gets_a_verdict_without_panic_or_hang() {
        // Binary and invalid UTF-8.
        let bin: Vec<u8> = (0..200_000u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        let _ = super::super::content::content_findings(&bin);
        let _ = super::super::content::content_findings(&[0xff, 0xfe, 0xc3, 0x28, 0xa0, 0xa1]);
        // 100 MB: inspected up to the bound, and reported as too large.
        let big = vec![b'A'; 100 << 20];
        let t = std::time::Instant::now();
        let f = super::super::content::content_findings(&big);
        assert!(f.iter().any(|f| f.kind == FindingKind::Oversize));
        assert!(t.elapsed() < std::time::Duration::from_secs(20), "{:?}", t.elapsed());
        // Many encoded values: bounded.
        let many = (0..5000).map(|i| b64(&format!("value number {i} with some text"))).collect::<Vec<_>>().join("\n");
        let t = std::time::Instant::now();
        let _ = secret_findings(&many);
        assert!(t.elapsed() < std::time::Duration::from_secs(5));
    }

    /// An EC private key in SEC1 DER (the body of an `EC PRIVATE KEY` PEM block), cut to its
    /// first 56 bytes.
    const SEC1: [u8; 56] = [
        0x30, 0x77, 0x02, 0x01, 0x01, 0x04, 0x20, 0x5c, 0x76, 0x73, 0xca, 0xd5, 0xd2, 0x94, 0x35, 0x9f, 0xb9, 0x8a, 0xdf, 0x24, 0xf3, 0x5b, 0xd6, 0xc0, 0xe1, 0xe2,
        0xe1, 0xea, 0xe2, 0x6c, 0xe5, 0xd4, 0x7c, 0xa0, 0xfa, 0x8d, 0xda, 0xf5, 0xe4, 0xa0, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0xa1,
        0x44, 0x03, 0x42, 0x00,
    ];

    #[test]
    fn a_der_private_key_as_a_byte_array_or_in_one_base64_line_is_a_private_key() {
        let arr = format!("const unsigned char k[] = {{ {} }};\n", SEC1.iter().map(|b| format!("0x{b:02x}")).collect::<Vec<_>>().join(", "));
        assert!(kinds(&arr).contains(&FindingKind::PrivateKey), "{:?}", secret_findings(&arr));
        let line = format!("SIGNING_KEY_B64 = {}", base64::engine::general_purpose::STANDARD.encode(SEC1));
        assert!(kinds(&line).contains(&FindingKind::PrivateKey), "{:?}", secret_findings(&line));
        assert!(!is_not_secret_value(&base64::engine::general_purpose::STANDARD.encode(SEC1)));
        // A public key in DER (SubjectPublicKeyInfo: a SEQUENCE, no version) is not one.
        let spki: Vec<u8> = [0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00, 0x04, 0xe2].to_vec();
        assert!(!is_der_private_key(&spki));
        let arr = format!("static const uint8_t root_pub[] = {{ {} }};\n", spki.iter().map(|b| format!("0x{b:02x}")).collect::<Vec<_>>().join(", "));
        assert!(kinds(&arr).is_empty(), "{:?}", secret_findings(&arr));
    }

    #[test]
    fn key_material_by_its_label_and_shape() {
        assert!(!kinds("CONFIG_UNIT_DEVICE_KEY=\"7d2e91c4a05fb3688e1d4c72a9f0b35e\"\n").is_empty());
        assert!(!kinds("LTK 5e8a1c0f3b72d94e6a1c5f3d9b20e7a4, EDIV 0x4e21\n").is_empty());
        assert!(!kinds("static const uint8_t fw_hmac[16] = { 0x9f, 0x3a, 0x41, 0xc2, 0x7b, 0xe0, 0x5d, 0x18, 0xe6, 0xa4, 0xc3, 0xb2, 0xf1, 0xd0, 0x7e, 0x95 };\n").is_empty());
        assert!(!kinds("serial,unit_key\nS1,7d2e91c4a05fb3688e1d4c72a9f0b35e\nS2,c83d2f61c0b94e7712da5f08c3e6b94d\n").is_empty());
        assert!(kinds("network={\n\tssid=\"lab\"\n\tpsk=\"blue-Otter!42\"\n}\n").contains(&FindingKind::Credential));
        // Hashes, ids, public keys and published test vectors are not keys.
        assert!(kinds("sha256: 9f3a41c27be05d18e6a4c3b2f1d07e959f3a41c27be05d18e6a4c3b2f1d07e95\n").is_empty());
        assert!(kinds("build_id = 7d2e91c4a05fb3688e1d4c72a9f0b35e\n").is_empty());
        assert!(kinds("/* FIPS-197 appendix C.1 */\nstatic const uint8_t key[16] = {0x2b,0x7e,0x15,0x16,0x28,0xae,0xd2,0xa6,0xab,0xf7,0x15,0x88,0x09,0xcf,0x4f,0x3c};\n").is_empty());
        assert!(kinds("static const uint8_t key[16] = {0x00,0x01,0x02,0x03,0x04,0x05,0x06,0x07,0x08,0x09,0x0a,0x0b,0x0c,0x0d,0x0e,0x0f};\n").is_empty());
        assert!(kinds("network={\n\tpsk=\"changeme\"\n}\n").is_empty());
    }

    /// A deterministic random string of `n` characters of `alphabet` (fake tokens of real
    /// shape: the entropy of a real one, no real value).
    fn random(seed: u64, alphabet: &str, n: usize) -> String {
        let a: Vec<char> = alphabet.chars().collect();
        let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (0..n)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                a[((x >> 33) as usize) % a.len()]
            })
            .collect()
    }

    const ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    const WORD: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";

    /// The rule ids named by the findings of `s`.
    fn rule_ids(s: &str) -> Vec<String> {
        secret_findings(s).into_iter().filter_map(|f| f.what.strip_prefix("a credential in a known token format (").and_then(|r| r.split(')').next()).map(str::to_string)).collect()
    }

    #[test]
    fn provider_tokens_are_found_by_their_gitleaks_rule() {
        let openai = format!("sk-proj-{}T3BlbkFJ{}", random(7, WORD, 74), random(8, ALNUM, 74));
        let samples: Vec<(String, &str)> = vec![
            (format!("GITHUB_TOKEN=ghp_{}", random(1, ALNUM, 36)), "github-pat"),
            (format!("token: github_pat_{}", random(2, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_", 82)), "github-fine-grained-pat"),
            (format!("CI_TOKEN=glpat-{}", random(3, ALNUM, 20)), "gitlab-pat"),
            ("glpat-Xk3vR9mQ2wZt7LpY5nBc".to_string(), "gitlab-pat"),
            (format!("SLACK_BOT_TOKEN=xoxb-{}-{}-{}", random(4, "0123456789", 12), random(5, "0123456789", 13), random(6, ALNUM, 24)), "slack-bot-token"),
            (format!("stripe.api_key = \"sk_live_{}\"", random(9, ALNUM, 24)), "stripe-access-token"),
            (format!("aws_access_key_id = AKIA{}", random(10, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)), "aws-access-token"),
            (format!("OPENAI_API_KEY={openai}"), "openai-api-key"),
            (format!("ANTHROPIC_API_KEY=sk-ant-api03-{}AA", random(11, WORD, 93)), "anthropic-api-key"),
            (format!("//registry.npmjs.org/:_authToken=npm_{}", random(12, ALNUM, 36)), "npm-access-token"),
            (format!("password = pypi-AgEIcHlwaS5vcmc{}", random(13, WORD, 70)), "pypi-upload-token"),
            (format!("SENDGRID=SG.{}.{}", random(14, ALNUM, 22), random(15, ALNUM, 43)), "sendgrid-api-token"),
            (format!("DO_TOKEN=dop_v1_{}", random(16, "0123456789abcdef", 64)), "digitalocean-pat"),
            (format!("STRIPE_WEBHOOK_SECRET=whsec_{}", random(17, ALNUM, 32)), "stripe-webhook-secret"),
            (format!("DOCKER_PAT=dckr_pat_{}", random(18, WORD, 27)), "docker-hub-pat"),
            (format!("revoke: AKIAZ4T7QW2K8HVD1PLM / {}", random(19, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/+", 40)), "aws-secret-access-key"),
        ];
        for (text, id) in &samples {
            let ids = rule_ids(text);
            assert!(ids.iter().any(|i| i == id), "{id} not found in a sample of its shape: {ids:?}");
            // The finding names the rule, never the value.
            for f in secret_findings(text) {
                assert!(!text.split(['=', ' ', '"', ':']).any(|v| v.len() >= 12 && f.what.contains(v)), "{f:?}");
            }
        }
    }

    #[test]
    fn placeholders_and_examples_are_not_tokens() {
        for s in [
            "GITHUB_TOKEN=ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
            "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
            "stripe.api_key = \"sk_test_xxxxxxxxxxxxxxxxxxxxxxxx\"",
            "npm_000000000000000000000000000000000000",
            "CI_TOKEN=glpat-aaaaaaaaaaaaaaaaaaaa",
            "token: ${GITHUB_TOKEN}",
            "api_key = {{ .Values.apiKey }}",
            "The ghp_ prefix marks a GitHub personal access token; sk_live_ a live Stripe key.",
        ] {
            assert!(rule_ids(s).is_empty(), "{s}: {:?}", secret_findings(s));
        }
        // A made-up AWS key id that is not base32 is no key id (its secret beside it still is
        // found, by the credential-file check).
        assert!(rule_ids("AKIAZ4T7QW2K3HVD8PLM").is_empty());
        assert!(rule_ids("AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY").is_empty());
        assert!(rule_ids("AKIAZ4T7QW2K3HVD8PLM see docs/aws/rotating-keys-for-iam-users-runbook.md").is_empty());
    }

    #[test]
    fn binary_invalid_utf8_and_ten_megabytes_get_a_verdict_in_bounded_time() {
        let t = std::time::Instant::now();
        let bin: Vec<u8> = (0..1_000_000u32).map(|i| (i.wrapping_mul(2654435761) >> 11) as u8).collect();
        let _ = super::super::content::content_findings(&bin);
        let mut bad = b"token ghp_".to_vec();
        bad.extend([0xff, 0xfe, 0xc3, 0x28, 0xa0, 0xa1]);
        bad.extend(random(20, ALNUM, 36).bytes());
        let _ = super::super::content::content_findings(&bad);
        // Ten megabytes of text full of the rules' keywords (every rule's prefilter passes).
        let line = format!("key token secret api auth password ghp_ sk-ant xox AKIA ey curl -H 'Authorization: Bearer {}' glpat- npm_ pypi-\n", random(21, ALNUM, 30));
        let big = line.repeat((10 << 20) / line.len() + 1);
        let f = super::super::content::content_findings(big.as_bytes());
        assert!(f.iter().any(|f| f.kind == FindingKind::Oversize));
        assert!(f.iter().any(|f| f.kind.is_secret()));
        assert!(t.elapsed() < std::time::Duration::from_secs(30), "{:?}", t.elapsed());
    }
}
