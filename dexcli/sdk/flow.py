"""Flow, Step, StepList, PersistenceSchema: the shapes a flow author writes."""

from __future__ import annotations

from abc import ABC
from typing import Any, Generic, TypeVar

from dexcli.sdk.options import StepOptions

InputT = TypeVar("InputT")
StartT = TypeVar("StartT")


class Step(Generic[InputT], ABC):
    """One step of a flow. Override `execute`; optionally `wait_for`, options, type name.

    `execute` takes one of three forms:
      - `def execute(self, context: Context, input: T) -> StepDecision`
      - `def execute(self, context: Context, input: T) -> Generator[StepOutput, None, StepDecision]`
        (yield `heartbeat(v)` and `stream.write(context, v)` frames, return the decision)
      - `async def execute(self, context: AsyncContext, input: T) -> StepDecision`
    """

    def execute(self, context: Any, input: InputT) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError(f"{type(self).__name__} must define execute")

    def wait_for(self, context: Any, input: InputT) -> Any:  # pragma: no cover - optional
        raise NotImplementedError

    def get_step_type(self) -> str:
        return type(self).__name__

    def get_step_options(self) -> StepOptions | None:
        return None


class StepList(Generic[StartT]):
    """The steps of a flow: at most one start step, then the others."""

    def __init__(self, start: Step[Any] | None, others: tuple[Step[Any], ...] = ()) -> None:
        self.start = start
        self.others = tuple(others)

    @classmethod
    def start_step(cls, step: Step[Any]) -> StepList[Any]:
        return cls(step)

    @classmethod
    def empty(cls) -> StepList[Any]:
        return cls(None)

    @classmethod
    def without_start_step(cls, *steps: Step[Any]) -> StepList[Any]:
        return cls(None, steps)

    def other_steps(self, *steps: Step[Any]) -> StepList[StartT]:
        return StepList(self.start, self.others + tuple(steps))

    def all_steps(self) -> list[Step[Any]]:
        return ([self.start] if self.start is not None else []) + list(self.others)


class PersistenceSchema:
    """Attributes, Channels and Streams a flow declares. Names are unique across kinds."""

    def __init__(self, attributes: tuple[Any, ...] = (), channels: tuple[Any, ...] = (),
                 streams: tuple[Any, ...] = ()) -> None:
        self.attributes = tuple(attributes)
        self.channels = tuple(channels)
        self.streams = tuple(streams)

    @classmethod
    def of(cls, *definitions: Any) -> PersistenceSchema:
        from dexcli.sdk.attributes import Attribute, AttributeMap
        from dexcli.sdk.channels import Channel, ChannelMap
        from dexcli.sdk.stream import Stream

        attrs, chans, streams = [], [], []
        for d in definitions:
            if isinstance(d, Stream):
                streams.append(d)
            elif isinstance(d, (Attribute, AttributeMap)):
                attrs.append(d)
            elif isinstance(d, (Channel, ChannelMap)):
                chans.append(d)
            else:
                raise TypeError(f"PersistenceSchema.of got {type(d).__name__}, not a definition")
        return cls(tuple(attrs), tuple(chans), tuple(streams))

    @classmethod
    def empty(cls) -> PersistenceSchema:
        return cls()

    def all(self) -> tuple[Any, ...]:
        return self.attributes + self.channels + self.streams


class Flow(Generic[StartT], ABC):
    """A flow definition. Register one instance; its type name defaults to the class name."""

    def get_flow_type(self) -> str:
        return type(self).__name__

    def get_steps(self) -> StepList[StartT]:
        return StepList.empty()

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema()

    def handle_timeout(self, context: Any) -> Any:  # pragma: no cover - optional
        """Override to handle the flow's timeout (StartFlowOptions(timeout=...)): take the
        Context, return a StepDecision. The registry checks its signature."""
        raise NotImplementedError("Flow has no timeout handler")
