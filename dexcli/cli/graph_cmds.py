"""`dex graph` and `dex lint`: thin commands over dexcli.graph (which renders plain strings).

The main CLI calls `register(app)`; errors are raised as CliError or DexError subclasses for its handler.
"""

from __future__ import annotations

import enum
import json
import re
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.text import Text

if TYPE_CHECKING:  # the graph package loads when a graph or lint command runs, not at start-up
    from dexcli.graph.lint import LintReport

FLOW_HELP = "A known flow name (see `dex flows`), e.g. polling."
FILE_HELP = "Load the flow from path/to/module.py:FlowClass instead of by name."

_STYLES = (
    (r"✓ Valid|✓ no findings", "bold green"),
    (r"✗ Invalid", "bold red"),
    (r"──(goTo)──▶", "cyan"),
    (r"──(gracefulComplete|forceComplete)──▶", "green"),
    (r"──(forceFail)──▶", "red"),
    (r"──(deadEnd)──▶", "magenta"),
    (r"──(if execute fails)──▶", "yellow"),
    (r"◉", "dim"),
    (r"↺", "dim"),
    (r"\? \([^)\n]*\)", "yellow"),
    (r"(?m)^✗ .*$", "red"),
    (r"(?m)^! .*$", "yellow"),
    (r"(?m)^(not reachable from START:|reached only .*:|other steps:)$", "dim italic"),
    (r"\berror\b", "red"),
    (r"\bwarning\b", "yellow"),
    (r"\[[a-z-]+\]", "bold"),
)


class GraphFormat(str, enum.Enum):
    text = "text"
    mermaid = "mermaid"
    dot = "dot"
    json = "json"


def _console() -> Console:
    # soft_wrap: never re-wrap the diagram; rich drops colour itself for NO_COLOR and non-TTYs
    return Console(highlight=False, soft_wrap=True)


def _styled(text: str, title: str | None = None) -> Text:
    t = Text(text)
    for pattern, style in _STYLES:
        t.highlight_regex(pattern, style)
    if title:
        t.highlight_regex(rf"^{re.escape(title)}\b", "bold")
    return t


def _load(flow: str | None, file: str | None) -> Any:
    from dexcli.cli.loader import load_flow

    obj, _ref = load_flow(flow, file)
    return obj


def graph_command(flow: str | None, file: str | None, fmt: str) -> tuple[str, bool]:
    """The text `dex graph` prints (plain, uncoloured) and whether the flow is valid. Raises
    CliError or DexError subclasses."""
    from dexcli.graph.model import build_graph
    from dexcli.graph.render import render

    graph = build_graph(_load(flow, file))
    return render(graph, fmt), graph.valid


def lint_reports(flow: str | None, file: str | None, portable: bool = False) -> list[LintReport]:
    """Lint one flow, or every known flow when neither a name nor --file is given."""
    from dexcli.graph.lint import lint_flow

    if flow or file:
        return [lint_flow(_load(flow, file), portable)]
    from dexcli.cli.loader import known_flows, plugin_flow

    return [lint_flow(plugin_flow(plugin), portable) for plugin in known_flows().values()]


def lint_exit_code(reports: list[LintReport], strict: bool) -> int:
    return max((r.exit_code(strict) for r in reports), default=0)


def lint_json(reports: list[LintReport], strict: bool) -> str:
    data = {
        "flows": [
            {"flow": r.flow, "verdict": r.graph.verdict, "findings": [f.to_dict() for f in r.findings],
             "suppressed": r.suppressed}
            for r in reports
        ],
        "errors": sum(len(r.errors) for r in reports),
        "warnings": sum(len(r.warnings) for r in reports),
        "strict": strict,
        "exitCode": lint_exit_code(reports, strict),
    }
    return json.dumps(data, indent=2) + "\n"


def lint_text(reports: list[LintReport]) -> str:
    from dexcli.graph.lint import format_finding

    out: list[str] = []
    for r in reports:
        for f in r.findings:
            out.append(format_finding(f))
        parts = []
        if r.errors:
            parts.append(f"{len(r.errors)} error{'s' if len(r.errors) != 1 else ''}")
        if r.warnings:
            parts.append(f"{len(r.warnings)} warning{'s' if len(r.warnings) != 1 else ''}")
        summary = ", ".join(parts) if parts else "✓ no findings"
        if r.suppressed:
            summary += f" ({r.suppressed} silenced by # dex: ignore)"
        verdict = "✓ Valid" if r.graph.valid else "✗ Invalid"
        out.append(f"{r.flow}   {verdict}   {summary}")
    return "\n".join(out) + "\n"


def register(app: typer.Typer) -> None:
    """Add `graph` and `lint` to the main Typer app."""

    @app.command("graph")
    def graph(
        flow: str | None = typer.Argument(None, help=FLOW_HELP, show_default=False),
        file: str | None = typer.Option(None, "--file", help=FILE_HELP, show_default=False),
        fmt: GraphFormat = typer.Option(GraphFormat.text, "--format", "-f",
                                        help="text (a diagram), mermaid, dot or json."),
    ) -> None:
        """Draw a flow's definition graph from its code, with a Valid/Invalid verdict. Runs nothing.
        Exits 1 when the flow is Invalid."""
        text, valid = graph_command(flow, file, fmt.value)
        if fmt is GraphFormat.text:
            title = text.split("   ", 1)[0]
            _console().print(_styled(text.rstrip("\n"), title))
        else:
            typer.echo(text, nl=False)
        if not valid:
            raise typer.Exit(1)

    @app.command("lint")
    def lint(
        flow: str | None = typer.Argument(None, help=FLOW_HELP + " Default: every known flow.",
                                             show_default=False),
        file: str | None = typer.Option(None, "--file", help=FILE_HELP, show_default=False),
        strict: bool = typer.Option(False, "--strict", help="Exit 1 on warnings too."),
        as_json: bool = typer.Option(False, "--json", help="Print the findings as JSON."),
        portable: bool = typer.Option(
            False, "--portable",
            help="Also report what would not carry over to a Dex server (portability/* warnings): dexcli-only "
                 "names, modules and parameters, and async handlers the official Registry refuses by default."),
    ) -> None:
        """Check a flow for definition errors, polling anti-patterns and lost heartbeats, each with file:line.

        Exits 1 on errors (and on warnings with --strict). Silence a rule on one line with
        `# dex: ignore[rule-id]`.
        """
        reports = lint_reports(flow, file, portable)
        if as_json:
            typer.echo(lint_json(reports, strict), nl=False)
        else:
            _console().print(_styled(lint_text(reports).rstrip("\n")))
        code = lint_exit_code(reports, strict)
        if code:
            raise typer.Exit(code)


__all__ = ["register", "graph_command", "lint_reports", "lint_exit_code", "lint_json", "lint_text"]
