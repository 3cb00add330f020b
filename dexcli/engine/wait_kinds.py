"""The kinds of a persisted wait condition (dexcli.engine.waits), apart so that read-only views
can name them without importing the SDK's condition classes."""

TIMER, CHANNEL, SUBFLOW = "timer", "channel", "subflow"
