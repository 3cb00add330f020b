"""StepOptions, RetryPolicy and the enums that go with them (Dex names and defaults)."""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

DEFAULT_METHOD_TIMEOUT = timedelta(hours=2)
DEFAULT_HEARTBEAT_TIMEOUT = timedelta(seconds=60)
MIN_HEARTBEAT_TIMEOUT = timedelta(seconds=10)
DEFAULT_INITIAL_INTERVAL = timedelta(seconds=1)
DEFAULT_BACKOFF_COEFFICIENT = 2.0
DEFAULT_MAXIMUM_INTERVAL = timedelta(seconds=100)
DEFAULT_TOTAL_DURATION = timedelta(hours=4)


class StepDurability(enum.Enum):
    DEFAULT = "default"
    SYNC = "sync"
    ASYNC = "async"


class WaitForFailurePolicy(enum.Enum):
    FAIL_FLOW = "fail_flow"
    PROCEED = "proceed"


@dataclass(frozen=True)
class RetryPolicy:
    """Retry policy of one method. Zero/None fields take Dex's defaults.

    delay(n) = initial_interval * backoff_coefficient ** (n - 1), capped by maximum_interval.
    maximum_attempts counts the first attempt; 0 means unlimited. total_duration is counted
    from when the first attempt was scheduled and covers every retry.
    """

    initial_interval: timedelta | None = None
    backoff_coefficient: float = 0.0
    maximum_interval: timedelta | None = None
    maximum_attempts: int = 0
    total_duration: timedelta | None = None

    def resolved(self) -> RetryPolicy:
        return RetryPolicy(
            initial_interval=self.initial_interval or DEFAULT_INITIAL_INTERVAL,
            backoff_coefficient=self.backoff_coefficient or DEFAULT_BACKOFF_COEFFICIENT,
            maximum_interval=self.maximum_interval or DEFAULT_MAXIMUM_INTERVAL,
            maximum_attempts=self.maximum_attempts or 0,
            total_duration=self.total_duration or DEFAULT_TOTAL_DURATION,
        )

    def delay_after(self, attempt: int) -> float:
        """Seconds to wait after failed attempt `attempt` (1-based) before the next one."""
        p = self.resolved()
        assert p.initial_interval is not None and p.maximum_interval is not None
        return backoff_delay(p.initial_interval.total_seconds(), p.backoff_coefficient,
                             p.maximum_interval.total_seconds(), attempt)


def backoff_delay(initial: float, coefficient: float, maximum: float, attempt: int) -> float:
    """The backoff rule: initial * coefficient^(attempt-1), capped at maximum."""
    return float(min(initial * coefficient ** (attempt - 1), maximum))


def check_heartbeat_timeout(hb: timedelta | None, where: str) -> str | None:
    """The problem with a heartbeat timeout, if any: Dex refuses one under 10 s (0 = default)."""
    if hb is not None and 0 < hb.total_seconds() < MIN_HEARTBEAT_TIMEOUT.total_seconds():
        return f"{where}: heartbeat_timeout {hb.total_seconds():g} s is under the 10 s minimum"
    return None


def fits_seconds32(seconds: float) -> bool:
    """Whole seconds within int32: the only durations SDK 1.23 sends (`_seconds32` refuses any
    other: "duration must be whole seconds within int32")."""
    return 0 <= seconds <= 2**31 - 1 and seconds.is_integer()


def whole_seconds_problem(value: timedelta | None, name: str) -> str | None:
    """The problem with an option's duration, if any: negative, or not whole seconds within int32."""
    if value is None:
        return None
    seconds = value.total_seconds()
    if seconds < 0:
        return f"{name} must not be negative"
    if not fits_seconds32(seconds):
        shown = f"{seconds:.0f}" if seconds.is_integer() else f"{seconds:g}"
        return f"{name} {shown} s: a duration must be whole seconds within int32 (as Dex sends it)"
    return None


def retry_problems(policy: RetryPolicy | None, name: str) -> list[str]:
    """What Dex refuses in a retry policy: durations that are not whole seconds, and (as the
    server's Temporal does, on the policy with its defaults filled in) a backoff coefficient
    under 1 or a maximum interval under the initial one."""
    if policy is None:
        return []
    found = [p for p in (whole_seconds_problem(getattr(policy, f), f"{name}.{f}")
                         for f in ("initial_interval", "maximum_interval", "total_duration")) if p]
    r = policy.resolved()
    assert r.initial_interval is not None and r.maximum_interval is not None
    if r.backoff_coefficient < 1:
        found.append(f"{name}.backoff_coefficient {r.backoff_coefficient:g} is less than 1")
    if r.maximum_interval < r.initial_interval:
        default = "" if policy.maximum_interval else " (the default)"
        found.append(f"{name}.maximum_interval {r.maximum_interval.total_seconds():g} s{default} is less than "
                     f"initial_interval {r.initial_interval.total_seconds():g} s")
    return found


