"""Store.status_counts: what `dex top` counts, one read."""

from __future__ import annotations

from dexcli.store import FlowState, Store
from tests.store.builders import T0, add_flow


def test_status_counts_counts_each_status_and_leaves_out_the_empty_ones(store: Store) -> None:
    assert store.status_counts() == {}
    with store.tx() as tx:
        for fid in ("a", "b", "c", "d"):
            add_flow(tx, fid)
        tx.close_flow("b", FlowState.COMPLETED, T0 + 1, None, None)
        tx.close_flow("c", FlowState.COMPLETED, T0 + 1, None, None)
        tx.close_flow("d", FlowState.FAILED, T0 + 1, "X", "boom")
    assert store.status_counts() == {FlowState.RUNNING: 1, FlowState.COMPLETED: 2, FlowState.FAILED: 1}
