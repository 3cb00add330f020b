"""The official SDK's `dex.async_worker` module: `from dexcli.async_worker import ...` is what
`from dex.async_worker import ...` becomes, for the names dex has."""

from dexcli.worker import AsyncWorker as AsyncWorker

__all__ = ["AsyncWorker"]
