"""A big value (a 2 MB input, returned as the result) is shown as its outline and size in the end
card, the live lines, `dex list` and `dex inspect`: `{"a": …} (2.0 MB)`. Printed whole, a 20 MB
one took half a minute to wrap; `dex inspect --json` still has all of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dexcli.cli.render import brief_json

BIG_FLOW = '''
from dexcli import Context, Flow, Step, StepDecision, StepList, graceful_complete

Doc = dict[str, str]


class Echo(Step[Doc]):
    def execute(self, context: Context, input: Doc) -> StepDecision:
        return graceful_complete(input)


class BigFlow(Flow[Doc]):
    def get_steps(self) -> StepList[Doc]:
        return StepList.start_step(Echo())
'''


@pytest.mark.parametrize(("value", "shown"), [
    ({"a": "x" * 2_000_000}, '{"a": …} (2.0 MB)'),
    ({"k": 1, "b": "y" * 5000}, '{"k": …, "b": …} (5.0 kB)'),
    ({f"key{i}": i for i in range(100)}, None),
    ([1] * 1000, "[… 1000 items] (3.0 kB)"),
    ("z" * 300, '"' + "z" * 198 + '…' + " (302 B)"),
    ({"a": 1}, '{"a": 1}'),
    ([1, 2], "[1, 2]"),
])
def test_brief_json_keeps_short_values_whole_and_outlines_long_ones(value, shown):
    text = brief_json(value)
    assert len(text) <= 220
    if shown is not None:
        assert text == shown
    else:
        assert text.startswith('{"key0": …, "key1": …') and text.endswith(", …} (1.3 kB)")


def test_a_big_result_is_its_outline_and_size_everywhere_it_is_shown(cli, tmp_path: Path):
    flow = tmp_path / "big.py"
    flow.write_text(BIG_FLOW)
    value = {"a": "x" * 2_000_000}
    given = tmp_path / "input.json"
    given.write_text(json.dumps(value))
    res = cli.ok("run", "--file", f"{flow}:BigFlow", "--input", f"@{given}", "--flow-id", "b", "--time-skip")
    assert len(res.stdout) < 2000, len(res.stdout)
    assert 'COMPLETED in' in res.stdout and 'result: {"a": …} (2.0 MB)' in res.stdout
    assert 'gracefulComplete → {"a": …} (2.0 MB)' in res.stdout  # the live lines
    listing = cli.ok("list").stdout
    assert len(listing) < 1000 and '{"a": …} (2.0 MB)' in listing
    shown = cli.ok("inspect", "b").stdout
    assert len(shown) < 5000 and 'Result:  {"a": …} (2.0 MB)' in shown and 'input {"a": …} (2.0 MB)' in shown
    assert cli.json("inspect", "b", "--json")["summary"]["completions"][0]["output"] == value


def test_the_view_reads_less_often_when_a_read_takes_long(tmp_path: Path):
    """A snapshot of a flow with a 20 MB value takes seconds: the view thread waits four times
    as long before the next, so reading never takes the drive's whole share of the GIL."""
    from dexcli.cli.driver import REPAINT_SECONDS, View, make_clock
    from dexcli.cli.shared import out_console
    from dexcli.store import Store

    Store(tmp_path / "dex.db").close()
    view = View(out_console(), tmp_path / "dex.db", "none", make_clock(False), "quiet")
    assert view._pause(REPAINT_SECONDS) == REPAINT_SECONDS
    view._read_seconds = 1.5
    assert view._pause(REPAINT_SECONDS) == 6.0
