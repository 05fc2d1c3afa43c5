"""Outcomes: their cursors, their bounds, their children."""

import unittest

from spindle_guest import (
    AwaitChildren,
    AwaitSignal,
    Child,
    Leftover,
    More,
    Priority,
    Refused,
    Skip,
    Snooze,
    await_children,
    await_signal,
    more,
    skip,
    snooze,
)


class OutcomeTest(unittest.TestCase):
    def test_cursors_are_text_as_given_or_json(self) -> None:
        self.assertEqual(more("300", 300, 1000), More("300", 300, 1000))
        self.assertEqual(more({"page": 3}, 3), More('{"page":3}', 3, None))
        self.assertEqual(await_signal("shipped", 60, cursor=[1, 2]), AwaitSignal("shipped", 60, "[1,2]"))
        self.assertEqual((skip("none"), snooze(30)), (Skip("none"), Snooze(30)))

    def test_out_of_range_numbers_are_refused_in_the_step(self) -> None:
        for build in [lambda: snooze(-1), lambda: snooze(2**32), lambda: more("x", -1), lambda: await_signal("s", True)]:
            with self.assertRaises(Refused) as e:
                build()
            self.assertEqual(e.exception.code, "invalid-outcome")

    def test_a_fan_out_carries_every_child_option_in_order(self) -> None:
        outcome = await_children(
            [
                Child("thumbnail", {"width": 4}, idempotency_key="k0", priority=Priority.BACKGROUND, lease_keys=["gpu"]),
                Child("raw", b"\x00\x01"),
            ],
            join=2,
            leftover=Leftover.KEEP,
            cursor="1",
        )
        self.assertIsInstance(outcome, AwaitChildren)
        self.assertEqual((outcome.join, outcome.leftover, outcome.cursor), (2, Leftover.KEEP, "1"))
        self.assertEqual([c.input_bytes() for c in outcome.children], [b'{"width":4}', b"\x00\x01"])
        self.assertEqual(await_children([]).join, "all")

    def test_an_unserialisable_child_input_or_bad_join_is_refused(self) -> None:
        with self.assertRaises(Refused) as e:
            await_children([Child("ok", {}), Child("bad", {1j: 2})])
        self.assertEqual(e.exception.code, "invalid-child-input")
        with self.assertRaises(Refused):
            await_children([], join="most")  # type: ignore[arg-type]


if __name__ == "__main__":
    unittest.main()
