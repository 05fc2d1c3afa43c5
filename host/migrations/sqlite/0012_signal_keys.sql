-- A signal may carry its sender's idempotency key: a retried POST finds the signal it
-- already delivered instead of delivering it again. Expand only: a nullable column and a
-- partial index over the rows that have one (none yet), so older hosts keep running.
ALTER TABLE signals ADD COLUMN idempotency_key TEXT;
CREATE UNIQUE INDEX signals_key ON signals (job_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
