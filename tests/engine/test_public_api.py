"""The public SDK surface: `dexcli.__all__` is pinned, and importing the SDK or the engine
does not pull in the CLI's dependencies (typer, rich)."""

import json
import subprocess
import sys
from pathlib import Path

import dexcli

ROOT = Path(__file__).resolve().parents[2]

EXPECTED_ALL = [
    "AsyncClient", "AsyncContext", "Attribute", "AttributeIndex", "AttributeLock", "AttributeMap",
    "Channel", "ChannelMap", "Client", "ConditionCombination", "Context", "DexServiceError", "Flow",
    "FlowAlreadyStartedError", "FlowCodeError", "FlowDefinitionError", "FlowErrorType", "FlowInfo", "FlowNotActiveError",
    "FlowNotActiveOrNotFoundError", "FlowNotFoundError", "FlowResult", "FlowStatus", "IdReusePolicy",
    "IndexType", "InvalidStepResultError", "LongPollTimeoutError", "NotSupportedYetError",
    "PersistenceSchema", "RPCResult", "RecoveryError", "RecoveryErrorInfo", "Registry", "RetryPolicy",
    "StartFlowOptions", "Step", "StepCompletion", "StepDecision", "StepDurability", "StepList",
    "StepMovement", "StepOptions", "StepOutput", "StopFlowOptions", "StopType", "Stream", "StreamMessage",
    "StreamMessagesPage", "SubFlow", "Timer", "ValueMappingError", "Wait", "WaitForFailurePolicy",
    "WorkerInvocationError", "dead_end", "force_complete", "force_complete_if_channels_empty",
    "force_fail", "go_to", "go_to_many", "go_to_multi", "graceful_complete", "heartbeat", "retry_after",
    "rpc",
]


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
