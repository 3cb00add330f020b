"""A running attempt's heartbeats and Stream messages on their way to the database.

What an attempt outputs between two group commits is gathered in one `transitions.Outputs`
and written by one unit (`transitions.heartbeat`); once committed, its events are reported and
its crash points hit. A unit that finds the attempt no longer owned fences it and stops it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from dexcli.engine import transitions as t
from dexcli.engine.attempt import AttemptRun
from dexcli.engine.batch import Unit

if TYPE_CHECKING:
    from dexcli.engine.core import Engine


class OutputQueue:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._pending: dict[tuple[str, str], tuple[AttemptRun, t.Outputs]] = {}

    def of(self, run: AttemptRun) -> t.Outputs:
        """The attempt's outputs waiting for the next group commit (queued on first use)."""
        entry = self._pending.get(run.key)
        if entry is not None and entry[0] is run:
            return entry[1]
        engine = self.engine
        out, queued = t.Outputs(), engine.clock.real()
        self._pending[run.key] = (run, out)
        assert run.loop is not None

        def committed(tokens: list[int | None] | None) -> None:
            if engine.output_delays is not None:
                engine.output_delays.append(engine.clock.real() - queued)
            self._committed(run, out, tokens)

        engine.commits.submit_nowait(Unit(lambda tx: self._write(tx, run, out), committed), run.loop)
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
        engine = self.engine
        listening = bool(engine.events.listeners)  # no listener: no event built (a JSON decode each)
        for (stream, text, _, _), token in zip(out.streams, tokens, strict=True):
            run.stream_writes += 1
            if listening:
                engine.emit("streamMessage", run.flow_id, stepExecutionId=run.seid, stream=stream.name,
                            value=json.loads(text), resumeToken=str(token) if token else None,
                            source=f"#{run.seid}", dropped=token is None)
            engine.faults.hit("stream-write", run.spec.step_type, run.stream_writes,
                              where=lambda: run.where(f", message {run.stream_writes}"))
        if out.heartbeats:
            run.heartbeats += out.heartbeats
            has = bool(out.checkpoint and out.checkpoint[0])
            if listening:
                engine.emit("heartbeat", run.flow_id, stepExecutionId=run.seid, attempt=run.attempt,
                            checkpoint=json.loads(out.checkpoint[1]) if has and out.checkpoint and out.checkpoint[1]
                            else None, hasCheckpoint=has, count=run.heartbeats)
            engine.faults.hit("heartbeat", run.spec.step_type, run.heartbeats,
                              where=lambda: run.where(f", heartbeat {run.heartbeats}"))
