"""The official SDK's `dex.channel` module: `from dexcli.channel import ...` is what
`from dex.channel import ...` becomes, for the names dex has."""

from dexcli.sdk.channels import Channel as Channel
from dexcli.sdk.channels import ChannelMap as ChannelMap
from dexcli.sdk.channels import ChannelMapLoad as ChannelMapLoad
from dexcli.sdk.channels import ChannelMessage as ChannelMessage

__all__ = ["Channel", "ChannelMap", "ChannelMapLoad", "ChannelMessage"]
