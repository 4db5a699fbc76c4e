"""The exception tree, and where things went wrong.

::

    TrajgradeError
    ├── ConfigError          a config file or grader spec is invalid (one error)
    │   └── ConfigErrors     several ConfigErrors found in one pass
    ├── InputError           a record could not be read as an event
    ├── GradeError           a grader could not decide (e.g. regex timed out)
    ├── SourceError          an input could not be opened or read
    ├── SinkError            verdicts could not be written
    ├── StateError           a state directory or checkpoint cannot be used
    │   └── StateAccessError the state directory or a file in it cannot be
    │                        read or written at start-up (permission, not a
    │                        directory)
    ├── BindError            a listening address cannot be bound (port taken)
    ├── BrokerError          the Kafka broker cannot be reached at start-up, or
    │                        an input topic is missing
    └── ConcurrentUseError   a StreamGrader was called while a call on it ran

Every error carries a :class:`Location` (file, line, field) when one is known,
and its message ends with what to do about it. Messages are part of the API:
tests match them.
"""

from __future__ import annotations

from typing import Final

import msgspec

__all__ = (
    "BindError",
    "BrokerError",
    "ConcurrentUseError",
    "ConfigError",
    "ConfigErrors",
    "GradeError",
    "InputError",
    "Location",
    "SinkError",
    "SourceError",
    "StateAccessError",
    "StateError",
    "TrajgradeError",
)


class Location(msgspec.Struct, frozen=True, omit_defaults=True):
    """Where a problem is: a file (or ``<stdin>``), a 1-based line, a field path."""

    file: str | None = None
    line: int | None = None
    field: str | None = None

    def __str__(self) -> str:
        head = self.file or ""
        if self.line is not None:
            head = f"{head}:{self.line}" if head else f"line {self.line}"
        if self.field:
            return f"{head}: {self.field}" if head else self.field
        return head


_NOWHERE: Final = Location()


class TrajgradeError(Exception):
    """Base class of every error trajgrade raises on purpose."""

    #: Whether retrying the same operation later may succeed.
    retriable: bool = False

    def __init__(self, message: str, *, location: Location | None = None) -> None:
        self.message = message
        self.location = location or _NOWHERE
        where = str(self.location)
        super().__init__(f"{where}: {message}" if where else message)


class ConfigError(TrajgradeError):
    """Raised when a config file or a grader spec is invalid."""


class ConfigErrors(ConfigError):
    """Raised when loading a config found several errors; ``errors`` has them all."""

    def __init__(self, errors: list[ConfigError]) -> None:
        self.errors = errors
        lines = "\n".join(str(e) for e in errors)
        super().__init__(f"{len(errors)} config errors:\n{lines}")
        # The summary has no single place; each member carries its own.
        self.location = _NOWHERE


class InputError(TrajgradeError):
    """Raised (or reported) when an input record cannot be turned into an event."""

    def __init__(
        self,
        message: str,
        *,
        location: Location | None = None,
        trace_id: str | None = None,
    ) -> None:
        super().__init__(message, location=location)
        #: The trace the bad record belonged to, when it could still be read.
        self.trace_id = trace_id


class GradeError(TrajgradeError):
    """Raised inside a grader when it cannot decide; becomes an ``error`` verdict."""


class SourceError(TrajgradeError):
    """Raised when an input cannot be opened or read."""


class SinkError(TrajgradeError):
    """Raised when verdicts cannot be written."""


class StateError(TrajgradeError):
    """Raised when a state directory or its checkpoint cannot be used."""


class StateAccessError(StateError):
    """Raised at start-up when the state directory, or a file in it, cannot
    be read or written (permission, a file where the directory should be)."""


class BindError(TrajgradeError):
    """Raised when a listening address (``--metrics-port``, ``--otlp``,
    ``serve``'s socket) cannot be bound: taken, or not this host's."""


class BrokerError(SourceError):
    """Raised when the Kafka broker cannot be reached at start-up, or an
    input topic does not exist."""


class ConcurrentUseError(TrajgradeError, RuntimeError):
    """Raised when a StreamGrader is called while another call on it runs
    (two threads, or a callback re-entering it): it holds one stream's
    state, so each thread needs its own (sharing the compiled Suite)."""
