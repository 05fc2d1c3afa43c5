"""Writes spindle_client/types.py from Spindle's OpenAPI document: one TypedDict per
object schema, so the Python client's types are the server's and cannot drift from them
(``cargo xtask test`` regenerates the file and fails when it differs from the committed one).

Usage: python generate_types.py openapi.json spindle_client/types.py
"""

from __future__ import annotations

import json
import keyword
import sys
from typing import Any, Dict, List

HEADER = '''"""The bodies of Spindle's HTTP API, as TypedDicts. Generated from the OpenAPI document
by generate_types.py: do not edit by hand (``cargo xtask test`` checks it is current)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

try:
    from typing import TypedDict
except ImportError:  # pragma: no cover
    from typing_extensions import TypedDict
'''


def ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def python_type(schema: Dict[str, Any]) -> str:
    """The annotation of a property's schema."""
    if "$ref" in schema:
        return ref_name(schema["$ref"])
    for combined in ("oneOf", "anyOf"):
        if combined in schema:
            options = [o for o in schema[combined] if o.get("type") != "null"]
            nullable = len(options) != len(schema[combined])
            inner = python_type(options[0]) if len(options) == 1 else "Any"
            return f"Optional[{inner}]" if nullable else inner
    kind = schema.get("type")
    if isinstance(kind, list):
        rest = [k for k in kind if k != "null"]
        inner = python_type({**schema, "type": rest[0]}) if len(rest) == 1 else "Any"
        return f"Optional[{inner}]" if "null" in kind else inner
    if kind == "string":
        return "str"
    if kind == "integer":
        return "int"
    if kind == "number":
        return "float"
    if kind == "boolean":
        return "bool"
    if kind == "array":
        return f"List[{python_type(schema.get('items', {}))}]"
    if kind == "object":
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict) and not schema.get("properties"):
            return f"Dict[str, {python_type(extra)}]"
        return "Dict[str, Any]"
    return "Any"


def doc(text: str, indent: str) -> List[str]:
    lines = [line.rstrip() for line in text.strip().replace('"""', "'''").splitlines()]
    if not lines:
        return []
    if len(lines) == 1:
        return [f'{indent}"""{lines[0]}"""']
    return [f'{indent}"""{lines[0]}'] + [f"{indent}{line}" if line else "" for line in lines[1:]] + [f'{indent}"""']


def typed_dict(name: str, schema: Dict[str, Any]) -> List[str]:
    properties: Dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    fields = sorted(properties)
    if any(not f.isidentifier() or keyword.iskeyword(f) for f in fields):
        # A field named like a keyword (`from`) needs TypedDict's functional form.
        total = "" if required.issuperset(fields) else ", total=False"
        entries = ", ".join(f'"{f}": "{python_type(properties[f])}"' for f in fields)
        return [f'{name} = TypedDict("{name}", {{{entries}}}{total})'] + doc(schema.get("description", ""), "")
    out: List[str] = []
    base = "TypedDict"
    needed = [f for f in fields if f in required]
    optional = [f for f in fields if f not in required]
    if needed and optional:
        out.append(f"class _{name}Required(TypedDict):")
        for field in needed:
            out.append(f"    {field}: {python_type(properties[field])}")
            out += doc(properties[field].get("description", ""), "    ")
        out += ["", ""]
        base = f"_{name}Required"
    head = f"class {name}({base}, total=False):" if optional else f"class {name}(TypedDict):"
    out.append(head)
    out += doc(schema.get("description", ""), "    ")
    for field in optional if (needed and optional) else fields:
        out.append(f"    {field}: {python_type(properties[field])}")
        out += doc(properties[field].get("description", ""), "    ")
    if len(out) == 1:
        out.append("    pass")
    return out


def generate(document: Dict[str, Any]) -> str:
    schemas: Dict[str, Any] = document["components"]["schemas"]
    blocks: List[str] = []
    for name in sorted(schemas):
        schema = schemas[name]
        if schema.get("type") == "object" and "properties" in schema:
            blocks.append("\n".join(typed_dict(name, schema)))
        else:
            alias = python_type(schema)
            text = doc(schema.get("description", ""), "")
            blocks.append("\n".join([f"{name} = {alias}"] + text))
    return HEADER + "\n\n" + "\n\n\n".join(blocks) + "\n"


def main() -> None:
    source, target = sys.argv[1], sys.argv[2]
    with open(source, encoding="utf-8") as f:
        document = json.load(f)
    with open(target, "w", encoding="utf-8") as f:
        f.write(generate(document))


if __name__ == "__main__":
    main()
