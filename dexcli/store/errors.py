"""Errors of the database layer."""

from __future__ import annotations


class StoreError(Exception):
    """The database cannot be used: not a dex database, a newer schema, not writable, damaged,
    or an outcome that cannot be recorded. The CLI exits with `exit_code`: 5, the code of a
    problem with the environment dex runs in rather than with the command or the flow (the
    scheme is in `dex --help`; this package imports nothing of dexcli, hence the literal)."""

    exit_code = 5


class DatabaseConditionError(StoreError):
    """Something outside dex stopped a statement: the disk is full, another process held the
    write lock past the busy timeout, the file is read-only, or it was deleted or replaced. Nothing of
    the failed transaction was written; what was committed before stays."""


class DiskFullError(DatabaseConditionError):
    """A write found no space left on the database's file system."""


class DatabaseLockedError(DatabaseConditionError):
    """Another process held the write lock longer than the busy timeout."""


class ReadOnlyDatabaseError(DatabaseConditionError):
    """The file or its folder is not writable for this process: it can read, not write."""


class DatabaseReplacedError(DatabaseConditionError):
    """The file at the database's path is no longer the one this process opened. Every later
    transaction of the connection fails the same way: nothing more is written to either file."""


class NoDatabaseError(StoreError):
    """No dex database where the path points: nothing is there (`DatabaseMissingError`), or
    a file that is not a dex database (`NotADexDatabaseError`). Commands that only read never
    create one."""


class DatabaseMissingError(NoDatabaseError):
    """Nothing at the database's path (nothing has run there yet): exit 3, as for anything
    named that does not exist."""

    exit_code = 3


class NotADexDatabaseError(NoDatabaseError):
    """A file at the path that is not a dex database: empty, not SQLite, or another
    application's SQLite database."""


class DamagedDatabaseError(DatabaseConditionError):
    """The file is not (or no longer) a whole dex database: SQLite found it malformed, a table
    or column is missing, or a row holds what dex never writes (text that is not JSON, a status
    no dex has). The message names the file and, for a row, its table and key."""
