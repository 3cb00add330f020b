"""Bad input to every command: no traceback, one `dex: error:` line, the documented exit code.

The commands and their parameters are read from the typer app (plugin commands and `dex run`'s
plugin options included), so a command added later is fuzzed too. Each value parameter of each
command gets each bad value below while the others hold valid ones. A parameter of the kind a
value is meant for must refuse it with the usage code (a lookup of an unknown flow may say not
found); any other parameter may take it, but a failure is still one line with a documented code.
The codes are read from the CLI's error classes. A handful of cases run through the real `dex`.
"""

from __future__ import annotations

import re
import resource
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import typer
from typer import _click as click

from dexcli.cli.errors import CliError, NotFoundError, UsageError
from dexcli.cli.main import app
from dexcli.sdk.errors import DexError
from tests.cli.cli_helpers import Cli, start_flow, subprocess_env

USAGE, NOT_FOUND = UsageError.exit_code, NotFoundError.exit_code
DONE = "done"  # a COMPLETED three-steps flow: commands given it return at once

BAD_DURATIONS = ("nan", "inf", "-5s", "", "99999999999h", "1e400")
HUGE_NUMBERS = ("9" * 5000, "99999999999999999999999", "-7")
BAD_JSON = ("{not json", "NaN", "[" * 5000 + "]" * 5000, '"\\ud800"', "9" * 5000)
CONTROL = "a\x1b]0;pwned\x07\x1b[2J\nb"
UNKNOWN_ID = "no-such-flow"
NOT_UTF8_ARG = "\udcff"  # how Python hands over a non-UTF-8 byte of argv


class Param(NamedTuple):
    path: tuple[str, ...]  # ("time", "skip")
    name: str
    opt: str | None  # "--timeout"; None for an argument
    kind: str  # duration, json, int, lookup, text

    def __str__(self) -> str:
        return " ".join(self.path) + " " + (self.opt or self.name.upper())


def _kind(path: tuple[str, ...], p: Any) -> str:
    help_text = getattr(p, "help", None) or ""
    if p.param_type_name == "argument" and p.name in ("flow_id", "flow_ids"):
        return "lookup"
    if type(p.type).__name__ in ("IntRange", "IntParamType"):
        return "int"
    if p.name in ("input", "equals") or (p.name == "attribute" and path == ("run",)):
        return "json"
    plugin_duration = "[" in help_text and p.name in _plugin_durations()
    if re.search(r"\b\d+(ms|s|m|h)\b", help_text) or "delay" in help_text or plugin_duration:
        return "duration"
    return "text"


def _plugin_durations() -> set[str]:
    from dexcli.cli.plugin_cmds import plugins

    return {o.dest for p in plugins().plugins.values() for o in p.run_options if o.kind == "duration"}


