"""The official SDK's `dex.flow_config` module: `from dexcli.flow_config import ...` is what
`from dex.flow_config import ...` becomes, for the names dex has."""

from dexcli.sdk.flow_config import ActiveStepSearchMode as ActiveStepSearchMode
from dexcli.sdk.flow_config import FlowConfig as FlowConfig

__all__ = ["ActiveStepSearchMode", "FlowConfig"]
