"""ASYNC durability across flows, with real processes: one process runs flows one after another
(each start durable and leasing its first step, as `dex run` and the bench do; three ASYNC steps
each) and is killed (SIGKILL) in a step of the fourth flow. What a start committed stays: the
flows before are COMPLETED (each start committed the results of the flow before it), and the
fourth flow's start; the fourth flow's ASYNC results, not yet committed, are gone whole (the
database checks clean), and its steps run again when a worker recovers it. A log of every
handler run (flow and step) shows which ran again."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

FLOW = '''
import os, signal
from pathlib import Path
from dexcli import Context, Flow, Step, StepDecision, StepDurability, StepList, StepOptions, go_to, graceful_complete

LOG = Path(os.environ["STEP_LOG"])
OPTS = StepOptions(execute_durability=StepDurability.ASYNC)


class Logged(Step[int]):
    def get_step_options(self) -> StepOptions:
        return OPTS

    def log(self, context: Context) -> None:
        with LOG.open("a") as f:
            f.write(f"{context.flow_id}:{type(self).__name__}\\n")


class Third(Logged):
    def execute(self, context: Context, n: int) -> StepDecision:
        self.log(context)
        return graceful_complete(n + 3)


class Second(Logged):
    def execute(self, context: Context, n: int) -> StepDecision:
        self.log(context)
        if context.flow_id == "f3" and LOG.read_text().count("f3:Second") == 1:
            os.kill(os.getpid(), signal.SIGKILL)  # the process dies in its first run of f3's Second
        return go_to(Third, n * 2)


class First(Logged):
    def execute(self, context: Context, n: int) -> StepDecision:
        self.log(context)
        return go_to(Second, n + 1)


class Chain(Flow[int]):
    def get_steps(self):
        return StepList.start_step(First()).other_steps(Second(), Third())
'''

DRIVER = '''
import sys
from dexcli.builder import build_engine
from dexcli.cli.loader import load_file_flows, load_ref
from dexcli.engine.clock import Clock
from dexcli.sdk.registry import Registry
from dexcli.store import Store

db, path = sys.argv[1], sys.argv[2]
flow = load_file_flows(f"{path}:Chain")[0]
engine = build_engine(Store(db), flows=Registry([flow]), clock=Clock(), loader=load_ref)
for i in range(6):
    engine.start_flow(flow, f"f{i}", i, flow_ref=f"file:{path}:Chain", lease=True)
    engine.drive([f"f{i}"], until_idle=True, release=False)
'''


def dex(db: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dexcli", "--db", str(db), *args], capture_output=True, text=True,
                          timeout=120, env=env)


def test_a_kill_loses_only_the_open_async_results_and_they_run_again(tmp_path: Path) -> None:
    (tmp_path / "chain.py").write_text(FLOW)
    (tmp_path / "driver.py").write_text(DRIVER)
    log, db = tmp_path / "steps.log", tmp_path / "dex.db"
    env = {**os.environ, "STEP_LOG": str(log), "NO_COLOR": "1",
           "DEX_ASYNC_WINDOW": "600"}  # no commit by the clock: only the starts and the kill decide
    env.pop("DEX_DB", None)
    killed = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(db), str(tmp_path / "chain.py")],
                            capture_output=True, text=True, timeout=120, env=env)
    assert killed.returncode == -9, killed.stderr
    ran = log.read_text().split()
    assert ran == [f"f{i}:{s}" for i in range(3) for s in ("First", "Second", "Third")] + ["f3:First", "f3:Second"]

    conn = sqlite3.connect(db)
    flows = dict(conn.execute("SELECT flow_id, status FROM flows"))
    steps = dict(conn.execute("SELECT step_execution_id, status FROM steps WHERE flow_id = 'f3'"))
    conn.close()
    # durable: what each start committed (the flows before it, whole) and f3's start
    assert flows == {"f0": "COMPLETED", "f1": "COMPLETED", "f2": "COMPLETED", "f3": "RUNNING"}
    assert steps == {"First-1": "RUNNING"}  # f3's First result was lost whole
    checked = dex(db, env, "doctor")
    assert checked.returncode == 0, checked.stdout + checked.stderr

    recovered = dex(db, env, "worker", "--until-idle", "--time-skip")
    assert recovered.returncode == 0, recovered.stderr
    assert log.read_text().split()[len(ran):] == ["f3:First", "f3:Second", "f3:Third"]  # f3 ran again
    view = json.loads(dex(db, env, "inspect", "f3", "--json").stdout)
    assert view["summary"]["flowStatus"] == "FLOW_STATUS_COMPLETED"
    assert [c["output"] for c in view["summary"]["completions"]] == [11]  # ((3 + 1) * 2) + 3
    checked = dex(db, env, "doctor")
    assert checked.returncode == 0, checked.stdout + checked.stderr
