"""`dex inspect` numbers each flow's history from 1, as Dex does, whatever ran before it in the
same database (the history table's own id counts across flows)."""

from __future__ import annotations

import re


def test_each_flows_history_starts_at_event_1(cli):
    cli.ok("run", "three-steps", "--input", "1", "--flow-id", "first", "--time-skip")
    cli.ok("run", "three-steps", "--input", "2", "--flow-id", "second", "--time-skip")
    for fid in ("first", "second"):
        history = cli.json("inspect", fid, "--json")["history"]["events"]
        assert [e["eventId"] for e in history] == ["1", "2", "3", "4", "5"]
        assert [e["type"] for e in history][::4] == ["FlowStartedOrContinued", "FlowClosed"]
    text = cli.ok("inspect", "second").stdout
    numbered = re.findall(r"^\s+(\d+)\s+\d\d:\d\d:\d\d\s+(\w+)", text, re.M)
    assert numbered[0] == ("1", "FlowStarted") and numbered[-1] == ("5", "FlowClosed")
