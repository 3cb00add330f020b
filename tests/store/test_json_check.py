"""A row's JSON columns are checked as it is read: the texts already seen and plain integers skip
the parse; a text that is no JSON is refused however it looks."""

from __future__ import annotations

import pytest

from dexcli.store import records
from dexcli.store.errors import DamagedDatabaseError
from dexcli.store.records import FlowRecord, FlowState, flow_record

_ROW = ("f", "r", "T", None, "RUNNING", "0", None, 1.0, None, None, None, 0, "[]", 0.0, *[None] * 13)


def _read(input_text: str) -> FlowRecord:
    return flow_record((*_ROW[:5], input_text, *_ROW[6:]), "db")


@pytest.mark.parametrize("text", ["0", "7", "1234567890123", "-3", "1.5", "1e3", '"x"', "[1, 2]"])
def test_json_texts_read_as_they_are(text: str) -> None:
    assert _read(text).input == text


@pytest.mark.parametrize("text", ["01", "00", "", "1.", "٣", "12a", "[1,", "{", "nan"])
def test_a_text_that_is_no_json_is_refused_even_if_it_looks_like_a_number(text: str) -> None:
    with pytest.raises(DamagedDatabaseError, match="input is not JSON"):
        _read(text)


def test_plain_integers_are_not_kept_in_the_cache() -> None:
    _read("424242")
    assert "424242" not in records._SEEN_JSON and "424242" not in records._SEEN_BEFORE


def test_a_text_in_use_survives_a_new_generation_of_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(records, "_SEEN_JSON", set())
    monkeypatch.setattr(records, "_SEEN_BEFORE", set())
    monkeypatch.setattr(records, "_SEEN_MAX", 4)
    parsed: list[str] = []
    real = records.json.loads
    monkeypatch.setattr(records.json, "loads", lambda text: parsed.append(text) or real(text))
    _read('{"hot": 1}')
    for i in range(10):  # new texts fill generations; the hot one is read between them
        _read(f'["new", {i}]')
        _read('{"hot": 1}')
    assert parsed.count('{"hot": 1}') == 1  # parsed once, found again in every generation since
    assert len(records._SEEN_JSON) <= 4 and len(records._SEEN_BEFORE) <= 4
    assert _read('{"hot": 1}').status is FlowState.RUNNING


@pytest.mark.parametrize("status", list(FlowState))
def test_each_stored_state_reads_as_its_member(status: FlowState) -> None:
    assert flow_record((*_ROW[:4], status.value, *_ROW[5:]), "db").status is status


@pytest.mark.parametrize("value", ["DONE", "running", b"RUNNING", 1, None])
def test_a_state_no_dex_writes_is_refused(value: object) -> None:
    with pytest.raises(DamagedDatabaseError, match="status .* is not one of RUNNING"):
        flow_record((*_ROW[:4], value, *_ROW[5:]), "db")
