"""The CLI's errors: a user's mistake on the command line, each with the exit code `dex` ends with.

The one handler (dexcli.cli.app.DexGroup) prints `dex: error: <message>` for these, for the
SDK's DexError and for the store's StoreError. Flow plugins raise them too (dexcli.plugins).
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


# The exit codes of the scheme that no error class carries (`dex --help` lists them all).
EXIT_ENVIRONMENT = 5  # the database or the machine: locked, read-only, disk full, damaged (StoreError)
EXIT_INTERNAL = 70  # an unexpected exception: a bug in dex (EX_SOFTWARE of sysexits.h)
