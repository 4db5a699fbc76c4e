"""agentv argument matching: ``deepEqual`` and the ``args_match`` modes.

These reproduce ``graders/scoring.ts::deepEqual`` and ``argsMatch`` of
agentv's ``tool-trajectory.ts`` on JSON values as Python holds them:

* ``deep_equal`` is type-strict the JavaScript way: ``10 != "10"``,
  ``True != 1`` (JavaScript booleans are not numbers), ``10 == 10.0`` (one
  number type), ``None`` only equals ``None``, ``NaN != NaN``, arrays compare
  in order, objects by key set and values.
* The actual arguments are what the call carried: its object (``args``), or
  else its raw string (``args_raw``: agentv does not parse a JSON-string
  input, so an object expectation never equals it), or else any other JSON
  value (``args_json``: ``null``, numbers, arrays), or else *undefined*.
  Object operations see what JavaScript sees: a string's or an array's keys
  are its indices (and ``Object.hasOwn`` sees ``length``), numbers have no
  keys, and ``null`` throws a TypeError (an ``error`` verdict here).
* ``superset`` is partial at the top level only; nested values compare with
  full ``deep_equal``. A field list compares dot paths and skips paths the
  expectation does not set.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Callable

    from trajgrade.errors import GradeError
    from trajgrade.events import ToolCall

__all__ = (
    "ARGS_MODES",
    "UNDEFINED",
    "ArgsMode",
    "actual_args",
    "compile_args",
    "deep_equal",
)

#: The named ``args_match`` modes; a tuple of field paths is the fifth form.
ARGS_MODES: Final = ("exact", "superset", "subset", "ignore")

ArgsMode = str | tuple[str, ...]


class _Undefined:
    """JavaScript's ``undefined``: an absent value, unequal to everything."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "undefined"


UNDEFINED: Final = _Undefined()


def deep_equal(a: Any, b: Any) -> bool:
    """agentv's ``deepEqual`` on JSON-like values."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float):
        return isinstance(b, int | float) and a == b
    if isinstance(a, str):
        return isinstance(b, str) and a == b
    if isinstance(a, list):
        return isinstance(b, list) and _lists_equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and _objects_equal(a, b)
    # YAML-only types (dates, ...) compare as themselves.
    return type(a) is type(b) and bool(a == b)


def _lists_equal(a: list[Any], b: list[Any]) -> bool:
    """Arrays: same length, equal in order."""
    return len(a) == len(b) and all(deep_equal(x, y) for x, y in zip(a, b, strict=True))


def _objects_equal(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Objects: the same key set, equal values."""
    return len(a) == len(b) and all(
        k in b and deep_equal(v, b[k]) for k, v in a.items()
    )


def actual_args(call: ToolCall) -> Any:
    """The value agentv would compare: the input object, a raw string input,
    any other JSON input as that value (``null`` too), or undefined."""
    if call.args is not None:
        return call.args
    if call.args_raw is not None:
        return call.args_raw
    if call.args_json is not None:
        import msgspec  # only agentv records carry args_json

        try:
            return msgspec.json.decode(call.args_json)
        except msgspec.DecodeError:
            return UNDEFINED
    return UNDEFINED


#: What node says when Object.keys / Object.hasOwn meet null.
NULL_OBJECT: Final = "TypeError: Cannot convert undefined or null to object"


def _keys(value: Any) -> dict[str, Any]:
    """``Object.keys`` as key -> value: a string's or an array's indices."""
    if isinstance(value, dict):
        return value
    if value is None:
        raise _null_input()
    if isinstance(value, str | list):
        return {str(i): v for i, v in enumerate(value)}
    return {}  # numbers and booleans have no own enumerable keys


def _has_own(value: Any, key: str) -> Any:
    """``Object.hasOwn(value, key)``: the own value, or UNDEFINED."""
    if isinstance(value, dict):
        return value.get(key, UNDEFINED)
    if value is None:
        raise _null_input()
    if isinstance(value, str | list):
        if key == "length":
            return len(value)
        return _keys(value).get(key, UNDEFINED)
    return UNDEFINED


def _null_input() -> GradeError:
    from trajgrade.errors import GradeError

    return GradeError(
        f"the call's input is null, and agentv's args matching throws here ({NULL_OBJECT}); "
        "give the call an object input, or use args_match: exact or ignore"
    )


def _path(value: Any, path: str) -> Any:
    # getNestedValue: descend while the value is an object (arrays included).
    for part in path.split("."):
        if isinstance(value, dict):
            value = value.get(part, UNDEFINED)
        elif isinstance(value, list) and part.isdigit() and str(int(part)) == part:
            index = int(part)
            value = value[index] if index < len(value) else UNDEFINED
        else:
            return UNDEFINED
    return value


def compile_args(
    expected: dict[str, Any] | None, mode: ArgsMode
) -> Callable[[Any], bool] | None:
    """A predicate over actual arguments, or None when every call matches
    (no expectation, ``args: any``, or ``args_match: ignore``)."""
    if expected is None or mode == "ignore":
        return None
    if isinstance(mode, tuple):
        checks = tuple(
            (path, want)
            for path in mode
            if (want := _path(expected, path)) is not UNDEFINED
        )

        def fields(actual: Any) -> bool:
            return actual is not UNDEFINED and all(
                deep_equal(want, _path(actual, path)) for path, want in checks
            )

        return fields
    if mode == "superset":

        def superset(actual: Any) -> bool:
            if actual is UNDEFINED:
                return False
            for k, v in expected.items():
                own = _has_own(actual, k)
                if own is UNDEFINED or not deep_equal(v, own):
                    return False
            return True

        return superset
    if mode == "subset":

        def subset(actual: Any) -> bool:
            if actual is UNDEFINED:
                return False
            return all(
                k in expected and deep_equal(v, expected[k])
                for k, v in _keys(actual).items()
            )

        return subset
    return lambda actual: actual is not UNDEFINED and deep_equal(expected, actual)
