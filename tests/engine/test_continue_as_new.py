"""Continue-as-new, as the server does it (continueAsNewer.go, ContinueAsNewCounter), in
virtual time: `trigger_continue_as_new` and FlowConfig's `continue_as_new_threshold` end the run
CONTINUED_AS_NEW and go on with a new run of the same flow id — its open steps (waits, timers,
locals, a running attempt), attributes, pending channel messages, outputs and step numbering
carried over, its history started again — the old run archived as `<flow_id>$<run_id>`;
`wait_for_flow` follows the runs, `search_flows(include_continued_as_new=)` finds the old ones."""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from datetime import timedelta
from typing import Any

import pytest

from dexcli import (
    AsyncClient,
    Attribute,
    Channel,
    Context,
    Flow,
    FlowConfig,
    FlowNotActiveOrNotFoundError,
    FlowStatus,
    PersistenceSchema,
    RPCResult,
    StartFlowOptions,
    Step,
    StepDecision,
    StepExecutionId,
    StepList,
    StepMovement,
    StepOutput,
    Stream,
    Timer,
    TimerId,
    Wait,
    go_to,
    go_to_many,
    graceful_complete,
    rpc,
)
from dexcli.engine.doctor import check
from dexcli.testing import DexTestEnv

count = Attribute("count", int)
inbox = Channel("inbox", str)
log = Stream("log", str, 1 << 20)


class Loop(Step[int]):
    """Counts to `LIMIT`, one step execution per number, writing the count attribute."""

    LIMIT = 25
    runs: list[int] = []
    run_ids: dict[int, str] = {}  # the run each number ran in, as its context says

    def execute(self, context: Context, n: int) -> StepDecision:
        Loop.runs.append(n)
        Loop.run_ids[n] = context.run_id
        count.set(context, n)
        if n >= Loop.LIMIT:
            return graceful_complete(n)
        return go_to(Loop, n + 1)


class Waiter(Step[None]):
    """Waits for two inbox messages; what it stored in wait_for is read in execute."""

    def wait_for(self, context: Context, input: None) -> Wait:
        context.set_step_execution_local("note", "kept")
        return Wait.all_of(inbox.for_n(2))

    def execute(self, context: Context, input: None) -> StepDecision:
        return graceful_complete(f"{context.get_step_execution_local('note')} {count.get(context)}")


class Sleeper(Step[None]):
    def wait_for(self, context: Context, input: None) -> Wait:
        return Wait.all_of(Timer.by_duration(timedelta(hours=2)))

    def execute(self, context: Context, input: None) -> StepDecision:
        return graceful_complete("woke")


class Fork(Step[None]):
    def execute(self, context: Context, input: None) -> Generator[StepOutput, None, StepDecision]:
        count.set(context, 41)
        yield log.write(context, "forked")  # type: ignore[misc]
        return go_to_many(StepMovement.of(Quick, "first"), StepMovement.of(Waiter, None))


class Quick(Step[str]):
    def execute(self, context: Context, text: str) -> StepDecision:
        return graceful_complete(text)


class Counter(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Loop())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(count)


class Mailbox(Flow[None]):
    """Fork → Quick (completes with "first") and Waiter (waits for two messages)."""

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Fork()).other_steps(Quick(), Waiter(), Sleeper())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(count, inbox, log)

    @rpc
    def send(self, context: Context, text: str) -> RPCResult[None]:
        inbox.publish(context, text)
        return RPCResult(None)

    @rpc
    def nap(self, context: Context) -> RPCResult[None]:
        return RPCResult(None, next_steps=(StepMovement.of(Sleeper, None),))


def threshold(n: int) -> StartFlowOptions:
    return StartFlowOptions(config_override=FlowConfig(continue_as_new_threshold=n))


def types(snap: dict[str, Any]) -> list[str]:
    return [e["type"] for e in snap["history"]]


# --- the threshold ---------------------------------------------------------------------------

