"""The official SDK's `dex.stream` module: `from dexcli.stream import ...` is what
`from dex.stream import ...` becomes, for the names dex has."""

from dexcli.sdk.stream import AsyncBufferedTextStream as AsyncBufferedTextStream
from dexcli.sdk.stream import BufferedTextStream as BufferedTextStream
from dexcli.sdk.stream import Stream as Stream
from dexcli.sdk.stream import StreamMessage as StreamMessage
from dexcli.sdk.stream import StreamMessagesPage as StreamMessagesPage

__all__ = ["AsyncBufferedTextStream", "BufferedTextStream", "Stream", "StreamMessage", "StreamMessagesPage"]
