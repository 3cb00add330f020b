"""Interrupted attempts (Ctrl-C, SIGTERM, a closed output) do not count against
maximum_attempts: after two of them the fifth attempt of a step limited to 3 is its third
counted one, and the live view and `dex inspect` say so instead of a `5/3`."""

from __future__ import annotations

import io
import textwrap

import pytest
from rich.console import Console

from dexcli.cli.render import live_view
from dexcli.engine.events import Event
from dexcli.engine.views import inspect_flow
from dexcli.store import Store

FLAKY_FLOW = '''
import asyncio
from datetime import timedelta

from dexcli import AsyncContext, Flow, RetryPolicy, Step, StepDecision, StepList, StepOptions, graceful_complete


class Flaky(Step[None]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_retry=RetryPolicy(maximum_attempts=3, initial_interval=timedelta(seconds=1)))

    async def execute(self, context: AsyncContext, input: None) -> StepDecision:
        if context.attempt <= 2:
            await context.heartbeat(context.attempt)
            await asyncio.sleep(100)  # interrupted here
        if context.attempt < 5:
            raise ValueError(f"attempt {context.attempt} fails")
        return graceful_complete("done")


class FlakyFlow(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Flaky())
'''


def _interrupted_twice(cli, tmp_path) -> None:
    """Start the flow and stop two drives of it as Ctrl-C does, each on its attempt's heartbeat."""
    from dexcli.cli.driver import build_engine
    from dexcli.cli.loader import load_flow

    path = tmp_path / "flaky.py"
    path.write_text(textwrap.dedent(FLAKY_FLOW))

    def ctrl_c_on_heartbeat(ev: Event) -> None:
        if ev.type == "heartbeat":
            raise KeyboardInterrupt

    store = Store(cli.db)
    try:
        flow, ref = load_flow(file=f"{path}:FlakyFlow")
        build_engine(store, time_skip=True).start_flow(flow, "f", None, flow_ref=ref)
        for _ in range(2):
            engine = build_engine(store, time_skip=True)
            engine.events.listeners.append(ctrl_c_on_heartbeat)
            with pytest.raises(KeyboardInterrupt):
                engine.drive(["f"], until=lambda: False)
        assert [a.outcome.value for a in store.attempts_of("f")] == ["INTERRUPTED", "INTERRUPTED"]
    finally:
        store.close()


def test_attempts_after_interrupted_ones_are_shown_against_the_limit_they_count_for(cli, tmp_path):
    _interrupted_twice(cli, tmp_path)
    out = cli.ok("resume", "f", "--time-skip").stdout
    assert "attempt 3 (1/3, +2 interrupted) started" in out
    assert "attempt 4 (2/3, +2 interrupted) failed: builtins.ValueError: attempt 4 fails" in out
    assert "attempt 5 (3/3, +2 interrupted) started" in out
    assert not any(f"{n}/3" in out for n in (4, 5)), out

    table = cli.ok("inspect", "f").stdout
    assert "5 (3/3, +2 interrupted)" in table and "2 (1/3, +1 interrupted)" in table
    assert not any(f" {n}/3 " in table for n in (4, 5)), table

    store = Store(cli.db)
    try:
        snap = inspect_flow(store, "f", store.get_flow("f").close_time or 0.0)  # type: ignore[union-attr]
    finally:
        store.close()
    console = Console(width=120, record=True, no_color=True, file=io.StringIO())
    console.print(live_view(snap, str(cli.db), 0.0, (), ()))
    view = console.export_text()
    assert "attempt 5 (3/3, +2 interrupted)" in view and "5/3" not in view
