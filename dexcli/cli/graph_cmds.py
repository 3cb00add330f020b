"""`dex graph` and `dex lint`: thin commands over dexcli.graph (which renders plain strings).
`dex lint --flow-id ID` reads the run's step executions from the database and checks them
(dexcli.graph.run_lint).

The main CLI calls `register(app)`; errors are raised as CliError or DexError subclasses for its handler.
"""

from __future__ import annotations

import enum
import json
import re
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:  # the graph package (and Rich) load when a graph or lint command runs, not at start-up
    from rich.console import Console
    from rich.text import Text

    from dexcli.graph.lint import LintReport
    from dexcli.graph.run_lint import RunLintReport

FLOW_HELP = "A known flow name (see `dex flows`), e.g. polling."
FILE_HELP = "Load the flow from path/to/module.py:FlowClass instead of by name."
FLOW_ID_HELP = ("Check what a run did instead (from the database): a step that waited only on a Timer and "
                "then moved to itself, 3 times in a row or more, is the timer-self-loop anti-pattern.")

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
    (r"(?m)^(not reachable from START:|reached only .*:|other steps:|wait conditions:)$", "dim italic"),
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
    from rich.console import Console  # when a graph is drawn: not for `dex --help` or another command

    # soft_wrap: never re-wrap the diagram; rich drops colour itself for NO_COLOR and non-TTYs
    return Console(highlight=False, soft_wrap=True)


def _styled(text: str, title: str | None = None) -> Text:
    from rich.text import Text

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


def lint_exit_code(reports: list[LintReport], exit_zero: bool) -> int:
    return max((r.exit_code(exit_zero) for r in reports), default=0)


def lint_json(reports: list[LintReport], exit_zero: bool) -> str:
    data = {
        "flows": [
            {"flow": r.flow, "verdict": r.graph.verdict, "findings": [f.to_dict() for f in r.findings],
             "suppressed": r.suppressed}
            for r in reports
        ],
        "errors": sum(len(r.errors) for r in reports),
        "warnings": sum(len(r.warnings) for r in reports),
        "exitZero": exit_zero,
        "exitCode": lint_exit_code(reports, exit_zero),
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


def run_lint_report(flow_id: str) -> RunLintReport:
    """`dex lint --flow-id`: the run's step executions and persisted Waits, checked. The flow's
    definition gives file:line when the run names an installed flow (by its name) that still loads."""
    from dexcli.cli.loader import load_ref
    from dexcli.cli.shared import flow_or_not_found, open_store
    from dexcli.graph.run_lint import lint_run

    store = open_store(read_only=True)
    try:
        record = flow_or_not_found(store, flow_id)
        steps = store.steps_of(flow_id)
    finally:
        store.close()
    definition = None
    if record.flow_ref is not None and record.flow_ref.startswith("name:"):  # never a file only the database names
        try:
            definition = load_ref(record.flow_ref)
        except Exception:  # moved or broken since the run: the findings stand without file:line
            definition = None
    return lint_run(flow_id, record.flow_type, steps, definition)


def run_lint_text(report: RunLintReport) -> str:
    from dexcli.graph.lint import format_finding

    out = [format_finding(f) for f in report.findings]
    n = len(report.warnings)
    summary = f"{n} warning{'s' if n != 1 else ''}" if n else "✓ no findings"
    if report.suppressed:
        summary += f" ({report.suppressed} silenced by # dex: ignore)"
    out.append(f"flow {report.flow_id} ({report.flow_type})   {summary}")
    return "\n".join(out) + "\n"


def run_lint_json(report: RunLintReport, exit_zero: bool) -> str:
    data = {"flowId": report.flow_id, "flow": report.flow_type, "findings": [f.to_dict() for f in report.findings],
            "suppressed": report.suppressed, "errors": 0, "warnings": len(report.warnings), "exitZero": exit_zero,
            "exitCode": report.exit_code(exit_zero)}
    return json.dumps(data, indent=2) + "\n"


def _lint_run_command(flow_id: str, flow: str | None, file: str | None, portable: bool, exit_zero: bool,
                      as_json: bool) -> None:
    from dexcli.cli.errors import UsageError

    if flow or file or portable:
        raise UsageError("--flow-id checks what a run did: give no flow name, --file or --portable with it")
    report = run_lint_report(flow_id)
    if as_json:
        typer.echo(run_lint_json(report, exit_zero), nl=False)
    else:
        _console().print(_styled(run_lint_text(report).rstrip("\n")))
    code = report.exit_code(exit_zero)
    if code:
        raise typer.Exit(code)


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
        exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even when there are findings."),
        _strict: bool = typer.Option(False, "--strict", hidden=True,
                                     help="Kept for old scripts: warnings fail without it now."),
        as_json: bool = typer.Option(False, "--json", help="Print the findings as JSON."),
        portable: bool = typer.Option(
            False, "--portable",
            help="Also report what would not carry over to a Dex server (portability/* warnings): dexcli-only "
                 "names, modules and parameters, and async handlers the official Registry refuses by default."),
        flow_id: str | None = typer.Option(None, "--flow-id", metavar="ID", help=FLOW_ID_HELP, show_default=False),
    ) -> None:
        """Check a flow for definition errors, polling anti-patterns and lost heartbeats, each with file:line.

        Exits 1 when there are findings, errors or warnings (0 with --exit-zero). Silence a rule on one line with
        `# dex: ignore[rule-id]`. With --flow-id, check a run's history instead of the code.
        """
        if flow_id is not None:
            _lint_run_command(flow_id, flow, file, portable, exit_zero, as_json)
            return
        reports = lint_reports(flow, file, portable)
        if as_json:
            typer.echo(lint_json(reports, exit_zero), nl=False)
        else:
            _console().print(_styled(lint_text(reports).rstrip("\n")))
        code = lint_exit_code(reports, exit_zero)
        if code:
            raise typer.Exit(code)


__all__ = ["register", "graph_command", "lint_reports", "lint_exit_code", "lint_json", "lint_text",
           "run_lint_report", "run_lint_text", "run_lint_json"]