def _commands(group: Any, ctx: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        if hasattr(cmd, "list_commands"):
            yield from _commands(cmd, click.Context(cmd, parent=ctx), (*path, name))
        else:
            yield (*path, name), cmd


def _app_commands() -> list[tuple[tuple[str, ...], Any]]:
    root = typer.main.get_command(app)
    return list(_commands(root, click.Context(root)))


COMMANDS = _app_commands()


def _params() -> list[Param]:
    out = []
    for path, cmd in COMMANDS:
        for p in cmd.params:
            if p.name == "help" or getattr(p, "is_flag", False) or type(p.type).__name__ == "BoolParamType":
                continue
            opt = None if p.param_type_name == "argument" else max(p.opts, key=len)
            out.append(Param(path, p.name, opt, _kind(path, p)))
    return out


PARAMS = _params()


def _valid(path: tuple[str, ...], p: Any) -> list[str]:
    """A value of parameter `p` the command takes (or refuses for a reason of its own)."""
    name = p.name
    if name in ("flow_id", "flow_ids"):
        return [DONE]
    if name == "flow":
        return ["three-steps"]
    if name == "duration":
        return ["1s"]
    if name == "equals":
        return ["1"]
    if name == "step_execution_id":
        return ["Step1-1"]
    if name == "attribute":
        return ["X"]
    return ["x"]


def _argv(path: tuple[str, ...], cmd: Any, target: str | None, value: str) -> list[str]:
    """The command line with `value` for the parameter named `target` and valid values for the
    other arguments and required options (and a fast, quiet `dex run`)."""
    args: list[str] = list(path)
    for p in cmd.params:
        if p.name == "help":
            continue
        is_arg = p.param_type_name == "argument"
        opt = None if is_arg else max(p.opts, key=len)
        if p.name == target:
            args += [value] if is_arg else [opt, value]
        elif is_arg and (p.required or p.name in ("flow", "flow_ids")):
            args += _valid(path, p)
        elif not is_arg and p.required:
            args += [opt, *_valid(path, p)]
    if path == ("run",):
        args += ["--time-skip"] + ([] if target == "input" else ["--input", "1"])
    return args


def _error_codes() -> set[int]:
    """Every exit code a user error is documented with (on the classes that carry it)."""
    from dexcli.store.errors import StoreError

    codes, todo = set(), [CliError, DexError, StoreError]
    while todo:
        cls = todo.pop()
        codes.add(getattr(cls, "exit_code", USAGE))
        todo += cls.__subclasses__()
    return codes


ERROR_CODES = _error_codes()


def _check(res: Any, what: str, must: set[int] | None) -> None:
    """No traceback; a failure is one `dex: error:` line (warnings aside) with a documented
    code; with `must`, the command had to fail with one of those codes."""
    assert res.exception is None or isinstance(res.exception, SystemExit), (what, repr(res.exception))
    assert "Traceback" not in res.output and "Traceback" not in res.stderr, (what, res.stderr[-800:])
    lines = [ln for ln in res.stderr.splitlines() if not ln.startswith("dex: warning: ")]
    errors = [ln for ln in lines if ln.startswith("dex: error: ")]
    if must is not None:
        assert res.exit_code in must, (what, res.exit_code, res.stderr[-800:])
    if errors or must is not None:
        assert len(lines) == 1 and len(errors) == 1, (what, res.stderr[-800:])
        assert res.exit_code in ERROR_CODES, (what, res.exit_code)


def _must(param: Param, value: str, kind: str) -> set[int] | None:
    if value == NOT_UTF8_ARG:
        return {USAGE}
    if param.kind == "duration" and kind == "duration":
        return {USAGE}
    if param.kind == "int" and kind in ("huge", "duration"):
        return {USAGE}
    if param.kind == "json" and (kind in ("json", "file") or len(value) > 4300):  # JSON has big integers
        return {USAGE}
    if param.kind == "lookup" and kind in ("unknown", "control"):
        return {USAGE, NOT_FOUND}
    return None


@pytest.fixture(scope="module")
def fuzz_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("fuzz")
    start_flow(home / "dex.db", "three-steps", DONE, 1)
    Cli(home / "dex.db", home).ok("resume", DONE, "--time-skip")
    (home / "bad.bin").write_bytes(b'{"a": "\xff\xfe"}')
    return home


def _values(home: Path, param_kind: str) -> list[tuple[str, str]]:
    """Every bad value of the parameter's own kind, and one of each other kind (every value to
    every parameter would take a minute)."""
    by_kind = {"duration": BAD_DURATIONS, "huge": HUGE_NUMBERS, "json": BAD_JSON,
               "file": (f"@{home / 'bad.bin'}",), "control": (CONTROL,), "unknown": (UNKNOWN_ID,),
               "argv": (NOT_UTF8_ARG,)}
    own = {"duration": ("duration",), "int": ("huge", "duration"), "json": ("json", "file", "huge"),
           "lookup": ("unknown",)}.get(param_kind, ())
    plain = ("unknown", "file")  # a word and an @path are bad only where ids and JSON are read
    return [(v, kind) for kind, values in by_kind.items() if kind in own or kind not in plain
            for v in (values if kind in own else values[:1])]


def test_the_fuzz_reads_every_command_and_knows_its_kinds() -> None:
    """The kinds are guessed from the app: the ones this file was written against must be found."""
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"run", "resume", "watch", "inspect", "list", "stop", "rpc", "skip-timer", "wait", "doctor",
            "time skip", "time reset", "complete-job"} <= names
    kinds = {str(p): p.kind for p in PARAMS}
    assert {k for k, v in kinds.items() if v == "duration"} >= {
        "run --crash-after", "run --timeout", "run --start-delay", "run --job-duration", "wait --timeout",
        "time skip DURATION"}
    assert kinds["run --input"] == kinds["rpc --input"] == kinds["wait --equals"] == "json"
    assert kinds["list --limit"] == kinds["skip-timer --index"] == "int"
    assert kinds["inspect FLOW_ID"] == kinds["time skip FLOW_IDS"] == "lookup"


