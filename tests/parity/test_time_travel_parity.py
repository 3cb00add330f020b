"""Time travel's names against the official SDK: TimeTravelOptions has the same fields, order
and defaults (a positional call means the same in both), the enums the same members and values,
and Client/AsyncClient.time_travel the same parameters (tests/parity/test_api_parity.py SIGNATURES)."""

from __future__ import annotations

import dataclasses
import inspect
from datetime import UTC, datetime

import dexcli
from tests.parity.parity_kit import official


def _fields(cls: type) -> list[tuple[str, object]]:
    return [(f.name, f.default) for f in dataclasses.fields(cls)]


def test_time_travel_options_have_the_official_fields_and_defaults() -> None:
    assert _fields(dexcli.TimeTravelOptions) == _fields(official().TimeTravelOptions)
    assert dataclasses.is_dataclass(dexcli.TimeTravelOptions)
    frozen = [cls.__dataclass_params__.frozen for cls in (dexcli.TimeTravelOptions,
                                                                      official().TimeTravelOptions)]
    assert frozen == [True, True]


def test_the_same_positional_options_mean_the_same() -> None:
    dex = official()
    when = datetime(2026, 1, 1, tzinfo=UTC)
    mine = dexcli.TimeTravelOptions(dexcli.TimeTravelType.HISTORY_EVENT_TIME, when, None, None, None, "r", True)
    theirs = dex.TimeTravelOptions(dex.TimeTravelType.HISTORY_EVENT_TIME, when, None, None, None, "r", True)
    assert {k: getattr(v, "value", v) for k, v in dataclasses.asdict(mine).items()} == \
        {k: getattr(v, "value", v) for k, v in dataclasses.asdict(theirs).items()}


def test_time_travel_returns_a_run_id_in_both() -> None:
    for sdk in (dexcli, official()):
        for client in (sdk.Client, sdk.AsyncClient):
            sig = inspect.signature(client.time_travel)
            assert list(sig.parameters) == ["self", "flow_id", "options"]
            assert sig.return_annotation in (str, "str")
