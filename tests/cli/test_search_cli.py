"""`dex list --query` (text, JSON, paging, --all, errors with the column) and `dex wait`'s exit
codes: 0 when the attribute holds the value, 1 on timeout, 3 for a missing flow, 4 for an ended
flow with another value, 2 for a value that is not JSON; and a `dex wait` woken by a write
another process commits."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from dexcli.engine.attributes import AttributeWrite, apply_writes
from dexcli.sdk.attributes import AttributeIndex, IndexType
from dexcli.sdk.channels import physical_name
from dexcli.store import FlowState, Store
from tests.cli.cli_helpers import Cli, subprocess_env

STATUS = AttributeIndex(IndexType.KEYWORD, "OrderStatus")


def put(store: Store, flow_id: str, name: str, value: Any, index: Any = None, instance: str | None = None) -> None:
    key = physical_name(name, instance)
    with store.tx() as tx:
        apply_writes(tx, flow_id, {key: AttributeWrite(key, name, instance, json.dumps(value), index)}, 0.0)


@pytest.fixture
def orders(db: Path) -> Path:
    store = Store(db)
    with store.tx() as tx:
        for i in range(1, 6):
            tx.insert_flow_if_new(f"o{i}", f"run-o{i}", "Orders", None, "1", f"req-{i}", 100.0 * i)
    for i, status in enumerate(["paid", "new", "paid", "paid", "shipped"], start=1):
        put(store, f"o{i}", "status", status, STATUS)
    with store.tx() as tx:
        tx.close_flow("o4", FlowState.COMPLETED, 1000.0, None, None)
    store.close()
    return db


def test_list_query_prints_the_matching_flows(cli: Cli, orders: Path) -> None:
    out = cli.ok("list", "--query", "OrderStatus = 'paid' AND FlowStatus = 'RUNNING'").stdout
    lines = out.splitlines()
    assert lines[0].startswith("flow id")
    assert [line.split()[0] for line in lines[1:]] == ["o3", "o1"]
    assert cli.ok("list", "-q", "OrderStatus = 'lost'").stdout == "no flows match\n"


def test_list_query_json_and_paging(cli: Cli, orders: Path) -> None:
    first = cli.json("list", "--query", "OrderStatus = 'paid'", "--json", "--page-size", "2")
    assert [f["flowId"] for f in first["flows"]] == ["o4", "o3"]
    assert first["flows"][0]["flowStatus"] == "COMPLETED" and first["flows"][0]["closeTime"]
    assert first["flows"][0]["indexedAttributes"] == {"OrderStatus": "paid"}
    second = cli.json("list", "-q", "OrderStatus = 'paid'", "--json", "--page-size", "2",
                      "--page-token", first["nextPageToken"])
    assert [f["flowId"] for f in second["flows"]] == ["o1"] and second["nextPageToken"] == ""
    every = cli.json("list", "-q", "ORDER BY StartTime ASC", "--json", "--page-size", "2", "--all")
    assert [f["flowId"] for f in every["flows"]] == ["o1", "o2", "o3", "o4", "o5"]
    res = cli.ok("list", "-q", "", "--page-size", "2")
    assert "--page-token" in res.stderr and len(res.stdout.splitlines()) == 3


@pytest.mark.parametrize(("args", "message"), [
    (("-q", "OrderStatus = AND FlowStatus = 'RUNNING'"), "query: expected a value at column 15: found 'AND'"),
    (("-q", "FlowStatus = 'asleep'"), "query: FlowStatus is one of"),
    (("-q", "", "--page-token", "garbage"), "page token"),
    (("-q", "FlowId = 'x'", "--status", "RUNNING"), "--query replaces --status"),
])
def test_list_query_errors_exit_2_with_one_line(cli: Cli, orders: Path, args: tuple[str, ...], message: str) -> None:
    res = cli.ok("list", *args, code=2)
    assert res.stderr.startswith("dex: error: ") and message in res.stderr
    assert len(res.stderr.splitlines()) == 1


def test_wait_exit_codes(cli: Cli, orders: Path) -> None:
    assert cli.ok("wait", "o1", "--attribute", "status", "--equals", '"paid"').stdout == '"paid"\n'
    timed_out = cli.ok("wait", "o2", "--attribute", "status", "--equals", '"paid"', "--timeout", "0.2s", code=1)
    assert "timed out after 0.2s: status of flow o2 is \"new\", not \"paid\"" in timed_out.stderr
    assert "no flow with id 'o9'" in cli.ok("wait", "o9", "--attribute", "status", "--equals", "1", code=3).stderr
    ended = cli.ok("wait", "o4", "--attribute", "status", "--equals", '"new"', code=4)
    assert "flow o4 is COMPLETED and status is \"paid\": it will not change" in ended.stderr
    assert cli.ok("wait", "o4", "--attribute", "status", "--equals", '"paid"').stdout == '"paid"\n'
    assert "--equals takes JSON" in cli.ok("wait", "o1", "--attribute", "status", "--equals", "paid", code=2).stderr
    assert "is unset" in cli.ok("wait", "o1", "--attribute", "nothing", "--equals", "1", "--timeout", "0.1s",
                                code=1).stderr


def test_wait_compares_json_values_and_map_instances(cli: Cli, orders: Path, db: Path) -> None:
    store = Store(db)
    put(store, "o1", "scores", 1.0, instance="a b")
    put(store, "o1", "flag", True)
    store.close()
    res = cli.ok("wait", "o1", "-a", "scores", "--instance", "a b", "--equals", "1", "--timeout", "5s")
    assert res.stdout == "1.0\n"
    assert cli.ok("wait", "o1", "-a", "flag", "--equals", "1", "--timeout", "0.1s", code=1)  # true is not 1
    assert cli.ok("wait", "o1", "-a", "flag", "--equals", "true").stdout == "true\n"


WRITER = textwrap.dedent("""
    import json, sys
    from dexcli.engine.attributes import AttributeWrite, apply_writes
    from dexcli.store import Store
    store = Store(sys.argv[1])
    with store.tx() as tx:
        apply_writes(tx, "o2", {"status": AttributeWrite("status", "status", None, json.dumps("paid"), None)}, 0.0)
""")


def test_wait_is_woken_by_a_write_another_process_commits(orders: Path) -> None:
    env = subprocess_env(orders)
    waiter = subprocess.Popen([sys.executable, "-m", "dexcli", "wait", "o2", "--attribute", "status",
                               "--equals", '"paid"', "--timeout", "20s"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert waiter.poll() is None  # o2 is "new": it waits
        subprocess.run([sys.executable, "-c", WRITER, str(orders)], env=env, check=True, timeout=30)
        out, err = waiter.communicate(timeout=30)
    finally:
        waiter.kill()
    assert (waiter.returncode, out, err) == (0, '"paid"\n', "")
