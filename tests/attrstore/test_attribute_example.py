"""Dex's primitives/attribute example ported to SDK 1.23 and driven as its controller drives it
(`start_flow(flow, workflowId, message, start_options())`), in virtual time: "Minimal Flow that
writes and reads a persisted Attribute".

The port: imports from dexcli. The flow class's unused `attribute_store_config =
FlowConfig(attribute_store_name="profiles")` (1.23: `attribute_store_names=["profiles"]`) is left
out until FlowConfig lands; dex.toml's default store stands for "profiles" here. Its synced
attribute (`email`) is declared and never written, so the store gets no row."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from dexcli import (
    Attribute,
    AttributeIndex,
    AttributeMap,
    Context,
    Flow,
    IndexType,
    PersistenceSchema,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    Wait,
    graceful_complete,
    rpc,
)
from dexcli.engine.attribute_sync import projections
from dexcli.sdk.results import StartFlowOptions
from dexcli.testing import DexTestEnv
from tests.attrstore.stores import config, rows, sqlite_store


class AttributeStep(Step[str]):
    def __init__(self, flow: AttributeFlow) -> None:
        self.flow = flow

    def wait_for(self, context: Context, input: str) -> Wait:
        self.flow.status.set(context, "processing")
        self.flow.progress.set(context, "payment", "authorized")
        return Wait.skip_immediately()

    def get_step_options(self) -> StepOptions:
        return StepOptions(
            wait_for_lock_attributes=(self.flow.status.lock(), self.flow.progress.lock("payment")),
            execute_lock_attributes=(self.flow.status.lock(), self.flow.progress.lock("payment")),
        )

    def execute(self, context: Context, input: str) -> StepDecision:
        self.flow.status.set(context, "completed")
        return graceful_complete(input)


class AttributeFlow(Flow[str]):
    status = Attribute("primitive-attribute-status", str, index=AttributeIndex(IndexType.KEYWORD, "OrderStatus"))
    email = Attribute("primitive-attribute-email", str, sync_to_attribute_store=True)
    progress = AttributeMap("primitive-attribute-progress", str,
                            index=AttributeIndex(IndexType.KEYWORD, "OrderProgress"))

    def __init__(self) -> None:
        self.start = AttributeStep(self)

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(self.start)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.status, self.progress, self.email)

    @rpc(lock_attributes=(status.lock(), progress.lock("payment")))
    def update_status(self, context: Context, input: str) -> RPCResult[str]:
        self.status.set(context, input)
        self.progress.set(context, "payment", input)
        return RPCResult(input)


def test_the_attribute_primitive_writes_and_reads_its_attributes(tmp_path: Path) -> None:
    store = sqlite_store(tmp_path / "profiles.db")
    with DexTestEnv(tmp_path / "dex.db", start=0.0) as env:
        env.engine.use_attribute_stores(config(profiles=store))
        flow = AttributeFlow()
        env.client.start_flow(flow, "attr-1", "hello", StartFlowOptions(timeout=timedelta(hours=1)))
        result = env.client.wait_for_flow("attr-1")
        assert result.status.name == "COMPLETED" and result.single_output(str) == "hello"
        state = env.inspect("attr-1")["state"]
        assert state["attributes"] == {"primitive-attribute-status": "completed",
                                       "primitive-attribute-progress": {"payment": "authorized"}}
        found = env.client.search_flows("OrderStatus = 'completed' AND OrderProgress = 'authorized'", 10).flows
        assert [f.flow_id for f in found] == ["attr-1"]
        assert rows(store) == {} and projections(env.store, "attr-1") == []  # email was never written
