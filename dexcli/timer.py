"""The official SDK's `dex.timer` module: `from dexcli.timer import ...` is what
`from dex.timer import ...` becomes, for the names dex has."""

from dexcli.sdk.conditions import Timer as Timer

__all__ = ["Timer"]
