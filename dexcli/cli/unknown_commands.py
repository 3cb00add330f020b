"""What to say for a command dex does not have but a user of Temporal, the Dex CLI or DBOS
types by habit: the dex command that does that job, instead of click's nearest spelling
(`dex logs` is not `dex flows`)."""

from __future__ import annotations

HINTS = {
    "logs": "a flow's history is `dex inspect ID --timeline` (or --json); follow a running one with `dex watch ID`",
}


def hint_for(name: str) -> str | None:
    return HINTS.get(name)
