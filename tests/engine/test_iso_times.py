"""`deadlines.iso`, the engine's one formatter of times for history and views: the text
`datetime.isoformat` gives, to the character, including the roundings at a second's edges."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from dexcli.engine.deadlines import iso


def reference(t: float) -> str:
    return datetime.fromtimestamp(t, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


EDGES = [0.0, 5e-7, 1.5e-6, 0.0005, 0.9995, 0.9999994999, 0.9999995, 0.9999996, 1_767_225_599.9999996,
         1_767_225_600.0, 1_767_225_600.0004999, 1_000_000_000.9999995, 253_402_300_799.9999,
         4e9, -0.5, -1e-7, -86_400.25]


def test_iso_matches_isoformat_at_second_edges_and_out_of_range() -> None:
    for t in EDGES:
        assert iso(t) == reference(t), t


def test_iso_matches_isoformat_for_random_times_in_and_out_of_order() -> None:
    rng = random.Random(21)
    times = [rng.uniform(0, 4e9) for _ in range(20_000)]
    times += [rng.randint(0, 4_000_000_000) + rng.choice([0.0, 0.0015, 0.9999995, 0.1234565, 0.9999996])
              for _ in range(20_000)]
    base = 1_767_225_600.0
    times += [base + i / 997 for i in range(5_000)]  # consecutive times sharing their seconds
    for t in times:
        assert iso(t) == reference(t), t


def test_iso_of_none_is_none() -> None:
    assert iso(None) is None
