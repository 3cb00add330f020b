"""Hard-delete attributes (a plain one and an AttributeMap): both SDKs accept them; dex keeps
their values only in the attributes table (never in history or retry snapshots)."""

from __future__ import annotations

from dexcli import (
    Attribute,
    AttributeMap,
    Context,
    Flow,
    PersistenceSchema,
    Step,
    StepDecision,
    StepList,
    graceful_complete,
)

api_key = Attribute("api-key", str, hard_delete_on_null=True)
keys = AttributeMap("provider-api-key", str, hard_delete_on_null=True)


class Call(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        api_key.delete(context)
        return graceful_complete(input)


class ProviderFlow(Flow[str]):
    def __init__(self) -> None:
        self.call = Call()

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(self.call)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(api_key, keys)
