"""The official SDK's `dex.flow` module: `from dexcli.flow import ...` is what
`from dex.flow import ...` becomes, for the names dex has."""

from dexcli.sdk.flow import Flow as Flow
from dexcli.sdk.flow import PersistenceSchema as PersistenceSchema
from dexcli.sdk.registry import Registry as Registry
from dexcli.sdk.rpc import RPCResult as RPCResult
from dexcli.sdk.rpc import rpc as rpc

__all__ = ["Flow", "PersistenceSchema", "Registry", "rpc", "RPCResult"]
