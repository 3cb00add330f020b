"""`dex inspect`'s view as Rich prints it when stdout is not a terminal, without Rich's console.

Rich's console and table modules are most of what `dex inspect ID | grep ...` costs to start:
when stdout is not a terminal Rich prints no styles, so the view is its lines of text and its
steps table. `plain_lines` lays them out as Rich does for what fits the width (a line of Text
as it is; each table column as wide as its widest cell, two spaces apart, every cell padded to
its column) and returns None for anything it does not lay out the same — a line wider than the
width (Rich wraps it), a table wider than the width (Rich shrinks its columns), a control
character or `:name:` (Rich's emoji codes) in a table cell, a Text with its own justify or
overflow: the caller then prints through Rich. tests/cli/test_quick.py compares the two.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.text import Text

if TYPE_CHECKING:
    from dexcli.cli.render_inspect import StepsTable

# Rich replaces `:name:` in a table's str cells with the emoji of that name (rich._emoji_replace,
# the same pattern): any name but digits (a time, 00:01:02) may be one, and so may these digits
_EMOJI_CODE = re.compile(r"(:(\S*?)(?:(?:\-)(emoji|text))?:)")
_DIGIT_EMOJI = frozenset({"100", "1234"})
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def plain_lines(parts: list[Text | StepsTable], width: int) -> list[str] | None:
    """The lines Rich prints for `parts` at `width` with no styles, or None: print through Rich."""
    out: list[str] = []
    for part in parts:
        if isinstance(part, Text):
            if (part.justify, part.overflow, part.no_wrap, part.end) != (None, None, None, "\n"):
                return None
            line = part.plain
            if _CONTROL.search(line) or cell_len(line) > width:
                return None
            out.append(line)
            continue
        table = _table_lines(*part.cells(width), width)
        if table is None:
            return None
        out += table
    return out


def _table_lines(headers: tuple[str, ...], rows: list[tuple[str | Text, ...]], width: int) -> list[str] | None:
    """A Table(box=None, pad_edge=False) of one-line cells, if it fits `width` as it is."""
    grid: list[tuple[str, ...]] = [headers]
    for row in rows:
        cells = []
        for cell in row:
            if isinstance(cell, Text):
                if (cell.justify, cell.overflow, cell.end) != (None, None, "\n"):
                    return None
                text = cell.plain
            else:
                if any(not m[2].isdigit() or m[2] in _DIGIT_EMOJI for m in _EMOJI_CODE.finditer(cell)):
                    return None
                text = cell
            if _CONTROL.search(text):
                return None
            cells.append(text)
        grid.append(tuple(cells))
    last = len(headers) - 1
    widths = [max(cell_len(r[i]) for r in grid) or 1 for i in range(len(headers))]
    pads = [(0 if i == 0 else 1) + (0 if i == last else 1) for i in range(len(headers))]
    if sum(widths) + sum(pads) > width:
        return None
    return ["".join((" " if i else "") + c + " " * (widths[i] - cell_len(c)) + (" " if i != last else "")
                    for i, c in enumerate(r)) for r in grid]
