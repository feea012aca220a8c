# Picks, for each mechanism of the twin, one audit line of `pincer eval --audit FILE`: a
# decision of Pincer on a sample's monitored access whose votes carry that mechanism and
# whose outcome is the one the mechanism is there for; preferably one where no vote of
# another mechanism denied too (so the line shows what this mechanism decided), then the
# first by persona, sample, session and step. Usage: jq -n -f docs/audit-examples.jq FILE
def m: .mechanism // {};
def pick(name; test; want):
  [ .[] | select(.eval.defense == "pincer" and .eval.monitored and want)
        | select(any(.votes[]; (m | test))) ]
  | sort_by([.votes[] | select(.verdict == "deny" and ((m | test) | not))] | length > 0)
  | first | {example: name, line: .};
[ inputs ] | sort_by(.eval.persona, .eval.sample, .eval.session, .eval.step) |
  pick("personal data"; .kind == "detector" and (.finding == "personal_data" or .finding == "people_table"); .outcome == "deny" and .eval.kind == "attack"),
  pick("credentials"; .kind == "detector" and .finding == "credential"; .outcome == "deny" and .eval.kind == "attack"),
  pick("content provenance"; .kind == "provenance"; .outcome == "deny" and .eval.kind == "attack"),
  pick("scoped approval"; .kind == "rule" and .origin == "past_approval"; .outcome == "grant" and .eval.kind == "utility"),
  pick("text-only policy"; .kind == "rule" and .origin == "policy_text"; (.outcome == "deny" or .outcome == "escalate") and .eval.kind == "attack"),
  pick("lookalike place"; .kind == "lookalike"; .outcome == "deny" and .eval.kind == "attack"),
  pick("first-time create or delete"; .kind == "first_time_change"; .outcome == "grant" and .eval.kind == "utility"),
  pick("change that does not serve the prompt"; .kind == "unserved"; .outcome == "deny" and .eval.kind == "attack"),
  pick("new place the prompt names like a protected one"; .kind == "lookalike"; (.outcome == "escalate") and .eval.kind == "attack")
