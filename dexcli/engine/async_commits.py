"""ASYNC durability: when a step result that may be acknowledged before it is persistent is
committed (Dex's `StepDurability.ASYNC`: "allow acknowledgement before persistence completes").

A transition under ASYNC is applied in a transaction that is left open (`Store.tx(durable=False)`):
the next step runs at once, on the same handler thread (dexcli.engine.sync_attempt) or from the
loop's group commit (dexcli.engine.batch). What is left open is committed, all of it in one
COMMIT, by the first of:

  - the next durable transaction of the same store: a SYNC transition, a start (a client's
    start is acknowledged durable, so it carries the open results of flows before it), a
    heartbeat, a stop, a release;
  - ASYNC_BATCH such transactions (the bound on how many transitions a crash may lose);
  - ASYNC_WINDOW seconds of real time after the first of them (the bound in time; `Flusher`,
    a thread, so that it holds when no loop runs: after a drive has returned);
  - the loop having nothing else to do (`GroupCommit.idle`);
  - an answer to a client (`Client.wait_for_flow`, `describe_flow`, `wait_for_step_completion`,
    `wait_for_attribute_match`, `search_flows`, `invoke_rpc`; `dex run`'s report): a client is
    told only what is durable, as a Dex server answers from what it has persisted;
  - the store's close, or the interpreter's exit (`atexit`).

A drive's return and a flow's close do not commit by themselves: the close is part of the
transition that made it, and is durable with it. A crash before the commit loses those
transitions whole (SQLite never makes part of a transaction durable): their steps are still
leased to the dead process in the database, are declared lost at their heartbeat deadline and
run again. Nothing committed before is lost.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

from dexcli.store import Store, Tx

ASYNC_BATCH = 64  # non-durable transactions at most in one commit
ASYNC_WINDOW = float(os.environ.get("DEX_ASYNC_WINDOW", "0.05"))  # seconds (real) a non-durable one may wait
_QUIET_ROUNDS = 20  # windows with nothing open before the flusher parks (until the next deferral)

_stores: weakref.WeakSet[Store] = weakref.WeakSet()  # stores with a flusher: committed at exit
_flushers: weakref.WeakSet[Flusher] = weakref.WeakSet()  # a forked child has none of their threads


def must_commit(store: Store, durability: str) -> bool:
    """Whether a transition of this durability ("SYNC", "ASYNC") commits now."""
    return durability != "ASYNC" or store.deferred + 1 >= ASYNC_BATCH


class Flusher:
    """Commits what ASYNC transitions left open once the first of them is ASYNC_WINDOW old.

    A thread, started at a deferral when none runs. While deferrals keep coming it wakes once
    per window (not once per transition: `deferred` only reads a flag while it runs); after
    _QUIET_ROUNDS windows with nothing open it ends (the next deferral starts another). It
    keeps only a weak reference to its store, and looks at least once a second."""

    def __init__(self, store: Store) -> None:
        self._store = weakref.ref(store)
        self._running = False
        self._lock = threading.Lock()
        self.flushes = 0  # commits it made (tests)
        _flushers.add(self)

    def deferred(self) -> None:
        """A transaction was left open (any thread, after `Store.tx(durable=False)`)."""
        if not self._running:
            with self._lock:
                if self._running:
                    return
                self._running = True
            store = self._store()
            if store is not None:
                _stores.add(store)
            threading.Thread(target=self._run, name="dex-async-commit", daemon=True).start()

    def _run(self) -> None:
        quiet = 0
        while True:
            window = ASYNC_WINDOW
            store = self._store()
            if store is None:
                break
            if not store.deferred:
                del store
                quiet += 1
                if quiet >= _QUIET_ROUNDS:
                    with self._lock:
                        self._running = False
                    store = self._store()  # a deferral that saw it running still: go on
                    if store is None or not store.deferred or not self._restart():
                        return
                    continue
                time.sleep(min(window, 1.0))
                continue
            quiet = 0
            due = store.deferred_at + window - time.monotonic()
            if due > 0:
                del store
                time.sleep(min(due, 1.0))
                continue
            try:
                before = store.commits
                store.commit_deferred(since=time.monotonic() - window)
                self.flushes += store.commits != before
            except Exception:  # noqa: BLE001 - the next durable write reports the condition
                del store
                time.sleep(min(window, 1.0))
        with self._lock:
            self._running = False

    def _restart(self) -> bool:
        with self._lock:
            if self._running:
                return False  # another thread took over
            self._running = True
            return True


class Deferrals:
    """The ASYNC side of one store's writers: a write transaction for a transition of a given
    durability, and the time bound on what it leaves open."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.flusher = Flusher(store)

    @contextmanager
    def tx(self, durability: str) -> Iterator[Tx]:
        """A write transaction for a transition of this durability: committed when the block
        ends under SYNC, left open under ASYNC (within the bounds above)."""
        durable = must_commit(self.store, durability)
        with self.store.tx(durable=durable) as tx:
            yield tx
        if not durable:
            self.flusher.deferred()


def _forked() -> None:
    for flusher in list(_flushers):  # their threads stayed in the parent: the next deferral starts one
        flusher._running = False
        flusher._lock = threading.Lock()


os.register_at_fork(after_in_child=_forked)


@atexit.register
def _commit_at_exit() -> None:
    """A clean exit keeps what was acknowledged (only a crash may lose it)."""
    for store in list(_stores):
        with contextlib.suppress(Exception):  # a closed or broken store: nothing to keep
            store.commit_deferred()
