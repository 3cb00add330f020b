"""The rules of `dex lint`, one function each, over one step's source: the eight polling
anti-patterns of the seed, then mistakes in how a step reports progress (a sync step calling
`context.heartbeat`, a heartbeat or Stream frame that is built and never yielded).

Each rule returns hits: (rule id, file, line, message without the seed and fix text, which
dexcli.graph.lint adds). Nothing here runs user code beyond reading attributes and options.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import Any

from dexcli.graph.evaluate import Unknown, const_seconds, eval_ref, resolve_target
from dexcli.graph.static import (
    FuncInfo,
    callee_name,
    class_methods,
    dotted,
    step_source,
    unparse,
    walk_own,
)
from dexcli.graph.waits import read_wait

Hit = tuple[str, str | None, int, str]  # (rule id, file, line, message)
_SLEEP = frozenset({"sleep"})
_TIMEOUT_CTX = frozenset({"timeout", "timeout_at", "fail_after", "move_on_after", "fail_at", "move_on_at"})
_HTTP_MODULES = frozenset({"requests", "httpx"})
_NOT_READY = re.compile(
    r"not[\s_-]*(yet[\s_-]*)?(ready|done|finished|complete|available)|still[\s_-]*(running|pending|queued|"
    r"working|in[\s_-]*progress)|in[\s_-]*progress|pending|try[\s_-]*again|retry[\s_-]*later|notready",
    re.I,
)
_NON_TERMINAL_STATE = re.compile(
    r"\b(RUNNING|QUEUED|PENDING|IN_PROGRESS|PROVISIONING|STARTING|WAITING|NOT_READY|CREATING|BUILDING)\b"
    r"|\bnot\b[^=]*\b(ready|done|finished|complete)\b",
    re.I,
)
_PAGE = re.compile(r"page_?token|next_?page|cursor", re.I)
_CLOCK = {("datetime", "now"), ("datetime", "utcnow"), ("datetime", "today"), ("time", "time"),
          ("time", "monotonic"), ("time", "perf_counter"), ("loop", "time")}
_NEW_RUN_CALLS = frozenset({"start_flow", "start_flow_async", "continue_as_new", "signal_with_start"})
_CONTEXT_NAMES = frozenset({"context", "ctx"})


# --------------------------------------------------------------------------- per-step facts
class StepFacts:
    """What the rules need to know about one registered step."""

    def __init__(self, step_type: str, instance: Any, flow_steps: list[tuple[str, Any]]) -> None:
        self.step_type = step_type
        self.instance = instance
        cls: type = type(instance)
        self.cls = cls
        self.methods = class_methods(cls)
        self.source = step_source(cls)
        self.flow_steps = flow_steps
        try:
            self.options = instance.get_step_options()
        except Exception:
            self.options = None
        self.execute = self.methods.get("execute")

    def context_name(self, fi: FuncInfo) -> str | None:
        return fi.param(1) if fi.owner is not None else None

    def self_method(self, call: ast.Call, fi: FuncInfo) -> FuncInfo | None:
        f = call.func
        if fi.owner is not None and isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                and f.value.id == fi.param(0):
            return self.methods.get(f.attr)
        return None

    def polling_loops(self) -> list[tuple[ast.While, FuncInfo]]:
        """while-loops in the decision functions that sleep between rounds, or `while True`."""
        loops = []
        for fi in self.source.functions:
            for node in walk_own(fi.node):
                if isinstance(node, ast.While) and (_is_true(node.test) or _sleeps(node)):
                    loops.append((node, fi))
        return loops

    def is_stream_write(self, call: ast.Call, fi: FuncInfo, ctx: str | None) -> bool:
        """`stream.write(context, value)`: a Stream (as the step resolves it) or a context first."""
        if callee_name(call.func) != "write" or len(call.args) < 2:
            return False
        first = call.args[0]
        if isinstance(first, ast.Name) and (first.id == ctx or first.id in _CONTEXT_NAMES):
            return True
        target = call.func.value if isinstance(call.func, ast.Attribute) else None
        return target is not None and type(eval_ref(target, fi, self.instance)).__name__ == "Stream"

    def handler_kind(self) -> str:
        """async | generator | sync, as the step's execute is written."""
        fi = self.execute
        if fi is None or fi.is_async:
            return "async"
        gen = any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in walk_own(fi.node))
        return "generator" if gen else "sync"

    def heartbeats(self, node: ast.AST, fi: FuncInfo, depth: int = 0) -> bool:
        ctx = self.context_name(fi) if fi is self.execute else None
        for n in walk_own(node):
            if not isinstance(n, ast.Call):
                continue
            if callee_name(n.func) == "heartbeat" or self.is_stream_write(n, fi, ctx):
                return True
            helper = self.self_method(n, fi)
            if (helper is not None and depth < 3 and helper is not fi
                    and self.heartbeats(helper.node, helper, depth + 1)):
                return True
        return False


