"""ASYNC durability and a crash, with real processes: a process that dies (os._exit) while the
results of its ASYNC steps are acknowledged but not yet committed loses them, and those steps
run again when a worker recovers the flow; under SYNC, a step that completed never runs again.
Each step appends its name to a log file, so the log shows every run of a handler."""

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
from dexcli import Context, Flow, Step, StepDecision, StepDurability, StepList, StepOptions, go_to, graceful_complete

LOG = Path(os.environ["STEP_LOG"])
OPTS = StepOptions(execute_durability=StepDurability[os.environ["DURABILITY"]])


class Logged(Step[int]):
    def get_step_options(self) -> StepOptions:
        return OPTS

    def log(self) -> None:
        with LOG.open("a") as f:
            f.write(type(self).__name__ + "\\n")


class Third(Logged):
    def execute(self, context: Context, n: int) -> StepDecision:
        self.log()
        if LOG.read_text().count("Third") == 1:
            os._exit(9)  # the process dies in its first run of Third
        return graceful_complete(n + 3)


class Second(Logged):
    def execute(self, context: Context, n: int) -> StepDecision:
        self.log()
        return go_to(Third, n * 2)


class First(Logged):
    def execute(self, context: Context, n: int) -> StepDecision:
        self.log()
        return go_to(Second, n + 1)


class Chain(Flow[int]):
    def get_steps(self):
        return StepList.start_step(First()).other_steps(Second(), Third())
'''


def dex(db: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dexcli", "--db", str(db), *args], capture_output=True, text=True,
                          timeout=120, env=env)


@pytest.mark.parametrize("durability, runs", [
    # the start is durable (First-1 leased to the process); First's and Second's results were not
    ("ASYNC", ["First", "Second", "Third", "First", "Second", "Third"]),
    ("SYNC", ["First", "Second", "Third", "Third"]),
])
def test_a_crash_reruns_the_steps_whose_results_were_not_yet_durable(tmp_path: Path, durability: str,
                                                                     runs: list[str]) -> None:
    (tmp_path / "chain.py").write_text(FLOW)
    log, db = tmp_path / "steps.log", tmp_path / "dex.db"
    env = {**os.environ, "STEP_LOG": str(log), "DURABILITY": durability, "NO_COLOR": "1",
           "DEX_ASYNC_WINDOW": "60"}  # no commit by the clock: only the crash decides
    env.pop("DEX_DB", None)
    crashed = dex(db, env, "run", "--file", f"{tmp_path / 'chain.py'}:Chain", "--flow-id", "c", "--input", "1")
    assert crashed.returncode == 9, crashed.stderr
    assert log.read_text().split() == ["First", "Second", "Third"]
    recovered = dex(db, env, "worker", "--until-idle", "--time-skip")
    assert recovered.returncode == 0, recovered.stderr
    assert log.read_text().split() == runs
    view = json.loads(dex(db, env, "inspect", "c", "--json").stdout)
    assert view["summary"]["flowStatus"] == "FLOW_STATUS_COMPLETED"
    assert [c["output"] for c in view["summary"]["completions"]] == [7]
