"""The records' quick `__init__` (dexcli.store.records.quick_init) builds what the dataclass's own
would: same fields, defaults and equality, still frozen."""

from __future__ import annotations

import dataclasses

import pytest

from dexcli.store.records import quick_init


@dataclasses.dataclass(frozen=True, slots=True)
class _Plain:
    a: str
    b: int | None
    c: bool = False
    d: str | None = None


@quick_init
@dataclasses.dataclass(frozen=True, slots=True)
class _Quick:
    a: str
    b: int | None
    c: bool = False
    d: str | None = None


def test_quick_init_builds_the_same_record_and_keeps_it_frozen() -> None:
    for args, kwargs in [(("x", 1), {}), (("x",), {"b": None, "d": "y"}), ((), {"a": "x", "b": 2, "c": True})]:
        quick, plain = _Quick(*args, **kwargs), _Plain(*args, **kwargs)  # type: ignore[arg-type]
        assert dataclasses.astuple(quick) == dataclasses.astuple(plain)
    q = _Quick("x", 1)
    assert q == _Quick("x", 1) and hash(q) == hash(_Quick("x", 1)) and repr(q) == "_Quick(a='x', b=1, c=False, d=None)"
    assert dataclasses.replace(q, d="z") == _Quick("x", 1, False, "z")
    with pytest.raises(dataclasses.FrozenInstanceError):
        q.a = "y"  # type: ignore[misc]
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'b'"):
        _Quick("x")  # type: ignore[call-arg]


def test_quick_init_refuses_a_default_factory() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class WithFactory:
        items: list[int] = dataclasses.field(default_factory=list)

    with pytest.raises(TypeError, match="default_factory"):
        quick_init(WithFactory)
