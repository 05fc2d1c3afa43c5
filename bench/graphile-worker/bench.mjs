// The graphile-worker peer of `spindle bench`: the same workload on the same PostgreSQL
// server, printed as one JSON line.
//
//   node bench.mjs --url postgres://postgres@127.0.0.1:5432/postgres \
//     [--jobs 20000] [--concurrency 32] [--rate 200] [--secs 10] [--warmup 2] [--batch 1000]
//
// A fresh database (gw_bench_<pid>) is made through --url and dropped at the end. For
// each configuration — graphile-worker's defaults, then its batching settings (local
// queue of 500, job completions batched; the settings its docs' performance page uses)
// — it measures:
//   live:    the worker runs; N no-op jobs are bulk-enqueued (addJobs, --batch per call)
//            and the clock stops when every job is done and gone from the table;
//   drain:   N jobs are bulk-enqueued with no worker (timed: enqueue rate), then a worker
//            starts and the clock runs until the table is empty (graphile-worker's own
//            performance test measures this);
//   latency: one addJob every 1/rate s (open loop) for warmup + secs seconds; for each
//            job counted, from just before its addJob call to the moment its task handler
//            starts, on one high-resolution clock (payload carries the enqueue time).
// Logging is at warning level (Spindle's harness logs errors only).
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import pg from "pg";
import { Logger, makeWorkerUtils, run, runMigrations } from "graphile-worker";

const { values } = parseArgs({
  options: {
    url: { type: "string" },
    jobs: { type: "string", default: "20000" },
    concurrency: { type: "string", default: "32" },
    rate: { type: "string", default: "200" },
    secs: { type: "string", default: "10" },
    warmup: { type: "string", default: "2" },
    batch: { type: "string", default: "1000" },
  },
});
const adminUrl = values.url ?? process.env.SPINDLE_BENCH_DATABASE_URL;
if (!adminUrl) {
  console.error("usage: node bench.mjs --url postgres://user@host:port/db [--jobs N] [--concurrency C]");
  process.exit(2);
}
const N = Number(values.jobs);
const C = Number(values.concurrency);
const RATE = Number(values.rate);
const SECS = Number(values.secs);
const WARMUP = Number(values.warmup);
const BATCH = Number(values.batch);

const now = () => performance.timeOrigin + performance.now(); // ms, sub-µs resolution
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
const progress = (msg) => process.stderr.write(`graphile-worker: ${msg}\n`);
const logger = new Logger(() => (level, message) => {
  if (level === "error" || level === "warning") console.error(`[${level}] ${message}`);
});

function withDatabase(url, name) {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

async function admin(sql) {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    return await client.query(sql);
  } finally {
    await client.end();
  }
}

const dbName = `gw_bench_${process.pid}`;
const connectionString = withDatabase(adminUrl, dbName);

const CONFIGS = {
  default: { concurrency: C, maxPoolSize: C + 1 },
  batched: {
    concurrency: C,
    maxPoolSize: C + 1,
    preset: { worker: { localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } },
  },
};

/** Starts a worker whose `noop` task calls `onJob(payload)`. */
async function startWorker(config, onJob) {
  return run({
    connectionString,
    logger,
    noHandleSignals: true,
    pollInterval: 2000,
    ...config,
    taskList: {
      noop: async (payload) => {
        onJob(payload);
      },
    },
  });
}

async function enqueue(utils, n) {
  for (let left = n; left > 0; left -= BATCH) {
    const specs = Array.from({ length: Math.min(BATCH, left) }, () => ({ identifier: "noop", payload: {} }));
    await utils.addJobs(specs);
  }
}

/** Waits until `count()` reaches `n` and the jobs table is empty (completions committed). */
async function drained(utils, count, n) {
  const deadline = now() + 60_000 + n;
  while (count() < n) {
    if (now() > deadline) throw new Error(`only ${count()} of ${n} jobs ran`);
    await sleep(1);
  }
  for (;;) {
    const left = await utils.withPgClient((c) => c.query("select count(*)::int as n from graphile_worker._private_jobs"));
    if (left.rows[0].n === 0) return;
    if (now() > deadline) throw new Error(`${left.rows[0].n} jobs left in the table`);
    await sleep(1);
  }
}

async function truncate(utils) {
  await utils.withPgClient((c) => c.query("truncate graphile_worker._private_jobs"));
}

