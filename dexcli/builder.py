"""The one place an `Engine` is built: `dex` commands, Client/AsyncClient, Worker/AsyncWorker
and DexTestEnv all get theirs here.

    engine = build_engine("dex.db", flows=[MyFlow()])            # a database path: opened here
    engine = build_engine(store, clock=Clock.virtual(), loader=load_ref)

`flows` is a Registry (used as it is) or flows to register: these go into a Registry that checks
each flow's source statically (as `dex graph` does) and takes async handlers unless
`allow_async_handlers=False` (a Client or Worker hosts sync handlers only, as the official ones).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dexcli.engine import Engine
from dexcli.engine.attribute_sync import AttributeStores
from dexcli.engine.clock import Clock
from dexcli.engine.definitions import Loader
from dexcli.engine.faults import Faults
from dexcli.graph.checks import static_problems
from dexcli.sdk.flow import Flow
from dexcli.sdk.registry import Registry
from dexcli.store import Store


def build_engine(db: str | Path | Store, *, flows: Registry | Iterable[Flow[Any]] | None = None,
                 clock: Clock | None = None, allow_async_handlers: bool = True, faults: Faults | None = None,
                 loader: Loader | None = None, owner: str | None = None,
                 attribute_stores: AttributeStores | None = None) -> Engine:
    """An engine on `db` (a Store, or a path it opens) with the clock given (default: real time);
    `attribute_stores` (dex.toml's [attribute_store]) opened for it (AttributeStoreError if one
    cannot be)."""
    store = db if isinstance(db, Store) else Store(db)
    registry = flows if isinstance(flows, Registry) else Registry(
        list(flows or []), checks=static_problems, allow_async_handlers=allow_async_handlers)
    engine = Engine(store, clock or Clock(), registry, owner=owner, faults=faults, loader=loader)
    if attribute_stores is not None:
        engine.use_attribute_stores(attribute_stores)
    return engine
