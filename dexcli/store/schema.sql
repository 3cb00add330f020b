-- dex database schema. Times are epoch seconds (REAL) on their flow's clock: real time plus
-- flows.clock_offset (what time skipping added to that flow; 0 for most).
-- Values (inputs, outputs, checkpoints, Stream values) are JSON text.
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS flows (
    flow_id       TEXT PRIMARY KEY,
    run_id        TEXT NOT NULL,
    flow_type     TEXT NOT NULL,
    flow_ref      TEXT,                 -- how to load the code: name:polling | file:/p.py:Cls
    status        TEXT NOT NULL,        -- RUNNING COMPLETED FAILED CANCELED TERMINATED CONTINUED_AS_NEW
    input         TEXT,
    request_id    TEXT,
    start_time    REAL NOT NULL,
    close_time    REAL,
    error_type    TEXT,
    error_message TEXT,
    graceful      INTEGER NOT NULL DEFAULT 0,   -- a step asked to complete when idle
    completions   TEXT NOT NULL DEFAULT '[]',   -- outputs collected, in order
    clock_offset  REAL NOT NULL DEFAULT 0,      -- seconds this flow's clock was skipped ahead
    timeout       REAL,                 -- StartFlowOptions.timeout (seconds); NULL: none
    timeout_policy TEXT,                -- FAIL CANCEL HANDLER (resolved at start)
    timeout_at    REAL,                 -- when the timeout fires; NULL once it has (or none)
    timeout_handler_options TEXT,       -- handle_timeout's ResolvedOptions JSON (HANDLER)
    start_delay   REAL,                 -- StartFlowOptions.start_delay (seconds)
    id_reuse_policy TEXT,               -- the IdReusePolicy it was started with
    num           INTEGER,              -- the flow's number: its history's keys (see history)
    -- SubFlows (schema 6): a child flow names the parent step execution whose Wait started it;
    -- the parent's Wait JSON names each child (flowId, runId), so the link is kept both ways
    parent_flow_id TEXT,
    parent_step_execution_id TEXT,
    -- FlowConfig and continue-as-new (schema 7):
    flow_config   TEXT,                 -- the run's FlowConfig as set (protojson keys, JSON); NULL: dex's defaults
    first_run_id  TEXT,                 -- the first run of its continue-as-new chain; NULL: this run
    step_numbers  TEXT,                 -- {stepType: n, "": all} step executions numbered by earlier runs of the chain
    -- Flow retry (schema 9, transitions/flow_retry.py):
    retry_policy  TEXT,                 -- StartFlowOptions.retry_policy resolved (JSON); NULL: a failure stands
    retry         TEXT                  -- this run's place among its retries: {attempt, firstRunId, previousRunId}; NULL: attempt 1
);
CREATE UNIQUE INDEX IF NOT EXISTS flows_by_num ON flows(num);
CREATE INDEX IF NOT EXISTS flows_by_start  ON flows(start_time);
CREATE INDEX IF NOT EXISTS flows_by_status ON flows(status, start_time);
CREATE INDEX IF NOT EXISTS flows_by_type   ON flows(flow_type, start_time);
-- The scheduler's reads touch only what is open, however many closed flows the file holds:
-- queries name these partial indexes' WHERE terms exactly (SQLite uses a partial index only then).
CREATE INDEX IF NOT EXISTS flows_timeouts  ON flows(timeout_at) WHERE timeout_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS flows_offsets   ON flows(clock_offset) WHERE clock_offset != 0;
CREATE INDEX IF NOT EXISTS flows_children  ON flows(parent_flow_id) WHERE parent_flow_id IS NOT NULL;

