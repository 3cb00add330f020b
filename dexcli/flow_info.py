"""The official SDK's `dex.flow_info` module: `from dexcli.flow_info import ...` is what
`from dex.flow_info import ...` becomes, for the names dex has."""

from dexcli.sdk.results import FlowInfo as FlowInfo
from dexcli.sdk.results import FlowStatus as FlowStatus
from dexcli.sdk.results import HealthInfo as HealthInfo
from dexcli.sdk.search import SearchFlowEntry as SearchFlowEntry
from dexcli.sdk.search import SearchFlowsPage as SearchFlowsPage

__all__ = ["FlowInfo", "FlowStatus", "HealthInfo", "SearchFlowEntry", "SearchFlowsPage"]
