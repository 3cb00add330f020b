"""Helpers shared by the engine rule tests (times relative to the virtual start, inspect lookups)."""

import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from dexcli.testing import DexTestEnv


def at(iso: str) -> float:
    """ISO time of the inspect JSON -> epoch seconds."""
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def rel(env: DexTestEnv, iso: str | None) -> float | None:
    """Seconds between the env's start and an ISO time of the inspect JSON."""
    return None if iso is None else round(at(iso) - env.t0, 3)


def step(env: DexTestEnv, flow_id: str, seid: str) -> dict[str, Any]:
    for s in env.inspect(flow_id)["steps"]:
        if s["stepExecutionId"] == seid:
            return s
    raise AssertionError(f"{flow_id} has no step execution {seid}: "
                         f"{[s['stepExecutionId'] for s in env.inspect(flow_id)['steps']]}")


def attempts(env: DexTestEnv, flow_id: str, seid: str) -> list[dict[str, Any]]:
    return step(env, flow_id, seid)["attempts"]


def attempt_starts(env: DexTestEnv, flow_id: str, seid: str) -> list[float]:
    return [rel(env, a["startTime"]) for a in attempts(env, flow_id, seid)]


def history(env: DexTestEnv, flow_id: str) -> list[dict[str, Any]]:
    return env.inspect(flow_id)["history"]


def history_types(env: DexTestEnv, flow_id: str) -> list[str]:
    return [e["type"] for e in history(env, flow_id)]


def step_ids(env: DexTestEnv, flow_id: str) -> list[str]:
    return [s["stepExecutionId"] for s in env.inspect(flow_id)["steps"]]


def within(seconds: float, fn: Callable[[], Any]) -> Any:
    """Run fn in a daemon thread; fail (instead of hanging the suite) if it does not return.

    Only for tests that document an engine bug which makes a drive loop wait forever.
    """
    out: dict[str, Any] = {}

    def go() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            out["error"] = exc

    th = threading.Thread(target=go, daemon=True)
    th.start()
    th.join(seconds)
    if th.is_alive():
        raise AssertionError(f"did not return within {seconds} s of wall time (the engine waits forever)")
    if "error" in out:
        raise out["error"]
    return out.get("value")


def inspect_when(env: DexTestEnv, flow_id: str, when: Callable[[], bool]) -> dict[str, Any]:
    """`env.inspect(flow_id)` taken while a drive runs, the first time `when()` holds: a drive
    releases what it leaves running as it ends, so a mid-run picture is taken inside it."""
    seen: dict[str, Any] = {}

    def until() -> bool:
        if not when():
            return False
        seen["snap"] = env.inspect(flow_id)
        return True

    env.drive([flow_id], until=until)
    return seen["snap"]
