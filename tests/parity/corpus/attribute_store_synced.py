"""Attributes synced to an Attribute Store (a plain one and an AttributeMap): both SDKs accept
them; dex projects their writes into the store dex.toml names (tests/attrstore)."""

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

email = Attribute("email", str, sync_to_attribute_store=True)
balance = AttributeMap("balance", int, sync_to_attribute_store=True)


class Save(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        email.set(context, input)
        balance.set(context, "eur", 1)
        return graceful_complete(input)


class ProfileFlow(Flow[str]):
    def __init__(self) -> None:
        self.save = Save()

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(self.save)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(email, balance)
