-- The job's queue state is part of its machine now (the core answers it; the `queue`,
-- `run_at` and `blocked_on` columns project it). Rows written before carry it only in
-- their columns: copy it into the machine.
UPDATE jobs SET machine = json_set(machine, '$.queue',
    CASE queue WHEN 0 THEN 'idle' WHEN 1 THEN 'ready' WHEN 2 THEN 'delayed' ELSE 'blocked' END)
    WHERE json_extract(machine, '$.queue') IS NULL;
UPDATE jobs SET machine = json_set(machine, '$.blocked_on', blocked_on)
    WHERE queue = 3 AND blocked_on IS NOT NULL;
