"""The approval example across real processes: `dex run approval` waits in one process while
`dex rpc` from another decides it; a `dex run` killed while it waits on a timer is resumed and
the timer fires at the firing time persisted before the crash, not one reset by the restart."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from dexcli.store import StepState, Store
from tests.crash.crashkit import dex, finish, sigkill, spawn

WAIT_SECONDS = 30  # wall seconds a test gives a process to reach a state before failing


def _until_waiting(db: Path, flow_id: str, proc: subprocess.Popen[str]) -> Store:
    store = Store(db)
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        steps = store.steps_of(flow_id) if store.get_flow(flow_id) else []
        if steps and steps[0].status is StepState.WAITING:
            return store
        assert proc.poll() is None, "dex run ended before its step waited"
        time.sleep(0.05)
    raise AssertionError(f"{flow_id} did not reach its wait within {WAIT_SECONDS} s")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_an_rpc_from_another_process_completes_the_flow_within_two_seconds(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    run = spawn(db, "run", "approval", "--flow-id", "req", "--input", '{"title": "Laptop", "amount": 1200}')
    try:
        store = _until_waiting(db, "req", run)
        time.sleep(1.0)  # it keeps running while the step waits for a person
        assert run.poll() is None
        cpu = _cpu_seconds(run.pid)
        time.sleep(1.0)
        assert _cpu_seconds(run.pid) - cpu < 0.3  # and waits without spinning
        rpc = dex(db, "rpc", "req", "approve", "--input", '"dana"')
        answered = time.monotonic()
        assert rpc.returncode == 0, rpc.describe()
        assert json.loads(rpc.stdout) == "approved by dana"
        done = finish(run, timeout=WAIT_SECONDS)
        took = time.monotonic() - answered
    finally:
        sigkill(run)
    assert done.returncode == 0, done.describe()
    assert took < 2.0, f"the flow completed {took:.2f} s after the RPC returned"
    flow = store.get_flow("req")
    assert flow is not None and json.loads(flow.completions)[0]["output"] == {
        "status": "approved", "title": "Laptop", "by": "dana"}
    assert "○ AwaitDecision-1 waiting for any of: timer expire fires in" in done.stdout
    assert "dex rpc req approve|pending|reject --input JSON" in done.stdout
    assert "✓ AwaitDecision-1 wait over (completed): decision" in done.stdout
    store.close()


def test_a_timer_keeps_its_firing_time_across_a_crash(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    run = spawn(db, "run", "approval", "--flow-id", "req", "--input",
                '{"title": "Laptop", "expire_after_seconds": 30}')
    try:
        store = _until_waiting(db, "req", run)
        sigkill(run)
        finish(run)
    finally:
        sigkill(run)
    before = store.steps_of("req")[0]
    assert before.status is StepState.WAITING and before.wait is not None
    firing = json.loads(before.wait)["conditions"][1]["firingTime"]
    resumed = dex(db, "resume", "req", "--time-skip", "--json")
    assert resumed.returncode == 0, resumed.describe()
    events = [json.loads(ln) for ln in resumed.stdout.splitlines()]
    snap = events[-1]
    assert snap["summary"]["completions"][0]["output"]["status"] == "expired"
    after = store.steps_of("req")[0]
    assert after.wait is not None and json.loads(after.wait)["conditions"][1]["firingTime"] == firing
    assert after.wait_ended is not None and firing <= after.wait_ended < firing + 0.5, (firing, after.wait_ended)
    fired = next(e for e in events if e.get("type") == "waitCompleted")
    assert fired["conditionResults"]["timersFired"] == [True]
    store.close()


CHANNEL_ONLY = '''
from dexcli import Channel, Context, Flow, PersistenceSchema, RPCResult, Step, StepDecision, StepList, Wait
from dexcli import graceful_complete, rpc

votes = Channel("votes", str)


class Collect(Step[str]):
    def wait_for(self, context: Context, input: str) -> Wait:
        return Wait.until(votes.for_one())

    def execute(self, context: Context, input: str) -> StepDecision:
        return graceful_complete(votes.results(context))


class VoteFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Collect())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(votes)

    @rpc
    def vote(self, context: Context, who: str) -> RPCResult[str]:
        votes.publish(context, who)
        return RPCResult(who)
'''


def test_time_skip_with_only_external_input_left_says_so_and_waits(tmp_path: Path) -> None:
    (tmp_path / "votes.py").write_text(CHANNEL_ONLY)
    db = tmp_path / "dex.db"
    run = spawn(db, "run", "--file", f"{tmp_path / 'votes.py'}:VoteFlow", "--flow-id", "v", "--input", '"x"',
                "--time-skip")
    try:
        store = _until_waiting(db, "v", run)
        time.sleep(1.0)  # nothing to skip to: it must neither end nor spin
        cpu = _cpu_seconds(run.pid)
        time.sleep(1.0)
        assert run.poll() is None and _cpu_seconds(run.pid) - cpu < 0.3
        code = f"{tmp_path / 'votes.py'}:VoteFlow"  # a flow started from a file: `dex rpc` names its code
        assert dex(db, "rpc", "v", "vote", "--input", '"ann"', "--file", code).returncode == 0
        done = finish(run, timeout=WAIT_SECONDS)
    finally:
        sigkill(run)
    assert done.returncode == 0, done.describe()
    assert "only external input can move this flow on now" in done.stdout
    flow = store.get_flow("v")
    assert flow is not None and json.loads(flow.completions)[0]["output"] == ["ann"]
    assert flow.clock_offset == 0.0  # its clock did not jump
    store.close()
