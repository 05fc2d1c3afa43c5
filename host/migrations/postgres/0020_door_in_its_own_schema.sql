-- The SQL door, closed to what a caller plants (issue 53; CVE-2018-1058's guidance).
--
-- 0019's `spindle.submit` ran as its owner with `search_path = <the migration's schema>,
-- pg_temp` and unqualified operators: a role that may create in that schema (on
-- PostgreSQL 15, `public` belongs to the database's owner) could define an operator the
-- function then preferred, and run it with the owner's rights. Under a database user
-- named like the schema (`postgres://spindle@…/spindle`) its search path pointed at the
-- new `spindle` schema while its tables were in `public`, and every call failed.
--
-- Now:
-- - the schema `spindle` must belong to the role Spindle migrates as, and nobody else
--   may create in it: the door's tables move into it (their owner alone could change or
--   drop them there; in `public` the schema's owner could);
-- - the function sets `search_path = pg_catalog, pg_temp` and names every table,
--   function, operator and type it uses by its schema;
-- - its notification carries a tag made with a key only the function's owner reads
--   (`spindle.door_key`), so a host wakes only for what the door wrote: any role may
--   `NOTIFY spindle_submissions`, none can forge the tag.
--
-- Hosts of the previous build read the tables unqualified: a view in the tables' old
-- schema keeps their statements working (a simple view, so they update through it),
-- until every host is of this build. This build names the tables in `spindle` only.
-- Expand only: a brief lock to move two small tables.
DO $$
DECLARE
    owner_name text;
    grantee_name text;
BEGIN
    SELECT pg_catalog.pg_get_userbyid(n.nspowner) INTO owner_name
    FROM pg_catalog.pg_namespace n WHERE n.nspname OPERATOR(pg_catalog.=) 'spindle';
    IF owner_name IS NULL THEN
        EXECUTE 'CREATE SCHEMA spindle';
    ELSIF owner_name OPERATOR(pg_catalog.<>) current_user THEN
        RAISE EXCEPTION 'schema spindle belongs to role %, not to %, the role Spindle migrates as', owner_name, current_user
            USING HINT = pg_catalog.format('Spindle''s SQL door needs a schema only Spindle creates in: ALTER SCHEMA spindle OWNER TO %I', current_user);
    END IF;
    FOR grantee_name IN
        SELECT CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END
        FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) a
        WHERE n.nspname OPERATOR(pg_catalog.=) 'spindle' AND a.privilege_type OPERATOR(pg_catalog.=) 'CREATE'
          AND a.grantee OPERATOR(pg_catalog.<>) n.nspowner
    LOOP
        EXECUTE pg_catalog.format('REVOKE CREATE ON SCHEMA spindle FROM %s', grantee_name);
    END LOOP;
END $$;
DO $$
DECLARE
    moved text;
    was text;
BEGIN
    FOREACH moved IN ARRAY ARRAY['sql_submissions', 'sql_roles'] LOOP
        SELECT n.nspname INTO was FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
        WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass(moved)::pg_catalog.oid AND c.relkind OPERATOR(pg_catalog.=) 'r';
        IF was IS NOT NULL AND was OPERATOR(pg_catalog.<>) 'spindle' THEN
            EXECUTE pg_catalog.format('ALTER TABLE %I.%I SET SCHEMA spindle', was, moved);
            EXECUTE pg_catalog.format('CREATE VIEW %I.%I AS SELECT * FROM spindle.%I', was, moved, moved);
        END IF;
    END LOOP;
END $$;
CREATE TABLE spindle.door_key (
    only_row BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (only_row),
    key TEXT COLLATE "C" NOT NULL
);
INSERT INTO spindle.door_key (key) VALUES (pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(
    pg_catalog.concat(pg_catalog.gen_random_uuid(), pg_catalog.gen_random_uuid(), pg_catalog.clock_timestamp()), 'UTF8')), 'hex'));
REVOKE ALL ON spindle.door_key, spindle.sql_submissions, spindle.sql_roles FROM PUBLIC;
CREATE OR REPLACE FUNCTION spindle.submit(kind pg_catalog.text, input pg_catalog.jsonb, options pg_catalog.jsonb DEFAULT '{}')
RETURNS pg_catalog.uuid LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    tenant pg_catalog.text;
    submission pg_catalog.uuid := pg_catalog.gen_random_uuid();
    at_micros pg_catalog.int8 := pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) OPERATOR(pg_catalog.*) 1000000::pg_catalog.float8;
    signed pg_catalog.text;
BEGIN
    SELECT r.tenant_id INTO tenant FROM spindle.sql_roles r WHERE r.role OPERATOR(pg_catalog.=) session_user::pg_catalog.text;
    IF tenant IS NULL THEN
        RAISE EXCEPTION 'role % may not submit Spindle jobs', session_user USING ERRCODE = '42501',
            HINT = 'an operator maps the role to a tenant first (spindle tenant grant-sql)';
    END IF;
    IF kind IS NULL OR input IS NULL OR options IS NULL
        OR pg_catalog.jsonb_typeof(options) OPERATOR(pg_catalog.<>) 'object' THEN
        RAISE EXCEPTION 'spindle.submit takes a kind, an input and an options object' USING ERRCODE = '22023';
    END IF;
    INSERT INTO spindle.sql_submissions (id, tenant_id, kind, input, options, submitted_by, submitted_at, state)
    VALUES (submission::pg_catalog.text, tenant, kind, input::pg_catalog.text, options::pg_catalog.text,
            session_user::pg_catalog.text, at_micros, 'queued');
    signed := pg_catalog.concat(submission, '.', at_micros);
    PERFORM pg_catalog.pg_notify('spindle_submissions', pg_catalog.concat(signed, '.', pg_catalog.encode(pg_catalog.sha256(
        pg_catalog.convert_to(pg_catalog.concat(k.key, '.', signed), 'UTF8')), 'hex')))
    FROM spindle.door_key k;
    RETURN submission;
END $$;
REVOKE ALL ON FUNCTION spindle.submit(pg_catalog.text, pg_catalog.jsonb, pg_catalog.jsonb) FROM PUBLIC;
