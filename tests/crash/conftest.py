"""The crash suite runs real `dex` subprocesses; most of its time is process start-up. Before the
first crash test, this submits the trials every selected test names (`@pytest.mark.trials`) to
the shared pool, every module's at once (lowest `Trials.priority` first), so trials of all
modules overlap and each test only waits for (and then checks) its own. A test selected on its
own starts only its own trials."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.crash.crashkit import NamedTrials, Trials


def _trials_of(item: pytest.Item) -> Trials | None:
    trials = getattr(getattr(item, "module", None), "TRIALS", None)
    return trials if isinstance(trials, Trials) else None


@pytest.fixture(scope="session", autouse=True)
def _submit_selected_trials(request: pytest.FixtureRequest,
                            tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    wanted: dict[Trials, list[str]] = {}
    for item in request.session.items:
        trials = _trials_of(item)
        if trials is not None:
            names = wanted.setdefault(trials, [])
            for mark in item.iter_markers("trials"):
                names.extend(mark.args)
    for trials, names in sorted(wanted.items(), key=lambda kv: kv[0].priority):
        trials.bind(tmp_path_factory).submit(names)
    yield
    for trials in wanted:
        trials.cancel_pending()


@pytest.fixture
def trials(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> NamedTrials:
    """The trials the test names in its `trials` marks: `trials[name]` waits for one and returns
    its result (or raises what it raised)."""
    found = _trials_of(request.node)
    assert found is not None, f"{request.module.__name__} has no TRIALS"
    names = [name for mark in request.node.iter_markers("trials") for name in mark.args]
    return found.bind(tmp_path_factory).only(names)
