"""structlog, configured for the edges: stderr only, JSON unless a terminal.

stdout is the verdict channel, so every log line goes to stderr. The core
never logs; the runner logs what the core returns (errors, anomalies,
summaries) as snake_case events with key/value context.
"""

from __future__ import annotations

import logging
import sys
from typing import IO, Any, BinaryIO, Final, cast

import msgspec
import structlog

__all__ = ("configure", "get_logger")

_ENC: Final = msgspec.json.Encoder(enc_hook=repr)
_LEVELS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


def _dumps(obj: Any, default: Any = None) -> bytes:
    # JSONRenderer always passes default=; msgspec takes enc_hook instead.
    return _ENC.encode(obj)


def configure(
    *, level: str = "info", stream: IO[bytes] | None = None, json: bool | None = None
) -> None:
    """Route structlog to ``stream`` (stderr), JSON unless it is a terminal."""
    out = stream if stream is not None else sys.stderr.buffer
    if json is None:
        json = not (hasattr(out, "isatty") and out.isatty())
    processors: list[Any] = [
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if json:
        processors.append(structlog.processors.JSONRenderer(serializer=_dumps))
        factory: Any = structlog.BytesLoggerFactory(cast("BinaryIO", out))
    else:
        processors.append(structlog.dev.ConsoleRenderer(colors=True))
        factory = structlog.PrintLoggerFactory(sys.stderr)
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(
            _LEVELS.get(level, logging.INFO)
        ),
        logger_factory=factory,
        cache_logger_on_first_use=False,
    )


def get_logger(**context: Any) -> Any:
    """A bound logger with ``context`` attached."""
    return structlog.get_logger("trajgrade").bind(**context)
