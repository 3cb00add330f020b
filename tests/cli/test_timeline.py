"""`dex inspect ID --timeline`: the drawing from inspect snapshots (virtual time) at 80 and 120
columns, and the command's flags (SVG, misuse)."""

from __future__ import annotations

import copy
import re

import pytest

from dexcli.cli.config import format_duration
from dexcli.cli.timeline import Axis, short_time, timeline_lines
from dexcli.testing import DexTestEnv
from dexcli_flows.polling import PollingFlow
from tests.cli.cli_helpers import assert_error
from tests.engine.engine_helpers import inspect_when

WIDTHS = (80, 120)


def snapshot(cli, flow_id):
    """The snapshot `dex inspect --timeline` draws from (dex's own: `--json` prints it in the Dex CLI's forms)."""
    from dexcli.cli.shared import store_now
    from dexcli.engine.views import inspect_flow
    from dexcli.store import Store

    store = Store(cli.db, read_only=True)
    try:
        return inspect_flow(store, flow_id, store_now(store, flow_id))
    finally:
        store.close()


def plain(snap, width, offset=0.0) -> list[str]:
    lines = [t.plain for t in timeline_lines(snap, width, offset)]
    assert all(len(ln) <= width for ln in lines), [ln for ln in lines if len(ln) > width]
    return lines


def row(lines: list[str], label: str) -> str:
    return next(ln for ln in lines if ln.startswith(f" {label} "))


def plot_of(line: str, lines: list[str]) -> str:
    """The plot part of a step row: from the axis's first column (the ├ of the rule)."""
    rule = next(ln for ln in lines if "├" in ln)
    return line[rule.index("├"):]


@pytest.fixture
def cli_retried(cli):
    cli.ok("run", "polling", "--flow-id", "p", "--fail", "AwaitJob:2", "--time-skip")
    return snapshot(cli, "p")


@pytest.mark.parametrize("width", WIDTHS)
def test_retries_draw_failures_backoff_and_the_completing_attempt(cli_retried, width):
    lines = plain(cli_retried, width)
    assert re.fullmatch(r" timeline · PollingFlow · p · COMPLETED after [78]\.\d s", lines[0]), lines[0]  # 7 s, + load
    rule = next(ln for ln in lines if "├" in ln)
    assert rule.rstrip().endswith("┤") and len(rule) == width - 1
    bars = plot_of(row(lines, "AwaitJob-1"), lines)
    # failed, backoff, failed, backoff, then the third attempt's bar ending in its completion
    assert bars.count("✗") == 2 and bars.rstrip().endswith("━✓")
    ran = bars.strip().lstrip("━")  # (under load a failed attempt lasts a column or two of bar)
    assert ran.index("✗") < ran.index("·") < ran.rindex("✗")
    assert re.fullmatch(r"✗·+━+✓", ran[ran.rindex("✗"):]), bars  # the last backoff, then the completing bar
    # the 1 s backoff is half the 2 s one (give or take a column each way)
    first_gap, second_gap = (len(g) for g in bars.strip(" ━✓").split("✗") if g)
    assert abs(second_gap - 2 * first_gap) <= 2, bars
    marks = plot_of(lines[lines.index(row(lines, "AwaitJob-1")) + 1], lines)
    assert marks.index("●") < marks.index("♥")  # the Stream message at +3.1 s, the heartbeat at +5.1 s
    notes = [ln for ln in lines if "AwaitJob-1 #" in ln]
    assert [n.split()[:3] for n in notes] == [["✗", "AwaitJob-1", "#1/3"], ["✗", "AwaitJob-1", "#2/3"],
                                                 ["✓", "AwaitJob-1", "#3/3"]]
    assert "InjectedError" in notes[0] and "1 heartbeat" in notes[2]
    key = " ".join(ln for ln in lines if ln.startswith((" key", "     ")))
    for meaning in ("completed", "failed", "backoff", "last heartbeat", "Stream message"):
        assert meaning in key
    assert "timed out" not in key and "TotalDuration" not in key  # only what the picture uses


