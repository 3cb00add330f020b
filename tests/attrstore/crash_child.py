"""A process that writes synced attributes and is killed (SIGKILL) at a point of their
projection: `after-commit` (the attribute's transaction committed, nothing written to the store
yet) or `after-upsert` (the store has the values, the outbox row is not yet deleted).
Usage: python -m tests.attrstore.crash_child DB STORE MODE"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

from dexcli.testing import DexTestEnv
from tests.attrstore.stores import ProfileFlow, config


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    db, store, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    env = DexTestEnv(db, start=0.0)
    sync = env.engine.use_attribute_stores(config(a=store))
    if mode == "after-commit":
        env.store.on_attribute_sync(die)
    else:
        target = sync.targets["a"]
        upsert = target.upsert

        def upsert_then_die(flow_id: str, values: Any) -> Any:
            upsert(flow_id, values)
            die()

        target.upsert = upsert_then_die  # type: ignore[method-assign]
    env.run(ProfileFlow(), {"email": "ada@example.com", "credits": 120, "balance/usd": 3}, "user-1")
    print("not killed")


if __name__ == "__main__":
    main()
