"""structlog, configured for the edges: stderr only, JSON unless a terminal.

stdout is the verdict channel, so every log line goes to stderr. The core
never logs; the runner logs what the core returns (errors, anomalies,
summaries) as snake_case events with key/value context.

Nothing is imported before the first log line. JSON lines (a pipe or a file:
CI, services) are written by :class:`_JsonLines`, which gives the bytes
structlog's JSON pipeline gives here (``tests/runtime/test_log_lines.py`` holds
the two side by side) without importing it: structlog imports asyncio at its top
(~40 ms, ssl with it), which a batch ``grade`` or a cold hook never needs.
structlog renders for a terminal, where its console renderer earns its place.
"""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import IO, Any, BinaryIO, Final, TextIO, cast

import msgspec

__all__ = ("configure", "get_logger")

_ENC: Final = msgspec.json.Encoder(enc_hook=repr)
_LEVELS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
_settings: dict[str, Any] = {}


def _dumps(obj: Any, default: Any = None) -> bytes:
    # JSONRenderer always passes default=; msgspec takes enc_hook instead.
    return _ENC.encode(obj)


def configure(
    *, level: str = "info", stream: IO[bytes] | None = None, json: bool | None = None
) -> None:
    """Log to ``stream`` (stderr), JSON unless it is a terminal; applied on the
    first log line."""
    _settings.clear()
    _settings.update(level=level, stream=stream, json=json)
    _LazyLogger.ready = False


def _output(stream: IO[bytes] | None, json: bool | None) -> tuple[IO[bytes], bool]:
    out = stream if stream is not None else sys.stderr.buffer
    if json is None:
        json = not (hasattr(out, "isatty") and out.isatty())
    return out, json


def structlog_json_processors(structlog: Any) -> list[Any]:
    """structlog's processors for the JSON lines :class:`_JsonLines` writes."""
    return [
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.JSONRenderer(serializer=_dumps),
    ]


def _setup(
    *, level: str = "info", stream: IO[bytes] | None = None, json: bool | None = None
) -> None:
    """structlog for a terminal (JSON lines need no set-up: :class:`_JsonLines`)."""
    out, json = _output(stream, json)
    import structlog

    processors: list[Any]
    if json:
        processors = structlog_json_processors(structlog)
        factory: Any = structlog.BytesLoggerFactory(cast("BinaryIO", _Lossy(out)))
    else:
        processors = [
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.dev.ConsoleRenderer(colors=True),
        ]
        # Resolved at each write: a live status display swaps sys.stderr
        # to print log lines above itself.
        factory = structlog.PrintLoggerFactory(cast("TextIO", _Stderr()))
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(
            _LEVELS.get(level, logging.INFO)
        ),
        logger_factory=factory,
        cache_logger_on_first_use=False,
    )


class _JsonLines:
    """A bound logger writing the JSON lines of :func:`structlog_json_processors`.

    The same keys in the same order: the bound context, the call's keywords,
    ``event``, ``level``, ``timestamp`` (ISO 8601, UTC, ``Z``), encoded by the
    same msgspec encoder, one line per call, flushed.
    """

    __slots__ = ("_context", "_floor", "_out")

    def __init__(self, context: dict[str, Any], out: _Lossy, floor: int) -> None:
        self._context = context
        self._out = out
        self._floor = floor

    def _emit(self, level: str, event: str, args: tuple[Any, ...], kw: Any) -> None:
        fields = {**self._context, **kw}
        fields["event"] = event % args if args else event
        fields["level"] = level
        now = datetime.now(tz=UTC).isoformat()
        fields["timestamp"] = now.replace("+00:00", "Z")
        self._out.write(_ENC.encode(fields) + b"\n")
        self._out.flush()

    def _at(self, number: int, level: str) -> Any:
        if number < self._floor:
            return _ignore
        return lambda event, *args, **kw: self._emit(level, event, args, kw)

    def __getattr__(self, method: str) -> Any:
        if method == "exception":  # structlog: an error line with exc_info
            at = self._at(logging.ERROR, "error")

            def exception(event: str, *args: Any, **kw: Any) -> None:
                kw.setdefault("exc_info", True)
                at(event, *args, **kw)

            return exception
        number = _LEVELS.get(method, logging.CRITICAL if method == "critical" else None)
        if number is None:
            raise AttributeError(method)
        return self._at(number, method)


class _Lossy:
    """A log stream whose reader may go away (``2>&1 | head``): from then on
    log lines are dropped. A log line that cannot be written must not end
    the run (``trajgrade run`` would take its agent down with it)."""

    def __init__(self, out: IO[bytes]) -> None:
        self._out = out
        self._gone = False

    def write(self, data: bytes) -> int:
        if not self._gone:
            try:
                return self._out.write(data)
            except (OSError, ValueError):  # a broken pipe; a closed file
                self._gone = True
        return len(data)

    def flush(self) -> None:
        if not self._gone:
            try:
                self._out.flush()
            except (OSError, ValueError):
                self._gone = True


class _Stderr:
    """Whatever ``sys.stderr`` is now; lines are dropped once it is gone."""

    def write(self, text: str) -> int:
        try:
            return sys.stderr.write(text)
        except (OSError, ValueError):
            return len(text)

    def flush(self) -> None:
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass


class _LazyLogger:
    """Stands in for a bound structlog logger until the first log call."""

    ready: bool = False

    def __init__(self, context: dict[str, Any]) -> None:
        self._context = context
        self._logger: Any = None

    def __getattr__(self, method: str) -> Any:
        level = _LEVELS.get(method)
        if (
            self._logger is None
            and level is not None
            and level < _LEVELS.get(_settings.get("level", "info"), logging.INFO)
        ):
            return _ignore  # filtered out anyway: do not load structlog for it
        if self._logger is None:
            self._logger = _bound(self._context)
        return getattr(self._logger, method)


def _bound(context: dict[str, Any]) -> Any:
    out, json = _output(_settings.get("stream"), _settings.get("json"))
    if json:
        floor = _LEVELS.get(_settings.get("level", "info"), logging.INFO)
        return _JsonLines(context, _Lossy(out), floor)
    if not _LazyLogger.ready:
        _setup(**_settings)  # (imports structlog)
        _LazyLogger.ready = True
    import structlog

    return structlog.get_logger("trajgrade").bind(**context)


def _ignore(*args: Any, **kwargs: Any) -> None:
    """A log call below the configured level."""


def get_logger(**context: Any) -> Any:
    """A bound logger with ``context`` attached (structlog loads on first use)."""
    return _LazyLogger(context)
