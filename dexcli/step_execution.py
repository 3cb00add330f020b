"""The official SDK's `dex.step_execution` module: `from dexcli.step_execution import ...` is what
`from dex.step_execution import ...` becomes, for the names dex has."""

from dexcli.sdk.conditions import StepExecutionId as StepExecutionId
from dexcli.sdk.conditions import TimerId as TimerId

__all__ = ["StepExecutionId", "TimerId"]
