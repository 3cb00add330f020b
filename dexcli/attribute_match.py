"""The official SDK's `dex.attribute_match` module: `from dexcli.attribute_match import ...` is what
`from dex.attribute_match import ...` becomes, for the names dex has."""

from dexcli.sdk.attribute_match import AttributeMatch as AttributeMatch

__all__ = ["AttributeMatch"]
