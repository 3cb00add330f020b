"""Command names from Temporal, the Dex CLI or DBOS get a hint to dex's own command."""

from __future__ import annotations

from tests.cli.cli_helpers import Cli, assert_error


def test_familiar_command_names_point_at_dex_commands(cli: Cli) -> None:
    for name, fragment in (("signal", "`dex rpc FLOW_ID NAME"), ("query", "`dex rpc FLOW_ID NAME"),
                           ("describe", "`dex inspect FLOW_ID`"), ("show", "`dex inspect FLOW_ID`")):
        line = assert_error(cli(name, "f1"), 2, f"No such command '{name}'", fragment)
        assert "Did you mean" not in line
    assert_error(cli("inspec", "f1"), 2, "Did you mean 'inspect'?")  # other names keep click's guess