def _is_true(test: ast.AST) -> bool:
    return isinstance(test, ast.Constant) and bool(test.value) is True


def _sleeps(loop: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and callee_name(n.func) in _SLEEP for n in walk_own(loop))


def _inside(node: ast.AST, fi: FuncInfo, kinds: tuple[type, ...]) -> ast.AST | None:
    cur = fi.parents.get(node)
    while cur is not None:
        if isinstance(cur, kinds):
            return cur
        cur = fi.parents.get(cur)
    return None


def _has_timeout_kw(call: ast.Call) -> bool:
    return any(kw.arg and "timeout" in kw.arg.lower() for kw in call.keywords)


def _in_timeout_block(node: ast.AST, fi: FuncInfo) -> bool:
    cur = fi.parents.get(node)
    while cur is not None:
        if isinstance(cur, (ast.AsyncWith, ast.With)):
            for item in cur.items:
                ce = item.context_expr
                if isinstance(ce, ast.Call) and callee_name(ce.func) in _TIMEOUT_CTX:
                    return True
        cur = fi.parents.get(cur)
    return False


# --------------------------------------------------------------------------- the rules
def _rule_timer_self_loop(step: StepFacts) -> list[Hit]:
    """wait_for waits on Timers only (dexcli.graph.waits) and execute goes to the same step type.
    A Timer beside a channel or SubFlow condition is a deadline or a reminder, not a poll."""
    wait = read_wait(step.instance)
    if wait is None or not wait.polls_by_time:
        return []
    out: list[Hit] = []
    for site in step.source.sites:
        if site.kind == "goTo" and resolve_target(site, step.instance, step.flow_steps).step_type == step.step_type:
            out.append(("timer-self-loop", site.file, site.line,
                        f"{step.step_type} waits only on a Timer in wait_for (line {wait.line}) and then "
                        f"goes to itself with {site.text} to poll again"))
    return out


def _rule_retry_as_poll(step: StepFacts) -> list[Hit]:
    loops = [loop for loop, _ in step.polling_loops()]
    out: list[Hit] = []
    for fi in step.source.functions:
        for node in walk_own(fi.node):
            if not isinstance(node, ast.Raise) or node.exc is None:
                continue
            if any(node in ast.walk(loop) for loop in loops):
                continue
            in_except = _inside(node, fi, (ast.ExceptHandler,)) is not None
            exc = node.exc
            name = callee_name(exc.func) if isinstance(exc, ast.Call) else callee_name(exc)
            if name in ("retry_after", "RetryAfter"):
                if not in_except:
                    out.append(("retry-as-poll", fi.file, node.lineno,
                                f"{step.step_type} raises {unparse(exc)} so that a retry polls again"))
                continue
            if in_except:
                continue
            texts = [name or ""] + [c.value for c in ast.walk(exc)
                                    if isinstance(c, ast.Constant) and isinstance(c.value, str)]
            guard = _inside(node, fi, (ast.If,))
            guard_text = unparse(guard.test, 200) if isinstance(guard, ast.If) else ""
            if any(_NOT_READY.search(t) for t in texts) or _NON_TERMINAL_STATE.search(guard_text):
                out.append(("retry-as-poll", fi.file, node.lineno,
                            f"{step.step_type} raises {unparse(exc)} while the work is not ready, "
                            f"so retries and backoff do the polling"))
    return out


