// The TypeScript client against a real `spindle serve` (started by the Rust test
// `clients::the_typescript_client_…`, which deploys `scripted`, `workflow` and
// `typed-noop` for tenant `acme` and passes SPINDLE_URL, SPINDLE_TOKEN and
// SPINDLE_OPERATOR_TOKEN).

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { NEVER, DEFAULT_RETRY, Refused, SpindleClient, retryDelay, type JobEvent, type LogLineView } from "../src/index.js";

const URL = process.env.SPINDLE_URL ?? "";
const TOKEN = process.env.SPINDLE_TOKEN ?? "";
const OPERATOR = process.env.SPINDLE_OPERATOR_TOKEN ?? "";
const PATIENCE = 120;
const TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

async function refusedBy(promise: Promise<unknown>): Promise<Refused> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof Refused, `a Refused, not ${String(error)}`);
    return error;
  }
  assert.fail("the host refused nothing");
}

test("only answers that wrote nothing are tried again, after Retry-After", () => {
  for (const status of [400, 401, 404, 409, 422, 500, 502]) {
    assert.equal(retryDelay(DEFAULT_RETRY, 1, status), undefined);
  }
  assert.equal(retryDelay(DEFAULT_RETRY, 1, 429, 3), 3000);
  assert.equal(retryDelay(DEFAULT_RETRY, 1, 429, 300), 30_000);
  assert.equal(retryDelay(DEFAULT_RETRY, 3, 503), 800);
  assert.equal(retryDelay(DEFAULT_RETRY, 5, 503), undefined);
  assert.equal(retryDelay(NEVER, 1, 429, 1), undefined);
});

describe("against a host", { skip: URL === "" ? "needs a host: run through `cargo xtask test`" : false }, () => {
  const client = new SpindleClient(URL, TOKEN);

  test("submits once per key, waits, lists, and follows logs and events", async () => {
    const first = await client.submit("scripted", { first: "more:3" }, {
      idempotencyKey: "ts-order-42",
      traceparent: TRACEPARENT,
      priority: "critical",
    });
    assert.equal(first.created, true);
    const again = await client.submit("scripted", { first: "more:3" }, { idempotencyKey: "ts-order-42" });
    assert.equal(again.created, false);
    assert.equal(again.job.id, first.job.id);
    const id = first.job.id;
    assert.equal((await client.wait(id, PATIENCE)).state, "succeeded");
    const events: JobEvent[] = await collect(client.events(id));
    const history = events.flatMap((e) => (e.type === "history" ? [e.entry.event] : []));
    assert.equal(history[0], "submitted");
    assert.ok(history.includes("succeeded"), history.join(","));
    const states = events.flatMap((e) => (e.type === "job" ? [e.live.state] : []));
    assert.equal(states.at(-1), "succeeded");
    const lines: LogLineView[] = await collect(client.followLogs(id));
    const kept = (await client.logs(id)).lines;
    assert.ok(kept.length > 0);
    assert.deepEqual(lines, kept);
    const whole = await client.job(id);
    assert.equal(whole.idempotency_key, "ts-order-42");
    assert.equal(whole.priority, "critical");
    const page = await client.list({ kind: "scripted", q: "ts-order-42" });
    assert.deepEqual(page.jobs.map((j) => j.id), [id]);
  });

  test("signals, cancels, and refusals carry the API's code and violations", async () => {
    const waiting = (await client.submit("workflow", { signal: "shipped", timeout_secs: 3600 })).job;
    await client.signal(waiting.id, "shipped", { carrier: "post" }, { idempotencyKey: "ts-ship" });
    await client.signal(waiting.id, "shipped", { carrier: "post" }, { idempotencyKey: "ts-ship" });
    const done = await client.wait(waiting.id, PATIENCE);
    assert.equal(done.state, "succeeded");
    assert.deepEqual((done.steps[0]?.output as { signals: unknown[] }).signals, [{ carrier: "post" }]);

    const stuck = (await client.submit("scripted", { first: "wait-for-stop" })).job;
    await client.cancel(stuck.id, "changed our mind");
    assert.equal((await client.wait(stuck.id, PATIENCE)).state, "cancelled");
    const illegal = await refusedBy(client.cancel(stuck.id, "again"));
    assert.equal(illegal.status, 409);
    assert.equal(illegal.code, "illegal-transition");
    assert.equal(illegal.state, "cancelled");
    const invalid = await refusedBy(client.submit("typed-noop", { account: "" }));
    assert.equal(invalid.status, 422);
    assert.equal(invalid.code, "invalid-input");
    assert.ok(invalid.violations.some((v) => v.pointer === "/account"));
    assert.equal((await refusedBy(client.submit("no-such-kind", {}))).code, "unknown-kind");
    assert.equal((await refusedBy(client.job("00000000-0000-0000-0000-000000000000"))).code, "not-found");
    assert.equal((await refusedBy(client.submission("00000000-0000-0000-0000-000000000000"))).code, "not-found");
  });

  test("a quota is tried again after Retry-After", async () => {
    const operator = new SpindleClient(URL, OPERATOR);
    await operator.call("PUT", "/v1/tenants/acme/limits", { rate_per_sec: 1, rate_burst: 1 });
    try {
      const impatient = new SpindleClient(URL, TOKEN, { retry: NEVER });
      await impatient.submit("scripted", {});
      const quota = await refusedBy(impatient.submit("scripted", {}));
      assert.equal(quota.status, 429);
      assert.equal(quota.code, "quota-exceeded");
      assert.ok((quota.retryAfter ?? 0) >= 1);
      assert.equal((await client.submit("scripted", {})).created, true);
    } finally {
      await operator.call("PUT", "/v1/tenants/acme/limits", {});
    }
  });
});
