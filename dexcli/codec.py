"""The official SDK's `dex.codec` module: `from dexcli.codec import ...` is what
`from dex.codec import ...` becomes, for the names dex has."""

from dexcli.sdk.codec import BOOL as BOOL
from dexcli.sdk.codec import BYTES as BYTES
from dexcli.sdk.codec import DOUBLE as DOUBLE
from dexcli.sdk.codec import INT64 as INT64
from dexcli.sdk.codec import STRING as STRING
from dexcli.sdk.codec import Codec as Codec
from dexcli.sdk.codec import CodecRegistry as CodecRegistry
from dexcli.sdk.codec import JsonCodec as JsonCodec
from dexcli.sdk.codec import Value as Value
from dexcli.sdk.codec import WireKind as WireKind

__all__ = ["BOOL", "BYTES", "Codec", "CodecRegistry", "DOUBLE", "INT64", "JsonCodec", "STRING", "Value", "WireKind"]
