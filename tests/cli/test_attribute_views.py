"""What `dex inspect` (JSON and text), the live view and the plain lines show of a flow's
attributes and locks: `state.attributes` (maps as {name: {instance: value}}, last known for a
closed flow), `state.locks`, each step's `locksHeld` / `waitingForLock`, the Attributes and Locks
panels, and a queued step "waiting for the lock on counter, held by LockedIncrement-1" (or an RPC)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest
from rich.console import Console

from dexcli.cli.render import LineDiffer, live_view
from dexcli.cli.render_inspect import inspect_view
from dexcli.testing import DexTestEnv
from tests.cli.cli_helpers import Cli
from tests.engine.attribute_flows import CounterFlow
from tests.engine.engine_helpers import inspect_when


def text(renderable: Any) -> str:
    console = Console(width=200, no_color=True, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


@pytest.fixture
def queued_behind_a_lock() -> Iterator[tuple[DexTestEnv, dict[str, Any]]]:
    """A flow whose LockedIncrement-1 holds `counter` for 100 s and LockedIncrement-2 waits for it."""
    with DexTestEnv(start=0.0) as env:
        env.start(CounterFlow(), [-100, -1], "f")
        yield env, inspect_when(env, "f", lambda: env.clock.now() >= 50)


def test_inspect_json_has_the_attributes_and_who_holds_or_waits_for_each_lock(queued_behind_a_lock) -> None:
    _, snap = queued_behind_a_lock
    state = snap["state"]
    assert state["attributes"] == {"status": "counting", "notes": {"fan": "2 increments"}}
    assert state["attributeMaps"] == ["notes"]
    [lock] = state["locks"]
    assert (lock["key"], lock["holder"], lock["holderKind"], lock["expiresTime"]) == (
        "counter", "LockedIncrement-1", "step", None)
    steps = {s["stepExecutionId"]: s for s in snap["steps"]}
    assert steps["LockedIncrement-1"]["locksHeld"] == ["counter"]
    assert steps["LockedIncrement-1"]["waitingForLock"] is None
    assert steps["LockedIncrement-2"]["locksHeld"] == []
    assert steps["LockedIncrement-2"]["waitingForLock"] == {"key": "counter", "holder": "LockedIncrement-1"}
    assert steps["Fan-1"]["locksHeld"] == [] and steps["Fan-1"]["waitingForLock"] is None


def test_the_live_view_names_the_lock_a_queued_step_waits_for_and_its_holder(queued_behind_a_lock) -> None:
    _, snap = queued_behind_a_lock
    shown = text(live_view(snap, "dex.db"))
    assert "LockedIncrement-2       waiting for the lock on counter, held by LockedIncrement-1" in shown
    assert "locks       counter  held while this attempt runs" in shown
    lines = LineDiffer().lines(snap)
    assert lines[-1].endswith("· LockedIncrement-2 waiting for the lock on counter, held by LockedIncrement-1")
    differ = LineDiffer()
    differ.lines(snap)
    assert not any("waiting for the lock" in ln for ln in differ.lines(snap))  # said once


def test_inspect_text_has_attributes_and_locks_panels(queued_behind_a_lock) -> None:
    _, snap = queued_behind_a_lock
    shown = text(inspect_view(snap))
    assert " Attributes\n   notes[fan] = \"2 increments\"\n   status = \"counting\"\n" in shown
    assert " Locks\n   counter  held by LockedIncrement-1 since 00:00:00 · waiting: LockedIncrement-2\n" in shown
    assert "LockedIncrement-2 is waiting for the lock on counter, held by LockedIncrement-1" in shown


def test_a_lock_an_rpc_holds_is_named_by_the_rpc() -> None:
    with DexTestEnv(start=0.0) as env:
        env.start(CounterFlow(), [0, -1], "f")  # Hold waits on a channel; LockedIncrement-1 runs 1 s
        env.drive(["f"], until=lambda: env.clock.now() >= 5)
        with env.store.tx() as tx:  # an RPC in another process holds the lock (taken as invoke_rpc does)
            assert tx.try_locks("f", ("counter",), "rpc:bump:ab12cd34", 5.0, 65.0) is None
        snap = env.inspect("f")
    [lock] = snap["state"]["locks"]
    assert (lock["holder"], lock["holderKind"], lock["expiresTime"]) == (
        "rpc:bump:ab12cd34", "rpc", "1970-01-01T00:01:05.000Z")
    assert "counter  held by RPC bump since 00:00:05 (rpc:bump:ab12cd34, expires 00:01:05)" in text(inspect_view(snap))


def test_a_closed_flow_shows_its_last_attributes_and_no_locks(cli: Cli) -> None:
    cli.ok("run", "payment", "--flow-id", "pay", "--time-skip", "--input", '{"payment_id": "p-1", "amount": 250}')
    snap = cli.json("inspect", "pay", "--json")
    assert snap["summary"]["flowStatus"] == "FLOW_STATUS_COMPLETED"
    assert snap["state"]["attributesByName"] == {"settled_total": 250, "payment_state": "settled"}
    assert snap["state"]["attributes"] == [{"key": "payment_state", "value": "settled"},  # the server's KV list
                                           {"key": "settled_total", "value": 250}]
    assert snap["state"]["locks"] == [] and all(s["locksHeld"] == [] for s in snap["steps"])
    shown = cli.ok("inspect", "pay").stdout
    assert " Attributes\n   payment_state = \"settled\"\n   settled_total = 250\n History" in shown
    assert " Locks" not in shown


def test_a_flow_without_attributes_shows_no_panel(cli: Cli) -> None:
    cli.ok("run", "three-steps", "--flow-id", "t", "--input", "1")
    shown = cli.ok("inspect", "t").stdout
    assert " Attributes" not in shown and " Locks" not in shown