@pytest.mark.timeout(120)
def test_bad_input_to_every_parameter_of_every_command(fuzz_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(fuzz_home)
    by_path = dict(COMMANDS)
    checked = 0
    for param in PARAMS:  # a database per parameter: a flow one case starts is no other's
        db = fuzz_home / f"{'-'.join(param.path)}-{param.name}.db"
        shutil.copy(fuzz_home / "dex.db", db)
        cli = Cli(db, fuzz_home)
        for value, kind in _values(fuzz_home, param.kind):
            argv = _argv(param.path, by_path[param.path], param.name, value)
            _check(cli(*argv), f"dex {param} {value[:40]!r}", _must(param, value, kind))
            checked += 1
    cli = Cli(fuzz_home / "dex.db", fuzz_home)
    for path, cmd in COMMANDS:  # one word too many (an optional or variadic argument takes it)
        takes_more = any(p.param_type_name == "argument" and (not p.required or p.nargs == -1) for p in cmd.params)
        _check(cli(*_argv(path, cmd, None, ""), CONTROL), f"dex {' '.join(path)} + extra",
               None if takes_more else {USAGE})
        _check(cli("--db", NOT_UTF8_ARG, *_argv(path, cmd, None, "")), f"dex --db ... {' '.join(path)}", {USAGE})
    for path in (("list",), ("inspect", DONE), ("time", "reset", DONE)):  # a --db that is no database
        _check(cli("--db", str(fuzz_home / "bad.bin"), *path), f"dex --db bad.bin {' '.join(path)}", None)
    assert checked > 250


REAL_CASES = [
    ((b"time", b"skip", b"nan", DONE.encode()), USAGE),
    ((b"time", b"skip", b"99999999999h", DONE.encode()), USAGE),
    ((b"run", b"three-steps", b"--input", b"@/dev/zero"), USAGE),
    ((b"run", b"three-steps", b"--input", b"1", b"--crash-after", b"nan"), USAGE),
    ((b"wait", DONE.encode(), b"-a", b"X", b"--equals", b"1", b"--timeout", b"inf"), USAGE),
    ((b"list", b"--query", b"(" * 500 + b"FlowId = 'x'" + b")" * 500), USAGE),
    ((b"list", b"--limit", b"9" * 30), USAGE),
    ((b"inspect", b"\xff"), USAGE),
    ((b"inspect", UNKNOWN_ID.encode()), NOT_FOUND),
]


def _limit_memory() -> None:
    """2 GiB of address space: an unbounded read (the bug these cases pin) ends in MemoryError
    instead of taking the machine's memory."""
    resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))


def test_a_handful_through_the_real_dex(fuzz_home: Path) -> None:
    """The real `dex` (its quick inspect path and the typer app), all at once."""
    env = subprocess_env(fuzz_home / "dex.db")
    procs = [(args, code, subprocess.Popen([sys.executable, "-m", "dexcli", *args], env=env, cwd=fuzz_home,
                                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=_limit_memory))
             for args, code in REAL_CASES]
    try:
        for args, code, proc in procs:
            _, err = proc.communicate(timeout=60)
            lines = err.decode(errors="replace").splitlines()
            assert proc.returncode == code, (args[:4], proc.returncode, lines[-5:])
            assert len(lines) == 1 and lines[0].startswith("dex: error: "), (args[:4], lines[-5:])
    finally:
        for _, _, proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
