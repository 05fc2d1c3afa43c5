"""JSON Schema from Python types: `schema_of`, and `Kind(input=T)` / `kind.step(output=T)`."""

import datetime
import enum
import json
import unittest
from dataclasses import dataclass, field
from typing import (
    Annotated,
    Any,
    Dict,
    List,
    Literal,
    Mapping,
    NotRequired,
    Optional,
    Required,
    Sequence,
    Tuple,
    TypedDict,
    Union,
)

from spindle_guest import InvalidInput, Kind, Schema, schema_of
from spindle_guest._json import convert

try:  # `python3 -m unittest` (the package `tests`) or `discover -s tests` (top-level modules)
    from ._future_types import Node, Profile
except ImportError:
    from _future_types import Node, Profile  # type: ignore[no-redef]

try:  # Not a dependency: the agreement tests below run where it is installed.
    import jsonschema
except ImportError:  # pragma: no cover
    jsonschema = None

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def body(tp: Any) -> Dict[str, Any]:
    """`schema_of(tp)` without its `$schema`, for comparing the interesting part."""
    schema = dict(schema_of(tp))
    assert schema.pop("$schema") == DIALECT
    return schema


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Size(enum.IntEnum):
    """How big."""

    SMALL = 1
    LARGE = 3


@dataclass
class Address:
    """Where a parcel goes."""

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
    billing: Optional[Address] = None
    computed: int = field(default=0, init=False)


class Movie(TypedDict, total=False):
    title: str
    year: int


class Rating(TypedDict):
    """A viewer's rating."""

    movie: Movie
    stars: int
    note: NotRequired[str]


class Loose(TypedDict, total=False):
    id: Required[int]
    label: str


@dataclass
class Greeting:
    """The job's input."""

    name: Annotated[str, "who to greet", Schema(minLength=1)]
    flaky: Annotated[bool, "fail the first delivery"] = False
    explode: bool = False


