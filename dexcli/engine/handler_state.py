"""What step contexts and RPC contexts share about a flow's declared state: the check that a
Channel or Attribute belongs to the flow, staging a publish, and a ChannelMap's instances."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from dexcli.sdk.channels import physical_name
from dexcli.sdk.codec import encode, from_jsonable, to_jsonable
from dexcli.sdk.errors import FlowCodeError


def declared(found: dict[str, Any], item: Any, flow_type: str, kind: str) -> Any:
    """The flow's own definition of a Channel/ChannelMap or Attribute/AttributeMap `item`;
    FlowCodeError when the flow's PersistenceSchema does not declare it (retrying cannot help)."""
    definition = found.get(getattr(item, "name", ""))
    if definition is None or type(definition) is not type(item):
        raise FlowCodeError(f"{kind} {getattr(item, 'name', item)!r} is not in {flow_type}'s PersistenceSchema")
    return definition


def publish(publishes: list[tuple[str, str]], channel: Any, instance: str | None, value: Any) -> None:
    """Stage one message (checked against the channel's type) for the handler's commit."""
    text = encode(from_jsonable(to_jsonable(value), channel.value_type))
    publishes.append((physical_name(channel.name, instance), text))


def map_instances(counts: dict[str, int], name: str) -> list[str]:
    """The instances of ChannelMap `name` with pending messages, from queue sizes."""
    prefix = name + "/"
    return sorted(unquote(q[len(prefix):]) for q, n in counts.items() if n and q.startswith(prefix))
