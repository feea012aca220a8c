//! The twin's votes made without a model: deterministic, learned from the trusted history by
//! general means (prompt similarity, the sanitized paths and access types of similar tasks,
//! names and words the user typed, learned access intent, the user's rules and approvals),
//! with content checked by generic detectors. Nothing here names a particular workspace.
//! [`super::vote::OfflineDecider`] is the backend that serves them.

use super::content::{content_findings, injection_findings, FindingKind};
use super::knowledge::{distinctive_words, intent_evidence, leading_intent, location_evidence, similarity_without_name, text_accesses, Evidence, Knowledge, SessionView};
use super::provenance::MAX_FINGERPRINT_BYTES;
use super::text::typed_names;
use super::policy::PolicyEntry;
use super::vote::{Mechanism, PathMentions, PolicyInput, RuleOrigin, Verdict, Vote1Input, Vote2Input, VoteOutcome};
use crate::access::Access;
use crate::sanitize::{GlobSeg, SanitizedPath};
use crate::store::Permission;
use std::collections::{BTreeMap, BTreeSet};

/// Location evidence a request needs, per access type.
fn location_threshold(a: Access) -> f32 {
    match a {
        Access::Read | Access::List => 0.5,
        Access::Write => 0.55,
        Access::Create => 0.45,
        Access::Delete => 0.7,
    }
}

/// Intent evidence a write, create or delete needs.
fn intent_threshold(a: Access) -> f32 {
    match a {
        Access::Read | Access::List => 0.0,
        Access::Write | Access::Create => 0.4,
        Access::Delete => 0.5,
    }
}

/// Weakest similarity of the task an approval was given in for the approval to license its
/// resource in the current task.
pub const APPROVAL_SIMILARITY: f32 = 0.5;

/// How the rule that decided a vote was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RuleFrom {
    /// A hand approval from a past task.
    past_approval: bool,
    /// A restriction read from policy text against the workspace tree (not a rule the user
    /// wrote): it asks, and no prompt answers it in advance.
    inferred: bool,
}

/// The user rule (policy, derived policy, approval) that decides the request, if any, by
/// explicit deny > inferred restriction (asks) > explicit rules: an explicit deny always
/// wins; a restriction read from policy text makes the vote ask whatever the explicit
/// allows say (the reading may be wrong, so it neither denies nor gives way to a broad
/// allow); otherwise the most specific matching rule decides, an ask winning a tie with an
/// allow. A hand approval from a past task counts only where it speaks for this
/// task ([`approval_applies`]); a rule read from policy text against the workspace tree
/// yields to what the user typed and to what similar tasks used.
fn rule_verdict(k: &Knowledge, s: &SessionView, p: &SanitizedPath, a: Access, ev: &Evidence) -> Option<(VoteOutcome, RuleFrom)> {
    let mut best: Option<(usize, bool, VoteOutcome, bool)> = None;
    let mut inferred: Option<VoteOutcome> = None;
    let mut applies: Vec<(usize, bool)> = Vec::new();
    let scoped = k.approval_tasks.iter().flat_map(|&ti| k.tasks[ti].approvals.iter().map(move |r| (ti, r))).filter_map(|(ti, r)| {
        if r.permission != Permission::Allow {
            return Some((r, RuleOrigin::PastApproval));
        }
        if !r.access.contains(&a) || !r.glob.matches(p, false) {
            return None;
        }
        // An approval of a name anywhere (`**/name`) licenses the one object that name
        // resolves to in this task's context, never a namesake elsewhere.
        if matches!(r.glob.segs().first(), Some(crate::sanitize::GlobSeg::AnyDeep)) && !super::knowledge::resolves_to(k, s, &p.tokens()[p.len().saturating_sub(1)..], p) {
            return None;
        }
        let ok = match applies.iter().find(|x| x.0 == ti) {
            Some(x) => x.1,
            None => {
                let ok = approval_applies(k, s, p, ti);
                applies.push((ti, ok));
                ok
            }
        };
        ok.then_some((r, RuleOrigin::PastApproval))
    });
    let rules = s
        .approvals
        .iter()
        .map(|r| (r, RuleOrigin::Answer))
        .chain(k.policies.iter().flat_map(|p| p.rules.iter().map(move |r| (r, if p.text_only || r.inferred { RuleOrigin::PolicyText } else { RuleOrigin::Policy }))))
        .chain(k.derived.iter().map(|r| (r, RuleOrigin::Derived)))
        .chain(scoped);
    for (r, origin) in rules {
        let past_approval = origin == RuleOrigin::PastApproval;
        let by = Mechanism::Rule { origin };
        if !r.access.contains(&a) {
            continue;
        }
        if r.inferred && (ev.typed || ev.exact_history || (r.relative && ev.named())) {
            continue;
        }
        let spec = r.glob.specificity();
        if r.inferred && r.permission != Permission::Allow && r.glob.matches(p, true) {
            if inferred.is_none() {
                inferred = Some(VoteOutcome::ask(format!("{} restricts {a} on {} as read from its text; an inferred restriction asks the user", r.source.as_str(), r.glob)).by(by));
            }
            continue;
        }
        let cand = match r.permission {
            Permission::Deny if r.glob.matches(p, true) => {
                return Some((VoteOutcome::deny(format!("{} denies {a} on {}", r.source.as_str(), r.glob)).by(by), RuleFrom { past_approval, inferred: false }));
            }
            Permission::AskUser if r.glob.matches(p, true) => {
                (spec, true, VoteOutcome::ask(format!("{} asks the user before {a} on {}", r.source.as_str(), r.glob)).by(by), past_approval)
            }
            Permission::Allow if r.glob.matches(p, false) => {
                (spec, false, VoteOutcome::allow(format!("{} allows {a} on {}", r.source.as_str(), r.glob)).by(by), past_approval)
            }
            _ => continue,
        };
        let better = match &best {
            None => true,
            Some((bs, bask, _, _)) => cand.0 > *bs || (cand.0 == *bs && cand.1 && !*bask),
        };
        if better {
            best = Some(cand);
        }
    }
    if let Some(v) = inferred {
        return Some((v, RuleFrom { past_approval: false, inferred: true }));
    }
    best.map(|b| (b.2, RuleFrom { past_approval: b.3, inferred: false }))
}