def option_problems(opts: StepOptions, where: str) -> list[str]:
    """Everything Dex refuses in one StepOptions, each a line naming `where`: a heartbeat timeout
    under 10 s, a duration that is not whole seconds, an invalid retry policy."""
    found = [p for p in (check_heartbeat_timeout(opts.heartbeat_timeout, where),) if p]
    for name in ("wait_for_method_timeout", "execute_method_timeout", "heartbeat_timeout"):
        problem = whole_seconds_problem(getattr(opts, name), name)
        if problem:
            found.append(f"{where}: {problem}")
    for name in ("wait_for_retry", "execute_retry"):
        found += [f"{where}: {p}" for p in retry_problems(getattr(opts, name), name)]
    return found


@dataclass(frozen=True)
class StepOptions:
    """Per-step options. None/DEFAULT inherit Dex's defaults."""

    wait_for_method_timeout: timedelta | None = None
    execute_method_timeout: timedelta | None = None
    heartbeat_timeout: timedelta | None = None
    wait_for_retry: RetryPolicy | None = None
    execute_retry: RetryPolicy | None = None
    wait_for_failure: WaitForFailurePolicy = WaitForFailurePolicy.FAIL_FLOW
    wait_for_durability: StepDurability = StepDurability.DEFAULT
    execute_durability: StepDurability = StepDurability.DEFAULT
    wait_for_lock_attributes: tuple[Any, ...] = ()
    execute_lock_attributes: tuple[Any, ...] = ()
    wait_for_load_attribute_maps: tuple[Any, ...] = ()
    wait_for_load_attribute_map_instances: tuple[Any, ...] = ()
    wait_for_load_channels: tuple[Any, ...] = ()
    wait_for_load_channel_maps: tuple[Any, ...] = ()
    wait_for_load_channel_map_instances: tuple[Any, ...] = ()
    execute_load_attribute_maps: tuple[Any, ...] = ()
    execute_load_attribute_map_instances: tuple[Any, ...] = ()
    execute_load_channels: tuple[Any, ...] = ()
    execute_load_channel_maps: tuple[Any, ...] = ()
    execute_load_channel_map_instances: tuple[Any, ...] = ()
    # private, as the official SDK's: set them with on_execute_failure_proceed_to
    _execute_failure_target: Any = field(default=None, compare=False)
    _execute_failure_options: StepOptions | None = field(default=None, compare=False)

    def on_execute_failure_proceed_to(
        self, step: type[Any], options: StepOptions | None = None
    ) -> StepOptions:
        """A copy whose Execute, once retries are exhausted or a limit expires, moves to the
        registered Step class `step` (with `options`, else that step's own)."""
        return dataclasses.replace(self, _execute_failure_target=step, _execute_failure_options=options)

    @property
    def execute_failure_step(self) -> Any:
        """The Step class execute failures are routed to, or None."""
        return self._execute_failure_target

    @property
    def execute_failure_step_options(self) -> StepOptions | None:
        return self._execute_failure_options

    # --- resolved views the engine uses -------------------------------------------------
    def method_timeout_seconds(self) -> float:
        return (self.execute_method_timeout or DEFAULT_METHOD_TIMEOUT).total_seconds()

    def heartbeat_timeout_seconds(self) -> float:
        hb = self.heartbeat_timeout
        if hb is None or hb.total_seconds() == 0:
            hb = DEFAULT_HEARTBEAT_TIMEOUT
        return hb.total_seconds()

    def retry_policy(self) -> RetryPolicy:
        return (self.execute_retry or RetryPolicy()).resolved()


@dataclass(frozen=True)
class ResolvedOptions:
    """StepOptions with every default filled in: the limits the engine enforces on one step
    execution, stored with it. Times are seconds. `to_json`/`from_json` are the one encoding
    (camelCase keys, the shape `dex inspect --json` shows under "options")."""

    method_timeout: float
    heartbeat_timeout: float
    initial_interval: float
    backoff_coefficient: float
    maximum_interval: float
    maximum_attempts: int  # counts the first attempt; 0 = unlimited
    total_duration: float
    durability: str  # the StepDurability member's name: "DEFAULT", "SYNC", "ASYNC" (stored, and in the JSON)
    failure_step: str | None = None  # the execute-failure route's step type
    failure_step_options: ResolvedOptions | None = None
    wait_for_failure: str | None = None  # wait_for options only: "FAIL_FLOW" or "PROCEED"
    locks: tuple[str, ...] = ()  # attribute lock keys the method holds while an attempt runs
    loads: tuple[str, ...] = ()  # AttributeMaps (`name/`) and instances it loads into its snapshot

    def delay_after(self, attempt: int) -> float:
        return backoff_delay(self.initial_interval, self.backoff_coefficient, self.maximum_interval, attempt)

    def attempts_left(self, attempt: int) -> bool:
        return self.maximum_attempts == 0 or attempt < self.maximum_attempts

    def as_dict(self) -> dict[str, Any]:
        return {
            "methodTimeout": self.method_timeout, "heartbeatTimeout": self.heartbeat_timeout,
            "initialInterval": self.initial_interval, "backoffCoefficient": self.backoff_coefficient,
            "maximumInterval": self.maximum_interval, "maximumAttempts": self.maximum_attempts,
            "totalDuration": self.total_duration, "durability": self.durability,
            # each of the rest only when set (from_dict reads an absent one as unset)
            **({} if self.failure_step is None else {"failureStep": self.failure_step}),
            **({} if self.failure_step_options is None else
               {"failureStepOptions": self.failure_step_options.as_dict()}),
            **({} if self.wait_for_failure is None else {"waitForFailure": self.wait_for_failure}),
            **({"locks": list(self.locks)} if self.locks else {}),
            **({"loads": list(self.loads)} if self.loads else {}),
        }

    def to_json(self) -> str:
        """The one encoding, kept on the instance once made (the cache below hashes every
        field of it at each call)."""
        text: str | None = self.__dict__.get("_json")
        if text is None:
            text = _to_json(self)
            object.__setattr__(self, "_json", text)  # not a field: equality and replace() ignore it
        return text

    @staticmethod
    def from_json(text: str) -> ResolvedOptions:
        return _from_json(text)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> ResolvedOptions:
        nested = d.get("failureStepOptions")
        return ResolvedOptions(
            d["methodTimeout"], d["heartbeatTimeout"], d["initialInterval"], d["backoffCoefficient"],
            d["maximumInterval"], d["maximumAttempts"], d["totalDuration"], d.get("durability", "DEFAULT"),
            d.get("failureStep"), None if nested is None else ResolvedOptions.from_dict(nested),
            d.get("waitForFailure"), tuple(d.get("locks", ())), tuple(d.get("loads", ())))


