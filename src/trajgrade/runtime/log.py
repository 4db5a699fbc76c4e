"""structlog, configured for the edges: stderr only, JSON unless a terminal.

stdout is the verdict channel, so every log line goes to stderr. The core
never logs; the runner logs what the core returns (errors, anomalies,
summaries) as snake_case events with key/value context.

structlog is imported on the first log line, not before: a quiet run with
nothing to report never pays for it.
"""

from __future__ import annotations

import logging
import sys
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


def _import_structlog(*, json: bool) -> Any:
    """structlog, without rich when the lines are JSON.

    ``structlog.dev`` imports rich (a dependency of ours, for the live status
    line) if it can, only to format exceptions on a terminal: about 45 ms of
    start-up that a run logging JSON to a pipe or a file never uses. Hiding
    it for that one import makes structlog fall back to plain tracebacks,
    which JSON lines do not render anyway.
    """
    if json and "structlog" not in sys.modules and "rich" not in sys.modules:
        sys.modules["rich"] = None  # type: ignore[assignment]  # ImportError
        try:
            import structlog
        finally:
            del sys.modules["rich"]
    else:
        import structlog
    return structlog


def _setup(
    *, level: str = "info", stream: IO[bytes] | None = None, json: bool | None = None
) -> None:
    out = stream if stream is not None else sys.stderr.buffer
    if json is None:
        json = not (hasattr(out, "isatty") and out.isatty())
    structlog = _import_structlog(json=json)
    processors: list[Any] = [
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if json:
        processors.append(structlog.processors.JSONRenderer(serializer=_dumps))
        factory: Any = structlog.BytesLoggerFactory(cast("BinaryIO", _Lossy(out)))
    else:
        processors.append(structlog.dev.ConsoleRenderer(colors=True))
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
            if not _LazyLogger.ready:
                _setup(**_settings)  # (imports structlog)
                _LazyLogger.ready = True
            import structlog

            self._logger = structlog.get_logger("trajgrade").bind(**self._context)
        return getattr(self._logger, method)


def _ignore(*args: Any, **kwargs: Any) -> None:
    """A log call below the configured level."""


def get_logger(**context: Any) -> Any:
    """A bound logger with ``context`` attached (structlog loads on first use)."""
    return _LazyLogger(context)
