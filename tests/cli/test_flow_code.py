"""Which commands run a flow's code, and from where (README, Security notes): commands that only
read import none; `dex rpc` runs a handler only from code the user names (an installed flow, or
`--file` for a flow started from a file); a flow's folder never shadows a module dex imports.

Real `dex` processes: whether a module was imported is seen from a marker its import appends to.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.cli.cli_helpers import subprocess_env

MARKED = '''
import os
from pathlib import Path

from dexcli import Context, Flow, RPCResult, Step, StepDecision, StepList, graceful_complete, rpc

with Path(os.environ["MARKER"]).open("a") as marker:
    marker.write("imported\\n")


class Only(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(input)


class MarkedFlow(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Only())

    @rpc
    def answer(self, context: Context) -> RPCResult[int]:
        return RPCResult(42)
'''

PLAIN = '''
from dexcli import Context, Flow, Step, StepDecision, StepList, graceful_complete
from helper import double  # a module of the flow's own, beside it


class Only(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(double(input))


class PlainFlow(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Only())
'''


@pytest.fixture
def marked(tmp_path: Path) -> Path:
    flow = tmp_path / "code" / "marked.py"
    flow.parent.mkdir()
    flow.write_text(textwrap.dedent(MARKED))
    return flow


def dex(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = subprocess_env(tmp_path / "dex.db")
    env["MARKER"] = str(tmp_path / "imported")
    return subprocess.run([sys.executable, "-m", "dexcli", *args], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)


def imports(tmp_path: Path) -> int:
    marker = tmp_path / "imported"
    n = len(marker.read_text().splitlines()) if marker.exists() else 0
    marker.unlink(missing_ok=True)
    return n


READS = (["list"], ["inspect", "m"], ["inspect", "m", "--json"], ["inspect", "m", "--timeline"], ["doctor"],
         ["watch", "m"], ["watch", "m", "--json"], ["lint", "--flow-id", "m"], ["time"])


def test_a_read_command_imports_no_flow_code(tmp_path: Path, marked: Path) -> None:
    assert dex(tmp_path, "run", "--file", f"{marked}:MarkedFlow", "--flow-id", "m", "--input", "1").returncode == 0
    assert imports(tmp_path) == 1
    for args in READS:
        res = dex(tmp_path, *args)
        assert res.returncode == 0, (args, res.stderr)
        assert imports(tmp_path) == 0, args


def test_rpc_runs_a_files_code_only_when_the_user_names_it(tmp_path: Path, marked: Path) -> None:
    assert dex(tmp_path, "run", "--file", f"{marked}:MarkedFlow", "--flow-id", "m", "--input", "1").returncode == 0
    imports(tmp_path)
    res = dex(tmp_path, "rpc", "m", "answer")
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.splitlines() == [
        "dex: error: flow m was started from a file, and dex rpc runs a file's code only when you name it: "
        f"add --file {marked}:MarkedFlow"]
    assert imports(tmp_path) == 0
    res = dex(tmp_path, "rpc", "m", "answer", "--file", f"{marked}:MarkedFlow")
    assert (res.returncode, res.stdout.strip()) == (0, "42"), res.stderr  # a read-only RPC, from the closed run
    assert imports(tmp_path) == 1


def test_rpc_refuses_a_file_of_another_flow_type(tmp_path: Path, marked: Path) -> None:
    assert dex(tmp_path, "run", "--file", f"{marked}:MarkedFlow", "--flow-id", "m", "--input", "1").returncode == 0
    other = tmp_path / "plain.py"
    other.write_text(textwrap.dedent(PLAIN))
    (tmp_path / "helper.py").write_text("def double(x):\n    return 2 * x\n")
    res = dex(tmp_path, "rpc", "m", "answer", "--file", f"{other}:PlainFlow")
    assert res.returncode == 2
    assert res.stderr.splitlines() == [
        f"dex: error: --file {other}:PlainFlow defines PlainFlow, but flow m is a MarkedFlow"]


@pytest.mark.parametrize("module", ["decimal", "tempfile"])
def test_files_beside_a_flow_do_not_replace_modules_dex_imports(tmp_path: Path, module: str) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "plain.py").write_text(textwrap.dedent(PLAIN))
    (code / "helper.py").write_text("def double(x):\n    return 2 * x\n")
    (code / f"{module}.py").write_text(f"raise SystemExit('the {module}.py beside the flow was imported')\n")
    for extra in ([], ["--json"]):
        res = dex(tmp_path, "run", "--file", f"{code / 'plain.py'}:PlainFlow", "--input", "2", *extra)
        assert res.returncode == 0, res.stderr
        assert "beside the flow" not in res.stderr
    assert "4" in dex(tmp_path, "list").stdout  # its own helper.py still imported


def test_resume_imports_a_stored_file_only_while_it_is_the_users_own(tmp_path: Path, marked: Path) -> None:
    """`dex resume` loads a flow started from a file from the path stored with the run: not once
    others can write that file (what it would run is then not the user's choice)."""
    from dexcli.cli.driver import build_engine
    from dexcli.cli.loader import load_flow
    from dexcli.store import Store

    os.environ["MARKER"] = str(tmp_path / "imported")  # (this process imports it to start the flow)
    try:
        store = Store(tmp_path / "dex.db")
        flow, ref = load_flow(None, f"{marked}:MarkedFlow")
        build_engine(store, time_skip=False).start_flow(flow, "m", 1, flow_ref=ref)  # started, not driven
        store.close()
    finally:
        del os.environ["MARKER"]
    imports(tmp_path)
    marked.chmod(0o666)
    res = dex(tmp_path, "resume", "m", "--time-skip")
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert f"the flow's code {marked} is not imported: other users can write it (mode 0666)" in res.stderr
    assert imports(tmp_path) == 0
    marked.chmod(0o644)
    assert dex(tmp_path, "resume", "m", "--time-skip").returncode == 0
    assert imports(tmp_path) == 1
