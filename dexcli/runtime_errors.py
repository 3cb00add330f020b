"""The official SDK's `dex.runtime_errors` module: `from dexcli.runtime_errors import ...` is what
`from dex.runtime_errors import ...` becomes, for the names dex has."""

from dexcli.sdk.errors import ChannelMessageNotFoundError as ChannelMessageNotFoundError
from dexcli.sdk.errors import ChannelMessagesNotLoadedError as ChannelMessagesNotLoadedError
from dexcli.sdk.errors import DexServiceError as DexServiceError
from dexcli.sdk.errors import ErrorSubStatus as ErrorSubStatus
from dexcli.sdk.errors import FlowAlreadyStartedError as FlowAlreadyStartedError
from dexcli.sdk.errors import FlowClosingError as FlowClosingError
from dexcli.sdk.errors import FlowDefinitionError as FlowDefinitionError
from dexcli.sdk.errors import FlowNotActiveOrNotFoundError as FlowNotActiveOrNotFoundError
from dexcli.sdk.errors import FlowNotFoundError as FlowNotFoundError
from dexcli.sdk.errors import InvalidStepResultError as InvalidStepResultError
from dexcli.sdk.errors import LongPollTimeoutError as LongPollTimeoutError
from dexcli.sdk.errors import RequestTimeoutError as RequestTimeoutError
from dexcli.sdk.errors import RpcLockConflictError as RpcLockConflictError
from dexcli.sdk.errors import ValueMappingError as ValueMappingError
from dexcli.sdk.errors import WorkerInvocationError as WorkerInvocationError
from dexcli.sdk.results import FlowErrorType as FlowErrorType

__all__ = [
    "ChannelMessageNotFoundError", "ChannelMessagesNotLoadedError", "DexServiceError", "ErrorSubStatus",
    "FlowAlreadyStartedError", "FlowClosingError", "FlowDefinitionError", "FlowErrorType",
    "FlowNotActiveOrNotFoundError", "FlowNotFoundError", "InvalidStepResultError", "LongPollTimeoutError",
    "RequestTimeoutError", "RpcLockConflictError", "ValueMappingError", "WorkerInvocationError",
]
