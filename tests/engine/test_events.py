"""Event listeners cannot stop the engine: one that raises is removed and the flow goes on."""

from __future__ import annotations

from typing import Any

from dexcli.engine.events import Event
from dexcli.testing import DexTestEnv
from dexcli_flows.three_steps import ThreeStepFlow


def test_a_listener_that_raises_is_removed_and_the_flow_completes() -> None:
    seen: list[str] = []
    errors: list[tuple[Any, Exception]] = []

    def broken(ev: Event) -> None:
        seen.append(ev.type)
        raise BrokenPipeError("stdout closed")

    with DexTestEnv() as env:
        env.engine.events.listeners.append(broken)
        env.engine.events.on_listener_error = lambda fn, exc: errors.append((fn, exc))
        result = env.run(ThreeStepFlow(), 1, "f")
        assert result.is_terminal and result.status.name == "COMPLETED"
        assert seen == ["flowStarted"]  # called once, then removed
        assert [type(e) for _, e in errors] == [BrokenPipeError] and errors[0][0] is broken
        assert env.events[-1]["type"] == "flowClosed"  # the other listeners still hear everything
