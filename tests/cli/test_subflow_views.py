"""What the views show of SubFlows, from the fan-out example's snapshots: a parent's live view
and `dex inspect` list its children with their status and its waiting step names each child; a
child's view names its parent; the timeline draws a row per child; `inspect --json` has a
parent's `subFlows`, a child's `summary.parentFlowId` and the waiting condition's
`subFlowConditions`. In virtual time."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from dexcli.cli.render import LineDiffer, live_view
from dexcli.cli.render_inspect import inspect_view
from dexcli.cli.timeline import timeline_lines
from dexcli.engine.inspect_json import dex_cli_json
from dexcli.sdk.results import StopFlowOptions
from dexcli.testing import DexTestEnv
from dexcli_flows.fan_out import FanOutFlow

CHILD = "SubFlow:demo-Split-1-{}"


def text(renderable: Any) -> str:
    console = Console(width=200, no_color=True, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def _finished(env: DexTestEnv, i: int) -> bool:
    flow = env.store.get_flow(CHILD.format(i))
    return flow is not None and not flow.is_running


def test_a_parent_and_its_children_as_every_view_shows_them() -> None:
    with DexTestEnv(start=1_000_000.0) as env:
        env.start(FanOutFlow(), 3, "demo")
        env.drive(["demo"], until=lambda: _finished(env, 0))
        env.client.stop_flow(CHILD.format(2), StopFlowOptions())
        snap = env.inspect("demo")
        live = text(live_view(snap, "dex.db"))
        assert f"{CHILD.format(0)}  SquareFlow  COMPLETED" in live
        assert f"{CHILD.format(1)}  SquareFlow  RUNNING" in live
        assert f"{CHILD.format(2)}  SquareFlow  CANCELED" in live
        assert f"{CHILD.format(1)} SquareFlow RUNNING" in live  # the waiting step's condition
        assert "only external input" not in live  # a child moves it on
        shown = text(inspect_view(snap))
        assert "SubFlows (3)" in shown and f"waits for all of: {CHILD.format(0)} SquareFlow COMPLETED" in shown
        timeline = "\n".join(line.plain for line in timeline_lines(snap, 100))
        assert "↳Split-1-0" in timeline and "↳Split-1-2" in timeline and "═" in timeline
        js = dex_cli_json(snap)
        assert [c["flowStatus"] for c in js["subFlows"]] == ["COMPLETED", "RUNNING", "CANCELED"]
        (active,) = js["state"]["activeStepExecutions"]
        conds = active["waitingCondition"]["subFlowConditions"]
        assert [(c["subFlowIndex"], c["subFlowId"], c["completed"]) for c in conds] == [
            (0, CHILD.format(0), True), (1, CHILD.format(1), False), (2, CHILD.format(2), True)]
        done = active["completedConditions"]["completedSubFlowResults"]
        assert {k: v["flowStatus"] for k, v in done.items()} == {"0": "FLOW_STATUS_COMPLETED",
                                                                 "2": "FLOW_STATUS_CANCELED"}
        assert done["0"]["results"][0]["output"] == 1
        lines = "\n".join(LineDiffer().lines(snap))  # the plain lines of `dex run` into a pipe
        assert f"↳ {CHILD.format(1)} (SquareFlow) started" in lines and f"↳ {CHILD.format(2)} CANCELED" in lines
        child = env.inspect(CHILD.format(1))
        assert "Parent:  demo  (started by its step Split-1: a SubFlow)" in text(inspect_view(child))
        assert dex_cli_json(child)["summary"]["parentFlowId"] == "demo"
        assert env.client.wait_for_flow("demo").single_output(dict)["sumOfSquares"] == 5
