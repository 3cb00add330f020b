"""DexTestEnv, the public testing API: ids it generates for flows started without one."""

from __future__ import annotations

from dexcli.testing import DexTestEnv
from dexcli_flows.three_steps import ThreeStepFlow


def test_generated_flow_ids_are_the_type_and_the_next_number_in_the_database() -> None:
    with DexTestEnv() as env:
        flow = ThreeStepFlow()
        assert env.start(flow, 1) == "threestepflow-1"
        assert env.start(flow, 2, "mine") == "mine"
        assert env.start(flow, 3) == "threestepflow-3"  # numbered by every flow the database holds
        assert env.store.flow_count() == 3
        env.drive()
        statuses = [env.inspect(f)["summary"]["flowStatus"] for f in ("threestepflow-1", "mine", "threestepflow-3")]
        assert statuses == ["COMPLETED"] * 3
