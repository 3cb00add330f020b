"""The lists `dex lint --portable` works from (dexcli.graph.portability, written by hand so dexcli
never imports the official SDK) checked against the installed dex-python-sdk."""

from __future__ import annotations

import inspect

import pytest

import dexcli
from dexcli.graph.portability import DEX_ONLY_KEYWORDS, DEX_ONLY_MEMBERS, FORMER_NAMES, OFFICIAL_NAMES
from tests.parity.parity_kit import official


def test_the_official_names_are_the_sdks() -> None:
    assert set(OFFICIAL_NAMES) == set(official().__all__)


def test_every_dexcli_export_is_an_official_name_or_reported() -> None:
    """What dexcli exports beyond the official names would be reported by dex-only-name."""
    assert not set(FORMER_NAMES) & set(OFFICIAL_NAMES)
    assert set(dexcli.__all__) - OFFICIAL_NAMES == set()  # none today: a new one is reported by --portable


@pytest.mark.parametrize("member", sorted(DEX_ONLY_MEMBERS))
def test_each_dex_only_member_is_dexclis_only(member: str) -> None:
    owner = DEX_ONLY_MEMBERS[member][0]
    assert hasattr(getattr(dexcli, owner), member)
    assert not hasattr(getattr(official(), owner), member)


CALLABLES = {"Registry": "Registry", "Client": "Client", "AsyncClient": "AsyncClient", "Worker": "Worker",
             "AsyncWorker": "AsyncWorker", "start_flow": "Client.start_flow", "run": "Worker.run"}


@pytest.mark.parametrize("callee", sorted(DEX_ONLY_KEYWORDS))
def test_each_dex_only_keyword_is_dexclis_only(callee: str) -> None:
    dex = official()
    mine, theirs = dexcli, dex
    for part in CALLABLES[callee].split("."):
        mine, theirs = getattr(mine, part), getattr(theirs, part, None)
    for keyword in DEX_ONLY_KEYWORDS[callee]:
        assert keyword in inspect.signature(mine).parameters
        assert theirs is None or keyword not in inspect.signature(theirs).parameters
