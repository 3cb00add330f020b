"""Errors of the database layer."""

from __future__ import annotations


class StoreError(Exception):
    """The database cannot be used: not a dex database, a newer schema, not writable, or an
    outcome that cannot be recorded. The CLI exits with `exit_code`."""

    exit_code = 2
