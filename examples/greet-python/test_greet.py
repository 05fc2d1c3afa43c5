"""The greet kind's local test: whole jobs through the SDK's runner, no host, no wasm."""

import json
import unittest

from greet import compose, kind

from spindle_guest import InvalidInput, Refused, Retryable
from spindle_guest.testing import LOCAL_JOB_ID, local_host, make_step, run_job


class GreetTest(unittest.TestCase):
    def test_greets_ada(self) -> None:
        run = run_job(kind, {"name": "Ada"})
        self.assertEqual(run.state, "succeeded")
        self.assertEqual(run.output("compose"), {"text": "Hello, Ada!"})
        self.assertEqual(run.output("deliver"), {"delivered": "Hello, Ada!", "attempt": 1})
        self.assertEqual([(c.step, c.attempt) for c in run.calls], [("compose", 1), ("deliver", 1)])
        self.assertEqual(
            run.log_messages(),
            ["composing a greeting for Ada", f"delivered Hello, Ada! (key {LOCAL_JOB_ID}/deliver)"],
        )

    def test_refuses_input_without_a_name(self) -> None:
        for payload in [{}, {"name": ""}, {"name": 7}, [], b"not json"]:
            with self.subTest(payload=payload):
                run = run_job(kind, payload)
                self.assertEqual(run.state, "failed")
                assert run.failure is not None
                self.assertEqual((run.failure.step, run.failure.code), ("compose", "invalid-input"))
                self.assertEqual(len(run.calls), 1, "a refusal is not retried")

    def test_says_what_is_missing_without_quoting_the_input(self) -> None:
        run = run_job(kind, {})
        assert run.failure is not None
        self.assertEqual(run.failure.message, "the job's input does not fit GreetInput at `name`: missing")
        run = run_job(kind, {"name": 4111111111111111})
        assert run.failure is not None
        self.assertNotIn("4111", run.failure.message)

    def test_a_flaky_delivery_succeeds_on_the_second_attempt(self) -> None:
        run = run_job(kind, {"name": "Ada", "flaky": True})
        self.assertEqual(run.state, "succeeded")
        self.assertEqual(run.output("deliver"), {"delivered": "Hello, Ada!", "attempt": 2})
        first, second = run.calls_of("deliver")
        self.assertEqual(first.outcome, Retryable("upstream-unavailable", "the first attempt fails on purpose"))
        self.assertEqual(second.attempt, 2)

    def test_an_explosion_is_an_uncaught_key_error_retried_to_the_end(self) -> None:
        run = run_job(kind, {"name": "Ada", "explode": True})
        self.assertEqual(run.state, "failed")
        assert run.failure is not None
        self.assertEqual((run.failure.step, run.failure.code), ("compose", "uncaught-exception"))
        self.assertIn("KeyError", run.failure.message)
        self.assertEqual(run.failure.message, "KeyError: 'missing'")
        self.assertEqual([c.attempt for c in run.calls], [1, 2, 3])
        self.assertIn("Traceback (most recent call last)", run.stderr)
        self.assertIn('greetings["missing"]', run.stderr)

    def test_compose_on_its_own(self) -> None:
        with local_host() as host:
            self.assertEqual(compose(make_step("compose", {"name": "Grace"})).text, "Hello, Grace!")
            with self.assertRaises(InvalidInput) as refused:
                compose(make_step("compose", {"name": ""}))
        self.assertIsInstance(refused.exception, Refused)
        self.assertEqual(refused.exception.message, "the job's input does not fit GreetInput: `name` must not be empty")
        self.assertEqual([line.message for line in host.logs], ["composing a greeting for Grace"])

    def test_describes_itself_as_the_spec_says(self) -> None:
        spec = kind.spec()
        self.assertEqual(spec.name, "greet-python")
        self.assertEqual([(s.key, s.weight) for s in spec.steps], [("compose", 1), ("deliver", 1)])
        self.assertEqual(
            (spec.retry.max_attempts, spec.retry.initial_backoff_ms, spec.retry.max_backoff_ms), (3, 100, 1000)
        )
        self.assertFalse(spec.has_failure_effect or spec.notifies_on_success)

    def test_declares_its_input_schema(self) -> None:
        spec = kind.spec()
        assert spec.input_schema is not None
        schema = json.loads(spec.input_schema)
        self.assertEqual(schema["$schema"], "https://json-schema.org/draft/2020-12/schema")
        self.assertEqual(schema["type"], "object")
        self.assertEqual(schema["required"], ["name"])
        properties = schema["properties"]
        self.assertEqual((properties["name"]["type"], properties["name"]["minLength"]), ("string", 1))
        for optional in ("flaky", "explode"):
            self.assertEqual((properties[optional]["type"], properties[optional]["default"]), ("boolean", False))
        self.assertNotIn("additionalProperties", schema)
        assert spec.steps[0].output_schema is not None
        self.assertEqual(json.loads(spec.steps[0].output_schema)["required"], ["text"])


if __name__ == "__main__":
    unittest.main()
