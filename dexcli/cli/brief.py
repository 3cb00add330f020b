"""A value's JSON shortened for one line of the terminal (`dex list`, `dex inspect`, the live view).

Apart from dexcli.cli.render so that `dex list` prints its plain-text table without loading Rich.
"""

from __future__ import annotations

import json
from typing import Any


def brief_json(value: Any, limit: int = 200) -> str:
    """A value's JSON for a line of the terminal: whole when it is short, else its outline and its
    size, `{"a": …, "b": …} (20.0 MB)`, `[… 3000 items] (1.2 MB)`, `"xxx…" (20.0 MB)`. A 20 MB
    result printed whole took half a minute to wrap, and the live view repaints it."""
    text = json.dumps(value)
    if len(text) <= limit:
        return text
    if isinstance(value, dict):
        keys: list[str] = []
        for k in value:
            part = f"{json.dumps(k)[:limit // 2]}: …"
            if sum(len(p) + 2 for p in keys) + len(part) > limit:
                keys.append("…")
                break
            keys.append(part)
        outline = "{" + ", ".join(keys) + "}"
    elif isinstance(value, list):
        outline = f"[… {len(value)} items]"
    else:
        outline = text[: limit - 1] + "…"
    return f"{outline} ({_size(len(text.encode('utf-8', 'replace')))})"


def _size(n: int) -> str:
    return f"{n} B" if n < 1000 else f"{n / 1000:.1f} kB" if n < 1_000_000 else f"{n / 1_000_000:.1f} MB"
