"""The errors a `dex` command ends with: a user's mistake, each with the exit code `dex` exits
with. The CLI raises them (dexcli.cli.errors re-exports them with the exit-code scheme) and so
do flow plugins (dexcli.plugins), which must not import the CLI.
"""

from __future__ import annotations


class CliError(Exception):
    """Base of the CLI's errors; `exit_code` is what `dex` exits with."""

    exit_code = 2


class UsageError(CliError):
    """Bad input from the user (a flag, a value, a file): exit 2."""

    exit_code = 2


class NotFoundError(CliError):
    """The thing named does not exist (a database, a flow id, a flow name): exit 3."""

    exit_code = 3


class ConflictError(CliError):
    """The thing to create exists already (a flow id, dex.toml), or the thing named exists but is
    closed or not in a state for that (a flow that has ended): exit 4."""

    exit_code = 4
