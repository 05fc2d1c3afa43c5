-- A signal may carry its sender's idempotency key: a retried POST finds the signal it
-- already delivered instead of delivering it again. Expand only: a nullable column (no
-- table rewrite) and a partial index over the rows that have one (none yet, so it is
-- built over an empty set), so older hosts keep running beside it.
ALTER TABLE signals ADD COLUMN idempotency_key TEXT COLLATE "C";
CREATE UNIQUE INDEX signals_key ON signals (job_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
