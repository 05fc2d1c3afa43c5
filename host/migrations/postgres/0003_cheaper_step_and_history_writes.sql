-- History is only read per job, in order: keyed by (job_id, id) it maintains one index per
-- event instead of two (a one-step job writes four events).
ALTER TABLE history DROP CONSTRAINT history_pkey;
DROP INDEX history_job;
ALTER TABLE history ADD PRIMARY KEY (job_id, id);
-- A step row is rewritten when its attempt starts and again when it settles. Room left on
-- each page lets those rewrites stay on the page as heap-only tuples, with no new entry in
-- the primary key.
ALTER TABLE steps SET (fillfactor = 70);
