"""The invariant checker on steps with a wait_for: their WAIT_FOR attempts are judged apart
from their EXECUTE attempts, in every state such a step can be in."""

from __future__ import annotations

from dexcli import FlowStatus, WaitForFailurePolicy
from dexcli.engine import doctor
from dexcli.testing import DexTestEnv
from dexcli_flows.approval import ApprovalFlow
from tests.engine.test_wait_for_failure import BrokenFlow


def test_a_step_waiting_after_its_wait_for_returned_is_healthy() -> None:
    with DexTestEnv(start=0.0) as env:
        env.start(ApprovalFlow(), {"title": "t"}, "w")
        env.drive(["w"], until=lambda: env.inspect("w")["steps"][0]["status"] == "WAITING")
        assert doctor.check(env.store) == ([], 1)


def test_a_wait_for_that_failed_the_flow_is_healthy() -> None:
    with DexTestEnv(start=0.0) as env:
        assert env.run(BrokenFlow(WaitForFailurePolicy.FAIL_FLOW), 1, "f").status is FlowStatus.FAILED
        assert doctor.check(env.store) == ([], 1)


def test_execute_after_a_failed_wait_for_is_healthy() -> None:
    with DexTestEnv(start=0.0) as env:
        assert env.run(BrokenFlow(WaitForFailurePolicy.PROCEED), 1, "p").status is FlowStatus.COMPLETED
        assert doctor.check(env.store) == ([], 1)
