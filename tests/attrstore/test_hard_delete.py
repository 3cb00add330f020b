"""hard_delete_on_null in virtual time: the value is kept only in the flow's attributes (never
in history: not FlowStarted's initial attributes, not a step's or an RPC's upserts), a delete
or a None removes that only copy (it reads as absent), and a numeric value is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dexcli import (
    Attribute,
    AttributeMap,
    Context,
    Flow,
    PersistenceSchema,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    graceful_complete,
    rpc,
)
from dexcli.sdk.errors import WorkerInvocationError
from dexcli.sdk.results import StartFlowOptions
from dexcli.testing import DexTestEnv

api_key = Attribute("api-key", str, hard_delete_on_null=True)
keys = AttributeMap("provider-key", str, hard_delete_on_null=True)
plain = Attribute("plain", str)
loose = Attribute("loose", object, hard_delete_on_null=True)  # type: ignore[var-annotated]


class Use(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        seen = api_key.get(context)
        api_key.set(context, None)  # used once, then gone for good
        keys.set(context, "acme", "k-acme-2")
        plain.set(context, f"used a key of {len(seen)} characters")
        return graceful_complete(len(seen))  # (what a handler returns is its own choice: history keeps it)


class Provider(Flow[None]):
    def __init__(self) -> None:
        self.use = Use()

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(self.use)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(api_key, keys, plain, loose)


class Vault(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return StepList.empty()

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(api_key, loose)

    @rpc
    def rotate(self, context: Context, key: str) -> RPCResult[bool]:
        had = api_key.get(context) is not None
        api_key.set(context, key)
        return RPCResult(had)

    @rpc
    def revoke(self, context: Context) -> RPCResult[None]:
        api_key.delete(context)
        return RPCResult(None)

    @rpc
    def numeric(self, context: Context) -> RPCResult[None]:
        loose.set(context, 5)
        return RPCResult(None)


@pytest.fixture
def env(tmp_path: Path):
    with DexTestEnv(tmp_path / "dex.db", start=0.0) as e:
        yield e


def history_text(env: DexTestEnv, flow_id: str) -> str:
    return json.dumps(env.inspect(flow_id)["history"])


def stored(env: DexTestEnv, flow_id: str) -> dict[str, str]:
    return {k: v for k, _, _, v in env.store.read(lambda tx: tx.attribute_values(flow_id))}


def test_a_secret_is_in_no_history_and_its_delete_is_final(env: DexTestEnv) -> None:
    options = StartFlowOptions().with_attribute(api_key, "s3cret-1").with_attribute(keys, "acme", "k-acme-1")
    env.client.start_flow(Provider(), "p", None, options)
    result = env.client.wait_for_flow("p")
    assert result.single_output(int) == 8  # the step read it
    text = history_text(env, "p")
    assert "s3cret-1" not in text and "k-acme" not in text  # neither the start's nor the step's write
    assert "used a key of 8 characters" in text  # a plain attribute's write is in history as before
    assert stored(env, "p") == {"provider-key/acme": '"k-acme-2"', "plain": '"used a key of 8 characters"'}
    assert env.inspect("p")["state"]["attributes"].get("api-key") is None


def test_rpcs_rotate_and_revoke_and_keep_it_out_of_history(env: DexTestEnv) -> None:
    flow = Vault()
    env.start(flow, None, "v")
    assert env.client.invoke_rpc(flow.rotate, "v", "key-1") is False
    assert env.client.invoke_rpc(flow.rotate, "v", "key-2") is True
    env.client.invoke_rpc(flow.revoke, "v")
    assert env.client.invoke_rpc(flow.rotate, "v", "key-3") is False  # absent after the delete
    events = env.inspect("v")["history"]
    events = events["events"] if isinstance(events, dict) else events
    assert all("api-key" not in (e.get("upsertAttributes") or {}) for e in events)  # no write of it kept
    # (the RPC's own input is history, as any RPC input is: a secret passed as one is the caller's choice)
    assert stored(env, "v") == {"api-key": '"key-3"'}


def test_a_numeric_value_is_refused_at_the_write(env: DexTestEnv) -> None:
    flow = Vault()
    env.start(flow, None, "n")
    with pytest.raises(WorkerInvocationError, match="supports only string and object values, not int"):
        env.client.invoke_rpc(flow.numeric, "n")
    assert stored(env, "n") == {}
