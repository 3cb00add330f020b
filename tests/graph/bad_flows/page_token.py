"""Rule page-token-run: a page token passed to a new run to iterate page by page."""
from dataclasses import dataclass
from typing import Any

from dexcli import Context, Flow, Step, StepDecision, StepList, graceful_complete


@dataclass
class Page:
    items: list[str]
    next_page_token: str


def list_items(page_token: str) -> Page:
    return Page([], "")


class ExportPage(Step[str]):
    def __init__(self, client: Any = None) -> None:
        self.client = client

    def execute(self, context: Context, page_token: str) -> StepDecision:
        page = list_items(page_token)
        if page.next_page_token:
            self.client.start_flow(PageTokenFlow(), f"{context.flow_id}-next", page.next_page_token)  # FINDING page-token-run
        return graceful_complete(len(page.items))


class PageTokenFlow(Flow[str]):
    def __init__(self) -> None:
        self.export = ExportPage()

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(self.export)
