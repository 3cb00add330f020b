"""The engine: runs flows durably — scheduling, attempts, limits, retries, recovery, clock."""
