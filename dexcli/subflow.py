"""The official SDK's `dex.subflow` module: `from dexcli.subflow import ...` is what
`from dex.subflow import ...` becomes, for the names dex has."""

from dexcli.sdk.conditions import SubFlow as SubFlow

__all__ = ["SubFlow"]
