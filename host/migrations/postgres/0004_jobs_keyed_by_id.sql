-- Jobs are found by id, or by tenant (and state) in sequence order, never by sequence
-- alone. Keyed by id, every job write maintains one unique index instead of two (no job
-- row update is heap-only: each one adds an entry to every index on the table).
ALTER TABLE jobs DROP CONSTRAINT jobs_pkey, DROP CONSTRAINT jobs_id_key, ADD PRIMARY KEY (id);