class PrimitivesTest(unittest.TestCase):
    def test_json_types(self) -> None:
        cases = {
            str: {"type": "string"},
            int: {"type": "integer"},
            float: {"type": "number"},
            bool: {"type": "boolean"},
            type(None): {"type": "null"},
            None: {"type": "null"},
            Any: {},
            object: {},
            list: {"type": "array"},
            dict: {"type": "object"},
        }
        for tp, want in cases.items():
            with self.subTest(tp=tp):
                self.assertEqual(body(tp), want)

    def test_every_schema_names_its_dialect(self) -> None:
        for tp in (str, Order, List[int], Colour, Movie):
            with self.subTest(tp=tp):
                self.assertEqual(schema_of(tp)["$schema"], DIALECT)
                self.assertEqual(next(iter(schema_of(tp))), "$schema", "first, where a reader looks")

    def test_optional_joins_null_to_the_type(self) -> None:
        self.assertEqual(body(Optional[str]), {"type": ["string", "null"]})
        self.assertEqual(body(str | None), {"type": ["string", "null"]})
        self.assertEqual(body(Optional[List[int]]), {"type": ["array", "null"], "items": {"type": "integer"}})

    def test_optional_of_what_would_turn_null_away_goes_through_any_of(self) -> None:
        self.assertEqual(
            body(Optional[Literal["a", "b"]]),
            {"anyOf": [{"type": "string", "enum": ["a", "b"]}, {"type": "null"}]},
        )
        schema = body(Optional[Address])
        self.assertEqual(schema["anyOf"], [{"$ref": "#/$defs/Address"}, {"type": "null"}])

    def test_unions_are_any_of(self) -> None:
        self.assertEqual(body(Union[int, str]), {"anyOf": [{"type": "integer"}, {"type": "string"}]})
        self.assertEqual(
            body(Union[int, str, None]), {"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]}
        )
        self.assertEqual(body(Union[int, Any]), {})

    def test_arrays(self) -> None:
        self.assertEqual(body(List[str]), {"type": "array", "items": {"type": "string"}})
        self.assertEqual(body(list[int]), {"type": "array", "items": {"type": "integer"}})
        self.assertEqual(body(Sequence[bool]), {"type": "array", "items": {"type": "boolean"}})
        self.assertEqual(body(Tuple[int, ...]), {"type": "array", "items": {"type": "integer"}})
        self.assertEqual(
            body(Tuple[int, str]),
            {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "minItems": 2, "maxItems": 2},
        )

    def test_maps(self) -> None:
        self.assertEqual(body(Dict[str, int]), {"type": "object", "additionalProperties": {"type": "integer"}})
        self.assertEqual(body(dict[str, float]), {"type": "object", "additionalProperties": {"type": "number"}})
        self.assertEqual(body(Mapping[str, str]), {"type": "object", "additionalProperties": {"type": "string"}})
        self.assertEqual(body(Dict[str, Any]), {"type": "object"})

    def test_literals_are_enums_or_a_const(self) -> None:
        self.assertEqual(body(Literal["fast", "slow"]), {"type": "string", "enum": ["fast", "slow"]})
        self.assertEqual(body(Literal[1, 2]), {"type": "integer", "enum": [1, 2]})
        self.assertEqual(body(Literal["on", 1]), {"enum": ["on", 1]})
        self.assertEqual(body(Literal["only"]), {"type": "string", "const": "only"})
        self.assertEqual(body(Literal[True]), {"type": "boolean", "const": True})

    def test_enums_are_their_values(self) -> None:
        self.assertEqual(body(Colour), {"title": "Colour", "type": "string", "enum": ["red", "blue"]})
        self.assertEqual(
            body(Size), {"title": "Size", "description": "How big.", "type": "integer", "enum": [1, 3]}
        )

    def test_annotated_adds_a_description_and_keywords(self) -> None:
        self.assertEqual(body(Annotated[str, "a name"]), {"type": "string", "description": "a name"})
        self.assertEqual(
            body(Annotated[int, Schema(minimum=0, maximum=10), "a score"]),
            {"type": "integer", "minimum": 0, "maximum": 10, "description": "a score"},
        )
        self.assertEqual(
            body(Annotated[str, Schema({"$comment": "c"}, examples=["x"])]),
            {"type": "string", "$comment": "c", "examples": ["x"]},
        )
        self.assertEqual(body(Annotated[str, {"maxLength": 3}]), {"type": "string", "maxLength": 3}, "a dict too")
        self.assertEqual(body(Annotated[str, object(), 3]), {"type": "string"}, "another library's metadata")
        self.assertEqual(
            body(Optional[Annotated[str, Schema(minLength=1)]]), {"type": ["string", "null"], "minLength": 1}
        )

    def test_schema_keywords_are_json_and_hashable(self) -> None:
        self.assertEqual(Schema(minLength=1), Schema({"minLength": 1}))
        self.assertEqual(hash(Schema(enum=[1, 2])), hash(Schema(enum=[1, 2])))
        self.assertNotEqual(Schema(minLength=1), Schema(minLength=2))
        with self.assertRaises(TypeError):
            Schema(default=datetime.date(2024, 1, 1))
        with self.assertRaises(TypeError):
            Schema({1: "x"})
        keywords = Schema(enum=["a"])
        derived = body(Annotated[str, keywords])
        derived["enum"].append("b")
        self.assertEqual(keywords.keywords, {"enum": ["a"]}, "the derived schema shares nothing")


class DataclassTest(unittest.TestCase):
    def test_an_object_whose_fields_without_defaults_are_required(self) -> None:
        schema = schema_of(Order)
        self.assertEqual(schema["type"], "object")
        self.assertEqual(schema["title"], "Order")
        self.assertEqual(schema["required"], ["id", "amount", "lines", "address"])
        self.assertNotIn("additionalProperties", schema, "decoding ignores keys it does not name")
        self.assertNotIn("description", schema, "the signature @dataclass writes is not a description")
        self.assertEqual(
            list(schema["properties"]),
            ["id", "amount", "lines", "address", "colour", "tags", "mode", "pair", "extra", "billing"],
            "a field decoding never reads (init=False) is left out",
        )

    def test_fields(self) -> None:
        props = schema_of(Order)["properties"]
        self.assertEqual(props["id"], {"type": "integer"})
        self.assertEqual(props["amount"], {"type": "number"})
        self.assertEqual(props["lines"], {"type": "array", "items": {"type": "string"}})
        self.assertEqual(props["address"], {"$ref": "#/$defs/Address"})
        self.assertEqual(props["colour"], {"$ref": "#/$defs/Colour", "default": "red"})
        self.assertEqual(props["tags"], {"type": "object", "additionalProperties": {"type": "integer"}, "default": {}})
        self.assertEqual(props["mode"], {"type": "string", "enum": ["fast", "slow"], "default": "slow"})
        self.assertEqual(props["pair"]["default"], [0, ""])
        self.assertEqual(props["extra"], {"default": None})
        self.assertEqual(props["billing"], {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}], "default": None})

    def test_nested_types_are_defined_once(self) -> None:
        defs = schema_of(Order)["$defs"]
        self.assertEqual(sorted(defs), ["Address", "Colour"])
        self.assertEqual(
            defs["Address"],
            {
                "description": "Where a parcel goes.",
                "type": "object",
                "properties": {"city": {"type": "string"}, "zip": {"type": ["string", "null"], "default": None}},
                "required": ["city"],
            },
        )
        self.assertEqual(defs["Colour"], {"type": "string", "enum": ["red", "blue"]})

    def test_the_docstring_is_the_description(self) -> None:
        schema = schema_of(Greeting)
        self.assertEqual(schema["description"], "The job's input.")
        self.assertEqual(
            schema["properties"],
            {
                "name": {"type": "string", "description": "who to greet", "minLength": 1},
                "flaky": {"type": "boolean", "description": "fail the first delivery", "default": False},
                "explode": {"type": "boolean", "default": False},
            },
        )
        self.assertEqual(schema["required"], ["name"])

    def test_no_required_list_when_nothing_is(self) -> None:
        @dataclass
        class Options:
            verbose: bool = False

        self.assertEqual(body(Options), {"title": "Options", "type": "object", "properties": {"verbose": {"type": "boolean", "default": False}}})

    def test_recursion_and_string_annotations(self) -> None:
        schema = schema_of(Node)
        self.assertEqual(schema["description"], "A tree of names.")
        self.assertEqual(schema["properties"]["children"], {"type": "array", "items": {"$ref": "#"}})
        self.assertEqual(schema["properties"]["parent"]["anyOf"], [{"$ref": "#"}, {"type": "null"}])
        self.assertNotIn("$defs", schema)

        @dataclass
        class Tree:
            root: Node

        self.assertEqual(schema_of(Tree)["$defs"]["Node"]["properties"]["children"]["items"], {"$ref": "#/$defs/Node"})

    def test_two_types_of_one_name_get_two_definitions(self) -> None:
        def make(kind: type) -> type:
            @dataclass
            class Item:
                value: kind  # type: ignore[valid-type]

            return Item

        @dataclass
        class Both:
            a: make(int)  # type: ignore[valid-type]
            b: make(str)  # type: ignore[valid-type]

        schema = schema_of(Both)
        self.assertEqual(schema["properties"], {"a": {"$ref": "#/$defs/Item"}, "b": {"$ref": "#/$defs/Item2"}})
        self.assertEqual(schema["$defs"]["Item2"]["properties"]["value"], {"type": "string"})


