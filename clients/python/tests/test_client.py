"""The Python clients against a real ``spindle serve`` (started by the Rust test
``clients::the_python_client_…``, which deploys ``scripted``, ``workflow`` and
``typed-noop`` for tenant ``acme`` and passes the host's address and tokens in
SPINDLE_URL, SPINDLE_TOKEN and SPINDLE_OPERATOR_TOKEN)."""

import asyncio
import json
import os
import pathlib
import sys
import unittest
import urllib.request

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import spindle_client  # noqa: E402
from spindle_client import NEVER, AsyncClient, Client, Retry  # noqa: E402

URL = os.environ.get("SPINDLE_URL", "")
TOKEN = os.environ.get("SPINDLE_TOKEN", "")
OPERATOR = os.environ.get("SPINDLE_OPERATOR_TOKEN", "")
PATIENCE = 120.0
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


class RetryPolicy(unittest.TestCase):
    def test_only_answers_that_wrote_nothing_are_tried_again_after_retry_after(self):
        retry = Retry()
        for status in (400, 401, 404, 409, 422, 500, 502):
            self.assertIsNone(retry.delay(1, status, None), status)
        self.assertEqual(retry.delay(1, 429, 3.0), 3.0)
        self.assertEqual(retry.delay(1, 429, 300.0), 30.0)
        self.assertEqual(retry.delay(3, 503, None), 0.8)
        self.assertIsNone(retry.delay(5, 503, None))
        self.assertIsNone(NEVER.delay(1, 429, 1.0))


