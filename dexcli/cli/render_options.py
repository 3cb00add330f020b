"""How `dex inspect` shows a run's start options, its FlowConfig and the start's history line.

Apart from dexcli.cli.start_options (which parses them for `dex run` and `dex start` and
declares their typer options), so that the inspect view loads neither typer nor the parsing.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text

from dexcli.cli.config import format_duration

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
