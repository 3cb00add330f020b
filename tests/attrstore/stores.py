"""Shared pieces of the Attribute Store tests: a flow with synced attributes, SQLite stores
made as a user would make them (dex never creates the table), and reading a store back."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
from dexcli.engine.attribute_sync import AttributeStores
from dexcli.store.attribute_targets import StoreSettings

PROFILES = """CREATE TABLE profiles (
    flow_id TEXT PRIMARY KEY,
    email TEXT,
    credits INTEGER,
    "balance/eur" INTEGER,
    "balance/usd" INTEGER,
    opted_in BOOLEAN,
    seen TIMESTAMP,
    meta JSON,
    short VARCHAR(3),
    created TEXT NOT NULL DEFAULT 'now'
)"""


@dataclass
class Meta:
    source: str
    tags: list[str]


email = Attribute("email", str, sync_to_attribute_store=True)
credits = Attribute("credits", int, sync_to_attribute_store=True)
private = Attribute("private", str)  # not synced: never in a store
balance = AttributeMap("balance", int, sync_to_attribute_store=True)
meta = Attribute("meta", Meta, sync_to_attribute_store=True)
short = Attribute("short", str, sync_to_attribute_store=True)
nowhere = Attribute("nowhere", str, sync_to_attribute_store=True)  # no such column


class Save(Step[dict[str, Any]]):
    def execute(self, context: Context, input: dict[str, Any]) -> StepDecision:
        for name, value in input.items():
            if name.startswith("balance/"):
                balance.set(context, name.split("/", 1)[1], value)
            else:
                {"email": email, "credits": credits, "private": private, "meta": meta, "short": short,
                 "nowhere": nowhere}[name].set(context, value)
        return graceful_complete(None)


class ProfileFlow(Flow[dict[str, Any]]):
    def __init__(self) -> None:
        self.save = Save()

    def get_steps(self) -> StepList[dict[str, Any]]:
        return StepList.start_step(self.save)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(email, credits, private, balance, meta, short, nowhere)


class Entity(Flow[None]):
    """No steps: RPCs write (the entity-store pattern)."""

    def get_steps(self) -> StepList[None]:
        return StepList.empty()

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(email, credits, balance)

    @rpc
    def set_email(self, context: Context, value: str) -> RPCResult[None]:
        email.set(context, value)
        return RPCResult(None)

    @rpc
    def clear(self, context: Context) -> RPCResult[None]:
        email.delete(context)
        credits.set(context, None)
        return RPCResult(None)

    @rpc
    def fund(self, context: Context, amount: int) -> RPCResult[None]:
        balance.set(context, "eur", amount)
        return RPCResult(None)


def sqlite_store(path: Path, ddl: str = PROFILES) -> Path:
    with sqlite3.connect(path) as c:
        c.execute(ddl)
    return path


def config(**stores: Path) -> AttributeStores:
    settings = {n: StoreSettings(n, "sqlite", "profiles", path=str(p)) for n, p in stores.items()}
    return AttributeStores(settings, default=next(iter(stores)) if stores else None)


def rows(path: Path) -> dict[str, dict[str, Any]]:
    with sqlite3.connect(path) as c:
        c.row_factory = sqlite3.Row
        return {r["flow_id"]: dict(r) for r in c.execute("SELECT * FROM profiles")}
