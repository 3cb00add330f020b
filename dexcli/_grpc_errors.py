"""`from dex._grpc_errors import retry_after`, as Dex's own docs and examples write it (a private
module of the official SDK), is `from dexcli._grpc_errors import retry_after` here."""

from dexcli.sdk.decisions import RetryAfterError as RetryAfterError
from dexcli.sdk.decisions import retry_after as retry_after

__all__ = ["RetryAfterError", "retry_after"]
