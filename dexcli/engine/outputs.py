"""A running attempt's heartbeats and Stream messages on their way to the database.

What an attempt outputs between two group commits is gathered in one `transitions.Outputs`
and written by one unit (`transitions.heartbeat`); once committed, its events are reported and
its crash points hit. A unit that finds the attempt no longer owned fences it and stops it.
"""

from __future__ import annotations

import json
from typing import Any

from dexcli.engine import transitions as t
from dexcli.engine.attempt import AttemptRun
from dexcli.engine.batch import GroupCommit, Unit
from dexcli.engine.clock import Clock
from dexcli.engine.events import Emitter
from dexcli.engine.faults import Faults


class OutputQueue:
    def __init__(self, clock: Clock, commits: GroupCommit, events: Emitter, faults: Faults) -> None:
        self._clock, self._commits, self._events, self._faults = clock, commits, events, faults
        self._pending: dict[tuple[str, str], tuple[AttemptRun, t.Outputs]] = {}
        self.delays: list[float] | None = None  # given a list, how long each unit waited for its commit (bench/)

    def of(self, run: AttemptRun) -> t.Outputs:
        """The attempt's outputs waiting for the next group commit (queued on first use)."""
        entry = self._pending.get(run.key)
        if entry is not None and entry[0] is run:
            return entry[1]
        out, queued = t.Outputs(), self._clock.real()
        self._pending[run.key] = (run, out)
        assert run.loop is not None

        def committed(tokens: list[int | None] | None) -> None:
            if self.delays is not None:
                self.delays.append(self._clock.real() - queued)
            self._committed(run, out, tokens)

        self._commits.submit_nowait(Unit(lambda tx: self._write(tx, run, out), committed), run.loop)
        return out

    def _write(self, tx: Any, run: AttemptRun, out: t.Outputs) -> list[int | None] | None:
        entry = self._pending.get(run.key)
        if entry is not None and entry[1] is out:
            del self._pending[run.key]  # later heartbeats start a new unit
        return t.heartbeat(tx, run.attempt_key, run.definition.flow_type, run.opts.heartbeat_timeout, out)

    def _committed(self, run: AttemptRun, out: t.Outputs, tokens: list[int | None] | None) -> None:
        if tokens is None:
            run.fence("lease lost: another process took the attempt over, or the flow closed")
            run.cancel()
            return
        events, faults = self._events, self._faults
        listening = bool(events.listeners)  # no listener: no event built (a JSON decode each)
        for (stream, text, _, _), token in zip(out.streams, tokens, strict=True):
            run.stream_writes += 1
            if listening:
                events.emit("streamMessage", run.flow_id, stepExecutionId=run.seid, stream=stream.name,
                            value=json.loads(text), resumeToken=str(token) if token else None,
                            source=f"#{run.seid}", dropped=token is None)
            faults.hit("stream-write", run.spec.step_type, run.stream_writes,
                              where=lambda: run.where(f", message {run.stream_writes}"))
        if out.heartbeats:
            run.heartbeats += out.heartbeats
            has = bool(out.checkpoint and out.checkpoint[0])
            if listening:
                events.emit("heartbeat", run.flow_id, stepExecutionId=run.seid, attempt=run.attempt,
                            checkpoint=json.loads(out.checkpoint[1]) if has and out.checkpoint and out.checkpoint[1]
                            else None, hasCheckpoint=has, count=run.heartbeats)
            faults.hit("heartbeat", run.spec.step_type, run.heartbeats,
                              where=lambda: run.where(f", heartbeat {run.heartbeats}"))