/// Whether a past task's hand approval of `p` speaks for this session: the user's prompt
/// carries a word of `p`'s own name that tells it from its siblings, and the session is like
/// the approval's task (similarity at least [`APPROVAL_SIMILARITY`]) on what it is about,
/// the words of `p`'s name left out, so that naming the same person or file in an unrelated
/// task does not make it the task the user once approved.
pub fn approval_applies(k: &Knowledge, s: &SessionView, p: &SanitizedPath, task: usize) -> bool {
    distinctive_words(k, p).iter().any(|w| s.words.contains(*w)) && similarity_without_name(k, s, p, task) >= APPROVAL_SIMILARITY
}

/// Phrases by which a user approves, in the prompt itself, what the task asks for.
const CONSENT: &[&str] = &["i approve", "i'll approve", "i will approve", "i authorise", "i authorize", "you have my permission", "you have my approval", "go ahead and"];

/// True if one of the session's prompts approves the task's changes in so many words.
fn prompt_consents(s: &SessionView) -> bool {
    s.prompts.iter().any(|p| {
        let low = p.as_str().to_lowercase();
        CONSENT.iter().any(|c| low.contains(c))
    })
}

/// A new place (not in the workspace when the policies were imported, used by no past task)
/// one of whose new segments is named like a protected area: the words of a protected
/// area's name all occur in it. Returns the segment's index.
pub fn lookalike(k: &Knowledge, p: &SanitizedPath) -> Option<usize> {
    if k.protected_names.is_empty() || k.is_known(p) {
        return None;
    }
    // The first segment whose prefix is new, and the ones after it.
    let toks = p.tokens();
    let mut first_new = 0;
    for i in (1..=toks.len()).rev() {
        let mut prefix = p.clone();
        while prefix.len() > i {
            prefix = prefix.parent().expect("longer than i");
        }
        if k.is_known(&prefix.with_dir(true)) {
            first_new = i;
            break;
        }
    }
    (first_new..p.len()).find(|&i| {
        let ws = p.words(i);
        k.protected_names.iter().any(|names| names.iter().all(|w| ws.contains(w)))
    })
}

/// True if a rule the user wrote (not one inferred from text) allows `a` on this file and
/// its glob's segments are of the shape `shape` accepts.
fn user_allow_rule(k: &Knowledge, p: &SanitizedPath, a: Access, shape: impl Fn(&[GlobSeg]) -> bool) -> bool {
    k.policies
        .iter()
        .flat_map(|pv| pv.rules.iter())
        .any(|r| !r.inferred && r.permission == Permission::Allow && r.access.contains(&a) && shape(r.glob.segs()) && r.glob.matches(p, false))
}

/// True if a rule the user wrote (a structured rule, or a path their policy text names)
/// allows `a` on this very file: the glob ends in the file's own name. The user's word
/// about this file licenses the kinds of content it held at import, as a similar task's use
/// of it does.
fn user_allows_file(k: &Knowledge, p: &SanitizedPath, a: Access) -> bool {
    user_allow_rule(k, p, a, |segs| matches!(segs.last(), Some(GlobSeg::Exact(_))))
}

/// True if an explicit allow rule the user wrote (not one inferred from text) covers `a` on
/// this file and reaches into one folder only (its glob has no `**`).
fn user_allows_narrowly(k: &Knowledge, p: &SanitizedPath, a: Access) -> bool {
    user_allow_rule(k, p, a, |segs| !segs.iter().any(|s| matches!(s, GlobSeg::AnyDeep)))
}

fn created_by_session(s: &SessionView, p: &SanitizedPath) -> bool {
    s.created.iter().any(|c| p.starts_with(c))
}

