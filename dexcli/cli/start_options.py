"""`dex run`'s start options (--timeout, --timeout-policy, --start-delay, --id-reuse-policy,
--request-id) as the SDK's StartFlowOptions (how `dex inspect` shows them: dexcli.cli.render_options).

Policy values are the official SDK's enum values in kebab case (`allow-if-not-running`).
Durations are whole seconds, as the SDK requires (`60s`, `15m`, `1h`).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

import typer

from dexcli.cli.config import parse_duration
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
