-- Hosts of two builds on one database (issue 40). Each live host keeps a row: its build,
-- the storage formats it reads (reads_from..reads_to) and the newest it writes, the
-- contract versions it runs, whether it is draining, and its heartbeat (a host whose
-- row expired is gone, as a claim whose lease lapsed is). The gate is one row: the
-- storage format every host writes, moved only when every live host reads the next.
-- Expand only: two new tables, nothing else touched.
CREATE TABLE hosts (
    id TEXT PRIMARY KEY,
    build TEXT NOT NULL,
    reads_from BIGINT NOT NULL,
    reads_to BIGINT NOT NULL,
    writes BIGINT NOT NULL,
    contracts TEXT NOT NULL,
    draining BIGINT NOT NULL,
    started_at BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE TABLE storage_gate (
    id BIGINT PRIMARY KEY,
    format BIGINT NOT NULL,
    moved_at BIGINT NOT NULL,
    moved_by TEXT NOT NULL
);
