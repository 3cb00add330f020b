"""Every state change of a flow, as one function over one transaction.

Each function takes the transaction, the facts it needs and `now`, writes rows and history,
and returns what happened as a record; the engine commits it (often with others: see
dexcli.engine.batch) and acts on the result after COMMIT. None of them keeps state, starts
tasks or reports events. A write for an attempt this process no longer owns raises `Fenced`
and the caller's transaction is rolled back.

    start      a flow row, its start step queued (or leased), FlowStarted (`start_all`: many in one go)
    lease      a queued or backing-off step's next attempt, to one owner
    heartbeat  an attempt's heartbeat, checkpoint and Stream messages
    complete   an attempt's decision: next steps, collected output, StepExecuteCompleted, maybe close
    fail       a failed attempt: retry after backoff, or recovery step / close once exhausted
    reap       another process's attempt whose deadline passed: declared lost, then `fail`
    stop       a client's cancel / terminate / fail
    close      the flow's end: open steps cancelled, FlowClosed

Waiting's state changes (a committed Wait, a woken wait, publishes, a skipped timer,
cancellations) are in `waiting`; a start's id reuse (`allows`, `make_room`) in `flows`; a
flow timeout's firing in `timeouts`; an RPC's locks and committed effects in `rpc`; a time travel
(a new run from the current run's history, the old run retired with `flows.retire_run`, which
id reuse uses too) in `time_travel`; a client's FlowConfig update and continue-as-new (by a
client or the FlowConfig threshold) in `continuing`; a FAILED run's flow retry (`flows.close` makes
the new run, after the retry policy's backoff) in `flow_retry`."""

from dexcli.engine.deadlines import method_options
from dexcli.engine.transitions import continuing, flow_retry, waiting
from dexcli.engine.transitions.flows import (
    Started,
    Starting,
    StartRequest,
    allows,
    answered,
    close,
    start,
    start_all,
    stop,
)
from dexcli.engine.transitions.outcomes import (
    Completed,
    Decision,
    ExecuteDone,
    Failed,
    Failure,
    complete,
    complete_execute,
    fail,
    reap,
)
from dexcli.engine.transitions.rpc import Planned, RpcApplied
from dexcli.engine.transitions.steps import (
    START_SOURCE,
    AttemptKey,
    Closed,
    Fenced,
    Leased,
    NextStep,
    Outputs,
    end_call,
    give_back,
    heartbeat,
    lease,
    leased,
    queue_step,
    release,
    release_left,
)
from dexcli.engine.transitions.timeouts import TimedOut, fire_due, flow_timeout

__all__ = [
    "AttemptKey",
    "Closed",
    "Completed",
    "Decision",
    "ExecuteDone",
    "Failed",
    "Failure",
    "Fenced",
    "Leased",
    "NextStep",
    "Outputs",
    "Planned",
    "RpcApplied",
    "START_SOURCE",
    "StartRequest",
    "Started",
    "Starting",
    "TimedOut",
    "allows",
    "answered",
    "close",
    "complete",
    "complete_execute",
    "continuing",
    "end_call",
    "fail",
    "fire_due",
    "flow_retry",
    "flow_timeout",
    "give_back",
    "heartbeat",
    "lease",
    "leased",
    "method_options",
    "queue_step",
    "reap",
    "release",
    "release_left",
    "start",
    "start_all",
    "stop",
    "waiting",
]
