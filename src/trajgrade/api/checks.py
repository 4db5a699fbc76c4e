"""StreamGrader's checks at the edge: one call at a time, and the options
and arguments a careless caller could get wrong (refused when given, not
deep inside a later call)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, TypeVar

from trajgrade.errors import ConcurrentUseError

if TYPE_CHECKING:
    import threading
    from collections.abc import Callable, Mapping

__all__ = ("check_source", "escaped", "exclusive")

_P = ParamSpec("_P")
_R = TypeVar("_R")


class _Locked(Protocol):
    _lock: threading.Lock


_S = TypeVar("_S", bound=_Locked)


def exclusive(
    method: Callable[Concatenate[_S, _P], _R],
) -> Callable[Concatenate[_S, _P], _R]:
    """One call at a time: a StreamGrader is one stream's state, and two
    threads feeding it at once would corrupt it silently; they get
    ConcurrentUseError instead (a lock taken without waiting: no contention
    in correct use)."""

    @functools.wraps(method)
    def call(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        if not self._lock.acquire(blocking=False):
            msg = (
                f"StreamGrader.{method.__name__}() was called while another call on "
                f"this grader is running (another thread, or a callback inside a "
                f"call); give each thread its own StreamGrader (they may share one "
                f"Suite: StreamGrader(suite)), or serialise the calls with a lock"
            )
            raise ConcurrentUseError(msg)
        try:
            return method(self, *args, **kwargs)
        finally:
            self._lock.release()

    return call


def escaped(item: Mapping[str, Any]) -> bytes | None:
    """A mapping holding lone surrogates as JSON with ``\\uXXXX`` escapes,
    which the decoders read as U+FFFD as they do in a log line (None when
    it holds what JSON cannot)."""
    import json

    try:
        return json.dumps(item, ensure_ascii=True, allow_nan=False).encode()
    except (TypeError, ValueError, RecursionError):
        return None


def check_source(source: object) -> None:
    """A feed's ``source`` names a trace: a str (or None, the grader's own).
    An int (a connection number) opened a trace whose id was not a str,
    and every later finish() raised, losing all the final verdicts."""
    if source is not None and type(source) is not str:
        msg = (
            f"source must be a str (it names the source's default trace) or None, "
            f"got {source!r}; pass str({source!r}) to name it by that"
        )
        raise TypeError(msg)
