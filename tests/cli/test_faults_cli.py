"""Faults in user code, as the CLI shows them: a failed attempt's file:line in `dex inspect`,
its traceback in `--json`, and a flow constructor that raises as one line, exit 2."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from tests.cli.cli_helpers import Cli, assert_error

FAULTY = '''
from dexcli import Context, Flow, RetryPolicy, Step, StepDecision, StepList, StepOptions, graceful_complete


def parse(text: str) -> int:
    return int(text)


class Parse(Step[str]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_retry=RetryPolicy(maximum_attempts=2))

    def execute(self, context: Context, input: str) -> StepDecision:
        return graceful_complete(parse(input))


def load_config() -> dict[str, str]:
    raise ValueError("no config file")


class ParseFlow(Flow[str]):
    def __init__(self) -> None:
        self.parse = Parse()

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(self.parse)


class RaisingFlow(ParseFlow):
    def __init__(self) -> None:
        super().__init__()
        self.config = load_config()


class TypeErrorFlow(ParseFlow):
    def __init__(self) -> None:
        super().__init__()
        self.size = len(5)
'''


@pytest.fixture
def faulty(tmp_path: Path) -> Path:
    path = tmp_path / "userflows" / "faulty.py"
    path.parent.mkdir()
    path.write_text(textwrap.dedent(FAULTY))
    return path


def line_of(path: Path, fragment: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if fragment in line)


def test_inspect_shows_where_a_failed_attempt_raised_and_json_carries_the_traceback(cli: Cli, faulty: Path) -> None:
    cli.ok("run", "--file", f"{faulty}:ParseFlow", "--input", '"x"', "--flow-id", "f", "--time-skip", code=1)
    place = f"userflows/faulty.py:{line_of(faulty, 'return int(text)')}"
    text = cli.ok("inspect", "f").stdout
    failed = [line for line in text.splitlines() if " FAILED   builtins.ValueError" in line]  # the attempt rows
    assert len(failed) == 2 and all(line.rstrip().endswith(f"at {place}") for line in failed), text
    snap = cli.json("inspect", "f", "--json")
    [step] = snap["steps"]
    for attempt in step["attempts"]:
        frames = [line for line in attempt["stackTrace"].splitlines() if line.startswith("  File ")]
        assert frames[0] == f'  File "{faulty}", line {line_of(faulty, "return int(text)")}, in parse'
        assert frames[1].endswith(f'line {line_of(faulty, "graceful_complete(parse(input))")}, in execute')
        assert len(frames) == 2  # dex's frames trimmed


@pytest.mark.parametrize("command", [("run", "--input", '"x"'), ("graph",), ("lint",)])
def test_a_flow_constructor_that_raises_is_one_line_with_its_place(cli: Cli, faulty: Path,
                                                                    command: tuple[str, ...]) -> None:
    res = cli(command[0], "--file", f"{faulty}:RaisingFlow", *command[1:])
    assert_error(res, 2, "RaisingFlow: creating the flow failed: ValueError: no config file",
                 f"(at userflows/faulty.py:{line_of(faulty, 'raise ValueError')})")


@pytest.mark.parametrize("command", [("run", "--input", '"x"'), ("graph",), ("lint",)])
def test_a_type_error_inside_init_is_not_called_missing_arguments(cli: Cli, faulty: Path,
                                                                   command: tuple[str, ...]) -> None:
    res = cli(command[0], "--file", f"{faulty}:TypeErrorFlow", *command[1:])
    line = assert_error(res, 2, "creating the flow failed: TypeError: object of type 'int' has no len()",
                        f"(at userflows/faulty.py:{line_of(faulty, 'len(5)')})")
    assert "no arguments" not in line


BROKEN_PLUGINS = '''
from dexcli.plugins import FlowPlugin

from broken_flows import RaisingFlow

RAISES = FlowPlugin(name="raises", flow=RaisingFlow, description="Its constructor raises.")
UNIMPORTABLE = FlowPlugin(name="unimportable", flow="unimportable_flows:Flow", description="Its module raises.")
'''
ENTRY_POINTS = """
[dex.flows]
raises = broken_plugins:RAISES
unimportable = broken_plugins:UNIMPORTABLE
"""


@pytest.fixture
def broken_plugins(tmp_path: Path, faulty: Path, monkeypatch: pytest.MonkeyPatch):
    """Two installed flow plugins: one whose flow's constructor raises, one whose module does."""
    from dexcli.cli.discovery import installed

    site = tmp_path / "site"
    info = site / "broken_plugins-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    (site / "broken_plugins.py").write_text(textwrap.dedent(BROKEN_PLUGINS))
    (site / "broken_flows.py").write_text(faulty.read_text())
    (site / "unimportable_flows.py").write_text("import json\n\nSETTINGS = json.loads('{')\n")
    monkeypatch.syspath_prepend(str(site))
    installed.cache_clear()
    yield site
    installed.cache_clear()
    for name in ("broken_plugins", "broken_flows", "unimportable_flows"):
        sys.modules.pop(name, None)


@pytest.mark.parametrize("command", [("run", "--input", '"x"'), ("graph",), ("lint",)])
def test_a_flow_plugin_that_cannot_be_created_is_one_line_too(cli: Cli, broken_plugins: Path,
                                                              command: tuple[str, ...]) -> None:
    ctor = line_of(broken_plugins / "broken_flows.py", "raise ValueError")
    assert_error(cli(command[0], "raises", *command[1:]), 2,
                 "broken_flows:RaisingFlow: creating the flow failed: ValueError: no config file",
                 f"(at site/broken_flows.py:{ctor})")
    assert_error(cli(command[0], "unimportable", *command[1:]), 2,
                 "unimportable_flows:Flow: loading the flow failed: JSONDecodeError",
                 "(at site/unimportable_flows.py:3)")