def test_the_axis_scales_to_the_width(cli_retried):
    narrow, wide = plain(cli_retried, 80), plain(cli_retried, 120)
    assert len(plot_of(row(wide, "AwaitJob-1"), wide)) > len(plot_of(row(narrow, "AwaitJob-1"), narrow)) + 30
    # tick labels on the axis: every 2 s at 80 columns, every second at 120, as far as the flow
    # lasted (7 s of virtual time, and a little more under load)
    assert narrow[1].split()[:4] == ["0s", "2s", "4s", "6s"]
    assert narrow[1].split() == [f"{2 * k}s" for k in range(len(narrow[1].split()))]
    assert wide[1].split()[:7] == ["0s", "1s", "2s", "3s", "4s", "5s", "6s"]
    assert wide[1].split() == [f"{k}s" for k in range(len(wide[1].split()))]


def test_a_timeout_shows_its_type_and_the_deadline_marks(cli):
    cli.ok("run", "polling", "--flow-id", "slow", "--job-duration", "15m", "--time-skip", code=1)
    snap = snapshot(cli, "slow")
    for width in WIDTHS:
        lines = plain(snap, width)
        assert plot_of(row(lines, "AwaitJob-1"), lines).rstrip().endswith("━╳")
        marks = lines[lines.index(row(lines, "AwaitJob-1")) + 1].rstrip()
        assert marks.endswith(("TE", "ET"))  # ExecuteMethodTimeout and TotalDuration: both 10 m
        note = next(ln for ln in lines if "AwaitJob-1 #1/3" in ln)
        assert "timed out at +10 m" in note and "StartToClose" in note
        assert any("E ExecuteMethodTimeout" in ln for ln in lines)


def test_a_running_step_ends_at_now_and_lists_its_deadlines_past_the_axis(tmp_path):
    with DexTestEnv(tmp_path / "dex.db") as env:
        env.start(PollingFlow(), flow_id="live")
        snap = inspect_when(env, "live", lambda: any(a.heartbeats for a in env.store.attempts_of("live")))
    lines = plain(snap, 80)
    assert "RUNNING for" in lines[0]
    assert plot_of(row(lines, "AwaitJob-1"), lines).rstrip().endswith("▶")
    assert " AwaitJob-1 past the axis: ExecuteMethodTimeout +10 m, TotalDuration +10 m" in lines
    assert " ▶ AwaitJob-1 #1/3 running for 4.5 s  1 heartbeat" in lines


def test_skipped_time_is_said_not_drawn(cli_retried):
    lines = plain(cli_retried, 80, offset=7.0)
    assert any("flow's clock is +7.0 s ahead" in ln for ln in lines)
    assert any("no break" in ln for ln in lines)
    assert not any("ahead" in ln for ln in plain(cli_retried, 80))


def test_many_attempts_list_the_last_few(cli_retried):
    snap = copy.deepcopy(cli_retried)
    step = snap["steps"][1]
    step["attempts"] = [dict(step["attempts"][0], attempt=n) for n in range(1, 9)] + [step["attempts"][-1]]
    lines = plain(snap, 80)
    assert any("AwaitJob-1: 4 earlier attempts not listed" in ln for ln in lines)
    assert sum("AwaitJob-1 #" in ln for ln in lines) == 5


def test_axis_and_labels():
    axis = Axis(100.0, 110.0, 11)
    assert [axis.col(t) for t in (99.0, 100.0, 105.0, 110.0, 200.0)] == [0, 0, 5, 10, 10]
    assert [short_time(s) for s in (0, 0.002, 1.5, 60, 90, 3600, 5400)] == \
        ["0s", "0.002s", "1.5s", "1m", "1m30s", "1h", "1h30m"]


def test_inspect_timeline_and_svg(cli, tmp_path):
    cli.ok("run", "three-steps", "--input", "1", "--flow-id", "t", "--time-skip")
    res = cli.ok("inspect", "t", "--timeline", env={"COLUMNS": "80"})
    lines = res.stdout.splitlines()
    assert lines[0].startswith(" timeline · ThreeStepFlow · t · COMPLETED")
    assert all(len(ln) <= 80 for ln in lines)
    assert [ln.split()[0] for ln in lines if ln.split() and ln.split()[0].endswith("-1")] == \
        ["First-1", "Second-1", "Third-1"]
    svg = tmp_path / "t.svg"
    res = cli.ok("inspect", "t", "--timeline", "--svg", str(svg), env={"COLUMNS": "80"})
    text = svg.read_text()
    assert text.startswith("<svg") and "<title>dex inspect t --timeline</title>" in text
    assert f"wrote {svg}" in res.stderr


