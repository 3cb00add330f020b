"""The only package that imports sqlite3."""

from dexcli.store.sqlite import SCHEMA_VERSION, Store, Tx

__all__ = ["SCHEMA_VERSION", "Store", "Tx"]
