"""Small results that were wrong: a 0 s job, an empty flow id, a waiting step's duration, and
one flow's duration rounded one way in `dex list` and another in `dex inspect`."""

from __future__ import annotations

import io
import re
import sqlite3

from rich.console import Console

from dexcli.cli.render import live_view
from dexcli.engine.views import inspect_flow
from dexcli.store import Store
from tests.cli.cli_helpers import assert_error


def test_a_job_duration_of_0s_is_a_job_done_at_once(cli):
    cli.ok("run", "polling", "--flow-id", "j", "--job-duration", "0s", "--time-skip")
    snap = cli.json("inspect", "j", "--json")
    assert snap["summary"]["flowStatus"] == "FLOW_STATUS_COMPLETED"
    assert snap["streams"] == {}  # done at the first poll: never QUEUED or RUNNING
    assert snap["summary"]["durationSeconds"] < 2  # not the 6 s default


def test_an_empty_flow_id_is_refused_not_replaced(cli):
    assert_error(cli("run", "three-steps", "--flow-id", "", "--input", "1"), 2, "flow id '' must be non-empty")
    assert cli.ok("list").stdout.startswith("no flows in ")


def test_a_step_that_waited_ends_in_the_live_view_with_the_time_it_took(cli):
    cli.ok("run", "approval", "--flow-id", "x", "--input", '{"title": "t", "expire_after_seconds": 12}',
           "--time-skip")
    store = Store(cli.db)
    try:
        snap = inspect_flow(store, "x", 0.0)
    finally:
        store.close()
    console = Console(width=120, record=True, no_color=True, file=io.StringIO())
    console.print(live_view(snap, str(cli.db), 0.0, (), ()))
    line = next(ln for ln in console.export_text().splitlines() if "AwaitDecision-1" in ln and "✓" in ln)
    # its 12 s wait, not the 0.0 s execute; the timer fires at whole seconds (the commit time
    # rounded down, as on a Dex server), so the wait lasts between 11 and 12 s
    assert re.search(r"AwaitDecision-1\s+(11\.\d|12\.0) s", line), line


def test_list_and_inspect_round_a_flows_duration_the_same_way(cli):
    cli.ok("run", "three-steps", "--flow-id", "a", "--input", "1")
    with sqlite3.connect(cli.db) as conn:  # 12.5509 s: its millisecond times alone make it 12.5499…
        conn.execute("UPDATE flows SET start_time = 1800000000.0, close_time = 1800000012.5509 WHERE flow_id = 'a'")
    conn.close()
    listed = next(ln for ln in cli.ok("list").stdout.splitlines() if ln.startswith("a "))
    title = cli.ok("inspect", "a").stdout.splitlines()[0]
    took = re.search(r"after (\S+ s)", title)
    assert took is not None, title
    assert took.group(1) == "12.6 s" and "  12.6 s  " in listed, (title, listed)