class TypedDictTest(unittest.TestCase):
    def test_total_and_not_required(self) -> None:
        schema = schema_of(Rating)
        self.assertEqual(schema["type"], "object")
        self.assertEqual(schema["description"], "A viewer's rating.")
        self.assertEqual(schema["required"], ["movie", "stars"])
        self.assertEqual(schema["properties"]["note"], {"type": "string"})
        self.assertEqual(schema["$defs"]["Movie"], {"type": "object", "properties": {"title": {"type": "string"}, "year": {"type": "integer"}}})

    def test_total_false_and_required(self) -> None:
        self.assertEqual(schema_of(Movie).get("required"), None)
        self.assertEqual(schema_of(Loose)["required"], ["id"])

    def test_not_required_under_string_annotations_agrees_with_decoding(self) -> None:
        self.assertEqual(schema_of(Profile)["required"], ["handle"])
        self.assertEqual(convert({"handle": "ada"}, Profile, what="x", code="c"), {"handle": "ada"})
        with self.assertRaises(InvalidInput):
            convert({"bio": "hi"}, Profile, what="x", code="c")


class UnsupportedTest(unittest.TestCase):
    def test_a_type_json_cannot_carry_names_its_field(self) -> None:
        @dataclass
        class Event:
            name: str
            at: datetime.datetime

        with self.assertRaisesRegex(TypeError, r"`Event\.at` \(datetime\)"):
            schema_of(Event)

    def test_nested_places_are_named(self) -> None:
        @dataclass
        class Batch:
            items: List[Dict[str, bytes]]

        with self.assertRaisesRegex(TypeError, r"`Batch\.items\[\]\[\]` \(bytes\)"):
            schema_of(Batch)

    def test_what_else_is_refused(self) -> None:
        class Shape(enum.Enum):
            POINT = (0, 0)

        class Pet(TypedDict):
            tags: set

        for tp, pattern in [
            (Dict[int, str], "keys are strings"),
            (set, "set"),
            (bytes, "bytes"),
            (Literal[1.5], "Literal"),
            (Shape, r"Shape\.POINT"),
            (Pet, r"`Pet\.tags`"),
            (complex, "complex"),
        ]:
            with self.subTest(tp=tp), self.assertRaisesRegex(TypeError, pattern):
                schema_of(tp)

    def test_unresolvable_annotations_name_the_type(self) -> None:
        @dataclass
        class Later:
            other: "Missing"  # type: ignore[name-defined]  # noqa: F821

        with self.assertRaisesRegex(TypeError, "annotations of `Later`"):
            schema_of(Later)


