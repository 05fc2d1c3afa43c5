"""The local runner: it drives a job the way the host's contract describes."""

import sys
import unittest
from dataclasses import dataclass
from typing import List, Optional
from unittest import mock

from spindle_guest import (
    Child,
    ChildState,
    JobSummary,
    Kind,
    Leftover,
    Refused,
    Retryable,
    RetryPolicy,
    Skip,
    Step,
    await_children,
    await_signal,
    log,
    more,
    skip,
    snooze,
)
from spindle_guest import testing
from spindle_guest.testing import ChildOutcome, local_child_id, run_job


def pages(undone: Optional[List[JobSummary]] = None) -> Kind:
    """Reads three pages a call at a time, snoozing once, then sums them; the failure hook
    appends the job's summary to `undone`."""
    kind = Kind("pages", retry=RetryPolicy(2, 1, 1))
    snoozed: List[int] = []

    @kind.step("read")
    def read(step: Step) -> object:
        page = step.cursor_json() or 0
        if page == 1 and not snoozed:
            snoozed.append(page)
            return snooze(5)
        if page < 3:
            return more(page + 1, page + 1, 3)
        return {"pages": page}

    @kind.step("maybe")
    def maybe(step: Step) -> object:
        return skip("nothing to do") if step.input().get("skip") else "done"

    @kind.step("sum")
    def total(step: Step) -> object:
        if step.input().get("fail") == "refuse":
            raise Refused("declined", "no")
        if step.input().get("fail") == "retry":
            raise Retryable("busy", "later")
        return step.prior("read")["pages"] + (step.prior_if_completed("maybe") is not None)

    @kind.on_failure
    def undo(job: JobSummary) -> None:
        if undone is not None:
            undone.append(job)
        log.info(f"undoing after {job.failure.code}")  # type: ignore[union-attr]

    return kind


class StepsTest(unittest.TestCase):
    def test_more_calls_again_with_the_cursor_and_snoozes_are_skipped(self) -> None:
        run = run_job(pages(), {})
        self.assertTrue(run.succeeded)
        self.assertEqual([c.cursor for c in run.calls_of("read")], [None, "1", "1", "2", "3"])
        self.assertEqual({c.attempt for c in run.calls_of("read")}, {1})
        self.assertEqual(run.output("read"), {"pages": 3})
        self.assertEqual(run.output("sum"), 4)
        self.assertIsNone(run.hook, "no success hook declared")

    def test_a_skipped_step_has_no_output(self) -> None:
        run = run_job(pages(), {"skip": True})
        self.assertEqual(run.calls_of("maybe")[0].outcome, Skip("nothing to do"))
        self.assertNotIn("maybe", run.outputs)
        self.assertEqual(run.output("sum"), 3)

    def test_a_refusal_fails_the_job_at_once_and_runs_the_failure_hook(self) -> None:
        undone: List[JobSummary] = []
        run = run_job(pages(undone), {"fail": "refuse"})
        self.assertEqual((run.state, run.failure), ("failed", testing.JobFailure("sum", "declined", "no")))
        self.assertEqual(len(run.calls_of("sum")), 1)
        self.assertEqual(run.hook, testing.HookRun("on-failure", None))
        (summary,) = undone
        self.assertEqual((summary.job_id, summary.output("read")), (testing.LOCAL_JOB_ID, {"pages": 3}))
        self.assertEqual(run.logs[-1], testing.LogLine(log.Level.INFO, "undoing after declined", None))

    def test_a_retryable_failure_retries_to_the_budget(self) -> None:
        run = run_job(pages(), {"fail": "retry"})
        self.assertEqual([c.attempt for c in run.calls_of("sum")], [1, 2])
        self.assertEqual(run.failure.code, "busy")  # type: ignore[union-attr]

    def test_a_step_that_never_settles_fails_its_test_instead_of_hanging_it(self) -> None:
        kind = Kind("forever")
        kind.step("spin")(lambda step: snooze(1))
        with mock.patch.object(testing, "MAX_CALLS_PER_STEP", 50):
            run = run_job(kind, {})
        self.assertEqual((run.failure.code, len(run.calls)), ("call-limit", 50))  # type: ignore[union-attr]

    def test_the_success_hook_runs_when_declared(self) -> None:
        kind = Kind("notify")
        kind.step("run")(lambda step: None)
        kind.on_success(lambda job: None)
        self.assertEqual(run_job(kind, {}).hook, testing.HookRun("on-success", None))


@dataclass
class Plan:
    kinds: List[str]
    join: object = "all"
    keep: bool = False
    keyed: bool = False
    passes: int = 1
    retry_after_first_pass: bool = False


def spread() -> Kind:
    """Fans out one child per entry of `kinds`, `passes` times, then completes with what
    it saw of the last pass."""
    kind = Kind("spread", retry=RetryPolicy(2, 1, 1))

    @kind.step("spread")
    def fan(step: Step) -> object:
        plan = step.input(Plan)
        passes = int(step.cursor or 0)
        if step.children is not None and passes == 1 and plan.retry_after_first_pass and step.attempt == 1:
            raise Retryable("again", "once more")
        if passes >= plan.passes:
            return [[c.job_id, c.state.value if c.state else None, c.output_json()] for c in step.children or []]
        children = [
            Child(kind, {"n": n}, idempotency_key=f"{step.idempotency_key}/{n}" if plan.keyed else None)
            for n, kind in enumerate(plan.kinds)
        ]
        return await_children(
            children, join=plan.join, leftover=Leftover.KEEP if plan.keep else Leftover.CANCEL, cursor=str(passes + 1)  # type: ignore[arg-type]
        )

    kind.step("after")(lambda step: "after")
    return kind


