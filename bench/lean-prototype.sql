-- A prototype of a lean job record on PostgreSQL (issue 44), measured at SQL level:
-- WAL bytes and statement time per one-step job when a batch's submission, claim and
-- settlement are one statement each. Not Spindle's schema: a starting point for it.
--
--   psql -h 127.0.0.1 -p 55432 -U postgres -f bench/lean-prototype.sql
--
-- Creates and leaves the database `lean_prototype`.
DROP DATABASE IF EXISTS lean_prototype;
CREATE DATABASE lean_prototype;
\c lean_prototype

-- Jobs not yet settled: inserted at submission, deleted by their settlement.
CREATE TABLE lean_queue (
  seq bigserial PRIMARY KEY,
  id uuid NOT NULL,
  tenant text COLLATE "C" NOT NULL,
  kind text COLLATE "C" NOT NULL,
  version int NOT NULL,
  priority smallint NOT NULL DEFAULT 0,
  run_at timestamptz NOT NULL,
  attempt int NOT NULL DEFAULT 0,
  fence bigint NOT NULL DEFAULT 0,
  claimed_by text COLLATE "C",
  claim_expires_at timestamptz,
  input bytea NOT NULL,
  cursor bytea
) WITH (fillfactor = 70);
-- The one index the claim reads; a claimed row leaves it.
CREATE INDEX lean_ready ON lean_queue (priority, run_at, seq) WHERE claimed_by IS NULL;

-- Settled jobs, compact, insert-only: listings and retention by seq.
CREATE TABLE lean_settled (
  seq bigint PRIMARY KEY,
  id uuid NOT NULL,
  tenant text COLLATE "C" NOT NULL,
  kind text COLLATE "C" NOT NULL,
  version int NOT NULL,
  state text COLLATE "C" NOT NULL,
  attempts int NOT NULL,
  submitted_at timestamptz NOT NULL,
  started_at timestamptz,
  settled_at timestamptz NOT NULL,
  output bytea,
  failure bytea
);

-- One round: n jobs submitted, claimed and settled, a statement each.
CREATE FUNCTION lean_round(n int, OUT wal_submit numeric, OUT wal_claim numeric, OUT wal_settle numeric,
                           OUT s_submit float8, OUT s_claim float8, OUT s_settle float8) AS $f$
DECLARE a pg_lsn; t timestamptz;
BEGIN
  a := pg_current_wal_insert_lsn(); t := clock_timestamp();
  INSERT INTO lean_queue (id, tenant, kind, version, run_at, input)
    SELECT gen_random_uuid(), 'default', 'noop', 1, now(), '\x7b7d'::bytea FROM generate_series(1, n);
  wal_submit := pg_current_wal_insert_lsn() - a; s_submit := extract(epoch FROM clock_timestamp() - t);

  a := pg_current_wal_insert_lsn(); t := clock_timestamp();
  WITH c AS (
    SELECT seq FROM lean_queue WHERE claimed_by IS NULL ORDER BY priority, run_at, seq LIMIT n FOR UPDATE SKIP LOCKED
  )
  UPDATE lean_queue q SET claimed_by = 'host-1', claim_expires_at = now() + interval '30 s',
         attempt = attempt + 1, fence = fence + 1
    FROM c WHERE q.seq = c.seq;
  wal_claim := pg_current_wal_insert_lsn() - a; s_claim := extract(epoch FROM clock_timestamp() - t);

  a := pg_current_wal_insert_lsn(); t := clock_timestamp();
  WITH d AS (
    DELETE FROM lean_queue WHERE claimed_by = 'host-1' AND fence = 1
    RETURNING seq, id, tenant, kind, version, attempt, run_at
  )
  INSERT INTO lean_settled (seq, id, tenant, kind, version, state, attempts, submitted_at, started_at, settled_at, output)
    SELECT seq, id, tenant, kind, version, 'succeeded', attempt, run_at, now(), now(), '\x7b7d'::bytea FROM d;
  wal_settle := pg_current_wal_insert_lsn() - a; s_settle := extract(epoch FROM clock_timestamp() - t);
END $f$ LANGUAGE plpgsql;

-- Ten rounds of 1,000 jobs; figures per job.
SELECT round(avg(r.wal_submit) / 1000) AS wal_submit_bytes,
       round(avg(r.wal_claim) / 1000) AS wal_claim_bytes,
       round(avg(r.wal_settle) / 1000) AS wal_settle_bytes,
       round((avg(r.s_submit) * 1e3)::numeric, 1) AS submit_us,
       round((avg(r.s_claim) * 1e3)::numeric, 1) AS claim_us,
       round((avg(r.s_settle) * 1e3)::numeric, 1) AS settle_us
FROM generate_series(1, 10) g, LATERAL lean_round(1000 + 0 * g) r;  -- g: evaluated per round
SELECT count(*) AS settled, pg_size_pretty(pg_total_relation_size('lean_settled')) AS settled_size FROM lean_settled;
