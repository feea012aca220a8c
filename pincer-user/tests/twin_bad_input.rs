//! Every content detector of the twin (`twin::secrets`, `twin::rules`, `twin::content`,
//! `twin::provenance`) given bad input: binary, invalid UTF-8, 100 MB, deeply nested
//! encodings and nesting. Each gets a clear verdict (what it finds in what it reads, and
//! `oversize` for what it could not read), never a panic, a stack overflow or unbounded
//! work: at most `MAX_INSPECT_BYTES` of any input is read and at most `MAX_DECODE_DEPTH`
//! decodings are made.

use base64::Engine as _;
use pincer::twin::content::{mentioned_names, MAX_MENTIONS};
use pincer::twin::rules::rule_set;
use pincer::twin::secrets::{secret_findings, MAX_DECODE_DEPTH, MAX_INSPECT_BYTES};
use pincer::twin::{content_findings, FindingKind, Provenance};

const KEY: &str = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIK3q5m0x7yPq2VdZb9Jt0F1cQm3eX8wLr2s6Hn4aT0YloAoGCCqGSM49\n-----END EC PRIVATE KEY-----\n";

/// Bytes that look random (a multiplicative hash of the index), with every byte value.
fn binary(n: usize) -> Vec<u8> {
    (0..n as u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect()
}

/// A provider token in GitHub's format whose body is pseudo-random (so it passes the rule's
/// entropy check).
fn github_token() -> String {
    const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let body: String = (0..36u32).map(|i| ALNUM[(i.wrapping_mul(2654435761) >> 7) as usize % ALNUM.len()] as char).collect();
    format!("ghp_{body}")
}

/// `s` encoded in base64 `n` times.
fn nested_base64(s: &str, n: usize) -> String {
    let mut v = s.to_string();
    for _ in 0..n {
        v = base64::engine::general_purpose::STANDARD.encode(v.as_bytes());
    }
    v
}

/// 100 MB of text made of `line` repeated.
fn hundred_megabytes(line: &str) -> String {
    line.repeat((100 << 20) / line.len() + 1)
}

fn has(f: &[pincer::twin::Finding], k: FindingKind) -> bool {
    f.iter().any(|f| f.kind == k)
}

// ---------- twin::secrets ----------

#[test]
fn secrets_in_binary_and_invalid_utf8_are_still_found() {
    assert!(secret_findings(&String::from_utf8_lossy(&binary(1 << 20))).iter().all(|f| f.kind != FindingKind::PrivateKey));
    let mut bad = binary(4096);
    bad.extend_from_slice(b"\xff\xfe\xc3\x28 ");
    bad.extend_from_slice(KEY.as_bytes());
    bad.extend_from_slice(b"\xa0\xa1");
    assert!(has(&secret_findings(&String::from_utf8_lossy(&bad)), FindingKind::PrivateKey));
}

#[test]
fn secrets_in_a_hundred_megabytes_read_the_first_part_and_say_the_rest_is_unknown() {
    let big = hundred_megabytes(&format!("{KEY}plain words between the keys\n"));
    let f = secret_findings(&big);
    assert!(has(&f, FindingKind::PrivateKey), "{f:?}");
    assert!(has(&f, FindingKind::Oversize), "{f:?}");
    // A multi-byte character across the cut is not split (no panic).
    let wide = "é".repeat(MAX_INSPECT_BYTES);
    assert!(has(&secret_findings(&wide), FindingKind::Oversize));
}

#[test]
fn secrets_under_nested_encodings_are_decoded_to_the_limit_and_deeper_ones_are_not_clear() {
    for n in 1..=MAX_DECODE_DEPTH {
        let v = format!("client-key-data: {}\n", nested_base64(KEY, n));
        assert!(has(&secret_findings(&v), FindingKind::PrivateKey), "{n} encodings");
    }
    for n in [MAX_DECODE_DEPTH + 1, MAX_DECODE_DEPTH + 2] {
        let v = format!("client-key-data: {}\n", nested_base64(KEY, n));
        let f = secret_findings(&v);
        assert!(f.iter().any(|f| f.kind.is_secret()), "{n} encodings: {f:?}");
    }
    // Far deeper than anything is decoded: a verdict, not unbounded work.
    let deep = nested_base64("short", 12);
    let _ = secret_findings(&deep);
}

#[test]
fn deeply_nested_json_and_yaml_are_read_without_overflow() {
    let json = format!("{}\"password\": \"Wq7!pLm2#zR9vT\"{}", "{\"a\": [".repeat(50_000), "]}".repeat(50_000));
    let _ = secret_findings(&json);
    let yaml: String = (0..20_000).map(|i| format!("{}k{i}:\n", " ".repeat(i % 400))).collect();
    let _ = secret_findings(&yaml);
}

// ---------- twin::rules ----------

#[test]
fn provider_rules_take_any_text() {
    let rules = rule_set();
    let accept = |_: &str, _: &str| true;
    assert!(rules.matching_rules(&String::from_utf8_lossy(&binary(1 << 20)), accept).iter().all(|id| !id.starts_with("github")));
    let mut bad = b"\xff\xfe token ".to_vec();
    bad.extend_from_slice(github_token().as_bytes());
    bad.extend_from_slice(b" \xc3\x28");
    assert!(rules.matching_rules(&String::from_utf8_lossy(&bad), accept).contains(&"github-pat"));
    // 100 MB full of the rules' keywords: the first part is read, and found.
    let big = hundred_megabytes(&format!("token secret api key auth {} AKIA xox glpat-\n", github_token()));
    assert!(rules.matching_rules(&big, accept).contains(&"github-pat"));
    let _ = rules.matching_rules(&nested_base64(&github_token(), 8), accept);
}

// ---------- twin::content ----------

#[test]
fn content_detectors_take_any_bytes() {
    let f = content_findings(&binary(2 << 20));
    assert!(has(&f, FindingKind::Oversize), "{f:?}");
    assert!(!f.iter().any(|f| f.kind.is_personal()), "{f:?}");
    let mut bad = b"\xff\xfeReisepass Nr. XK1234567 \xc3\x28 ".to_vec();
    bad.extend_from_slice(&binary(1000));
    assert!(has(&content_findings(&bad), FindingKind::PersonalData));
    let _ = content_findings(nested_base64("Date of birth: 14/07/1991", 12).as_bytes());
    let table = "| Name | Phone |\n".to_string() + &"| Ann Lee | +44 7700 900123 |\n".repeat(1 << 20);
    let f = content_findings(table.as_bytes());
    assert!(has(&f, FindingKind::PeopleTable) && has(&f, FindingKind::Oversize), "{f:?}");
}

#[test]
fn content_of_a_hundred_megabytes_is_oversize_with_what_its_first_part_holds() {
    let big = hundred_megabytes("Viktor has type 1 diabetes and his GP asks for a phased return.\n");
    let f = content_findings(big.as_bytes());
    assert!(has(&f, FindingKind::Oversize), "{f:?}");
    assert!(has(&f, FindingKind::PersonalData), "{f:?}");
}

#[test]
fn mentioned_names_are_bounded() {
    let big = hundred_megabytes("see src/a.rs and docs/b.md then ./x/y/z.toml\n");
    let m = mentioned_names(big.as_bytes());
    assert!(m.contains("src/a.rs") && m.contains("z.toml"), "{m:?}");
    let many: String = (0..200_000).map(|i| format!("d{i}/f{i}.rs ")).collect();
    assert!(mentioned_names(many.as_bytes()).len() <= MAX_MENTIONS + 4);
    let _ = mentioned_names(&binary(1 << 20));
    let _ = mentioned_names(&"/".repeat(1 << 20).into_bytes());
}

// ---------- twin::provenance ----------

const SOURCE: &str = "Closed session. Arm B shows a response rate of 41 percent against 18 percent in arm A, \
    with two serious adverse events in arm B and none in arm A. Subject 101-004 was withdrawn on 3 March.";

#[test]
fn provenance_takes_any_bytes_as_source_and_as_content() {
    let big = hundred_megabytes(&format!("{SOURCE}\n"));
    let bin = binary(1 << 20);
    // A source of 100 MB, binary or invalid UTF-8 is fingerprinted from its first part.
    let p = Provenance::build([big.as_bytes(), &bin[..], &b"\xff\xfe\xc3\x28"[..]], []);
    assert!(p.check(SOURCE.as_bytes()).is_some());
    assert!(p.check(big.as_bytes()).is_some());
    // Binary content is compared like any other: the same bytes are a copy, other text is not.
    assert!(p.check(&bin).is_some());
    assert!(Provenance::build([big.as_bytes()], []).check(&binary(3 << 20)).is_none());
    let mut bad = b"\xff\xfe".to_vec();
    bad.extend_from_slice(SOURCE.as_bytes());
    bad.extend_from_slice(b"\xc3\x28");
    assert!(p.check(&bad).is_some());
    let _ = p.check(nested_base64(SOURCE, 12).as_bytes());
    assert!(p.check(b"").is_none());
}