def test_the_threshold_rolls_the_run_over_and_the_flow_finishes_right() -> None:
    Loop.runs = []
    with DexTestEnv() as env:
        first = env.client.start_flow(Counter(), "c", 0, threshold(10))
        result = env.client.wait_for_flow("c")  # follows the runs
        assert result.status is FlowStatus.COMPLETED and result.single_output(int) == 25
        assert Loop.runs == list(range(26))  # every number once: nothing run twice, nothing lost
        snap = env.inspect("c")
        runs = snap["runs"]
        assert [r["status"] for r in runs] == ["CONTINUED_AS_NEW"] * 2 + ["COMPLETED"]
        assert [r["via"] for r in runs] == [None, "continueAsNew", "continueAsNew"]
        assert runs[0]["runId"] == first and snap["summary"]["firstRunId"] == first
        assert snap["summary"]["runId"] == runs[-1]["runId"] != first
        # the numbering goes on across runs; the last run holds its own steps only
        assert [s["stepExecutionId"] for s in snap["steps"]] == [f"Loop-{n}" for n in range(21, 27)]
        # its history starts again, with the run it continued
        assert types(snap)[0] == "FlowContinued" and snap["history"][0]["eventId"] == 1
        assert snap["history"][0]["previousRunId"] == runs[1]["runId"]
        # each earlier run: 10 tracked events, then FlowClosed CONTINUED_AS_NEW naming the next run
        old = env.inspect(runs[0]["flowId"])
        assert old["summary"]["flowStatus"] == "CONTINUED_AS_NEW"
        assert types(old) == ["FlowStarted"] + ["StepExecuteCompleted"] * 10 + ["FlowClosed"]
        assert old["history"][-1]["continuedToRunId"] == runs[1]["runId"]
        assert [s["stepExecutionId"] for s in old["steps"]] == [f"Loop-{n}" for n in range(1, 11)]
        middle = env.inspect(runs[1]["flowId"])
        assert types(middle)[0] == "FlowContinued" and middle["runs"] == [
            {**r, "shown": r["flowId"] == runs[1]["flowId"]} for r in runs]
        assert middle["history"][0]["stepsToResume"][0]["stepExecutionId"] == "Loop-11"  # leased as it rolled
        # each step's context names the run it ran in: Loop-11, leased in the commit that rolled over, the new one
        assert [Loop.run_ids[n] for n in (0, 9, 10, 19, 20, 25)] == [
            first, first, runs[1]["runId"], runs[1]["runId"], runs[2]["runId"], runs[2]["runId"]]
        assert check(env.store) == ([], 3)  # every run's steps and history agree (dex doctor)
        rolled = [e for e in env.events if e["type"] == "flowContinuedAsNew"]  # what `dex run --json` prints
        assert [(e["previousRunId"], e["runId"]) for e in rolled] == [(first, runs[1]["runId"]),
                                                                      (runs[1]["runId"], runs[2]["runId"])]


def test_a_flow_that_continues_as_new_many_times_finishes_right() -> None:
    Loop.runs = []
    with DexTestEnv() as env:
        env.client.start_flow(Counter(), "c", 0, threshold(1))  # every step execution rolls the run over
        assert env.client.wait_for_flow("c").single_output(int) == 25
        assert Loop.runs == list(range(26))
        snap = env.inspect("c")
        assert len(snap["runs"]) == 26 and snap["state"]["attributes"]["count"] == 25
        assert [s["stepExecutionId"] for s in snap["steps"]] == ["Loop-26"]
        assert len({r["runId"] for r in snap["runs"]}) == 26


def test_no_threshold_no_roll_over() -> None:
    with DexTestEnv() as env:
        env.client.start_flow(Counter(), "c", 0, StartFlowOptions(config_override=FlowConfig(
            continue_as_new_threshold=0)))
        assert env.client.wait_for_flow("c").single_output(int) == 25
        assert len(env.inspect("c")["runs"]) == 1 and len(env.inspect("c")["steps"]) == 26


def test_rpcs_count_toward_the_threshold() -> None:
    with DexTestEnv() as env:
        env.client.start_flow(Mailbox(), "m", None, threshold(4))
        env.drive(["m"])  # Fork, Quick: 2 tracked events; Waiter's wait is not complete
        assert len(env.inspect("m")["runs"]) == 1
        env.client.invoke_rpc(Mailbox().nap, "m")  # 3
        assert len(env.inspect("m")["runs"]) == 1
        env.client.invoke_rpc(Mailbox().nap, "m")  # 4: the RPC's commit rolls the run over
        snap = env.inspect("m")
        assert len(snap["runs"]) == 2 and types(snap) == ["FlowContinued"]
        assert sorted(s["stepExecutionId"] for s in snap["steps"]) == ["Sleeper-1", "Sleeper-2", "Waiter-1"]


