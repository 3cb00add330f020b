"""The official SDK's `dex.attribute` module: `from dexcli.attribute import ...` is what
`from dex.attribute import ...` becomes, for the names dex has."""

from dexcli.sdk.attributes import Attribute as Attribute
from dexcli.sdk.attributes import AttributeIndex as AttributeIndex
from dexcli.sdk.attributes import AttributeLock as AttributeLock
from dexcli.sdk.attributes import AttributeMap as AttributeMap
from dexcli.sdk.attributes import IndexType as IndexType

__all__ = ["Attribute", "AttributeIndex", "AttributeLock", "AttributeMap", "IndexType"]
