"""StepExecuteCompleted's payload and a decision's summary are written out as f-strings: the same
text, to the character, that encoding their fields with json_object gives."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dexcli.engine.deadlines import iso
from dexcli.engine.transitions import outcomes
from dexcli.engine.transitions.steps import AttemptKey
from dexcli.store import json_object
from tests.store.builders import make_step


def _as_json_object(key: AttemptKey, from_seid: str, step_type: str, started: float, now: float, summary: str,
                    extra: dict[str, Any] | None) -> str:
    return json_object({"stepExecutionId": key.seid, "fromStepExecutionId": from_seid, "stepType": step_type,
                        "attempt": key.attempt, "startedTime": iso(started), "duration": round(now - started, 6)},
                       ("decision", summary), extra or {})


@pytest.mark.parametrize(("step_type", "started", "now", "extra"), [
    ("Second", 1_796_000_000.123456, 1_796_000_000.5, None),
    ("Second", 1_796_000_000.0, 1_796_000_000.0, {}),
    ("Étape\u2603", 1_796_000_000.25, 1_796_000_003.000001, {"recordEvents": ["a\"b", {"ü": 1.5}], "canceled": []}),
    ("S", 12, 15, {"upsertAttributes": {"k": None, "t": True}}),  # whole-second times on a virtual clock
    ("S", 0.0, 1e17, None),
])
def test_the_completed_event_is_the_text_json_object_makes(step_type: str, started: float, now: float,
                                                            extra: dict[str, Any] | None) -> None:
    key = AttemptKey("f", f"{step_type}-3", 2, "owner")
    step = make_step("f", key.seid, step_type=step_type, from_step_execution_id="__start__")
    summary = '{"kind":"goTo","next":[{"stepType":"T","stepExecutionId":"T-1","input":{"x":"\\u00fc"}}]}'
    text = outcomes._completed_event(key, step, started, now, summary, extra)
    assert text == _as_json_object(key, "__start__", step_type, started, now, summary, extra)
    assert json.loads(text)["decision"] == json.loads(summary)


@pytest.mark.parametrize("has_output", [False, True])
def test_a_summary_with_next_steps_is_the_text_json_object_makes(has_output: bool) -> None:
    from types import SimpleNamespace

    from dexcli.sdk.decisions import DecisionKind

    created = [make_step("f", "Ünë-1", step_type="Ünë"), make_step("f", "B-2", step_type="B")]
    nexts = (SimpleNamespace(input_json='{"a":[1,2]}'), SimpleNamespace(input_json="null"))
    decision = outcomes.Decision(DecisionKind.NEXT, nexts, {"o": "ü"} if has_output else None,  # type: ignore[arg-type]
                                 has_output, "why \"so\"")
    rest: dict[str, Any] = {"output": {"o": "ü"}} if has_output else {}
    rest["reason"] = 'why "so"'
    items = ",".join(json_object({"stepType": s.step_type, "stepExecutionId": s.step_execution_id},
                                 ("input", n.input_json)) for s, n in zip(created, nexts, strict=True))
    assert outcomes._summary(decision, created) == json_object({"kind": "goTo"}, ("next", f"[{items}]"), rest)
