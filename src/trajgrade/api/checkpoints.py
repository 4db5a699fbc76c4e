"""StreamGrader's checkpoints: its traces' state as bytes, and back.

Two functions over the state they need (the policy, the engine), which
:meth:`StreamGrader.checkpoint` and :meth:`StreamGrader.restore` call (kept
apart so stream_grader.py reads as the feeding API it mostly is). A
checkpoint names its format version and its policy's fingerprint, and is
sealed (:mod:`trajgrade._util.sealed`: its length and a CRC-32),
so bytes damaged in storage are refused rather than restored as other
state; a refused one changes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import msgspec

from trajgrade._util.sealed import DamagedError, is_sealed, seal, unseal
from trajgrade.engine.engine import Engine, EngineState
from trajgrade.errors import ConfigError, InputError, Location, StateError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from trajgrade.config.model import Suite

__all__ = ("restore_checkpoint", "take_checkpoint")

#: 2: sealed. Version 1 had no checksum and is refused.
_CHECKPOINT_VERSION: Final = 2
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


def take_checkpoint(suite: Suite, engine: Engine) -> bytes:
    """Every trace's state in ``engine`` as bytes (msgpack), named by
    ``suite``'s fingerprint."""
    state = _Checkpoint(
        version=_CHECKPOINT_VERSION,
        fingerprint=suite.fingerprint,
        engine=engine.checkpoint(),
    )
    return seal(msgspec.msgpack.encode(state))


def restore_checkpoint(
    data: bytes,
    *,
    suite: Suite,
    engine: Engine,
    samples: Mapping[str, Any] | None,
    reading: bool,
) -> None:
    """Load ``data`` (a :func:`take_checkpoint`) into ``engine``, which must
    have graded nothing (``reading``: the grader holds a source's input).

    The errors are :meth:`StreamGrader.restore`'s; a refused checkpoint
    changes nothing.
    """
    if not isinstance(data, _BYTES):
        msg = (
            f"restore() takes the bytes checkpoint() gave, not a {type(data).__name__}"
        )
        raise TypeError(msg)
    stats = engine.statistics()
    if reading or stats.events or stats.rejected_events:
        msg = (
            "restore() loads a checkpoint into a grader that has graded nothing "
            "yet, and this one has traces or input of its own; build a new "
            "StreamGrader of the same policy and restore into it"
        )
        raise StateError(msg)
    payload = _unsealed(data)
    try:
        head = msgspec.msgpack.decode(payload, type=_Header)
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
    if head.fingerprint != suite.fingerprint:
        msg = (
            f"checkpoint was taken with another policy (fingerprint {head.fingerprint}, "
            f"this one {suite.fingerprint}); restore it into a grader built from the same config"
        )
        raise ConfigError(msg, location=Location(file=suite.source))
    try:
        state = msgspec.msgpack.decode(payload, type=_Checkpoint)
        # Tried on a scratch engine first: bytes that fail half-way
        # leave this grader as it was (and grader.engine stays the same
        # object for callers that hold it).
        Engine(suite, samples=samples).load(state.engine)
    except (ValueError, TypeError) as exc:  # (msgspec's errors are ValueErrors)
        msg = f"not a StreamGrader checkpoint ({exc}); pass bytes from checkpoint()"
        raise InputError(msg) from None
    # (Decoded again: the scratch engine may hold the first copy's objects.)
    engine.load(msgspec.msgpack.decode(payload, type=_Checkpoint).engine)


def _unsealed(data: bytes | bytearray | memoryview) -> memoryview:
    """The checkpoint inside its envelope; an :class:`InputError` naming
    the damage (or the older, unsealed format)."""
    if not is_sealed(data):
        try:
            version = msgspec.msgpack.decode(data, type=_Header).version
        except ValueError:
            version = None
        if version == 1:
            msg = "checkpoint format version 1 has no checksum, and this trajgrade reads only checksummed checkpoints (version 2); restore it with the trajgrade version that took it (or let it finish there)"
            raise InputError(msg)
    try:
        return unseal(data)
    except DamagedError as exc:
        msg = f"not a StreamGrader checkpoint, or a damaged one ({exc}); pass bytes from checkpoint(), unchanged"
        raise InputError(msg) from None