CREATE TABLE IF NOT EXISTS steps (
    flow_id           TEXT NOT NULL REFERENCES flows(flow_id),
    step_execution_id TEXT NOT NULL,     -- <StepType>-<n>
    step_type         TEXT NOT NULL,
    seq               INTEGER NOT NULL,  -- creation order in the flow
    from_step_execution_id TEXT NOT NULL,
    input             TEXT,
    options           TEXT NOT NULL,     -- resolved limits and retry policy (JSON)
    status            TEXT NOT NULL,     -- QUEUED RUNNING BACKOFF COMPLETED FAILED CANCELED
    attempt           INTEGER NOT NULL DEFAULT 0,  -- current or last attempt, 1-based
    scheduled_at      REAL NOT NULL,     -- TotalDuration counts from here (a locked method's: from its locks)
    first_attempt_at  REAL,
    next_attempt_at   REAL,              -- runnable from (QUEUED/BACKOFF)
    lease_owner       TEXT,              -- process running the attempt
    attempt_started_at REAL,
    last_heartbeat_time REAL,
    heartbeat_deadline REAL,             -- lease: last heartbeat + HeartbeatTimeout
    attempt_deadline  REAL,              -- attempt start + ExecuteMethodTimeout
    total_deadline    REAL,              -- scheduled_at (or when its locks were taken) + TotalDuration
    heartbeat_value   TEXT,              -- checkpoint (JSON), when has_heartbeat_value
    has_heartbeat_value INTEGER NOT NULL DEFAULT 0,
    recovery_error    TEXT,              -- {"errorType","detail"} for a recovery step
    decision          TEXT,
    end_time          REAL,
    method            TEXT NOT NULL DEFAULT 'EXECUTE',  -- WAIT_FOR or EXECUTE: what the attempts run
    method_base       INTEGER NOT NULL DEFAULT 0,  -- attempts before this method's first (its attempt = attempt - base)
    wait_options      TEXT,              -- the wait_for method's ResolvedOptions JSON (steps with wait_for)
    wait              TEXT,              -- the committed Wait (JSON): conditions, timers' firing times
    wait_started      REAL,
    wait_ended        REAL,
    condition_results TEXT,              -- what the completed wait selected and consumed (JSON)
    wait_for_failed   INTEGER NOT NULL DEFAULT 0,
    locals            TEXT,              -- step-execution locals (JSON object)
    lock_wait         TEXT,              -- the attribute lock key a queued step waits for
    heartbeats        INTEGER NOT NULL DEFAULT 0,  -- the current (or last) attempt's, as attempts has them
    stream_writes     INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (flow_id, step_execution_id)
);
-- A step transition writes few pages (each written to the WAL at its COMMIT). A step leased in
-- the commit that creates it, the usual next step, never enters steps_open, which holds only
-- what waits to become runnable. The running attempt lives on its step's row, and so does the
-- attempt that completed the step: an attempt gets a row of its own only when it ended
-- otherwise (failed, timed out, lost, interrupted, canceled) or whose step went on to another
-- method (a wait_for that completed): `ended_attempts`. The view `attempts` reads both.
-- Its WHERE is three equalities, not `status IN (...)`: SQLite evaluates a partial index's WHERE
-- on every write of a row, and an IN of more than two values builds two temporary B-trees each
-- time (an UPDATE of a step row cost 20-55 us with it, 5-8 without: bench/PROFILE.md round 9).
CREATE INDEX IF NOT EXISTS steps_open ON steps(status, next_attempt_at)
    WHERE status = 'QUEUED' OR status = 'BACKOFF' OR status = 'WAITING';
CREATE INDEX IF NOT EXISTS steps_running ON steps(lease_owner) WHERE status = 'RUNNING';

CREATE TABLE IF NOT EXISTS ended_attempts (
    flow_id           TEXT NOT NULL,
    step_execution_id TEXT NOT NULL,
    attempt           INTEGER NOT NULL,
    owner             TEXT,
    start_time        REAL NOT NULL,
    end_time          REAL,
    outcome           TEXT NOT NULL,     -- RUNNING COMPLETED FAILED TIMED_OUT LOST CANCELED
    error_type        TEXT,
    detail            TEXT,
    heartbeats        INTEGER NOT NULL DEFAULT 0,
    last_heartbeat    REAL,
    stream_writes     INTEGER NOT NULL DEFAULT 0,
    method            TEXT NOT NULL DEFAULT 'EXECUTE',
    stack_trace       TEXT,              -- the user code's traceback, innermost frame first
    PRIMARY KEY (flow_id, step_execution_id, attempt)
);
-- Every attempt, as inspect shows them: the ended ones above, and those their steps' rows hold.
CREATE VIEW IF NOT EXISTS attempts AS
    SELECT flow_id, step_execution_id, attempt, owner, start_time, end_time, outcome, error_type, detail,
           heartbeats, last_heartbeat, stream_writes, method, stack_trace FROM ended_attempts
    UNION ALL
    SELECT s.flow_id, s.step_execution_id, s.attempt, s.lease_owner, s.attempt_started_at,
           CASE s.status WHEN 'RUNNING' THEN NULL ELSE s.end_time END, s.status, NULL, NULL, s.heartbeats,
           s.last_heartbeat_time, s.stream_writes, s.method, NULL
    FROM steps s WHERE s.status = 'RUNNING' OR (s.status = 'COMPLETED' AND s.attempt > 0 AND NOT EXISTS (
        SELECT 1 FROM ended_attempts a WHERE a.flow_id = s.flow_id AND a.step_execution_id = s.step_execution_id
        AND a.attempt = s.attempt));

-- A flow's history is one range of keys: seq = flows.num * 2^24 + its event id (which counts
-- per flow from 1, as in Dex; a flow holds at most 2^24 - 1 events). So a flow's events sit
-- together and are read by key, with no index to keep, and an event appended to a running flow
-- writes one page.
CREATE TABLE IF NOT EXISTS history (
    seq        INTEGER PRIMARY KEY,
    flow_id    TEXT NOT NULL,
    event_time REAL NOT NULL,
    type       TEXT NOT NULL,
    payload    TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS stream_messages (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,   -- the resume token
    flow_type    TEXT NOT NULL,
    stream       TEXT NOT NULL,
    flow_id      TEXT NOT NULL,
    source       TEXT NOT NULL,
    value        TEXT NOT NULL,
    created_time REAL NOT NULL,
    size         INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS stream_by_flow ON stream_messages(flow_id, stream, id);
CREATE INDEX IF NOT EXISTS stream_by_type ON stream_messages(flow_type, stream, id);

CREATE TABLE IF NOT EXISTS stream_usage (
    flow_type TEXT NOT NULL,
    stream    TEXT NOT NULL,
    bytes     INTEGER NOT NULL,
    PRIMARY KEY (flow_type, stream)
);

-- Channel messages not yet consumed by a wait, FIFO per (flow, channel) by seq.
CREATE TABLE IF NOT EXISTS channel_messages (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id   TEXT NOT NULL UNIQUE,              -- UUIDv7
    flow_id      TEXT NOT NULL,
    channel      TEXT NOT NULL,                     -- name, or name/<urlencoded instance>
    value        TEXT NOT NULL,                     -- JSON
    published_at REAL NOT NULL,
    source       TEXT NOT NULL                      -- #<stepExecutionId> or rpc:<name>
);
CREATE INDEX IF NOT EXISTS channel_by_flow ON channel_messages(flow_id, channel, seq);

-- Attributes: a flow's durable typed values, by physical key (name, or name/<urlencoded instance>).
CREATE TABLE IF NOT EXISTS attributes (
    flow_id   TEXT NOT NULL,
    key       TEXT NOT NULL,
    name      TEXT NOT NULL,
    instance  TEXT,                       -- AttributeMap instance, NULL for a plain Attribute
    value     TEXT NOT NULL,              -- JSON
    updated   REAL NOT NULL,
    PRIMARY KEY (flow_id, key)
);

-- The search index of indexed attributes: one row per value (a keyword array has several).
CREATE TABLE IF NOT EXISTS search_attributes (
    flow_id   TEXT NOT NULL,
    key       TEXT NOT NULL,              -- the index key (AttributeIndex.index_key or the name)
    attr_key  TEXT NOT NULL,              -- the attribute's physical key it came from
    type      TEXT NOT NULL,              -- keyword full_text keyword_array int double bool datetime
    text      TEXT,                       -- keyword / full_text / keyword_array values
    num       REAL                        -- int / double / bool (0, 1) / datetime (epoch seconds)
);
CREATE INDEX IF NOT EXISTS search_by_text ON search_attributes(key, text, flow_id) WHERE text IS NOT NULL;
CREATE INDEX IF NOT EXISTS search_by_num  ON search_attributes(key, num, flow_id) WHERE num IS NOT NULL;
CREATE INDEX IF NOT EXISTS search_by_flow ON search_attributes(flow_id, attr_key);

-- Attribute locks: held by a step execution for its whole method call (backoffs included),
-- or by an RPC until it commits (or `expires`, if its process died).
CREATE TABLE IF NOT EXISTS attribute_locks (
    flow_id   TEXT NOT NULL,
    key       TEXT NOT NULL,
    holder    TEXT NOT NULL,              -- a step execution id, or rpc:<name>:<id>
    acquired  REAL NOT NULL,
    expires   REAL,                       -- RPC locks only
    PRIMARY KEY (flow_id, key)
);

-- What a write overwrote, for each step execution then in a method call (once per key and
-- call): its retries read the attributes as they were when the call began. Dropped when the
-- step's next call begins, by the next write that keeps snapshots once the call has ended, or
-- when the flow closes.
CREATE TABLE IF NOT EXISTS attribute_snapshots (
    flow_id           TEXT NOT NULL,
    step_execution_id TEXT NOT NULL,
    key               TEXT NOT NULL,
    name              TEXT,               -- NULL with value: the key did not exist
    instance          TEXT,
    value             TEXT,
    PRIMARY KEY (flow_id, step_execution_id, key)
);

-- Schema 7: the Attribute Store outbox (store/attribute_outbox.py). One row per synced
-- attribute key of a flow: marked PENDING in the transaction of the attribute's write, SYNCED
-- once every store of the flow has its latest value (kept: inspect shows where it went).
CREATE TABLE IF NOT EXISTS attribute_sync (
    flow_id     TEXT NOT NULL,
    key         TEXT NOT NULL,              -- the attribute's physical key (the store's column)
    value       TEXT,                       -- JSON; NULL: deleted (projects SQL NULL)
    seq         INTEGER NOT NULL,           -- bumped by each write: a drain deletes only what it wrote
    written     REAL NOT NULL,
    status      TEXT NOT NULL DEFAULT 'PENDING',  -- PENDING, SYNCED, or SKIPPED (a store cannot take it)
    stores      TEXT,                       -- JSON list of the stores it was last written to
    owner       TEXT,                       -- the process writing it to the stores now
    lease_until REAL,
    attempts    INTEGER NOT NULL DEFAULT 0, -- failed writes since the last attribute write
    next_at     REAL NOT NULL,              -- when it is due (a retry's backoff)
    error       TEXT,                       -- the last failure, or why it was skipped
    PRIMARY KEY (flow_id, key)
);
CREATE INDEX IF NOT EXISTS attribute_sync_due ON attribute_sync(next_at) WHERE status = 'PENDING';

-- Small state an example owns (the polling example's simulated jobs).
CREATE TABLE IF NOT EXISTS kv (
    ns    TEXT NOT NULL,
    key   TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (ns, key)
);