def test_the_svg_renders_offline_and_places_every_character_at_its_own_column(cli, tmp_path):
    """No font or anything else from the internet; no text whose place depends on how a viewer
    treats spaces (librsvg drops leading non-breaking ones) or on the font's advance widths:
    each character at its column's x. The picture, read back by position, is what dex printed."""
    import xml.etree.ElementTree as ET

    cli.ok("run", "polling", "--flow-id", "p", "--fail", "AwaitJob:1", "--time-skip")
    svg = tmp_path / "p.svg"
    printed = cli.ok("inspect", "p", "--timeline", "--svg", str(svg), env={"COLUMNS": "80"}).stdout.splitlines()
    text = svg.read_text()
    assert "url(" not in text and "@font-face" not in text and "@import" not in text
    assert re.findall(r"https?://[^\s\"']+", text) == ["http://www.w3.org/2000/svg"]  # the namespace only
    root = ET.fromstring(text)
    ns = "{http://www.w3.org/2000/svg}"
    assert root.get("font-family", "").split(",")[-1].strip() == "monospace"
    cells = [t for t in root.iter(f"{ns}text") if t.get("text-anchor") is None]  # all but the title
    assert cells and all(len(t.text or "") == 1 and not (t.text or " ").isspace() for t in cells)
    xs = sorted({float(t.get("x", "")) for t in cells})
    ys = sorted({float(t.get("y", "")) for t in cells})
    cell_w = min(b - a for a, b in zip(xs, xs[1:], strict=False))
    grid: dict[float, dict[int, str]] = {}
    for t in cells:
        grid.setdefault(float(t.get("y", "")), {})[round((float(t.get("x", "")) - xs[0]) / cell_w)] = t.text or ""
    col0 = min(len(ln) - len(ln.lstrip()) for ln in printed if ln.strip())
    drawn = ["".join(grid[y].get(c - col0, " ") for c in range(80)).rstrip() for y in ys]
    assert drawn == [ln.rstrip() for ln in printed if ln.strip()]


def test_timeline_flag_misuse(cli, tmp_path):
    cli.ok("run", "three-steps", "--input", "1", "--flow-id", "t", "--time-skip")
    assert_error(cli("inspect", "t", "--svg", str(tmp_path / "x.svg")), 2, "--timeline")
    assert_error(cli("inspect", "t", "--json", "--timeline"), 2, "--json", "--timeline")
    assert_error(cli("inspect", "t", "--timeline", "--svg", str(tmp_path / "no" / "x.svg")), 2, "cannot write")


def test_a_wait_is_drawn_as_waiting_not_as_backoff():
    from dexcli_flows.approval import ApprovalFlow, Request

    with DexTestEnv(start=1000.0) as env:
        flow = ApprovalFlow()
        env.start(flow, Request("Laptop", expire_after_hours=1), "a")
        env.drive(["a"], until=lambda: env.clock.now() >= 1600)  # it waits (its timer is an hour)
        env.client.invoke_rpc(flow.approve, "a", "dana")
        env.client.wait_for_flow("a")
        lines = [ln.plain if hasattr(ln, "plain") else str(ln) for ln in timeline_lines(env.inspect("a"), 80, 0.0)]
    row = next(ln for ln in lines if ln.startswith(" AwaitDecision-1"))
    assert "~" in row and "·" not in row
    assert any("~ waiting (WaitFor)" in ln for ln in lines)


STREAM_ONLY = '''
import asyncio

from dexcli import AsyncContext, Flow, PersistenceSchema, Step, StepDecision, StepList, Stream, graceful_complete

NEWS = Stream("News", str, 1 << 16)


class Tell(Step[None]):
    async def execute(self, context: AsyncContext, input: None) -> StepDecision:
        NEWS.write(context, "one")
        await asyncio.sleep(5)
        NEWS.write(context, "two")  # its last sign of life: an implicit heartbeat, not a heartbeat
        await asyncio.sleep(5)
        return graceful_complete("told")


class TellFlow(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Tell())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(NEWS)
'''


