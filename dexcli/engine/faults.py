"""Faults a user can inject on purpose: crash the process, stall or fail an attempt.

Crash points are where a real crash hurts:
  attempt-start        an attempt was leased and recorded, its handler has not run
  heartbeat[:N]        right after the N-th heartbeat of an attempt was committed (default 1)
  stream-write[:N]     right after the N-th Stream message of an attempt was committed
  before-commit        the handler returned its decision; the transaction has not run
  after-commit         the decision and the next steps were committed; this process had
                       already leased the next step's first attempt in that commit
Each may be narrowed to a step type: `heartbeat:2@AwaitJob`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dexcli.sdk.options import RetryPolicy

if TYPE_CHECKING:
    from dexcli.sdk.registry import FlowDefinition, StepSpec

CRASH_POINTS = {
    "attempt-start": "an attempt was leased and recorded; its handler has not run",
    "heartbeat": "right after the N-th heartbeat of an attempt was committed (heartbeat:N, default 1)",
    "stream-write": "right after the N-th Stream message of an attempt was committed (stream-write:N)",
    "before-commit": "a handler returned its decision; the transaction has not run",
    "after-commit": "a step's decision and its next steps were committed (their first attempts leased here)",
}
CRASH_EXIT_CODE = 137
OUTPUT_POINTS = {"heartbeat": "heartbeat", "stream-write": "Stream message"}  # counted per attempt
CANNOT = "it can neither heartbeat nor write to a Stream"


class InjectedError(Exception):
    """The transient error `--fail STEP[:N]` raises in an attempt."""


@dataclass
class CrashSpec:
    point: str
    count: int = 1
    step: str | None = None

    @property
    def text(self) -> str:
        """As the user writes it (heartbeat:2@AwaitJob)."""
        count = f":{self.count}" if self.count != 1 or self.point in OUTPUT_POINTS else ""
        return f"{self.point}{count}" + (f"@{self.step}" if self.step else "")

    @classmethod
    def parse(cls, text: str) -> CrashSpec:
        spec, _, step = text.partition("@")
        point, _, n = spec.partition(":")
        if point not in CRASH_POINTS:
            raise ValueError(f"unknown crash point {point!r}; points: {', '.join(CRASH_POINTS)}")
        try:
            count = int(n) if n else 1
        except ValueError:
            raise ValueError(f"crash point count must be a number: {text!r}") from None
        if count < 1:
            raise ValueError(f"crash point count must be at least 1: {text!r}")
        return cls(point, count, step or None)


def _step_and_n(text: str, what: str, default: int) -> tuple[str, int]:
    step, _, n = text.partition(":")
    if not step:
        raise ValueError(f"{what} expects STEP[:N], got {text!r}")
    try:
        count = int(n) if n else default
    except ValueError:
        raise ValueError(f"{what} expects STEP[:N] with a number, got {text!r}") from None
    if count < 1:
        raise ValueError(f"{what} expects STEP[:N] with N at least 1, got {text!r}")
    return step, count


@dataclass
class Faults:
    crash: CrashSpec | None = None
    stall: tuple[str, int] | None = None      # step type, attempt to stall
    fail: tuple[str, int] | None = None       # step type, first N attempts fail
    on_crash: Callable[[str], None] | None = None  # prints the last line before exiting
    _seen: dict[str, int] = field(default_factory=dict)
    _most: dict[str, int] = field(default_factory=dict)  # output point -> the most one attempt reached
    _attempts: dict[str, int] = field(default_factory=dict)  # step type -> the highest attempt started
    _stalled: bool = False
    _failed: int = 0

    @classmethod
    def from_options(cls, crash_at: str | None = None, stall: str | None = None,
                     fail: str | None = None) -> Faults:
        return cls(
            crash=CrashSpec.parse(crash_at) if crash_at else None,
            stall=_step_and_n(stall, "--stall", 1) if stall else None,
            fail=_step_and_n(fail, "--fail", 1) if fail else None,
        )

    def check(self, definition: FlowDefinition) -> None:
        """Refuse (ValueError) a fault that cannot happen in this flow: one aimed at a step it does
        not have, a heartbeat or Stream point no step of it can reach, a stall of an attempt past
        the step's limit. Silently ignored, it would read as a run that survived the fault."""
        steps = definition.steps
        named = [("--stall", self.stall[0] if self.stall else None), ("--fail", self.fail[0] if self.fail else None),
                 ("--crash-at", self.crash.step if self.crash else None)]
        for flag, step in named:
            if step is not None and step not in steps:
                raise ValueError(f"{flag}: the flow has no step {step!r}; its steps: {', '.join(steps)}")
        c = self.crash
        if c is not None and c.point in OUTPUT_POINTS:
            self._check_output_point(c, definition)
        if self.stall is not None:
            step, attempt = self.stall
            limit = _attempt_limit(steps[step])
            if limit and attempt > limit:
                raise ValueError(f"--stall {step}:{attempt}: {step} runs at most {limit} attempt"
                                 f"{'s' if limit != 1 else ''} per method (its retry policy's maximum_attempts)")

    def _check_output_point(self, c: CrashSpec, definition: FlowDefinition) -> None:
        flag = f"--crash-at {c.point}"
        if c.point == "stream-write" and not definition.streams:
            raise ValueError(f"{flag}: flow {definition.flow_type} declares no Stream: it never writes a message")
        able = [name for name, spec in definition.steps.items() if spec.handler_kind != "sync"]
        if c.step is not None and c.step not in able:
            raise ValueError(f"{flag}@{c.step}: {c.step}'s execute is a plain sync handler: {CANNOT} "
                             "(a generator step yields its frames, an async step awaits them)")
        if not able:
            raise ValueError(f"{flag}: every step of flow {definition.flow_type} is a plain sync handler: "
                             f"{CANNOT}")

    def unfired(self) -> list[str]:
        """What was injected but never happened in this process, one line each (a crash that had
        happened would have ended it)."""
        out: list[str] = []
        c = self.crash
        if c is not None:
            where = f" of {c.step}" if c.step else ""
            if c.point in OUTPUT_POINTS:
                most = self._most.get(c.point, 0)
                noun = OUTPUT_POINTS[c.point]
                why = (f"no attempt{where} committed a {noun}" if not most else
                       f"the attempts{where} committed at most {most} {noun}{'s' if most != 1 else ''} each")
            else:
                seen = self._seen.get(f"{c.point}@{c.step or ''}", 0)
                why = f"the run reached {c.point}{where} {seen} time{'s' if seen != 1 else ''}"
            out.append(f"--crash-at {c.text} never fired: {why}")
        if self.stall is not None and not self._stalled:
            step, attempt = self.stall
            out.append(f"--stall {step}:{attempt} never fired: {_reached(step, self._attempts.get(step, 0))}")
        if self.fail is not None and self._failed < self.fail[1]:
            step, n = self.fail
            out.append(f"--fail {step}:{n} failed {self._failed} of {n} attempts: "
                       f"{_reached(step, self._attempts.get(step, 0))}")
        return out

    def should_stall(self, step_type: str, attempt: int) -> bool:
        self._attempt(step_type, attempt)
        stall = self.stall is not None and self.stall == (step_type, attempt)
        self._stalled = self._stalled or stall
        return stall

    def should_fail(self, step_type: str, attempt: int) -> bool:
        self._attempt(step_type, attempt)
        fail = self.fail is not None and self.fail[0] == step_type and attempt <= self.fail[1]
        self._failed += fail
        return fail

    def _attempt(self, step_type: str, attempt: int) -> None:
        self._attempts[step_type] = max(self._attempts.get(step_type, 0), attempt)

    def hit(self, point: str, step_type: str, count: int = 1, where: Callable[[], str] | str = "") -> None:
        """Called by the engine at each crash point; exits abruptly when it matches. `where`
        (what the crash message names) may be a function: only called when it crashes."""
        c = self.crash
        if c is None or c.point != point or (c.step and c.step != step_type):
            return
        if point in OUTPUT_POINTS:
            self._most[point] = max(self._most.get(point, 0), count)
            if count < c.count:  # not `!=`: heartbeats committed together may step over N
                return
        else:
            key = f"{point}@{c.step or ''}"
            self._seen[key] = self._seen.get(key, 0) + 1
            if self._seen[key] != c.count:
                return
        self.crash_now(f"crash injected at {point} ({where if isinstance(where, str) else where()})")

    def crash_now(self, message: str) -> None:
        if self.on_crash is not None:
            self.on_crash(message)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(CRASH_EXIT_CODE)


def _attempt_limit(spec: StepSpec) -> int:
    """The most attempts any method of a step may run (0: unlimited)."""
    opts = spec.options()
    limits = [opts.retry_policy().maximum_attempts]
    if spec.has_wait_for:
        limits.append((opts.wait_for_retry or RetryPolicy()).resolved().maximum_attempts)
    return 0 if 0 in limits else max(limits)


def _reached(step: str, attempt: int) -> str:
    if not attempt:
        return f"no attempt of {step} ran here"
    return f"{step} got no further than attempt {attempt} here"