@unittest.skipUnless(URL, "needs a host: run through `cargo xtask test`")
class AgainstAHost(unittest.TestCase):
    def setUp(self):
        self.client = Client(URL, TOKEN)

    def tearDown(self):
        self.client.close()

    def test_sync_submits_once_per_key_waits_lists_and_follows(self):
        client = self.client
        first = client.submit(
            "scripted", {"first": "more:3"}, idempotency_key="py-order-42", traceparent=TRACEPARENT, priority="critical"
        )
        self.assertTrue(first.created)
        again = client.submit("scripted", {"first": "more:3"}, idempotency_key="py-order-42")
        self.assertFalse(again.created)
        self.assertEqual(again.job["id"], first.job["id"])
        job_id = first.job["id"]
        done = client.wait(job_id, timeout=PATIENCE)
        self.assertEqual(done["state"], "succeeded")
        events = list(client.events(job_id))
        history = [e.data["event"] for e in events if e.name == "history"]
        self.assertEqual(history[0], "submitted")
        self.assertIn("succeeded", history)
        self.assertEqual([e.data["state"] for e in events if e.name == "job"][-1], "succeeded")
        kept = client.logs(job_id)["lines"]
        self.assertTrue(kept)
        self.assertEqual(list(client.follow_logs(job_id)), kept)
        whole = client.job(job_id)
        self.assertEqual(whole["idempotency_key"], "py-order-42")
        self.assertEqual(whole["priority"], "critical")
        page = client.list(kind="scripted", q="py-order-42")
        self.assertEqual([j["id"] for j in page["jobs"]], [job_id])

    def test_sync_signals_and_cancels_and_refusals_are_typed(self):
        client = self.client
        waiting = client.submit("workflow", {"signal": "shipped", "timeout_secs": 3600}).job
        client.signal(waiting["id"], "shipped", {"carrier": "post"}, idempotency_key="py-ship")
        client.signal(waiting["id"], "shipped", {"carrier": "post"}, idempotency_key="py-ship")
        done = client.wait(waiting["id"], timeout=PATIENCE)
        self.assertEqual(done["state"], "succeeded")
        self.assertEqual(done["steps"][0]["output"]["signals"], [{"carrier": "post"}])

        stuck = client.submit("scripted", {"first": "wait-for-stop"}).job
        client.cancel(stuck["id"], "changed our mind")
        self.assertEqual(client.wait(stuck["id"], timeout=PATIENCE)["state"], "cancelled")
        with self.assertRaises(spindle_client.IllegalTransition) as refused:
            client.cancel(stuck["id"], "again")
        self.assertEqual((refused.exception.status, refused.exception.state), (409, "cancelled"))
        with self.assertRaises(spindle_client.InvalidInput) as invalid:
            client.submit("typed-noop", {"account": ""})
        self.assertEqual(invalid.exception.status, 422)
        self.assertIn("/account", [v.pointer for v in invalid.exception.violations])
        with self.assertRaises(spindle_client.UnknownKind):
            client.submit("no-such-kind", {})
        with self.assertRaises(spindle_client.NotFound) as missing:
            client.job("00000000-0000-0000-0000-000000000000")
        self.assertEqual(missing.exception.code, "not-found")
        with self.assertRaises(spindle_client.NotFound):
            client.submission("00000000-0000-0000-0000-000000000000")

    def test_sync_a_quota_is_tried_again_after_retry_after(self):
        with Client(URL, OPERATOR) as operator:
            operator.call("PUT", "/v1/tenants/acme/limits", {"rate_per_sec": 1, "rate_burst": 1})
            try:
                with Client(URL, TOKEN, retry=NEVER) as impatient:
                    impatient.submit("scripted", {})
                    with self.assertRaises(spindle_client.QuotaExceeded) as refused:
                        impatient.submit("scripted", {})
                    self.assertEqual(refused.exception.status, 429)
                    self.assertGreaterEqual(refused.exception.retry_after, 1.0)
                self.assertTrue(self.client.submit("scripted", {}).created)
            finally:
                operator.call("PUT", "/v1/tenants/acme/limits", {})

    def test_async_does_the_same_awaited(self):
        async def run():
            async with AsyncClient(URL, TOKEN) as client:
                first = await client.submit("scripted", {}, idempotency_key="py-async-1", traceparent=TRACEPARENT)
                again = await client.submit("scripted", {}, idempotency_key="py-async-1")
                self.assertTrue(first.created)
                self.assertFalse(again.created)
                job_id = first.job["id"]
                self.assertEqual((await client.wait(job_id, timeout=PATIENCE))["state"], "succeeded")
                events = [e async for e in client.events(job_id)]
                self.assertEqual(events[0].data["event"], "submitted")
                lines = [line async for line in client.follow_logs(job_id)]
                self.assertEqual(lines, (await client.logs(job_id))["lines"])
                self.assertEqual((await client.job(job_id))["id"], job_id)
                page = await client.list(q="py-async-1")
                self.assertEqual([j["id"] for j in page["jobs"]], [job_id])
                waiting = (await client.submit("workflow", {"signal": "go", "timeout_secs": 3600})).job
                await client.signal(waiting["id"], "go", {"n": 1})
                self.assertEqual((await client.wait(waiting["id"], timeout=PATIENCE))["state"], "succeeded")
                stuck = (await client.submit("scripted", {"first": "wait-for-stop"})).job
                await client.cancel(stuck["id"], "changed our mind")
                self.assertEqual((await client.wait(stuck["id"], timeout=PATIENCE))["state"], "cancelled")
                with self.assertRaises(spindle_client.InvalidInput) as invalid:
                    await client.submit("typed-noop", {"account": ""})
                self.assertTrue(invalid.exception.violations)
                with self.assertRaises(spindle_client.NotFound):
                    await client.submission("00000000-0000-0000-0000-000000000000")

        asyncio.run(run())

    def test_the_types_are_generated_from_this_hosts_document(self):
        with urllib.request.urlopen(f"{URL}/v1/openapi.json") as answer:
            document = answer.read()
        sys.path.insert(0, str(HERE.parent))
        import generate_types

        generated = generate_types.generate(json.loads(document))
        committed = (HERE.parent / "spindle_client" / "types.py").read_text(encoding="utf-8")
        self.assertEqual(generated, committed, "run: spindle openapi > o.json && python generate_types.py o.json spindle_client/types.py")


if __name__ == "__main__":
    unittest.main()
