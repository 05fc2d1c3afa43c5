"""JSON in and out of a step: typed decoding into dataclasses and TypedDicts, encoding back.

Decoding is strict where a kind would otherwise fail later and obscurely: a field typed
`int` refuses `true` and `"3"`, a missing field without a default is an error, a nested
dataclass is checked all the way down. Keys the type does not name are ignored, so a
caller may add fields before the kind reads them. Messages name the place (`items[2].sku`)
and the expected type, never the value.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import json
import types
import typing
from typing import Any, Dict, Optional, Tuple, Type, TypeVar, Union, cast

from .errors import InvalidInput, Refused

T = TypeVar("T")

_NoneType = type(None)


class _Mismatch(Exception):
    """Where and how a JSON value does not fit a type; turned into `InvalidInput` by `decode`."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(path, problem)
        self.path = path
        self.problem = problem


def parse(raw: Union[bytes, str], *, what: str, code: str) -> Any:
    """Parses `raw` as JSON, or raises `InvalidInput` saying where it breaks (not what it holds)."""
    try:
        text = raw if isinstance(raw, str) else bytes(raw).decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidInput(f"{what} is not UTF-8 text (byte {e.start})", code=code, detail=str(e)) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        problem = "ends early" if e.pos >= len(e.doc.rstrip()) else "is not valid JSON"
        raise InvalidInput(
            f"{what} {problem} (line {e.lineno}, column {e.colno})", code=code, detail=e.msg
        ) from None


def decode(raw: Union[bytes, str], into: Optional[Type[T]] = None, *, what: str, code: str) -> Any:
    """Parses `raw` and, given `into`, builds that type from it (see `convert`)."""
    value = parse(raw, what=what, code=code)
    return value if into is None else convert(value, into, what=what, code=code)


def convert(value: Any, into: Type[T], *, what: str, code: str) -> T:
    """Builds `into` (a dataclass, TypedDict, primitive, `list[...]`, `dict[str, ...]`,
    `Optional`/`Union`, `Literal`, `Enum`, `Any`) from a parsed JSON value, or raises
    `InvalidInput` naming the first field that does not fit."""
    try:
        return cast(T, _convert(value, into, ""))
    except _Mismatch as m:
        name = getattr(into, "__name__", None) or _describe(into)
        place = f" at `{m.path}`" if m.path else ""
        raise InvalidInput(f"{what} does not fit {name}{place}: {m.problem}", code=code) from None


def _join(path: str, key: Union[str, int]) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _describe(tp: Any) -> str:
    """A type as a reader would write it: `str`, `list[int]`, `Optional[Address]`."""
    if isinstance(tp, type) and not typing.get_args(tp):
        return {"NoneType": "null"}.get(tp.__name__, tp.__name__)
    return str(tp).replace("typing.", "")


