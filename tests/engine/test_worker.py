"""Worker and AsyncWorker, Dex's worker facades over a local database: they run the flows a
Client started on the same database file (another connection, as another process would), serve
until stopped, release what they were running when stopped, and refuse what has no local
meaning (WorkerOptions, server-only members) or what the official Worker cannot run (an async
step under a sync Worker)."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from datetime import timedelta
from pathlib import Path

import pytest

from dexcli import (
    AsyncContext,
    AsyncWorker,
    Client,
    Context,
    Flow,
    FlowDefinitionError,
    FlowStatus,
    Registry,
    RetryPolicy,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    Timer,
    Wait,
    Worker,
    graceful_complete,
)
from dexcli.engine.events import Event
from dexcli.sdk.errors import NotSupportedYetError
from dexcli.store import AttemptOutcome
from dexcli_flows.three_steps import ThreeStepFlow


def on(worker: Worker | AsyncWorker, event_type: str) -> threading.Event:
    """An Event set when the worker's engine reports `event_type`."""
    seen = threading.Event()

    def listen(ev: Event) -> None:
        if ev.type == event_type:
            seen.set()

    worker.engine.events.listeners.append(listen)
    return seen


def test_run_until_idle_runs_every_flow_a_client_started_on_the_same_database(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    with Client(Registry([ThreeStepFlow()]), db=db) as client:
        client.start_flow(ThreeStepFlow(), "a", 1)
        client.start_flow(ThreeStepFlow(), "b", 10)
        with Worker(Registry([ThreeStepFlow()]), db=db) as worker:
            worker.run(until_idle=True)
            worker.run(until_idle=True)  # run() may be called again; nothing is left
        assert [client.result(f).single_output(int) for f in "ab"] == [7, 25]


def test_until_idle_claims_batch_after_batch_and_reads_the_schedule_once_per_batch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A claim that took a full batch reads no schedule after it: the next pass comes at once
    and reads it (7 queued flows, 2 per batch: 4 claims, one read before each); the drive
    still ends idle with every flow done."""
    from dexcli.engine.schedule import Scheduler
    from dexcli.store import Store

    monkeypatch.setattr(Scheduler, "claim_batch", 2)
    seen: list[str] = []
    real = Store.schedule

    def counted(self: Store, *args: object) -> object:
        seen.append("read")
        return real(self, *args)  # type: ignore[arg-type]

    db = tmp_path / "dex.db"
    with Client(Registry([ThreeStepFlow()]), db=db) as client:
        for i in range(7):
            client.start_flow(ThreeStepFlow(), f"f{i}", i)
        with Worker(Registry([ThreeStepFlow()]), db=db) as worker:
            scheduler = worker.engine._scheduler
            claim = scheduler.h.claim

            def spy(now: float, ids: list[str] | None) -> int:
                n = claim(now, ids)
                seen.append(f"claim {n}")
                return n

            monkeypatch.setattr(scheduler, "h", dataclasses.replace(scheduler.h, claim=spy))
            monkeypatch.setattr(Store, "schedule", counted)
            worker.run(until_idle=True)
        assert [client.result(f"f{i}").single_output(int) for i in range(7)] == [(i + 1) * 2 + 3 for i in range(7)]
    first = seen.index("claim 2")
    assert seen[first - 1:first + 7] == ["read", "claim 2", "read", "claim 2", "read", "claim 2", "read", "claim 1"]
    assert seen[first + 7] == "read"  # a batch that was not full: the schedule after it, as before


def test_a_worker_started_in_a_thread_serves_until_stopped(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    worker = Worker(Registry([ThreeStepFlow()]), db=db)
    closed = on(worker, "flowClosed")
    thread = threading.Thread(target=worker.start)
    thread.start()
    try:
        with Client(Registry([ThreeStepFlow()]), db=db) as client:
            client.start_flow(ThreeStepFlow(), "a", 1)  # after the worker started: it finds it
            assert closed.wait(30), "the worker did not run the flow"
            assert thread.is_alive()  # it serves on, as the official Worker, until stopped
            worker.stop()
            thread.join(10)
            assert not thread.is_alive()
            assert client.result("a").single_output(int) == 7
    finally:
        worker.close()
    with pytest.raises(RuntimeError, match="Worker cannot start from state closed"):
        worker.start()
    worker.close()  # idempotent


def test_start_is_one_shot_and_stop_before_start_is_safe(tmp_path: Path) -> None:
    with Worker(Registry([ThreeStepFlow()]), db=tmp_path / "dex.db") as worker:
        worker.stop()
        worker.stop()
        with pytest.raises(RuntimeError, match="cannot start from state stopped"):
            worker.start()


class Slow(Step[int]):
    async def execute(self, context: AsyncContext, n: int) -> StepDecision:
        await asyncio.sleep(3600)
        return graceful_complete(n)


class SlowFlow(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Slow())


def test_an_async_worker_stopped_mid_attempt_releases_it(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    registry = Registry([SlowFlow()], allow_async_handlers=True)

    async def main() -> None:
        async with AsyncWorker(registry, db=db) as worker:
            started = on(worker, "attemptStarted")
            serving = asyncio.create_task(worker.start())
            with Client(Registry([SlowFlow()], allow_async_handlers=True), db=db) as client:
                client.start_flow(SlowFlow(), "s", 1)
            assert await asyncio.to_thread(started.wait, 30)
            await worker.stop()
            await asyncio.wait_for(serving, 10)

    asyncio.run(main())
    with Client(registry, db=db) as client:
        [attempt] = client.store.attempts_of("s")
        assert attempt.outcome is AttemptOutcome.INTERRUPTED  # runnable again at once, not left to time out
        assert client.describe_flow("s").status.name == "RUNNING"


def test_a_sync_worker_refuses_a_registry_with_async_steps(tmp_path: Path) -> None:
    with pytest.raises(FlowDefinitionError, match="step Slow: execute is async; use AsyncWorker"):
        Worker(Registry([SlowFlow()], allow_async_handlers=True), db=tmp_path / "dex.db")


def test_what_has_no_local_meaning_is_refused_loudly(tmp_path: Path) -> None:
    with pytest.raises(NotSupportedYetError, match="WorkerOptions"):
        Worker(Registry([]), None, object(), db=tmp_path / "dex.db")
    with pytest.raises(ValueError, match="needs db=PATH"):
        AsyncWorker(Registry([]))
    with pytest.raises(TypeError, match="takes a Registry, not list"):
        Worker([ThreeStepFlow()], db=tmp_path / "dex.db")  # type: ignore[arg-type]
    with Worker(Registry([]), object(), db=tmp_path / "dex.db") as worker:  # a blob cache: nothing to cache
        with pytest.raises(NotSupportedYetError, match="Worker.worker_target: dex runs flows locally"):
            _ = worker.worker_target
        with pytest.raises(AttributeError):
            _ = worker.no_such_member


class LongWait(Step[int]):
    def wait_for(self, context: Context, input: int) -> Wait:
        return Wait.any_of(Timer.by_duration(timedelta(hours=24), condition_id="day"))

    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(input)


class FailsOnce(Step[int]):
    tries = 0

    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_retry=RetryPolicy(initial_interval=timedelta(seconds=1)))

    def execute(self, context: Context, input: int) -> StepDecision:
        FailsOnce.tries += 1
        if FailsOnce.tries == 1:
            raise RuntimeError("once")
        return graceful_complete(input)


class LongWaitFlow(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(LongWait())


class FailsOnceFlow(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(FailsOnce())


def test_until_idle_on_real_time_leaves_timers_but_waits_for_retries(tmp_path: Path) -> None:
    """Idle: nothing runs again unless a timer fires or someone acts. A 24 h timer does not keep
    run(until_idle=True) going (on main it waited for it); a retry backing off does."""
    db = tmp_path / "dex.db"
    flows = [LongWaitFlow(), FailsOnceFlow()]
    with Client(Registry(flows), db=db) as client:
        client.start_flow(LongWaitFlow(), "long", 1)
        client.start_flow(FailsOnceFlow(), "retry", 2)
        with Worker(Registry(flows), db=db) as worker:
            worker.run(until_idle=True)
        assert client.describe_flow("retry").status is FlowStatus.COMPLETED and FailsOnce.tries == 2
        assert client.describe_flow("long").status is FlowStatus.RUNNING