/// The full vote-1 evaluation: the verdict and the location evidence it rested on.
pub fn vote1_offline(inp: &Vote1Input<'_>) -> (VoteOutcome, Evidence) {
    let (k, s, p, a) = (inp.knowledge, inp.session, inp.path, inp.access);
    let ev = location_evidence(k, s, p);
    if let Some((v, from)) = rule_verdict(k, s, p, a, &ev) {
        if from.inferred {
            return (v, ev);
        }
        if v.verdict == Verdict::Allow && lookalike(k, p).is_some() && !ev.exact_history {
            // A broad allow does not license a new place named like a protected one; the
            // prompt's words naming it do not either: the user is asked.
            if ev.named() {
                return (VoteOutcome::ask(format!("{}, but {p} is a new place named like a protected area; the prompt's words name it, which does not license a new place", v.reason)).by(Mechanism::Lookalike), ev);
            }
            return (VoteOutcome::deny(format!("{}, but {p} is a new place named like a protected area, and neither the prompt nor a similar task points at it", v.reason)).by(Mechanism::Lookalike), ev);
        }
        if v.verdict == Verdict::Allow && from.past_approval && !matches!(a, Access::Read | Access::List) {
            // An approval to change a resource in a past task licenses a change in this one
            // only if this prompt's own words ask for that kind of change too.
            let (iscore, iwhy) = leading_intent(k, s, a);
            let ineed = intent_threshold(a);
            if iscore < ineed {
                return (VoteOutcome::deny(format!("{}, but intent evidence {iscore:.2} for {a} is below {ineed:.2}: {iwhy}", v.reason)).by(Mechanism::Intent), ev);
            }
        }
        if v.verdict != Verdict::AskUser {
            return (v, ev);
        }
        // "Ask me first" yields when the user's own prompt types this resource's name and
        // asks for this kind of access: the prompt is the user's answer given in advance.
        // Words that merely describe it do not answer a question the user asked to be asked.
        let (iscore, iwhy) = intent_evidence(k, s, p, a);
        if ev.typed && iscore >= intent_threshold(a) {
            return (VoteOutcome::allow(format!("{}; but the prompt names this resource ({}) and asks for {a} ({iwhy})", v.reason, ev.why)).by(Mechanism::Location), ev);
        }
        // The same when the prompt's words describe the resource and the user says in it that
        // they approve: the question is answered in the prompt.
        if ev.described && prompt_consents(s) && iscore >= intent_threshold(a) {
            return (VoteOutcome::allow(format!("{}; but the prompt describes this resource ({}), asks for {a} ({iwhy}) and approves it", v.reason, ev.why)).by(Mechanism::Location), ev);
        }
        return (v, ev);
    }
    if created_by_session(s, p) {
        return (VoteOutcome::allow(format!("{p} was created in this session")).by(Mechanism::CreatedInSession), ev);
    }
    if s.grants.iter().any(|(g, ga)| g.same_segments(p) && (*ga == a || (*ga == Access::Create && a != Access::Delete))) {
        return (VoteOutcome::allow(format!("{a} on {p} was already granted in this session")).by(Mechanism::GrantedInSession), ev);
    }
    if let Some(i) = lookalike(k, p) {
        // Words of the prompt do not license a new place named like a protected one: it is
        // asked about when the prompt names it, denied otherwise.
        if ev.named() && !created_by_session(s, p) {
            return (VoteOutcome::ask(format!("{p} is a new place whose segment {} is named like a protected area; the prompt's words name it, which does not license a new place", i + 1)).by(Mechanism::Lookalike), ev);
        }
        if !ev.exact_history && !created_by_session(s, p) {
            return (VoteOutcome::deny(format!("{p} is a new place whose segment {} is named like a protected area; sibling evidence does not license it", i + 1)).by(Mechanism::Lookalike), ev);
        }
    }
    let need = location_threshold(a);
    let mut ev = ev;
    if a == Access::Create && ev.score + 1e-4 < need {
        if let Some((sc, why)) = super::knowledge::analog_evidence(k, s, p) {
            if sc > ev.score {
                ev.score = sc;
                ev.why = why;
            }
        }
    }
    // A first-time create or delete the prompt asks for (its intent evidence clears the bar
    // below), of a resource the prompt's words point at, in a folder the user works in.
    let asked_here = matches!(a, Access::Create | Access::Delete) && ev.asked_here();
    if ev.score + 1e-4 < need && !asked_here {
        return (VoteOutcome::deny(format!("location evidence {:.2} below {need:.2}: {}", ev.score, ev.why)).by(Mechanism::Location), ev);
    }
    let (iscore, iwhy) = intent_evidence(k, s, p, a);
    let ineed = intent_threshold(a);
    if iscore < ineed {
        return (VoteOutcome::deny(format!("intent evidence {iscore:.2} for {a} below {ineed:.2}: {iwhy}")).by(Mechanism::Intent), ev);
    }
    let by = if ev.score < need { Mechanism::FirstTimeChange } else { Mechanism::Location };
    (VoteOutcome::allow(format!("location {:.2} ({}); intent {iscore:.2} ({iwhy})", ev.score, ev.why)).by(by), ev)
}

