"""DexServiceError's fields against the installed official SDK: the names its docstrings list
(`code`, `sub_status`, `detail`, `operation`, `flow_id`; WorkerInvocationError's `worker_*`),
set on every error a Client call raises, in the types and values code written against the SDK
reads them in (`code` compares equal to grpc.StatusCode's member), and both ways of making one."""

from __future__ import annotations

import asyncio
import copy
import pickle
import re
from typing import Any

import pytest

import dexcli
from dexcli import Context, RPCResult, rpc
from dexcli.sdk.errors import StatusCode
from dexcli.testing import DexTestEnv
from dexcli_flows.approval import ApprovalFlow, Request
from tests.parity.parity_kit import official


def documented_fields(cls: Any) -> list[str]:
    """The names under `Attributes:` in an official class's docstring (the authority)."""
    doc = cls.__doc__ or ""
    section = doc.split("Attributes:", 1)[1]
    return re.findall(r"^\s{8}(\w+):", section, re.MULTILINE)


def test_the_fields_are_the_ones_the_official_docstrings_name() -> None:
    dex = official()
    assert documented_fields(dex.DexServiceError) == ["code", "sub_status", "detail", "operation", "flow_id"]
    worker = documented_fields(dex.WorkerInvocationError)
    assert worker[5:] == ["worker_code", "worker_error_type", "worker_error_detail"]
    err = dexcli.FlowNotFoundError("no flow with id 'x'")
    assert all(hasattr(err, f) for f in documented_fields(dex.DexServiceError))
    rpc_err = dexcli.WorkerInvocationError("builtins.ValueError", "boom")
    assert all(hasattr(rpc_err, f) for f in worker)


def test_status_code_is_grpcs_names_and_values_and_compares_equal_to_them() -> None:
    official()
    import grpc

    assert [(c.name, c.value) for c in StatusCode] == [(c.name, c.value) for c in grpc.StatusCode]
    for mine in StatusCode:
        theirs = grpc.StatusCode[mine.name]
        assert mine == theirs and theirs == mine and hash(mine) == hash(theirs)
        assert {theirs: 1}[mine] == 1 and mine in (theirs,)
        assert StatusCode.of(theirs) is mine
    assert StatusCode.NOT_FOUND != grpc.StatusCode.ALREADY_EXISTS and StatusCode.OK != (0, "ok")


def test_made_the_official_way_it_carries_what_it_was_given() -> None:
    official()
    import grpc

    err = dexcli.FlowNotActiveOrNotFoundError(grpc.StatusCode.NOT_FOUND, dexcli.ErrorSubStatus.FLOW_NOT_EXISTS,
                                              "gone", "invoke_rpc", "f")
    assert (err.code, err.sub_status, err.detail, err.operation, err.flow_id, str(err)) == (
        grpc.StatusCode.NOT_FOUND, dexcli.ErrorSubStatus.FLOW_NOT_EXISTS, "gone", "invoke_rpc", "f", "gone")
    base = dexcli.DexServiceError(grpc.StatusCode.UNAVAILABLE, dexcli.ErrorSubStatus.UNCATEGORIZED, "down",
                                  "health_check", None)
    assert base.code == grpc.StatusCode.UNAVAILABLE and base.flow_id is None and base.operation == "health_check"
    worker = dexcli.WorkerInvocationError(grpc.StatusCode.UNKNOWN, dexcli.ErrorSubStatus.WORKER_API_ERROR, "outer",
                                          "invoke_rpc", "f", grpc.StatusCode.INTERNAL, "builtins.KeyError", "k")
    assert (worker.detail, worker.worker_code, worker.worker_error_type, worker.worker_error_detail) == (
        "outer", grpc.StatusCode.INTERNAL, "builtins.KeyError", "k")


def test_the_codes_the_official_sdk_fixes_for_a_class_are_dexs_too() -> None:
    """RpcLockConflictError is WORKER_API_ERROR with ABORTED (_grpc_errors.translate_rpc_error);
    a request budget's end is RequestTimeoutError with DEADLINE_EXCEEDED (wait_options)."""
    dex = official()
    import grpc

    from tests.parity.test_sdk_surface import official_error_for

    assert official_error_for("WORKER_API_ERROR", "none", "ABORTED") == "RpcLockConflictError"
    assert dexcli.RpcLockConflictError("locked").code == grpc.StatusCode.ABORTED
    from dex.wait_options import _ClientRequestBudget

    official_timeout = _ClientRequestBudget.timeout_error("wait_for_flow", "f")
    assert dexcli.RequestTimeoutError("request timed out").code == official_timeout.code
    assert (official_timeout.code, dex.RequestTimeoutError) == (grpc.StatusCode.DEADLINE_EXCEEDED,
                                                               type(official_timeout))


