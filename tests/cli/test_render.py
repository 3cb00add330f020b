"""Renderings at a fixed width from DexTestEnv snapshots (virtual time), and no ANSI when piped."""

from __future__ import annotations

import io
import json
import re

import pytest
from rich.console import Console

from dexcli.cli.render import LineDiffer, final_card, live_view
from dexcli.cli.render_inspect import inspect_view
from dexcli.testing import DexTestEnv
from dexcli_flows.polling import PollingFlow
from tests.engine.engine_helpers import inspect_when

ANSI = re.compile(r"\x1b\[")


def render(renderable) -> str:
    console = Console(width=100, record=True, no_color=True, file=io.StringIO())
    console.print(renderable)
    text = console.export_text()
    assert not ANSI.search(text)
    assert all(len(ln) <= 100 for ln in text.splitlines())
    return text


@pytest.fixture
def env(tmp_path):
    with DexTestEnv(tmp_path / "dex.db") as e:
        yield e


@pytest.fixture
def running(env):
    """A polling flow whose AwaitJob attempt is running: QUEUED and RUNNING written, a heartbeat sent."""
    env.start(PollingFlow(), flow_id="demo")
    snap = inspect_when(env, "demo", lambda: any(a.heartbeats for a in env.store.attempts_of("demo")))
    assert snap["summary"]["flowStatus"] == "RUNNING"
    return snap


@pytest.fixture
def completed(env):
    env.start(PollingFlow(), flow_id="done")
    env.drive()
    return env.inspect("done")


def line_with(text: str, *parts: str) -> str:
    for ln in text.splitlines():
        if all(p in ln for p in parts):
            return ln
    raise AssertionError(f"no line with {parts} in:\n{text}")


def test_live_view_of_a_running_step(running):
    from dexcli.cli.discovery import installed
    from dexcli.cli.plugin_cmds import hints_for

    hints = hints_for(installed().get("polling"), "demo")  # the polling plugin's: complete-job
    text = render(live_view(running, "/tmp/x/dex.db", hints=hints))
    lines = text.splitlines()
    assert lines[0].strip() == "dex · PollingFlow · demo · db /tmp/x/dex.db"
    assert line_with(text, "✓ StartJob-1", "goTo AwaitJob")
    head = line_with(text, "▶ AwaitJob-1", "attempt 1/3", "running")
    assert head.index("AwaitJob-1") < head.index("attempt 1/3")
    hb = line_with(text, "heartbeat", "ago · times out in")
    assert re.search(r"heartbeat\s+[█░]{18}\s+\d+\.\d s ago · times out in \d+\.\d s", hb), hb
    at = line_with(text, "attempt  ", "left (ExecuteMethodTimeout 10 m)")
    assert re.search(r"[█░]{18}\s+9 m \d+ s left", at), at
    assert line_with(text, "total", "left (TotalDuration 10 m)")
    assert line_with(text, "checkpoint", "RUNNING")
    assert line_with(text, "JobProgress")
    q, r = line_with(text, "+0.0 s", "QUEUED"), line_with(text, "RUNNING", "#AwaitJob-1")
    assert lines.index(q) < lines.index(r)
    assert line_with(text, "complete early:  dex complete-job demo", "inspect:  dex inspect demo")


def test_live_view_without_plugin_hints_offers_inspect_only(running):
    hint = line_with(render(live_view(running, "dex.db")), "inspect:  dex inspect demo")
    assert "complete-job" not in hint


def test_live_view_shows_the_clock_offset(running):
    assert "clock +2 m" in render(live_view(running, "db", offset=120.0)).splitlines()[0]


def test_live_view_of_a_completed_flow_has_no_hints(completed):
    text = render(live_view(completed, "dex.db"))
    assert line_with(text, "✓ AwaitJob-1", "gracefulComplete")
    assert "complete-job" not in text and "▶ " not in text


def test_final_card_completed(completed):
    text = render(final_card(completed))
    assert line_with(text, "COMPLETED in 6.0 s", 'result: "artifact for done"')
    assert line_with(text, "dex inspect done")


def test_final_card_failed(env):
    env.start(PollingFlow(), flow_id="slow")
    from dexcli.engine.host import StoreHost
    from dexcli_flows.job_service import FakeJobService

    FakeJobService(StoreHost(env.store, env.clock)).configure_job("slow", duration_seconds=900)
    env.drive()
    snap = env.inspect("slow")
    text = render(final_card(snap))
    # On the pure virtual clock the deadlines tie and StartToClose wins, as the mock-up shows.
    assert line_with(text, "FAILED in 10 m", "waiting for job slow failed: StartToClose: ")
    live = render(live_view(snap, "dex.db"))
    assert line_with(live, "✗ AwaitJob-1", "StartToClose after attempt 1/3")
    assert line_with(live, "✓ RecordJobWaitFailure-1", "forceFail")


