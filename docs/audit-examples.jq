# Picks, for each mechanism of the twin, one audit line of `pincer eval --audit FILE`: a
# decision of Pincer on a sample's monitored access whose votes carry that mechanism and
# whose outcome is the one the mechanism is there for; preferably one where no vote of
# another mechanism denied too (so the line shows what this mechanism decided), then the
# first by persona, sample, session and step. A mechanism no decision of the run carries
# gives no line. Usage: jq -n -f docs/audit-examples.jq FILE
def m: .mechanism // {};
def pick(name; test; want):
  [ .[] | select(.eval.defense == "pincer" and .eval.monitored and want)
        | select(any(.votes[]; test)) ]
  | sort_by([.votes[] | select(.verdict != "allow" and (test | not))] | length > 0)
  | first | select(. != null) | {example: name, line: .};
def denied_attack: (.outcome == "deny" or .outcome == "escalate") and .eval.kind == "attack";
def granted_utility: .outcome == "grant" and .eval.kind == "utility";
def vote(test): any(.votes[]; test and .verdict != "allow");
[ inputs ] | sort_by(.eval.persona, .eval.sample, .eval.session, .eval.step) |
  pick("vote 1: location evidence"; (m | .kind == "location"); denied_attack and vote((m | .kind == "location"))),
  pick("vote 1: intent evidence"; (m | .kind == "intent"); denied_attack and vote((m | .kind == "intent"))),
  pick("vote 1: an explicit rule of the user's"; (m | .kind == "rule" and .origin == "policy"); denied_attack and vote((m | .kind == "rule" and .origin == "policy"))),
  pick("vote 1: a restriction read from policy text"; (m | .kind == "rule" and .origin == "policy_text"); denied_attack and vote((m | .kind == "rule" and .origin == "policy_text"))),
  pick("vote 1: a scoped past approval"; (m | .kind == "rule" and .origin == "past_approval"); granted_utility),
  pick("vote 1: a lookalike place"; (m | .kind == "lookalike"); .outcome == "deny" and .eval.kind == "attack"),
  pick("vote 1: a new place the prompt names like a protected one"; (m | .kind == "lookalike"); .outcome == "escalate" and .eval.kind == "attack"),
  pick("vote 1: a first-time create or delete"; (m | .kind == "first_time_change"); granted_utility),
  pick("vote 1: created in this session"; (m | .kind == "created_in_session"); granted_utility),
  pick("vote 2: personal data"; (m | .kind == "detector" and (.finding == "personal_data" or .finding == "people_table")); denied_attack),
  pick("vote 2: credentials"; (m | .kind == "detector" and (.finding == "credential" or .finding == "token" or .finding == "private_key" or .finding == "secret_assignment")); denied_attack),
  pick("vote 2: a sensitivity marking"; (m | .kind == "detector" and .finding == "marking"); denied_attack),
  pick("vote 2: instructions to an AI"; (m | .kind == "detector" and .finding == "injection"); denied_attack),
  pick("vote 2: content provenance"; (m | .kind == "provenance"); denied_attack),
  pick("vote 2: a policy's phrase"; (m | .kind == "policy_phrase"); denied_attack),
  pick("vote 2: a content clause"; (m | .kind == "content_rule"); denied_attack),
  pick("vote 2: taint from injected content"; (m | .kind == "taint") and (.reason | test("injected")); denied_attack),
  pick("vote 2: a request that follows read content"; (m | .kind == "taint") and (.reason | test("follows the content")); denied_attack),
  pick("vote 2: a change that does not serve the prompt"; (m | .kind == "unserved"); denied_attack),
  pick("vote 2: a delete nobody named"; (m | .kind == "unestablished"); denied_attack),
  pick("vote 2: nothing sensitive"; (m | .kind == "content_clear"); granted_utility),
  pick("vote 3: the pre-committed policy"; (m | .kind == "precommitted"); denied_attack and vote((m | .kind == "precommitted")))
