"""What flow authors import. Definitions only: no I/O, no engine."""