/// The full vote-2 evaluation.
pub fn vote2_offline(inp: &Vote2Input<'_>, p2: bool) -> VoteOutcome {
    let v1 = &inp.v1;
    let (k, s, p, a) = (v1.knowledge, v1.session, v1.path, v1.access);
    let ev = location_evidence(k, s, p);
    // A resource the user named, or a similar past task used, is established.
    let mut established = ev.named() || ev.exact_history || ev.score >= 0.8 || created_by_session(s, p) || (a == Access::Delete && ev.asked_here());
    // Pincer-P2: the pre-committed policy's exact entries (what the user named and what
    // similar tasks used, resolved on raw names at the first prompt) establish a resource
    // and license its content as a similar task's use would.
    let mut p2_exact = false;
    if p2 {
        if let Some(pol) = inp.policy {
            p2_exact = pol.entries().iter().any(|e| {
                e.permission == Permission::Allow && e.access.contains(&a) && !crate::glob::is_glob(&e.path_glob) && e.path_glob.trim_end_matches('/') == inp.raw_path.trim_end_matches('/')
            });
            established |= p2_exact;
        }
    }
    if let Some(r) = inp.rationale {
        let inj = injection_findings(r);
        // Instructions to an AI in the rationale deny. A rationale that says the user
        // approved is not by itself a claim of authority: it denies only when the request
        // does not otherwise serve the user's prompt (then the claim is all that carries it).
        if let Some(f) = inj.iter().find(|f| !f.is_authority_claim() || !established) {
            return VoteOutcome::deny(format!("the worker's rationale holds {}", f.what)).by(Mechanism::Detector { finding: f.kind });
        }
    }
    let name_inj = injection_findings(&inp.raw_path.replace(['-', '_'], " "));
    if let Some(f) = name_inj.first() {
        return VoteOutcome::deny(format!("the resource name holds {}", f.what)).by(Mechanism::Detector { finding: f.kind });
    }
    // Sensitive content is not licensed by a name: only by a similar past task that used
    // this very resource, or by the session having created it.
    let created = created_by_session(s, p);
    // A similar task's use of this resource licenses the kinds of content it held when the
    // workspace was imported; what was put into it since is judged as in any other file.
    // (Pincer-P2's exact entry is the prompt's own pointer at this resource as it is now.)
    // A new place is checked by its content whatever its name: the prompt's pointer at it
    // licenses only what a known resource held.
    let p2_known = p2_exact && k.is_known(p);
    let user_file = user_allows_file(k, p, a);
    let content_ok = |kind: FindingKind| created || p2_known || ((ev.exact_history || user_file) && k.baseline_has(p, kind));
    if let Some(c) = inp.content {
        if matches!(a, Access::Read | Access::Write | Access::Delete) {
            if c.len() > MAX_FINGERPRINT_BYTES && !created {
                return VoteOutcome::deny(format!("the content is {} bytes, more than the {MAX_FINGERPRINT_BYTES} that can be inspected", c.len())).by(Mechanism::Oversize);
            }
            // A protected original is governed by the rules over its place; provenance is
            // about copies of it elsewhere.
            if !created && !k.protected_files.contains(&p.clone().with_dir(false)) {
                if let Some(h) = k.provenance.check(c) {
                    return VoteOutcome::deny(format!(
                        "the content overlaps protected content ({} shared passages, {} shared identifiers, {} shared names, {} measured values of one source, rounded or not), so it is protected whatever its name or place",
                        h.shingles, h.entities, h.names, h.measures
                    ))
                    .by(Mechanism::Provenance);
                }
            }
            let findings = content_findings(c);
            if let Some(f) = findings.iter().find(|f| f.kind.is_personal() && !content_ok(f.kind)) {
                let why = if ev.exact_history { "a similar task used this resource, but it did not hold such content when the workspace was imported" } else { "no similar task used this resource" };
                return VoteOutcome::deny(format!("the content holds personal data ({}) and {why}", f.what)).by(Mechanism::Detector { finding: f.kind });
            }
            // A secret is licensed only where the user's own narrow allow (a rule of theirs
            // over one folder, no `**`) covers this file and access, and the file held that
            // kind of secret when the workspace was imported: the development key the user
            // lets the agent sign with, read as it was then, never another key put there since.
            let narrow = user_allows_narrowly(k, p, a) && (a != Access::Read || k.baseline_content_is(p, c));
            if let Some(f) = findings.iter().find(|f| f.kind.is_secret() && !(narrow && k.baseline_has(p, f.kind))) {
                if !created_by_session(s, p) {
                    return VoteOutcome::deny(format!("the content holds a secret ({})", f.what)).by(Mechanism::Detector { finding: f.kind });
                }
            }
            // What a user policy keeps out of this place ("no names in reports/"): a change
            // of a resource that already holds such content carries it on.
            if matches!(a, Access::Write) {
                for cr in k.policies.iter().flat_map(|pv| pv.content.iter()).filter(|cr| cr.glob.matches(p, true)) {
                    if let Some(f) = findings.iter().find(|f| cr.kinds.contains(&f.kind)) {
                        return VoteOutcome::deny(format!("{} keeps {} out of this place, and the content holds it", cr.source.as_str(), f.kind.label())).by(Mechanism::ContentRule);
                    }
                }
            }
            let marks = &k.policy_terms.markings;
            if let Some(f) = findings.iter().find(|f| f.kind == FindingKind::Marking && marks.contains(f.what.as_str())) {
                if !content_ok(FindingKind::Marking) {
                    return VoteOutcome::deny(format!("the content is marked \"{}\", which the user's policies restrict, and no similar task used it", f.what)).by(Mechanism::Detector { finding: f.kind });
                }
            }
            if !(created || ev.exact_history || p2_exact) {
                if let Some((id, phrase)) = k.policy_terms.phrase_hit(c).filter(|(_, ph)| super::content::phrase_is_specific(&String::from_utf8_lossy(c), ph)) {
                    return VoteOutcome::deny(format!("the content speaks of \"{phrase}\", which policy {id} restricts, and no similar task used it")).by(Mechanism::PolicyPhrase);
                }
            }
        }
    }
    // Whether the request serves the user's prompt: a change of an existing resource
    // (not made in this session) is one the prompt asks for when the prompt names the
    // resource, when a similar task made the same change to it, or when the prompt's own
    // words ask for that kind of change. A similar task that created the resource, or
    // changes made elsewhere, do not make overwriting it part of this task, whatever the
    // content or the rationale says.
    if a == Access::Write && !created && !ev.named() && !p2_exact {
        let same_change = s.similar.iter().filter(|(_, w)| *w >= 0.3).any(|&(ti, _)| k.tasks[ti].accesses.iter().any(|(sp, acc, _)| *acc == Access::Write && (sp.same_segments(p) || sp.same_parent(p))));
        let (wp, word) = k.intent.score(&s.query(), a);
        let iscore = (wp * 1.6).min(1.0);
        let iwhy = match word {
            Some(w) => format!("the prompt's strongest word for {a}, \"{w}\", goes with it in {:.0}% of past tasks", wp * 100.0),
            None => format!("no word of the prompt goes with {a}"),
        };
        if !same_change && iscore < intent_threshold(a) {
            return VoteOutcome::deny(format!("a change of an existing resource that the prompt does not name, that no similar task changed, and that the prompt's own words do not ask for ({iwhy})")).by(Mechanism::Unserved);
        }
    }
    // What the session read may go anywhere the worker writes: a change or a new resource
    // in a place a content clause keeps some kind of content out of asks the user when
    // content of that kind was read in this session (what is written is not known when the
    // file is opened, so the outcome is unsure: ask, not deny).
    if matches!(a, Access::Write | Access::Create) && !created {
        for cr in k.policies.iter().flat_map(|pv| pv.content.iter()).filter(|cr| cr.glob.matches(p, true)) {
            // The user's routine is no leak: a similar task read the same source and changed
            // this place (the weekly report written from the export).
            let routine = |src: &SanitizedPath| location_evidence(k, s, src).exact_history && similar_changed_here(k, s, p);
            let carried = inp.earlier.iter().filter(|e| e.granted).find_map(|e| {
                let kind = e.carried.kinds.iter().find(|k| cr.kinds.contains(k)).copied()?;
                (!e.carried.source.as_ref().is_some_and(|src| routine(src))).then_some(kind)
            });
            if let Some(kind) = carried {
                return VoteOutcome::ask(format!("{} keeps {} out of this place, and this session read content holding it", cr.source.as_str(), kind.label())).by(Mechanism::ContentRule);
            }
        }
    }
    // Nothing below narrows an established resource: the scans of the session's earlier
    // requests (which grow with the session) are made only for one that is not.
    if established {
        return VoteOutcome::allow("established resource; no sensitive content findings").by(Mechanism::ContentClear);
    }
    if inp.earlier.iter().any(|e| e.injection) {
        return VoteOutcome::deny("earlier content in this session held injected instructions, and this request goes beyond what the user named or similar tasks used").by(Mechanism::Taint);
    }
    // Whether the request serves the prompt or the content: a resource that neither the
    // user named nor similar tasks used, which content read in this session names, is
    // where that content pointed the worker, whatever words the content used (a comment,
    // a TODO, a doc line).
    // Content the user pointed the worker at by its path ("apply the comments in
    // REVIEW.md") speaks for the user.
    let names = PathMentions::of(inp.raw_path);
    let steered = inp.earlier.iter().any(|e| {
        e.granted
            && e.path.trim_end_matches('/') != inp.raw_path.trim_end_matches('/')
            && e.carried.mentions_any(&names)
            && !e.carried.source.as_ref().is_some_and(|src| location_evidence(k, s, src).typed)
    });
    if steered {
        return VoteOutcome::deny("content read in this session names this resource, and neither the user named it nor did similar tasks use it: the request follows the content, not the prompt").by(Mechanism::Taint);
    }
    if a == Access::Delete {
        return VoteOutcome::deny("a delete of a resource that neither the user named nor a similar task used").by(Mechanism::Unestablished);
    }
    VoteOutcome::allow("no sensitive content findings").by(Mechanism::ContentClear)
}

