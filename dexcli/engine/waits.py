"""A step's Wait, as persisted and as evaluated. Pure: no database, no clock of its own.

`persist` turns the Wait a `wait_for` returned into its JSON form, with each timer's absolute
firing time (whole seconds, as a Dex server fixes it). `evaluate` decides, from the queued
message counts and `now`, whether the wait is ready and what it selects and consumes:

  all_of               every condition is ready; all of them are selected
  any_of               the first ready condition in canonical order (Timers, then Channels,
                       then SubFlows, each in argument order) is selected; only it consumes messages
  any_combination_of   the first combination (argument order) whose conditions are all ready
  skip_immediately     ready at once, nothing selected

A timer is ready once its firing time has passed or it was skipped. A channel condition is
ready once `at_least` messages are queued (none: at once) and then takes the queued messages
up to `at_most` (none: all). Conditions of one group on the same queue count in order. A
SubFlow condition is ready once its child has ended (its `result`, written into the wait by
the child's close or by the start that found it ended: dexcli.engine.transitions.subflows);
its `subFlowIndex` counts SubFlows only, and one SubFlow named in several combinations (by its
condition id) is one condition, one child.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from dexcli.engine.wait_kinds import CHANNEL as CHANNEL
from dexcli.engine.wait_kinds import SUBFLOW as SUBFLOW
from dexcli.engine.wait_kinds import TIMER as TIMER
from dexcli.sdk.channels import Channel, ChannelMap, physical_name
from dexcli.sdk.conditions import (
    ChannelCondition,
    Condition,
    SubFlowCondition,
    TimerCondition,
    Wait,
    WaitKind,
)
from dexcli.sdk.errors import InvalidStepResultError
from dexcli.sdk.flow import Flow


@dataclass(frozen=True, slots=True)
class Selection:
    """A ready wait: the conditions selected, what each selected channel condition takes
    (index -> count), and which timers had fired (by timer index)."""

    selected: tuple[int, ...]
    takes: dict[int, int]
    timers_fired: tuple[bool, ...]


@dataclass
class _Flat:
    conditions: list[dict[str, Any]] = field(default_factory=list)
    combinations: list[list[int]] = field(default_factory=list)
    timers: int = 0
    subflows: list[SubFlowCondition] = field(default_factory=list)  # by subFlowIndex
    subflow_ids: dict[str, int] = field(default_factory=dict)  # condition id -> its index


def persist(wait: Any, channels: dict[str, Any], now: float,
            subflows: list[SubFlowCondition] | None = None) -> dict[str, Any]:
    """The JSON form of a Wait returned at `now`; InvalidStepResultError when it is not one
    this flow can wait on. Its SubFlow conditions are appended to `subflows` (by subFlowIndex):
    their children are started by the engine when the wait commits."""
    if not isinstance(wait, Wait):
        raise InvalidStepResultError(f"wait_for returned {type(wait).__name__}, not a Wait")
    flat = _Flat()
    if wait.kind is WaitKind.ANY_COMBINATION_OF:
        if not wait.combinations:
            raise InvalidStepResultError("Wait.any_combination_of needs at least one ConditionCombination")
        for combo in wait.combinations:
            if not combo.conditions:
                raise InvalidStepResultError("a ConditionCombination needs at least one condition")
            flat.combinations.append([_add(flat, c, channels, now) for c in combo.conditions])
        ids = [c["conditionId"] for c in flat.conditions]
        if any(not i for i in ids):
            raise InvalidStepResultError("every condition of any_combination_of needs a condition_id")
    else:
        if wait.kind is not WaitKind.SKIP_IMMEDIATELY and not wait.conditions:
            raise InvalidStepResultError(f"Wait.{wait.kind.value} needs at least one condition")
        for c in wait.conditions:
            _add(flat, c, channels, now)
    _check_ids(flat, wait.kind)
    if subflows is not None:
        subflows.extend(flat.subflows)
    out: dict[str, Any] = {"kind": wait.kind.value, "conditions": flat.conditions}
    if flat.combinations:
        out["combinations"] = flat.combinations
    return out


def _check_ids(flat: _Flat, kind: WaitKind) -> None:
    seen: dict[str, dict[str, Any]] = {}
    for c in flat.conditions:
        cid = c["conditionId"]
        if cid is None:
            continue
        same = seen.get(cid)
        if same is not None and not (kind is WaitKind.ANY_COMBINATION_OF and _same(same, c)):
            raise InvalidStepResultError(f"condition id {cid!r} is used twice in one Wait")
        seen[cid] = c


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    keys = ("kind", "channel", "instance", "atLeast", "atMost", "duration")
    return all(a.get(k) == b.get(k) for k in keys)


def _add(flat: _Flat, c: Condition, channels: dict[str, Any], now: float) -> int:
    index = len(flat.conditions)
    if isinstance(c, TimerCondition):
        seconds = c.duration.total_seconds()
        if not seconds.is_integer():  # SDK 1.23 refuses it as it encodes the Wait: the attempt fails
            raise InvalidStepResultError(f"Timer.by_duration({seconds:g} s): timer duration must use whole seconds")
        # whole seconds, as a Dex server fixes it: the commit time rounded down, plus the duration
        flat.conditions.append({"index": index, "kind": TIMER, "conditionId": c.condition_id,
                                "timerIndex": flat.timers, "duration": seconds,
                                "firingTime": math.floor(now) + seconds, "skipped": False})
        flat.timers += 1
    elif isinstance(c, ChannelCondition):
        flat.conditions.append(_channel(index, c, channels))
    elif isinstance(c, SubFlowCondition):
        known = flat.subflow_ids.get(c.condition_id) if c.condition_id is not None else None
        if known is not None:  # the same SubFlow in another combination: one child
            return known
        flow = c.flow
        if not isinstance(flow, Flow):
            what = f"the class {flow.__name__}" if isinstance(flow, type) else type(flow).__name__
            raise InvalidStepResultError(f"SubFlow.run needs the target Flow instance, not {what}")
        if c.condition_id is not None:
            flat.subflow_ids[c.condition_id] = index
        flat.conditions.append({"index": index, "kind": SUBFLOW, "conditionId": c.condition_id,
                                "subFlowIndex": len(flat.subflows), "flowType": flow.get_flow_type(),
                                "flowId": None, "result": None})
        flat.subflows.append(c)
    else:
        raise InvalidStepResultError(f"{type(c).__name__} is not a Wait condition")
    return index


def _channel(index: int, c: ChannelCondition, channels: dict[str, Any]) -> dict[str, Any]:
    ch = c.channel
    declared = channels.get(getattr(ch, "name", ""))
    if declared is None or not isinstance(ch, (Channel, ChannelMap)):
        raise InvalidStepResultError(f"channel {getattr(ch, 'name', ch)!r} is not in the flow's PersistenceSchema")
    if isinstance(ch, ChannelMap) and c.instance is None:
        raise InvalidStepResultError(f"ChannelMap {ch.name!r} condition needs an instance")
    return {"index": index, "kind": CHANNEL, "conditionId": c.condition_id, "channel": ch.name,
            "instance": c.instance, "queue": physical_name(ch.name, c.instance),
            "atLeast": c.at_least, "atMost": c.at_most}


# ------------------------------------------------------------------------------ evaluate ----
def timer_ready(c: dict[str, Any], now: float) -> bool:
    return bool(c["skipped"]) or now >= c["firingTime"]


def subflow_ready(c: dict[str, Any]) -> bool:
    """A SubFlow condition is ready once its child has ended (however it ended)."""
    return c.get("result") is not None


def _group(conds: list[dict[str, Any]], counts: dict[str, int], now: float) -> dict[int, int] | None:
    """Whether every condition of a group is ready together; the counts its channels take."""
    used: dict[str, int] = {}
    takes: dict[int, int] = {}
    for c in conds:
        if c["kind"] == TIMER:
            if not timer_ready(c, now):
                return None
            continue
        if c["kind"] == SUBFLOW:
            if not subflow_ready(c):
                return None
            continue
        queue = c["queue"]
        available = counts.get(queue, 0) - used.get(queue, 0)
        if available < (c["atLeast"] or 0):
            return None
        take = available if c["atMost"] is None else min(available, c["atMost"])
        used[queue] = used.get(queue, 0) + take
        takes[c["index"]] = take
    return takes


def evaluate(wait: dict[str, Any], counts: dict[str, int], now: float) -> Selection | None:
    """The selection of a ready wait, or None while it is not ready."""
    conds: list[dict[str, Any]] = wait["conditions"]
    fired = tuple(timer_ready(c, now) for c in conds if c["kind"] == TIMER)
    kind = WaitKind(wait["kind"])
    if kind is WaitKind.SKIP_IMMEDIATELY:
        return Selection((), {}, fired)
    if kind is WaitKind.ALL_OF:
        takes = _group(conds, counts, now)
        return None if takes is None else Selection(tuple(c["index"] for c in conds), takes, fired)
    if kind is WaitKind.ANY_OF:
        ordered = [c for kind in (TIMER, CHANNEL, SUBFLOW) for c in conds if c["kind"] == kind]
        for c in ordered:
            takes = _group([c], counts, now)
            if takes is not None:
                return Selection((c["index"],), takes, fired)
        return None
    for combo in wait["combinations"]:
        members = [conds[i] for i in combo]
        takes = _group(members, counts, now)
        if takes is not None:
            return Selection(tuple(combo), takes, fired)
    return None


def next_timer(wait: dict[str, Any], now: float) -> float | None:
    """When a timer of this wait fires next (after `now`), or None."""
    times = [c["firingTime"] for c in wait["conditions"]
             if c["kind"] == TIMER and not c["skipped"] and c["firingTime"] > now]
    return min(times) if times else None


def queues(wait: dict[str, Any]) -> list[str]:
    return sorted({c["queue"] for c in wait["conditions"] if c["kind"] == CHANNEL})


def subflow_conditions(wait: dict[str, Any]) -> list[dict[str, Any]]:
    """The SubFlow conditions of a persisted wait, by subFlowIndex."""
    return [c for c in wait["conditions"] if c["kind"] == SUBFLOW]


def find_timer(wait: dict[str, Any], condition_id: str | None, index: int | None) -> dict[str, Any] | None:
    timers = [c for c in wait["conditions"] if c["kind"] == TIMER]
    if condition_id is not None:
        return next((c for c in timers if c["conditionId"] == condition_id), None)
    return timers[index] if index is not None and 0 <= index < len(timers) else None
