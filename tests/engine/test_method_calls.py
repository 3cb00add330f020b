"""One method call spans all its attempts, as on a Dex server (issue 23, rules 2, 5, 7 and 9),
in virtual time:

- every attempt reads the attributes as they were when the call began, after a restart too
  (the server hands each retry the activity input its call built: workflowImpl.go, InvokeExecuteMethod);
- a step holds its execute locks for the whole call, backoff included (the server unlocks only
  after the activity and all its retries: `persistenceManager.UnlockKeys` after `ExecuteActivity`);
- a step that waits for a lock starts its TotalDuration when it gets it (the server schedules
  the activity, whose ScheduleToClose is TotalDuration, after `LoadAttributes` took the lock);
- a wait_for attempt has the step's heartbeat timeout (the server sets HeartbeatTimeout on the
  WaitFor activity too; SDK 1.23: heartbeat_timeout is the "Regular-activity progress deadline").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dexcli import FlowStatus
from dexcli.sdk.errors import RpcLockConflictError
from dexcli.store import StepState
from dexcli.testing import DexTestEnv
from tests.engine.method_call_flows import MethodCallFlow, SlowWaitForFlow

ROOT = Path(__file__).resolve().parents[2]


def _step(env: DexTestEnv, flow_id: str, seid: str) -> dict[str, Any]:
    (step,) = [s for s in env.inspect(flow_id)["steps"] if s["stepExecutionId"] == seid]
    return step


def _status(env: DexTestEnv, flow_id: str, seid: str) -> StepState | None:
    found = [s.status for s in env.store.steps_of(flow_id) if s.step_execution_id == seid]
    return found[0] if found else None


def _counter(env: DexTestEnv, flow_id: str) -> Any:
    return {k: json.loads(v) for k, _, _, v in env.store.read(lambda tx: tx.attribute_values(flow_id))}["counter"]


def _snapshot_rows(env: DexTestEnv) -> list[tuple[Any, ...]]:
    return env.store.read(lambda tx: tx.c.execute(
        "SELECT step_execution_id, key, value FROM attribute_snapshots ORDER BY key").fetchall())


# ------------------------------------------------------------------ rule 2: one snapshot per call
def test_every_attempt_of_a_call_reads_the_attributes_as_the_call_began() -> None:
    """An RPC writes while attempt 1 runs and again during the backoff: attempt 2 still reads
    counter 5 and no note (None: the call's snapshot); the next call (ReadsAgain) reads both writes."""
    with DexTestEnv(start=0.0) as env:
        flow = MethodCallFlow()
        env.start(flow, ["reads"], "f")
        wrote: list[int] = []

        def write_twice() -> bool:
            now = env.clock.now()
            if not wrote and now >= 1:  # attempt 1 is running (it runs 2 s)
                wrote.append(env.client.invoke_rpc(flow.write, "f"))
            if len(wrote) == 1 and _status(env, "f", "ReadsThenFails-1") is StepState.BACKOFF:
                wrote.append(env.client.invoke_rpc(flow.write, "f"))
            return len(wrote) == 2

        env.drive(["f"], until=write_twice)
        assert wrote == [6, 7]
        result = env.client.wait_for_flow("f")

        assert [(s["attempt"], s["counter"], s["note"]) for s in flow.reads.seen] == [(1, 5, None), (2, 5, None)]
        assert result.status is FlowStatus.COMPLETED
        assert result.completions[-1].output == {"attempt": 1, "counter": 7, "note": "x"}
        assert _snapshot_rows(env) == []  # dropped as each call ended


def test_the_call_snapshot_survives_a_crash_between_attempts(tmp_path: Path) -> None:
    """A process drives attempt 1, an RPC writes during the backoff, and the process dies
    (os._exit). Another process's engine runs attempt 2, which reads the call's snapshot from
    the database (what it keeps there: tests/store/test_attribute_calls.py)."""
    db = tmp_path / "dex.db"
    victim = (
        "import os, sys\n"
        "from dexcli.store import StepState\n"
        "from dexcli.testing import DexTestEnv\n"
        "from tests.engine.method_call_flows import MethodCallFlow\n"
        "env = DexTestEnv(sys.argv[1], start=0.0)\n"
        "flow = MethodCallFlow()\n"
        "env.start(flow, ['reads'], 'f')\n"
        "backoff = lambda: any(s.step_execution_id == 'ReadsThenFails-1' and s.status is StepState.BACKOFF\n"
        "                      for s in env.store.steps_of('f'))\n"
        "env.drive(['f'], until=backoff)\n"
        "env.client.invoke_rpc(flow.write, 'f')\n"
        "os._exit(137)\n")
    p = subprocess.run([sys.executable, "-c", victim, str(db)], cwd=ROOT, text=True, capture_output=True,
                       timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 137, p.stderr

    with DexTestEnv(db, start=0.0) as env:
        flow = MethodCallFlow()
        env.engine.definitions.registry.add(flow)  # started by the dead process: this one only drives it
        result = env.client.wait_for_flow("f")
        assert [(s["attempt"], s["counter"], s["note"]) for s in flow.reads.seen] == [(2, 5, None)]
        assert result.status is FlowStatus.COMPLETED
        assert result.completions[-1].output == {"attempt": 1, "counter": 6, "note": "x"}
        assert _snapshot_rows(env) == []


# ------------------------------------------------------------------ rule 5: locks held through the backoff
def test_a_step_holds_its_execute_locks_through_its_backoff() -> None:
    """LockedFailsOnce fails its first attempt and backs off 10 s: a locked RPC in the backoff
    gets RpcLockConflictError (the step still holds the lock, and inspect says so); once the
    call has completed, the RPC gets in."""
    with DexTestEnv(start=0.0) as env:
        flow = MethodCallFlow()
        env.start(flow, ["locked"], "f")
        env.drive(["f"], until=lambda: _status(env, "f", "LockedFailsOnce-1") is StepState.BACKOFF)

        with pytest.raises(RpcLockConflictError, match="LockedFailsOnce-1"):
            env.client.invoke_rpc(flow.bump, "f")
        step = _step(env, "f", "LockedFailsOnce-1")
        assert step["status"] == "BACKOFF" and step["locksHeld"] == ["counter"]
        assert env.inspect("f")["state"]["locks"][0]["holder"] == "LockedFailsOnce-1"

        env.drive(["f"], until=lambda: _status(env, "f", "LockedFailsOnce-1") is StepState.COMPLETED)
        assert _counter(env, "f") == 6  # the step's own increment, with nothing in between
        assert env.store.read(lambda tx: tx.lock_holder("f", "counter", env.clock.now())) is None


def test_a_step_waiting_for_the_lock_does_not_run_between_another_steps_attempts() -> None:
    """LockedWriter (same lock) is started with LockedFailsOnce: it runs only once that call has
    ended, not in its backoff; the increment reads 5, and LockedWriter's 100 comes last."""
    with DexTestEnv(start=0.0) as env:
        flow = MethodCallFlow()
        result = env.run(flow, ["locked", "writer"], "f")
        assert result.status is FlowStatus.COMPLETED
        locked, writer = _step(env, "f", "LockedFailsOnce-1"), _step(env, "f", "LockedWriter-1")
        assert [a["outcome"] for a in locked["attempts"]] == ["FAILED", "COMPLETED"]
        assert writer["attempts"][0]["startTime"] >= locked["attempts"][-1]["endTime"]
        assert [c.output for c in result.completions] == [6, 100]
        assert _counter(env, "f") == 100


# ------------------------------------------------------------------ rule 7: TotalDuration from the lock grant
def test_total_duration_starts_when_the_lock_is_granted() -> None:
    """ShortBudget (20 s TotalDuration) waits for HoldsLock50s's lock (80 s: the first drive's
    end, at 30 s, interrupts the holder, which runs again) and shows its whole budget left while
    it waits; then its first attempt fails and its retry 5 s later completes: the budget counts
    from the lock, and no attempt ends before it starts."""
    with DexTestEnv(start=0.0) as env:
        env.start(MethodCallFlow(), ["holds", "short"], "f")
        waiting: list[dict[str, Any]] = []

        def at_30() -> bool:  # ShortBudget waits for the lock: none of its budget is spent
            if env.clock.now() >= 30:
                waiting.append(_step(env, "f", "ShortBudget-1"))
            return bool(waiting)

        env.drive(["f"], until=at_30)
        assert waiting[0]["waitingForLock"] == {"key": "counter", "holder": "HoldsLock50s-1"}
        assert waiting[0]["secondsTotalLeft"] == 20
        result = env.client.wait_for_flow("f")
        assert result.status is FlowStatus.COMPLETED, result.error_message
        short = _step(env, "f", "ShortBudget-1")
        tries = short["attempts"]
        assert [a["outcome"] for a in tries] == ["FAILED", "COMPLETED"]
        holds = _step(env, "f", "HoldsLock50s-1")["attempts"]  # its attempt the drive's end interrupted, then its rerun
        assert tries[0]["startTime"] == holds[-1]["endTime"] == "1970-01-01T00:01:20.000Z"
        assert all(a["endTime"] >= a["startTime"] for a in tries)
        assert result.completions[-1].output == "in budget"


# ------------------------------------------------------------------ rule 9: wait_for's heartbeat timeout
def test_a_silent_wait_for_is_timed_out_by_the_heartbeat_timeout() -> None:
    with DexTestEnv(start=0.0) as env:
        result = env.run(SlowWaitForFlow(), 0, "f")
        assert result.status is FlowStatus.FAILED
        (attempt,) = _step(env, "f", "SlowWaitFor-1")["attempts"]
        assert (attempt["outcome"], attempt["errorType"]) == ("TIMED_OUT", "Heartbeat")
        assert attempt["endTime"] == "1970-01-01T00:01:00.000Z"  # the default 60 s window


def test_a_wait_for_that_heartbeats_is_not_timed_out() -> None:
    with DexTestEnv(start=0.0) as env:
        result = env.run(SlowWaitForFlow(), 1, "f")
        assert result.status is FlowStatus.COMPLETED
        assert result.completions[-1].output == "waited"
