"""A kind's description, its dispatch, and how exceptions become failures."""

import unittest
from typing import Any, Dict, Tuple

from spindle_guest import (
    Cancelled,
    Complete,
    InvalidInput,
    JobSummary,
    Kind,
    Refused,
    Retryable,
    RetryPolicy,
    Step,
    http,
    more,
)
from spindle_guest.testing import LocalHost, local_host


def failing(error: BaseException) -> Kind:
    kind = Kind("failing")

    @kind.step("run")
    def run(step: Step) -> None:
        raise error

    return kind


def call(kind: Kind, key: str = "run") -> Tuple[Any, LocalHost]:
    """Runs one call of `key` on a recording host: its outcome, and the host."""
    with local_host() as host:
        return kind.run_step(Step(key=key)), host


def outcome_of(kind: Kind, key: str = "run") -> Any:
    return call(kind, key)[0]


class SpecTest(unittest.TestCase):
    def test_fills_every_field_in_declaration_order(self) -> None:
        kind = Kind("scripted", cancellable=False, retry=RetryPolicy(4, 10, 50), input_schema={"type": "object"})
        kind.step("first")(lambda step: None)
        kind.step("second", weight=2, output_schema='{"type":"string"}')(lambda step: None)
        kind.on_failure(lambda job: None)
        kind.on_success(lambda job: None)
        spec = kind.spec()
        self.assertEqual([(s.key, s.weight, s.output_schema) for s in spec.steps], [("first", 1, None), ("second", 2, '{"type":"string"}')])
        self.assertEqual(spec.retry, RetryPolicy(4, 10, 50))
        self.assertFalse(spec.cancellable)
        self.assertTrue(spec.has_failure_effect and spec.notifies_on_success)
        self.assertEqual(spec.input_schema, '{"type":"object"}')

    def test_defaults_follow_the_spec(self) -> None:
        kind = Kind("noop")
        kind.step("run")(lambda step: None)
        spec = kind.spec()
        self.assertFalse(spec.cancellable)
        self.assertEqual(spec.retry, RetryPolicy(3, 1_000, 60_000))
        self.assertFalse(spec.has_failure_effect or spec.notifies_on_success)
        self.assertIsNone(spec.input_schema)

    def test_refuses_what_the_host_could_not_deploy(self) -> None:
        kind = Kind("twice")
        kind.step("run")(lambda step: None)
        with self.assertRaises(ValueError):
            kind.step("run")
        with self.assertRaises(ValueError):
            Kind("empty").spec()
        with self.assertRaises(ValueError):
            RetryPolicy(max_attempts=0)
        with self.assertRaises(ValueError):
            kind.step("heavy", weight=-1)

    def test_decorators_return_the_function_unchanged(self) -> None:
        kind = Kind("plain")

        def run(step: Step) -> int:
            return 1

        self.assertIs(kind.step("run")(run), run)


class DispatchTest(unittest.TestCase):
    def test_return_values_complete_and_outcomes_pass_through(self) -> None:
        kind = Kind("values")
        kind.step("dict")(lambda step: {"a": 1})
        kind.step("none")(lambda step: None)
        kind.step("bytes")(lambda step: b"\x01")
        kind.step("more")(lambda step: more({"page": 2}, 10, 30))
        kind.step("refused")(lambda step: Refused("declined", "no"))
        self.assertEqual(outcome_of(kind, "dict"), Complete(b'{"a":1}'))
        self.assertEqual(outcome_of(kind, "none"), Complete(b"null"))
        self.assertEqual(outcome_of(kind, "bytes"), Complete(b"\x01"))
        self.assertEqual(outcome_of(kind, "more"), more('{"page":2}', 10, 30))
        self.assertEqual(outcome_of(kind, "refused"), Refused("declined", "no"))

    def test_an_unknown_step_is_refused(self) -> None:
        kind = Kind("one")
        kind.step("run")(lambda step: None)
        outcome = outcome_of(kind, "walk")
        self.assertEqual(outcome, Refused("unknown-step", "the kind does not implement this step"))

    def test_step_errors_report_as_they_are_and_log_their_detail(self) -> None:
        self.assertEqual(outcome_of(failing(Retryable("busy", "try later"))), Retryable("busy", "try later"))
        self.assertEqual(outcome_of(failing(Refused("card-declined"))), Refused("card-declined", "card-declined"))
        outcome = outcome_of(failing(InvalidInput("bad shape")))
        self.assertEqual((outcome.code, outcome.retryable), ("invalid-input", False))
        _, host = call(failing(Refused("declined", "no").with_detail("processor said 402")))
        lines = [line.message for line in host.logs]
        self.assertEqual(lines, ["step `run` refused declined: processor said 402"])

    def test_any_other_exception_is_retryable_with_its_type_and_a_traceback_on_stderr(self) -> None:
        outcome, host = call(failing(KeyError("missing")))
        self.assertEqual(outcome, Retryable("uncaught-exception", "KeyError: 'missing'"))
        stderr = "".join(host.stderr_text)
        self.assertTrue(stderr.startswith("Traceback (most recent call last)"), stderr)
        self.assertIn("KeyError: 'missing'", stderr)
        self.assertEqual(outcome_of(failing(RuntimeError())), Retryable("uncaught-exception", "RuntimeError"))
        long = outcome_of(failing(ValueError("x" * 1000)))
        self.assertLessEqual(len(long.message), 500)

    def test_a_stop_is_retryable_stopped_and_http_errors_mean_what_they_say(self) -> None:
        self.assertEqual(outcome_of(failing(Cancelled())).code, "stopped")
        self.assertEqual(outcome_of(failing(http.Denied())), Refused("http-request-denied", "the outbound request is not allowed by policy"))
        self.assertEqual(outcome_of(failing(http.InvalidRequest("no host"))).code, "http-request-invalid")
        self.assertEqual(outcome_of(failing(http.Timeout("slow"))), Retryable("upstream-unavailable", "the upstream service did not answer"))


class HookTest(unittest.TestCase):
    def test_hooks_report_their_failures(self) -> None:
        kind = Kind("hooks")
        kind.step("run")(lambda step: None)
        summary = JobSummary("job", b"{}", {"run": b"null"})
        self.assertIsNone(kind.run_on_failure(summary), "no hook declared: nothing to fail")

        @kind.on_failure
        def undo(job: JobSummary) -> None:
            raise Refused("void-failed", "the void was refused")

        @kind.on_success
        def notify(job: JobSummary) -> None:
            listeners: Dict[str, str] = {}
            listeners["nobody"]

        with local_host():
            failure = kind.run_on_failure(summary)
            self.assertEqual((failure.code, failure.message), ("void-failed", "the void was refused"))  # type: ignore[union-attr]
            failure = kind.run_on_success(summary)
            self.assertEqual((failure.code, failure.message), ("uncaught-exception", "KeyError: 'nobody'"))  # type: ignore[union-attr]


if __name__ == "__main__":
    unittest.main()
