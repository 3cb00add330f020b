"""The official SDK's `dex.flow_options` module: `from dexcli.flow_options import ...` is what
`from dex.flow_options import ...` becomes, for the names dex has."""

from dexcli.sdk.results import FlowTimeoutHandlerOptions as FlowTimeoutHandlerOptions
from dexcli.sdk.results import FlowTimeoutPolicy as FlowTimeoutPolicy
from dexcli.sdk.results import IdReusePolicy as IdReusePolicy
from dexcli.sdk.results import StartFlowOptions as StartFlowOptions
from dexcli.sdk.results import StopFlowOptions as StopFlowOptions
from dexcli.sdk.results import StopType as StopType
from dexcli.sdk.subflow_options import SubFlowOptions as SubFlowOptions
from dexcli.sdk.subflow_options import SubFlowReusePolicy as SubFlowReusePolicy

__all__ = [
    "FlowTimeoutHandlerOptions", "FlowTimeoutPolicy", "IdReusePolicy", "StartFlowOptions", "StopFlowOptions",
    "StopType", "SubFlowOptions", "SubFlowReusePolicy",
]