def test_an_update_and_a_skipped_timer_count_and_a_lower_threshold_applies_at_once() -> None:
    with DexTestEnv() as env:
        env.client.start_flow(Mailbox(), "m", None)
        env.drive(["m"])  # Fork, Quick: 2 tracked events
        env.client.update_flow_config("m", FlowConfig(continue_as_new_threshold=4))  # 3: not yet
        assert len(env.inspect("m")["runs"]) == 1
        assert types(env.inspect("m"))[-1] == "FlowConfigUpdated"
        env.client.invoke_rpc(Mailbox().nap, "m")  # 4: the RPC rolls the run over
        assert len(env.inspect("m")["runs"]) == 2
        env.drive(["m"], until=lambda: any(a["timers"] for a in env.inspect("m")["state"]["activeStepExecutions"]))
        sleeper = [a for a in env.inspect("m")["state"]["activeStepExecutions"] if a["stepType"] == "Sleeper"][0]
        env.client.update_flow_config("m", FlowConfig(continue_as_new_threshold=2))  # 1 in this run
        assert len(env.inspect("m")["runs"]) == 2
        step_type, number = sleeper["stepExecutionId"].rsplit("-", 1)
        env.client.skip_timer("m", StepExecutionId(step_type, int(number)), TimerId.by_condition_index(0))
        assert len(env.inspect("m")["runs"]) == 3  # the skip was the second
        env.client.update_flow_config("m", FlowConfig(continue_as_new_threshold=1))  # the update alone reaches it
        assert len(env.inspect("m")["runs"]) == 4


# --- a client's trigger -----------------------------------------------------------------------

def test_trigger_carries_waits_locals_attributes_messages_outputs_and_streams() -> None:
    with DexTestEnv() as env:
        first = env.client.start_flow(Mailbox(), "m", None)
        env.drive(["m"])
        env.client.invoke_rpc(Mailbox().send, "m", "one")  # one of the two Waiter needs
        env.client.trigger_continue_as_new("m")
        snap = env.inspect("m")
        assert snap["summary"]["runId"] != first and snap["summary"]["firstRunId"] == first
        assert snap["summary"]["flowStatus"] == "RUNNING"
        (waiter,) = snap["steps"]
        assert waiter["stepExecutionId"] == "Waiter-1" and waiter["status"] == "WAITING"
        state = snap["state"]
        assert state["activeStepExecutions"][0]["stepExecutionLocals"] == [{"key": "note", "value": "kept"}]
        assert [m["value"] for m in state["pendingChannelMessages"]["inbox"]] == ["one"]
        assert state["attributes"] == {"count": 41}
        assert [c["completedStepOutput"] for c in state["completedSteps"]] == ["first"]
        started = snap["history"][0]
        assert started["type"] == "FlowContinued" and started["reason"] == "trigger_continue_as_new"
        assert [s["stepExecutionId"] for s in started["stepsToResume"]] == ["Waiter-1"]
        assert started["pendingChannelMessages"] == {"inbox": 1} and started["attributes"] == {"count": 41}
        assert env.stream_values("m") == ["forked"]  # a Stream is the flow id's, not the run's
        old = env.inspect(f"m${first}")
        assert old["state"]["attributes"] == {"count": 41}  # as it was when the run ended
        assert {s["stepExecutionId"] for s in old["steps"]} == {"Fork-1", "Quick-1"}

        env.client.invoke_rpc(Mailbox().send, "m", "two")
        result = env.client.wait_for_flow("m")
        assert result.status is FlowStatus.COMPLETED
        assert [c.decode(str) for c in result.completions] == ["first", "kept 41"]
        assert check(env.store) == ([], 2)


def test_a_timer_carried_over_fires_when_it_was_due() -> None:
    with DexTestEnv() as env:
        env.client.start_flow(Mailbox(), "m", None)
        env.drive(["m"])
        env.client.invoke_rpc(Mailbox().nap, "m")
        env.drive(["m"], until=lambda: env.inspect("m")["state"]["activeStepExecutions"][-1]["timers"] != [])
        due = [a for a in env.inspect("m")["state"]["activeStepExecutions"] if a["stepType"] == "Sleeper"][0]
        env.client.trigger_continue_as_new("m")
        after = [a for a in env.inspect("m")["state"]["activeStepExecutions"] if a["stepType"] == "Sleeper"][0]
        assert after["timers"] == due["timers"]
        env.drive(["m"], until=lambda: any(s["stepExecutionId"] == "Sleeper-1" and s["status"] == "COMPLETED"
                                           for s in env.inspect("m")["steps"]), poll=600)
        sleeper = [s for s in env.inspect("m")["steps"] if s["stepExecutionId"] == "Sleeper-1"][0]
        assert sleeper["status"] == "COMPLETED"


class Rolling(Step[int]):
    """Asks for a new run from inside its own attempt; its result lands in the new run, once."""

    calls: list[int] = []

    def execute(self, context: Context, n: int) -> StepDecision:
        Rolling.calls.append(n)
        if n == 0:
            ROLLER[0].trigger_continue_as_new(context.flow_id)
        return graceful_complete(n) if n == 1 else go_to(Rolling, n + 1)


ROLLER: list[Any] = []


class RollingFlow(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Rolling())


