"""`attempt.step_input`: an attempt's stored input decoded as its step's type. dex's own compact
JSON takes the scanner's short way; any other text gets `json.loads`' value and errors."""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

from dexcli.engine.attempt import step_input


@dataclass
class Point:
    x: int
    y: int


def _run(text: str | None, input_type: Any) -> Any:
    return SimpleNamespace(step=SimpleNamespace(input=text), spec=SimpleNamespace(input_type=input_type))


@pytest.mark.parametrize("text", ["0", "-12", "1.5e3", '"a\\u00e9"', "true", "null", "[1,2,[3]]",
                                  '{"a":1,"b":[null,"x"]}', ' 7', '7 ', ' {"a": 1} ', '\n"x"\n'])
def test_same_value_as_json_loads(text: str) -> None:
    assert step_input(_run(text, Any)) == json.loads(text)


def test_decoded_as_the_step_type() -> None:
    assert step_input(_run('{"x":1,"y":2}', Point)) == Point(1, 2)
    assert step_input(_run(None, Any)) is None
    assert step_input(_run("", Any)) is None


@pytest.mark.parametrize("text", ["1 2", "[1,", "{", "nope", '"a" "b"', "[1]x"])
def test_bad_text_raises_as_json_loads_does(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as got:
        step_input(_run(text, Any))
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text)
    assert str(got.value) == str(expected.value)


def test_attempt_key_is_still_a_frozen_dataclass() -> None:
    """AttemptKey (one per attempt) is built by records.quick_init: same fields, equality,
    hash and repr, still frozen."""
    import dataclasses

    from dexcli.engine.transitions import AttemptKey

    key = AttemptKey("f", "S-1", 2, "host:1:abc")
    assert (key.flow_id, key.seid, key.attempt, key.owner) == ("f", "S-1", 2, "host:1:abc")
    assert key == AttemptKey("f", "S-1", 2, "host:1:abc") and hash(key) == hash(AttemptKey("f", "S-1", 2, "host:1:abc"))
    assert key != AttemptKey("f", "S-1", 3, "host:1:abc")
    assert repr(key) == "AttemptKey(flow_id='f', seid='S-1', attempt=2, owner='host:1:abc')"
    assert dataclasses.astuple(key) == ("f", "S-1", 2, "host:1:abc")
    with pytest.raises(dataclasses.FrozenInstanceError):
        key.attempt = 3  # type: ignore[misc]