def test_a_step_that_only_writes_a_stream_shows_its_messages_not_a_heartbeat(cli, tmp_path):
    (tmp_path / "tell.py").write_text(STREAM_ONLY)
    cli.ok("run", "--file", f"{tmp_path / 'tell.py'}:TellFlow", "--flow-id", "s", "--time-skip")
    lines = plain(snapshot(cli, "s"), 80)
    marks = plot_of(lines[lines.index(row(lines, "Tell-1")) + 1], lines)
    assert marks.count("●") == 2 and "♥" not in marks, marks
    key = " ".join(ln for ln in lines if ln.startswith((" key", "     ")))
    assert "Stream message" in key and "heartbeat" not in key


def test_the_wait_for_and_the_execute_attempt_are_told_apart():
    from dexcli_flows.approval import ApprovalFlow, Request

    with DexTestEnv(start=1000.0) as env:
        flow = ApprovalFlow()
        env.start(flow, Request("Laptop", expire_after_hours=1), "a")
        env.drive(["a"], until=lambda: env.clock.now() >= 1010)
        env.client.invoke_rpc(flow.approve, "a", "dana")
        env.client.wait_for_flow("a")
        lines = plain(env.inspect("a"), 80)
    notes = [ln.split(" completed")[0] for ln in lines if ln.startswith(" ✓ AwaitDecision-1 ")]
    assert notes == [" ✓ AwaitDecision-1 wait_for #1/∞", " ✓ AwaitDecision-1 execute #1/∞"]


def test_a_lost_attempt_ran_until_its_last_sign_of_life_not_until_it_was_declared_lost(cli, db):
    import subprocess
    import sys

    from tests.cli.cli_helpers import parse_iso_seconds, subprocess_env

    crashed = subprocess.run([sys.executable, "-m", "dexcli", "run", "polling", "--flow-id", "c", "--time-skip",
                              "--crash-at", "heartbeat:1@AwaitJob"], env=subprocess_env(db),
                             capture_output=True, text=True, timeout=120)
    assert crashed.returncode == 137, crashed.stderr
    cli.ok("resume", "c", "--time-skip")  # the lost attempt is declared lost 60 s on, then retried
    snap = snapshot(cli, "c")
    first = snap["steps"][1]["attempts"][0]
    assert first["outcome"] == "LOST"
    start = parse_iso_seconds(snap["summary"]["startTime"])
    began, beat, ended = (parse_iso_seconds(first[k]) - start for k in ("startTime", "lastHeartbeatTime", "endTime"))
    assert ended - beat > 55  # its process died at its heartbeat: a minute of nothing before it was declared lost
    for width in WIDTHS:
        lines = plain(snap, width)
        bars = plot_of(row(lines, "AwaitJob-1"), lines).rstrip()
        rule = plot_of(next(ln for ln in lines if "├" in ln), lines).rstrip()
        axis = Axis(0.0, parse_iso_seconds(snap["summary"]["closeTime"]) - start, len(rule))
        solid = [i for i, c in enumerate(bars) if c == "━"]
        assert max(solid) <= axis.col(beat) and min(solid) >= axis.col(began) - 1, bars
        assert bars[axis.col(beat) + 1:bars.index("╳")].strip("╌") == "", bars  # the silent part, then ╳
        note = next(ln for ln in lines if "AwaitJob-1 #1/3" in ln)
        assert f"lost at +{format_duration(ended)}: last sign of life +{format_duration(beat)}" in note, note
        assert "ran 1 m" not in note
        assert any("╌ silent: its process was gone" in ln for ln in lines)


def test_long_ids_are_shown_whole_at_80_columns(cli):
    fid = "RecordSettlement-flow-with-a-long-name-1"
    cli.ok("run", "payment", "--flow-id", fid, "--input", '{"payment_id": "p-1", "amount": 250}', "--time-skip")
    lines = cli.ok("inspect", fid, "--timeline", env={"COLUMNS": "80"}).stdout.splitlines()
    assert all(len(ln) <= 80 for ln in lines)
    assert lines[0] == f" timeline · PaymentFlow · {fid}"  # the status would not fit after it: next line
    assert re.fullmatch(r" COMPLETED after 4\.\d s", lines[1]), lines[1]
    assert row(lines, "RecordSettlement-1")  # the step id whole, not cut to "RecordSettlemen…"
