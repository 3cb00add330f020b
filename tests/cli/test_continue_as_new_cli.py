"""What the command line shows of FlowConfig and continue-as-new: `dex inspect` (text and
--json) names the chain of runs and each run reads by its id, `dex list --status
continued_as_new` lists the earlier runs, `dex wait` follows the flow id across runs, `dex
doctor` is clean. The flows are made with a Client here; the CLI's own --config, `dex config` and
`dex continue-as-new` are test_flow_config_cli.py's."""

from __future__ import annotations

from pathlib import Path

from dexcli import (
    Attribute,
    Context,
    Flow,
    FlowConfig,
    PersistenceSchema,
    StartFlowOptions,
    Step,
    StepDecision,
    StepDurability,
    StepList,
    go_to,
    graceful_complete,
)
from dexcli.testing import DexTestEnv
from tests.cli.cli_helpers import Cli, assert_error

count = Attribute("count", int)


class Loop(Step[int]):
    def execute(self, context: Context, n: int) -> StepDecision:
        count.set(context, n)
        return graceful_complete(n) if n >= 9 else go_to(Loop, n + 1)


class Counter(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Loop())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(count)


def make(db: Path) -> tuple[str, str]:
    with DexTestEnv(db) as env:
        first = env.client.start_flow(Counter(), "c", 0, StartFlowOptions(config_override=FlowConfig(
            continue_as_new_threshold=4, step_durability=StepDurability.SYNC)))
        env.client.wait_for_flow("c")
        return first, env.client.describe_flow("c").run_id


def test_inspect_shows_the_chain_of_runs_and_each_run_reads_by_its_id(cli: Cli, db: Path) -> None:
    first, last = make(db)
    text = cli.ok("inspect", "c").stdout
    runs = [line for line in text.splitlines() if "CONTINUED_AS_NEW  started" in line or "COMPLETED  started" in line]
    assert " Runs" in text and len(runs) == 3 and first in runs[0] and last in runs[2]
    assert [("by continue-as-new" in line, "current" in line) for line in runs] == [
        (False, False), (True, False), (True, True)]
    assert "FlowContinued" in text and "continued from run" in text
    assert " Config:  step durability SYNC · continue as new after 4 events" in text
    view = cli.json("inspect", "c", "--json")
    assert view["summary"]["firstRunId"] == first and view["summary"]["runId"] == last
    assert view["state"]["flowConfig"] == {"stepDurability": "STEP_DURABILITY_SYNC", "continueAsNewThreshold": 4}
    assert view["history"]["events"][0]["type"] == "FlowStartedOrContinued"
    assert "continuedStart" in view["history"]["events"][0]["payload"]
    old = cli.json("inspect", f"c${first}", "--json")
    assert old["summary"]["flowStatus"] == "FLOW_STATUS_CONTINUED_AS_NEW" and old["summary"]["flowStatusCode"] == 7
    closed = old["history"]["events"][-1]
    assert closed["type"] == "FlowClosed" and closed["payload"]["flowStatus"] == "FLOW_STATUS_CONTINUED_AS_NEW"
    assert closed["payload"]["continuedToRunId"] == view["runs"][1]["runId"]
    old_text = cli.ok("inspect", f"c${first}").stdout
    plain = DexTestEnv(db)
    plain.client.start_flow(Counter(), "plain", 0)
    plain.close()
    assert " Config:" not in cli.ok("inspect", "plain").stdout  # dex's defaults: nothing to say
    assert "CONTINUED_AS_NEW" in old_text and "→ run" in old_text


def test_list_wait_and_doctor_know_the_runs(cli: Cli, db: Path) -> None:
    first, _ = make(db)
    listed = cli.ok("list", "--status", "continued_as_new").stdout
    assert f"c${first}" in listed
    cli.ok("wait", "c", "-a", "count", "--equals", "9", "--timeout", "5s")
    assert [f["flowId"] for f in cli.json("list", "--query", "FlowType = 'Counter'", "--json")["flows"]] == ["c"]
    every = cli.json("list", "--query", "FlowType = 'Counter'", "--include-continued-as-new", "--json")["flows"]
    assert len(every) == 3 and f"c${first}" in {f["flowId"] for f in every}
    cli.ok("doctor")


def test_inspect_run_id_reads_one_run_of_the_chain(cli: Cli, db: Path) -> None:
    first, last = make(db)
    assert cli.json("inspect", "c", "--run-id", first, "--json")["summary"]["runId"] == first
    assert cli.json("inspect", "c", "--run-id", last, "--json")["summary"]["flowId"] == "c"
    assert_error(cli("inspect", "c", "--run-id", "nope"), 3, "flow c has no run nope")

