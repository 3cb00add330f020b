"""The live view redraws only when what it shows changed (and at most every REPAINT_SECONDS):
an unchanged view is not redrawn, so a terminal never catches the block half-erased for nothing."""

from __future__ import annotations

import io

from rich.console import Console
from rich.live import Live

from dexcli.cli import driver
from dexcli.cli.driver import View
from dexcli.testing import DexTestEnv
from dexcli_flows.three_steps import ThreeStepFlow


def test_an_unchanged_view_is_not_redrawn(tmp_path, monkeypatch):
    refreshes: list[int] = []
    original = Live.refresh
    monkeypatch.setattr(Live, "refresh", lambda self: (refreshes.append(1), original(self)))
    monkeypatch.setattr(driver, "REPAINT_SECONDS", 3600.0)  # no timer: the test calls repaint itself
    out = io.StringIO()
    with DexTestEnv(tmp_path / "dex.db") as env:
        env.run(ThreeStepFlow(), 1, flow_id="done")
        view = View(Console(file=out, width=80, force_terminal=True), env.store.path, "done", env.clock, "live")
        view.start()
        drawn = len(refreshes)
        assert drawn >= 1 and "done" in out.getvalue()
        assert [view.repaint() for _ in range(20)] == [False] * 20
        assert len(refreshes) == drawn
        view.stop(final=False)
        view.close()


def test_a_change_is_redrawn_once(tmp_path, monkeypatch):
    monkeypatch.setattr(driver, "REPAINT_SECONDS", 3600.0)
    with DexTestEnv(tmp_path / "dex.db") as env:
        env.start(ThreeStepFlow(), 1, flow_id="f")
        view = View(Console(file=io.StringIO(), width=80, force_terminal=True), env.store.path, "f", env.clock,
                    "live")
        view.start()
        assert not view.repaint()
        env.drive()
        assert view.repaint() and not view.repaint()
        view.stop(final=False)
        view.close()
