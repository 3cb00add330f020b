"""An Attribute synced to an Attribute Store: a Dex server accepts it; dex refuses it at
registration (it has no Attribute Store to sync to, and must not accept and ignore it)."""

from __future__ import annotations

from dexcli import Attribute, Context, Flow, PersistenceSchema, Step, StepDecision, StepList, graceful_complete

email = Attribute("email", str, sync_to_attribute_store=True)


class Save(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        email.set(context, input)
        return graceful_complete(input)


class ProfileFlow(Flow[str]):
    def __init__(self) -> None:
        self.save = Save()

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(self.save)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(email)
