"""Shared machinery for the crash suite: run `dex` as real subprocesses, kill them, read what the
database says before and after recovery, and check the recovery rules.

Every trial has its own database (time skips move a database's clock for every flow in it).
Trials are independent: each module lists its trials by name in a `Trials`, and each test names
the trials it reads with `@pytest.mark.trials(...)`. Before the first crash test, the conftest
submits the trials of every selected test (and only those) to one thread pool; each test then
waits for its own. The subprocess work overlaps, the assertions stay per test, and a test run
on its own runs only its own trials.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing, suppress
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from dexcli.engine.doctor import check as doctor_check
from dexcli.store import Store
from dexcli_flows.job_service import status_of

ROOT = Path(__file__).resolve().parents[2]
JOBS_NS = "polling.jobs"
HEARTBEAT_TIMEOUT = 60.0  # every step of both example flows uses the 60 s default / AwaitJob's 1 min
STEP_TIMEOUT = 120  # wall seconds any single dex subprocess may take before the test gives up

ENV = {k: v for k, v in os.environ.items() if k not in ("DEX_DB", "FORCE_COLOR")}
ENV.update(NO_COLOR="1", TERM="dumb", COLUMNS="200", PYTHONUNBUFFERED="1")

# Two cores: a few more workers than cores, since a trial spends part of its time sleeping
# (real-time victims) or waiting on another process.
POOL = ThreadPoolExecutor(max_workers=int(os.environ.get("DEX_CRASH_JOBS", "5")),
                          thread_name_prefix="crash-trial")


# pytest-timeout for a crash test: it may first wait for the trials queued before its own
# (the whole suite's, when the first test of a full run waits), and a hung subprocess is given
# STEP_TIMEOUT to fail with its own message first.
TEST_TIMEOUT = 300


class Trials:
    """One module's trials by name. A trial runs `fn(db, *args)` on a database of its own, once,
    in the shared pool, when it is first needed: the conftest submits up front the trials the
    selected tests name in their `trials` marks; `trials[name]` waits for one (and submits it
    if nobody did)."""

    def __init__(self, folder: str, priority: int) -> None:
        self.folder = folder
        self.priority = priority  # lower first: long real-time trials should start early
        self._specs: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {}
        self._futures: dict[str, Future] = {}
        self._factory: pytest.TempPathFactory | None = None
        self._base: Path | None = None

    def add(self, name: str, fn: Callable[..., Any], *args: Any) -> None:
        assert name not in self._specs, f"trial {name} added twice"
        self._specs[name] = (fn, args)

    def names(self) -> list[str]:
        return list(self._specs)

    def bind(self, factory: pytest.TempPathFactory) -> Trials:
        """Use `factory` for the trials' folders (one per module, made when the first trial starts)."""
        self._factory = self._factory or factory
        return self

    def submit(self, names: Iterable[str]) -> None:
        """Start the named trials that have not started, in the order they were added."""
        wanted = set(names)
        unknown = wanted - set(self._specs)
        assert not unknown, f"{self.folder}: no trial named {sorted(unknown)}"
        for name in self._specs:
            if name in wanted:
                self.future(name)

    def future(self, name: str) -> Future:
        fut = self._futures.get(name)
        if fut is None:
            fn, args = self._specs[name]
            if self._base is None:
                assert self._factory is not None, "Trials.bind(tmp_path_factory) first"
                self._base = self._factory.mktemp(self.folder)
            folder = self._base / name
            folder.mkdir()
            fut = self._futures[name] = POOL.submit(fn, folder / "dex.db", *args)
        return fut

    def __getitem__(self, name: str) -> Any:
        """The trial's result (it runs now if it was not submitted yet); its exception, if it raised."""
        return self.future(name).result()

    def only(self, names: Iterable[str]) -> NamedTrials:
        """A view that reads the named trials and refuses any other: a trial a test reads without
        naming it in its mark would start only when read, instead of up front with the others."""
        return NamedTrials(self, frozenset(names))

    def cancel_pending(self) -> None:
        """Drop the submitted trials that have not started (the session is ending early)."""
        for fut in self._futures.values():
            fut.cancel()


