"""The official SDK's `dex.context` module: `from dexcli.context import ...` is what
`from dex.context import ...` becomes, for the names dex has."""

from dexcli.sdk.context import AsyncContext as AsyncContext
from dexcli.sdk.context import Context as Context
from dexcli.sdk.context import RecoveryErrorInfo as RecoveryErrorInfo

__all__ = ["AsyncContext", "Context", "RecoveryErrorInfo"]
