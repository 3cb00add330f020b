"""A hard-delete Attribute: a Dex server with a blob store accepts it; dex refuses it at
registration (it keeps no blob store, and must not accept and ignore the promise that the value
is never in history)."""

from __future__ import annotations

from dexcli import Attribute, Context, Flow, PersistenceSchema, Step, StepDecision, StepList, graceful_complete

api_key = Attribute("api-key", str, hard_delete_on_null=True)


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
        return PersistenceSchema.of(api_key)
