"""`--file mod.py:NAME` takes what real apps build their flows with: a Flow class or instance, or
a function of no arguments returning a Flow (with its services passed in) or a Registry.

`dex run`, `dex start` and `dex worker --file` take it; a worker or `dex resume` that loads the
stored reference again calls the function again (here: a worker SIGKILLed mid-step, restarted).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from dexcli.store import Store
from tests.cli.cli_helpers import Cli, assert_error, subprocess_env

APP = '''
import os
import time
from pathlib import Path

from dexcli import Context, Flow, Registry, RPCResult, Step, StepDecision, StepList, graceful_complete, rpc


class Payments:
    """A service the app builds once and hands to its flows."""

    def __init__(self, rate: int, marks: Path | None = None) -> None:
        self.rate = rate
        self.marks = marks

    def charge(self, amount: int) -> int:
        if self.marks is not None and not (self.marks / "charging").exists():
            (self.marks / "charging").write_text(str(os.getpid()))
            time.sleep(120)  # the first call hangs: the test kills the process here
        return amount * self.rate


class Charge(Step[int]):
    def __init__(self, payments: Payments) -> None:
        self.payments = payments

    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(self.payments.charge(input))


class ShopFlow(Flow[int]):
    def __init__(self, payments: Payments) -> None:
        self.payments = payments

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Charge(self.payments))


class Echo(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        return graceful_complete(input.upper())


class EchoFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Echo())

    @rpc
    def shout(self, context: Context, text: str) -> RPCResult[str]:
        return RPCResult(text.upper() + "!")


def make_flow() -> ShopFlow:
    marks = os.environ.get("SHOP_MARKS")
    return ShopFlow(Payments(rate=3, marks=Path(marks) if marks else None))


def build_registry() -> Registry:
    return Registry([ShopFlow(Payments(rate=5)), EchoFlow()])


def needs_config(path: str) -> ShopFlow:
    return ShopFlow(Payments(rate=1))


def not_a_builder() -> dict:
    return {"rate": 3}


def returns_the_class() -> type:
    return ShopFlow


async def async_builder() -> ShopFlow:
    return ShopFlow(Payments(rate=1))


def empty_registry() -> Registry:
    return Registry()
'''


def outputs(snap: dict) -> list:
    return [c["output"] for c in snap["summary"]["completions"]]


@pytest.fixture
def app(tmp_path: Path) -> Path:
    d = tmp_path / "shop"
    d.mkdir()
    path = d / "app.py"
    path.write_text(textwrap.dedent(APP))
    return path


def test_run_a_flow_built_by_a_function_with_its_service(cli: Cli, app: Path) -> None:
    cli.ok("run", "--file", f"{app}:make_flow", "--input", "7", "--flow-id", "f1")
    snap = cli.json("inspect", "f1", "--json")
    assert snap["summary"]["flowStatus"] == "FLOW_STATUS_COMPLETED"
    assert outputs(snap) == [21]  # the Payments service's rate 3, passed in by make_flow
    assert snap["summary"]["flowRef"] == f"file:{app}:make_flow"


def test_a_registry_function_runs_the_flow_named_by_its_type(cli: Cli, app: Path) -> None:
    cli.ok("run", "ShopFlow", "--file", f"{app}:build_registry", "--input", "2", "--flow-id", "s")
    cli.ok("run", "EchoFlow", "--file", f"{app}:build_registry", "--input", '"hi"', "--flow-id", "e")
    assert outputs(cli.json("inspect", "s", "--json")) == [10]
    assert outputs(cli.json("inspect", "e", "--json")) == ["HI"]


def test_a_registry_of_several_flows_needs_one_named(cli: Cli, app: Path) -> None:
    spec = f"{app}:build_registry"
    assert_error(cli("run", "--file", spec, "--input", "2"), 2, "gives 2 flows (ShopFlow, EchoFlow)",
                 f"`ShopFlow --file {spec}`")
    assert_error(cli("run", "Nope", "--file", spec), 2, "has no flow 'Nope'; its flows: ShopFlow, EchoFlow")


@pytest.mark.parametrize(("name", "fragments"), [
    ("needs_config", ("needs_config: cannot call it with no arguments", "path")),
    ("not_a_builder", ("not_a_builder() returned dict, not a Flow or a Registry",)),
    ("returns_the_class", ("returned the class ShopFlow: return an instance of it",)),
    ("async_builder", ("async_builder is async",)),
    ("empty_registry", ("empty_registry() returned a Registry with no flows",)),
])
def test_a_function_that_does_not_give_flows_is_refused_in_one_line(cli: Cli, app: Path, name: str,
                                                                    fragments: tuple[str, ...]) -> None:
    for command in ("run", "start"):
        assert_error(cli(command, "--file", f"{app}:{name}", "--input", "1"), 2, *fragments)
    assert_error(cli("worker", "--until-idle", "--file", f"{app}:{name}"), 2, *fragments)
    assert not cli.db.exists()  # refused before the database is opened


def test_rpc_file_picks_the_flows_own_type_from_a_registry(cli: Cli, app: Path) -> None:
    spec = f"{app}:build_registry"
    cli.ok("start", "EchoFlow", "--file", spec, "--input", '"x"', "--flow-id", "e")
    assert cli.json("rpc", "e", "shout", "--input", '"hey"', "--file", spec) == "HEY!"


def test_start_then_resume_loads_the_function_again(cli: Cli, app: Path) -> None:
    cli.ok("start", "--file", f"{app}:make_flow", "--input", "4", "--flow-id", "r")
    cli.ok("resume", "r")
    assert outputs(cli.json("inspect", "r", "--json")) == [12]


def test_worker_file_registers_a_registrys_flows_for_flows_the_app_started(cli: Cli, app: Path, db: Path) -> None:
    """A flow the app's own code started (no reference stored) runs on `dex worker --file`."""
    from dexcli.cli.driver import build_engine
    from dexcli.cli.loader import load_file_flows

    shop, echo = load_file_flows(f"{app}:build_registry")
    store = Store(db)
    try:
        engine = build_engine(store, time_skip=False)
        engine.start_flow(shop, "app-1", 3)
        engine.start_flow(echo, "app-2", "yo")
    finally:
        store.close()
    skipped = cli.ok("worker", "--until-idle")
    assert "flow type ShopFlow is not registered" in skipped.stderr
    cli.ok("worker", "--until-idle", "--file", f"{app}:build_registry")
    assert outputs(cli.json("inspect", "app-1", "--json")) == [15]
    assert outputs(cli.json("inspect", "app-2", "--json")) == ["YO"]


