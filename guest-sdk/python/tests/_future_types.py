"""Types whose annotations are strings (`from __future__ import annotations`), for
`test_schema`: forward references, and `NotRequired` that Python 3.11 leaves in a
TypedDict's `__required_keys__`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, NotRequired, Optional, TypedDict


@dataclass
class Node:
    """A tree of names."""

    name: str
    children: List[Node]
    parent: Optional[Node] = None


class Profile(TypedDict):
    handle: str
    bio: NotRequired[str]
