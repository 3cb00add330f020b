"""The official SDK's own README example (WaitFor on a Timer, a generator execute writing to a
Stream, an RPC) runs under dexcli unchanged but for its import line."""

from __future__ import annotations

import importlib.metadata
import re
import types
from typing import Any

from dexcli.testing import DexTestEnv
from tests.parity.parity_kit import official


def _readme_counter_flow() -> str:
    official()  # skipped (or failing in CI) without the official SDK
    readme = importlib.metadata.metadata("dex-python-sdk").get_payload()  # type: ignore[attr-defined]
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    [block] = [b for b in blocks if "class CounterFlow(dex.Flow[str])" in b]
    assert "import dex\n" in block
    return block.replace("import dex\n", "import dexcli as dex\n")


def test_the_sdk_readme_counter_flow_runs_unchanged_under_dexcli() -> None:
    module = types.ModuleType("sdk_readme_counter")
    exec(compile(_readme_counter_flow(), "sdk_readme_counter.py", "exec"), module.__dict__)
    flow: Any = module.flow
    assert module.registry.get("Counter") is not None  # dex.Registry((flow,)) accepted it
    with DexTestEnv(start=0.0) as env:
        env.start(flow, "hello", "c")
        env.drive(["c"], until=lambda: env.store.get_flow("c").status.value != "RUNNING" or
                  any(s.status.value == "WAITING" for s in env.store.steps_of("c")))
        assert env.client.invoke_rpc(flow.increment, "c", 41) == 42
        result = env.client.wait_for_flow("c")
        assert result.single_output() == "hello"
        assert env.clock.now() >= 1.0  # waited for its one-second Timer
        assert env.stream_values("c", "progress") == ["running"]
