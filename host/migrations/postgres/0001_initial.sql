-- Spindle's schema on PostgreSQL (the same shape as SQLite's). Timestamps are microseconds since the Unix epoch (UTC),
-- integers on both backends so that they compare and index the same way.

CREATE TABLE tenants (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL
);

-- API tokens, stored as SHA-256 hashes; role is 'tenant' or 'operator'.
CREATE TABLE api_tokens (
    token_hash TEXT PRIMARY KEY,
    tenant_id TEXT,
    role TEXT NOT NULL,
    name TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

-- Deployed component bytes, content-addressed (SHA-256), so every host can load them.
CREATE TABLE components (
    digest TEXT PRIMARY KEY,
    bytes BYTEA NOT NULL,
    size BIGINT NOT NULL,
    created_at BIGINT NOT NULL
);

-- A tenant's kinds: which version new submissions use.
CREATE TABLE kinds (
    tenant_id TEXT NOT NULL,
    name TEXT NOT NULL,
    current_version BIGINT NOT NULL,
    latest_version BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, name)
);

CREATE TABLE kind_versions (
    tenant_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    version BIGINT NOT NULL,
    digest TEXT NOT NULL,
    spec TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, kind, version)
);

-- One row per job: indexed columns for discovery and listing, the machine's state as
-- JSON (`machine`), and a row version for optimistic concurrency.
-- queue: 0 idle (claimed, paused or final), 1 ready, 2 delayed until run_at,
-- 3 blocked on an exclusive lease key (blocked_on; retried at run_at at the latest).
CREATE TABLE jobs (
    seq BIGSERIAL PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    tenant_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    kind_version BIGINT NOT NULL,
    state TEXT NOT NULL,
    queue BIGINT NOT NULL,
    priority BIGINT NOT NULL,
    run_at BIGINT NOT NULL,
    claim_expires_at BIGINT,
    blocked_on TEXT,
    last_activity_at BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    settled_at BIGINT,
    progress BIGINT NOT NULL,
    successor TEXT,
    payload BYTEA NOT NULL,
    idempotency_key TEXT,
    lease_keys TEXT NOT NULL,
    version BIGINT NOT NULL,
    machine TEXT NOT NULL
);
CREATE INDEX jobs_ready ON jobs (priority, seq) WHERE queue = 1;
CREATE INDEX jobs_delayed ON jobs (run_at) WHERE queue >= 2;
CREATE INDEX jobs_blocked ON jobs (blocked_on) WHERE queue = 3;
CREATE INDEX jobs_claimed ON jobs (claim_expires_at) WHERE claim_expires_at IS NOT NULL;
CREATE INDEX jobs_open_silence ON jobs (last_activity_at) WHERE state IN ('pending', 'running');
CREATE INDEX jobs_tenant ON jobs (tenant_id, seq);
CREATE INDEX jobs_tenant_state ON jobs (tenant_id, state, seq);
CREATE INDEX jobs_tenant_kind ON jobs (tenant_id, kind, seq);
CREATE UNIQUE INDEX jobs_idempotency ON jobs (tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL;

-- Steps of each pass; attempts travel in `body` with their step.
CREATE TABLE steps (
    job_id TEXT NOT NULL,
    pass BIGINT NOT NULL,
    position BIGINT NOT NULL,
    key TEXT NOT NULL,
    state TEXT NOT NULL,
    body TEXT NOT NULL,
    output BYTEA,
    PRIMARY KEY (job_id, pass, position)
);

CREATE TABLE history (
    id BIGSERIAL PRIMARY KEY,
    job_id TEXT NOT NULL,
    at BIGINT NOT NULL,
    event TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX history_job ON history (job_id, id);

-- Exclusive lease keys held by a job's claim. token grows on every acquisition.
CREATE TABLE leases (
    key TEXT PRIMARY KEY,
    job_id TEXT NOT NULL,
    holder_fence BIGINT NOT NULL,
    token BIGINT NOT NULL,
    owner TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX leases_job ON leases (job_id);

-- Process-wide leases (the reconciler): one holder at a time across hosts.
CREATE TABLE singletons (
    name TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    fence BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);

-- Effects to run after a settlement committed (notifications, corrected failures).
CREATE TABLE outbox (
    id BIGSERIAL PRIMARY KEY,
    job_id TEXT NOT NULL,
    effect TEXT NOT NULL,
    run_at BIGINT NOT NULL,
    attempts BIGINT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX outbox_due ON outbox (run_at);

-- Operational counters (alerts, sandbox faults) shared by every host.
CREATE TABLE counters (
    name TEXT PRIMARY KEY,
    value BIGINT NOT NULL
);
