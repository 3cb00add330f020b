"""Where the wall clock reaches the output, "now" is pinned with freezegun: the durations in
`dex list` and the ages in `dex inspect` (the live view computes them the same way, from the
same `now`)."""

from __future__ import annotations

import json
from pathlib import Path

from freezegun import freeze_time

from tests.cli.cli_helpers import Cli, start_flow

START = "2026-11-30 09:00:00"


def test_list_shows_how_long_a_running_flow_has_run(cli: Cli, db: Path) -> None:
    with freeze_time(START) as frozen:
        start_flow(db, "three-steps", "ages", 1)
        frozen.tick(90)
        row = next(line for line in cli.ok("list").stdout.splitlines() if line.startswith("ages"))
        assert "2026-11-30 09:00:00" in row and "1 m 30 s" in row
        frozen.tick(3600)
        row = next(line for line in cli.ok("list").stdout.splitlines() if line.startswith("ages"))
        assert "1 h 1 m" in row


def test_inspect_measures_a_queued_step_against_now(db: Path, cli: Cli) -> None:
    """Nothing drives the flow: its start step has been due for as long as the clock ran on."""
    with freeze_time(START) as frozen:
        start_flow(db, "three-steps", "due", 1)
        frozen.tick(12)
        snap = json.loads(cli.ok("inspect", "due", "--json").stdout)
        assert snap["now"] == "2026-11-30T09:00:12.000Z"
        assert snap["summary"]["startTime"] == "2026-11-30T09:00:00Z"  # the Dex CLI's form: no zero fraction
        [step] = snap["steps"]
        assert step["status"] == "QUEUED" and step["secondsToNextAttempt"] == -12.0
