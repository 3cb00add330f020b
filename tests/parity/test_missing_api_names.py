"""The table behind "dex does not implement <Type>.<name> yet" (dexcli.engine.user_code.SDK_NAMES)
is the official SDK's: every name in it is a public name of that SDK type, and every public
name of those SDK types is in it — so an AttributeError inside a step is called "not implemented
yet" exactly when the official SDK has the name, and "has no attribute" otherwise."""

from __future__ import annotations

import pytest

from dexcli.engine.user_code import SDK_NAMES
from tests.parity.parity_kit import official


@pytest.mark.parametrize("type_name", sorted(SDK_NAMES))
def test_the_names_dex_may_lack_are_the_official_sdks(type_name: str) -> None:
    cls = getattr(official(), type_name)
    public = {n for n in dir(cls) if not n.startswith("_")}
    assert SDK_NAMES[type_name] == public
