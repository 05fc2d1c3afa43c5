-- What the dashboard and `spindle logs` read (issue 17).
--
-- Each job's guest lines (`log`, stdout, stderr, and the host's notes of what a cap
-- dropped), per step attempt, pruned with the job; and the totals that cap them.
CREATE TABLE job_logs (
    id INTEGER PRIMARY KEY,
    job_id TEXT NOT NULL,
    step TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    at INTEGER NOT NULL,
    level TEXT NOT NULL,
    stream TEXT NOT NULL,
    message TEXT NOT NULL
);
CREATE INDEX job_logs_job ON job_logs (job_id, id);
CREATE TABLE job_log_totals (
    job_id TEXT PRIMARY KEY,
    lines INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    dropped INTEGER NOT NULL
);

-- Bulk operations (a retry of the dead letters a filter matches), done in the
-- background and kept as their audit trail.
CREATE TABLE operations (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    action TEXT NOT NULL,
    filter TEXT NOT NULL,
    state TEXT NOT NULL,
    matched INTEGER NOT NULL,
    done INTEGER NOT NULL,
    failed INTEGER NOT NULL,
    actor TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    finished_at INTEGER
);
CREATE INDEX operations_tenant ON operations (tenant_id, created_at);

-- Operational alerts: late successes after a failure, sandbox faults (one row per
-- tenant, kind and code a minute, counted).
CREATE TABLE alerts (
    id INTEGER PRIMARY KEY,
    at INTEGER NOT NULL,
    last_at INTEGER NOT NULL,
    tenant_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    job_id TEXT,
    code TEXT NOT NULL,
    message TEXT NOT NULL,
    count INTEGER NOT NULL
);
CREATE INDEX alerts_recent ON alerts (last_at);
CREATE INDEX alerts_key ON alerts (tenant_id, kind, code, last_at);

-- The W3C trace parent a job was submitted under, kept while the host exports spans so
-- that its steps join the caller's trace; pruned with the job.
CREATE TABLE job_traces (
    job_id TEXT PRIMARY KEY,
    traceparent TEXT NOT NULL
);
