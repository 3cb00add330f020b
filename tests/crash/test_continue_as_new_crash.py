"""Continue-as-new and a crash, with real processes: a worker that dies (os._exit) just before
the commit that reaches the FlowConfig threshold, just after it (the run rolled over, the next
step leased to the dead process in the same commit), or as the carried step's attempt starts in
the new run, leaves a flow that another worker finishes: every step ran, none whose result was
committed ran again, the runs chain up and `dex doctor` finds nothing wrong. Each step appends
its input to a log file, so the log shows every run of a handler."""

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
from dexcli import Context, Flow, Step, StepDecision, StepList, go_to, graceful_complete

LOG = Path(os.environ["STEP_LOG"])
LIMIT = 12


class Loop(Step[int]):
    def execute(self, context: Context, n: int) -> StepDecision:
        with LOG.open("a") as f:
            f.write(f"{n}\\n")
        return graceful_complete(n) if n >= LIMIT else go_to(Loop, n + 1)


class Counter(Flow[int]):
    def get_steps(self):
        return StepList.start_step(Loop())
'''

START = '''
import sys
from dexcli import Client, FlowConfig, Registry, StartFlowOptions
from dexcli.engine.clock import Clock
from dexcli.engine.core import Engine
from dexcli.engine.faults import Faults
from dexcli.store import Store
sys.path.insert(0, sys.argv[2])
from counter import Counter

# a process that starts the flow and drives it, with a crash injected (as `dex run --crash-at`)
engine = Engine(Store(sys.argv[1]), Clock(), Registry([Counter()]), faults=Faults.from_options(crash_at=sys.argv[3]))
with Client(engine=engine) as client:
    client.start_flow(Counter(), "c", 0, StartFlowOptions(config_override=FlowConfig(continue_as_new_threshold=4)),
                      flow_ref=f"file:{sys.argv[2]}/counter.py:Counter")
    client.wait_for_flow("c")
'''


def dex(db: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dexcli", "--db", str(db), *args], capture_output=True, text=True,
                          timeout=120, env=env)


@pytest.mark.parametrize("crash, rerun", [
    ("before-commit:4@Loop", {3}),  # the 4th result (it reaches the threshold) was never committed: it runs again
    ("after-commit:4@Loop", {4}),  # committed with the rollover; the step it leased may have begun
    ("attempt-start:5@Loop", {4}),  # the carried step's first attempt in the new run
])
def test_a_crash_around_a_continue_as_new_loses_nothing_and_reruns_nothing_committed(
        tmp_path: Path, crash: str, rerun: set[int]) -> None:
    (tmp_path / "counter.py").write_text(FLOW)
    (tmp_path / "start.py").write_text(START)
    log, db = tmp_path / "steps.log", tmp_path / "dex.db"
    env = {**os.environ, "STEP_LOG": str(log), "NO_COLOR": "1"}
    env.pop("DEX_DB", None)
    crashed = subprocess.run([sys.executable, str(tmp_path / "start.py"), str(db), str(tmp_path), crash],
                             capture_output=True, text=True, timeout=120, env=env)
    assert crashed.returncode == 137, crashed.stdout + crashed.stderr
    before = [int(n) for n in log.read_text().split()]
    assert before[:4] == [0, 1, 2, 3]

    recovered = dex(db, env, "worker", "--until-idle", "--time-skip")
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    ran = [int(n) for n in log.read_text().split()]
    assert sorted(set(ran)) == list(range(13))  # nothing lost
    twice = {n for n in ran if ran.count(n) > 1}
    assert twice <= rerun and all(ran.count(n) <= 2 for n in ran)  # nothing committed ran again

    view = json.loads(dex(db, env, "inspect", "c", "--json").stdout)
    assert view["summary"]["flowStatus"] == "FLOW_STATUS_COMPLETED"
    assert [c["output"] for c in view["summary"]["completions"]] == [12]
    runs = view["runs"]  # 13 step executions, a rollover at each 4th: 4 runs
    assert [r["status"] for r in runs] == ["CONTINUED_AS_NEW"] * 3 + ["COMPLETED"]
    assert view["summary"]["firstRunId"] == runs[0]["runId"]
    executions = [s["stepExecutionId"] for r in runs for s in
                  json.loads(dex(db, env, "inspect", r["flowId"], "--json").stdout)["steps"]]
    assert executions == [f"Loop-{i}" for i in range(1, 14)]  # each once, in one run, numbered on
    doctor = dex(db, env, "doctor")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
