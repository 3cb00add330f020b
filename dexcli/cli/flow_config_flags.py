"""`--config KEY=VALUE` (`dex run`, `dex start`, `dex config FLOW --set`) as the SDK's FlowConfig,
and how `dex config` shows a run's.

A KEY is a FlowConfig field in the CLI's kebab case (`step-durability`), the SDK's snake case
(`step_durability`) or the server's protojson name (`stepDurability`); `continue-as-new-page-size-in-bytes`
is `continue-as-new-page-size-bytes`. Values are what `dex config FLOW` prints:

    step-durability                  default, sync, async
    continue-as-new-threshold        0 (off) or a number of tracked events
    continue-as-new-page-size-bytes  0 (1 MiB) up to 4 MiB
    active-step-search-mode          default (steps with a wait_for), all, with-wait-for, disabled
    attribute-store-names            a,b (names, comma-separated); empty: none
    worker_target                    refused, as the engine refuses it

What each value may be is dexcli.engine.flow_config's `config_fields` (the check the Client's
start and update_flow_config make); a key given twice, an unknown key or a bad value is a usage
error (exit 2) before anything opens.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import typer

from dexcli.cli.errors import UsageError

if TYPE_CHECKING:
    from dexcli.sdk.flow_config import FlowConfig

FIELDS = ("step_durability", "continue_as_new_threshold", "continue_as_new_page_size_bytes",
          "active_step_search_mode", "attribute_store_names")
_ALIASES = {"continue_as_new_page_size_in_bytes": "continue_as_new_page_size_bytes"}
_REFUSED = ("worker_target",)
_STORED_KEYS = {"step_durability": "stepDurability", "continue_as_new_threshold": "continueAsNewThreshold",
                "continue_as_new_page_size_bytes": "continueAsNewPageSizeInBytes",
                "active_step_search_mode": "activeStepSearchMode", "attribute_store_names": "attributeStoreNames"}

CONFIG_HELP = ("A FlowConfig field for this run, KEY=VALUE; repeatable: step-durability=default|sync|async, "
               "continue-as-new-threshold=N (0: off), continue-as-new-page-size-bytes=N (0: 1 MiB), "
               "active-step-search-mode=default|all|with-wait-for|disabled, attribute-store-names=a,b "
               "(empty: none). SDK field names work too (step_durability=async).")
CONFIG_OPTION = typer.Option(None, "--config", metavar="KEY=VALUE", help=CONFIG_HELP)


def kebab(field: str) -> str:
    return field.replace("_", "-")


def _field(key: str, text: str, flag: str) -> str:
    snake = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", key.strip()).lower().replace("-", "_")
    snake = _ALIASES.get(snake, snake)
    if snake in FIELDS or snake in _REFUSED:
        return snake
    raise UsageError(f"{flag} {text!r}: unknown key {key.strip()!r}; the keys are "
                     f"{', '.join(kebab(f) for f in FIELDS)}")


def _value(field: str, value: str, text: str, flag: str) -> Any:
    from dexcli.sdk.flow_config import ActiveStepSearchMode
    from dexcli.sdk.options import StepDurability

    word = value.strip().lower().replace("-", "_")
    if field in ("step_durability", "active_step_search_mode"):
        kind: Any = StepDurability if field == "step_durability" else ActiveStepSearchMode
        choices = [m.value for m in kind]
        if word not in choices:
            raise UsageError(f"{flag} {text!r}: {kebab(field)} must be one of "
                             f"{', '.join(kebab(c) for c in choices)}, not {value!r}")
        return kind(word)
    if field in ("continue_as_new_threshold", "continue_as_new_page_size_bytes"):
        try:
            return int(value.strip())
        except ValueError:
            raise UsageError(f"{flag} {text!r}: {kebab(field)} takes a whole number, not {value!r}") from None
    if field == "attribute_store_names":
        names = [n.strip() for n in value.split(",")] if value.strip() else []
        if any(not n for n in names):
            raise UsageError(f"{flag} {text!r}: attribute-store-names takes names separated by commas")
        return names
    return value  # worker_target: config_fields refuses it, in the engine's words


def parse_config(given: list[str] | None, flag: str = "--config") -> FlowConfig | None:
    """The KEY=VALUE pairs as one FlowConfig (None when none were given), checked as the engine
    checks a config_override; a bad pair is a UsageError naming it."""
    from dexcli.engine.flow_config import config_fields
    from dexcli.sdk.errors import NotSupportedYetError
    from dexcli.sdk.flow_config import FlowConfig

    if not given:
        return None
    values: dict[str, Any] = {}
    for text in given:
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{flag} {text!r}: give KEY=VALUE, e.g. {flag} step-durability=async")
        field = _field(key, text, flag)
        if field in values:
            raise UsageError(f"{flag}: {kebab(field)} is given twice")
        values[field] = _value(field, value, text, flag)
        try:  # the engine's own check, pair by pair so that its message names the pair
            config_fields(FlowConfig(**{field: values[field]}), f"{flag} {text!r}")
        except (TypeError, ValueError, NotSupportedYetError) as exc:
            message = str(exc).replace("; leave it None", f"; drop {key.strip()}")
            for name in FIELDS:
                message = message.replace(f": {name} ", f": {kebab(name)} ")
            raise UsageError(message) from None
    return FlowConfig(**values)


def with_config(options: Any, given: list[str] | None) -> Any:
    """StartFlowOptions with `--config`'s FlowConfig as its config_override."""
    import dataclasses

    config = parse_config(given)
    return options if config is None else dataclasses.replace(options, config_override=config)


def config_rows(stored: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """(key, value, set on the run) for each field, values in the form `--config` takes: what
    `dex config FLOW` prints. A field the run does not set shows what dex runs it with."""
    rows = []
    for field in FIELDS:
        key = _STORED_KEYS[field]
        raw = stored.get(key)
        is_set = key in stored
        if field == "step_durability":
            text = str(raw or "STEP_DURABILITY_SYNC").removeprefix("STEP_DURABILITY_").lower()
            text = "default (sync)" if text == "unspecified" else text
        elif field == "active_step_search_mode":
            mode = str(raw or "").removeprefix("ACTIVE_STEP_SEARCH_MODE_")
            text = {"ENABLED_FOR_ALL": "all", "ENABLED_FOR_STEPS_WITH_WAIT_FOR": "with-wait-for",
                    "DISABLED": "disabled"}.get(mode, "default (steps with a wait_for)")
        elif field == "continue_as_new_threshold":
            text = f"{raw} events" if raw else "0 (off)"
        elif field == "continue_as_new_page_size_bytes":
            text = f"{raw}" if raw else "0 (1 MiB)"
        else:
            names = (raw or {}).get("names", []) if is_set else None
            text = ",".join(names) if names else ("none" if is_set else "dex.toml's default store")
        rows.append((kebab(field), text, is_set))
    return rows
