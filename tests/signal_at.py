"""Run `dex` in this process with a signal sent to itself at an exact point, for tests of what a
signal does in a narrow window (a real process, a real signal, no sleep to aim with):

    python -m tests.signal_at MODULE:CLASS.METHOD[#N] SIGNAL -- dex arguments...

sends SIGNAL right after the N-th call (default 1) of that method returns."""

from __future__ import annotations

import functools
import importlib
import os
import signal
import sys
from typing import Any


def arm(target: str, signame: str) -> None:
    where, _, n = target.partition("#")
    module, _, attr = where.partition(":")
    cls_name, _, method = attr.partition(".")
    owner = getattr(importlib.import_module(module), cls_name)
    original = getattr(owner, method)
    sig = getattr(signal, signame)
    calls = [0]

    @functools.wraps(original)
    def then_signal(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        calls[0] += 1
        if calls[0] == int(n or 1):
            os.kill(os.getpid(), sig)
        return result

    setattr(owner, method, then_signal)


if __name__ == "__main__":
    target, signame, sep, *dex_args = sys.argv[1:]
    assert sep == "--", "usage: python -m tests.signal_at MODULE:CLASS.METHOD[#N] SIGNAL -- ARGS..."
    arm(target, signame)
    sys.argv = ["dex", *dex_args]
    from dexcli.cli.main import main

    main()
