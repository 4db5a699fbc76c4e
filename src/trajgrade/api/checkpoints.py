"""StreamGrader's checkpoints: its traces' state as bytes, and back.

A mixin of :class:`trajgrade.api.stream_grader.StreamGrader` (kept apart so api.py reads
as the feeding API it mostly is). A checkpoint names its format version and
its policy's fingerprint; a refused one changes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import msgspec

from trajgrade.api.checks import exclusive
from trajgrade.engine.engine import Engine, EngineState
from trajgrade.errors import ConfigError, InputError, Location, StateError

if TYPE_CHECKING:
    import threading
    from collections.abc import Mapping

    from trajgrade.config.model import Suite
    from trajgrade.pipeline.decoder import SourceDecoder

__all__ = ("Checkpointing",)

_CHECKPOINT_VERSION: Final = 1
_BYTES: Final[tuple[type, ...]] = (bytes, bytearray, memoryview)


class _Checkpoint(msgspec.Struct, array_like=True):
    version: int
    fingerprint: str
    engine: EngineState


class _Header(msgspec.Struct, array_like=True):
    """A checkpoint's first fields, read before the rest (whose form may
    differ in another version)."""

    version: int
    fingerprint: str


class Checkpointing:
    """``checkpoint`` and ``restore``."""

    # StreamGrader's own fields these use.
    suite: Suite
    engine: Engine
    _lock: threading.Lock
    _samples: Mapping[str, Any] | None
    _decoders: dict[str, SourceDecoder]

    @exclusive
    def checkpoint(self) -> bytes:
        """Every trace's state as bytes (msgpack). Take it between records:
        a partial line held by :meth:`feed_bytes` is not included."""
        state = _Checkpoint(
            version=_CHECKPOINT_VERSION,
            fingerprint=self.suite.fingerprint,
            engine=self.engine.checkpoint(),
        )
        return msgspec.msgpack.encode(state)

    @exclusive
    def restore(self, data: bytes) -> None:
        """Load a :meth:`checkpoint` taken with the same policy into this
        grader, which must not have graded anything yet.

        Raises :class:`~trajgrade.errors.ConfigError` when it came from another
        policy, :class:`~trajgrade.errors.InputError` when it is not a
        checkpoint (or one of another format version), and
        :class:`~trajgrade.errors.StateError` when this grader has state of
        its own. A refused checkpoint changes nothing.
        """
        if not isinstance(data, _BYTES):
            msg = f"restore() takes the bytes checkpoint() gave, not a {type(data).__name__}"
            raise TypeError(msg)
        stats = self.engine.statistics()
        if self._decoders or stats.events or stats.rejected_events:
            msg = (
                "restore() loads a checkpoint into a grader that has graded nothing "
                "yet, and this one has traces or input of its own; build a new "
                "StreamGrader of the same policy and restore into it"
            )
            raise StateError(msg)
        try:
            head = msgspec.msgpack.decode(data, type=_Header)
        except ValueError as exc:  # (msgspec's errors, and a str's bad UTF-8)
            msg = f"not a StreamGrader checkpoint ({exc}); pass bytes from checkpoint()"
            raise InputError(msg) from None
        if head.version != _CHECKPOINT_VERSION:
            msg = (
                f"checkpoint format version {head.version}, and this trajgrade reads "
                f"version {_CHECKPOINT_VERSION}; restore it with the trajgrade version "
                f"that took it (or let it finish there)"
            )
            raise InputError(msg)
        if head.fingerprint != self.suite.fingerprint:
            msg = (
                f"checkpoint was taken with another policy (fingerprint {head.fingerprint}, "
                f"this one {self.suite.fingerprint}); restore it into a grader built from the same config"
            )
            raise ConfigError(msg, location=Location(file=self.suite.source))
        try:
            state = msgspec.msgpack.decode(data, type=_Checkpoint)
            # Tried on a scratch engine first: bytes that fail half-way
            # leave this grader as it was (and grader.engine stays the same
            # object for callers that hold it).
            Engine(self.suite, samples=self._samples).load(state.engine)
        except (ValueError, TypeError) as exc:  # (msgspec's errors are ValueErrors)
            msg = f"not a StreamGrader checkpoint ({exc}); pass bytes from checkpoint()"
            raise InputError(msg) from None
        # (Decoded again: the scratch engine may hold the first copy's objects.)
        self.engine.load(msgspec.msgpack.decode(data, type=_Checkpoint).engine)
