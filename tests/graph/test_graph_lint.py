from __future__ import annotations

import pytest

from dexcli.cli.loader import load_flow
from dexcli.graph.lint import FIX, RULES, SEED, lint_flow
from tests.graph.graph_helpers import BAD, expected_markers, load_bad

RULE_FLOWS = {
    "timer-self-loop": "timer_self_loop",
    "retry-as-poll": "retry_as_poll",
    "loop-without-heartbeat": "loop_without_heartbeat",
    "call-without-timeout": "call_without_timeout",
    "hand-written-deadline": "hand_written_deadline",
    "heartbeat-window": "heartbeat_window",
    "lock-held-while-polling": "lock_held",
    "page-token-run": "page_token",
}
VALIDATION_FLOWS = ["unknown_target", "not_a_step_target", "duplicate_class", "duplicate_type",
                    "recovery_mismatch", "wrong_context", "short_heartbeat", "unreachable"]


def findings(report):
    return {(f.severity, f.rule, f.line) for f in report.findings}


CODE_RULE_FLOWS = {
    "sync-context-heartbeat": "sync_context_heartbeat",
    "unyielded-frame": "unyielded_frame",
}


def test_there_are_eight_seed_rules_and_the_code_rules_each_with_a_bad_flow():
    assert len(SEED) == 8 and set(SEED) == set(RULE_FLOWS)
    assert set(RULES) == set(RULE_FLOWS) | set(CODE_RULE_FLOWS) and set(RULES) == set(FIX)


@pytest.mark.parametrize("rule, name", sorted(CODE_RULE_FLOWS.items()))
def test_each_code_rule_flow_produces_exactly_its_findings_with_the_fix(rule, name):
    report = lint_flow(load_bad(name))
    expected = expected_markers(name)
    assert {r for _, r, _ in expected} == {rule} and len(expected) >= 2
    assert findings(report) == expected  # and nothing on the lines that yield, await or keep the frame
    for finding in report.findings:
        assert finding.file == str(BAD / f"{name}.py")
        assert finding.message.endswith(f"Fix: {FIX[rule]}.") and "Seed:" not in finding.message
    assert report.graph.valid and report.exit_code() == 1 and report.exit_code(exit_zero=True) == 0


def test_the_sync_heartbeat_finding_names_the_call_and_its_consequence():
    report = lint_flow(load_bad("sync_context_heartbeat"))
    first = report.findings[0]
    assert first.step == "Count"
    assert first.message.startswith("Count: context.heartbeat(i) in a sync step")
    assert "INVALID_USER_FLOW_CODE" in first.message and "yield heartbeat(value)" in first.message


@pytest.mark.parametrize("name", ["polling", "three-steps"])
def test_example_flows_have_zero_findings(name):
    report = lint_flow(load_flow(name)[0])
    assert report.findings == [] and report.suppressed == 0
    assert report.exit_code() == 0 and report.exit_code(exit_zero=True) == 0


@pytest.mark.parametrize("rule, name", sorted(RULE_FLOWS.items()) + [("retry-as-poll", "not_ready_error")])
def test_each_rule_flow_produces_exactly_its_finding(rule, name):
    report = lint_flow(load_bad(name))
    expected = expected_markers(name)
    assert {r for _, r, _ in expected} == {rule}
    assert findings(report) == expected
    (finding,) = report.findings
    assert finding.file == str(BAD / f"{name}.py")
    assert f"Anti-pattern: \"{SEED[rule]}\"" in finding.message  # quotes the anti-pattern it matches
    assert "Seed:" not in finding.message  # the word of the rules' source, meaningless to a user
    assert report.graph.valid
    assert report.exit_code() == 1 and report.exit_code(exit_zero=True) == 0


@pytest.mark.parametrize("name", VALIDATION_FLOWS)
def test_each_validation_flow_produces_exactly_its_finding(name):
    report = lint_flow(load_bad(name))
    expected = expected_markers(name)
    assert len(expected) == 1
    assert findings(report) == expected
    assert report.exit_code() == 1  # an error or a warning: a finding fails
    assert report.exit_code(exit_zero=True) == 0


def test_runtime_target_flow_has_no_findings():
    assert lint_flow(load_bad("runtime_target")).findings == []


def test_a_flow_without_a_start_step_has_no_findings():
    report = lint_flow(load_bad("no_start"))
    assert report.findings == [] and report.graph.valid and report.exit_code() == 0


def test_ignore_comment_silences_the_rule_on_its_line():
    report = lint_flow(load_bad("silenced"))
    assert report.findings == [] and report.suppressed == 1


def test_ignore_comment_for_another_rule_does_not_silence(tmp_path):
    src = (BAD / "silenced.py").read_text().replace("ignore[call-without-timeout]", "ignore[heartbeat-window]")
    path = tmp_path / "other_rule.py"
    path.write_text(src)
    report = lint_flow(load_flow(file=f"{path}:SilencedFlow")[0])
    assert findings(report) == {("warning", "call-without-timeout", 18)}


def test_bare_ignore_silences_every_rule(tmp_path):
    src = (BAD / "silenced.py").read_text().replace("# dex: ignore[call-without-timeout]", "# dex: ignore")
    path = tmp_path / "bare.py"
    path.write_text(src)
    report = lint_flow(load_flow(file=f"{path}:SilencedFlow")[0])
    assert report.findings == [] and report.suppressed == 1


PLAIN_SYNC = """
from dexcli import Context, Flow, PersistenceSchema, Step, StepDecision, StepList, Stream, graceful_complete, heartbeat

LOG = Stream("Log", int, 1 << 20)


class Plain(Step[int]):
    def execute(self, context: Context, n: int) -> StepDecision:
        heartbeat(n)
        LOG.write(context, n)
        return graceful_complete(n)


class PlainFlow(Flow[int]):
    def __init__(self) -> None:
        self.plain = Plain()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.plain)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(LOG)
"""


def test_frames_in_a_plain_sync_step_say_what_happens_to_them(tmp_path):
    path = tmp_path / "plain.py"
    path.write_text(PLAIN_SYNC)
    report = lint_flow(load_flow(file=f"{path}:PlainFlow")[0])
    assert findings(report) == {("warning", "unyielded-frame", 9), ("warning", "unyielded-frame", 10)}
    dropped, refused = report.findings
    assert "heartbeat(n) in a sync step (not a generator) builds a frame nobody yields" in dropped.message
    assert "LOG.write(context, n) in a sync step (not a generator) fails the attempt at once" in refused.message