class Raising(ApprovalFlow):
    def get_flow_type(self) -> str:
        return "ApprovalFlow"

    @rpc
    def broken(self, context: Context, by: str) -> RPCResult[str]:
        raise ValueError(f"no approver called {by}")


def test_a_client_calls_errors_name_the_operation_and_the_flow_with_the_servers_code() -> None:
    official()
    import grpc

    with DexTestEnv(start=0.0) as env:
        with pytest.raises(dexcli.FlowNotFoundError) as missing:
            env.client.describe_flow("nope")
        e: Any = missing.value
        assert (e.code, e.sub_status, e.operation, e.flow_id) == (
            grpc.StatusCode.NOT_FOUND, dexcli.ErrorSubStatus.FLOW_NOT_EXISTS, "describe_flow", "nope")
        assert e.detail == str(e) and "nope" in e.detail
        flow = Raising()
        env.client.start_flow(flow, "a", Request("Laptop", 1200))
        with pytest.raises(dexcli.FlowAlreadyStartedError) as again:
            env.client.start_flow(flow, flow_id="a", input=Request("Laptop", 1200))
        assert (again.value.code, again.value.operation, again.value.flow_id) == (
            grpc.StatusCode.ALREADY_EXISTS, "start_flow", "a")
        env.drive(["a"], until=lambda: env.inspect("a")["steps"][0]["status"] == "WAITING")
        with pytest.raises(dexcli.WorkerInvocationError) as failed:
            env.client.invoke_rpc(flow.broken, "a", "eve")
        w = failed.value
        assert (w.code, w.sub_status, w.operation, w.flow_id) == (
            grpc.StatusCode.UNKNOWN, dexcli.ErrorSubStatus.WORKER_API_ERROR, "invoke_rpc", "a")
        assert (w.worker_code, w.worker_error_type) == (grpc.StatusCode.UNKNOWN, "builtins.ValueError")



def test_bad_input_and_an_unusable_client_have_the_codes_a_server_would_answer_with(tmp_path: Any) -> None:
    official()
    import grpc

    client = dexcli.Client([ApprovalFlow()], db=tmp_path / "dex.db")
    with pytest.raises(dexcli.DexServiceError) as query:
        client.search_flows("FlowId = ", 10)
    assert (query.value.code, query.value.operation, query.value.flow_id) == (
        grpc.StatusCode.INVALID_ARGUMENT, "search_flows", None)
    client.close()
    with pytest.raises(dexcli.DexServiceError) as closed:
        client.health_check()
    assert (closed.value.code, closed.value.operation) == (grpc.StatusCode.UNAVAILABLE, "health_check")


def test_asyncclient_errors_are_located_too(tmp_path: Any) -> None:
    official()
    import grpc

    async def go() -> Any:
        async with dexcli.AsyncClient([ApprovalFlow()], db=tmp_path / "dex.db") as client:
            with pytest.raises(dexcli.FlowNotFoundError) as missing:
                await client.describe_flow("gone")
            return missing.value

    err = asyncio.run(go())
    assert (err.operation, err.flow_id, err.code) == ("describe_flow", "gone", grpc.StatusCode.NOT_FOUND)


def test_an_error_raised_outside_a_client_call_names_none() -> None:
    err = dexcli.DexServiceError("the client is closed")
    assert (err.operation, err.flow_id, err.code, err.sub_status) == (
        None, None, StatusCode.UNKNOWN, dexcli.ErrorSubStatus.UNCATEGORIZED)
    err.located("describe_flow", "f")
    err.located("wait_for_flow", "g")  # the innermost call keeps it
    assert (err.operation, err.flow_id) == ("describe_flow", "f")


def test_the_fields_survive_pickle_and_copy() -> None:
    for err in (dexcli.FlowNotFoundError("no flow with id 'f'", operation="describe_flow", flow_id="f"),
                dexcli.WorkerInvocationError("builtins.ValueError", "boom", operation="invoke_rpc", flow_id="f")):
        for again in (pickle.loads(pickle.dumps(err)), copy.copy(err)):
            assert type(again) is type(err) and str(again) == str(err)
            assert vars(again) == vars(err) and again.code == err.code