def _json_type(value: Any) -> str:
    """The JSON type of a parsed value: what a message may say about it without quoting it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _expected(path: str, expected: str, value: Any) -> _Mismatch:
    return _Mismatch(path, f"expected {expected}, found {_json_type(value)}")


def _convert(value: Any, tp: Any, path: str) -> Any:
    if tp is Any or tp is object:
        return value
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        return _convert(value, args[0], path)
    if origin is Union or origin is types.UnionType:
        return _convert_union(value, args, path)
    if origin is typing.Literal:
        if any(value == allowed and type(value) is type(allowed) for allowed in args):
            return value
        raise _Mismatch(path, "expected one of " + ", ".join(json.dumps(a) for a in args))
    if origin in (list, collections.abc.Sequence):
        if not isinstance(value, list):
            raise _expected(path, "an array", value)
        item = args[0] if args else Any
        return [_convert(v, item, _join(path, i)) for i, v in enumerate(value)]
    if origin is tuple:
        return _convert_tuple(value, args, path)
    if origin in (dict, collections.abc.Mapping):
        if not isinstance(value, dict):
            raise _expected(path, "an object", value)
        item = args[1] if len(args) == 2 else Any
        return {k: _convert(v, item, _join(path, k)) for k, v in value.items()}
    if tp is _NoneType or tp is None:
        if value is not None:
            raise _expected(path, "null", value)
        return None
    if tp is bool:
        if not isinstance(value, bool):
            raise _expected(path, "a boolean", value)
        return value
    if tp is int:
        # JSON has one number type: 3.0 is an integer, 3.5 and true are not.
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _expected(path, "an integer", value)
        if isinstance(value, float) and not value.is_integer():
            raise _expected(path, "an integer", value)
        return int(value)
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _expected(path, "a number", value)
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise _expected(path, "a string", value)
        return value
    if tp in (list, dict):
        return _convert(value, tp[Any] if tp is list else Dict[str, Any], path)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(value)
        except ValueError:
            raise _Mismatch(path, f"expected one of {', '.join(json.dumps(m.value) for m in tp)}") from None
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _convert_dataclass(value, tp, path)
    if _is_typeddict(tp):
        return _convert_typeddict(value, tp, path)
    raise TypeError(f"spindle_guest cannot build {_describe(tp)} from JSON")


def _convert_union(value: Any, args: Any, path: str) -> Any:
    # `None` first, so `Optional[X]` takes a null without asking X.
    if value is None and _NoneType in args:
        return None
    options = [a for a in args if a is not _NoneType]
    if len(options) == 1:
        return _convert(value, options[0], path)
    problems = []
    for option in options:
        try:
            return _convert(value, option, path)
        except _Mismatch as m:
            problems.append(m)
    # Several options failed: the deepest failure is the likeliest intended one.
    deepest = max(problems, key=lambda m: len(m.path))
    if deepest.path != path:
        raise deepest
    names = " or ".join(_describe(a) for a in options)
    raise _Mismatch(path, f"expected {names}, found {_json_type(value)}")


def _convert_tuple(value: Any, args: Any, path: str) -> Any:
    if not isinstance(value, list):
        raise _expected(path, "an array", value)
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(_convert(v, args[0], _join(path, i)) for i, v in enumerate(value))
    if args and len(value) != len(args):
        raise _Mismatch(path, f"expected an array of {len(args)} items, found {len(value)}")
    return tuple(_convert(v, t, _join(path, i)) for i, (v, t) in enumerate(zip(value, args)))


def _hints(tp: Any) -> Dict[str, Any]:
    return typing.get_type_hints(tp, include_extras=True)


def _convert_dataclass(value: Any, tp: Any, path: str) -> Any:
    if not isinstance(value, dict):
        raise _expected(path, "an object", value)
    hints = _hints(tp)
    kwargs = {}
    for field in dataclasses.fields(tp):
        if not field.init:
            continue
        here = _join(path, field.name)
        if field.name not in value:
            has_default = field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING
            if has_default:
                continue
            raise _Mismatch(here, "missing")
        kwargs[field.name] = _convert(value[field.name], hints.get(field.name, Any), here)
    try:
        return tp(**kwargs)
    except (ValueError, TypeError) as e:
        # A `__post_init__` that validates: its message is the kind's own.
        raise _Mismatch(path, str(e) or type(e).__name__) from None


def _is_typeddict(tp: Any) -> bool:
    is_typeddict = getattr(typing, "is_typeddict", None)
    return bool(is_typeddict and is_typeddict(tp))


def _convert_typeddict(value: Any, tp: Any, path: str) -> Any:
    if not isinstance(value, dict):
        raise _expected(path, "an object", value)
    hints = _hints(tp)
    required = getattr(tp, "__required_keys__", frozenset(hints))
    out = {}
    for key, hint in hints.items():
        here = _join(path, key)
        inner, marked = _unwrap_required(hint)
        if key not in value:
            # The marker wins: under `from __future__ import annotations` Python 3.11
            # leaves a `NotRequired` key in `__required_keys__`.
            if marked is True or (marked is None and key in required):
                raise _Mismatch(here, "missing")
            continue
        out[key] = _convert(value[key], inner, here)
    return out


def _unwrap_required(hint: Any) -> Tuple[Any, Optional[bool]]:
    """`Required[X]` and `NotRequired[X]` (kept by `include_extras`) as `(X, True/False)`;
    any other hint as `(hint, None)`."""
    marked: Optional[bool] = None
    while True:
        origin = typing.get_origin(hint)
        if origin is typing.Required:
            marked = True
        elif origin is typing.NotRequired:
            marked = False
        else:
            return hint, marked
        hint = typing.get_args(hint)[0]


def _default(value: Any) -> Any:
    """What `json` cannot write by itself: dataclasses (by field) and enums (by value)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (set, frozenset)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def dumps(value: Any) -> str:
    """`value` as compact JSON text; dataclasses and enums included. Raises `TypeError`/`ValueError`."""
    return json.dumps(value, default=_default, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def encode(value: Any, *, what: str, code: str) -> bytes:
    """`value` as UTF-8 JSON, or a `Refused` with `code`: an output that cannot be written is
    a bug in the kind, and retrying would write it no better."""
    try:
        return dumps(value).encode("utf-8")
    except (TypeError, ValueError, RecursionError) as e:
        raise Refused(code, f"{what} is not serialisable as JSON", detail=str(e)) from None
