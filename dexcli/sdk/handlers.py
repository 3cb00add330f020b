"""The official SDK's rules for a handler's signature (`dex.flow.Registry`), with its wording.

A step's `execute` (and `wait_for`, when the step overrides it) takes exactly a context and an
input, both annotated: `Context` for a sync or generator handler, `AsyncContext` for an async
one (only under `allow_async_handlers=True`). It returns `StepDecision` (`Wait` for wait_for),
or, as a generator, `Generator[StepOutput, None, StepDecision]`. Annotations must resolve
(`typing.get_type_hints`): a name imported only under `if TYPE_CHECKING:` does not. A flow's
`handle_timeout` takes only the context. dexcli reports every problem it finds, not only the first.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from dexcli.sdk.context import AsyncContext, Context, StepOutput

MISSING: Any = object()  # the input type of a handler whose input could not be read

ASYNC_REFUSED = ("this Registry has allow_async_handlers=False, the official SDK's default; "
                 "a registry for an AsyncWorker passes allow_async_handlers=True")


@dataclass
class Handler:
    """What the checks found: the handler's kind, its input type (or MISSING) and the problems."""

    kind: str = "sync"  # "sync" | "generator" | "async"
    input_type: Any = MISSING
    problems: list[str] = field(default_factory=list)


def handler_kind(fn: Any) -> str | None:
    """"sync", "generator", "async", or None for an async generator (never accepted)."""
    if inspect.isasyncgenfunction(fn):
        return None
    if inspect.iscoroutinefunction(fn):
        return "async"
    if inspect.isgeneratorfunction(fn):
        return "generator"
    return "sync"


def _hints(where: str, name: str, fn: Any, out: Handler) -> dict[str, Any] | None:
    try:
        return typing.get_type_hints(fn)
    except Exception as exc:  # an unresolvable annotation: the official Registry fails the same way
        out.problems.append(f"{where}: {name}'s annotations cannot be resolved ({type(exc).__name__}: {exc}); "
                            "import the types they name at module level")
        return None


def _return_problem(name: str, kind: str, annotated: Any, returns: type) -> str | None:
    if kind == "generator":
        args = typing.get_args(annotated)
        if (typing.get_origin(annotated) is not Generator or len(args) != 3 or args[0] is not StepOutput
                or args[1] not in (None, type(None)) or args[2] is not returns):
            return f"{name} generator must return Generator[StepOutput, None, {returns.__name__}]"
        return None
    if annotated is not returns:
        return f"{name} must return {returns.__name__} (annotate it `-> {returns.__name__}`)"
    return None


def check_handler(where: str, name: str, fn: Any, returns: type, *, allow_async_handlers: bool,
                  takes_input: bool = True) -> Handler:
    """The official rules for handler `name` (a function of the class, with self) of `where`."""
    kind = handler_kind(fn)
    if kind is None:
        return Handler(problems=[f"{where}: {name} must not be an async generator"])
    out = Handler(kind)
    if kind == "async" and not allow_async_handlers:
        out.problems.append(f"{where}: {name} must be synchronous ({ASYNC_REFUSED})")
    params = list(inspect.signature(fn).parameters.values())[1:]  # drop self
    wanted = 2 if takes_input else 1
    if len(params) != wanted:
        what = "context and input" if takes_input else "only the context"
        out.problems.append(f"{where}: {name} must accept {what}: (self, context{', input' if takes_input else ''}),"
                            f" got {len(params) + 1} parameters")
        return out
    hints = _hints(where, name, fn, out)
    if hints is None:
        return out
    expected = AsyncContext if kind == "async" else Context
    if hints.get(params[0].name) is not expected:
        out.problems.append(f"{where}: {name} context must be {expected.__name__}")
    if takes_input:
        if params[1].name not in hints or hints[params[1].name] is None:
            out.problems.append(f"{where}: {name} input must be annotated")
        else:
            out.input_type = hints[params[1].name]
    problem = _return_problem(name, kind, hints.get("return"), returns)
    if problem is not None:
        out.problems.append(f"{where}: {problem}")
    return out