def _rule_loop_without_heartbeat(step: StepFacts) -> list[Hit]:
    out: list[Hit] = []
    for loop, fi in step.polling_loops():
        if not step.heartbeats(loop, fi):
            out.append(("loop-without-heartbeat", fi.file, loop.lineno,
                        f"{step.step_type}: the loop at line {loop.lineno} never records a heartbeat "
                        f"nor writes a Stream message"))
    return out


def _unprotected_awaits(step: StepFacts, node: ast.AST, fi: FuncInfo, depth: int = 0) -> list[tuple[ast.Call, str]]:
    """Awaited calls in `node` that have no timeout of their own: (call, description)."""
    ctx = step.context_name(fi)
    found: list[tuple[ast.Call, str]] = []
    for n in walk_own(node):
        call = None
        if isinstance(n, ast.Await) and isinstance(n.value, ast.Call):
            call = n.value
        elif isinstance(n, ast.Call) and not isinstance(fi.parents.get(n), ast.Await):
            base = (dotted(n.func) or "").split(".")
            if ((len(base) == 2 and base[0] in _HTTP_MODULES) or base[-1] == "urlopen") and not _has_timeout_kw(n):
                found.append((n, unparse(n)))
            continue
        if call is None:
            continue
        name = callee_name(call.func)
        if name in _SLEEP or name == "wait_for" and (len(call.args) >= 2 or _has_timeout_kw(call)):
            continue
        root = call.func
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name) and ctx is not None and root.id == ctx:
            continue  # context.heartbeat(...) and friends
        if _has_timeout_kw(call) or _in_timeout_block(n, fi):
            continue
        helper = step.self_method(call, fi)
        if helper is not None and helper is not fi:
            if depth < 3:
                inner = _unprotected_awaits(step, helper.node, helper, depth + 1)
                if inner:
                    found.append((call, f"{unparse(call)} (which awaits {inner[0][1]} "
                                        f"at line {inner[0][0].lineno})"))
            continue
        found.append((call, unparse(call)))
    return found


def _rule_call_without_timeout(step: StepFacts) -> list[Hit]:
    out: list[Hit] = []
    for loop, fi in step.polling_loops():
        for call, desc in _unprotected_awaits(step, loop, fi):
            out.append(("call-without-timeout", fi.file, call.lineno,
                        f"{step.step_type}: {desc} in the polling loop has no timeout of its own"))
    return out


def _limits(step: StepFacts) -> list[str]:
    opts = step.options
    found = []
    if getattr(opts, "execute_method_timeout", None) is not None:
        found.append(f"execute_method_timeout={opts.execute_method_timeout}")
    retry = getattr(opts, "execute_retry", None)
    if retry is not None and getattr(retry, "total_duration", None) is not None:
        found.append(f"total_duration={retry.total_duration}")
    return found


def _is_clock_call(n: ast.AST) -> bool:
    if not isinstance(n, ast.Call) or not isinstance(n.func, ast.Attribute):
        return False
    base = (dotted(n.func.value) or "").split(".")[-1]
    return (base, n.func.attr) in _CLOCK


