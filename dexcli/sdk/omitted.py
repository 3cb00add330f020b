"""OMITTED: marks a value that was not given (distinct from None): a decision's output, a
heartbeat's checkpoint. Its own module, so that contexts and decisions both take it without
one importing the other."""

from __future__ import annotations

from typing import Any


class _Omitted:
    """Marks an output that was not given (distinct from None)."""

    _instance: _Omitted | None = None

    def __new__(cls) -> _Omitted:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<omitted>"

    def __bool__(self) -> bool:
        return False


OMITTED: Any = _Omitted()
