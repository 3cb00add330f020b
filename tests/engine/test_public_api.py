"""The public SDK surface: `dexcli.__all__` is pinned, and importing the SDK or the engine
does not pull in the CLI's dependencies (typer, rich)."""

import json
import subprocess
import sys
from pathlib import Path

import dexcli

ROOT = Path(__file__).resolve().parents[2]

EXPECTED_ALL = [
    "AsyncClient", "AsyncContext", "Attribute", "AttributeIndex", "AttributeLock", "AttributeMap", "Channel",
    "ChannelMap", "ChannelMapLoad", "ChannelMessage", "Client", "ConditionCombination", "Context",
    "DexServiceError", "Flow", "FlowAlreadyStartedError", "FlowConfig", "FlowDefinitionError", "FlowErrorType",
    "FlowInfo",
    "FlowNotActiveOrNotFoundError", "FlowNotFoundError", "FlowResult", "FlowStatus", "IdReusePolicy",
    "FlowTimeoutHandlerOptions", "FlowTimeoutPolicy",
    "IndexType", "InvalidStepResultError", "LongPollTimeoutError", "PersistenceSchema", "RPCInvokeOptions",
    "RPCResult", "RecoveryErrorInfo", "Registry", "RetryAfterError", "RetryPolicy", "StartFlowOptions",
    "Step", "StepCompletion", "StepExecutionId", "StepDecision", "StepDurability", "StepList", "StepMovement",
    "StepOptions", "StepOutput", "StopFlowOptions", "StopType", "Stream", "StreamMessage",
    "StreamMessagesPage", "SubFlow", "Timer", "TimerId", "ValueMappingError", "Wait", "WaitForFailurePolicy",
    "TimeTravelOptions", "TimeTravelStepMethod", "TimeTravelType",
    "WorkerInvocationError", "dead_end", "force_complete", "force_complete_if_channels_empty", "force_fail",
    "go_to", "go_to_many", "graceful_complete", "heartbeat", "retry_after", "rpc",
    "BOOL", "BYTES", "DOUBLE", "INT64", "STRING", "Codec", "CodecRegistry", "JsonCodec", "Value", "WireKind",
    "AsyncWorker", "Worker",
    "ChannelMessageNotFoundError", "ChannelMessagesNotLoadedError", "FlowClosingError", "RequestTimeoutError",
    "RpcLockConflictError",
    "AttributeMatch", "SearchFlowEntry", "SearchFlowsPage", "WaitForAttributeOptions",
    "WaitForStepCompletionOptions", "SubFlowOptions", "SubFlowReusePolicy",
    "ActiveStepSearchMode", "AsyncBufferedTextStream", "BufferedTextStream", "ErrorSubStatus", "HealthInfo",
]
# Every name is also the official SDK's (tests/parity/test_api_parity.py checks it against
# dex-python-sdk): go_to_multi, RecoveryError, FlowNotActiveError, FlowCodeError and
# NotSupportedYetError existed only in dexcli and were removed (a flow importing one broke on deploy).


def test_all_is_pinned():
    assert sorted(dexcli.__all__) == sorted(EXPECTED_ALL)
    assert len(dexcli.__all__) == len(set(dexcli.__all__))


def test_every_name_in_all_resolves():
    for name in dexcli.__all__:
        assert getattr(dexcli, name) is not None, name


def loaded_modules(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def heavy(mods: set[str]) -> set[str]:
    return {m for m in mods if m.split(".")[0] in ("typer", "rich", "click")}


def test_importing_the_sdk_does_not_import_the_cli_dependencies():
    mods = loaded_modules("import dexcli\nfrom dexcli import Flow, Step, go_to, graceful_complete")
    assert "dexcli" in mods
    assert heavy(mods) == set()
    assert "dexcli.engine.core" not in mods  # the engine loads only when used


def test_importing_the_engine_does_not_import_the_cli_dependencies():
    mods = loaded_modules("import dexcli.engine.core\nimport dexcli.client\nimport dexcli.testing")
    assert "dexcli.engine.core" in mods
    assert heavy(mods) == set()


def test_client_is_loaded_lazily():
    mods = loaded_modules("import dexcli\nc = dexcli.Client")
    assert "dexcli.client" in mods
    assert heavy(mods) == set()


def test_importing_dexcli_loads_no_sdk_module_nor_pydantic():
    mods = loaded_modules("import dexcli")
    assert {m for m in mods if m.startswith("dexcli.")} == set()
    assert {m for m in mods if m.split(".")[0] == "pydantic"} == set()


def test_the_type_checking_block_is_the_one_listing():
    mods = loaded_modules("import dexcli\nnames = dexcli.__all__")
    assert {m for m in mods if m.startswith("dexcli.")} == set()  # __all__ imports nothing
    assert set(dexcli._public()) == set(dexcli.__all__)
    assert dexcli.__all__ == sorted(dexcli.__all__)
    assert set(dexcli.__all__) <= set(dir(dexcli))


def test_unknown_and_private_names_are_attribute_errors():
    import pytest

    for name in ("NoSuchThing", "_private", "__wrapped__"):
        with pytest.raises(AttributeError, match=name):
            getattr(dexcli, name)


def _dexcli_imports(path: Path) -> set[str]:
    """Every dexcli module a file imports, at module level or inside a function."""
    import ast

    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names if node.module == "dexcli"]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found.update(n for n in names if n.split(".")[0] == "dexcli")
    return found


def test_the_sdk_imports_nothing_else_of_dexcli():
    for path in sorted((ROOT / "dexcli" / "sdk").glob("*.py")):
        outside = {m for m in _dexcli_imports(path) if not m.startswith("dexcli.sdk")}
        assert outside == set(), f"{path.name} imports {sorted(outside)}"


def test_attempt_fenced_is_a_control_signal_that_except_exception_does_not_catch():
    from dexcli.sdk.errors import AttemptFencedError

    assert issubclass(AttemptFencedError, BaseException)
    assert not issubclass(AttemptFencedError, Exception)
