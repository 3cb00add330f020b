"""What dex says about an exception from user code: where it happened and what it reached for.

  - `user_stack`: the traceback of the user's code, innermost frame first, with dex's own
    frames and the machinery around the handler (the engine, asyncio, threads) left out — what
    an attempt records as its stack trace (Dex: `original_worker_error_stack_trace`);
  - `innermost_place`: the `file:line` of the innermost frame of the user's own code in such a
    stack trace (a frame of the standard library is skipped when a user frame lies below it);
  - `missing_api`: why an AttributeError on an object of dex (a Context, a Stream, …) is the
    user's code reaching for an API dex lacks — retrying cannot help.

Pure: nothing here writes or reports.
"""

from __future__ import annotations

import functools
import os
import re
import traceback
from pathlib import Path

MAX_FRAMES = 64
_DEX_DIRS = tuple({str(d) + os.sep for d in (Path(__file__).parents[1], Path(__file__).resolve().parents[1])})


@functools.cache
def _dirs(*keys: str) -> tuple[str, ...]:
    import sysconfig  # on first use: reading its data costs start-up time

    paths = sysconfig.get_paths()
    return tuple({d + os.sep for k in keys if k in paths for d in (paths[k], str(Path(paths[k]).resolve()))})


def _stdlib() -> tuple[str, ...]:
    return _dirs("stdlib", "platstdlib")


def _libraries() -> tuple[str, ...]:
    return _dirs("purelib", "platlib")  # site-packages (in a venv, inside platstdlib)
_FRAME = re.compile(r'^  File "(.*)", line (\d+)')

# The public names of the official SDK's objects a step touches, by the public type (what a
# step's context is to its author: Context or AsyncContext). A name here that dex lacks is "not
# implemented yet"; any other is simply not part of the SDK. tests/parity checks the table.
SDK_NAMES: dict[str, frozenset[str]] = {
    "Context": frozenset({
        "attempt", "first_attempt_at", "flow_id", "from_step_execution_id", "get_last_heartbeat_value",
        "get_step_execution_local", "has_last_heartbeat_value", "has_timer_fired", "is_cancellation_requested",
        "record_event", "recovery_error", "run_id", "set_step_execution_local", "step_execution_id",
        "wait_for_method_failed"}),
    "Stream": frozenset({"buffered_text", "write"}),
    "BufferedTextStream": frozenset({"flush", "write"}),
    "Attribute": frozenset({"delete", "get", "hard_delete_on_null", "index", "lock", "set",
                            "sync_to_attribute_store"}),
    "AttributeMap": frozenset({"delete", "get", "get_all_instance_keys", "get_map_size", "hard_delete_on_null",
                               "index", "load", "lock", "set", "sync_to_attribute_store"}),
    "Channel": frozenset({"at_least", "at_most", "delete", "find_pending_message", "for_n", "for_one",
                          "for_range", "pending_messages", "publish", "results", "size"}),
    "ChannelMap": frozenset({"at_least", "at_most", "delete", "find_pending_message", "for_n", "for_one",
                             "for_range", "get_all_instance_keys", "get_map_size", "load_messages",
                             "pending_messages", "publish", "results", "size"}),
    "StepDecision": frozenset({"canceling_sibling_steps", "canceling_steps", "empty_channels", "fallback",
                               "movements", "output", "reason", "with_canceling_sibling_steps",
                               "with_canceling_steps"}),
}
SDK_NAMES["AsyncContext"] = SDK_NAMES["Context"] | {"heartbeat"}
SYNC_HEARTBEAT_FIX = "sync steps heartbeat with `yield heartbeat(value)` (or make the step async)"


def is_dex_file(filename: str) -> bool:
    return filename.startswith(_DEX_DIRS)


def is_user_file(filename: str) -> bool:
    """A file of the user's code (or of a library it uses): not dex, not the standard library,
    not `<frozen …>`/`<string>`."""
    stdlib = filename.startswith(_stdlib()) and not filename.startswith(_libraries())
    return not (filename.startswith("<") or is_dex_file(filename) or stdlib)


def _own_file(filename: str) -> bool:
    """A file of the user's own code: a user file outside site-packages."""
    return is_user_file(filename) and not filename.startswith(_libraries())


def user_frames(exc: BaseException) -> list[traceback.FrameSummary]:
    """The frames of the user's code in `exc`'s traceback, innermost first: the machinery that
    called it (everything before the first user frame) and dex's frames below it left out."""
    frames = traceback.extract_tb(exc.__traceback__)
    first = next((i for i, f in enumerate(frames) if is_user_file(f.filename)), len(frames))
    return [f for f in frames[first:] if not is_dex_file(f.filename)][::-1]


def user_stack(exc: BaseException) -> str | None:
    """The user's traceback as text, innermost frame first (None: no user frame, e.g. a timeout
    or a decision dex refused after the handler returned)."""
    frames = user_frames(exc)
    if not frames:
        return None
    lines = []
    for f in frames[:MAX_FRAMES]:
        lines.append(f'  File "{f.filename}", line {f.lineno}, in {f.name}')
        if f.line:
            lines.append(f"    {f.line.strip()}")
    if len(frames) > MAX_FRAMES:
        lines.append(f"  … {len(frames) - MAX_FRAMES} more frames")
    return "\n".join(lines)


def innermost_place(stack_trace: str | None) -> str | None:
    """`file:line` of the innermost frame of the user's own code in a `user_stack` text: frames of
    the standard library and of installed libraries below it are passed over (when there is none,
    the innermost frame of a library, then the innermost frame)."""
    places = [(m.group(1), m.group(2)) for line in (stack_trace or "").splitlines() if (m := _FRAME.match(line))]
    if not places:
        return None
    own = [p for p in places if _own_file(p[0])] or [p for p in places if is_user_file(p[0])] or places
    return f"{own[0][0]}:{own[0][1]}"


def exception_place(exc: BaseException) -> str | None:
    """`file:line` of the innermost user frame of an exception raised by user code."""
    return innermost_place(user_stack(exc))


def missing_api(exc: AttributeError) -> str | None:
    """The message for an AttributeError on an object of dex (its type's module is dexcli's),
    or None when it is not one (the user's own objects, a library's)."""
    obj, name = getattr(exc, "obj", None), getattr(exc, "name", None)
    if obj is None or not name:
        return None
    cls = obj if isinstance(obj, type) else type(obj)
    if not (getattr(cls, "__module__", "") or "").startswith("dexcli."):
        return None
    public = str(getattr(cls, "_dex_public_name", cls.__name__))
    if public == "Context" and name == "heartbeat":
        return f"Context.heartbeat does not exist in a sync step: {SYNC_HEARTBEAT_FIX}"
    if name in SDK_NAMES.get(public, ()):
        return f"dex does not implement {public}.{name} yet"
    return f"{public} has no attribute {name}"
