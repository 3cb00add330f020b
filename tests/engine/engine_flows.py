"""Small configurable steps and flows for the engine rule tests.

Step behaviour is set per instance (constructor arguments), so one class serves many tests;
each test gets a fresh DexTestEnv (and so a fresh registry).
"""

import asyncio
from datetime import timedelta
from typing import Any

from dexcli import (
    AsyncContext,
    Context,
    Flow,
    PersistenceSchema,
    RetryPolicy,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    Stream,
    graceful_complete,
)

PROGRESS = Stream("Progress", str, 1 << 20)


def secs(n: float) -> timedelta:
    return timedelta(seconds=n)


def opts(*, timeout: float | None = None, heartbeat: float | None = None, attempts: int = 0,
         initial: float | None = None, coefficient: float = 0.0, maximum: float | None = None,
         total: float | None = None) -> StepOptions:
    return StepOptions(
        execute_method_timeout=None if timeout is None else secs(timeout),
        heartbeat_timeout=None if heartbeat is None else secs(heartbeat),
        execute_retry=RetryPolicy(
            initial_interval=None if initial is None else secs(initial),
            backoff_coefficient=coefficient,
            maximum_interval=None if maximum is None else secs(maximum),
            maximum_attempts=attempts,
            total_duration=None if total is None else secs(total),
        ),
    )


class Beat(Step[int]):
    """Async: every `every` seconds sends a heartbeat (or a Stream message when `stream`);
    completes after `finish_after` seconds (never when None). `fail_attempts` raise at once."""

    def __init__(self, options: StepOptions | None = None, *, every: float | None = None,
                 finish_after: float | None = None, stream: bool = False,
                 fail_attempts: tuple[int, ...] = ()) -> None:
        self.options = options
        self.every = every
        self.finish_after = finish_after
        self.stream = stream
        self.fail_attempts = fail_attempts
        self.seen: list[dict[str, Any]] = []

    def get_step_options(self) -> StepOptions | None:
        return self.options

    async def execute(self, context: AsyncContext, input: int) -> StepDecision:
        loop = asyncio.get_running_loop()
        start = loop.time()
        self.seen.append({"attempt": context.attempt, "start": start})
        if context.attempt in self.fail_attempts:
            raise RuntimeError(f"attempt {context.attempt} fails")
        n = 0
        while True:
            if self.finish_after is not None and loop.time() - start >= self.finish_after:
                return graceful_complete(f"done after {n} beats")
            await asyncio.sleep(self.every if self.every is not None else 10**6)
            n += 1
            if self.stream:
                PROGRESS.write(context, f"beat {n}")
            else:
                await context.heartbeat(n)


class Flaky(Step[int]):
    """Sync: raises `error` (default RuntimeError) in the listed attempts, else completes with
    the attempt number. Records what each attempt saw."""

    def __init__(self, options: StepOptions | None = None, *, fail_attempts: tuple[int, ...] = (),
                 fail_always: bool = False, error: Any = None) -> None:
        self.options = options
        self.fail_attempts = fail_attempts
        self.fail_always = fail_always
        self.error = error
        self.seen: list[dict[str, Any]] = []

    def get_step_options(self) -> StepOptions | None:
        return self.options

    def execute(self, context: Context, input: int) -> StepDecision:
        self.seen.append({"attempt": context.attempt, "first_attempt_at": context.first_attempt_at,
                          "recovery_error": context.recovery_error})
        if self.fail_always or context.attempt in self.fail_attempts:
            err = self.error(context.attempt) if callable(self.error) else None
            raise err if err is not None else RuntimeError(f"attempt {context.attempt} fails")
        return graceful_complete(context.attempt)


class Single(Flow[int]):
    """A flow of the given steps; the first is the start step."""

    def __init__(self, start: Step[Any], *others: Step[Any]) -> None:
        self.start = start
        self.others = others

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.start).other_steps(*self.others)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(PROGRESS)