@functools.lru_cache(maxsize=1024)
def _to_json(opts: ResolvedOptions) -> str:
    return json.dumps(opts.as_dict(), separators=(",", ":"))  # compact: stored with every step execution


@functools.lru_cache(maxsize=1024)
def _from_json(text: str) -> ResolvedOptions:
    return ResolvedOptions.from_dict(json.loads(text))


def resolve_options(opts: StepOptions, where: str, failure_step: str | None = None,
                    failure_options: ResolvedOptions | None = None) -> ResolvedOptions:
    """Fill in Dex's defaults. The caller has resolved the execute-failure step to its type
    (and its options, when given). Raises ValueError for options Dex refuses (option_problems)."""
    problems = option_problems(opts, where)
    if problems:
        raise ValueError(problems[0])
    p = opts.retry_policy()
    assert p.initial_interval and p.maximum_interval and p.total_duration
    return ResolvedOptions(
        method_timeout=opts.method_timeout_seconds(), heartbeat_timeout=opts.heartbeat_timeout_seconds(),
        initial_interval=p.initial_interval.total_seconds(), backoff_coefficient=p.backoff_coefficient,
        maximum_interval=p.maximum_interval.total_seconds(), maximum_attempts=p.maximum_attempts,
        total_duration=p.total_duration.total_seconds(), durability=opts.execute_durability.name,
        failure_step=failure_step, failure_step_options=failure_options,
        locks=lock_keys(opts.execute_lock_attributes),
        loads=load_keys(opts.execute_load_attribute_maps, opts.execute_load_attribute_map_instances))


def resolve_wait_options(opts: StepOptions) -> ResolvedOptions:
    """The limits of a step's wait_for method: its own timeout and retry policy (Dex's
    defaults otherwise) and what happens once it is exhausted (FAIL_FLOW or PROCEED). Its
    heartbeat window is the step's heartbeat_timeout, as for execute: the server sets it on the
    wait_for activity too, and a wait_for may yield heartbeats."""
    timeout = (opts.wait_for_method_timeout or DEFAULT_METHOD_TIMEOUT).total_seconds()
    p = (opts.wait_for_retry or RetryPolicy()).resolved()
    assert p.initial_interval and p.maximum_interval and p.total_duration
    return ResolvedOptions(
        method_timeout=timeout, heartbeat_timeout=opts.heartbeat_timeout_seconds(),
        initial_interval=p.initial_interval.total_seconds(),
        backoff_coefficient=p.backoff_coefficient, maximum_interval=p.maximum_interval.total_seconds(),
        maximum_attempts=p.maximum_attempts, total_duration=p.total_duration.total_seconds(),
        durability=opts.wait_for_durability.name, wait_for_failure=opts.wait_for_failure.name,
        locks=lock_keys(opts.wait_for_lock_attributes),
        loads=load_keys(opts.wait_for_load_attribute_maps, opts.wait_for_load_attribute_map_instances))


def lock_keys(locks: tuple[Any, ...]) -> tuple[str, ...]:
    """The physical keys of AttributeLocks, sorted (a fixed order: no lock-order deadlock)."""
    return tuple(sorted({lock.physical_name for lock in locks}))


def load_keys(maps: tuple[Any, ...], instances: tuple[Any, ...]) -> tuple[str, ...]:
    """What a method loads: `name/` for every instance of a map, the physical name of one."""
    return tuple(sorted({f"{m.name}/" for m in maps} | {i.physical_name for i in instances}))
