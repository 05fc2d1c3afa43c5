-- Workflows (issue 14). A child job names its parent, the parent's fan-out (`slot`:
-- pass/step/batch) and its index there; the unique index is the belt to the version
-- check's braces: no report can create one child twice.
ALTER TABLE jobs ADD COLUMN parent_id TEXT;
ALTER TABLE jobs ADD COLUMN parent_slot TEXT;
ALTER TABLE jobs ADD COLUMN parent_index BIGINT;
CREATE UNIQUE INDEX jobs_child_slot ON jobs (parent_id, parent_slot, parent_index) WHERE parent_id IS NOT NULL;

-- What an after-commit effect is about beyond its job (the fan-out whose leftovers to
-- cancel, and why).
ALTER TABLE outbox ADD COLUMN detail TEXT;

-- Signals sent to jobs, kept in order until a wait for their name consumes them.
CREATE TABLE signals (
    id BIGSERIAL PRIMARY KEY,
    job_id TEXT NOT NULL,
    name TEXT NOT NULL,
    body BYTEA NOT NULL,
    created_at BIGINT NOT NULL,
    consumed_at BIGINT
);
CREATE INDEX signals_pending ON signals (job_id, name, id) WHERE consumed_at IS NULL;

-- Cron schedules: each firing is a job whose idempotency key is (schedule, time).
CREATE TABLE schedules (
    tenant_id TEXT NOT NULL,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    cron TEXT NOT NULL,
    timezone TEXT NOT NULL,
    input BYTEA NOT NULL,
    catch_up TEXT NOT NULL,
    overlap TEXT NOT NULL,
    paused BIGINT NOT NULL,
    next_fire_at BIGINT NOT NULL,
    last_fired_at BIGINT,
    last_job_id TEXT,
    fired BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, name)
);
CREATE INDEX schedules_due ON schedules (next_fire_at) WHERE paused = 0;
