"""The official SDK's `dex.rpc_invoke_options` module: `from dexcli.rpc_invoke_options import ...` is what
`from dex.rpc_invoke_options import ...` becomes, for the names dex has."""

from dexcli.sdk.rpc import RPCInvokeOptions as RPCInvokeOptions

__all__ = ["RPCInvokeOptions"]
