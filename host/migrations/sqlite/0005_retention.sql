-- Finished jobs are pruned after their retention: found through their settlement time,
-- oldest first. A tenant may keep its jobs for a time of its own (NULL: the host's).
CREATE INDEX jobs_settled ON jobs (settled_at) WHERE settled_at IS NOT NULL;
ALTER TABLE tenants ADD COLUMN retention_secs INTEGER;
