"""One call's helpers: input, prior outputs, cursor, awaits, heartbeats, config."""

import unittest
from dataclasses import dataclass

from spindle_guest import (
    AwaitedChildren,
    AwaitedSignal,
    Cancelled,
    ChildResult,
    ChildState,
    Checkpoint,
    Heartbeat,
    InvalidInput,
    LeaseLost,
    Refused,
    SignalTimedOut,
    Step,
)
from spindle_guest.testing import local_host, make_step


@dataclass
class Rows:
    rows: int


class InputTest(unittest.TestCase):
    def test_reads_input_prior_and_cursor_typed(self) -> None:
        step = make_step("import", {"rows": 3}, attempt=2, prior={"validate": {"rows": 5}}, cursor='{"rows": 7}')
        self.assertEqual(step.input(Rows), Rows(3))
        self.assertEqual(step.input(), {"rows": 3})
        self.assertEqual(step.prior("validate", Rows), Rows(5))
        self.assertEqual(step.cursor_json(Rows), Rows(7))
        self.assertEqual((step.key, step.attempt, step.idempotency_key), ("import", 2, f"{step.job_id}/import"))

    def test_bad_json_is_refused_with_a_code_per_source(self) -> None:
        step = make_step("import", b"{", prior={"validate": []}, cursor="x")
        for read, code in [
            (lambda: step.input(Rows), "invalid-input"),
            (lambda: step.prior("validate", Rows), "invalid-prior"),
            (lambda: step.cursor_json(), "invalid-cursor"),
        ]:
            with self.subTest(code=code), self.assertRaises(InvalidInput) as e:
                read()
            self.assertEqual(e.exception.code, code)
        with self.assertRaises(Refused) as missing:
            step.prior("summarise")
        self.assertEqual(missing.exception.code, "missing-prior")

    def test_a_prior_output_that_may_be_missing_is_optional(self) -> None:
        step = make_step("import", prior={"validate": {"rows": 5}})
        self.assertEqual(step.prior_bytes("validate"), b'{"rows":5}')
        self.assertEqual(step.prior_if_completed("validate", Rows), Rows(5))
        self.assertIsNone(step.prior_if_completed("skipped"))
        self.assertIsNone(make_step("first").cursor_json())

    def test_a_prior_output_left_out_of_the_input_is_asked_of_the_host(self) -> None:
        with local_host() as host:
            host.outputs["validate"] = b'{"rows": 9}'
            self.assertEqual(make_step("import").prior("validate", Rows), Rows(9))


class AwaitedTest(unittest.TestCase):
    def test_a_first_call_awaited_nothing(self) -> None:
        step = make_step("wait")
        self.assertEqual((step.awaited, step.children, step.signal_bytes, step.signal()), (None, None, None, None))
        self.assertFalse(step.signal_timed_out)

    def test_children_signals_and_timeouts(self) -> None:
        children = [ChildResult("c1", "thumbnail", ChildState.SUCCEEDED, b'{"bytes": 12}'), ChildResult("c2", "thumbnail", None)]
        step = make_step("fan", awaited=AwaitedChildren(children))
        self.assertEqual([c.job_id for c in step.children or []], ["c1", "c2"])
        self.assertEqual(children[0].output_json(), {"bytes": 12})
        self.assertTrue(children[0].succeeded and not children[1].is_final)
        with self.assertRaises(InvalidInput) as e:
            ChildResult("c3", "k", ChildState.SUCCEEDED, b"<html>").output_json()
        self.assertEqual(e.exception.code, "invalid-child-output")

        signalled = make_step("wait", awaited=AwaitedSignal(b'{"rows": 2}'))
        self.assertEqual(signalled.signal(Rows), Rows(2))
        with self.assertRaises(InvalidInput) as e:
            make_step("wait", awaited=AwaitedSignal(b"[]")).signal(Rows)
        self.assertEqual(e.exception.code, "invalid-signal")
        timed_out = make_step("wait", awaited=SignalTimedOut())
        self.assertTrue(timed_out.signal_timed_out)
        self.assertIsNone(timed_out.signal())


class HostTest(unittest.TestCase):
    def test_heartbeats_proceed_unless_scripted_and_keep_alive_raises_on_a_stop(self) -> None:
        step = Step(key="long")
        with local_host(heartbeats=[Heartbeat.PROCEED, Heartbeat.STOP_CANCELLED, Heartbeat.STOP_LEASE_LOST]) as host:
            self.assertIs(step.heartbeat(Checkpoint("10", 10, 100)), Heartbeat.PROCEED)
            self.assertIsNone(step.stop_requested)
            with self.assertRaises(Cancelled):
                step.keep_alive()
            with self.assertRaises(LeaseLost):
                step.keep_alive()
            self.assertIs(step.heartbeat(), Heartbeat.PROCEED)
        self.assertIs(step.stop_requested, Heartbeat.STOP_LEASE_LOST)
        self.assertEqual(host.progress, [Checkpoint("10", 10, 100)])
        self.assertNotIsInstance(Cancelled(), Exception, "`except Exception` must not swallow a stop")

    def test_config_answers_from_what_the_test_set(self) -> None:
        step = Step(key="sign")
        with local_host(config={"region": "eu"}, secrets={"key": "Jefe"}):
            self.assertEqual(step.config.get("region"), "eu")
            self.assertIsNone(step.config.get("other"))
            placeholder = step.config.secret("key")
            self.assertNotIn("Jefe", placeholder)
            # RFC 4231, test case 2.
            mac = step.config.hmac_sha256("key", "what do ya want for nothing?")
            self.assertEqual(mac.hex(), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
            self.assertEqual((step.config.secret("other"), step.config.hmac_sha256("other", b"x")), (None, None))


if __name__ == "__main__":
    unittest.main()
