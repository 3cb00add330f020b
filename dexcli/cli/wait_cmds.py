"""The commands that move a waiting flow on from outside: rpc and skip-timer.

`dex rpc` runs the RPC handler in this process, on the flow's own class (loaded from the
reference stored with the run, as `dex resume` loads it), and commits its effects; a process
driving the flow sees them at its next look at the database. `dex skip-timer` makes a pending
timer of a waiting step ready now.
"""

from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING, Any

import typer

from dexcli.cli.app import open_store
from dexcli.cli.completion import complete_flow_id, complete_rpc_name, complete_running_flow_id
from dexcli.cli.errors import UsageError
from dexcli.cli.shared import flow_or_not_found

if TYPE_CHECKING:
    from dexcli.store import Store

_NOT_GIVEN = object()


class RpcFailedError(UsageError):
    """The RPC handler raised: nothing was committed (exit 1)."""

    exit_code = 1


def invoke_named_rpc(store: Store, flow_id: str, name: str, value: Any = _NOT_GIVEN, file: str | None = None) -> Any:
    """Invoke the RPC `name` of flow `flow_id` with `value` (its input, as JSON data) and commit
    its effects; returns its output as JSON data. NotFoundError (exit 3) for an unknown flow,
    UsageError (exit 2) for an unknown RPC or a wrong input, RpcFailedError (exit 1) when the
    handler raised; a closed flow the RPC would change raises FlowNotActiveOrNotFoundError (exit 3).

    The handler's code is the flow's installed plugin (a flow started by name), or the file the
    user names with `file`: never a file only the database names (see README, Security notes)."""
    from dexcli.cli.driver import build_engine
    from dexcli.cli.loader import load_file_flows, pick_flow
    from dexcli.sdk.codec import to_jsonable
    from dexcli.sdk.errors import WorkerInvocationError

    row = flow_or_not_found(store, flow_id)
    engine = build_engine(store, time_skip=False, attribute_stores=True)
    if file is not None:
        flows = load_file_flows(file)
        given = engine.definitions.registry.add(flows[0] if len(flows) == 1 else pick_flow(flows, row.flow_type, file))
        if given.flow_type != row.flow_type:
            raise UsageError(f"--file {file} defines {given.flow_type}, but flow {flow_id} is a {row.flow_type}")
    elif row.flow_ref is not None and row.flow_ref.startswith("file:"):
        started_from = shlex.quote(row.flow_ref.removeprefix("file:"))
        raise UsageError(f"flow {flow_id} was started from a file, and dex rpc runs a file's code only when you "
                         f"name it: add --file {started_from}")
    definition = engine.definitions.get(row.flow_type, row.flow_ref)
    spec = definition.rpcs.get(name)
    if spec is None:
        names = ", ".join(sorted(definition.rpcs)) or "none"
        raise UsageError(f"{definition.flow_type} has no RPC {name!r}; its RPCs: {names}")
    if value is _NOT_GIVEN:
        if spec.has_input:
            raise UsageError(f"RPC {name} takes an input: pass --input JSON")
        value = None
    elif not spec.has_input:
        raise UsageError(f"RPC {name} takes no input: leave out --input")
    try:
        output = engine.invoke_rpc(name, flow_id, value)
    except WorkerInvocationError as exc:
        raise RpcFailedError(f"rpc {name} failed: {exc.worker_error_type}: {exc.worker_error_detail}") from None
    return to_jsonable(output)


def rpc(
    flow_id: str = typer.Argument(..., help="The flow to call.", autocompletion=complete_flow_id),
    name: str = typer.Argument(..., help="The RPC's name (a method marked @rpc on the flow's class).",
                               autocompletion=complete_rpc_name),
    input: str | None = typer.Option(None, "--input", help="The RPC's input as JSON, or @file.json."),
    json_out: bool = typer.Option(False, "--json", help='One JSON object: {"flowId", "rpcName", "output"}.'),
    file: str | None = typer.Option(None, "--file", metavar="PATH.py:CLASS",
                                    help="The flow's code, for a flow started with `dex run --file` (required then)."),
) -> None:
    """Invoke an RPC of a running flow and print its output as JSON.

    The handler runs here, once (no retry); its publishes, next steps and cancellations commit
    atomically with its output, and a process driving the flow picks them up. A handler that
    raises commits nothing (exit 1). A flow started from a file needs --file naming its code:
    dex runs no file only the database names."""
    from dexcli.cli.inputs import read_input

    value = _NOT_GIVEN if input is None else read_input(input)
    store = open_store(must_exist=True)
    try:
        output = invoke_named_rpc(store, flow_id, name, value, file)
    finally:
        store.close()
    print(json.dumps({"flowId": flow_id, "rpcName": name, "output": output} if json_out else output))


def parse_step_execution_id(text: str) -> Any:
    """`AwaitDecision-1` -> StepExecutionId("AwaitDecision", 1)."""
    from dexcli.sdk.conditions import StepExecutionId

    step_type, _, number = text.rpartition("-")
    if not step_type or not number.isdigit():
        raise UsageError(f"STEP_EXECUTION_ID looks like StepType-N (e.g. AwaitDecision-1), got {text!r}")
    return StepExecutionId(step_type, int(number))


def skip_timer(
    flow_id: str = typer.Argument(..., help="The flow.", autocompletion=complete_running_flow_id),
    step_execution_id: str = typer.Argument(..., help="The waiting step execution, e.g. AwaitDecision-1."),
    condition_id: str | None = typer.Option(None, "--condition-id", help="The timer's condition id."),
    index: int | None = typer.Option(None, "--index", min=0, max=1_000_000,
                                     help="The timer's 0-based index among the wait's timers."),
) -> None:
    """Make a pending timer of a waiting step fire now (exactly one of --condition-id, --index).

    A process driving the flow runs the step's execute at its next look at the database."""
    from dexcli.cli.driver import build_engine
    from dexcli.client import Client
    from dexcli.sdk.conditions import TimerId

    if (condition_id is None) == (index is None):
        raise UsageError("name the timer with exactly one of --condition-id ID and --index N")
    seid = parse_step_execution_id(step_execution_id)
    try:
        timer = TimerId.by_condition_id(condition_id) if condition_id is not None else TimerId.by_condition_index(
            index or 0)
    except ValueError as exc:
        raise UsageError(f"--condition-id: {exc}") from None
    store = open_store(must_exist=True)
    try:
        flow_or_not_found(store, flow_id)
        Client(engine=build_engine(store, time_skip=False)).skip_timer(flow_id, seid, timer)
    finally:
        store.close()
    which = condition_id if condition_id is not None else f"#{index}"
    print(f"timer {which} of {step_execution_id} skipped: it fires now")
