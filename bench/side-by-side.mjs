// Prints graphile-worker's and Spindle's figures side by side, with the ratio
// Spindle / graphile-worker, against its defaults and against its batching mode (the
// figure its own performance page publishes). Usage: node side-by-side.mjs GW.json PG.json [SQLITE.json]
import { readFileSync } from "node:fs";

const [gwPath, pgPath, sqlitePath] = process.argv.slice(2);
const read = (p) => (p ? JSON.parse(readFileSync(p, "utf8")) : null);
const gw = read(gwPath);
const pg = read(pgPath);
const sqlite = read(sqlitePath);

const n = (v, digits = 0) => (v == null ? "—" : v.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits }));
const ratio = (a, b) => (a == null || b == null || b === 0 ? "—" : `${(a / b).toFixed(2)}×`);

const rows = [
  ["jobs/s, bulk submission → all done", (g) => g.live.jobs_per_sec, (s) => s.throughput1?.live.jobs_per_sec, 0],
  ["jobs/s, enqueue only", (g) => g.drain.enqueue_jobs_per_sec, (s) => s.throughput1?.drain.enqueue_jobs_per_sec, 0],
  ["jobs/s, drain (enqueued first)", (g) => g.drain.drain_jobs_per_sec, (s) => s.throughput1?.drain.drain_jobs_per_sec, 0],
  // A lean kind's one-step jobs (the job row alone: no step or history rows).
  ["jobs/s, lean kind: bulk submission → all done", (g) => g.live.jobs_per_sec, (s) => s.throughput1_lean?.live.jobs_per_sec, 0],
  ["jobs/s, lean kind: drain (enqueued first)", (g) => g.drain.drain_jobs_per_sec, (s) => s.throughput1_lean?.drain.drain_jobs_per_sec, 0],
  ["enqueue→start p50, ms", (g) => g.latency.start_ms.p50, (s) => s.latency?.start_ms.p50, 2],
  ["enqueue→start p99, ms", (g) => g.latency.start_ms.p99, (s) => s.latency?.start_ms.p99, 2],
  // graphile-worker's clock stops in its task handler, after its claim committed;
  // Spindle's `started_at` is taken as its claim begins. Spindle's enqueue→settled
  // (claim, step and outcome all committed) bounds its handler start from above.
  ["enqueue→settled p50, ms (Spindle)", () => null, (s) => s.latency?.settled_ms.p50, 2],
  ["enqueue→settled p99, ms (Spindle)", () => null, (s) => s.latency?.settled_ms.p99, 2],
];

const head = ["", "graphile-worker", "graphile-worker", "Spindle", "Spindle ÷ gw", "Spindle ÷ gw", "Spindle"];
const sub = ["", "defaults", "batching", "PostgreSQL", "(defaults)", "(batching)", "SQLite"];
const table = [head, sub];
for (const [label, g, s, digits] of rows) {
  const gd = gw ? g(gw.default) : null;
  const gb = gw ? g(gw.batched) : null;
  const sp = pg ? s(pg) : null;
  const lower = label.includes(", ms");
  // For latencies a ratio below 1 is better; for rates above 1 is.
  const better = lower ? " (lower is better)" : "";
  table.push([label, n(gd, digits), n(gb, digits), n(sp, digits), ratio(sp, gd) + better, ratio(sp, gb) + better, n(sqlite ? s(sqlite) : null, digits)]);
}
const widths = head.map((_, i) => Math.max(...table.map((r) => String(r[i]).length)));
const line = (r) => r.map((c, i) => (i === 0 ? String(c).padEnd(widths[i]) : String(c).padStart(widths[i]))).join("  ");
console.log(`Same workload, same server: ${gw?.server ?? pg?.server} (${gw?.durability ?? pg?.durability})`);
console.log(`${gw?.jobs ?? pg?.settings.jobs} no-op jobs, concurrency ${gw?.concurrency ?? pg?.settings.concurrency}; graphile-worker ${gw?.version} on Node ${gw?.node}`);
console.log("");
for (const r of table) console.log(line(r));
if (sqlite) console.log(`\nSQLite: ${sqlite.server}, ${sqlite.durability}`);
const full = sqlite?.throughput1?.live_full;
if (full) console.log(`SQLite one-step jobs at synchronous=FULL (a commit survives an OS crash too): ${n(full.jobs_per_sec)} jobs/s`);
const scale = pg?.scale_out?.runs;
if (scale?.length) {
  console.log(`\nScale-out on PostgreSQL (${pg.scale_out.jobs} jobs, concurrency ${pg.scale_out.concurrency_per_host} per host):`);
  for (const r of scale) console.log(`  ${r.hosts} host(s): ${n(r.jobs_per_sec)} jobs/s (${r.vs_one_host.toFixed(2)}× one host)`);
}
