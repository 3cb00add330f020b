"""What an engine has done and what it runs now, as a frozen record (`Engine.activity()`): its
counters, and the attempts leased to this process that it holds in memory. Read-only: the
bench and the tests read it; nothing reads it to decide anything."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AttemptHere:
    """An attempt this engine runs (or is about to begin): leased to this process.

    `on_thread` tells the two drivers apart (ARCHITECTURE.md, "Two attempt drivers"): True for
    a plain sync `execute` run to completion on a handler thread (dexcli.engine.sync_attempt),
    False for a task on the loop (generators, `wait_for`, async handlers), None while no driver
    is set yet. `began` is False for one leased and registered but not begun."""

    flow_id: str
    step_execution_id: str
    attempt: int
    on_thread: bool | None
    began: bool


@dataclass(frozen=True, slots=True)
class Activity:
    """Counters since the engine was built, and the attempts it holds now.

    attempts: attempts started here; transitions: the attempts' verdicts this engine committed
    (a decision, a wait, a failure) and the attempts of other processes it declared lost
    (heartbeats and Stream messages are not counted); flows_closed: flows this engine's commits
    closed; running: the attempts leased to this process that it holds now (while a drive goes
    on: a drive's end stops or gives back what it held), in no particular order."""

    attempts: int
    transitions: int
    flows_closed: int
    running: tuple[AttemptHere, ...]

    def of(self, flow_id: str, step_execution_id: str) -> AttemptHere | None:
        """The attempt of this step execution running here, if there is one."""
        return next((a for a in self.running
                     if a.flow_id == flow_id and a.step_execution_id == step_execution_id), None)
