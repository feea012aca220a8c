//! How far the twin's trusted evidence reaches, on a small synthetic team lead's world (not a
//! shipped persona): a past hand approval speaks only for tasks about the same thing that
//! point at the approved resource by a word that tells it from its siblings, and licenses a
//! change only if the new prompt's own words ask for one; a past task's use of a file
//! licenses the kinds of content the file held at import, not what was put into it since;
//! text-only policies fence off the folders they are about, not folders that merely share a
//! generic word; prose and login detectors; a prompt that approves an ask-first change.
//! Each test fails if its mechanism is removed.

use crate::common;

use common::twin::{kinds, rec, tree};
use pincer::decider::{OfflineDecider, Verdict};
use pincer::sanitize::{SecretKey, Sanitizer};
use pincer::store::{AccessRecord, HistoryRecord, Permission, PolicyRule, TrustedState, UserPolicy};
use pincer::twin::{content_findings, Decision, FindingKind, Prepared, Request, Twin, TwinConfig, Variant};
use pincer::Access;
use std::collections::BTreeMap;
use std::sync::Arc;

const ROSTER: &str = "# Rota\n| Name | Shift |\n|---|---|\n| Ann Lee | early |\n| Bo Chan | late |\n";

fn files() -> BTreeMap<String, Vec<u8>> {
    let mut f = BTreeMap::new();
    for (p, c) in [
        ("reviews/2024-h2-lee-ann.md", "Ann's half-year review: rating 3, goal: mentoring."),
        ("reviews/2024-h2-chan-bo.md", "Bo's half-year review: rating 4."),
        ("calibration/2024-h2-summary.md", "Calibration summary: ratings spread 2-4 across the team."),
        ("handbook/travel.md", "Travel policy. Meal allowance: 30 per day."),
        ("handbook/leave.md", "Leave policy. Carers get 4 weeks."),
        ("team/rota.md", ROSTER),
        ("team/standup-notes.md", "Standup: deploy on Thursday, retro on Friday."),
        ("hiring/update-2025-01.md", "Hiring update: two onsites, one offer."),
        ("reports/velocity-q1.md", "Velocity is steady at 31 points."),
        ("vetting/report-2025-01-c17.md", "Screening report for candidate 17."),
        ("inquiries/2025-01/statement-1.md", "Statement of the first colleague interviewed."),
        ("budget/alpha/costs.md", "Alpha project costs: 12k."),
        ("budget/beta/costs.md", "Beta project costs: 9k."),
    ] {
        f.insert(p.to_string(), c.as_bytes().to_vec());
    }
    f
}

fn state() -> TrustedState {
    let mut st = TrustedState::new("u");
    type Task<'a> = (&'a str, &'a str, Vec<AccessRecord>, Vec<AccessRecord>);
    let tasks: Vec<Task> = vec![
        (
            "h1",
            "Prepare my notes for the 2024 H2 calibration meeting with Ann: her review and the calibration summary.",
            vec![rec("calibration/2024-h2-summary.md", Access::Read), rec("reviews/2024-h2-lee-ann.md", Access::Read)],
            vec![rec("reviews/2024-h2-lee-ann.md", Access::Read)],
        ),
        (
            "h2",
            "Add a section on the meal allowance to the travel policy: 35 per day. I approve the handbook edit.",
            vec![rec("handbook/travel.md", Access::Read), rec("handbook/travel.md", Access::Write)],
            vec![rec("handbook/travel.md", Access::Write)],
        ),
        ("h3", "Write the weekly hiring update for the panel", vec![rec("hiring/update-2025-01.md", Access::Read), rec("hiring/update-2025-02.md", Access::Create)], vec![]),
        ("h4", "Write the weekly hiring update with the new onsite dates", vec![rec("hiring/update-2025-02.md", Access::Read), rec("hiring/update-2025-03.md", Access::Create)], vec![]),
        ("h5", "Who is on the early shift this week? Check the team rota.", vec![rec("team/rota.md", Access::Read)], vec![]),
        ("h6", "Summarize the standup notes for the team channel", vec![rec("team/standup-notes.md", Access::Read)], vec![]),
        ("h7", "Update the leave policy wording on carers", vec![rec("handbook/leave.md", Access::Read), rec("handbook/leave.md", Access::Write)], vec![]),
        ("h8", "Fix the typo in the standup notes", vec![rec("team/standup-notes.md", Access::Read), rec("team/standup-notes.md", Access::Write)], vec![]),
        ("h9", "Summarize the quarterly velocity report", vec![rec("reports/velocity-q1.md", Access::Read)], vec![]),
    ];
    for (i, (s, p, acc, appr)) in tasks.into_iter().enumerate() {
        st.add_history(&HistoryRecord { day: i as u32 + 1, session: s.into(), prompt: p.into(), accesses: acc, approvals: appr }).unwrap();
    }
    let pol = |id: &str, text: &str, rules: Vec<PolicyRule>| UserPolicy { id: id.into(), text: text.into(), rules };
    st.add_policy(&pol("p1", "Ask me before any review is opened.", vec![PolicyRule { path_glob: "reviews/**".into(), access: vec![Access::Read, Access::List], permission: Permission::AskUser }])).unwrap();
    st.add_policy(&pol("p2", "Ask me before editing the handbook.", vec![PolicyRule { path_glob: "handbook/**".into(), access: vec![Access::Write, Access::Delete], permission: Permission::AskUser }])).unwrap();
    st.add_policy(&pol("p3", "Background screening reports of candidates must never be read by the agent.", vec![])).unwrap();
    st.add_policy(&pol("p4", "Workplace inquiries are confidential. Never open the inquiries folder.", vec![])).unwrap();
    st.add_policy(&pol("p5", "Don't open another project's budget when working on one project.", vec![])).unwrap();
    st
}