def test_inspect_view_of_a_running_flow_explains_what_it_waits_on(running):
    text = render(inspect_view(running))
    lines = text.splitlines()
    assert re.match(r" PollingFlow · demo · RUNNING for \d+\.\d s", lines[0])
    wait = line_with(text, "Waiting on:", "AwaitJob-1 attempt 1")
    assert "last heartbeat" in wait and "Heartbeat timeout in" in wait
    assert line_with(text, "StartJob-1", "COMPLETED", "goTo AwaitJob")
    assert line_with(text, "AwaitJob-1", "RUNNING", "1/3")
    assert line_with(text, "checkpoint", "RUNNING")
    assert line_with(text, "QUEUED", "#AwaitJob-1") and line_with(text, "RUNNING", "#AwaitJob-1")
    hist = lines.index(line_with(text, "History"))
    assert "FlowStarted" in lines[hist + 1]
    assert line_with(text, "StepExecuteCompleted", "StartJob-1")


def test_inspect_view_of_a_completed_flow(completed):
    text = render(inspect_view(completed))
    assert text.splitlines()[0].startswith(" PollingFlow · done · COMPLETED after 6.0 s")
    assert line_with(text, "Result:", '"artifact for done"')
    assert "Waiting on" not in text
    assert line_with(text, "FlowClosed", "COMPLETED")


def test_line_differ_prints_each_thing_once(env):
    env.start(PollingFlow(), flow_id="demo")
    differ = LineDiffer()
    seen: list[str] = []

    def until() -> bool:  # called after each transition: diff what it committed
        seen.extend(differ.lines(env.inspect("demo")))
        return not env.store.get_flow("demo").is_running

    env.drive(until=until)
    seen.extend(differ.lines(env.inspect("demo")))
    assert differ.lines(env.inspect("demo")) == []  # nothing new
    assert len(seen) == len(set(seen))
    text = "\n".join(seen)
    assert "✉ JobProgress QUEUED" in text and "✉ JobProgress RUNNING" in text
    assert "✓ AwaitJob-1 gracefulComplete" in text


@pytest.mark.parametrize("env_vars", [{"NO_COLOR": "1"}, {}])
def test_cli_output_has_no_ansi_codes_when_piped(cli, env_vars):
    # CliRunner's stdout is not a TTY; with or without NO_COLOR there are no escape codes.
    res = cli("run", "polling", "--flow-id", "demo", "--time-skip", env={"NO_COLOR": "", "TERM": "xterm-256color",
                                                                      **env_vars})
    assert res.exit_code == 0
    assert not ANSI.search(res.output)
    assert not ANSI.search(cli.ok("inspect", "demo", env={"NO_COLOR": "", **env_vars}).output)
    assert not ANSI.search(cli.ok("list", env={"NO_COLOR": "", **env_vars}).output)


def test_a_hint_for_a_step_is_offered_only_while_that_step_is_open(running):
    from dexcli.plugins import Hint

    hints = (Hint("complete early:  dex complete-job demo", while_step="AwaitJob"),)
    assert "complete-job" in render(live_view(running, "dex.db", hints=hints))
    done = json.loads(json.dumps(running))
    for step in done["steps"]:
        if step["stepType"] == "AwaitJob":
            step["status"] = "COMPLETED"  # the job step is done; the flow still runs
    assert "complete-job" not in render(live_view(done, "dex.db", hints=hints))


def test_at_80_columns_long_lines_wrap_under_themselves_not_to_column_0(running):
    from dexcli.plugins import Hint

    hints = (Hint("complete early:  dex complete-job a-flow-id-long-enough-to-push-the-footer-past-80-columns"),)
    console = Console(width=80, record=True, no_color=True, file=io.StringIO())
    console.print(live_view(running, "/tmp/a/rather/long/path/to/dex.db", hints=hints))
    lines = console.export_text().splitlines()
    assert all(len(ln) <= 80 for ln in lines)
    footer = [i for i, ln in enumerate(lines) if "complete-job" in ln][0]
    assert lines[footer + 1].startswith("   ") and "inspect demo" in " ".join(lines[footer:])
    assert all(not ln or ln.startswith(" ") or ln.startswith(("dex", "─", "━")) or ln[0] in "✓✗▶○…⊘"
               for ln in lines)  # nothing but the header and rules starts at column 0


def test_during_backoff_the_failed_attempts_are_drawn_under_their_step():
    from dexcli.testing import DexTestEnv
    from tests.engine.attribute_flows import RetryFlow

    with DexTestEnv(start=0.0) as env:
        env.start(RetryFlow(), 5, "b")
        env.drive(["b"], until=lambda: env.store.steps_of("b")[0].status.value == "BACKOFF")
        text = render(live_view(env.inspect("b"), "dex.db")).splitlines()
    step = next(i for i, ln in enumerate(text) if "FailsOnce-1" in ln and "attempt 2" in ln)
    failed = next(i for i, ln in enumerate(text) if "✗ attempt 1" in ln)
    assert step < failed


def test_the_final_card_starts_on_its_first_line(completed):
    assert render(final_card(completed)).splitlines()[0].strip().startswith("COMPLETED")
