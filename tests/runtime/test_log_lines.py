"""The JSON log lines trajgrade writes itself are structlog's, byte for byte.

:class:`trajgrade.runtime.log._JsonLines` stands in for structlog's JSON
pipeline (add_log_level, an ISO UTC TimeStamper, JSONRenderer over msgspec)
so that a batch run or a hook never imports structlog (and asyncio with it).
Here both write the same calls; the lines must be equal once the timestamps,
taken a few microseconds apart, are set aside (their format is checked).
"""

from __future__ import annotations

import io
import re
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

import pytest
import structlog
from hypothesis import given
from hypothesis import strategies as st

from trajgrade.runtime import log as tlog

if TYPE_CHECKING:
    from collections.abc import Callable

_STAMP = re.compile(rb'"timestamp":"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{6})?Z)"')

_KEYS = st.text(min_size=1, max_size=8).filter(lambda k: k != "event")
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    # Not JSON: rendered through the encoder's repr hook, as structlog's is.
    | st.builds(PurePosixPath, st.text(max_size=10))
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
_FIELDS = st.dictionaries(_KEYS, _VALUES, max_size=5)
_METHODS = st.sampled_from(
    ["debug", "info", "warning", "error", "critical", "exception"]
)


def _structlog(out: io.BytesIO, floor: int, context: dict[str, Any]) -> Any:
    return structlog.wrap_logger(
        structlog.BytesLogger(out),
        processors=tlog.structlog_json_processors(structlog),
        wrapper_class=structlog.make_filtering_bound_logger(floor),
    ).bind(**context)


def _own(out: io.BytesIO, floor: int, context: dict[str, Any]) -> Any:
    return tlog._JsonLines(context, tlog._Lossy(out), floor)


def _line(
    make: Callable[[io.BytesIO, int, dict[str, Any]], Any],
    floor: int,
    context: dict[str, Any],
    method: str,
    event: str,
    kw: dict[str, Any],
    args: tuple[Any, ...] = (),
) -> bytes:
    """What one call of ``method`` on the logger ``make`` builds writes."""
    out = io.BytesIO()
    getattr(make(out, floor, context), method)(event, *args, **kw)
    return out.getvalue()


def _unstamped(line: bytes) -> bytes:
    if not line:
        return line
    [stamp] = _STAMP.findall(line)
    assert stamp.endswith(b"Z")
    return _STAMP.sub(b'"timestamp":"T"', line)


@given(
    floor=st.sampled_from([10, 20, 30, 40]),
    context=_FIELDS,
    method=_METHODS,
    event=st.text(max_size=20),
    kw=_FIELDS,
)
def test_the_same_line_as_structlogs_pipeline(
    floor: int, context: dict[str, Any], method: str, event: str, kw: dict[str, Any]
) -> None:
    theirs = _line(_structlog, floor, context, method, event, kw)
    ours = _line(_own, floor, context, method, event, kw)
    assert _unstamped(ours) == _unstamped(theirs)


def test_positional_arguments_are_formatted_into_the_event() -> None:
    call = (20, {"a": 1}, "info", "read %d of %s", {}, (3, "f"))
    ours = _line(_own, *call)
    assert b'"event":"read 3 of f"' in ours
    assert _unstamped(ours) == _unstamped(_line(_structlog, *call))


def test_an_unknown_method_is_an_attribute_error_as_in_structlog() -> None:
    logger = tlog._JsonLines({}, tlog._Lossy(io.BytesIO()), 20)
    with pytest.raises(AttributeError):
        logger.shout("x")
