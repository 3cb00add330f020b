"""SubFlows: `SubFlow.run` conditions in a Wait start children that are flows of their own,
driven by the same engine; the child's end makes the condition ready, whatever the end; any_of
and combinations order and select them as Dex does; the reuse policies resolve an existing
child id as a Dex server's resolver does. In virtual time."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from dexcli import (
    Attribute,
    Channel,
    ConditionCombination,
    Context,
    Flow,
    FlowErrorType,
    FlowStatus,
    IdReusePolicy,
    PersistenceSchema,
    RetryPolicy,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StopFlowOptions,
    SubFlow,
    Timer,
    Wait,
    WorkerInvocationError,
    force_fail,
    graceful_complete,
    rpc,
)
from dexcli.flow_options import SubFlowOptions, SubFlowReusePolicy
from dexcli.sdk.results import StartFlowOptions
from dexcli.testing import DexTestEnv

LABEL = Attribute("label", str)


class Work(Step[str]):
    """The child's one step: `ok:N` waits N s and returns N; `fail:N` fails after N s; `hang`
    waits a day."""

    def wait_for(self, context: Context, input: str) -> Wait:
        seconds = 86400 if input == "hang" else int(input.split(":")[1])
        return Wait.until(Timer.by_duration(timedelta(seconds=seconds)))

    def execute(self, context: Context, input: str) -> StepDecision:
        if input.startswith("fail"):
            return force_fail(f"child {input} failed")
        label = LABEL.get(context)
        return graceful_complete(f"{label}:{input}" if label else int(input.split(":")[1]))


class ChildFlow(Flow[str]):
    def __init__(self) -> None:
        self.work = Work()

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(self.work)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(LABEL)


CHILD = ChildFlow()
SEEN: dict[str, Any] = {}
NUDGE = Channel("nudge", str)


def results(context: Context, n: int) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        r = SubFlow.get_condition_results(context, i)
        out.append({"id": SubFlow.get_flow_id(context, i), "status": r.status, "terminal": r.is_terminal,
                    "outputs": [c.output for c in r.completions], "errorType": r.error_type,
                    "errorMessage": r.error_message})
    return out


class Parent(Step[list[str]]):
    """Waits on one SubFlow per input, as `SEEN["wait"]` builds the Wait from the conditions."""

    def wait_for(self, context: Context, input: list[str]) -> Wait:
        conds = [SubFlow.run(CHILD, x, SEEN.get("options", {}).get(i)) for i, x in enumerate(input)]
        build = SEEN.get("wait", Wait.all_of)
        return build(*conds)  # type: ignore[no-any-return]

    def execute(self, context: Context, input: list[str]) -> StepDecision:
        SEEN["results"] = results(context, len(input))
        SEEN["timer"] = context.has_timer_fired()
        return graceful_complete([r["status"].name for r in SEEN["results"]])


class ParentFlow(Flow[list[str]]):
    def __init__(self) -> None:
        self.parent = Parent()

    def get_steps(self) -> StepList[list[str]]:
        return StepList.start_step(self.parent)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(NUDGE)

    @rpc
    def nudge(self, context: Context, input: str) -> RPCResult[None]:
        NUDGE.publish(context, input)
        return RPCResult(None)

    @rpc
    def peek(self, context: Context) -> RPCResult[str]:
        return RPCResult(SubFlow.get_flow_id(context))


@pytest.fixture(autouse=True)
def _reset() -> None:
    SEEN.clear()


@pytest.fixture
def env(tmp_path: Any) -> Any:
    with DexTestEnv(tmp_path / "dex.db", start=1_000_000.0) as e:
        yield e


def child_id(parent: str, i: int, seid: str = "Parent-1") -> str:
    return f"SubFlow:{parent}-{seid}-{i}"


def test_all_of_waits_for_every_child_and_reads_each_result(env: DexTestEnv) -> None:
    res = env.run(ParentFlow(), ["ok:5", "ok:30"], flow_id="p")
    assert res.single_output(list) == ["COMPLETED", "COMPLETED"]
    assert [(r["id"], r["outputs"]) for r in SEEN["results"]] == [(child_id("p", 0), [5]), (child_id("p", 1), [30])]
    for i in range(2):
        child = env.store.get_flow(child_id("p", i))
        assert child is not None and child.parent_flow_id == "p" and child.parent_step_execution_id == "Parent-1"
        assert child.flow_type == "ChildFlow"
    snap = env.inspect("p")
    assert [c["flowId"] for c in snap["subFlows"]] == [child_id("p", 0), child_id("p", 1)]
    types = [e["type"] for e in snap["history"]]
    assert types.count("SubFlowStarted") == 2 and types.count("SubFlowCompleted") == 2
    assert types.index("StepWaitForCompleted") > max(i for i, t in enumerate(types) if t == "SubFlowCompleted")
    # the parent waited for the longer child: its execute ran after 30 s of virtual time
    done = next(e for e in snap["history"] if e["type"] == "StepWaitForCompleted")
    started = next(e for e in snap["history"] if e["type"] == "FlowStarted")
    assert 30 <= (_t(done) - _t(started)) < 31
    assert env.inspect(child_id("p", 1))["summary"]["parentFlowId"] == "p"


def status_of(env: DexTestEnv, flow_id: str) -> str | None:
    flow = env.store.get_flow(flow_id)
    return None if flow is None else flow.status.name


def _t(event: dict[str, Any]) -> float:
    from datetime import datetime

    return datetime.fromisoformat(event["eventTime"].replace("Z", "+00:00")).timestamp()


def test_a_failed_or_canceled_child_makes_the_condition_ready_with_its_end(env: DexTestEnv) -> None:
    env.start(ParentFlow(), ["fail:5", "hang"], flow_id="p")
    env.drive(["p"], until=lambda: status_of(env, child_id("p", 0)) == "FAILED")
    env.client.stop_flow(child_id("p", 1), StopFlowOptions())
    res = env.client.wait_for_flow("p")
    assert res.single_output(list) == ["FAILED", "CANCELED"]
    failed, canceled = SEEN["results"]
    assert failed["errorType"] is FlowErrorType.STEP_DECISION_FAILED and "fail:5 failed" in failed["errorMessage"]
    assert failed["outputs"] == [] and failed["terminal"]
    assert canceled["status"] is FlowStatus.CANCELED and canceled["errorMessage"] is None


def test_any_of_a_timer_wins_first_and_the_child_keeps_running(env: DexTestEnv) -> None:
    SEEN["wait"] = lambda *c: Wait.any_of(*c, Timer.by_duration(timedelta(seconds=10)))
    res = env.run(ParentFlow(), ["ok:60"], flow_id="p")
    assert res.single_output(list) == ["RUNNING"]  # a RUNNING snapshot: the timer won
    (snap,) = SEEN["results"]
    assert snap["id"] == child_id("p", 0) and not snap["terminal"] and SEEN["timer"]
    # the parent's end does not stop the child: it runs on, to its own end
    assert env.store.get_flow(child_id("p", 0)).is_running  # type: ignore[union-attr]
    assert env.client.wait_for_flow(child_id("p", 0)).single_output(int) == 60
    assert env.store.get_flow("p").status.name == "COMPLETED"  # type: ignore[union-attr]


def test_any_of_a_channel_wins_over_a_running_child(env: DexTestEnv) -> None:
    SEEN["wait"] = lambda *c: Wait.any_of(*c, NUDGE.for_one())
    flow = ParentFlow()
    env.start(flow, ["ok:60"], flow_id="p")
    env.drive(["p"], until=lambda: env.inspect("p")["steps"][0]["status"] == "WAITING")
    env.client.invoke_rpc(flow.nudge, "p", "hi")
    env.client.wait_for_flow("p")
    assert SEEN["results"][0]["status"] is FlowStatus.RUNNING  # the channel was selected, not the child


def test_any_of_orders_timers_then_channels_then_subflows_when_all_are_ready(env: DexTestEnv) -> None:
    env.run(ParentFlow(), ["ok:0"], flow_id="p")
    # a new run of p: its child id has a completed run, whose result is the condition's at once
    SEEN["wait"] = lambda *c: Wait.any_of(*c, Timer.by_duration(timedelta(seconds=0)))
    rerun(env, ["ok:0"], SubFlowReusePolicy.ATTACH)
    env.client.wait_for_flow("p")
    step = env.inspect("p")["steps"][0]
    assert step["waitFor"]["conditionResults"]["selected"] == [1]  # the timer (index 1) before the SubFlow
    assert SEEN["results"][0]["status"] is FlowStatus.COMPLETED  # the loser's result is kept all the same
    wait = {"kind": "any_of", "conditions": [
        {"index": 0, "kind": "subflow", "conditionId": None, "subFlowIndex": 0, "flowType": "C", "flowId": "x",
         "result": {"status": "COMPLETED"}},
        {"index": 1, "kind": "channel", "conditionId": None, "queue": "q", "atLeast": 1, "atMost": 1}]}
    from dexcli.engine.waits import evaluate

    assert evaluate(wait, {"q": 1}, 0.0).selected == (1,)  # type: ignore[union-attr]
    assert evaluate(wait, {}, 0.0).selected == (0,)  # type: ignore[union-attr]


def test_any_combination_of_names_a_subflow_in_two_combinations_once(env: DexTestEnv) -> None:
    def build(*conds: Any) -> Wait:
        a, b = SubFlow.run(CHILD, "ok:5", SubFlowOptions(condition_id="a")), \
            SubFlow.run(CHILD, "ok:50", SubFlowOptions(condition_id="b"))
        t = Timer.by_duration(timedelta(seconds=20), condition_id="t")
        return Wait.any_combination_of(ConditionCombination.of(a, b), ConditionCombination.of(a, t))

    SEEN["wait"] = build
    env.run(ParentFlow(), ["x", "y"], flow_id="p")
    ids = [f.flow_id for f in env.store.list_flows() if f.flow_id.startswith("SubFlow:")]
    assert sorted(ids) == [child_id("p", 0), child_id("p", 1)]  # two children, not three
    a, b = SEEN["results"]
    assert a["status"] is FlowStatus.COMPLETED and b["status"] is FlowStatus.RUNNING  # a + t won at 20 s


def test_results_are_read_only_in_execute_and_by_index(env: DexTestEnv) -> None:
    caught: list[str] = []

    class Peek(Step[str]):
        def wait_for(self, context: Context, input: str) -> Wait:
            try:
                SubFlow.get_condition_results(context)
            except ValueError as exc:
                caught.append(str(exc))
            return Wait.until(SubFlow.run(CHILD, "ok:1"))

        def execute(self, context: Context, input: str) -> StepDecision:
            for i in (1, -1):
                try:
                    SubFlow.get_flow_id(context, i)
                except ValueError as exc:
                    caught.append(str(exc))
            return graceful_complete(SubFlow.get_condition_results(context).single_output(int))

    class PeekFlow(Flow[str]):
        def __init__(self) -> None:
            self.peek = Peek()

        def get_steps(self) -> StepList[str]:
            return StepList.start_step(self.peek)

    assert env.run(PeekFlow(), "x", flow_id="k").single_output(int) == 1
    assert caught == ["SubFlow results are available only during execute",
                      "SubFlow result index is unavailable: 1", "SubFlow result index is unavailable: -1"]
    with pytest.raises(TypeError, match="invocation Context"):
        SubFlow.get_condition_results(object())
    flow = ParentFlow()
    env.start(flow, ["hang"], flow_id="r")
    env.drive(["r"], until=lambda: env.inspect("r")["steps"][0]["status"] == "WAITING")
    with pytest.raises(WorkerInvocationError, match="only during execute"):
        env.client.invoke_rpc(flow.peek, "r")


def test_options_start_the_child_with_its_timeout_delay_and_attributes(env: DexTestEnv) -> None:
    SEEN["options"] = {0: SubFlowOptions(timeout=timedelta(seconds=30), start_delay=timedelta(seconds=7))
                       .with_attribute(LABEL, "L"),
                       1: SubFlowOptions(timeout=timedelta(seconds=30))}
    res = env.run(ParentFlow(), ["ok:5", "ok:100"], flow_id="p")
    assert res.single_output(list) == ["COMPLETED", "FAILED"]
    first, timed_out = SEEN["results"]
    assert first["outputs"] == ["L:ok:5"]
    assert timed_out["errorType"] is FlowErrorType.FLOW_TIMEOUT
    c0 = env.inspect(child_id("p", 0))
    assert c0["summary"]["startDelay"] == 7 and c0["summary"]["timeout"] == 30


def test_what_dex_cannot_run_is_refused_loudly(env: DexTestEnv) -> None:
    # a flow retry policy has no total_duration (Dex's FlowRetryPolicy has none): refused, not dropped
    SEEN["options"] = {0: SubFlowOptions(retry_policy=RetryPolicy(total_duration=timedelta(hours=1)))}
    env.start(ParentFlow(), ["ok:1"], flow_id="p")
    env.drive(["p"])
    snap = env.inspect("p")
    assert snap["summary"]["flowStatus"] == "FAILED"
    assert "no total_duration" in json.dumps(snap["steps"][0]["attempts"])
    assert env.store.get_flow(child_id("p", 0)) is None  # nothing was started


def test_an_initial_attribute_the_child_does_not_declare_fails_the_wait_for(env: DexTestEnv) -> None:
    SEEN["options"] = {0: SubFlowOptions().with_attribute(Attribute("other", int), 1)}
    env.start(ParentFlow(), ["ok:1"], flow_id="p")
    env.drive(["p"], until=lambda: len(env.inspect("p")["steps"][0]["attempts"]) >= 2)
    detail = env.inspect("p")["steps"][0]["attempts"][0].get("detail") or ""
    assert "SubFlow ChildFlow: with_attribute" in detail and "other" in detail
    assert env.store.get_flow(child_id("p", 0)) is None


def test_a_flow_class_instead_of_its_instance_fails_the_wait_for(env: DexTestEnv) -> None:
    class ByClass(Step[str]):
        def wait_for(self, context: Context, input: str) -> Wait:
            return Wait.until(SubFlow.run(ChildFlow, "ok:1"))

        def execute(self, context: Context, input: str) -> StepDecision:
            return graceful_complete()

    class ByClassFlow(Flow[str]):
        def __init__(self) -> None:
            self.by_class = ByClass()

        def get_steps(self) -> StepList[str]:
            return StepList.start_step(self.by_class)

    env.start(ByClassFlow(), "x", flow_id="c")
    env.drive(["c"], until=lambda: len(env.inspect("c")["steps"][0]["attempts"]) >= 2)
    detail = env.inspect("c")["steps"][0]["attempts"][0].get("detail") or ""
    assert "needs the target Flow instance, not the class ChildFlow" in detail


def test_a_child_that_cannot_take_its_input_fails_the_wait_for(env: DexTestEnv) -> None:
    class Bad(Step[str]):
        def wait_for(self, context: Context, input: str) -> Wait:
            return Wait.until(SubFlow.run(CHILD, 42))  # ChildFlow takes a str

        def execute(self, context: Context, input: str) -> StepDecision:
            return graceful_complete()

    class BadFlow(Flow[str]):
        def __init__(self) -> None:
            self.bad = Bad()

        def get_steps(self) -> StepList[str]:
            return StepList.start_step(self.bad)

    env.start(BadFlow(), "x", flow_id="b")
    env.drive(["b"], until=lambda: len(env.inspect("b")["steps"][0]["attempts"]) >= 2)
    attempts = env.inspect("b")["steps"][0]["attempts"]
    assert "SubFlow ChildFlow" in (attempts[0].get("detail") or "")
    assert env.store.get_flow("SubFlow:b-Bad-1-0") is None


# ------------------------------------------------------------------------- reuse policies ----
def rerun(env: DexTestEnv, inputs: list[str], policy: SubFlowReusePolicy) -> None:
    """A new run of flow `p` (id reuse): its Parent-1 starts the same child id again."""
    SEEN["options"] = {0: SubFlowOptions(reuse_policy=policy)}
    env.client.start_flow(ParentFlow(), "p", inputs, StartFlowOptions(
        id_reuse_policy=IdReusePolicy.ALLOW_TERMINATE_IF_RUNNING))


def child_runs(env: DexTestEnv) -> list[str]:
    return sorted(f.status.name for f in env.store.list_flows() if f.flow_id.startswith(child_id("p", 0)))


@pytest.mark.parametrize(("policy", "runs", "status"), [
    (SubFlowReusePolicy.ATTACH, ["FAILED"], "FAILED"),
    (SubFlowReusePolicy.RESTART_IF_PREVIOUS_EXITS_ABNORMALLY, ["COMPLETED", "FAILED"], "COMPLETED"),
    (SubFlowReusePolicy.ALWAYS_RESTART, ["COMPLETED", "FAILED"], "COMPLETED"),
])
def test_a_failed_child_is_reused_or_restarted_by_policy(env: DexTestEnv, policy: SubFlowReusePolicy,
                                                        runs: list[str], status: str) -> None:
    env.run(ParentFlow(), ["fail:5"], flow_id="p")
    rerun(env, ["ok:5"], policy)
    assert env.client.wait_for_flow("p").single_output(list) == [status]
    assert child_runs(env) == runs


@pytest.mark.parametrize(("policy", "runs"), [
    (SubFlowReusePolicy.ATTACH, ["COMPLETED"]),
    (SubFlowReusePolicy.RESTART_IF_PREVIOUS_EXITS_ABNORMALLY, ["COMPLETED"]),
    (SubFlowReusePolicy.ALWAYS_RESTART, ["COMPLETED", "COMPLETED"]),
])
def test_a_completed_child_gives_its_result_unless_always_restart(env: DexTestEnv, policy: SubFlowReusePolicy,
                                                                 runs: list[str]) -> None:
    env.run(ParentFlow(), ["ok:5"], flow_id="p")
    rerun(env, ["ok:9"], policy)
    env.client.wait_for_flow("p")
    assert SEEN["results"][0]["outputs"] == ([9] if policy is SubFlowReusePolicy.ALWAYS_RESTART else [5])
    assert child_runs(env) == runs


@pytest.mark.parametrize(("policy", "runs"), [
    (SubFlowReusePolicy.ATTACH, ["COMPLETED"]),
    (SubFlowReusePolicy.RESTART_IF_PREVIOUS_EXITS_ABNORMALLY, ["COMPLETED"]),
    (SubFlowReusePolicy.ALWAYS_RESTART, ["COMPLETED", "TERMINATED"]),
])
def test_a_running_child_is_attached_unless_always_restart(env: DexTestEnv, policy: SubFlowReusePolicy,
                                                          runs: list[str]) -> None:
    SEEN["wait"] = lambda *c: Wait.any_of(*c, Timer.by_duration(timedelta(seconds=1)))
    env.run(ParentFlow(), ["ok:100"], flow_id="p")  # the timer wins; the child runs on
    SEEN["wait"] = Wait.all_of
    rerun(env, ["ok:100"], policy)
    env.client.wait_for_flow("p")
    assert SEEN["results"][0]["outputs"] == [100]
    assert child_runs(env) == runs


# ------------------------------------------------------------------------ nested SubFlows ----
class Tree(Step[int]):
    """depth n: waits on two SubFlows of depth n-1, returns the number of leaves."""

    def __init__(self, flow: TreeFlow) -> None:
        self.flow = flow

    def wait_for(self, context: Context, input: int) -> Wait:
        if input == 0:
            return Wait.until(Timer.by_duration(timedelta(seconds=1)))
        return Wait.all_of(SubFlow.run(self.flow, input - 1), SubFlow.run(self.flow, input - 1))

    def execute(self, context: Context, input: int) -> StepDecision:
        if input == 0:
            return graceful_complete(1)
        return graceful_complete(sum(SubFlow.get_condition_results(context, i).single_output(int) for i in (0, 1)))


class TreeFlow(Flow[int]):
    def __init__(self) -> None:
        self.tree = Tree(self)

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.tree)


def test_subflows_nest_and_a_drive_of_the_root_drives_every_level(env: DexTestEnv) -> None:
    env.start(TreeFlow(), 3, flow_id="t")
    env.drive(["t"], until=lambda: env.store.flow_count() == 15)  # every level started; the leaves wait
    assert len(env.store.running_descendants(["t"])) == 14
    assert env.client.wait_for_flow("t").single_output(int) == 8
    flows = env.store.list_flows(limit=100)
    assert len(flows) == 15 and all(f.status.name == "COMPLETED" for f in flows)
    grandchild = "SubFlow:SubFlow:t-Tree-1-1-Tree-1-0"
    assert env.inspect(grandchild)["summary"]["parentFlowId"] == "SubFlow:t-Tree-1-1"
    assert env.store.running_descendants(["t"]) == []


def test_a_parent_and_a_child_that_continue_as_new_keep_their_link(env: DexTestEnv) -> None:
    """Continue-as-new (transitions/continuing.py) keeps both ends of a SubFlow: the parent's
    waiting step carries its Wait (with the child's id) into the new run, the child's row keeps
    its parent link, so the child's end still reaches the parent's current run."""
    env.start(ParentFlow(), ["ok:30"], "p")
    env.drive(["p"], until=lambda: status_of(env, child_id("p", 0)) == "RUNNING")
    first = env.client.describe_flow("p").run_id
    env.client.trigger_continue_as_new("p")
    env.client.trigger_continue_as_new(child_id("p", 0))
    assert env.client.wait_for_flow("p").single_output(list) == ["COMPLETED"]
    assert SEEN["results"][0]["outputs"] == [30]
    snap = env.inspect("p")
    assert snap["summary"]["firstRunId"] == first and len(snap["runs"]) == 2
    assert "SubFlowCompleted" in [e["type"] for e in snap["history"]]  # reported to the new run
    child = env.inspect(child_id("p", 0))
    assert child["summary"]["parentFlowId"] == "p" and len(child["runs"]) == 2


def test_a_child_inherits_its_parents_flow_config_with_the_override_over_it(env: DexTestEnv) -> None:
    from dexcli import FlowConfig, StepDurability

    SEEN["options"] = {0: SubFlowOptions(config_override=FlowConfig(continue_as_new_threshold=7))}
    env.client.start_flow(ParentFlow(), "p", ["ok:1", "ok:2"], StartFlowOptions(config_override=FlowConfig(
        step_durability=StepDurability.ASYNC, continue_as_new_threshold=50)))
    assert env.client.wait_for_flow("p").single_output(list) == ["COMPLETED", "COMPLETED"]
    assert env.inspect(child_id("p", 0))["state"]["flowConfig"] == {
        "stepDurability": "STEP_DURABILITY_ASYNC", "continueAsNewThreshold": 7}
    assert env.inspect(child_id("p", 1))["state"]["flowConfig"] == {
        "stepDurability": "STEP_DURABILITY_ASYNC", "continueAsNewThreshold": 50}


def test_a_child_config_override_dex_cannot_apply_fails_the_wait_for(env: DexTestEnv) -> None:
    from dexcli import FlowConfig

    SEEN["options"] = {0: SubFlowOptions(config_override=FlowConfig(worker_target=object()))}
    env.start(ParentFlow(), ["ok:1"], flow_id="p")
    env.drive(["p"])
    assert env.inspect("p")["summary"]["flowStatus"] == "FAILED"
    assert "worker_target" in json.dumps(env.inspect("p")["steps"][0]["attempts"])
    assert env.store.get_flow(child_id("p", 0)) is None
