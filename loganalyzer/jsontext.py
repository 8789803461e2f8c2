"""JSON from a source, with its nesting bounded.

Python's decoder recurses once per level: a file nested 100,000 deep raises RecursionError
inside it, and a value a few hundred levels deep that it does decode would raise again in
whatever walks it later (masking, rendering, `json.dumps`). No log, config or summary a
framework writes comes near `MAX_DEPTH`; deeper text is refused as a ValueError, the error
every reader already turns into its one-line message or warning naming the file.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 100


class TooDeepError(ValueError):
    """JSON nested deeper than `MAX_DEPTH` levels."""

    def __init__(self) -> None:
        super().__init__(f"JSON nested deeper than {MAX_DEPTH} levels")


def loads(text: str | bytes) -> Any:
    """`json.loads`, refusing (TooDeepError) a document nested deeper than `MAX_DEPTH`."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise TooDeepError from None
    if depth(value) > MAX_DEPTH:
        raise TooDeepError
    return value


def depth(value: Any) -> int:
    """Levels of lists and objects in a decoded value (a scalar is 0), walked without
    recursion; stops counting once past `MAX_DEPTH`."""
    deepest = 0
    pending = [(value, 1)] if isinstance(value, (list, dict)) else []
    while pending and deepest <= MAX_DEPTH:
        node, level = pending.pop()
        deepest = max(deepest, level)
        children = node.values() if isinstance(node, dict) else node
        pending.extend((child, level + 1) for child in children if isinstance(child, (list, dict)))
    return deepest
