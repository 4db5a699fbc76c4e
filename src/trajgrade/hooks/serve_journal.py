"""``trajgrade serve``'s decision journal: a session's new state is durable
before its call is answered.

Every decision appends the session's whole new :class:`SessionState` to
``<state dir>/serve.journal.<n>`` (:mod:`trajgrade.runtime.journal`:
length, crc32, then the msgpack record). A checkpoint rotates the journal,
saves every changed session to its state file, and only then drops the old
segments, so at every instant each answered decision is in a state file or
in a journal segment. At start-up the segments are replayed (the last record
of each session wins: a record is appended under the session's lock, so it
is never older than that session's state file) into the state files, then
dropped; a damaged tail is logged with its file and offset and the intact
records before it are used.

Why the whole state and not a delta: a state is small and bounded (a few
KiB, docs/reliability.md), and a whole state replays by itself, without
the engine, the suite or the order of other sessions' records.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Final

import msgspec

from trajgrade.hooks.session import SessionState
from trajgrade.runtime.journal import Journal, JournalClosed, recover

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from trajgrade.hooks.store import SessionStore

__all__ = ("JOURNAL_NAME", "DecisionJournal", "StateNotDurable")

JOURNAL_NAME: Final = "serve.journal"


class _Entry(msgspec.Struct, array_like=True):
    agent: str
    state: SessionState


_ENC: Final = msgspec.msgpack.Encoder()
_DEC: Final = msgspec.msgpack.Decoder(_Entry)


class StateNotDurable(Exception):
    """A decision's state could not be journaled: its call must be denied."""

    def __init__(self, directory: str, exc: OSError) -> None:
        self.cause = exc
        super().__init__(
            "trajgrade serve is stopping: this call was not graded, so it is "
            "denied (fail-closed); the next call goes to the daemon that replaces it"
            if isinstance(exc, JournalClosed)
            else f"trajgrade could not record this session's guard state in {directory} "
            f"({exc.strerror or exc}), so it denies the call (fail-closed): free "
            "space or fix the state directory"
        )


class DecisionJournal:
    """The journal of one daemon's state directory."""

    def __init__(
        self,
        directory: str,
        stores: Mapping[str, SessionStore],
        *,
        fsync: bool,
        log: Callable[..., None],
    ) -> None:
        self.directory = directory
        self.replayed = _replay(directory, stores, log)
        self._journal = Journal(directory, JOURNAL_NAME, fsync=fsync)
        self._log = log

    def record(self, agent: str, state: SessionState) -> None:
        """Make ``state`` durable; :class:`StateNotDurable` when it cannot be."""
        try:
            self._journal.append(_ENC.encode(_Entry(agent=agent, state=state)))
        except OSError as exc:
            raise StateNotDurable(self.directory, exc) from None

    def rotate(self) -> list[str]:
        """Start a new segment before a checkpoint; the older ones."""
        return self._journal.rotate()

    def drop(self, segments: list[str]) -> None:
        """The checkpoint saved every session: the old segments can go."""
        self._journal.drop(segments)

    def close(self) -> None:
        """Refuse every later record (the daemon is stopping)."""
        self._journal.close()


def _replay(
    directory: str, stores: Mapping[str, SessionStore], log: Callable[..., None]
) -> int:
    """Save the last journaled state of each session; how many.

    Raises ``OSError`` when a state cannot be saved: the daemon must not
    start and answer from states older than what it answered before.
    """
    found = recover(directory, JOURNAL_NAME)
    for damage in found.damage:
        log(
            "warning",
            "journal_damaged",
            path=damage.path,
            offset=damage.offset,
            reason=damage.reason,
        )
    last: dict[tuple[str, str], SessionState] = {}
    for data in found.records:
        try:
            entry = _DEC.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            log("warning", "journal_record_unreadable", error=str(exc))
            continue
        last[(entry.agent, entry.state.session)] = entry.state
    for (agent, session), state in last.items():
        store = stores.get(agent)
        if store is None:
            continue
        with store.locked(session):
            store.save(state, fsync=True)
    for path in found.segments:
        os.unlink(path)
    if last:
        log("info", "journal_replayed", sessions=len(last), records=len(found.records))
    return len(last)
