"""The official SDK's `dex.wait` module: `from dexcli.wait import ...` is what
`from dex.wait import ...` becomes, for the names dex has."""

from dexcli.sdk.conditions import Wait as Wait

__all__ = ["Wait"]
