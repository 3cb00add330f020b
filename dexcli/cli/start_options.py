"""`dex run`'s start options (--timeout, --timeout-policy, --start-delay, --id-reuse-policy,
--request-id) as the SDK's StartFlowOptions, and how `dex inspect` shows them.

Policy values are the official SDK's enum values in kebab case (`allow-if-not-running`).
Durations are whole seconds, as the SDK requires (`60s`, `15m`, `1h`).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

import typer
from rich.text import Text

from dexcli.cli.config import format_duration, parse_duration
from dexcli.cli.errors import UsageError

if TYPE_CHECKING:
    from dexcli.sdk.registry import FlowDefinition
    from dexcli.sdk.results import StartFlowOptions

TIMEOUT_POLICIES = ("default", "fail", "cancel", "handler")
ID_REUSE_POLICIES = ("default", "allow-if-previous-failed", "allow-if-not-running", "allow-terminate-if-running",
                     "disallow")
TIMEOUT_POLICY_HELP = ("What the --timeout does when it passes: fail (FAILED, FLOW_TIMEOUT), cancel (CANCELED), "
                       "handler (the flow's handle_timeout runs); default: handler if the flow overrides "
                       "handle_timeout, else fail.")
ID_REUSE_HELP = ("When --flow-id names an existing flow: " + ", ".join(ID_REUSE_POLICIES) +
                 " (default and disallow refuse; the previous run is kept as <flow-id>$<run-id>).")


def _whole_seconds(text: str | None, flag: str) -> timedelta | None:
    if text is None:
        return None
    seconds = parse_duration(text, flag)
    if not float(seconds).is_integer():
        raise UsageError(f"{flag}: {text!r} is not whole seconds (Dex takes whole seconds)")
    return timedelta(seconds=seconds)


def _choice(text: str | None, flag: str, choices: tuple[str, ...]) -> str:
    value = (text or "default").strip().lower().replace("_", "-")
    if value not in choices:
        raise UsageError(f"{flag} must be one of {', '.join(choices)}, not {text!r}")
    return value.replace("-", "_")


def start_options(timeout: str | None, timeout_policy: str | None, start_delay: str | None,
                  id_reuse_policy: str | None, request_id: str | None) -> StartFlowOptions:
    """The flags as StartFlowOptions; a bad value is a usage error (exit 2)."""
    from dexcli.sdk.results import FlowTimeoutPolicy, IdReusePolicy, StartFlowOptions

    policy = FlowTimeoutPolicy(_choice(timeout_policy, "--timeout-policy", TIMEOUT_POLICIES))
    duration = _whole_seconds(timeout, "--timeout")
    if policy is not FlowTimeoutPolicy.DEFAULT and not duration:
        raise UsageError("--timeout-policy needs a positive --timeout")
    if request_id is not None and not request_id.strip():
        raise UsageError("--request-id must not be empty")
    return StartFlowOptions(timeout=duration, timeout_policy=policy,
                            start_delay=_whole_seconds(start_delay, "--start-delay"),
                            id_reuse_policy=IdReusePolicy(_choice(id_reuse_policy, "--id-reuse-policy",
                                                                  ID_REUSE_POLICIES)),
                            request_id=request_id)


_CONFIG_WORDS = {"stepDurability": "step durability", "continueAsNewThreshold": "continue as new after",
                 "continueAsNewPageSizeInBytes": "page size", "activeStepSearchMode": "active step search",
                 "attributeStoreNames": "attribute stores"}


def config_text(config: dict[str, Any] | None) -> Text | None:
    """` Config:  step durability ASYNC · continue as new after 10 events` for `dex inspect`:
    the run's FlowConfig where it is not dex's default (every method SYNC, nothing else set)."""
    if not config or config == {"stepDurability": "STEP_DURABILITY_SYNC"}:
        return None
    parts = []
    for key, value in config.items():
        if key == "stepDurability":
            value = str(value).removeprefix("STEP_DURABILITY_")
        elif key == "activeStepSearchMode":
            value = str(value).removeprefix("ACTIVE_STEP_SEARCH_MODE_")
        elif key == "continueAsNewThreshold":
            value = f"{value} events" if value else "never (0)"
        elif key == "continueAsNewPageSizeInBytes":
            value = f"{value} bytes" if value else "1 MiB (0)"
        elif key == "attributeStoreNames":
            value = ", ".join(value.get("names", [])) or "none"
        parts.append(f"{_CONFIG_WORDS.get(key, key)} {value}")
    return Text(" Config:  " + " · ".join(parts), style="dim")


def options_text(summary: dict[str, Any]) -> Text | None:
    """` Options: timeout 1m (FAIL) · start delay 1h · id reuse ALLOW_IF_NOT_RUNNING` for
    `dex inspect`, or None when the run was started with none."""
    parts = []
    if summary.get("timeout"):
        fired = " fired" if summary.get("timeoutFired") else ""
        parts.append(f"timeout {format_duration(summary['timeout'])} ({summary.get('timeoutPolicy')}){fired}")
    if summary.get("startDelay"):
        parts.append(f"start delay {format_duration(summary['startDelay'])}")
    if summary.get("idReusePolicy"):
        parts.append(f"id reuse {summary['idReusePolicy']}")
    retry = summary.get("flowRetry")
    if retry and retry.get("retryPolicy"):
        p = retry["retryPolicy"]
        most = p["maximumAttempts"] or "unlimited"
        backoff = f"{format_duration(p['initialInterval'])} x{p['backoffCoefficient']:g}"
        parts.append(f"flow retry attempt {retry['attempt']} of {most} (backoff {backoff} "
                     f"up to {format_duration(p['maximumInterval'])})")
    return Text(" Options: " + " · ".join(parts), style="dim") if parts else None


def history_text(e: dict[str, Any]) -> str:
    """What a FlowStarted or FlowTimedOut line adds about the start options."""
    if e["type"] == "FlowTimedOut":
        return f"{e.get('message', '')} → {e.get('timeoutPolicy')}"
    extra = []
    if e.get("startDelay"):
        extra.append(f"delayed {format_duration(e['startDelay'])}")
    if e.get("timeout"):
        extra.append(f"timeout {format_duration(e['timeout'])} ({e.get('timeoutPolicy')})")
    if e.get("previousRunId"):
        extra.append(f"replaces run {e['previousRunId']}")
    if e.get("retryOfRunId"):
        extra.append(f"flow retry attempt {e.get('attempt')} of run {e['retryOfRunId']}, "
                     f"after {format_duration(e.get('backoffSeconds') or 0)}")
    return (" · " + " · ".join(extra)) if extra else ""


ATTRIBUTE_HELP = "An initial attribute value, NAME=JSON (an AttributeMap: NAME/INSTANCE=JSON); repeatable."


def with_attributes(options: StartFlowOptions, definition: FlowDefinition, given: list[str]) -> StartFlowOptions:
    """`--attribute NAME=JSON` values as StartFlowOptions.with_attribute calls."""
    from dexcli.cli.inputs import load_json

    for text in given:
        name, sep, value = text.partition("=")
        attr_name, _, instance = name.partition("/")
        declared = definition.attributes.get(attr_name)
        if not sep or declared is None:
            known = ", ".join(sorted(definition.attributes)) or "none"
            raise UsageError(f"--attribute {text!r}: give NAME=JSON with one of the flow's attributes ({known})")
        parsed = load_json(value, f"--attribute {name}", f"; quote strings: {name}='\"text\"'")
        try:
            options = options.with_attribute(declared, instance, parsed) if instance else \
                options.with_attribute(declared, parsed)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"--attribute {name}: {exc}") from None
    return options


# The options `dex run` and `dex start` share, declared once (typer reads each default's OptionInfo).
FILE_OPTION = typer.Option(None, "--file", metavar="PATH.py:NAME",
                           help="Your own flow: a Flow class or instance, or a function returning a Flow or a "
                                "Registry (name one of its flows as the flow argument).")
FLOW_ID_OPTION = typer.Option(None, "--flow-id", help="Flow ID (default: generated).")
INPUT_OPTION = typer.Option(None, "--input", help="Start input as JSON, or @file.json.")
TIMEOUT_OPTION = typer.Option(None, "--timeout", help="Flow timeout, whole seconds (60s, 15m, 1h).")
TIMEOUT_POLICY_OPTION = typer.Option(None, "--timeout-policy", help=TIMEOUT_POLICY_HELP)
START_DELAY_OPTION = typer.Option(None, "--start-delay",
                                  help="Start the first step after this delay (the flow runs meanwhile).")
ID_REUSE_OPTION = typer.Option(None, "--id-reuse-policy", help=ID_REUSE_HELP)
REQUEST_ID_OPTION = typer.Option(None, "--request-id", help="The start's request id (default: generated).")
ATTRIBUTE_OPTION = typer.Option(None, "--attribute", help=ATTRIBUTE_HELP)
