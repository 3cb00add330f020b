"""Errors of the database layer."""

from __future__ import annotations


class StoreError(Exception):
    """The database cannot be used: not a dex database, a newer schema, not writable, or an
    outcome that cannot be recorded. The CLI exits with `exit_code`."""

    exit_code = 2


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