def _rule_hand_written_deadline(step: StepFacts) -> list[Hit]:
    limits = _limits(step)
    if not limits:
        return []
    hits: list[tuple[str, int, str]] = []
    for fi in step.source.functions:
        nodes = walk_own(fi.node)
        arith = [n for n in nodes if isinstance(n, (ast.BinOp, ast.Compare))]
        clock_vars: dict[str, int] = {}
        for n in nodes:
            if isinstance(n, ast.Assign) and _is_clock_call(n.value):
                for t in n.targets:
                    if isinstance(t, ast.Name):
                        clock_vars[t.id] = n.lineno
        for a in arith:
            inner = list(ast.walk(a))
            if any(isinstance(x, ast.Attribute) and x.attr == "first_attempt_at" for x in inner):
                hits.append((fi.file, a.lineno, "first_attempt_at arithmetic"))
            elif any(_is_clock_call(x) or (isinstance(x, ast.Name) and x.id in clock_vars) for x in inner):
                hits.append((fi.file, a.lineno, unparse(a)))
    if not hits:
        return []
    hits.sort(key=lambda h: h[1])
    file, line, what = hits[0]
    more = sorted({h[1] for h in hits[1:] if h[1] != line})
    also = f" (also line {', '.join(map(str, more))})" if more else ""
    return [("hand-written-deadline", file, line,
             f"{step.step_type} computes its own deadline ({what}){also} although its options already set "
             f"{' and '.join(limits)}")]


def _call_timeouts(step: StepFacts, node: ast.AST, fi: FuncInfo, depth: int = 0) -> list[float | None]:
    """Timeouts given to calls inside `node` (None for ones that are not constants)."""
    out: list[float | None] = []
    for n in walk_own(node):
        if not isinstance(n, ast.Call):
            continue
        name = callee_name(n.func)
        exprs: list[ast.AST] = []
        if name == "wait_for" and len(n.args) >= 2:
            exprs.append(n.args[1])
        if name in _TIMEOUT_CTX and n.args:
            exprs.append(n.args[0])
        exprs.extend(kw.value for kw in n.keywords if kw.arg and "timeout" in kw.arg.lower())
        for e in exprs:
            if isinstance(e, ast.Constant) and e.value is None:
                continue
            try:
                out.append(const_seconds(e, fi, step.instance))
            except (Unknown, TypeError, ValueError):
                out.append(None)
        helper = step.self_method(n, fi)
        if helper is not None and helper is not fi and depth < 3:
            out.extend(_call_timeouts(step, helper.node, helper, depth + 1))
    return out


def _rule_heartbeat_window(step: StepFacts) -> list[Hit]:
    out: list[Hit] = []
    opts = step.options
    try:
        hb = opts.heartbeat_timeout_seconds() if opts is not None else 60.0
    except Exception:
        return []
    window = hb - 10
    for loop, fi in step.polling_loops():
        sleeps = [n for n in walk_own(loop) if isinstance(n, ast.Call) and callee_name(n.func) in _SLEEP and n.args]
        for sleep in sleeps:
            try:
                interval = const_seconds(sleep.args[0], fi, step.instance)
            except (Unknown, TypeError, ValueError):
                continue
            timeouts = _call_timeouts(step, loop, fi)
            if any(t is None for t in timeouts):
                continue
            call_timeout = max((t for t in timeouts if t is not None), default=0.0)
            if interval + call_timeout > window:
                out.append(("heartbeat-window", fi.file, sleep.lineno,
                            f"{step.step_type}: interval {interval:g} s + call timeout {call_timeout:g} s = "
                            f"{interval + call_timeout:g} s > heartbeat_timeout {hb:g} s - 10 s = {window:g} s"))
    return out


def _rule_lock_held(step: StepFacts) -> list[Hit]:
    locks = getattr(step.options, "execute_lock_attributes", ()) or ()
    loops = step.polling_loops()
    if not locks or not loops:
        return []
    loop, fi = loops[0]
    file, line = fi.file, loop.lineno
    opts_fn = step.methods.get("get_step_options")
    if opts_fn is not None:
        for n in ast.walk(opts_fn.node):
            if isinstance(n, ast.keyword) and n.arg == "execute_lock_attributes":
                file, line = opts_fn.file, n.value.lineno
                break
    return [("lock-held-while-polling", file, line,
             f"{step.step_type} holds execute_lock_attributes ({len(locks)} lock(s)) for the whole wait "
             f"(polling loop at line {loop.lineno})")]