class WorkflowTest(unittest.TestCase):
    def test_join_all_settles_every_child_with_the_echo_by_default(self) -> None:
        run = run_job(spread(), {"kinds": ["a", "b"]})
        self.assertEqual(
            run.output("spread"), [[local_child_id(1), "succeeded", {"n": 0}], [local_child_id(2), "succeeded", {"n": 1}]]
        )
        self.assertEqual(run.output("after"), "after")
        (fan_out,) = run.fan_outs
        self.assertEqual((fan_out.join, fan_out.leftover, fan_out.cursor), ("all", Leftover.CANCEL, "1"))
        self.assertEqual(run.calls_of("spread")[1].cursor, "1")

    def test_join_any_and_count_leave_the_rest_open(self) -> None:
        run = run_job(spread(), {"kinds": ["a", "b", "c"], "join": "any"})
        self.assertEqual([row[1] for row in run.output("spread")], ["succeeded", None, None])
        run = run_job(spread(), {"kinds": ["a", "b", "c"], "join": 2})
        self.assertEqual([row[1] for row in run.output("spread")], ["succeeded", "succeeded", None])

    def test_a_handler_settles_children(self) -> None:
        def settle(kind: str, input: bytes) -> ChildOutcome:
            return ChildOutcome.failed("bad", "no") if kind == "bad" else ChildOutcome.succeeded({"kind": kind})

        run = run_job(spread(), {"kinds": ["good", "bad"]}, children=settle)
        self.assertEqual(run.output("spread"), [[local_child_id(1), "succeeded", {"kind": "good"}], [local_child_id(2), "failed", None]])
        self.assertEqual(run.children_of("spread")[1].result.failure.code, "bad")  # type: ignore[union-attr]

    def test_a_key_names_one_child_across_passes_and_retries(self) -> None:
        calls: List[str] = []

        def settle(kind: str, input: bytes) -> ChildOutcome:
            calls.append(kind)
            return ChildOutcome.succeeded(kind)

        run = run_job(spread(), {"kinds": ["a", "b"], "keyed": True, "passes": 2, "join": "any"}, children=settle)
        self.assertEqual(calls, ["a"], "the second pass finds the first's jobs by key")
        self.assertEqual([row[1] for row in run.output("spread")], ["succeeded", "cancelled"])
        run = run_job(spread(), {"kinds": ["a"], "keyed": True, "retry_after_first_pass": True, "passes": 2})
        self.assertEqual({c.result.job_id for c in run.children_of("spread")}, {local_child_id(1)})

    def test_from_run_settles_a_child_as_its_own_kind_would(self) -> None:
        inner = run_job(spread(), {"kinds": []})
        self.assertEqual(ChildOutcome.from_run(inner), ChildOutcome(ChildState.SUCCEEDED, b'"after"'))
        refused = Kind("refuses")
        refused.step("run")(lambda step: Refused("no", "never"))
        self.assertEqual(ChildOutcome.from_run(run_job(refused, {})).failure.code, "no")  # type: ignore[union-attr]


def waiter() -> Kind:
    kind = Kind("waiter")

    @kind.step("wait")
    def wait(step: Step) -> object:
        if step.awaited is None:
            return await_signal("shipped", 60, cursor="waiting")
        return {"cursor": step.cursor, "signal": step.signal(), "timed_out": step.signal_timed_out}

    return kind


class SignalTest(unittest.TestCase):
    def test_a_queued_signal_is_delivered_once_and_the_rest_are_left(self) -> None:
        run = run_job(waiter(), {}, signals=[("other", {}), ("shipped", {"carrier": "dhl"}), ("shipped", "late")])
        self.assertEqual(run.output("wait"), {"cursor": "waiting", "signal": {"carrier": "dhl"}, "timed_out": False})
        self.assertEqual(run.signals_consumed(), [("shipped", b'{"carrier":"dhl"}')])
        self.assertEqual(run.signals_left, [("other", b"{}"), ("shipped", b'"late"')])

    def test_without_a_signal_the_wait_times_out(self) -> None:
        run = run_job(waiter(), {})
        self.assertEqual(run.output("wait"), {"cursor": "waiting", "signal": None, "timed_out": True})
        self.assertIsNone(run.signal_waits[0].body)


if __name__ == "__main__":
    unittest.main()


class ImportsTest(unittest.TestCase):
    """The component is a snapshot of what the kind's module imported at build time and
    has no file system: an import inside a step fails there, so it fails here too."""

    def lazy(self) -> Kind:
        kind = Kind("lazy", retry=RetryPolicy(1, 1, 1))

        @kind.step("load")
        def load(step: Step) -> object:
            import colorsys  # noqa: F401  (not imported anywhere before the step)
            import json  # loaded already: the snapshot has it

            return json.loads("1")

        return kind

    def test_a_module_first_imported_inside_a_step_is_not_found_as_in_the_component(self) -> None:
        sys.modules.pop("colorsys", None)
        run = run_job(self.lazy(), {})
        self.assertFalse(run.succeeded)
        failure = run.failure
        assert failure is not None
        self.assertEqual(failure.code, "uncaught-exception")
        self.assertIn("ModuleNotFoundError: No module named 'colorsys'", failure.message)
        self.assertIn("import it at the top of the kind's module", failure.message)
        self.assertNotIn("colorsys", sys.modules)

    def test_a_module_loaded_before_the_job_imports_and_nothing_is_blocked_after_it(self) -> None:
        import colorsys  # noqa: F401

        self.assertTrue(run_job(self.lazy(), {}).succeeded)
        sys.modules.pop("colorsys", None)
        import colorsys  # noqa: F401,F811  (outside a job, imports work as ever)
