-- Outbound requests from steps: what each kind version's deployment allows, declares
-- and sets (JSON), what each tenant allows (a JSON list of rules; NULL: nothing), the
-- tenants' secrets (sealed with the host's key: nonce and ciphertext, hex), and the
-- record of every request a step attempt made.
ALTER TABLE kind_versions ADD COLUMN deployment TEXT NOT NULL DEFAULT '{}';
ALTER TABLE tenants ADD COLUMN outbound TEXT;
CREATE TABLE secrets (
    tenant_id TEXT NOT NULL,
    name TEXT NOT NULL,
    sealed TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, name)
);
CREATE TABLE outbound_calls (
    job_id TEXT NOT NULL,
    step TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    at INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (job_id, at, step, attempt, seq)
);
