"""`deadlines.iso` formats times as datetime's isoformat does (it skips building a datetime);
`earliest_deadline` picks the first limit, ties (under a second) to StartToClose, then Heartbeat."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from dexcli.engine.deadlines import TIE_SECONDS, TIMEOUT_ORDER, earliest_deadline, iso


def _reference(t: float) -> str:
    return datetime.fromtimestamp(t, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


EDGES = [0.0, 1.0005, 1.0015, 0.9999995, 1.9999995, 0.9999994, -0.0000005, -0.5, -1.5, 59.9995,
         86399.9999996, 951782400.0, 1_700_000_000.1234565, 1_764_662_400.999_999_5, 4_102_444_799.9999]


@pytest.mark.parametrize("t", EDGES)
def test_edges_match_datetime(t: float) -> None:
    assert iso(t) == _reference(t)


def test_many_times_match_datetime_in_any_order() -> None:
    rng = random.Random(21)
    base = 1_764_662_400.0
    values = [rng.uniform(-1e9, 4e9) for _ in range(20_000)]
    values += [base + i * 1e-4 for i in range(20_000)]  # many calls within one second, then the next
    values += [base + k / 1e6 + d for k in range(0, 1_000_000, 331) for d in (0.0, 5e-7, -5e-7)]
    rng.shuffle(values[:5000])
    assert [iso(t) for t in values] == [_reference(t) for t in values]


def test_none_is_none() -> None:
    assert iso(None) is None


def _earliest_reference(a: float, h: float, total: float) -> tuple[float, str]:
    cands = [(a, 0), (h, 1), (total, 2)]
    t = min(c[0] for c in cands)
    return t, TIMEOUT_ORDER[min(i for d, i in cands if d - t < TIE_SECONDS)]


def test_earliest_deadline_and_its_ties() -> None:
    assert earliest_deadline(100.0, 50.0, 200.0) == (50.0, "Heartbeat")
    assert earliest_deadline(100.5, 100.0, 300.0) == (100.0, "StartToClose")  # a tie: StartToClose wins
    assert earliest_deadline(300.0, 100.2, 100.0) == (100.0, "Heartbeat")
    assert earliest_deadline(300.0, 200.0, 100.0) == (100.0, "ScheduleToClose")
    rng = random.Random(7)
    for _ in range(5000):
        a, h, total = (round(rng.uniform(0, 5), rng.choice((0, 1, 3))) for _ in range(3))
        assert earliest_deadline(a, h, total) == _earliest_reference(a, h, total)


def test_earliest_deadline_with_infinite_limits() -> None:
    inf = float("inf")
    for a, h, total in [(inf, 5.0, inf), (inf, inf, 7.0), (3.0, inf, inf), (inf, 5.0, 5.5), (5.0, 5.0, 5.0)]:
        assert earliest_deadline(a, h, total) == _earliest_reference(a, h, total)
