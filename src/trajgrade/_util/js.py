"""Values as JavaScript prints them: the upstreams written in TypeScript
(agentv) render numbers and object keys this way in their messages."""

from __future__ import annotations

import math
from typing import Any

__all__ = ("js_key", "js_number")


def js_number(value: float) -> str:
    """A number as JavaScript's template strings print it (``2.0`` -> ``2``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if float(value).is_integer() and abs(value) < 1e21:
        return str(int(value))
    return repr(float(value))


def js_key(key: Any) -> str:
    """A YAML mapping key as JavaScript would hold it (object keys are strings)."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    if isinstance(key, int | float):
        return js_number(key)
    return str(key)
