"""The client operations behind search_flows, wait_for_attribute_match and
wait_for_step_completion (both clients share them; dexcli.client exposes them).

A wait is a check (does the condition hold now?) and a deadline on the engine's clock; the
client drives the flow (Client) or polls while the engine runs (AsyncClient) until the check
holds, the flow is no longer running, or the deadline passes.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from dexcli.engine import Engine
from dexcli.sdk.attribute_match import matches, wait_arguments
from dexcli.sdk.attributes import search_keys
from dexcli.sdk.channels import physical_name
from dexcli.sdk.codec import decode
from dexcli.sdk.conditions import StepExecutionId
from dexcli.sdk.errors import DexServiceError, FlowNotActiveOrNotFoundError, RequestTimeoutError, StatusCode
from dexcli.sdk.results import FlowStatus
from dexcli.sdk.search import SearchFlowEntry, SearchFlowsPage, stored_value
from dexcli.sdk.wait_options import WaitForStepCompletionOptions, duration_seconds
from dexcli.store import ARCHIVE_SEPARATOR, FlowRecord, FlowState, Store
from dexcli.store.query import QueryError
from dexcli.store.search import attribute_value, search_flows


def _dt(t: float) -> datetime:
    return datetime.fromtimestamp(t, tz=UTC)


class Matching:
    """An attribute wait's condition: `held()` looks again and keeps the value it saw."""

    def __init__(self, check: Callable[[], tuple[bool, Any]]) -> None:
        self._check = check
        self.found, self.value = False, None

    def held(self) -> bool:
        self.found, self.value = self._check()
        return self.found


class WaitOps:
    engine: Engine

    @property
    def store(self) -> Store:
        return self.engine.store

    def running(self, flow_id: str) -> bool:
        flow = self.store.get_flow(flow_id)
        return flow is not None and flow.is_running

    def answer(self) -> None:
        """Before a client is told anything: what ASYNC durability left open is committed (a
        client hears only what is durable; dexcli.engine.async_commits)."""
        self.store.commit_deferred()

    def search(self, query: str, page_size: int, token: str, include_continued_as_new: bool = False
               ) -> SearchFlowsPage:
        self.answer()
        try:
            page = search_flows(self.store, query, page_size, token, declared=self._declared_index_keys,
                                include_continued_as_new=include_continued_as_new)
        except QueryError as e:  # the server's INVALID_ARGUMENT
            raise DexServiceError(str(e), code=StatusCode.INVALID_ARGUMENT) from e
        return SearchFlowsPage([SearchFlowEntry(
            _flow_id_of(h.flow), h.flow.run_id, h.flow.flow_type, FlowStatus[h.flow.status.name],
            _dt(h.flow.start_time),
            None if h.flow.close_time is None else _dt(h.flow.close_time),
            {k: stored_value(v) for k, v in h.indexed.items()}) for h in page.hits], page.next_page_token)

    def _declared_index_keys(self) -> set[str]:
        """The index keys the flows registered with this client declare."""
        return {k for d in self.engine.definitions.registry for k in search_keys(d.attributes.values())}

    def request_deadline(self, request_timeout: timedelta) -> float | None:
        """A wait's `request_timeout` on the engine's clock (zero: no deadline)."""
        seconds = duration_seconds(request_timeout)
        return self.engine.clock.now() + seconds if seconds else None

    def active(self, flow_id: str) -> None:
        if not self.running(flow_id):
            raise FlowNotActiveOrNotFoundError(f"flow {flow_id!r} is not running (or does not exist)")

    def attribute_wait(self, flow_id: str, attribute: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
                       ) -> tuple[Matching, float | None]:
        """The check of one `wait_for_attribute_match` and its deadline."""
        instance, match, options = wait_arguments(attribute, args, kwargs)
        duration_seconds(options.internal_handler_timeout)
        deadline = self.request_deadline(options.request_timeout)
        key = physical_name(attribute.name, instance)
        self.active(flow_id)

        def check() -> tuple[bool, Any]:
            text = attribute_value(self.store, flow_id, key)
            value = None if text is None else decode(text, attribute.value_type)
            return (text is not None and matches(match, value)), value

        return Matching(check), deadline

    def step_wait(self, flow_id: str, step_execution_id: StepExecutionId, options: WaitForStepCompletionOptions
                  ) -> tuple[Callable[[], bool], float | None]:
        """The check of one `wait_for_step_completion` (has it ended now?) and its deadline."""
        duration_seconds(options.internal_handler_timeout)
        deadline = self.request_deadline(options.request_timeout)
        seid = str(step_execution_id)
        self.active(flow_id)

        def ended() -> bool:
            step = self.store.read(lambda tx: tx.get_step(flow_id, seid))
            return step is not None and not step.status.is_open

        return ended, deadline

    def wait_over(self, flow_id: str, what: str, deadline: float | None) -> DexServiceError:
        """Why a wait ended without its condition: the flow closed (or is gone), or the deadline passed."""
        if not self.running(flow_id):
            return FlowNotActiveOrNotFoundError(f"flow {flow_id!r} ended (or is gone) before {what}")
        return RequestTimeoutError(f"request timed out waiting for {what} of flow {flow_id!r}")


def _flow_id_of(flow: FlowRecord) -> str:
    """The flow id a run belongs to: an earlier run of a continue-as-new chain is kept under
    `<flow_id>$<run_id>`, and a search names it by its flow id and run id, as Dex does."""
    if flow.status is FlowState.CONTINUED_AS_NEW:
        return flow.flow_id.split(ARCHIVE_SEPARATOR, 1)[0]
    return flow.flow_id
