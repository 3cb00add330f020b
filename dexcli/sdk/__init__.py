"""What flow authors import. Definitions only: no I/O, no engine. Imports nothing of dexcli
outside dexcli.sdk (tests/engine/test_public_api.py checks it)."""
