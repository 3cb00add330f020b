"""The official SDK's `dex.wait_options` module: `from dexcli.wait_options import ...` is what
`from dex.wait_options import ...` becomes, for the names dex has."""

from dexcli.sdk.wait_options import WaitForAttributeOptions as WaitForAttributeOptions
from dexcli.sdk.wait_options import WaitForStepCompletionOptions as WaitForStepCompletionOptions

__all__ = ["WaitForAttributeOptions", "WaitForStepCompletionOptions"]
