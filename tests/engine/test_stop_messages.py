"""What client code reads of a stopped flow, as the server gives it (issue 23, rule 14): a FAIL
stop's message is its reason, or "fail by client"; a CANCEL or TERMINATE result carries no
message. dex's own note (the reason, or "stopped (cancel)") stays in inspect's summary."""

from __future__ import annotations

from datetime import timedelta

import pytest

from dexcli import FlowErrorType, FlowStatus, LongPollTimeoutError, StopFlowOptions, StopType
from dexcli.testing import DexTestEnv
from tests.engine.engine_flows import Beat, Single


def _stopped(stop_type: StopType, reason: str | None) -> tuple[object, ...]:
    with DexTestEnv(start=0.0) as env:
        env.start(Single(Beat(None, every=5)), 0, "f")
        with pytest.raises(LongPollTimeoutError):
            env.client.wait_for_flow("f", timeout=timedelta(seconds=12))
        env.client.stop_flow("f", StopFlowOptions(type=stop_type, reason=reason))
        result = env.client.wait_for_flow("f")
        return result.status, result.error_type, result.error_message, env.inspect("f")["summary"]["errorMessage"]


@pytest.mark.parametrize(("stop_type", "reason", "expected"), [
    (StopType.FAIL, None, (FlowStatus.FAILED, FlowErrorType.CLIENT_API_FAILED, "fail by client", "fail by client")),
    (StopType.FAIL, "ops", (FlowStatus.FAILED, FlowErrorType.CLIENT_API_FAILED, "ops", "ops")),
    (StopType.CANCEL, None, (FlowStatus.CANCELED, None, None, "stopped (cancel)")),
    (StopType.CANCEL, "ops", (FlowStatus.CANCELED, None, None, "ops")),
    (StopType.TERMINATE, None, (FlowStatus.TERMINATED, None, None, "stopped (terminate)")),
    (StopType.TERMINATE, "ops", (FlowStatus.TERMINATED, None, None, "ops")),
])
def test_a_stopped_flows_result_carries_the_servers_message(stop_type: StopType, reason: str | None,
                                                             expected: tuple[object, ...]) -> None:
    assert _stopped(stop_type, reason) == expected
