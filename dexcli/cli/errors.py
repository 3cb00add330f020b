"""The CLI's errors: a user's mistake on the command line, each with the exit code `dex` ends with.

The one handler (dexcli.cli.app.DexGroup) prints `dex: error: <message>` for these, for the
SDK's DexError and for the store's StoreError. The classes are dexcli.command_errors' (flow
plugins raise them too, and dexcli.plugins does not import the CLI).
"""

from __future__ import annotations

from dexcli.command_errors import CliError, ConflictError, NotFoundError, UsageError

__all__ = ["EXIT_ENVIRONMENT", "EXIT_INTERNAL", "CliError", "ConflictError", "NotFoundError", "UsageError"]

# The exit codes of the scheme that no error class carries (`dex --help` lists them all).
EXIT_ENVIRONMENT = 5  # the database or the machine: locked, read-only, disk full, damaged (StoreError)
EXIT_INTERNAL = 70  # an unexpected exception: a bug in dex (EX_SOFTWARE of sysexits.h)