# --------------------------------------------------------------------- real processes, SIGKILL
DEX = [sys.executable, "-m", "dexcli"]


def _env(db: Path, marks: Path) -> dict[str, str]:
    return {**subprocess_env(db), "SHOP_MARKS": str(marks)}


def _wait_for(path: Path, proc: subprocess.Popen[str], deadline_s: float = 20.0) -> None:
    end = time.monotonic() + deadline_s
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > end:
            proc.kill()
            raise AssertionError(f"{path.name} never appeared: {proc.communicate()}")
        time.sleep(0.05)


@pytest.mark.timeout(90)
def test_a_worker_killed_mid_step_is_restarted_and_loads_the_function_again(tmp_path: Path, app: Path) -> None:
    db, marks = tmp_path / "dex.db", app.parent
    env = _env(db, marks)
    started = subprocess.run([*DEX, "start", "--file", f"{app}:make_flow", "--input", "5", "--flow-id", "k"],
                             env=env, capture_output=True, text=True, timeout=30)
    assert started.returncode == 0, started.stderr
    worker = subprocess.Popen([*DEX, "worker", "--file", f"{app}:make_flow"], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _wait_for(marks / "charging", worker)  # the step's first attempt is inside the service
    assert (marks / "charging").read_text() == str(worker.pid)
    os.kill(worker.pid, signal.SIGKILL)
    worker.communicate(timeout=30)
    # a new worker, no --file: it loads the stored reference, which calls make_flow again
    again = subprocess.run([*DEX, "worker", "--until-idle", "--time-skip"], env=env, capture_output=True,
                           text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    assert "k: COMPLETED" in again.stdout, again.stdout
    store = Store(db, read_only=True)
    try:
        flow = store.get_flow("k")
        assert flow is not None and flow.status.value == "COMPLETED"
        assert flow.flow_ref == f"file:{app}:make_flow"
    finally:
        store.close()
    shown = subprocess.run([*DEX, "inspect", "k", "--json"], env=env, capture_output=True, text=True, timeout=30)
    snap = json.loads(shown.stdout)
    assert outputs(snap) == [15]  # make_flow's Payments (rate 3), built again by the second worker
    [step] = snap["steps"]
    assert [a["outcome"] for a in step["attempts"]][-1] == "COMPLETED" and len(step["attempts"]) == 2, step
