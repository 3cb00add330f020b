"""Channels: durable FIFO queues owned by one flow run. Names and semantics as Dex's SDK.

Publishing stages a message that commits with the handler's result (a step's decision, an
RPC's output); messages may arrive before anyone waits. A wait's channel condition consumes
messages once the wait is ready; `results` reads what this step execution's wait consumed.
The context implements the private hooks these methods call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import quote

from dexcli.sdk.conditions import ChannelCondition, Condition, check_definition_name, check_instance, require_name

ValueT = TypeVar("ValueT")


def physical_name(name: str, instance: str | None) -> str:
    """The queue a channel (and map instance) stands for: `name` or `name/<urlencoded instance>`."""
    return name if instance is None else f"{name}/{quote(check_instance(instance), safe='')}"


@dataclass(frozen=True)
class ChannelMessage(Generic[ValueT]):
    """A pending message and its id (a UUIDv7 given when it was published)."""

    message_id: str
    value: ValueT


@dataclass(frozen=True)
class ChannelMapLoad:
    """One ChannelMap instance whose pending messages an RPC loads."""

    channel_map: ChannelMap[Any]
    instance: str

    @property
    def physical_name(self) -> str:
        return physical_name(self.channel_map.name, self.instance)


@dataclass(frozen=True)
class Channel(Generic[ValueT]):
    """A typed, durable queue of one flow. Declare it in the flow's PersistenceSchema."""

    name: str
    value_type: type[ValueT]

    def __post_init__(self) -> None:
        check_definition_name(self.name)

    def publish(self, context: Any, value: ValueT) -> None:
        """Stage one value; it is appended when the handler's result commits."""
        context._publish_channel(self, None, value)

    def delete(self, context: Any, message_id: str) -> None:
        """Stage the deletion of a pending message (RPC handlers only)."""
        context._delete_channel_message(self, None, require_name(message_id))

    def size(self, context: Any) -> int:
        """The number of queued values when this handler started."""
        return int(context._channel_size(self, None))

    def pending_messages(self, context: Any) -> Sequence[ChannelMessage[ValueT]]:
        """The pending messages an RPC loaded (`@rpc(load_channels=(this,))`), FIFO."""
        return tuple(context._pending_channel_messages(self, None))

    def find_pending_message(self, context: Any, message_id: str) -> ChannelMessage[ValueT] | None:
        wanted = require_name(message_id)
        return next((m for m in self.pending_messages(context) if m.message_id == wanted), None)

    def results(self, context: Any) -> Sequence[ValueT]:
        """The values this step execution's wait consumed from this channel, FIFO (empty if none)."""
        return tuple(context._channel_results(self, None))

    def for_one(self, *, condition_id: str | None = None) -> Condition:
        return self.for_range(at_least=1, at_most=1, condition_id=condition_id)

    def for_n(self, count: int, *, condition_id: str | None = None) -> Condition:
        return self.for_range(at_least=count, at_most=count, condition_id=condition_id)

    def at_least(self, count: int, *, condition_id: str | None = None) -> Condition:
        """Ready once `count` values are queued; then takes every queued value."""
        return self.for_range(at_least=count, condition_id=condition_id)

    def at_most(self, count: int, *, condition_id: str | None = None) -> Condition:
        """Never waits: takes up to `count` values queued when the wait completes (maybe none)."""
        return self.for_range(at_most=count, condition_id=condition_id)

    def for_range(self, *, at_least: int | None = None, at_most: int | None = None,
                  condition_id: str | None = None) -> Condition:
        """Waits for `at_least` values, then takes the queued values up to `at_most`."""
        return ChannelCondition(condition_id=condition_id, channel=self, at_least=at_least, at_most=at_most)


@dataclass(frozen=True)
class ChannelMap(Generic[ValueT]):
    """Keyed channels sharing one type: each instance is an independent queue."""

    name: str
    value_type: type[ValueT]

    def __post_init__(self) -> None:
        check_definition_name(self.name)

    def load_messages(self, instance: str) -> ChannelMapLoad:
        return ChannelMapLoad(self, check_instance(instance))

    def publish(self, context: Any, instance: str, value: ValueT) -> None:
        context._publish_channel(self, check_instance(instance), value)

    def delete(self, context: Any, instance: str, message_id: str) -> None:
        context._delete_channel_message(self, check_instance(instance), require_name(message_id))

    def size(self, context: Any, instance: str) -> int:
        return int(context._channel_size(self, check_instance(instance)))

    def pending_messages(self, context: Any, instance: str) -> Sequence[ChannelMessage[ValueT]]:
        return tuple(context._pending_channel_messages(self, check_instance(instance)))

    def find_pending_message(self, context: Any, instance: str, message_id: str) -> ChannelMessage[ValueT] | None:
        wanted = require_name(message_id)
        return next((m for m in self.pending_messages(context, instance) if m.message_id == wanted), None)

    def get_map_size(self, context: Any) -> int:
        return len(self.get_all_instance_keys(context))

    def get_all_instance_keys(self, context: Any) -> tuple[str, ...]:
        return tuple(context._channel_map_keys(self))

    def results(self, context: Any, instance: str) -> Sequence[ValueT]:
        return tuple(context._channel_results(self, check_instance(instance)))

    def for_one(self, instance: str, *, condition_id: str | None = None) -> Condition:
        return self.for_range(instance, at_least=1, at_most=1, condition_id=condition_id)

    def for_n(self, instance: str, count: int, *, condition_id: str | None = None) -> Condition:
        return self.for_range(instance, at_least=count, at_most=count, condition_id=condition_id)

    def at_least(self, instance: str, count: int, *, condition_id: str | None = None) -> Condition:
        return self.for_range(instance, at_least=count, condition_id=condition_id)

    def at_most(self, instance: str, count: int, *, condition_id: str | None = None) -> Condition:
        return self.for_range(instance, at_most=count, condition_id=condition_id)

    def for_range(self, instance: str, *, at_least: int | None = None, at_most: int | None = None,
                  condition_id: str | None = None) -> Condition:
        return ChannelCondition(condition_id=condition_id, channel=self, instance=check_instance(instance),
                                at_least=at_least, at_most=at_most)
