"""Every duration the CLI takes goes through one parser (dexcli.cli.config.parse_duration): finite,
not negative, at most 100 years. `nan`, `inf`, `''` and absurd skips are one line and exit 2,
and nothing moves: a flow's clock never leaves what a date can show."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dexcli.store import Store
from tests.cli.cli_helpers import assert_error, start_flow, subprocess_env

DEX = [sys.executable, "-m", "dexcli"]


def _dex(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real `dex` (a --crash-after that fires at once would end this test process)."""
    return subprocess.run([*DEX, *args], env=subprocess_env(db), capture_output=True, text=True, timeout=30)


def _one_error_line(proc: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dex: error: "), proc.stderr
    for f in fragments:
        assert f in lines[0], (f, lines[0])


@pytest.mark.parametrize("duration", ["99999999999h", "1e20", "inf", "nan", "-1", "", "1e400s"])
def test_an_absurd_time_skip_is_refused_and_the_flow_stays_readable(cli, duration):
    start_flow(cli.db, "three-steps", "a", 1)
    assert_error(cli("time", "skip", "--", duration, "a"), 2, "time skip")
    store = Store(cli.db)
    try:
        assert store.flow_offsets(None) == {}  # nothing moved
    finally:
        store.close()
    cli.ok("inspect", "a")
    cli.ok("time", "reset", "a")
    cli.ok("list")


def test_the_longest_skip_is_100_years_and_then_every_command_still_reads_the_flow(cli):
    start_flow(cli.db, "three-steps", "a", 1)
    assert_error(cli("time", "skip", "36501d", "a"), 2, "more than 100 years")
    assert "now +876000 h ahead" in cli.ok("time", "skip", "36500d", "a").stdout
    cli.ok("inspect", "a")
    cli.ok("inspect", "a", "--json")
    cli.ok("list")
    cli.ok("time", "reset", "a")
    cli.ok("list")
    cli.ok("inspect", "a")


@pytest.mark.parametrize("value", ["nan", "inf", "", "-3s", "1e300"])
def test_crash_after_takes_only_a_real_duration(db, value):
    _one_error_line(_dex(db, "run", "three-steps", "--input", "1", "--time-skip", "--crash-after", value),
                    "--crash-after")


@pytest.mark.parametrize("value", ["nan", "inf", "1e300"])
def test_wait_timeout_takes_only_a_real_duration(db, value):
    start_flow(db, "three-steps", "a", 1)
    _one_error_line(_dex(db, "wait", "a", "-a", "Anything", "--equals", "1", "--timeout", value), "--timeout")


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_a_plugin_duration_option_takes_only_a_real_duration(cli, value):
    assert_error(cli("run", "polling", "--job-duration", value), 2, "--job-duration")


@pytest.mark.parametrize(("flag", "value", "said"), [
    ("--timeout", "99999999999999s", "more than 100 years"),
    ("--start-delay", "99999999999999s", "more than 100 years"),
    ("--timeout", "1e300", "more than 100 years"),
    ("--timeout", "3000000000s", "within int32"),
    ("--start-delay", "3000000000", "within int32"),
])
def test_huge_start_options_are_one_line(cli, flag, value, said):
    assert_error(cli("run", "three-steps", "--input", "1", flag, value), 2, said)


def test_a_huge_busy_timeout_is_refused(cli):
    start_flow(cli.db, "three-steps", "a", 1)
    assert_error(cli("list", env={"DEX_BUSY_TIMEOUT": "1e300"}), 2, "busy timeout")


@pytest.mark.parametrize("limit", ["99999999999999999999999", "1000001"])
def test_list_limit_is_bounded(cli, limit):
    start_flow(cli.db, "three-steps", "a", 1)
    assert_error(cli("list", "--limit", limit), 2, "--limit")
