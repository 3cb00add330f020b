"""The ids a start makes without the uuid module's objects (dexcli.engine.transitions.flows.new_uuid,
start_request.new_flow_id) keep the forms they had: a run id is a version-4 UUID's text."""

from __future__ import annotations

import re
import uuid

from dexcli.engine.start_request import new_flow_id
from dexcli.engine.transitions.flows import new_uuid, new_uuids


def test_new_uuid_is_a_random_version_4_uuid_in_its_canonical_text() -> None:
    seen = set()
    for text in [new_uuid() for _ in range(1000)] + new_uuids(1000):  # one at a time, and a batch's
        parsed = uuid.UUID(text)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
        assert str(parsed) == text
        seen.add(text)
    assert len(seen) == 2000
    # the variant digit takes all four values its two random bits allow
    assert {t[19] for t in seen} == set("89ab")


def test_generated_flow_id_is_the_type_name_and_six_hex_digits() -> None:
    assert re.fullmatch(r"polling-[0-9a-f]{6}", new_flow_id("PollingFlow"))
    assert re.fullmatch(r"flow-[0-9a-f]{6}", new_flow_id("Flow"))
