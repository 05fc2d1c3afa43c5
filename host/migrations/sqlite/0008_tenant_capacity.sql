-- Tenant capacity (issue 15).
--
-- Fair claiming: each job carries a virtual-time tag assigned when it is inserted
-- (start-time fair queueing by tenant weight); claims take ready jobs by priority, then
-- tag, then sequence, so tenants share a priority layer by weight through the one index.
ALTER TABLE jobs ADD COLUMN fair_tag INTEGER NOT NULL DEFAULT 0;
DROP INDEX IF EXISTS jobs_ready;
CREATE INDEX jobs_ready ON jobs (priority, fair_tag, seq) WHERE queue = 1;
-- Jobs waiting on a key or a running limit's gate, in the order a wake takes them: a
-- gate with a tenant's whole backlog behind it wakes its best few without a sort.
DROP INDEX IF EXISTS jobs_blocked;
CREATE INDEX jobs_blocked ON jobs (blocked_on, priority, fair_tag, seq) WHERE queue = 3;

-- Each tenant's last tag per priority layer: its next job starts after it.
CREATE TABLE fair_tags (
    tenant_id TEXT NOT NULL,
    priority INTEGER NOT NULL,
    last_tag INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, priority)
);

-- What the operator set for a tenant; a NULL is "no limit". Claims lock the row of a
-- tenant with a running limit, so hosts sharing the database admit one at a time.
CREATE TABLE tenant_limits (
    tenant_id TEXT PRIMARY KEY,
    weight INTEGER NOT NULL DEFAULT 1,
    max_running INTEGER,
    max_queued INTEGER,
    rate_per_sec INTEGER,
    rate_burst INTEGER,
    max_deployed_bytes INTEGER,
    max_memory_bytes INTEGER,
    max_step_timeout_ms INTEGER,
    max_fuel INTEGER,
    updated_at INTEGER NOT NULL
);

-- A tenant's submission gate: the rate limiter's theoretical arrival time (GCRA), and
-- the row submissions lock so that concurrent ones count the queue one at a time.
CREATE TABLE tenant_admission (
    tenant_id TEXT PRIMARY KEY,
    rate_tat INTEGER NOT NULL
);

-- A kind's running limit, set by its deployment (per tenant and kind, latest deploy wins).
CREATE TABLE kind_limits (
    tenant_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    max_running INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, kind)
);

-- Usage, per tenant and kind, added to by every host.
CREATE TABLE usage (
    tenant_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    steps INTEGER NOT NULL DEFAULT 0,
    faults INTEGER NOT NULL DEFAULT 0,
    sandbox_micros INTEGER NOT NULL DEFAULT 0,
    wall_micros INTEGER NOT NULL DEFAULT 0,
    outbound_requests INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, kind)
);