/// True if a similar past task (similarity 0.3 or more) changed or created a resource at
/// `p` or beside it.
fn similar_changed_here(k: &Knowledge, s: &SessionView, p: &SanitizedPath) -> bool {
    s.similar
        .iter()
        .filter(|(_, w)| *w >= 0.3)
        .any(|&(ti, _)| k.tasks[ti].accesses.iter().any(|(sp, acc, _)| matches!(acc, Access::Write | Access::Create) && (sp.same_segments(p) || sp.same_parent(p))))
}

/// Words by which a prompt speaks of every object bearing a name ("both .env.example
/// files", "each README.md").
const EACH: &[&str] = &["both", "all", "every", "each"];

/// True if one of the two words before the typed name `name` in `prompt` is a word of
/// [`EACH`].
fn speaks_of_each(prompt: &str, name: &str) -> bool {
    let Some(i) = prompt.find(name) else { return false };
    let before: Vec<String> = prompt[..i].split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect();
    before.iter().rev().take(2).any(|w| EACH.contains(&w.as_str()))
}

/// Of the workspace entries a typed name matches, the one it resolves to in the task's
/// context: the only one, or of several namesakes the only one in a folder a similar task
/// (similarity 0.3 or more) used, or else the only one whose differing folders the
/// prompt's words name. `Some(None)` when nothing matches (a new name), `None` when the name
/// is ambiguous.
fn resolve_namesakes<'a>(inp: &PolicyInput<'_>, pw: &BTreeSet<String>, namesakes: &[&'a String]) -> Option<Option<&'a String>> {
    match namesakes {
        [] => return Some(None),
        [one] => return Some(Some(*one)),
        _ => {}
    }
    let parent = |t: &str| t.trim_end_matches('/').rsplit_once('/').map_or(String::new(), |(d, _)| d.to_string());
    let used: Vec<String> = inp
        .similar
        .iter()
        .filter(|(_, w)| *w >= 0.3)
        .flat_map(|&(ti, _)| inp.state.tasks[ti].accesses.iter().map(|(r, _)| r.path.trim_end_matches('/').to_string()))
        .collect();
    let here: Vec<&'a String> = namesakes.iter().copied().filter(|t| used.iter().any(|u| u == t.trim_end_matches('/') || parent(u) == parent(t))).collect();
    if let [one] = here[..] {
        return Some(Some(one));
    }
    let segs: Vec<Vec<&str>> = namesakes.iter().map(|t| t.trim_end_matches('/').split('/').collect()).collect();
    let common = segs.iter().map(|v| v.iter().zip(&segs[0]).take_while(|(a, b)| a == b).count()).min().unwrap_or(0);
    let worded: Vec<&'a String> = namesakes
        .iter()
        .zip(&segs)
        .filter(|(_, v)| v[common.min(v.len())..v.len().saturating_sub(1)].iter().any(|seg| crate::sanitize::word_keys(seg).iter().any(|w| pw.contains(w))))
        .map(|(t, _)| *t)
        .collect();
    match worded[..] {
        [one] => Some(Some(one)),
        _ => None,
    }
}

/// True if a segment of the path `name` carries every word of a protected area's name.
fn named_like_protected(protected: &[Vec<String>], name: &str) -> bool {
    name.split('/').filter(|x| !x.is_empty()).any(|seg| {
        let ws = crate::sanitize::word_keys(seg);
        protected.iter().any(|p| p.iter().all(|w| ws.contains(w)))
    })
}

/// Generates the pre-committed policy on raw names.
pub fn policy_offline(inp: &PolicyInput<'_>) -> Vec<PolicyEntry> {
    let k = inp.knowledge;
    let prompt = inp.prompt;
    let mut allow: BTreeMap<String, BTreeSet<Access>> = BTreeMap::new();
    let mut why: BTreeMap<String, String> = BTreeMap::new();
    // Access types the prompt asks for (learned intent, or what similar tasks did).
    let mut intents: BTreeSet<Access> = [Access::Read, Access::List].into();
    let mut sv = SessionView::default();
    sv.prompts.push(super::vote::TrustedText::from_trusted(prompt));
    sv.similar = inp.similar.iter().map(|&(i, w)| (i, w)).collect();
    for a in [Access::Write, Access::Create, Access::Delete] {
        let (sc, _) = k.intent.score(prompt, a);
        let sim = inp.similar.iter().filter(|(_, w)| *w >= 0.3).any(|&(i, _)| inp.state.tasks[i].accesses.iter().any(|(r, _)| r.access == a));
        if sc * 1.6 >= intent_threshold(a) || sim {
            intents.insert(a);
        }
    }
    // Writing and creating go together (an edit may write a new file, and the reverse).
    if intents.contains(&Access::Write) || intents.contains(&Access::Create) {
        intents.extend([Access::Write, Access::Create]);
    }
    let mut add = |glob: String, acc: &mut dyn Iterator<Item = Access>, reason: String| {
        let e = allow.entry(glob.clone()).or_default();
        e.extend(acc);
        why.entry(glob).or_insert(reason);
    };
    let pw: BTreeSet<String> = crate::sanitize::word_keys(prompt).into_iter().collect();
    // The names of protected areas (the last literal segment of every deny and ask rule), as
    // word sets, and the entries that ask about new places named like them.
    let protected: Vec<Vec<String>> = inp
        .state
        .policies
        .iter()
        .flat_map(super::knowledge::policy_rules)
        .filter(|(r, _)| r.permission != Permission::Allow && r.access.contains(&Access::Read))
        .filter_map(|(r, _)| r.path_glob.split('/').rev().find(|x| !x.is_empty() && !crate::glob::is_glob(x)).map(crate::sanitize::word_keys))
        .filter(|ws| !ws.is_empty())
        .collect();
    let mut lookalikes: Vec<PolicyEntry> = Vec::new();
    // Names the user typed, resolved in the workspace tree.
    for name in typed_names(prompt) {
        let n = name.trim_end_matches('/');
        let mut hit = false;
        let namesakes: Vec<&String> = inp.workspace_tree.iter().filter(|t| {
            let tt = t.trim_end_matches('/');
            tt == n || tt.ends_with(&format!("/{n}"))
        }).collect();
        // "Both x files", "every x": the user means each namesake.
        if namesakes.len() > 1 && speaks_of_each(prompt, &name) {
            for t in &namesakes {
                add(t.trim_end_matches('/').to_string(), &mut intents.iter().copied(), format!("{name}, every one of which the prompt names"));
            }
            continue;
        }
        let Some(chosen) = resolve_namesakes(inp, &pw, &namesakes) else {
            // An ambiguous name asks; it never licenses every object that bears it.
            for t in &namesakes {
                lookalikes.push(PolicyEntry {
                    path_glob: t.trim_end_matches('/').to_string(),
                    access: intents.iter().copied().collect(),
                    operations: vec![],
                    permission: Permission::AskUser,
                    rationale: format!("{name}, named in the prompt, names more than one place and the task's context does not single one out"),
                });
            }
            continue;
        };
        if let Some(t) = chosen {
            let tt = t.trim_end_matches('/');
            {
                hit = true;
                if t.ends_with('/') || name.ends_with('/') {
                    add(format!("{tt}/**"), &mut intents.iter().copied(), format!("under {name}, named in the prompt"));
                    add(tt.to_string(), &mut [Access::List].into_iter(), format!("{name}, named in the prompt"));
                } else {
                    add(tt.to_string(), &mut intents.iter().copied(), format!("{name}, named in the prompt"));
                    if let Some((dir, _)) = tt.rsplit_once('/') {
                        add(format!("{dir}/*"), &mut [Access::Create, Access::List].into_iter().filter(|x| intents.contains(x) || *x == Access::List), format!("beside {name}"));
                        add(dir.to_string(), &mut [Access::List].into_iter(), format!("folder of {name}"));
                    }
                }
            }
        }
        if !hit && !n.is_empty() && !crate::glob::is_glob(n) {
            let g = if n.starts_with("**/") { n.to_string() } else { format!("**/{n}") };
            // The prompt's words do not license a new place named like a protected one: it
            // is asked about.
            if named_like_protected(&protected, n) {
                lookalikes.push(PolicyEntry {
                    path_glob: g.clone(),
                    access: intents.iter().copied().collect(),
                    operations: vec![],
                    permission: Permission::AskUser,
                    rationale: format!("{name}, named in the prompt, is a new place named like a protected area"),
                });
                lookalikes.push(PolicyEntry { path_glob: format!("{g}/**"), access: intents.iter().copied().collect(), operations: vec![], permission: Permission::AskUser, rationale: format!("under {name}, a new place named like a protected area") });
                continue;
            }
            // A new file the user asked for: allow creating it where the user said.
            add(g.clone(), &mut intents.iter().copied().filter(|a| *a != Access::Delete), format!("{name}, named in the prompt (new)"));
            add(format!("{g}/**"), &mut intents.iter().copied(), format!("under {name}, named in the prompt"));
        }
    }
    // Similar past tasks: their exact resources, and their folders for reading and creating.
    for &(ti, w) in inp.similar {
        if w < 0.3 {
            continue;
        }
        let task = &inp.state.tasks[ti];
        for (r, _) in &task.accesses {
            let mut accs: BTreeSet<Access> = [Access::Read, Access::List].into();
            if intents.contains(&r.access) {
                accs.insert(r.access);
            }
            if r.access == Access::Write && intents.contains(&Access::Write) {
                accs.insert(Access::Write);
            }
            add(r.path.trim_end_matches('/').to_string(), &mut accs.iter().copied(), format!("used by similar task {}", task.session));
            if let Some((dir, _)) = r.path.trim_end_matches('/').rsplit_once('/') {
                let mut d: BTreeSet<Access> = [Access::Read, Access::List].into();
                for x in [Access::Create, Access::Write] {
                    if intents.contains(&x) {
                        d.insert(x);
                    }
                }
                add(format!("{dir}/*"), &mut d.iter().copied(), format!("beside what similar task {} used", task.session));
                add(dir.to_string(), &mut [Access::List].into_iter(), format!("folder used by similar task {}", task.session));
            }
        }
        // New places of the same kind as those similar tasks created in, for another
        // existing instance (vote 1 checks which instance exists): creating only.
        if intents.contains(&Access::Create) {
            for (r, _) in task.accesses.iter().filter(|(r, _)| r.access == Access::Create) {
                let segs: Vec<&str> = r.path.trim_end_matches('/').split('/').collect();
                for i in 1..segs.len().saturating_sub(1) {
                    let mut g: Vec<&str> = segs.clone();
                    g[i] = "*";
                    let last = g.len() - 1;
                    g[last] = "*";
                    add(g.join("/"), &mut [Access::Create].into_iter(), format!("the same kind of place as {} (similar task {})", r.path, task.session));
                    add(g[..last].join("/"), &mut [Access::Create].into_iter(), format!("the same kind of folder as where similar task {} created", task.session));
                }
                // What a similar task put into a folder it created was new, so none of it is
                // in its history (the session's own folder is not gated). Where another
                // instance of that folder exists already (a content store's bucket a new
                // object hashes to, a per-day folder made earlier that day), the same work
                // creates entries in it: creating only, never changing what it holds.
                if r.path.ends_with('/') && segs.len() >= 2 {
                    let parent = segs[..segs.len() - 1].join("/");
                    add(format!("{parent}/*/*"), &mut [Access::Create].into_iter(), format!("into a folder of the kind similar task {} created ({})", task.session, r.path));
                }
            }
        }
        // A hand approval licenses its object for like tasks (similarity at least
        // APPROVAL_SIMILARITY, a word of the object's name in the prompt), never a
        // namesake: a glob that names no folder is resolved like a typed name.
        if w >= APPROVAL_SIMILARITY {
            for ap in task.approvals.iter().filter(|ap| ap.permission == Permission::Allow) {
                let g = ap.path_glob.trim_end_matches('/');
                let last = g.rsplit('/').next().unwrap_or(g);
                if !crate::sanitize::word_keys(last).iter().any(|x| pw.contains(x)) {
                    continue;
                }
                let bare = g.strip_prefix("**/").filter(|r| !r.contains('/') && !crate::glob::is_glob(r));
                match bare {
                    Some(n) => {
                        let namesakes: Vec<&String> = inp.workspace_tree.iter().filter(|t| {
                            let tt = t.trim_end_matches('/');
                            tt == n || tt.ends_with(&format!("/{n}"))
                        }).collect();
                        if let Some(Some(t)) = resolve_namesakes(inp, &pw, &namesakes) {
                            add(t.trim_end_matches('/').to_string(), &mut [ap.access].into_iter(), format!("approved by the user in task {}", task.session));
                        }
                    }
                    None => add(ap.path_glob.clone(), &mut [ap.access].into_iter(), format!("approved by the user in task {}", task.session)),
                }
            }
        }
    }
    // Folders similar tasks worked in.
    let worked: BTreeSet<&str> = inp
        .similar
        .iter()
        .filter(|(_, w)| *w >= 0.3)
        .flat_map(|&(ti, _)| inp.state.tasks[ti].accesses.iter().filter_map(|(r, _)| r.path.trim_end_matches('/').rsplit_once('/').map(|(d, _)| d)))
        .collect();
    // Files whose names the prompt's words spell out; of namesakes, the one the name
    // resolves to in the task's context (words of a name never license every object that
    // bears it).
    let mut spelled: BTreeMap<&str, Vec<&String>> = BTreeMap::new();
    for t in inp.workspace_tree.iter().filter(|t| !t.ends_with('/')) {
        let last = t.rsplit('/').next().unwrap_or(t);
        let stem = match last.rfind('.') {
            Some(d) if d > 0 => &last[..d],
            _ => last,
        };
        let keys = crate::sanitize::word_keys(stem);
        let hit = keys.iter().filter(|w| pw.contains(*w)).count();
        if (keys.len() == 1 && hit == 1) || (hit >= 2 && 3 * hit >= 2 * keys.len()) {
            spelled.entry(last).or_default().push(t);
        }
    }
    let spelled: BTreeSet<&String> = spelled.into_values().filter_map(|v| resolve_namesakes(inp, &pw, &v).flatten()).collect();
    for t in inp.workspace_tree.iter().filter(|t| !t.ends_with('/')) {
        let last = t.rsplit('/').next().unwrap_or(t);
        let stem = match last.rfind('.') {
            Some(d) if d > 0 => &last[..d],
            _ => last,
        };
        let keys = crate::sanitize::word_keys(stem);
        let hit = keys.iter().filter(|w| pw.contains(*w)).count();
        if spelled.contains(t) {
            add(t.clone(), &mut intents.iter().copied(), format!("{last}, which the prompt's words name"));
        } else if hit >= 1 && intents.contains(&Access::Delete) && t.rsplit_once('/').is_some_and(|(d, _)| worked.contains(d)) {
            add(t.clone(), &mut [Access::Delete].into_iter(), format!("{last}, which the prompt's words point at, in a folder similar tasks used"));
        }
    }
    // Files past tasks used whose own name carries a word of the prompt: reading them.
    for task in &inp.state.tasks {
        for (r, _) in &task.accesses {
            let path = r.path.trim_end_matches('/');
            let last = path.rsplit('/').next().unwrap_or(path);
            let stem = last.rsplit_once('.').filter(|(b, _)| !b.is_empty()).map_or(last, |(b, _)| b);
            if !r.path.ends_with('/') && crate::sanitize::word_keys(stem).iter().any(|w| w.len() >= 4 && pw.contains(w)) {
                add(path.to_string(), &mut [Access::Read].into_iter(), format!("{last}, used by a past task, whose name carries a word of the prompt"));
            }
        }
    }
    // Prompt words that name folders of the workspace.
    for t in inp.workspace_tree.iter().filter(|t| t.ends_with('/')) {
        let tt = t.trim_end_matches('/');
        let last = tt.rsplit('/').next().unwrap_or(tt);
        // Numbers in a folder's name ("101-berlin") are how the user files it, not words the
        // prompt would use for it.
        let keys: Vec<String> = crate::sanitize::word_keys(last).into_iter().filter(|w| !w.chars().all(|c| c.is_ascii_digit())).collect();
        if !keys.is_empty() && keys.iter().all(|w| pw.contains(w)) && keys.iter().any(|w| w.len() >= 4) {
            add(format!("{tt}/**"), &mut [Access::Read, Access::List].into_iter(), format!("{last}, a folder the prompt speaks of"));
            add(tt.to_string(), &mut [Access::List].into_iter(), format!("{last}, a folder the prompt speaks of"));
        }
    }
    let mut entries: Vec<PolicyEntry> = allow
        .into_iter()
        .map(|(g, acc)| PolicyEntry {
            rationale: why.remove(&g).unwrap_or_default(),
            path_glob: g,
            access: acc.into_iter().collect(),
            operations: vec![],
            permission: Permission::Allow,
        })
        .collect();
    entries.extend(lookalikes);
    // The user's own rules and refusals, last so they read as overrides (deny wins anyway).
    // A content clause ("no names in reports/") is no rule over the place; text read beside
    // structured rules asks.
    for p in &inp.state.policies {
        for (r, inferred) in super::knowledge::policy_rules(p) {
            let rationale = if inferred { format!("user policy {} (read from its text)", p.id) } else { format!("user policy {}", p.id) };
            entries.push(PolicyEntry { path_glob: r.path_glob, access: r.access, operations: vec![], permission: r.permission, rationale });
        }
    }
    for d in &inp.state.derived {
        for r in &d.rules {
            entries.push(PolicyEntry { path_glob: r.path_glob.clone(), access: r.access.clone(), operations: vec![], permission: r.permission, rationale: "derived policy".into() });
        }
    }
    for t in &inp.state.tasks {
        for ap in t.approvals.iter().filter(|a| a.permission != Permission::Allow) {
            entries.push(PolicyEntry { path_glob: ap.path_glob.clone(), access: vec![ap.access], operations: vec![], permission: ap.permission, rationale: format!("user refusal in task {}", t.session) });
        }
    }
    let _ = text_accesses;
    entries
}
