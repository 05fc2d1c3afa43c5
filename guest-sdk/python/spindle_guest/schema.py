"""JSON Schema (draft 2020-12) derived from Python types: what `Kind(input=T)` and
`kind.step(key, output=T)` declare, and what the host checks submissions against.

    @dataclass
    class Greeting:
        \"\"\"Who to greet.\"\"\"

        name: Annotated[str, "the name on the card", Schema(minLength=1)]
        shout: bool = False

    schema_of(Greeting)
    # {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "Greeting",
    #  "description": "Who to greet.", "type": "object",
    #  "properties": {"name": {"type": "string", "description": "the name on the card", "minLength": 1},
    #                 "shout": {"type": "boolean", "default": false}},
    #  "required": ["name"]}

It covers the types `step.input(T)` decodes, and means by them what decoding does: a
dataclass field without a default (a TypedDict key that is required) is required, the
others are not; `Optional[T]` takes `null`; keys the type does not name are allowed
(`additionalProperties` is left open), since decoding ignores them. `Annotated[T, ...]`
adds to `T`'s schema: a `str` is its description, a `Schema(...)` is JSON Schema keywords
merged in as they are (`Schema(minLength=1)`, `Schema(minimum=0)`,
`Schema(pattern="^[a-z]+$")`). A dataclass's or TypedDict's docstring is its
description. Nested dataclasses, TypedDicts and enums go in `$defs`, referenced by
`$ref` (a recursive type too).

A type JSON cannot carry (`datetime`, `bytes`, `set`, a dict keyed by `int`, …) is a
`TypeError` naming the field it was found in.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import inspect
import json
import types
import typing
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from ._json import _unwrap_required, dumps

__all__ = ["schema_of", "Schema", "DIALECT"]

#: The dialect every derived schema names in its `$schema`, as the host reads it.
DIALECT = "https://json-schema.org/draft/2020-12/schema"

_NoneType = type(None)

#: What may sit beside `"type": X` and still let `null` join the type (`["string", "null"]`):
#: keywords that only constrain values of type X. Anything else (`enum`, `$ref`, `anyOf`,
#: `const`) would turn `null` away, so such a schema takes null through `anyOf` instead.
_TYPE_LOCAL = frozenset(
    {
        "type",
        "title",
        "description",
        "default",
        "examples",
        "format",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "items",
        "prefixItems",
        "minItems",
        "maxItems",
        "uniqueItems",
        "properties",
        "required",
        "additionalProperties",
        "minProperties",
        "maxProperties",
    }
)


class Schema:
    """JSON Schema keywords that `Annotated[T, Schema(...)]` adds to `T`'s schema:

        count: Annotated[int, Schema(minimum=1, maximum=100)]
        sku: Annotated[str, Schema({"pattern": "^[A-Z]{3}-[0-9]+$"}, examples=["ABC-12"])]

    A keyword that is not a Python name goes in the mapping. The keywords are merged as
    written, after the type's own (so they may replace them); the host refuses to deploy
    a kind whose schema breaks the 2020-12 meta-schema. They describe what the host
    checks at submission: decoding in the step does not enforce them. Hashable (unlike a
    `dict`), so it may sit inside `Optional[...]` and other unions.
    """

    __slots__ = ("keywords", "_text")

    def __init__(self, keywords: Optional[Mapping[str, Any]] = None, /, **more: Any) -> None:
        merged: Dict[str, Any] = dict(keywords or {})
        merged.update(more)
        for key in merged:
            if not isinstance(key, str):
                raise TypeError(f"a JSON Schema keyword is a string, not {key!r}")
        try:
            self._text = json.dumps(merged, sort_keys=True, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise TypeError(f"Schema keywords must be JSON values: {e}") from None
        self.keywords: Dict[str, Any] = merged

    def copy(self) -> Dict[str, Any]:
        """The keywords, deep-copied: a derived schema shares nothing with its types."""
        copied: Dict[str, Any] = json.loads(json.dumps(self.keywords))
        return copied

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Schema) and other._text == self._text

    def __hash__(self) -> int:
        return hash(self._text)

    def __repr__(self) -> str:
        return f"Schema({self.keywords!r})"



# Python's own types and the JSON Schema type each stands for (bare `list` and `dict`
# say nothing of their items).
_PLAIN_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}

def schema_of(tp: Any) -> Dict[str, Any]:
    """The JSON Schema (draft 2020-12, as a dict) of the JSON that `tp` decodes from.

    `tp` is a dataclass, a TypedDict, `str`/`int`/`float`/`bool`/`None`, `Any`,
    `list[T]`, `tuple[...]`, `dict[str, T]`, `Optional[T]`/`T | None`, another `Union`,
    `Literal[...]`, an `Enum` whose values are JSON scalars, or `Annotated[T, ...]` of one.
    Raises `TypeError` naming the field of a type it cannot describe.
    """
    builder = _Builder(tp)
    body = builder.schema(tp, _root_name(tp), root=True)
    schema: Dict[str, Any] = {"$schema": DIALECT}
    schema.update(body)
    if builder.defs:
        schema["$defs"] = builder.defs
    return schema


def schema_text(tp: Any) -> str:
    """`schema_of(tp)` as the compact JSON text a kind's spec carries."""
    return json.dumps(schema_of(tp), separators=(",", ":"))


