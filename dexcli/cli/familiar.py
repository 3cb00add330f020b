"""Hints for command names users bring from Temporal, the Dex CLI or DBOS: `dex signal` says
to use `dex rpc`. One table; the unknown-command error (dexcli.cli.app.DexGroup) adds the hint."""

from __future__ import annotations

RPC = "signals and queries are RPCs in Dex: `dex rpc FLOW_ID NAME --input JSON`"
INSPECT = "one flow, its steps and history: `dex inspect FLOW_ID` (--history: every event)"
LOGS = "a flow's history is `dex inspect ID --timeline` (or --json); follow a running one with `dex watch ID`"
FAMILIAR = {"signal": RPC, "query": RPC, "describe": INSPECT, "show": INSPECT, "logs": LOGS}


def with_hint(message: str, name: str) -> str:
    """The unknown-command message with the hint for `name`, if it has one (in place of a
    "Did you mean" guess by spelling)."""
    hint = FAMILIAR.get(name)
    if hint is None:
        return message
    return f"{message.split('. Did you mean', 1)[0].rstrip('.')}; {hint}"
