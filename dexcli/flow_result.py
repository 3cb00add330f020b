"""The official SDK's `dex.flow_result` module: `from dexcli.flow_result import ...` is what
`from dex.flow_result import ...` becomes, for the names dex has."""

from dexcli.sdk.results import FlowResult as FlowResult
from dexcli.sdk.results import StepCompletion as StepCompletion

__all__ = ["FlowResult", "StepCompletion"]
