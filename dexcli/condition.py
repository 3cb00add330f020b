"""The official SDK's `dex.condition` module: `from dexcli.condition import ...` is what
`from dex.condition import ...` becomes, for the names dex has."""

from dexcli.sdk.conditions import ConditionCombination as ConditionCombination

__all__ = ["ConditionCombination"]
