-- A job row is rewritten when it is claimed and again when it settles. Both rewrites
-- change indexed columns, so neither is heap-only, but with room left on the page the new
-- version stays on it: no second page dirtied, and none of the row locks PostgreSQL logs
-- before moving a version to another page. A step row is rewritten at the same two
-- moments; with half its page free, both rewrites stay heap-only (no new primary-key
-- entry). Pages written before this keep their fill until rewritten.
ALTER TABLE jobs SET (fillfactor = 60);
ALTER TABLE steps SET (fillfactor = 50);
