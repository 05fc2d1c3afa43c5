-- The job's queue state is part of its machine now (the core answers it; the `queue`,
-- `run_at` and `blocked_on` columns project it). Rows written before carry it only in
-- their columns: copy it into the machine.
UPDATE jobs SET machine = (machine::jsonb || jsonb_build_object('queue',
    CASE queue WHEN 0 THEN 'idle' WHEN 1 THEN 'ready' WHEN 2 THEN 'delayed' ELSE 'blocked' END))::text
    WHERE NOT (machine::jsonb ? 'queue');
UPDATE jobs SET machine = (machine::jsonb || jsonb_build_object('blocked_on', blocked_on))::text
    WHERE queue = 3 AND blocked_on IS NOT NULL;
