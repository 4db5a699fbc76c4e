"""Idle traces keep their grader states packed: memory per open trace.

A trace's grader states are a handful of small msgspec objects (about 1.2 KB
with the six benchmark checks); a consumer of many agents may hold a
hundred thousand traces open, most of them idle at any moment. Like a
streaming system's serialized state backend, the engine keeps only the
traces that had events lately as objects: once more than ``2 * warm``
traces are open as objects, a sweep packs the grader states of every trace
that had no event since the previous sweep, with its open call ids, into
one msgpack ``bytes`` (about 120 B with the six checks) and the trace's
next event unpacks them. The trace's own record (counters, flags, clocks)
stays as it is, so idle timeouts and statistics never unpack anything.

Packing is invisible in results: states are plain data that round-trip
through msgpack exactly (``--state`` checkpoints and hook sessions depend on
it), and settled graders (``_Trace.park``) come back on their routes, as
after a restore. ``tests/properties/test_packing.py`` runs engines that pack
at every sweep beside engines that never pack. With fewer open traces than
the limit (every batch run of the benchmark corpus) nothing is packed; the
cost is one attribute test per event.

A clock-driven grader (``wall-time``) is ticked only when it is due
(``deadline``, trajgrade.engine.clock), which unpacks its trace like an
event; a suite with a clock-driven grader that has no ``deadline`` is not
packed (every tick would visit every trace). Neither are suites with a
third-party grader, unless it says ``packs_state = True``: its state must
round-trip through msgpack only for ``--state``, which a plugin may never
have been run with (both read from ``Suite.capabilities``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Optional

import msgspec

from trajgrade.engine.state import NO_CALLS

if TYPE_CHECKING:
    from collections.abc import Sequence

    from trajgrade.engine.state import _Trace
    from trajgrade.graders import Grader
    from trajgrade.graders.capabilities import Capabilities

__all__ = ("PACKED", "WARM_TRACES", "Packer")

#: Open traces kept as objects before idle ones are packed (the sweep starts
#: at twice this many).
WARM_TRACES: Final = 4096
#: The ``states`` of a packed trace: empty, never written (the engine unpacks
#: a trace before it reads its states).
PACKED: Final[list[Any]] = []


class Packer:
    """Packs and unpacks the grader states (and open call ids) of one
    engine's traces."""

    def __init__(self, graders: Sequence[Grader[Any]], *, warm: int) -> None:
        # One fixed-length tuple type for the whole list of states, and the
        # open call ids (oldest first): one bytes object per trace, decoded
        # in one call. (A trace idle while a tool runs has a call open.)
        types = tuple(Optional[g.state_type] for g in graders)  # noqa: UP045
        packed = tuple[tuple[types], list[str]]  # type: ignore[valid-type]
        self._decode = msgspec.msgpack.Decoder(packed).decode
        self._encode = msgspec.msgpack.Encoder().encode
        self._warm = max(1, warm)
        #: How many open traces are packed now.
        self.cold = 0
        #: Events counted when the last sweep ended: sweeps are at least
        #: ``warm`` events apart, so their cost stays bounded per event.
        self._swept_at = 0

    @classmethod
    def for_suite(
        cls,
        graders: Sequence[Grader[Any]],
        capabilities: Sequence[Capabilities],
        *,
        warm: int,
    ) -> Packer | None:
        """A packer for these graders, or None when their states are not
        packed (a clock-driven grader without a deadline, a third-party
        grader that does not say its state packs, a state type msgpack
        cannot decode)."""
        if warm <= 0 or any(
            _ticks_always(g, caps) or not caps.packs_state
            for g, caps in zip(graders, capabilities, strict=True)
        ):
            return None
        try:
            return cls(graders, warm=warm)
        except (TypeError, ValueError):  # a plugin's state type msgspec refuses
            return None

    def unpacked(self, tr: _Trace) -> tuple[list[Any], list[str]]:
        """A packed trace's grader states and open call ids, decoded (the
        trace stays packed)."""
        assert tr.packed is not None
        states, calls = self._decode(tr.packed)
        return list(states), calls

    def forget(self, tr: _Trace) -> None:
        """``tr`` left the engine without being unpacked (a checkpoint
        replaced or closed it)."""
        if tr.packed is not None:
            self.cold -= 1

    def thaw(self, tr: _Trace) -> None:
        """Unpack a trace's grader states (its next event, or its end)."""
        tr.states, calls = self.unpacked(tr)
        tr.calls = dict.fromkeys(calls) if calls else NO_CALLS
        tr.packed = None
        tr.mark = tr.events
        self.cold -= 1

    def sweep(self, traces: dict[str, _Trace], events: int) -> None:
        """When too many traces are open as objects, pack those that had no
        event since the previous sweep (each trace gets a second chance)."""
        if len(traces) - self.cold <= 2 * self._warm:
            return
        if events - self._swept_at < self._warm:
            return
        encode = self._encode
        for tr in traces.values():
            if tr.packed is not None:
                continue
            if tr.events != tr.mark:
                tr.mark = tr.events
                continue
            tr.unpark()  # settled graders come back on their routes when unpacked
            tr.packed = encode((tr.states, list(tr.calls)))
            tr.states = PACKED
            tr.calls = NO_CALLS
            self.cold += 1
        self._swept_at = events


def _ticks_always(grader: Grader[Any], capabilities: Capabilities) -> bool:
    """A clock-driven grader that cannot say when it is due: every tick
    visits every open trace's state."""
    return grader.uses_clock and capabilities.deadline is None
