from __future__ import annotations

import pytest

from dexcli.cli.loader import load_flow
from dexcli.graph.lint import RULES, SEED, lint_flow
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
VALIDATION_FLOWS = ["no_start", "unknown_target", "not_a_step_target", "duplicate_class", "duplicate_type",
                    "recovery_mismatch", "wrong_context", "short_heartbeat", "unreachable"]


def findings(report):
    return {(f.severity, f.rule, f.line) for f in report.findings}


def test_there_are_eight_rules_each_with_a_bad_flow():
    assert len(RULES) == 8 and set(RULES) == set(RULE_FLOWS)


@pytest.mark.parametrize("name", ["polling", "three-steps"])
def test_example_flows_have_zero_findings(name):
    report = lint_flow(load_flow(name)[0])
    assert report.findings == [] and report.suppressed == 0
    assert report.exit_code() == 0 and report.exit_code(strict=True) == 0


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
    assert report.exit_code() == 0 and report.exit_code(strict=True) == 1


@pytest.mark.parametrize("name", VALIDATION_FLOWS)
def test_each_validation_flow_produces_exactly_its_finding(name):
    report = lint_flow(load_bad(name))
    expected = expected_markers(name)
    assert len(expected) == 1
    assert findings(report) == expected
    severity = next(iter(expected))[0]
    assert report.exit_code() == (1 if severity == "error" else 0)
    assert report.exit_code(strict=True) == 1


def test_runtime_target_flow_has_no_findings():
    assert lint_flow(load_bad("runtime_target")).findings == []


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
