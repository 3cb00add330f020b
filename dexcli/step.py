"""The official SDK's `dex.step` module: `from dexcli.step import ...` is what
`from dex.step import ...` becomes, for the names dex has."""

from dexcli.sdk.context import StepOutput as StepOutput
from dexcli.sdk.context import heartbeat as heartbeat
from dexcli.sdk.decisions import StepDecision as StepDecision
from dexcli.sdk.decisions import StepMovement as StepMovement
from dexcli.sdk.decisions import dead_end as dead_end
from dexcli.sdk.decisions import force_complete as force_complete
from dexcli.sdk.decisions import force_complete_if_channels_empty as force_complete_if_channels_empty
from dexcli.sdk.decisions import force_fail as force_fail
from dexcli.sdk.decisions import go_to as go_to
from dexcli.sdk.decisions import go_to_many as go_to_many
from dexcli.sdk.decisions import graceful_complete as graceful_complete
from dexcli.sdk.flow import Step as Step
from dexcli.sdk.flow import StepList as StepList
from dexcli.sdk.options import RetryPolicy as RetryPolicy
from dexcli.sdk.options import StepDurability as StepDurability
from dexcli.sdk.options import StepOptions as StepOptions
from dexcli.sdk.options import WaitForFailurePolicy as WaitForFailurePolicy

__all__ = [
    "dead_end", "force_complete", "force_complete_if_channels_empty", "force_fail", "go_to", "go_to_many",
    "graceful_complete", "heartbeat", "RetryPolicy", "Step", "StepDecision", "StepDurability", "StepList",
    "StepMovement", "StepOptions", "StepOutput", "WaitForFailurePolicy",
]
