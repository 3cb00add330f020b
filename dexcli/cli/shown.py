"""Text from the database, made safe to print on a terminal.

Flow ids, error messages, values, attribute names and Stream text are written by flows and
clients, and reach the terminal through every view: an ESC in one could set the window title
or clear the screen, a newline could forge a line of dex's own output. `shown` is the one
function every renderer passes such text through: non-printable characters become their
Python escapes (`\\x1b`, `\\n`), so what was stored is still readable and nothing is acted on.
(Rich markup is not a concern: dex's consoles print with markup off, so `[bold]` in a message
prints as written.) `dex inspect --json` and `dex list --json` print the data unchanged: JSON
escapes control characters itself.
"""

from __future__ import annotations

from typing import Any


def shown(text: str) -> str:
    """`text` with each non-printable character (C0/C1 controls, DEL, line and paragraph
    separators, format characters) as its escape; printable text is returned as it is."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


# Values the renderers parse rather than print (a traceback, for its innermost file:line): kept
# as stored, and what is printed of them goes through `shown` (dexcli.cli.render.error_place).
PARSED_KEYS = frozenset({"stackTrace"})


def shown_data(value: Any) -> Any:
    """A snapshot (the `inspect --json` shape) with every string in it, keys included, `shown`:
    what the renderers read, so that no path of a view prints stored text raw."""
    if isinstance(value, str):
        return shown(value)
    if isinstance(value, dict):
        return {shown(k) if isinstance(k, str) else k: v if k in PARSED_KEYS else shown_data(v)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [shown_data(v) for v in value]
    return value
