"""`dex inspect` with stdout not a terminal prints its view without Rich's console
(dexcli.cli.plain_text): the same text as Rich prints, at every width, or Rich prints it."""

from __future__ import annotations

import copy
import io
from typing import Any

import pytest
from rich.console import Console, Group

from dexcli.cli.plain_text import plain_lines
from dexcli.cli.render_inspect import inspect_parts
from dexcli.cli.shown import shown_data
from dexcli.testing import DexTestEnv
from dexcli_flows.approval import ApprovalFlow, Request
from dexcli_flows.polling import PollingFlow
from dexcli_flows.three_steps import ThreeStepFlow
from tests.engine.engine_helpers import inspect_when

WIDTHS = (30, 60, 99, 100, 120, 160, 400)


def rich_text(parts: list[Any], width: int) -> str:
    """What `dex inspect` prints through Rich to a pipe (dexcli.cli.shared.out_console's settings)."""
    out = io.StringIO()
    Console(file=out, width=width, no_color=True, highlight=False, soft_wrap=False, markup=False).print(Group(*parts))
    return out.getvalue()


@pytest.fixture(scope="module")
def snaps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    with DexTestEnv(tmp_path_factory.mktemp("plain") / "dex.db") as env:
        env.run(ThreeStepFlow(), input=1, flow_id="three")
        out["three"] = env.inspect("three")
        env.start(PollingFlow(), flow_id="polling")
        out["polling running"] = inspect_when(
            env, "polling", lambda: any(a.heartbeats for a in env.store.attempts_of("polling")))
        env.drive(["polling"])
        out["polling done"] = env.inspect("polling")
        env.start(ApprovalFlow(), input=Request(title="r1", amount=5), flow_id="approval")
        env.drive(["approval"])
        out["approval waiting"] = env.inspect("approval")
    return out


def variants(snaps: dict[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """The flows as they are, and with stored text Rich lays out differently from plain text."""
    out = list(snaps.items())
    for what, value in [("wide", "x" * 300), ("cjk", "名前" * 3), ("emoji code", "a :smile: b"),
                        ("markup", "[bold]x[/bold]"), ("control", "a\x1bb\nc"), ("combining", "e\u0301")]:
        snap = copy.deepcopy(snaps["polling done"])
        snap["summary"]["flowType"] = value
        snap["steps"][0]["stepExecutionId"] = value
        snap["steps"][0]["attempts"][0]["outcome"] = "FAILED"
        snap["steps"][0]["attempts"][0]["errorType"] = "E"
        snap["steps"][0]["attempts"][0]["detail"] = value
        out.append((what, snap))
    return out


def test_plain_lines_are_what_rich_prints(snaps: dict[str, dict[str, Any]]) -> None:
    laid_out = set()
    for name, snap in variants(snaps):
        parts = inspect_parts(shown_data(snap), 0.0)
        for width in WIDTHS:
            lines = plain_lines(parts, width)
            if lines is not None:
                laid_out.add((name, width))
                assert "".join(f"{line}\n" for line in lines) == rich_text(parts, width), (name, width)
    # the flows as they are print without Rich at dex's pipe width (160)
    assert {(name, 160) for name in snaps} | {("three", 100), ("three", 99)} <= laid_out
    # what Rich would wrap, shrink or turn into an emoji goes to Rich
    assert ("wide", 160) not in laid_out and ("emoji code", 160) not in laid_out
    assert ("cjk", 160) in laid_out and ("markup", 160) in laid_out


def test_narrow_output_leaves_the_start_column_out_as_rich_does(snaps: dict[str, dict[str, Any]]) -> None:
    parts = inspect_parts(shown_data(snaps["three"]), 0.0)
    wide, narrow = plain_lines(parts, 100), plain_lines(parts, 99)
    assert wide is not None and narrow is not None
    assert "start" in next(ln for ln in wide if ln.startswith("step "))
    assert "start" not in next(ln for ln in narrow if ln.startswith("step "))
