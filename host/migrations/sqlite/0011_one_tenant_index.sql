-- A tenant's jobs are listed through `jobs_tenant_state` alone: a listing of every state
-- merges one ordered scan per state. `jobs_tenant` was one more entry on every job
-- inserted.
DROP INDEX IF EXISTS jobs_tenant;
