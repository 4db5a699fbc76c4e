"""Values as a JSON line holds them: what events and records built in code
may carry.

A decoded log line can only give str, int, float, bool, None, lists and
objects with str keys. Values built in Python can be anything, and msgspec
writes several of them as something else (bytes as base64 text, a datetime,
UUID or Decimal as a string, a nested NaN as null): a forbidden command given
as bytes was graded as its base64 text and passed, and a set or a bytes
value reached graders that expect JSON. :func:`json_problem` finds the first
value a line could not have held, with its path, before anything grades it.

Tuples and subclasses of str, int and float (a ``StrEnum``) are held
faithfully (as an array, as their value): accepted, and reported as *loose*
so an event can be given to graders as a line would give it.
"""

from __future__ import annotations

import math
from typing import Final, Literal, NamedTuple

from trajgrade._util.depth import MAX_DEPTH

__all__ = ("JSON_FIX", "Problem", "json_problem")

#: The fix an error about such a value carries.
JSON_FIX: Final = (
    "give values JSON can hold (str, int, float, bool, None, lists, "
    "dicts with str keys)"
)


#: The longest path an error shows.
_PATH_SHOWN: Final = 80


class Problem(NamedTuple):
    """Where (``args.command``, ``result[2]``; empty: the value itself) and what."""

    path: str
    what: str


def json_problem(value: object, limit: int = MAX_DEPTH) -> tuple[Problem | None, bool]:
    """The first value in ``value`` a JSON line could not hold (None: none),
    and whether it holds loose values (tuples, subclasses of str, int and
    float). Containers nested deeper than ``limit`` are a problem too."""
    loose = False
    todo: list[tuple[object, int]] = [(value, 0)]
    while todo:
        v, depth = todo.pop()
        t = type(v)
        if t is dict or t is list or t is tuple:
            if depth >= limit:
                return _where(value, limit), loose
            if t is dict:
                if not all(type(k) is str for k in v):  # type: ignore[attr-defined]
                    return _where(value, limit), loose
                items = v.values()  # type: ignore[attr-defined]
            else:
                loose = loose or t is tuple
                items = v
            for x in items:
                tx = type(x)
                if tx is str or tx is int or tx is bool or x is None:
                    continue  # (the common case: no push)
                if tx is float and math.isfinite(x):
                    continue
                todo.append((x, depth + 1))
        else:  # (rare: plain scalars are never pushed; the top value may be one)
            held = _scalar_held(v, t)
            if held is None:
                return _where(value, limit), loose
            loose = loose or held == "loose"
    return None, loose


def _scalar_held(v: object, t: type) -> Literal["plain", "loose"] | None:
    """How a JSON line holds scalar ``v`` (of type ``t``): "plain", "loose"
    (a subclass of str, int or float: as its value), or None: it cannot."""
    if t is str or t is int or t is bool or v is None:
        return "plain"
    if isinstance(v, str | int) or (isinstance(v, float) and math.isfinite(v)):
        return "plain" if t is float else "loose"  # (an enum of str or int: its value)
    return None


def _where(value: object, limit: int) -> Problem:
    """The path of the first problem (the slow way: only once one is known)."""
    found = _find(value, "", limit, limit)
    assert found is not None  # (json_problem saw one)
    if len(found.path) > _PATH_SHOWN:  # (128 levels of `.a`)
        return found._replace(path=found.path[: _PATH_SHOWN - 1] + "…")
    return found


def _find(v: object, path: str, depth: int, limit: int) -> Problem | None:
    if isinstance(v, bool | str | int) or v is None:
        return None
    if isinstance(v, float):
        return (
            None if math.isfinite(v) else Problem(path, f"{v!r} is not a finite number")
        )
    if type(v) in (dict, list, tuple):
        if depth <= 0:
            what = f"nested deeper than {limit} levels"
            return Problem(path, f"a value JSON cannot hold ({what})")
        if isinstance(v, dict):
            for k, x in v.items():
                if type(k) is not str:
                    what = f"key {k!r} is a {type(k).__name__}; object keys are str"
                    return Problem(path, f"a value JSON cannot hold ({what})")
                if (
                    p := _find(x, f"{path}.{k}" if path else k, depth - 1, limit)
                ) is not None:
                    return p
        else:
            for i, x in enumerate(v):  # type: ignore[arg-type]
                if (p := _find(x, f"{path}[{i}]", depth - 1, limit)) is not None:
                    return p
        return None
    return Problem(path, f"a value JSON cannot hold (type {type(v).__name__})")
