-- Deployments (issue 16): a component is checked at once and compiled in the
-- background; the row says how far it got, for every host to answer from.
CREATE TABLE deployments (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    digest TEXT NOT NULL,
    size BIGINT NOT NULL,
    state TEXT NOT NULL,
    version BIGINT,
    error_code TEXT,
    error_message TEXT,
    created_at BIGINT NOT NULL,
    finished_at BIGINT
);
CREATE INDEX deployments_kind ON deployments (tenant_id, kind, created_at);
