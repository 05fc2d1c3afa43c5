-- Submitting from an application's own transaction (issue 41). `spindle.submit(kind,
-- input, options)` writes a submission row and notifies; the job exists if and only if
-- the caller's transaction commits, and a host admits it through the same path as
-- `POST /v1/jobs` (kind, schema, quotas, fair tags), keeping a refusal's code and
-- violations on the row. The function decides nothing: the tenant comes from the role
-- that logged in (`sql_roles`, which an operator maps with `spindle tenant grant-sql`),
-- never from an argument. It runs as its owner (SECURITY DEFINER) with a fixed search
-- path, so a mapped role needs EXECUTE on it and nothing else of Spindle's schema.
-- A host takes a batch of queued submissions for a while (leased_until), so that hosts
-- admit different ones; one that dies leaves its batch to the next when the lease ends.
-- Expand only: two new tables, a schema and a function.
CREATE TABLE sql_submissions (
    id TEXT COLLATE "C" PRIMARY KEY,
    tenant_id TEXT COLLATE "C" NOT NULL,
    kind TEXT COLLATE "C" NOT NULL,
    input TEXT COLLATE "C" NOT NULL,
    options TEXT COLLATE "C" NOT NULL,
    submitted_by TEXT COLLATE "C" NOT NULL,
    submitted_at BIGINT NOT NULL,
    state TEXT COLLATE "C" NOT NULL,
    job_id TEXT COLLATE "C",
    code TEXT COLLATE "C",
    message TEXT COLLATE "C",
    violations TEXT COLLATE "C",
    settled_at BIGINT,
    leased_until BIGINT
);
CREATE INDEX sql_submissions_queued ON sql_submissions (submitted_at) WHERE state = 'queued';
CREATE INDEX sql_submissions_settled ON sql_submissions (settled_at) WHERE state <> 'queued';
CREATE TABLE sql_roles (
    role TEXT COLLATE "C" PRIMARY KEY,
    tenant_id TEXT COLLATE "C" NOT NULL,
    granted_at BIGINT NOT NULL
);
CREATE SCHEMA IF NOT EXISTS spindle;
DO $$ BEGIN EXECUTE format($f$
CREATE OR REPLACE FUNCTION spindle.submit(kind text, input jsonb, options jsonb DEFAULT '{}')
RETURNS uuid LANGUAGE plpgsql SECURITY DEFINER SET search_path = %I, pg_temp AS $b$
DECLARE
    tenant text;
    submission uuid := gen_random_uuid();
BEGIN
    SELECT r.tenant_id INTO tenant FROM sql_roles r WHERE r.role = session_user;
    IF tenant IS NULL THEN
        RAISE EXCEPTION 'role %% may not submit Spindle jobs', session_user USING ERRCODE = '42501',
            HINT = 'an operator maps the role to a tenant first (spindle tenant grant-sql)';
    END IF;
    IF kind IS NULL OR input IS NULL OR options IS NULL OR jsonb_typeof(options) <> 'object' THEN
        RAISE EXCEPTION 'spindle.submit takes a kind, an input and an options object' USING ERRCODE = '22023';
    END IF;
    INSERT INTO sql_submissions (id, tenant_id, kind, input, options, submitted_by, submitted_at, state)
    VALUES (submission::text, tenant, kind, input::text, options::text, session_user,
            (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, 'queued');
    PERFORM pg_notify('spindle_submissions', '');
    RETURN submission;
END $b$ $f$, current_schema()); END $$;
REVOKE ALL ON FUNCTION spindle.submit(text, jsonb, jsonb) FROM PUBLIC;
