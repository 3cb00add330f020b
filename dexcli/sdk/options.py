"""StepOptions, RetryPolicy and the enums that go with them (Dex names and defaults)."""

from __future__ import annotations

import dataclasses
import enum
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
    DEFAULT = "DEFAULT"
    SYNC = "SYNC"
    ASYNC = "ASYNC"


class WaitForFailurePolicy(enum.Enum):
    FAIL_FLOW = "FAIL_FLOW"
    PROCEED = "PROCEED"


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

    def resolved(self) -> "RetryPolicy":
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
        raw = p.initial_interval.total_seconds() * p.backoff_coefficient ** (attempt - 1)
        return min(raw, p.maximum_interval.total_seconds())


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
    execute_failure_step: Any = field(default=None, compare=False)
    execute_failure_step_options: "StepOptions | None" = field(default=None, compare=False)

    def on_execute_failure_proceed_to(
        self, step: Any, options: "StepOptions | None" = None
    ) -> "StepOptions":
        """A copy whose Execute, once retries are exhausted or a limit expires, moves to `step`."""
        return dataclasses.replace(
            self, execute_failure_step=step, execute_failure_step_options=options
        )

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