class KindTest(unittest.TestCase):
    def test_input_declares_the_derived_schema(self) -> None:
        kind = Kind("greet", input=Greeting)
        kind.step("compose")(lambda step: None)
        text = kind.spec().input_schema
        assert text is not None
        self.assertEqual(json.loads(text), schema_of(Greeting))
        self.assertNotIn(" ", text.replace("The job's input.", "").replace("who to greet", "").replace("fail the first delivery", ""), "compact")

    def test_output_declares_a_steps_schema(self) -> None:
        kind = Kind("orders")
        kind.step("ship", output=Address)(lambda step: None)
        kind.step("notify", output_schema={"type": "string"})(lambda step: None)
        kind.step("done")(lambda step: None)
        outputs = [s.output_schema for s in kind.spec().steps]
        self.assertEqual(json.loads(outputs[0] or "null"), schema_of(Address))
        self.assertEqual(outputs[1:], ['{"type":"string"}', None])

    def test_a_type_and_a_schema_at_once_is_an_error(self) -> None:
        with self.assertRaisesRegex(TypeError, "not both"):
            Kind("k", input=Greeting, input_schema={"type": "object"})
        with self.assertRaisesRegex(TypeError, "not both"):
            Kind("k").step("a", output=Address, output_schema="{}")

    def test_an_unsupported_input_fails_where_the_kind_is_declared(self) -> None:
        @dataclass
        class Event:
            at: datetime.date

        with self.assertRaisesRegex(TypeError, r"Event\.at"):
            Kind("k", input=Event)

    def test_schema_text_is_still_taken_as_it_is(self) -> None:
        self.assertEqual(Kind("k", input_schema='{"type": "object"}').input_schema, '{"type": "object"}')
        self.assertIsNone(Kind("k").input_schema)


@unittest.skipIf(jsonschema is None, "the jsonschema package is not installed")
class AgreementTest(unittest.TestCase):
    """The derived schema is a valid 2020-12 schema, and takes what decoding takes."""

    cases: List[Tuple[Any, List[Any]]] = [
        (
            Order,
            [
                {"id": 1, "amount": 2.5, "lines": ["a"], "address": {"city": "Oslo"}},
                {"id": 1, "amount": 2, "lines": [], "address": {"city": "Oslo", "zip": None}, "colour": "blue", "x": 1},
                {"id": 1, "amount": 2, "lines": [], "address": {"city": "Oslo"}, "mode": "fast", "pair": [1, "b"]},
                {"id": 1, "amount": 2, "lines": [], "address": {"city": "Oslo"}, "billing": {"city": "Rome"}},
                {"id": "1", "amount": 2, "lines": [], "address": {"city": "Oslo"}},
                {"id": 1, "amount": 2, "lines": [3], "address": {"city": "Oslo"}},
                {"id": 1, "amount": 2, "lines": [], "address": {}},
                {"id": 1, "amount": 2, "lines": [], "address": {"city": "Oslo"}, "colour": "green"},
                {"id": 1, "amount": 2, "lines": [], "address": {"city": "Oslo"}, "pair": [1]},
                {"id": 1, "amount": 2, "lines": [], "address": {"city": "Oslo"}, "tags": {"a": "b"}},
                {"id": True, "amount": 2, "lines": [], "address": {"city": "Oslo"}},
                {"amount": 2, "lines": [], "address": {"city": "Oslo"}},
                [],
                None,
            ],
        ),
        (Rating, [{"movie": {}, "stars": 3}, {"movie": {"year": 1999}, "stars": 3, "note": "ok"}, {"stars": 3}, {"movie": {"year": "1999"}, "stars": 3}]),
        (Node, [{"name": "a", "children": [{"name": "b", "children": []}]}, {"name": "a", "children": [{"name": "b"}]}]),
        (Size, [1, 3, 2, "1"]),
        (Optional[int], [None, 4, "4", 4.5]),
        (Union[int, List[str]], [1, ["a"], [1], "a"]),
    ]

    def test_schemas_are_valid_2020_12(self) -> None:
        for tp in [Order, Rating, Movie, Loose, Node, Profile, Greeting, Colour, Size, Tuple[int, str], Optional[Address]]:
            with self.subTest(tp=tp):
                jsonschema.Draft202012Validator.check_schema(schema_of(tp))

    def test_the_schema_takes_what_decoding_takes(self) -> None:
        for tp, values in self.cases:
            validator = jsonschema.Draft202012Validator(schema_of(tp))
            for value in values:
                with self.subTest(tp=tp, value=value):
                    try:
                        convert(value, tp, what="the input", code="invalid-input")
                        decodes = True
                    except InvalidInput:
                        decodes = False
                    self.assertEqual(validator.is_valid(value), decodes)

    def test_the_empty_name_is_refused_by_the_keyword_annotated_in(self) -> None:
        validator = jsonschema.Draft202012Validator(schema_of(Greeting))
        self.assertTrue(validator.is_valid({"name": "Ada", "flaky": True}))
        self.assertFalse(validator.is_valid({"name": ""}))
        self.assertFalse(validator.is_valid({}))
        self.assertFalse(validator.is_valid({"name": "Ada", "explode": "yes"}))


if __name__ == "__main__":
    unittest.main()
