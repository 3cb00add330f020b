"""`dex wait`: block until a flow's attribute holds a value — for scripts that wait on a flow
another process (`dex run`, `dex worker`) is running.

It reads the database only (it runs no step): every 0.1 s it looks at the attribute's committed
value. Exit 0 when it equals `--equals` (printed as JSON), 1 when `--timeout` passes first, 3
when the flow does not exist, 4 when the flow has ended with another value (it can no longer change),
2 for a name its flow's schema does not declare (checked when the flow's code loads here).
"""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING, Any

import typer

from dexcli.cli.app import open_store
from dexcli.cli.completion import complete_flow_id
from dexcli.cli.errors import CliError, ConflictError, UsageError
from dexcli.cli.shared import flow_or_not_found

if TYPE_CHECKING:
    from dexcli.store import FlowRecord

POLL_SECONDS = 0.1


class WaitTimedOut(CliError):
    """The attribute did not take the value within --timeout: exit 1."""

    exit_code = 1


def wait(
    flow_id: str = typer.Argument(..., help="The flow whose attribute to watch.",
                                 autocompletion=complete_flow_id),
    attribute: str = typer.Option(..., "--attribute", "-a", metavar="NAME",
                                  help="The Attribute (or AttributeMap) name."),
    instance: str | None = typer.Option(None, "--instance", metavar="KEY", help="The AttributeMap instance."),
    equals: str = typer.Option(..., "--equals", metavar="JSON",
                               help="The value to wait for, as JSON: '\"paid\"', 3, true, '{\"a\": 1}'."),
    timeout: str = typer.Option("30s", "--timeout", help="How long to wait: 3s, 2m, 1h; 0 waits forever."),
) -> None:
    """Wait until a flow's attribute equals a value (exit 0), or --timeout passes (exit 1)."""
    from dexcli.cli.config import parse_duration
    from dexcli.cli.inputs import load_json
    from dexcli.sdk.channels import physical_name
    from dexcli.store.search import attribute_value

    expected = load_json(equals, "--equals", f" (--equals takes JSON: a string is quoted: '\"{equals}\"')")
    try:
        key = physical_name(attribute, instance)
    except ValueError as e:
        raise UsageError(f"--instance: {e}") from None
    seconds = parse_duration(timeout, "--timeout")
    deadline = time.monotonic() + seconds if seconds else None
    store = open_store(read_only=True)
    if attribute_value(store, flow_id, key) is None:  # unset: it may not be one of the flow's
        _check_declared(flow_or_not_found(store, flow_id), attribute, instance)
    while True:
        flow = flow_or_not_found(store, flow_id)  # read before the value: a flow that ended had its last say
        text = attribute_value(store, flow_id, key)
        value = None if text is None else json.loads(text)
        if text is not None and same(value, expected):
            print(json.dumps(value))
            return
        now_is = "unset" if text is None else json.dumps(value)
        if not flow.is_running:
            raise ConflictError(f"flow {flow_id} is {flow.status.value} and {key} is {now_is}: it will not change")
        if deadline is not None and time.monotonic() >= deadline:
            raise WaitTimedOut(f"timed out after {timeout}: {key} of flow {flow_id} is {now_is}, "
                               f"not {json.dumps(expected)}")
        sys.stdout.flush()
        time.sleep(POLL_SECONDS)


def _check_declared(flow: FlowRecord, name: str, instance: str | None) -> None:
    """A name the flow's schema does not declare would never take a value: refuse it, naming the
    ones it has (when it is an installed flow whose code loads here; otherwise wait as asked)."""
    from dexcli.cli.loader import load_ref
    from dexcli.sdk.attributes import AttributeMap

    ref = flow.flow_ref
    if ref is None or not ref.startswith("name:"):  # a read command runs no file a database row names
        return
    try:
        declared = {a.name: a for a in load_ref(ref).get_persistence_schema().attributes}
    except Exception:  # moved or broken since the run: nothing to check against
        return
    where = f"flow {flow.flow_id} ({flow.flow_type})"
    found = declared.get(name)
    if found is None:
        has = f"its attributes: {', '.join(sorted(declared))}" if declared else "it declares no attributes"
        raise UsageError(f"--attribute: {where} has no attribute {name!r}; {has}")
    if isinstance(found, AttributeMap) and instance is None:
        raise UsageError(f"--attribute: {name} is an AttributeMap of {where}: name the instance with --instance KEY")
    if not isinstance(found, AttributeMap) and instance is not None:
        raise UsageError(f"--instance: {name} is an Attribute of {where}, not an AttributeMap: drop --instance")


def same(a: Any, b: Any) -> bool:
    """JSON equality where true is not 1 (Python's == says it is) but 1 is 1.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)
