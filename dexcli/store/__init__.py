"""The only package that imports sqlite3. It imports nothing else of dexcli."""

from dexcli.store.connection import SCHEMA_VERSION
from dexcli.store.errors import StoreError
from dexcli.store.records import (
    AttemptOutcome,
    AttemptRecord,
    FlowRecord,
    FlowState,
    HistoryRecord,
    Method,
    Runnable,
    Schedule,
    Skipped,
    StepRecord,
    StepState,
    StreamRecord,
)
from dexcli.store.store import Store
from dexcli.store.tx import Tx, json_object, json_string
from dexcli.store.tx_runs import ARCHIVE_SEPARATOR, StartSettings, timeout_time

__all__ = [
    "ARCHIVE_SEPARATOR", "SCHEMA_VERSION", "AttemptOutcome", "AttemptRecord", "FlowRecord", "FlowState",
    "HistoryRecord", "Method", "Runnable", "Schedule", "Skipped", "StartSettings", "Store", "StoreError", "StepRecord",
    "StepState", "StreamRecord", "Tx", "json_object", "json_string", "timeout_time",
]
