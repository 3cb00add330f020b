"""The Attribute Store's and hard delete's definition rules, as the official SDK 1.23 has them
(`sync_to_attribute_store`, `hard_delete_on_null` on Attribute and AttributeMap: the same
exception types and messages), and the ported examples that use them (tests/attrstore:
patterns/entity-store, primitives/attribute) register alike under both SDKs."""

from __future__ import annotations

from typing import Any

import pytest

from tests.parity.parity_kit import ROOT, Verdict, load, official, sdk_module
from tests.parity.parity_kit import graph as graph_of

DEFINITIONS = [
    ("Attribute", "a", str, {"sync_to_attribute_store": True}),
    ("AttributeMap", "m", int, {"sync_to_attribute_store": True}),
    ("Attribute", "k", str, {"hard_delete_on_null": True}),
    ("AttributeMap", "k", bytes, {"hard_delete_on_null": True}),
    ("Attribute", "k", str, {"hard_delete_on_null": True, "sync_to_attribute_store": True}),
    ("AttributeMap", "k", str, {"hard_delete_on_null": True, "sync_to_attribute_store": True}),
    ("Attribute", "k", int, {"hard_delete_on_null": True}),
    ("Attribute", "k", bool, {"hard_delete_on_null": True}),
    ("AttributeMap", "k", float, {"hard_delete_on_null": True}),
    ("Attribute", "k", str, {"hard_delete_on_null": True, "index": "keyword"}),
]


def define(sdk: str, kind: str, name: str, tp: Any, options: dict[str, Any]) -> tuple[str, str]:
    module = sdk_module(sdk)
    options = dict(options)
    if options.get("index") == "keyword":
        options["index"] = module.AttributeIndex(module.IndexType.KEYWORD, "Key")
    try:
        definition = getattr(module, kind)(name, tp, **options)
    except (TypeError, ValueError) as exc:
        return type(exc).__name__, str(exc)
    return "ok", repr((definition.sync_to_attribute_store, definition.hard_delete_on_null))


@pytest.mark.parametrize(("kind", "name", "tp", "options"), DEFINITIONS)
def test_the_definition_rules_match(kind: str, name: str, tp: Any, options: dict[str, Any]) -> None:
    official()
    assert define("dexcli", kind, name, tp, options) == define("dex", kind, name, tp, options)


@pytest.mark.parametrize(("path", "build"), [
    ("tests/attrstore/test_postgres_store.py", "UserProfileFlow()"),
    ("tests/attrstore/test_attribute_example.py", "AttributeFlow()"),
])
def test_the_ported_examples_register_alike(path: str, build: str) -> None:
    official()
    graphs = []
    for sdk in ("dexcli", "dex"):
        module = load(f"attrstore_{build[:-2]}", (ROOT / path).read_text(encoding="utf-8"), sdk)
        flow = eval(build, vars(module))  # noqa: S307 - a constructor call of the module's own names
        verdict = Verdict(True, registry=sdk_module(sdk).Registry([flow]), flow=flow)
        graphs.append(graph_of(verdict, sdk, module))
    assert graphs[0] == graphs[1]
