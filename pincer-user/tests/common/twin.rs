//! Helpers of the twin's tests: detector findings of a text, access records, and the tree
//! of a synthetic workspace.

use pincer::store::AccessRecord;
use pincer::twin::{content_findings, FindingKind};
use pincer::Access;
use std::collections::{BTreeMap, BTreeSet};

/// The kinds of the content detectors' findings in `s`.
pub fn kinds(s: &str) -> Vec<FindingKind> {
    content_findings(s.as_bytes()).into_iter().map(|f| f.kind).collect()
}

/// One access of a history task.
pub fn rec(path: &str, access: Access) -> AccessRecord {
    AccessRecord { path: path.into(), access }
}

/// Every file of `files` and every folder above one (with a trailing `/`), sorted: the
/// workspace tree the twin is given.
pub fn tree(files: &BTreeMap<String, Vec<u8>>) -> Vec<String> {
    let mut t = BTreeSet::new();
    for p in files.keys() {
        t.insert(p.clone());
        let mut q = p.as_str();
        while let Some((d, _)) = q.rsplit_once('/') {
            t.insert(format!("{d}/"));
            q = d;
        }
    }
    t.into_iter().collect()
}
