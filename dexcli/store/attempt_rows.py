"""Attempts as the database keeps them: the running attempt, and the one that completed its
step, live on the step's row; an attempt gets a row of its own in `ended_attempts` when it
ends otherwise (or its step goes on to another method). So a transition that completes a step
and starts the next writes no attempt row. The view `attempts` (schema.sql) reads both.
"""

from __future__ import annotations

from dexcli.store.records import ATTEMPT_COLUMNS

# The attempt the step's row holds, ended: owner and attempt number bound, start, counters and
# method from the row (bind before the next attempt is leased, which resets them).
END_ATTEMPT = (f"INSERT INTO ended_attempts ({ATTEMPT_COLUMNS}) SELECT flow_id, step_execution_id, ?, "
               "COALESCE(?, lease_owner), attempt_started_at, ?, ?, ?, ?, heartbeats, last_heartbeat_time, "
               "stream_writes, method, ? FROM steps WHERE flow_id = ? AND step_execution_id = ?")
# The running attempts of a flow's steps, ended CANCELED (append `AND step_execution_id = ?` for one).
CANCEL_ATTEMPTS = (f"INSERT INTO ended_attempts ({ATTEMPT_COLUMNS}) SELECT flow_id, step_execution_id, attempt, "
                   "lease_owner, attempt_started_at, ?, 'CANCELED', NULL, NULL, heartbeats, last_heartbeat_time, "
                   "stream_writes, method, NULL FROM steps WHERE flow_id = ? AND status = 'RUNNING'")
# A flow's attempts in start order (the view's WHERE is pushed into both of its parts).
OF_FLOW = f"SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE flow_id = ? ORDER BY start_time, step_execution_id, attempt"
