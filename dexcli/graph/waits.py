"""What a step's `wait_for` waits on, read from its source (runs nothing).

`read_wait(step)` finds the `Wait.until/all_of/any_of/any_combination_of/skip_immediately`
calls that `wait_for` returns (directly, through a local assigned once, or through a method of
the step) and reads their conditions: `Timer.by_duration(...)` (its duration when constant),
a channel's `for_one`/`for_n`/`at_least`/`at_most`/`for_range` (the channel's durable name, a
ChannelMap's instance, the counts when constant), `SubFlow.run(...)`, and condition ids. What
cannot be read is said so: a condition `?`, a duration or count `None`, or the whole wait
"computed at run time".

The condition keys follow the Wait JSON the engine persists (dexcli/engine/waits.py):
`kind` timer | channel (| subflow | unknown here), `conditionId`, `duration` (seconds),
`channel`, `instance`, `atLeast`, `atMost`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from dexcli.graph.evaluate import MISSING, Unknown, const_value, eval_ref
from dexcli.graph.static import (
    FuncInfo,
    callee_name,
    class_methods,
    dotted,
    unparse,
)

WAIT_KINDS = ("skip_immediately", "until", "all_of", "any_of", "any_combination_of")
CHANNEL_CALLS = {"for_one": 0, "for_n": 1, "at_least": 1, "at_most": 1, "for_range": 0}  # positional counts
COMPUTED = "(computed at run time)"
_DEPTH = 3  # locals and helper methods followed


@dataclass(frozen=True)
class ConditionInfo:
    """One condition of a Wait as the source writes it."""

    kind: str  # timer | channel | subflow | unknown
    text: str  # as the graph shows it
    condition_id: str | None = None  # "?" when it is computed
    duration: float | None = None  # timer: seconds, when constant
    channel: str | None = None  # channel: the durable name, when the channel is known
    instance: str | None = None  # ChannelMap: the instance (constant, or the expression's text)
    call: str | None = None  # for_one | for_n | at_least | at_most | for_range
    at_least: int | None = None
    at_most: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "text": self.text, "conditionId": self.condition_id}
        if self.kind == "timer":
            d["duration"] = self.duration
        elif self.kind == "channel":
            d.update({"channel": self.channel, "instance": self.instance, "call": self.call,
                      "atLeast": self.at_least, "atMost": self.at_most})
        return d


@dataclass(frozen=True)
class WaitShape:
    """One `Wait.<kind>(...)` that wait_for returns."""

    kind: str  # one of WAIT_KINDS
    conditions: tuple[ConditionInfo, ...]
    combinations: tuple[tuple[ConditionInfo, ...], ...]
    line: int

    @property
    def all_conditions(self) -> tuple[ConditionInfo, ...]:
        return self.conditions + tuple(c for combo in self.combinations for c in combo)

    @property
    def timer_only(self) -> bool:
        """Only time can make it ready: every condition is a Timer (and there is one)."""
        conds = self.all_conditions
        return bool(conds) and all(c.kind == "timer" for c in conds)

    @property
    def text(self) -> str:
        if self.kind == "any_combination_of":
            inner = ", ".join("of(" + ", ".join(c.text for c in combo) + ")" for combo in self.combinations)
        else:
            inner = ", ".join(c.text for c in self.conditions)
        return f"{self.kind}({inner})"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "line": self.line,
                             "conditions": [c.to_dict() for c in self.conditions]}
        if self.kind == "any_combination_of":
            d["combinations"] = [[c.to_dict() for c in combo] for combo in self.combinations]
        return d


@dataclass(frozen=True)
class WaitInfo:
    """Everything `wait_for` may return, as far as its source says."""

    waits: tuple[WaitShape, ...]
    computed: bool  # some return is not a Wait the source spells out
    file: str | None
    line: int | None  # the `def wait_for` line
    uses_timer: bool = False  # a Timer is built somewhere in wait_for (read or not)
    uses_signal: bool = False  # a channel or SubFlow condition is built somewhere in wait_for

    @property
    def text(self) -> str:
        parts = [w.text for w in self.waits]
        if self.computed:
            parts.append(COMPUTED)
        return " or ".join(dict.fromkeys(parts))

    @property
    def polls_by_time(self) -> bool:
        """Only a Timer can wake the step: a read Wait of timers only, or (unread) timers and no signal."""
        if any(w.timer_only for w in self.waits):
            return True
        return self.computed and self.uses_timer and not self.uses_signal

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "computed": self.computed, "file": self.file, "line": self.line,
                "waits": [w.to_dict() for w in self.waits]}


def has_wait_for(instance: Any) -> bool:
    from dexcli.sdk.flow import Step

    fn = getattr(type(instance), "wait_for", None)
    return fn is not None and fn is not getattr(Step, "wait_for", None)


def read_wait(instance: Any) -> WaitInfo | None:
    """What the step's wait_for waits on; None when the step has no wait_for of its own."""
    if not has_wait_for(instance):
        return None
    cls: type = type(instance)
    methods = class_methods(cls)
    fi = methods.get("wait_for")
    if fi is None:  # defined where we have no source
        return WaitInfo((), True, None, None)
    reader = _Reader(instance, methods)
    exprs = reader.returns(fi, 0)
    waits: list[WaitShape] = []
    computed = not exprs
    for expr, where in exprs:
        for candidate in reader.alternatives(expr, where):
            shape = reader.wait(candidate, where)
            if shape is None:
                computed = True
            elif shape not in waits:
                waits.append(shape)
    uses_timer, uses_signal = _condition_calls(fi, methods)
    return WaitInfo(tuple(waits), computed, fi.file, fi.node.lineno, uses_timer, uses_signal)


