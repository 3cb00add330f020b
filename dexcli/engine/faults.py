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

CRASH_POINTS = {
    "attempt-start": "an attempt was leased and recorded; its handler has not run",
    "heartbeat": "right after the N-th heartbeat of an attempt was committed (heartbeat:N, default 1)",
    "stream-write": "right after the N-th Stream message of an attempt was committed (stream-write:N)",
    "before-commit": "a handler returned its decision; the transaction has not run",
    "after-commit": "a step's decision and its next steps were committed (their first attempts leased here)",
}
CRASH_EXIT_CODE = 137


class InjectedError(Exception):
    """The transient error `--fail STEP[:N]` raises in an attempt."""


@dataclass
class CrashSpec:
    point: str
    count: int = 1
    step: str | None = None

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

    @classmethod
    def from_options(cls, crash_at: str | None = None, stall: str | None = None,
                     fail: str | None = None) -> Faults:
        return cls(
            crash=CrashSpec.parse(crash_at) if crash_at else None,
            stall=_step_and_n(stall, "--stall", 1) if stall else None,
            fail=_step_and_n(fail, "--fail", 1) if fail else None,
        )

    def check_steps(self, step_types: list[str]) -> None:
        """Every step a fault names must be one of the flow's (ValueError naming them): a fault
        aimed at no step would be silently ignored."""
        named = [("--stall", self.stall[0] if self.stall else None), ("--fail", self.fail[0] if self.fail else None),
                 ("--crash-at", self.crash.step if self.crash else None)]
        for flag, step in named:
            if step is not None and step not in step_types:
                raise ValueError(f"{flag}: the flow has no step {step!r}; its steps: {', '.join(step_types)}")

    def should_stall(self, step_type: str, attempt: int) -> bool:
        return self.stall is not None and self.stall == (step_type, attempt)

    def should_fail(self, step_type: str, attempt: int) -> bool:
        return self.fail is not None and self.fail[0] == step_type and attempt <= self.fail[1]

    def hit(self, point: str, step_type: str, count: int = 1, where: Callable[[], str] | str = "") -> None:
        """Called by the engine at each crash point; exits abruptly when it matches. `where`
        (what the crash message names) may be a function: only called when it crashes."""
        c = self.crash
        if c is None or c.point != point or (c.step and c.step != step_type):
            return
        if point in ("heartbeat", "stream-write"):
            if count != c.count:
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
