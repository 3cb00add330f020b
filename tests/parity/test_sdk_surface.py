"""The rest of SDK 1.23's surface against the installed official SDK: its submodule paths
(`from dex.wait import Wait` is `from dexcli.wait import Wait`), the sub-status each service
error carries, and the buffered text writers' defaults."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from typing import Any

import pytest

import dexcli
from dexcli.graph.portability import OFFICIAL_MODULES
from tests.parity.parity_kit import official


def official_modules() -> dict[str, set[str]]:
    """Each public module of the installed `dex` package (and the private one Dex's own docs
    import retry_after from) with the names of `dex.__all__` it defines."""
    dex = official()
    found: dict[str, set[str]] = {}
    names = [m.name for m in pkgutil.iter_modules(dex.__path__) if not m.name.startswith("_") and m.name != "dexpb"]
    for name in [*names, "_grpc_errors"]:
        module = importlib.import_module(f"dex.{name}")
        found[name] = {n for n in dex.__all__ if getattr(module, n, None) is getattr(dex, n)
                       and getattr(getattr(dex, n), "__module__", None) == module.__name__}
    return found


def test_the_portability_list_of_modules_is_the_sdks() -> None:
    assert {k: set(v) for k, v in OFFICIAL_MODULES.items()} == official_modules()


@pytest.mark.parametrize("module", sorted(OFFICIAL_MODULES))
def test_each_official_module_path_gives_the_names_dexcli_has(module: str) -> None:
    official()
    mine = sorted(OFFICIAL_MODULES[module] & set(dexcli.__all__))
    if not mine:  # a module of server-only names (credentials, blob cache, ...): dex has none to give
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(f"dexcli.{module}")
        return
    loaded = importlib.import_module(f"dexcli.{module}")
    assert {n: getattr(loaded, n, None) for n in mine} == {n: getattr(dexcli, n) for n in mine}
    extra = set(getattr(loaded, "__all__", ())) - OFFICIAL_MODULES[module]
    assert not extra, f"dexcli.{module} exports what dex.{module} lacks (an import of it breaks on the swap): {extra}"


def test_the_one_line_swap_holds_for_submodule_imports() -> None:
    """The same import lines, with `dexcli` swapped for `dex`, bind the same names in both SDKs."""
    dex = official()
    lines = [f"from dexcli.{m} import {', '.join(sorted(names & set(dexcli.__all__)))}"
             for m, names in sorted(OFFICIAL_MODULES.items()) if names & set(dexcli.__all__)]
    mine: dict[str, Any] = {}
    theirs: dict[str, Any] = {}
    exec("\n".join(lines), mine)
    exec("\n".join(lines).replace("from dexcli.", "from dex."), theirs)
    bound = set(mine) - {"__builtins__"}
    assert bound == set(theirs) - {"__builtins__"}
    assert all(mine[n] is getattr(dexcli, n) and theirs[n] is getattr(dex, n) for n in bound)


# --- ErrorSubStatus: the class each sub-status becomes -----------------------------------------


def official_error_for(sub_status: Any, requirement: str, code_name: str = "UNKNOWN") -> str:
    """The class the official SDK turns a FlowService error with this sub-status into."""
    import grpc
    from dex._grpc_errors import translate_rpc_error
    from dex.dexpb import dex_pb2 as pb
    from google.protobuf import any_pb2
    from google.rpc import status_pb2

    code = getattr(grpc.StatusCode, code_name)
    detail = pb.ServiceErrorResponse(detail="d", sub_status=getattr(pb, f"ERROR_SUB_STATUS_{sub_status}"))
    packed = any_pb2.Any()
    packed.Pack(detail)
    status = status_pb2.Status(code=code.value[0], message="d", details=[packed])

    class Failed(grpc.RpcError, grpc.Call):  # type: ignore[misc]
        def code(self) -> Any:
            return code

        def details(self) -> str:
            return "d"

        def trailing_metadata(self) -> Any:
            return (("grpc-status-details-bin", status.SerializeToString()),)

    return type(translate_rpc_error(Failed(), "op", "f", requirement)).__name__  # type: ignore[arg-type]


WIRE = {"LONG_POLL_TIMEOUT": "LONG_POLL_TIME_OUT"}  # the proto's spelling, where it differs


@pytest.mark.parametrize("requirement, code", [("existing", "UNKNOWN"), ("active", "UNKNOWN"), ("none", "ABORTED")])
def test_each_error_class_carries_the_sub_status_the_official_sdk_maps_to_it(requirement: str, code: str) -> None:
    dex = official()
    for member in dex.ErrorSubStatus:
        name = official_error_for(WIRE.get(member.name, member.name), requirement, code)
        if name == "DexServiceError" and member is not dex.ErrorSubStatus.UNCATEGORIZED:
            continue  # no class of its own there: the base error with that sub-status on the instance
        assert getattr(dexcli, name).sub_status is dexcli.ErrorSubStatus[member.name], (member, name)


def test_every_service_error_class_of_dexcli_has_the_sub_status_of_its_official_twin() -> None:
    """Classes the official mapping never produces from one sub-status still carry the one it
    produces them from (WorkerInvocationError from WORKER_API_ERROR, ...): each exported
    DexServiceError subclass has a sub-status, and every member value is the official one."""
    dex = official()
    service = [n for n in dexcli.__all__ if isinstance(getattr(dexcli, n), type)
               and issubclass(getattr(dexcli, n), dexcli.DexServiceError)]
    assert all(isinstance(getattr(dexcli, n).sub_status, dexcli.ErrorSubStatus) for n in service)
    assert set(service) == {n for n in dex.__all__ if isinstance(getattr(dex, n), type)
                            and issubclass(getattr(dex, n), dex.DexServiceError)}


# --- defaults ----------------------------------------------------------------------------------


def defaults(fn: Any) -> dict[str, Any]:
    return {p.name: p.default for p in inspect.signature(fn).parameters.values() if p.default is not p.empty}


@pytest.mark.parametrize("name", ["Stream.buffered_text", "Client.read_stream", "AsyncClient.read_stream",
                                  "Client.list_stream_messages"])
def test_the_same_default_values(name: str) -> None:
    dex = official()
    owner, _, member = name.partition(".")
    assert defaults(getattr(getattr(dexcli, owner), member)) == defaults(getattr(getattr(dex, owner), member))


def test_health_info_has_the_official_fields() -> None:
    import dataclasses

    def fields(cls: type) -> list[tuple[str, str]]:
        return [(f.name, f.type if isinstance(f.type, str) else f.type.__name__) for f in dataclasses.fields(cls)]

    assert fields(dexcli.HealthInfo) == fields(official().HealthInfo)


@pytest.mark.parametrize("name", ["BufferedTextStream", "AsyncBufferedTextStream", "Stream", "HealthInfo",
                                  "ErrorSubStatus", "ActiveStepSearchMode", "TimeTravelOptions",
                                  "TimeTravelType", "TimeTravelStepMethod"])
def test_the_same_public_members(name: str) -> None:
    def public(cls: type) -> set[str]:
        return {n for n in dir(cls) if not n.startswith("_")}

    assert public(getattr(dexcli, name)) == public(getattr(official(), name))