def _condition_calls(fi: FuncInfo, methods: dict[str, FuncInfo]) -> tuple[bool, bool]:
    """Whether wait_for (and the step's methods it calls) builds a Timer; a channel or SubFlow condition."""
    timer = signal = False
    todo, seen = [fi], set()
    while todo:
        cur = todo.pop()
        if id(cur) in seen:
            continue
        seen.add(id(cur))
        for n in ast.walk(cur.node):
            if not isinstance(n, ast.Call):
                continue
            name, base = callee_name(n.func), _base_name(n.func)
            timer = timer or (name == "by_duration" and base == "Timer")
            signal = signal or name in CHANNEL_CALLS or (name == "run" and base == "SubFlow")
            f = n.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == cur.param(0):
                helper = methods.get(f.attr)
                if helper is not None:
                    todo.append(helper)
    return timer, signal


def _base_name(func: ast.AST) -> str | None:
    if isinstance(func, ast.Attribute):
        return (dotted(func.value) or "").split(".")[-1] or None
    return None


def _assigned_once(fi: FuncInfo, name: str) -> ast.AST | None:
    """The value of `name = <value>` when that is the only binding of the local `name`."""
    values: list[ast.AST] = []
    for n in ast.walk(fi.node):
        target = n.targets[0] if isinstance(n, ast.Assign) and len(n.targets) == 1 else \
            n.target if isinstance(n, ast.AnnAssign) else None
        value = n.value if isinstance(n, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(target, ast.Name) and target.id == name and value is not None:
            values.append(value)
        elif isinstance(n, (ast.AugAssign, ast.For, ast.NamedExpr, ast.With)) and any(
                isinstance(t, ast.Name) and t.id == name and isinstance(t.ctx, ast.Store) for t in ast.walk(n)):
            return None
    return values[0] if len(values) == 1 else None


class _Reader:
    """Reads Wait and condition expressions in the functions of one step instance."""

    def __init__(self, instance: Any, methods: dict[str, FuncInfo]) -> None:
        self.instance = instance
        self.methods = methods

    def returns(self, fi: FuncInfo, depth: int) -> list[tuple[ast.AST, FuncInfo]]:
        """The expressions a function returns (following `return self.helper(...)`)."""
        out: list[tuple[ast.AST, FuncInfo]] = []
        for n in ast.walk(fi.node):
            if not isinstance(n, ast.Return) or n.value is None:
                continue
            helper = self._helper(n.value, fi)
            if helper is not None and depth < _DEPTH:
                out.extend(self.returns(helper, depth + 1))
            else:
                out.append((n.value, fi))
        return sorted(out, key=lambda r: (getattr(r[0], "lineno", 0), getattr(r[0], "col_offset", 0)))

    def _helper(self, expr: ast.AST, fi: FuncInfo) -> FuncInfo | None:
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) \
                and isinstance(expr.func.value, ast.Name) and expr.func.value.id == fi.param(0):
            return self.methods.get(expr.func.attr)
        return None

    def _deref(self, expr: ast.AST, fi: FuncInfo) -> ast.AST:
        for _ in range(_DEPTH):
            if not (isinstance(expr, ast.Name) and expr.id in fi.local_names):
                break
            value = _assigned_once(fi, expr.id)
            if value is None:
                break
            expr = value
        return expr

    def alternatives(self, expr: ast.AST, fi: FuncInfo) -> list[ast.AST]:
        """The expressions one returned value may be: both arms of `a if c else b`, every value
        of `{...}[key]`; else the expression itself."""
        expr = self._deref(expr, fi)
        if isinstance(expr, ast.IfExp):
            return self.alternatives(expr.body, fi) + self.alternatives(expr.orelse, fi)
        if isinstance(expr, ast.Subscript):
            table = self._deref(expr.value, fi)
            if isinstance(table, ast.Dict) and table.values and all(k is not None for k in table.keys):
                return [a for v in table.values for a in self.alternatives(v, fi)]
        return [expr]

    def wait(self, expr: ast.AST, fi: FuncInfo) -> WaitShape | None:
        expr = self._deref(expr, fi)
        if not isinstance(expr, ast.Call) or not isinstance(expr.func, ast.Attribute):
            return None
        kind = expr.func.attr
        if kind not in WAIT_KINDS or _base_name(expr.func) != "Wait" or expr.keywords:
            return None
        if kind == "any_combination_of":
            combos = tuple(self._combination(a, fi) for a in expr.args)
            return WaitShape(kind, (), combos, expr.lineno)
        return WaitShape(kind, tuple(self.condition(a, fi) for a in expr.args), (), expr.lineno)

    def _combination(self, expr: ast.AST, fi: FuncInfo) -> tuple[ConditionInfo, ...]:
        expr = self._deref(expr, fi)
        if isinstance(expr, ast.Call) and callee_name(expr.func) == "of" \
                and _base_name(expr.func) == "ConditionCombination":
            return tuple(self.condition(a, fi) for a in expr.args)
        return (_unknown(expr),)

    def condition(self, expr: ast.AST, fi: FuncInfo) -> ConditionInfo:
        expr = self._deref(expr, fi)
        if not isinstance(expr, ast.Call) or isinstance(expr, ast.Starred):
            return _unknown(expr)
        name, base = callee_name(expr.func), _base_name(expr.func)
        cid = _condition_id(expr)
        if name == "by_duration" and base == "Timer":
            return self._timer(expr, fi, cid)
        if name in CHANNEL_CALLS and isinstance(expr.func, ast.Attribute):
            return self._channel(expr, expr.func, fi, cid)
        if name == "run" and base == "SubFlow" and expr.args:
            target = eval_ref(expr.args[0], fi, self.instance)
            label = (getattr(target, "__name__", None) or type(target).__name__) if target is not MISSING \
                else unparse(expr.args[0], 40)
            return ConditionInfo("subflow", _with_id(f"SubFlow {label}", cid), cid)
        return _unknown(expr)

    def _timer(self, call: ast.Call, fi: FuncInfo, cid: str | None) -> ConditionInfo:
        arg = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "duration"), None)
        seconds: float | None = None
        if arg is not None:
            try:
                value = const_value(arg, fi, self.instance)
                seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
            except (Unknown, TypeError, ValueError):
                seconds = None
        shown = format_duration(seconds) if seconds is not None else "(duration at run time)"
        return ConditionInfo("timer", _with_id(f"Timer {shown}", cid), cid, duration=seconds)

    def _channel(self, call: ast.Call, func: ast.Attribute, fi: FuncInfo, cid: str | None) -> ConditionInfo:
        from dexcli.sdk.channels import Channel, ChannelMap

        name = func.attr
        obj = eval_ref(func.value, fi, self.instance)
        args = list(call.args)
        is_map = isinstance(obj, ChannelMap) or (not isinstance(obj, Channel) and len(args) > CHANNEL_CALLS[name])
        channel = obj.name if isinstance(obj, (Channel, ChannelMap)) else None
        label = channel or unparse(func.value, 40)
        instance = None
        if is_map and args:
            inst = args.pop(0)
            instance = inst.value if isinstance(inst, ast.Constant) and isinstance(inst.value, str) \
                else unparse(inst, 40)
            label += f"[{inst.value!r}]" if isinstance(inst, ast.Constant) else f"[{instance}]"
        least, most, shown = self._counts(name, args, call, fi)
        return ConditionInfo("channel", _with_id(f"{label}.{name}{shown}", cid), cid, channel=channel,
                             instance=instance, call=name, at_least=least, at_most=most)

    def _counts(self, name: str, args: list[ast.expr], call: ast.Call,
                fi: FuncInfo) -> tuple[int | None, int | None, str]:
        """(at_least, at_most, the text after the call name) of a channel condition."""
        if name == "for_one":
            return 1, 1, ""
        if name == "for_range":
            kw = {k.arg: k.value for k in call.keywords}
            lo, hi = self._count(kw.get("at_least"), fi), self._count(kw.get("at_most"), fi)
            return lo, hi, f"({_bound(kw.get('at_least'), lo)}..{_bound(kw.get('at_most'), hi)})"
        expr = args[0] if args else next((k.value for k in call.keywords if k.arg == "count"), None)
        n = self._count(expr, fi)
        shown = f"({n if n is not None else '?'})"
        return (n if name != "at_most" else None), (n if name != "at_least" else None), shown

    def _count(self, expr: ast.AST | None, fi: FuncInfo) -> int | None:
        if expr is None:
            return None
        try:
            value = const_value(expr, fi, self.instance)
        except (Unknown, TypeError, ValueError):
            return None
        return value if isinstance(value, int) else None


def _bound(expr: ast.AST | None, value: int | None) -> str:
    if expr is None:
        return ""
    return str(value) if value is not None else "?"


def _condition_id(call: ast.Call) -> str | None:
    for k in call.keywords:
        if k.arg == "condition_id":
            if isinstance(k.value, ast.Constant) and (k.value.value is None or isinstance(k.value.value, str)):
                return k.value.value
            return "?"
    return None


def _with_id(text: str, cid: str | None) -> str:
    return f"{text} [{cid}]" if cid is not None else text


def _unknown(expr: ast.AST) -> ConditionInfo:
    return ConditionInfo("unknown", f"? {unparse(expr, 40)}")


def format_duration(seconds: float) -> str:
    """24 h, 24 h 30 min, 90 s → 1 min 30 s, 1.5 s: hours, minutes and seconds, zeros left out."""
    if seconds != int(seconds) or seconds < 60:
        return f"{seconds:g} s"
    whole = int(seconds)
    parts = [(whole // 3600, "h"), (whole % 3600 // 60, "min"), (whole % 60, "s")]
    return " ".join(f"{n} {unit}" for n, unit in parts if n)
