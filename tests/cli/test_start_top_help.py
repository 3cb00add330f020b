"""`--help` of dex start and dex top, and the options dex stop and dex inspect gained."""

from __future__ import annotations

from tests.cli.cli_helpers import Cli


def test_the_new_commands_have_help(cli: Cli) -> None:
    for args, fragment in ((("start",), "without driving it"), (("top",), "--once"),
                           (("stop",), "--query QUERY"), (("inspect",), "--history")):
        out = cli.ok(*args, "--help", db=False).stdout
        assert fragment in out and "--json" in out, (args, out)