def _root_name(tp: Any) -> str:
    name = getattr(tp, "__name__", None)
    return name if isinstance(name, str) else _describe(tp)


def _describe(tp: Any) -> str:
    if isinstance(tp, type) and not typing.get_args(tp):
        return "None" if tp is _NoneType else tp.__name__
    return str(tp).replace("typing.", "")


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and typing.is_typeddict(tp)


def _is_named(tp: Any) -> bool:
    """A type that gets a `$defs` entry when nested: it has a name and may recur."""
    if not isinstance(tp, type):
        return False
    return (dataclasses.is_dataclass(tp) or _is_typeddict(tp)) or issubclass(tp, enum.Enum)


def _docstring(tp: type) -> Optional[str]:
    """The class's own docstring, not one a decorator or base class wrote for it."""
    doc = tp.__dict__.get("__doc__")
    if not isinstance(doc, str) or not doc.strip():
        return None
    doc = inspect.cleandoc(doc)
    name = tp.__name__
    if dataclasses.is_dataclass(tp) and (doc == name or (doc.startswith(name + "(") and doc.endswith(")"))):
        return None  # the signature `@dataclass` writes when the class has no docstring
    if isinstance(tp, type) and issubclass(tp, enum.Enum) and doc == "An enumeration.":
        return None
    return doc


def _json_default(value: Any) -> Tuple[bool, Any]:
    """`(True, value as JSON)` if a field's default can be written as JSON (as outputs are:
    dataclasses by field, enums by value), else `(False, None)`."""
    try:
        return True, json.loads(dumps(value))
    except (TypeError, ValueError, RecursionError):
        return False, None