def test_an_attempt_running_when_the_run_rolls_over_commits_once_in_the_new_run() -> None:
    Rolling.calls = []
    with DexTestEnv() as env:
        ROLLER[:] = [env.client]
        first = env.client.start_flow(RollingFlow(), "r", 0)
        assert env.client.wait_for_flow("r").single_output(int) == 1
        assert Rolling.calls == [0, 1]
        snap = env.inspect("r")
        assert [s["stepExecutionId"] for s in snap["steps"]] == ["Rolling-1", "Rolling-2"]
        assert types(snap) == ["FlowContinued", "StepExecuteCompleted", "StepExecuteCompleted", "FlowClosed"]
        assert types(env.inspect(f"r${first}")) == ["FlowStarted", "FlowClosed"]
        assert check(env.store) == ([], 2)


def test_the_async_client_triggers_too() -> None:
    with DexTestEnv() as env:
        env.client.start_flow(Mailbox(), "m", None)
        env.drive(["m"])

        async def roll() -> None:
            async with AsyncClient(engine=env.engine) as client:
                await client.trigger_continue_as_new("m")

        asyncio.run(roll())
        assert len(env.inspect("m")["runs"]) == 2


def test_trigger_on_a_closed_or_missing_flow_is_refused() -> None:
    with DexTestEnv() as env:
        env.client.start_flow(Counter(), "c", 0)
        env.client.wait_for_flow("c")
        with pytest.raises(FlowNotActiveOrNotFoundError, match="COMPLETED"):
            env.client.trigger_continue_as_new("c")
        with pytest.raises(FlowNotActiveOrNotFoundError, match="not found"):
            env.client.trigger_continue_as_new("nope")
        assert len(env.inspect("c")["runs"]) == 1


# --- search and describe ----------------------------------------------------------------------

def test_search_leaves_earlier_runs_out_unless_asked() -> None:
    with DexTestEnv() as env:
        first = env.client.start_flow(Mailbox(), "m", None)
        env.drive(["m"])
        env.client.trigger_continue_as_new("m")
        current = env.client.describe_flow("m").run_id
        assert [(e.flow_id, e.run_id) for e in env.client.search_flows("", 10).flows] == [("m", current)]
        page = env.client.search_flows("", 10, include_continued_as_new=True)
        assert sorted((e.flow_id, e.run_id, e.status) for e in page.flows) == sorted(
            [("m", current, FlowStatus.RUNNING), ("m", first, FlowStatus.CONTINUED_AS_NEW)])
        # the query's own terms still apply
        running = env.client.search_flows("FlowStatus = 'Running'", 10, include_continued_as_new=True)
        assert [e.run_id for e in running.flows] == [current]
        assert env.client.describe_flow("m").status is FlowStatus.RUNNING


def test_the_page_size_tells_how_many_pages_the_carried_state_takes() -> None:
    with DexTestEnv() as env:
        env.client.start_flow(Mailbox(), "m", None, StartFlowOptions(config_override=FlowConfig(
            continue_as_new_page_size_bytes=64)))
        env.drive(["m"])
        env.client.trigger_continue_as_new("m")
        started = env.inspect("m")["history"][0]
        assert started["pageSizeBytes"] == 64 and started["carriedBytes"] > 64
        assert started["pages"] == -(-started["carriedBytes"] // 64)
        env.client.update_flow_config("m", FlowConfig(continue_as_new_page_size_bytes=0))  # 0: the 1 MiB default
        env.client.trigger_continue_as_new("m")
        assert env.inspect("m")["history"][0]["pageSizeBytes"] == 1024 * 1024
        assert env.inspect("m")["history"][0]["pages"] == 1


def test_a_run_id_that_is_not_the_current_one_is_refused_in_the_change_itself() -> None:
    """The Dex CLI's --run-id, checked in the change's own transaction, before anything else
    (a stale id is refused even when the flow runs; nothing changes)."""
    from dexcli.engine import ContinueAsNew
    from dexcli.engine.transitions.flows import RunNotCurrentError

    with DexTestEnv() as env:
        first = env.client.start_flow(Mailbox(), "m", None)
        env.drive(["m"])
        with pytest.raises(RunNotCurrentError, match=f"run stale is not the current run of flow m \\({first}\\)"):
            env.engine.change(ContinueAsNew("m", run_id="stale"))
        assert len(env.inspect("m")["runs"]) == 1
        second = env.engine.change(ContinueAsNew("m", run_id=first))
        assert second != first and len(env.inspect("m")["runs"]) == 2
        with pytest.raises(RunNotCurrentError):  # the first run is no longer the current one
            env.engine.change(ContinueAsNew("m", run_id=first))
        assert len(env.inspect("m")["runs"]) == 2
