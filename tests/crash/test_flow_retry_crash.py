"""Flow retry and a crash, with real processes: a worker that dies (os._exit) just after the
commit that failed a run (the run closed, archived and its retry run made, in that one
transaction) or just before it, leaves a flow that another worker finishes with the retry made
exactly once: each run of the step appends to a log file, so the log shows every run of the
handler, and the flow's runs show every retry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

FLOW = '''
import os
from pathlib import Path
from dexcli import Context, Flow, Step, StepDecision, StepList, force_fail, graceful_complete

LOG = Path(os.environ["STEP_LOG"])


class Flaky(Step[int]):
    """Fails its flow until it has run `need` times in all (the log counts them)."""

    def execute(self, context: Context, need: int) -> StepDecision:
        with LOG.open("a") as f:
            f.write(context.run_id + "\\n")
        ran = len(LOG.read_text().split())
        return graceful_complete(ran) if ran >= need else force_fail(f"run {ran} failed")


class Retried(Flow[int]):
    def get_steps(self):
        return StepList.start_step(Flaky())
'''

START = '''
import sys
from datetime import timedelta
from dexcli import Client, Registry, RetryPolicy, StartFlowOptions
from dexcli.engine.clock import Clock
from dexcli.engine.core import Engine
from dexcli.engine.faults import Faults
from dexcli.store import Store
sys.path.insert(0, sys.argv[2])
from retried import Retried

# a process that starts the flow and drives it, with a crash injected (as `dex run --crash-at`)
engine = Engine(Store(sys.argv[1]), Clock(), Registry([Retried()]), faults=Faults.from_options(crash_at=sys.argv[3]))
with Client(engine=engine) as client:
    client.start_flow(Retried(), "r", 3, StartFlowOptions(retry_policy=RetryPolicy(
        initial_interval=timedelta(seconds=5), maximum_attempts=5)), flow_ref=f"file:{sys.argv[2]}/retried.py:Retried")
    client.wait_for_flow("r")
'''


def dex(db: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dexcli", "--db", str(db), *args], capture_output=True, text=True,
                          timeout=120, env=env)


@pytest.mark.parametrize("crash, handler_runs, statuses", [
    # committed: run 1 FAILED and archived, run 2 made; the new worker runs run 2 and run 3 once each
    ("after-commit:1@Flaky", 3, ["FAILED", "FAILED", "COMPLETED"]),
    # the failing decision never committed: run 1's step runs again (a lost attempt), then one retry
    ("before-commit:1@Flaky", 3, ["FAILED", "COMPLETED"]),
])
def test_a_crash_around_the_failing_commit_retries_exactly_once(
        tmp_path: Path, crash: str, handler_runs: int, statuses: list[str]) -> None:
    (tmp_path / "retried.py").write_text(FLOW)
    (tmp_path / "start.py").write_text(START)
    log, db = tmp_path / "steps.log", tmp_path / "dex.db"
    env = {**os.environ, "STEP_LOG": str(log), "NO_COLOR": "1"}
    env.pop("DEX_DB", None)
    crashed = subprocess.run([sys.executable, str(tmp_path / "start.py"), str(db), str(tmp_path), crash],
                             capture_output=True, text=True, timeout=120, env=env)
    assert crashed.returncode == 137, crashed.stdout + crashed.stderr
    assert len(log.read_text().split()) == 1

    recovered = dex(db, env, "worker", "--until-idle", "--time-skip")
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    ran = log.read_text().split()
    assert len(ran) == handler_runs

    view = json.loads(dex(db, env, "inspect", "r", "--json").stdout)
    assert view["summary"]["flowStatus"] == "FLOW_STATUS_COMPLETED"
    assert [c["output"] for c in view["summary"]["completions"]] == [3]
    runs = view["runs"]
    assert [r["status"] for r in runs] == statuses
    assert [r["via"] for r in runs] == [None] + ["flowRetry"] * (len(runs) - 1)
    assert sorted(set(ran)) == sorted(r["runId"] for r in runs)  # each handler run belongs to one of the runs
    assert view["summary"]["flowRetry"]["attempt"] == len(runs)
    doctor = dex(db, env, "doctor")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
