"""The crash suite runs real `dex` subprocesses; most of its time is process start-up. Each
module's `start()` submits all of its trials to one thread pool; this fixture calls every
selected module's `start()` before the first test, so trials of all modules overlap and each
test only waits for (and then checks) its own trial."""

import pytest


@pytest.fixture(scope="session", autouse=True)
def _start_every_trial(request, tmp_path_factory):
    modules = []
    for item in request.session.items:
        mod = getattr(item, "module", None)
        if mod is not None and hasattr(mod, "start") and mod not in modules:
            modules.append(mod)
    for mod in sorted(modules, key=lambda m: getattr(m, "PRIORITY", 5)):
        mod.start(tmp_path_factory)
    yield