def _rule_page_token(step: StepFacts) -> list[Hit]:
    out: list[Hit] = []
    for fi in step.source.functions:
        for n in walk_own(fi.node):
            if not isinstance(n, ast.Call):
                continue
            name = callee_name(n.func)
            what = None
            if name in _NEW_RUN_CALLS:
                what = f"a new run ({name})"
            elif name == "run" and (dotted(n.func) or "").split(".")[-2:-1] == ["SubFlow"]:
                what = "a new run (SubFlow.run)"
            elif name == "go_to" or (name == "of" and (dotted(n.func) or "").endswith("StepMovement.of")):
                site = next((s for s in step.source.sites if s.line == n.lineno and s.kind == "goTo"), None)
                target = resolve_target(site, step.instance, step.flow_steps) if site is not None else None
                if target is not None and target.step_type == step.step_type:
                    what = "a new execution of itself"
            if what is None:
                continue
            args = list(n.args[1:] if name in ("go_to", "of") else n.args) + [kw.value for kw in n.keywords]
            texts = [unparse(a, 500) for a in args] + [kw.arg or "" for kw in n.keywords]
            if any(_PAGE.search(t) for t in texts):
                out.append(("page-token-run", fi.file, n.lineno,
                            f"{step.step_type} passes a page token to {what} to iterate page by page"))
    return out


def _rule_sync_context_heartbeat(step: StepFacts) -> list[Hit]:
    if step.handler_kind() == "async":
        return []
    out: list[Hit] = []
    for fi in step.source.functions:
        names = _CONTEXT_NAMES | {step.context_name(fi) or "context"}
        for n in walk_own(fi.node):
            if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "heartbeat"
                    and isinstance(n.func.value, ast.Name) and n.func.value.id in names):
                out.append(("sync-context-heartbeat", fi.file, n.lineno,
                            f"{step.step_type}: {unparse(n)} in a sync step: its Context has no heartbeat, so "
                            "the attempt fails at once with INVALID_USER_FLOW_CODE"))
    return out


def _is_heartbeat_call(call: ast.Call, fi: FuncInfo, instance: Any) -> bool:
    """`heartbeat(...)` of the SDK (not a Context's method, not a function of the user's)."""
    if callee_name(call.func) != "heartbeat":
        return False
    fn = eval_ref(call.func, fi, instance)  # a context's method is a parameter's: not resolved
    return getattr(fn, "__module__", "").startswith(("dexcli.", "dex.")) and getattr(fn, "__name__", "") == "heartbeat"


_DROPPED = {
    "generator": "is not yielded, so its frame is dropped: {what}",
    "sync": "in a sync step (not a generator) builds a frame nobody yields: {what}",
    "async": "in an async step builds a frame for generator steps and drops it: {what}",
}
_SYNC_WRITE = "in a sync step (not a generator) fails the attempt at once: a Stream message must be yielded"


def _rule_unyielded_frame(step: StepFacts) -> list[Hit]:
    kind = step.handler_kind()
    out: list[Hit] = []
    for fi in step.source.functions:
        ctx = step.context_name(fi)
        for n in walk_own(fi.node):
            if not isinstance(n, ast.Expr) or not isinstance(n.value, ast.Call):
                continue  # only a call whose value is thrown away: `yield f(...)`, `x = f(...)` keep it
            call = n.value
            if _is_heartbeat_call(call, fi, step.instance):
                text = _DROPPED[kind].format(what="the heartbeat is never recorded")
            elif kind != "async" and step.is_stream_write(call, fi, ctx):  # an async step's write writes
                text = _SYNC_WRITE if kind == "sync" else \
                    _DROPPED[kind].format(what="the Stream message is never written")
            else:
                continue
            out.append(("unyielded-frame", fi.file, n.lineno, f"{step.step_type}: {unparse(call)} {text}"))
    return out


RULE_FUNCS: tuple[Callable[[StepFacts], list[Hit]], ...] = (
    _rule_timer_self_loop, _rule_retry_as_poll, _rule_loop_without_heartbeat, _rule_call_without_timeout,
    _rule_hand_written_deadline, _rule_heartbeat_window, _rule_lock_held, _rule_page_token,
    _rule_sync_context_heartbeat, _rule_unyielded_frame,
)