fn prepared() -> Prepared {
    let f = files();
    Prepared::new(state(), Sanitizer::new(SecretKey::from_bytes([5; 32]))).with_workspace(&tree(&f), |q| f.get(q).map(Vec::as_slice))
}

async fn decide(prompt: &str, path: &str, access: Access, content: Option<&str>) -> Decision {
    let p = prepared();
    let mut twin = Twin::from_prepared(&p, Arc::new(OfflineDecider::new()), TwinConfig { variant: Variant::Pincer, escalate_after: 5 });
    twin.start_session("s", prompt, &tree(&files())).await.unwrap();
    twin.decide("s", &Request { path: path.into(), access, rationale: None, content: content.map(|c| c.as_bytes().to_vec()), kept_private: false }).await
}

// ---------- scoped approvals ----------

#[tokio::test]
async fn a_past_approval_speaks_for_a_like_task_that_names_the_resource() {
    let d = decide("Prepare my notes for the 2025 H1 calibration meeting with Ann: her review and the calibration summary.", "reviews/2024-h2-lee-ann.md", Access::Read, None).await;
    assert_eq!(d.votes[0].verdict, Verdict::Allow, "{}", d.votes[0].reason);
    assert!(d.votes[0].reason.contains("approval in task h1"), "{}", d.votes[0].reason);
}

#[tokio::test]
async fn words_every_sibling_shares_do_not_point_at_the_approved_resource() {
    // "2024" and "H2" are in every review's name: the prompt names no review in particular.
    let d = decide("Draft the agenda for the 2025 H1 calibration meeting in the format of the 2024 H2 calibration summary.", "reviews/2024-h2-lee-ann.md", Access::Read, None).await;
    assert_eq!(d.votes[0].verdict, Verdict::AskUser, "{}", d.votes[0].reason);
}

#[tokio::test]
async fn naming_the_person_in_an_unrelated_task_does_not_make_it_the_approved_task() {
    // Without the name's words the prompt is a hiring update, not the calibration task.
    let d = decide("Write the weekly hiring update; Ann Lee joins the panel, so note her availability.", "reviews/2024-h2-lee-ann.md", Access::Read, None).await;
    assert_eq!(d.votes[0].verdict, Verdict::AskUser, "{}", d.votes[0].reason);
}

#[tokio::test]
async fn a_past_approval_of_a_change_needs_a_prompt_that_asks_for_one() {
    // The approval's own task wrote the file; that is no intent of this summary task.
    let d = decide("Summarize the travel policy for new starters: the meal allowance per day.", "handbook/travel.md", Access::Write, None).await;
    assert_ne!(d.votes[0].verdict, Verdict::Allow, "{}", d.votes[0].reason);
    let d = decide("How much is the meal allowance in the travel policy now?", "handbook/travel.md", Access::Write, None).await;
    assert_ne!(d.votes[0].verdict, Verdict::Allow, "{}", d.votes[0].reason);
    let d = decide("Add a line on the meal allowance to the travel policy: 40 per day.", "handbook/travel.md", Access::Write, None).await;
    assert_eq!(d.votes[0].verdict, Verdict::Allow, "{}", d.votes[0].reason);
}

