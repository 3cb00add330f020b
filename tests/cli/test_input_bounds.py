"""JSON from the command line within bounds (dexcli.cli.inputs): an @file of at most 64 MiB of
UTF-8, at most 100 levels deep, finite numbers of at most 4300 digits, no lone surrogate. Each
breach is one `dex: error:` line and exit 2, before anything starts."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from dexcli.cli.inputs import MAX_INPUT_BYTES
from dexcli.store import Store
from tests.cli.cli_helpers import assert_error, start_flow, subprocess_env

PAYMENT_INPUT = '{"payment_id": "p-1", "amount": 250, "polls_to_settle": 2, "poll_seconds": 1}'
REQUEST = {"title": "t", "amount": 5, "expire_after_hours": 5, "expire_after_seconds": None}


def _no_flows(db: Path) -> bool:
    if not db.exists():
        return True
    store = Store(db)
    try:
        return not store.list_flows()
    finally:
        store.close()


def test_endless_input_is_refused_after_64_mib(db, tmp_path):
    """`--input @/dev/zero` under a 2 GiB address-space limit: one line, exit 2, quickly
    (before, it read until MemoryError)."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))

    proc = subprocess.run([sys.executable, "-m", "dexcli", "run", "three-steps", "--input", "@/dev/zero"],
                          env=subprocess_env(db), capture_output=True, text=True, timeout=60, preexec_fn=limit)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert proc.stderr.splitlines() == ["dex: error: --input: /dev/zero is larger than 64 MiB"]


def test_an_input_file_one_byte_over_the_bound_is_refused(cli, tmp_path):
    big = tmp_path / "big.json"
    with big.open("wb") as f:  # sparse: no disk used
        f.truncate(MAX_INPUT_BYTES + 1)
    assert_error(cli("run", "three-steps", "--input", f"@{big}"), 2, "larger than 64 MiB")
    assert _no_flows(cli.db)


def test_an_input_file_at_the_bound_is_read(cli, tmp_path):
    exact = tmp_path / "exact.json"
    exact.write_bytes(b"5" + b" " * (MAX_INPUT_BYTES - 1))
    cli.ok("run", "three-steps", "--input", f"@{exact}", "--flow-id", "ok", "--time-skip")


def _deep(n: int) -> str:
    return "[" * n + "]" * n


@pytest.mark.parametrize(("content", "said"), [
    (b"\xff\xfe5", "is not UTF-8 text (byte 0)"),
    (b'{"a": "caf\xe9"}', "is not UTF-8 text (byte 10)"),
    (_deep(100_000).encode(), "nests deeper than 100 levels"),
    (_deep(500).encode(), "nests deeper than 100 levels"),
    (b"9" * 5000, "has more than 4300 digits"),
])
def test_a_bad_input_file_is_one_line(cli, tmp_path, content, said):
    path = tmp_path / "input.json"
    path.write_bytes(content)
    assert_error(cli("run", "three-steps", "--input", f"@{path}"), 2, "--input", said)
    assert _no_flows(cli.db)


@pytest.mark.parametrize(("text", "said"), [
    (_deep(101), "nests deeper than 100 levels"),
    ('{"a": ' * 101 + "1" + "}" * 101, "nests deeper than 100 levels"),
    ("NaN", "NaN is not a JSON number"),
    ("-Infinity", "-Infinity is not a JSON number"),
    ("1e400", "out of range"),
    ('"\\ud800"', "lone surrogate (\\ud800)"),
    ('{"\\udc00": 1}', "lone surrogate (\\udc00)"),
    ('"\x1b[2J"', "is not valid JSON: Invalid control character"),
])
def test_a_bad_inline_input_is_one_line(cli, text, said):
    assert_error(cli("run", "three-steps", "--input", text), 2, "--input", said)


def test_the_deepest_input_taken_is_100_levels(cli, tmp_path):
    flow = tmp_path / "anything.py"
    flow.write_text(
        "from typing import Any\nDeep = list[Any]\n"
        "from dexcli import Context, Flow, Step, StepDecision, StepList, graceful_complete\n"
        "class Echo(Step[Deep]):\n"
        "    def execute(self, context: Context, input: Deep) -> StepDecision:\n"
        "        return graceful_complete(1)\n"
        "class AnyFlow(Flow[Deep]):\n"
        "    def get_steps(self) -> StepList[Deep]:\n"
        "        return StepList.start_step(Echo())\n")
    cli.ok("run", "--file", f"{flow}:AnyFlow", "--input", _deep(100), "--time-skip")


def test_a_lone_surrogate_in_rpc_input_is_one_line(cli):
    start_flow(cli.db, "approval", "ap", REQUEST)
    assert_error(cli("rpc", "ap", "approve", "--input", '"\\ud800"'), 2, "lone surrogate")
    assert_error(cli("rpc", "ap", "approve", "--input", _deep(300)), 2, "nests deeper")
    assert cli.json("rpc", "ap", "pending") == 0  # nothing was published


@pytest.mark.parametrize("value", ['"\\ud800"', "9" * 5000, _deep(200)])
def test_bad_json_in_attribute_and_equals_is_one_line(cli, value):
    start_flow(cli.db, "three-steps", "a", 1)
    assert_error(cli("wait", "a", "-a", "X", "--equals", value, "--timeout", "1s"), 2, "--equals")
    payment = f"{Path(__file__).resolve().parents[2] / 'flows' / 'payment.py'}:PaymentFlow"
    assert_error(cli("run", "--file", payment, "--input", PAYMENT_INPUT, "--attribute", f"settled_total={value}"), 2,
                 "--attribute settled_total")


@pytest.mark.parametrize("args", [("inspect", "\udcff"), ("list", "-q", "FlowId = '\udcff'"),
                                  ("run", "three-steps", "--input", "1", "--flow-id", "a\udcffb"),
                                  ("stop", "\udcff"), ("time", "skip", "1s", "\udcff")])
def test_an_argument_that_is_not_utf8_is_one_line(cli, args):
    start_flow(cli.db, "three-steps", "a", 1)
    assert_error(cli(*args), 2, "is not UTF-8 text")


def test_an_argument_that_is_not_utf8_is_one_line_on_the_quick_path(db):
    """`dex inspect <bytes>` is served without typer (dexcli.cli.quick): the same line."""
    start_flow(db, "three-steps", "a", 1)
    proc = subprocess.run([sys.executable, "-m", "dexcli", "inspect", b"\xff"], env=subprocess_env(db),
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and proc.stderr == "dex: error: argument b'\\xff' is not UTF-8 text\n", proc.stderr


@pytest.mark.parametrize("value", ["true", "false", "5.0", '"5"'])
def test_an_int_input_takes_only_a_json_integer(cli, value):
    """`true` is no int (bool is an int subclass in Python; the official SDK's codec refuses it)."""
    assert_error(cli("run", "three-steps", "--input", value), 2, "needs --input of type int", f"got {value}")
    assert _no_flows(cli.db)
