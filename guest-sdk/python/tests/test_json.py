"""Typed JSON in and out: what fits, what is refused, and what a refusal says."""

import enum
import unittest
from dataclasses import dataclass, field
from typing import Any, Dict, List, Literal, Optional, Tuple, TypedDict, Union

from spindle_guest import InvalidInput, Refused, complete
from spindle_guest._json import convert, decode, dumps


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass
class Address:
    city: str
    zip: Optional[str] = None


@dataclass
class Order:
    id: int
    amount: float
    lines: List[str]
    address: Address
    colour: Colour = Colour.RED
    tags: Dict[str, int] = field(default_factory=dict)
    mode: Literal["fast", "slow"] = "slow"
    pair: Tuple[int, str] = (0, "")
    extra: Any = None


class Movie(TypedDict, total=False):
    title: str
    year: int


class Positive:
    pass


@dataclass
class Amount:
    cents: int

    def __post_init__(self) -> None:
        if self.cents <= 0:
            raise ValueError("`cents` must be positive")


def fit(value: Any, into: Any) -> Any:
    return convert(value, into, what="the job's input", code="invalid-input")


def refusal(value: Any, into: Any) -> InvalidInput:
    try:
        fit(value, into)
    except InvalidInput as e:
        return e
    raise AssertionError(f"{value!r} fit {into!r}")


class DecodeTest(unittest.TestCase):
    def test_builds_nested_dataclasses_with_defaults_and_ignores_unknown_keys(self) -> None:
        order = fit(
            {
                "id": 7,
                "amount": 3,
                "lines": ["a"],
                "address": {"city": "Oslo"},
                "colour": "blue",
                "tags": {"x": 1},
                "mode": "fast",
                "pair": [1, "b"],
                "extra": {"any": [1]},
                "unknown": True,
            },
            Order,
        )
        self.assertEqual(order.address, Address("Oslo", None))
        self.assertEqual((order.id, order.amount, order.colour, order.pair), (7, 3.0, Colour.BLUE, (1, "b")))
        self.assertIsInstance(order.amount, float)
        self.assertEqual(order.tags, {"x": 1})
        self.assertEqual(order.extra, {"any": [1]})

    def test_names_the_place_and_the_expected_type_never_the_value(self) -> None:
        cases = [
            ({"id": "4111111111111111"}, "`id`: expected an integer, found a string"),
            ({"id": True}, "`id`: expected an integer, found a boolean"),
            ({"id": 1.5}, "`id`: expected an integer, found a number"),
            ({"id": 1, "amount": 1, "lines": ["a", 4111], "address": {}}, "`lines[1]`: expected a string"),
            ({"id": 1, "amount": 1, "lines": [], "address": {}}, "`address.city`: missing"),
            ({"id": 1, "amount": 1, "lines": [], "address": {"city": "x"}, "colour": "green"}, '`colour`: expected one of "red", "blue"'),
            ({"id": 1, "amount": 1, "lines": [], "address": {"city": "x"}, "mode": "4111"}, '`mode`: expected one of "fast", "slow"'),
        ]
        for value, expected in cases:
            with self.subTest(value=value):
                error = refusal(value, Order)
                self.assertIn(expected, error.message)
                self.assertTrue(error.message.startswith("the job's input does not fit Order at "))
                self.assertNotIn("4111", error.message)
                self.assertEqual(error.code, "invalid-input")
        self.assertEqual(refusal([], Order).message, "the job's input does not fit Order: expected an object, found an array")

    def test_typed_dicts_primitives_and_unions(self) -> None:
        self.assertEqual(fit({"title": "Up"}, Movie), {"title": "Up"})
        self.assertIn("`year`: expected an integer", refusal({"year": "1"}, Movie).message)
        self.assertEqual(fit(3, Union[int, str]), 3)
        self.assertEqual(fit("3", Union[int, str]), "3")
        self.assertIsNone(fit(None, Optional[Address]))
        self.assertEqual(fit({"city": "Oslo"}, Optional[Address]), Address("Oslo"))
        self.assertIn("`city`: missing", refusal({}, Optional[Address]).message)
        self.assertEqual(fit([1, 2], List[int]), [1, 2])
        self.assertEqual(fit({"a": [1]}, Dict[str, List[int]]), {"a": [1]})
        self.assertEqual(fit(2.0, int), 2)

    def test_post_init_validation_is_an_invalid_input(self) -> None:
        self.assertEqual(refusal({"cents": 0}, Amount).message, "the job's input does not fit Amount: `cents` must be positive")

    def test_unparseable_bytes_say_where_they_break(self) -> None:
        with self.assertRaises(InvalidInput) as e:
            decode(b'{"a": }', what="the job's input", code="invalid-input")
        self.assertEqual(e.exception.message, "the job's input is not valid JSON (line 1, column 7)")
        with self.assertRaises(InvalidInput) as e:
            decode(b'{"a": 1', what="the signal's body", code="invalid-signal")
        self.assertEqual((e.exception.code, e.exception.message), ("invalid-signal", "the signal's body ends early (line 1, column 8)"))
        with self.assertRaises(InvalidInput) as e:
            decode(b"\xff", what="the job's input", code="invalid-input")
        self.assertIn("not UTF-8", e.exception.message)

    def test_a_type_the_sdk_cannot_build_is_a_bug_not_an_invalid_input(self) -> None:
        with self.assertRaises(TypeError):
            fit({}, Positive)


class EncodeTest(unittest.TestCase):
    def test_writes_dataclasses_and_enums_compactly(self) -> None:
        self.assertEqual(dumps(Address("Zürich")), '{"city":"Zürich","zip":null}')
        self.assertEqual(dumps({"c": Colour.BLUE, "t": (1, 2)}), '{"c":"blue","t":[1,2]}')

    def test_complete_keeps_bytes_and_refuses_what_json_cannot_hold(self) -> None:
        self.assertEqual(complete(b"\x00raw").output, b"\x00raw")
        self.assertEqual(complete().output, b"null")
        for bad in [float("nan"), {1j: 2}, object()]:
            with self.subTest(bad=bad), self.assertRaises(Refused) as e:
                complete(bad)
            self.assertEqual(e.exception.code, "invalid-output")


if __name__ == "__main__":
    unittest.main()