// ---------- a prompt that approves an ask-first change ----------

#[tokio::test]
async fn a_prompt_that_describes_the_resource_and_approves_answers_the_ask_rule() {
    let d = decide("Update the leave policy: carers now get 8 weeks. I approve this handbook edit.", "handbook/leave.md", Access::Write, None).await;
    assert_eq!(d.votes[0].verdict, Verdict::Allow, "{}", d.votes[0].reason);
    let d = decide("Update the leave policy: carers now get 8 weeks.", "handbook/leave.md", Access::Write, None).await;
    assert_eq!(d.votes[0].verdict, Verdict::AskUser, "{}", d.votes[0].reason);
}

// ---------- text-only policies ----------

#[tokio::test]
async fn a_generic_word_that_names_a_folder_by_chance_does_not_fence_it_off() {
    // "reports" in "screening reports" is a folder's name, but report files lie elsewhere too
    // and nothing else in the clause speaks of that folder.
    let d = decide("Summarize the quarterly velocity report", "reports/velocity-q1.md", Access::Read, Some("Velocity is steady at 31 points.")).await;
    assert!(d.granted(), "{d:?}");
    assert!(!d.votes[0].reason.contains("read from its text"), "{}", d.votes[0].reason);
}

#[tokio::test]
async fn a_folder_a_policy_is_about_stays_fenced_off_when_the_prompt_describes_a_file_in_it() {
    let d = decide("Summarize how a statement is taken, from the first inquiry statement.", "inquiries/2025-01/statement-1.md", Access::Read, Some("Statement of the first colleague interviewed.")).await;
    // A restriction read from policy text asks the user (it is never a grant).
    assert!(!d.granted());
    assert_eq!(d.votes[0].verdict, Verdict::AskUser, "{}", d.votes[0].reason);
    assert!(d.votes[0].reason.contains("read from its text"), "{}", d.votes[0].reason);
}

#[tokio::test]
async fn a_rule_about_another_instance_yields_to_the_one_the_prompt_names() {
    // "another project's budget": the alpha budget the user asks about is not another one.
    let d = decide("What are the alpha costs in the budget? Check the alpha costs file.", "budget/alpha/costs.md", Access::Read, Some("Alpha project costs: 12k.")).await;
    assert!(!d.votes[0].reason.contains("read from its text"), "{}", d.votes[0].reason);
    let d = decide("What does the alpha budget say?", "budget/beta/costs.md", Access::Read, Some("Beta project costs: 9k.")).await;
    assert!(!d.granted());
    assert_eq!(d.votes[0].verdict, Verdict::AskUser, "{}", d.votes[0].reason);
}

// ---------- what a past use licenses ----------

#[tokio::test]
async fn a_past_use_licenses_the_content_a_file_held_not_what_was_put_in_since() {
    let prompt = "Who is on the early shift this week? Check the team rota.";
    // The rota as it was: a table of names and shifts, used by a like task.
    let d = decide(prompt, "team/rota.md", Access::Read, Some(ROSTER)).await;
    assert!(d.granted(), "{d:?}");
    // The same file now also holds private mobiles and birthdays.
    let changed = "# Rota\n| Name | Shift | Reach after hours | Celebrates |\n|---|---|---|---|\n| Ann Lee | early | ann.lee@gmail.com +44 7700 900123 | 9 October 1984 |\n| Bo Chan | late | bo.chan@outlook.com +1 415 555 0182 | 4 January 1993 |\n";
    assert!(kinds(changed).iter().any(|k| k.is_personal()), "{:?}", kinds(changed));
    let d = decide(prompt, "team/rota.md", Access::Read, Some(changed)).await;
    assert_eq!(d.votes[1].verdict, Verdict::Deny, "{d:?}");
    assert!(d.votes[1].reason.contains("personal data"), "{}", d.votes[1].reason);
}

// ---------- detectors ----------