@dataclass(frozen=True)
class NamedTrials:
    trials: Trials
    names: frozenset[str]

    def __getitem__(self, name: str) -> Any:
        assert name in self.names, f"the test reads trial {name!r}: add it to its @pytest.mark.trials(...)"
        return self.trials[name]


# ---------------------------------------------------------------------------- processes ----
def dex_cmd(db: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "dexcli", "--db", str(db), *args]


@dataclass
class Proc:
    args: list[str]
    pid: int
    returncode: int
    stdout: str
    stderr: str

    def describe(self) -> str:
        return (f"$ {' '.join(self.args[2:])}\n  exit {self.returncode}\n"
                f"  stdout:\n{_indent(self.stdout)}\n  stderr:\n{_indent(self.stderr)}")


def _indent(text: str, n: int = 4000) -> str:
    text = text if len(text) <= n else "…" + text[-n:]
    return "\n".join("    " + line for line in text.splitlines())


def dex(db: Path, *args: str, timeout: float = STEP_TIMEOUT) -> Proc:
    p = subprocess.Popen(dex_cmd(db, *args), cwd=ROOT, env=ENV, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        raise AssertionError(
            f"dex {' '.join(args)} took over {timeout} s\n{_indent(out)}\n{_indent(err)}") from None
    return Proc(p.args, p.pid, p.returncode, out, err)


def spawn(db: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(dex_cmd(db, *args), cwd=ROOT, env=ENV, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish(p: subprocess.Popen, timeout: float = STEP_TIMEOUT) -> Proc:
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    return Proc(list(p.args), p.pid, p.returncode, out, err)


def sigkill(p: subprocess.Popen) -> None:
    with suppress(ProcessLookupError):
        os.kill(p.pid, signal.SIGKILL)


def owner_pid(owner: str | None) -> int | None:
    """Lease owners are `host:pid:random`."""
    if not owner:
        return None
    parts = owner.split(":")
    return int(parts[1]) if len(parts) >= 3 and parts[1].isdigit() else None


# ---------------------------------------------------------------------------- snapshots ----
@dataclass
class Snap:
    """What one flow's rows say at one moment."""

    flow: dict[str, Any] | None
    steps: dict[str, dict[str, Any]]
    attempts: dict[tuple[str, int], dict[str, Any]]
    history: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    job: dict[str, Any] | None
    problems: list[str] = field(default_factory=list)

    @property
    def status(self) -> str | None:
        return None if self.flow is None else self.flow["status"]

    @property
    def states(self) -> list[str]:
        return [json.loads(m["value"])["state"] for m in self.messages]

    def outputs(self) -> list[Any]:
        return [c["output"] for c in json.loads(self.flow["completions"])] if self.flow else []

    def running_attempts(self) -> list[dict[str, Any]]:
        return [a for a in self.attempts.values() if a["outcome"] == "RUNNING"]

    def checkpoint(self, seid: str) -> Any:
        s = self.steps.get(seid)
        if s is None or not s["has_heartbeat_value"]:
            return None
        return json.loads(s["heartbeat_value"])


def plain(record: Any) -> dict[str, Any]:
    """A store record as a plain dict (enums as their stored values), for comparing runs."""
    return {k: v.value if isinstance(v, enum.Enum) else v for k, v in dataclasses.asdict(record).items()}


def snapshot(db: Path, flow_id: str, *, doctor: bool = True) -> Snap:
    with closing(Store(db)) as store:
        record = store.get_flow(flow_id)
        flow = None if record is None else plain(record)
        steps = {s.step_execution_id: plain(s) for s in store.steps_of(flow_id)}
        attempts = {(a.step_execution_id, a.attempt): plain(a) for a in store.attempts_of(flow_id)}
        history = [dict(plain(e), payload=json.loads(e.payload)) for e in store.history_of(flow_id)]
        messages = [plain(m) for m in store.stream_messages(flow_id, "JobProgress", limit=100_000)]
        job = store.kv_get(JOBS_NS, flow_id)
        problems = doctor_check(store, flow_id)[0] if doctor and flow is not None else []
    return Snap(flow, steps, attempts, history, messages, job, problems)


def shape(s: Snap, flow_id: str) -> dict[str, Any]:
    """A run's outcome with its flow id taken out, for comparing with an uncrashed run."""
    def norm(v: Any) -> Any:
        return json.loads(json.dumps(v).replace(flow_id, "<id>"))

    assert s.flow is not None
    return {
        "status": s.flow["status"],
        "errorType": s.flow["error_type"],
        "errorMessage": norm(s.flow["error_message"]),
        "outputs": norm(s.outputs()),
        "steps": [(seid, st["status"], norm(json.loads(st["decision"] or "null"))) for seid, st in s.steps.items()],
    }


# ---------------------------------------------------------------------------- trials -------
@dataclass
class Trial:
    name: str
    flow: str                # polling | three-steps
    flow_id: str
    db: Path
    victim: Proc | None = None
    pre: Snap | None = None    # right after the victim died
    resume: Proc | None = None
    post: Snap | None = None
    inspect: dict[str, Any] | None = None
    doctor: Proc | None = None
    killed: str = ""           # how the victim ended (for reports)
    notes: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        parts = [f"trial {self.name} (db {self.db}, flow {self.flow_id}, {self.killed})"]
        for p in (self.victim, self.resume, self.doctor):
            if p is not None:
                parts.append(p.describe())
        if self.post is not None:
            parts.append("attempts: " + "; ".join(
                f"{k[0]}#{k[1]} {a['outcome']} {a['error_type'] or ''} owner={a['owner']}"
                for k, a in sorted(self.post.attempts.items())))
            parts.append(f"JobProgress: {self.post.states}")
        return "\n".join(parts)


def recover(t: Trial, *, cli: bool) -> Trial:
    """After the victim ended: snapshot, `dex resume ID --time-skip` when the flow is still
    RUNNING, snapshot again (with the in-process doctor). With cli, also `dex doctor` when
    something was resumed. `dex resume --json` ends with the `dex inspect --json` object."""
    t.pre = snapshot(t.db, t.flow_id, doctor=False)
    if t.pre.flow is not None and t.pre.status == "RUNNING":
        t.resume = dex(t.db, "resume", t.flow_id, "--time-skip", "--json")
        lines = t.resume.stdout.strip().splitlines()
        if lines:
            try:
                last = json.loads(lines[-1])
            except ValueError:
                last = None
            if isinstance(last, dict) and "summary" in last:
                t.inspect = last
        if cli:
            t.doctor = dex(t.db, "doctor")
    t.post = snapshot(t.db, t.flow_id)
    return t


def flow_args(flow: str, flow_id: str, n: int = 1) -> list[str]:
    args = ["run", flow, "--flow-id", flow_id]
    if flow == "three-steps":
        args += ["--input", str(n)]
    return args


def expected_outputs(flow: str, flow_id: str, n: int = 1) -> list[Any]:
    return [f"artifact for {flow_id}"] if flow == "polling" else [2 * n + 5]


# ---------------------------------------------------------------------------- checks -------
CRASH_LINE = re.compile(r"crash injected (at|after) ")


def check_victim_crashed(t: Trial, what: str) -> None:
    """An injected crash exits 137; its last lines say what was injected and how to resume."""
    v = t.victim
    assert v is not None
    assert v.returncode == 137, t.describe()
    lines = [line.strip() for line in v.stderr.strip().splitlines() if line.strip()]
    assert lines, t.describe()
    assert f"dex resume {t.flow_id}" in lines[-1], t.describe()
    assert "--time-skip" in lines[-1], t.describe()  # the victim ran with --time-skip; so should the resume
    told = "\n".join(lines[-2:])
    assert CRASH_LINE.search(told) and what in told, t.describe()


def check_recovered(t: Trial, *, n: int = 1, baseline: dict[str, Any] | None = None) -> None:
    """The rules every crash must leave intact once the flow was resumed. Without a baseline the
    flow must be COMPLETED with its usual result; with one (`shape` of an uncrashed run of the
    same command) it must end exactly as that run did."""
    pre, post = t.pre, t.post
    assert pre is not None and post is not None and post.flow is not None, t.describe()
    why = t.describe()

    # Same terminal state and result as an uncrashed run.
    if baseline is None or baseline["status"] == "COMPLETED":
        assert post.status == "COMPLETED", why
        assert post.outputs() == expected_outputs(t.flow, t.flow_id, n), why
        expected_steps = ["StartJob-1", "AwaitJob-1"] if t.flow == "polling" else ["First-1", "Second-1", "Third-1"]
    else:
        expected_steps = [seid for seid, _, _ in baseline["steps"]]
    if baseline is not None:
        assert shape(post, t.flow_id) == baseline, why
    if t.resume is not None:
        assert t.resume.returncode == (0 if post.status == "COMPLETED" else 1), why

    # Every step's decision applied exactly once: one StepExecuteCompleted per completed step
    # execution (one StepExecuteFailed per failed one), no step execution that an extra decision
    # would have created, one FlowClosed.
    assert list(post.steps) == expected_steps, why
    done = Counter(e["payload"]["stepExecutionId"] for e in post.history if e["type"] == "StepExecuteCompleted")
    failed = Counter(e["payload"]["stepExecutionId"] for e in post.history if e["type"] == "StepExecuteFailed")
    assert done == Counter(seid for seid, st in post.steps.items() if st["status"] == "COMPLETED"), why
    assert failed == Counter(seid for seid, st in post.steps.items() if st["status"] == "FAILED"), why
    assert set(st["status"] for st in post.steps.values()) <= {"COMPLETED", "FAILED"}, why
    types = Counter(e["type"] for e in post.history)
    assert types["FlowClosed"] == 1 and types["FlowStarted"] == 1, why
    assert post.problems == [], why
    if t.doctor is not None:
        assert t.doctor.returncode == 0 and "0 problem(s)" in t.doctor.stdout, why

    check_attempts(t)
    if t.flow == "polling":
        check_progress(t)


def check_attempts(t: Trial) -> None:
    """Attempt records account for the crash: what was RUNNING when the process died is LOST with
    `Heartbeat`, at its heartbeat deadline; the next attempt starts after it; nothing else changed."""
    pre, post = t.pre, t.post
    assert pre is not None and post is not None
    why = t.describe()
    victim_pid = t.victim.pid if t.victim is not None else None
    resume_pid = t.resume.pid if t.resume is not None else None
    lost_keys = {k for k, a in pre.attempts.items() if a["outcome"] == "RUNNING"}
    for k, a in post.attempts.items():
        if k in lost_keys:
            b = pre.attempts[k]
            step = pre.steps[k[0]]
            assert a["outcome"] == "LOST" and a["error_type"] == "Heartbeat", why
            assert "HeartbeatTimeout" in (a["detail"] or ""), why
            assert a["owner"] == b["owner"], why
            if victim_pid is not None:
                assert owner_pid(a["owner"]) == victim_pid, why
            # declared lost exactly when the lease (last heartbeat + timeout) ran out, not before
            assert abs(a["end_time"] - step["heartbeat_deadline"]) < 1e-6, why
            last_beat = step["last_heartbeat_time"] or step["attempt_started_at"]
            assert abs(a["end_time"] - last_beat - HEARTBEAT_TIMEOUT) < 1e-3, why
            nxt = post.attempts.get((k[0], k[1] + 1))
            assert nxt is not None and nxt["outcome"] in ("COMPLETED", "TIMED_OUT", "FAILED"), why
            if post.steps[k[0]]["status"] == "COMPLETED":
                assert nxt["outcome"] == "COMPLETED", why
            assert nxt["start_time"] >= a["end_time"], why
            assert nxt["owner"] != a["owner"], why
        elif k in pre.attempts:
            assert a == pre.attempts[k], why  # finished before the crash: untouched since
        else:
            assert a["outcome"] != "LOST", why
            if post.status == "COMPLETED":
                assert a["outcome"] == "COMPLETED", why
            if resume_pid is not None:
                assert owner_pid(a["owner"]) == resume_pid, why
    assert not [a for a in post.attempts.values() if a["outcome"] == "LOST" and
                (a["step_execution_id"], a["attempt"]) not in lost_keys], why
    # every Stream message is counted on the attempt that wrote it, lost attempts included
    assert sum(a["stream_writes"] for a in post.attempts.values()) == len(post.messages), why
    # attempts of one step execution never overlap
    check_no_overlap(list(post.attempts.values()), why)


def check_no_overlap(attempts: list[dict[str, Any]], why: str = "") -> None:
    by_step: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for a in attempts:
        by_step.setdefault((a["flow_id"], a["step_execution_id"]), []).append(a)
    for key, atts in by_step.items():
        atts.sort(key=lambda a: a["attempt"])
        assert [a["attempt"] for a in atts] == list(range(1, len(atts) + 1)), f"{key}: {atts}\n{why}"
        for prev, cur in pairwise(atts):
            assert prev["end_time"] is not None, f"{key}: attempt {prev['attempt']} never ended\n{why}"
            assert cur["start_time"] >= prev["end_time"], (
                f"{key}: attempt {cur['attempt']} ({cur['owner']}) started at {cur['start_time']} before "
                f"attempt {prev['attempt']} ({prev['owner']}) ended at {prev['end_time']}\n{why}")
        for a in atts:
            if a["end_time"] is not None:
                assert a["end_time"] >= a["start_time"], f"{key}: {a}\n{why}"


ORDER = ["QUEUED", "RUNNING"]


def check_progress(t: Trial) -> None:
    """No progress message sent twice because of a retry, except the one repeat the seed's loop
    allows: the lost attempt's last Stream write was not checkpointed, and the retry found the job
    still in that state. Then exactly one repeat, right where the retry began."""
    pre, post = t.pre, t.post
    assert pre is not None and post is not None
    why = t.describe()
    before, after = pre.states, post.states
    assert after[: len(before)] == before, why  # the stream is append-only
    assert set(after) <= set(ORDER), why
    assert [ORDER.index(s) for s in after] == sorted(ORDER.index(s) for s in after), why
    repeats = [i for i in range(1, len(after)) if after[i] == after[i - 1]]
    assert len(repeats) <= 1, why

    # When may (and must) the retry repeat the last message?
    last = before[-1] if before else None
    checkpoint = pre.checkpoint("AwaitJob-1")
    lost = [a for a in pre.running_attempts() if a["step_execution_id"] == "AwaitJob-1"]
    allowed = last is not None and bool(lost) and checkpoint != last
    required: bool | None = False
    if allowed:
        retry = post.attempts.get(("AwaitJob-1", lost[0]["attempt"] + 1))
        assert retry is not None and post.job is not None, why
        s0 = status_of(t.flow_id, post.job, retry["start_time"]).state.value
        s1 = status_of(t.flow_id, post.job, retry["start_time"] + 0.5).state.value
        required = (s0 == last) if s0 == s1 else None  # at a job transition: either is right
    t.notes["repeat"] = bool(repeats)
    t.notes["repeat_allowed"] = allowed
    if repeats:
        assert allowed, f"progress message repeated though the last one was checkpointed\n{why}"
        assert repeats == [len(before)], f"the repeat is not where the retry began\n{why}"
    if required is not None:
        assert bool(repeats) == required, (
            f"expected {'one repeat' if required else 'no repeat'} of {last!r} "
            f"(checkpoint {checkpoint!r})\n{why}")