async function live(utils, config) {
  let done = 0;
  const runner = await startWorker(config, () => done++);
  const t0 = now();
  await enqueue(utils, N);
  const submitted = now();
  await drained(utils, () => done, N);
  const total = (now() - t0) / 1000;
  await runner.stop();
  return { submit_secs: (submitted - t0) / 1000, total_secs: total, jobs_per_sec: N / total };
}

async function drain(utils, config) {
  const t0 = now();
  await enqueue(utils, N);
  const enqueueSecs = (now() - t0) / 1000;
  let done = 0;
  const t1 = now();
  const runner = await startWorker(config, () => done++);
  await drained(utils, () => done, N);
  const drainSecs = (now() - t1) / 1000;
  await runner.stop();
  return {
    enqueue_secs: enqueueSecs,
    enqueue_jobs_per_sec: N / enqueueSecs,
    drain_secs: drainSecs,
    drain_jobs_per_sec: N / drainSecs,
    end_to_end_jobs_per_sec: N / (enqueueSecs + drainSecs),
  };
}

function summary(samples) {
  const s = [...samples].sort((a, b) => a - b);
  const rank = (q) => s[Math.min(s.length, Math.max(1, Math.ceil(q * s.length))) - 1];
  return {
    count: s.length,
    mean: s.reduce((a, b) => a + b, 0) / s.length,
    p50: rank(0.5),
    p99: rank(0.99),
    max: s[s.length - 1],
  };
}

async function latency(utils, config) {
  const counted = [];
  let done = 0;
  const runner = await startWorker(config, (payload) => {
    const ms = now() - payload.t;
    if (payload.m) counted.push(ms);
    done++;
  });
  const total = (WARMUP + SECS) * RATE;
  const period = 1000 / RATE;
  const pending = [];
  const t0 = now();
  let windowStart = t0;
  for (let i = 0; i < total; i++) {
    await sleep(t0 + i * period - now());
    if (i === WARMUP * RATE) windowStart = now();
    const payload = { t: now(), m: i >= WARMUP * RATE };
    pending.push(utils.addJob("noop", payload));
  }
  const window = (now() - windowStart) / 1000;
  await Promise.all(pending);
  await drained(utils, () => done, total);
  await runner.stop();
  return { rate: RATE, warmup_secs: WARMUP, secs: SECS, achieved_rate: (SECS * RATE) / window, start_ms: summary(counted) };
}

async function main() {
  await admin(`create database ${dbName}`);
  const out = { peer: "graphile-worker", jobs: N, concurrency: C };
  try {
    await runMigrations({ connectionString, logger });
    const utils = await makeWorkerUtils({ connectionString, logger });
    try {
      const server = await utils.withPgClient((c) =>
        c.query(
          "select current_setting('server_version') as version, current_setting('synchronous_commit') as sc, current_setting('fsync') as fsync",
        ),
      );
      const r = server.rows[0];
      out.server = `PostgreSQL ${r.version}`;
      out.durability = `synchronous_commit=${r.sc}, fsync=${r.fsync}`;
      out.version = JSON.parse(
        await import("node:fs").then((fs) => fs.readFileSync(new URL("./node_modules/graphile-worker/package.json", import.meta.url))),
      ).version;
      out.node = process.version;
      for (const [name, config] of Object.entries(CONFIGS)) {
        const { preset, ...plain } = config;
        const result = { settings: { ...plain, ...(preset?.worker ?? {}) } };
        progress(`${name}: live, ${N} jobs`);
        result.live = await live(utils, config);
        await truncate(utils);
        progress(`${name}: enqueue then drain, ${N} jobs`);
        result.drain = await drain(utils, config);
        await truncate(utils);
        progress(`${name}: latency at ${RATE}/s for ${SECS} s after ${WARMUP} s`);
        result.latency = await latency(utils, config);
        await truncate(utils);
        progress(
          `${name}: live ${result.live.jobs_per_sec.toFixed(0)} jobs/s, drain ${result.drain.drain_jobs_per_sec.toFixed(0)} jobs/s, ` +
            `p50 ${result.latency.start_ms.p50.toFixed(2)} ms, p99 ${result.latency.start_ms.p99.toFixed(2)} ms`,
        );
        out[name] = result;
      }
    } finally {
      await utils.release();
    }
  } finally {
    // A pool's idle client may still be closing: the forced drop terminates it, which
    // that client reports as an error (57P01) that nothing is left to handle.
    dropping = true;
    await admin(`drop database if exists ${dbName} with (force)`);
  }
  console.log(JSON.stringify(out));
}

let dropping = false;
process.on("uncaughtException", (e) => {
  if (dropping && e?.code === "57P01") return;
  console.error(e);
  process.exit(1);
});

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