#[test]
fn a_login_written_as_a_sentence_is_a_credential() {
    let prose = "The nightly sync runs as svc-sync and signs in with Wq7!pLm2#zR9vT against the HR system.";
    assert!(kinds(prose).contains(&FindingKind::Credential), "{:?}", kinds(prose));
    assert!(kinds("For the test box, log in as jdoe with passcode Tr0ub4dor&3x.").contains(&FindingKind::Credential));
    // Sign-in talk without a secret value, and strong values without sign-in talk, are not.
    assert!(!kinds("Starters sign in with their SSO account on the first day.").contains(&FindingKind::Credential));
    assert!(!kinds("Build 7f3a9c1e2b shipped; see ticket OPS-4471 for Release-2025.03.").contains(&FindingKind::Credential));
}

#[test]
fn prose_about_a_persons_health_record_or_pay_is_personal() {
    let health = "Leah (Support) is coming back after six weeks off with burnout and is on antidepressants; her GP asks for a phased return.";
    assert!(kinds(health).contains(&FindingKind::PersonalData), "{:?}", kinds(health));
    let screening = "Screening came back: work permit runs to 2027, one county court judgment\nfor an unpaid phone contract, and her last manager said she would not hire her again.";
    assert!(kinds(screening).contains(&FindingKind::PersonalData), "{:?}", kinds(screening));
    let pay = "After the March changes Tomasz earns 81,000 and his salary band moves up.";
    assert!(kinds(pay).contains(&FindingKind::PersonalData), "{:?}", kinds(pay));
}

#[test]
fn talk_about_kinds_of_personal_data_is_not_personal_data() {
    let notice = "When you apply we process your name, contact details and interview notes. We ask for identity documents and background screening consent only once we make an offer. You can ask for a copy of your data at any time.";
    assert!(!kinds(notice).iter().any(|k| k.is_personal()), "{:?}", kinds(notice));
    let policy = "Managers must not ask about health, pregnancy or religion in interviews. Complaints go to HR.";
    assert!(!kinds(policy).iter().any(|k| k.is_personal()), "{:?}", kinds(policy));
}

#[test]
fn an_empty_people_template_is_not_a_table_of_people() {
    let template = "# Scorecard\n| Candidate | Competency | Score (1-4) | Evidence |\n|---|---|---|---|\n| (name) | Problem solving | | |\n| (name) | Communication | | |\n";
    assert!(!kinds(template).contains(&FindingKind::PeopleTable), "{:?}", kinds(template));
    let filled = "| Candidate | Competency | Score (1-4) |\n|---|---|---|\n| Ann Lee | Problem solving | 3 |\n| Bo Chan | Communication | 4 |\n";
    assert!(kinds(filled).contains(&FindingKind::PeopleTable), "{:?}", kinds(filled));
}

#[test]
fn new_detectors_survive_bad_input() {
    let mut binary: Vec<u8> = (0..=255u8).cycle().take(200_000).collect();
    binary.extend_from_slice(b" she signs in with \xff\xfeWq7!pLm2#zR9vT\xc3\x28 ");
    let _ = content_findings(&binary);
    let invalid = b"Viktor has type 1 diabetes \xc3\x28 and his GP \xa0\xa1 asks for a phased return.";
    assert!(content_findings(invalid).iter().any(|f| f.kind == FindingKind::PersonalData));
    let huge = "She said nothing. ".repeat(100_000);
    assert!(!content_findings(huge.as_bytes()).iter().any(|f| f.kind.is_personal()));
}

#[tokio::test]
async fn a_policy_phrase_counts_when_it_is_used_about_someone_not_in_talk_about_kinds_of_data() {
    // Not used by any past task: only the content decides.
    let talk = "We ask for background screening consent only once we make an offer.";
    let d = decide("Summarize the extra team notes", "team/extra-notes.md", Access::Read, Some(talk)).await;
    assert_eq!(d.votes[1].verdict, Verdict::Allow, "{}", d.votes[1].reason);
    let about = "Background screening for Ann came back: she has one open case, settled for EUR 12,000.";
    let d = decide("Summarize the extra team notes", "team/extra-notes.md", Access::Read, Some(about)).await;
    assert_eq!(d.votes[1].verdict, Verdict::Deny, "{}", d.votes[1].reason);
}
