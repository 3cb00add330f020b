"""The official SDK's `dex.async_client` module: `from dexcli.async_client import ...` is what
`from dex.async_client import ...` becomes, for the names dex has."""

from dexcli.client import AsyncClient as AsyncClient

__all__ = ["AsyncClient"]