class _Builder:
    def __init__(self, root: Any) -> None:
        self.root = root
        self.defs: Dict[str, Dict[str, Any]] = {}
        self.names: Dict[Any, str] = {}

    # -- by kind of type ------------------------------------------------------------

    def schema(self, tp: Any, where: str, *, root: bool = False) -> Dict[str, Any]:
        if tp is Any or tp is object:
            return {}
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if origin is typing.Annotated:
            return self.annotated(args[0], args[1:], where, root=root)
        if origin in (typing.Required, typing.NotRequired):
            raise TypeError(f"`{where}`: Required/NotRequired belong on a TypedDict's keys")
        if origin is Union or origin is types.UnionType:
            return self.union(args, where)
        if origin is typing.Literal:
            return self.literal(args, where)
        if origin in (list, collections.abc.Sequence):
            item = args[0] if args else Any
            return _with({"type": "array"}, items=self.schema(item, f"{where}[]") if args else None)
        if origin is tuple:
            return self.tuple(args, where)
        if origin in (dict, collections.abc.Mapping):
            if args and args[0] not in (str, Any):
                raise TypeError(
                    f"cannot describe `{where}` ({_describe(tp)}) as JSON Schema: JSON object keys are strings"
                )
            value = args[1] if len(args) == 2 else Any
            values = self.schema(value, f"{where}[]")
            return _with({"type": "object"}, additionalProperties=values if values else None)
        if tp is None or tp is _NoneType:
            return {"type": "null"}
        if isinstance(tp, type) and tp in _PLAIN_TYPES:
            return {"type": _PLAIN_TYPES[tp]}
        if _is_named(tp):
            return self.named(tp, where, root=root)
        raise TypeError(f"cannot describe `{where}` ({_describe(tp)}) as JSON Schema: it is not a JSON type")

    def annotated(self, tp: Any, metadata: Tuple[Any, ...], where: str, *, root: bool) -> Dict[str, Any]:
        schema = dict(self.schema(tp, where, root=root))
        for extra in metadata:
            if isinstance(extra, str):
                schema["description"] = extra
            elif isinstance(extra, Schema):
                schema.update(extra.copy())
            elif isinstance(extra, collections.abc.Mapping):
                # A plain dict works too, but not inside a union (it is not hashable).
                schema.update(Schema(extra).copy())
            # Other metadata is another library's: not ours to read.
        return schema

    def union(self, args: Tuple[Any, ...], where: str) -> Dict[str, Any]:
        options = [a for a in args if a is not _NoneType]
        nullable = len(options) < len(args)
        schemas = [self.schema(option, where) for option in options]
        if any(s == {} for s in schemas):
            return {}  # `Any` in a union takes everything
        if not nullable:
            return schemas[0] if len(schemas) == 1 else {"anyOf": schemas}
        if len(schemas) == 1:
            only = schemas[0]
            kind = only.get("type")
            if isinstance(kind, str) and set(only) <= _TYPE_LOCAL:
                return {**only, "type": [kind, "null"]}
        return {"anyOf": [*schemas, {"type": "null"}]}

    def literal(self, args: Tuple[Any, ...], where: str) -> Dict[str, Any]:
        values: List[Any] = []
        for value in args:
            if value is not None and type(value) not in (str, int, bool):
                raise TypeError(
                    f"cannot describe `{where}` as JSON Schema: Literal[{value!r}] is not a string, integer, boolean or None"
                )
            values.append(value)
        schema = _typed_by_values(values)
        if len(values) == 1:
            schema["const"] = values[0]
        else:
            schema["enum"] = values
        return schema

    def tuple(self, args: Tuple[Any, ...], where: str) -> Dict[str, Any]:
        if not args:
            return {"type": "array"}
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": self.schema(args[0], f"{where}[]")}
        if args == ((),):  # `tuple[()]`: the empty tuple
            return {"type": "array", "maxItems": 0}
        items = [self.schema(item, f"{where}[{i}]") for i, item in enumerate(args)]
        return {"type": "array", "prefixItems": items, "minItems": len(items), "maxItems": len(items)}

    # -- named types: dataclasses, TypedDicts, enums --------------------------------

    def named(self, tp: type, where: str, *, root: bool) -> Dict[str, Any]:
        if root:
            return self.body(tp, where, root=True)
        if tp is self.root:
            return {"$ref": "#"}
        name = self.names.get(tp)
        if name is None:
            name = self.name_for(tp)
            self.names[tp] = name
            self.defs[name] = {}  # reserved first, so a recursive field finds it
            self.defs[name] = self.body(tp, tp.__name__, root=False)
        return {"$ref": f"#/$defs/{name}"}

    def name_for(self, tp: type) -> str:
        base = tp.__name__
        name, n = base, 1
        while name in self.defs:
            n += 1
            name = f"{base}{n}"
        return name

    def body(self, tp: type, where: str, *, root: bool) -> Dict[str, Any]:
        schema: Dict[str, Any] = {}
        if root:
            schema["title"] = tp.__name__
        doc = _docstring(tp)
        if doc:
            schema["description"] = doc
        if issubclass(tp, enum.Enum):
            schema.update(self.enum(tp, where))
        elif dataclasses.is_dataclass(tp):
            schema.update(self.dataclass(tp))
        else:
            schema.update(self.typeddict(tp))
        return schema

    def enum(self, tp: type, where: str) -> Dict[str, Any]:
        values = []
        for member in tp:  # type: ignore[attr-defined]
            value = member.value
            if value is not None and not isinstance(value, (str, int, float)):
                raise TypeError(
                    f"cannot describe `{where}` as JSON Schema: {tp.__name__}.{member.name} = {value!r} is not a JSON scalar"
                )
            values.append(_plain(value))
        schema = _typed_by_values(values)
        schema["enum"] = values
        return schema

    def hints(self, tp: type) -> Dict[str, Any]:
        try:
            return typing.get_type_hints(tp, include_extras=True)
        except Exception as e:  # NameError of a forward reference, mostly
            raise TypeError(f"cannot read the annotations of `{tp.__name__}`: {e}") from None

    def dataclass(self, tp: type) -> Dict[str, Any]:
        hints = self.hints(tp)
        properties: Dict[str, Any] = {}
        required: List[str] = []
        for field in dataclasses.fields(tp):
            if not field.init:
                continue  # decoding never reads it
            where = f"{tp.__name__}.{field.name}"
            prop = dict(self.schema(hints.get(field.name, Any), where))
            if field.default is not dataclasses.MISSING:
                ok, value = _json_default(field.default)
                if ok:
                    prop.setdefault("default", value)
            elif field.default_factory is not dataclasses.MISSING:
                if field.default_factory in (list, dict, tuple):
                    prop.setdefault("default", [] if field.default_factory in (list, tuple) else {})
            else:
                required.append(field.name)
            properties[field.name] = prop
        return _with({"type": "object", "properties": properties}, required=required or None)

    def typeddict(self, tp: type) -> Dict[str, Any]:
        hints = self.hints(tp)
        required_keys = getattr(tp, "__required_keys__", frozenset(hints))
        properties: Dict[str, Any] = {}
        required: List[str] = []
        for key, hint in hints.items():
            hint, marked = _unwrap_required(hint)
            properties[key] = self.schema(hint, f"{tp.__name__}.{key}")
            if marked is True or (marked is None and key in required_keys):
                required.append(key)
        return _with({"type": "object", "properties": properties}, required=required or None)


def _plain(value: Any) -> Any:
    """An enum member's value of a `str`/`int`/`float` subclass as the plain JSON scalar."""
    for base in (bool, int, float, str):
        if isinstance(value, base):
            return base(value)
    return value


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "string"


def _typed_by_values(values: List[Any]) -> Dict[str, Any]:
    """`{"type": T}` when every value is of one JSON type T (so tools can show it), else `{}`."""
    kinds = {_json_type(v) for v in values}
    if kinds == {"integer", "number"}:
        kinds = {"number"}
    return {"type": kinds.pop()} if len(kinds) == 1 else {}


def _with(schema: Dict[str, Any], **extra: Any) -> Dict[str, Any]:
    schema.update({k: v for k, v in extra.items() if v is not None})
    return schema
