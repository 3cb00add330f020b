"""A refused `dex resume` changes nothing: a flow whose waiting step's class is gone is refused
before its clock is skipped or its timer fired. The resume runs as a real process (a fresh
import of the edited flow file)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from dexcli.store import Store
from tests.cli.cli_helpers import drive_until, subprocess_env

WAITING_FLOW = '''
from datetime import timedelta

from dexcli import Context, Flow, Step, StepDecision, StepList, Timer, Wait, graceful_complete


class AwaitApproval(Step[str]):
    def wait_for(self, context: Context, input: str) -> Wait:
        return Wait.any_of(Timer.by_duration(timedelta(minutes=5), condition_id="expire"))

    def execute(self, context: Context, input: str) -> StepDecision:
        return graceful_complete(input)


class WaitFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(AwaitApproval())
'''


def _start_waiting(db: Path, path: Path, flow_id: str) -> None:
    from dexcli.cli.driver import build_engine
    from dexcli.cli.loader import load_flow
    from dexcli.store import Store

    store = Store(db)
    try:
        flow, ref = load_flow(file=f"{path}:WaitFlow")
        build_engine(store, time_skip=False).start_flow(flow, flow_id, "a", flow_ref=ref)
    finally:
        store.close()
    drive_until(db, flow_id, lambda s: s.steps_of(flow_id)[0].status.value == "WAITING")


def _dex(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dexcli", *args], env=subprocess_env(db), capture_output=True,
                          text=True, timeout=60)


def test_resume_time_skip_of_a_flow_whose_waiting_step_is_gone_changes_nothing(tmp_path):
    db, path = tmp_path / "dex.db", tmp_path / "waitflow.py"
    path.write_text(textwrap.dedent(WAITING_FLOW))
    _start_waiting(db, path, "w")
    before = json.loads(_dex(db, "inspect", "w", "--json").stdout)
    path.write_text(textwrap.dedent(WAITING_FLOW).replace("AwaitApproval", "AwaitConsent"))

    res = _dex(db, "resume", "w", "--time-skip")
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert res.stderr.strip() == ("dex: error: cannot run flow w: step AwaitApproval is no longer in the flow (to go "
                                  "on with the code as it is: dex time-travel w --to-step STEP, a step it has, or "
                                  "--to-start)")
    assert res.stdout == ""  # refused before its view began
    after = json.loads(_dex(db, "inspect", "w", "--json").stdout)
    assert after["history"] == before["history"]
    assert after["steps"] == before["steps"]
    store = Store(db)
    try:
        flow = store.get_flow("w")
        assert flow is not None and flow.clock_offset == 0.0  # its clock did not move
    finally:
        store.close()
