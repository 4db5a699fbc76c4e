"""Hosting: one trace's grading state kept in another engine's state store.

A stream processor (Quix Streams, Apache Flink) keeps per-key state itself,
checkpoints it and moves it when it rescales. :class:`TraceHost` is what it
needs to hold trajgrade's graders that way: a policy compiled once, and per
trace a small :class:`TraceState` it feeds record by record, snapshots to
bytes after any record and restores from them on any worker::

    host = TraceHost.from_policy("policy.yaml")
    state = host.open("trace-1")               # or host.restore(stored_bytes)
    for out in host.feed(state, record):       # one event: a line, or a dict
        send(key=out.trace_id, value=out.to_json())
    stored_bytes = host.snapshot(state)        # ≤ 1 KB with the six benchmark checks
    ...
    host.finish(state, reason="idle")          # the host's idle timer, or the end

The grading is the file runner's: a :class:`~trajgrade.engine.hosted.HostedEngine`
loads the trace's state (an engine checkpoint of that one trace), runs the
engine on the record's events and gives the state back, so the verdicts are
the ones ``trajgrade grade`` prints for the same events (same JSON, same
ids). There is no clock: ``now`` is never read, time is the events' own.

Records decode as a log's lines do. The format is the host's ``format``, or
detected from each trace's first record. A format whose records decode
alone (``native``, which ``trajgrade convert`` writes) restores exactly
after any record; the agents' own line formats (Claude Code, Codex, …) keep
a reader that pairs one record with the next, which is not part of the
snapshot: after a restore the trace's next records are read by a fresh
reader, as a Kafka partition that moved is.

Outputs carry stable ids (a verdict's own id; a decision's from its trace,
grader, event number and call), so a host that replays records after a
crash (at-least-once) emits duplicates that downstream can drop by id.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Literal

import msgspec

from trajgrade.api.records import Refused, record_line
from trajgrade.config.compile import compile_suite, load_suite
from trajgrade.config.decode import decode_config
from trajgrade.engine.hosted import HostedEngine
from trajgrade.engine.state import EngineState
from trajgrade.errors import ConfigError, InputError, Location
from trajgrade.formats import BUILTIN, SniffsDocuments, detect, sniff_trace_id
from trajgrade.graders import BuildContext
from trajgrade.pipeline.decoder import API_FIXES, SourceDecoder
from trajgrade.pipeline.grading import Grading
from trajgrade.verdicts import keyed_id

if TYPE_CHECKING:
    import os
    from collections.abc import Callable

    from trajgrade.config.model import Suite
    from trajgrade.engine.engine import Engine
    from trajgrade.pipeline.batches import Batch
    from trajgrade.verdicts import GuardDecision, Verdict

__all__ = ("HostOutput", "TraceHost", "TraceState")

#: Snapshot layout version (its first msgpack field); another is refused.
SNAPSHOT_VERSION: Final = 1
_CRC: Final = 4  # bytes of CRC-32 before the msgpack body
_FINGERPRINT: Final = 16  # hex digits of the policy fingerprint kept per trace
_ENC: Final = msgspec.msgpack.Encoder()
_JSON: Final = msgspec.json.Encoder()
_BYTES: Final[tuple[type, ...]] = (bytes, bytearray, memoryview)


class HostOutput(msgspec.Struct, frozen=True, kw_only=True):
    """A verdict or a guard decision, as ``trajgrade grade`` writes it."""

    kind: Literal["verdict", "decision"]
    trace_id: str
    #: Stable across replays of the same records: drop duplicates by it.
    id: str
    #: The JSON object ``trajgrade grade`` prints (``--decisions`` for a decision).
    payload: dict[str, Any]

    def to_json(self) -> bytes:
        """``payload`` as one JSON document (no newline)."""
        return _JSON.encode(self.payload)


class _Data(msgspec.Struct, array_like=True):
    """A trace's state as plain data (what a snapshot holds)."""

    trace_id: str
    #: The engine's checkpoint of this one trace: its open snapshot, its
    #: closed mark (late records are dropped), or a taint waiting for it.
    engine: EngineState
    #: The format its records are read in, once known.
    format: str | None = None
    #: Records fed (the next one is line ``records + 1`` in error messages).
    records: int = 0


class _Snapshot(msgspec.Struct, array_like=True):
    version: int
    fingerprint: str
    data: _Data


class _Version(msgspec.Struct, array_like=True):
    """A snapshot's first field, read before the rest."""

    version: int


class _Named(msgspec.Struct):
    """Just a record's ``trace_id`` (msgspec skips the rest unread)."""

    trace_id: Any = None


_NAMED: Final = msgspec.json.Decoder(_Named)


_SNAPSHOT: Final = msgspec.msgpack.Decoder(_Snapshot)
_VERSION: Final = msgspec.msgpack.Decoder(_Version)


class TraceState:
    """One trace's grading state: plain data (:meth:`TraceHost.snapshot`),
    plus, for formats whose records do not decode alone, the live reader."""

    __slots__ = ("_data", "_decoder")

    def __init__(self, data: _Data) -> None:
        self._data = data
        self._decoder: SourceDecoder | None = None

    @property
    def trace_id(self) -> str:
        return self._data.trace_id

    @property
    def closed(self) -> bool:
        """The trace ended (or every verdict is final and nothing judges its
        calls): later records are dropped; a host may keep only a marker."""
        return bool(self._data.engine.closed)

    @property
    def records(self) -> int:
        """Records fed so far."""
        return self._data.records

    def __repr__(self) -> str:
        return f"TraceState({self.trace_id!r}, records={self.records}, closed={self.closed})"


class TraceHost:
    """A compiled policy, and the calls that grade one trace's state."""

    def __init__(
        self,
        suite: Suite,
        *,
        format: str = "auto",  # noqa: A002 (the CLI's name for it)
        samples: Mapping[str, Any] | None = None,
    ) -> None:
        if format != "auto" and format not in BUILTIN:
            known = ", ".join(sorted(BUILTIN))
            msg = f"unknown input format {format!r}; known formats: {known} (or 'auto')"
            raise ConfigError(msg, location=Location(field="format"))
        if isinstance(BUILTIN.get(format), SniffsDocuments):
            msg = f"format {format!r} is a whole JSON document, and a host feeds one record at a time; convert it first (`trajgrade convert`)"
            raise ConfigError(msg, location=Location(field="format"))
        self.suite = suite
        self.format = format
        self._engine = HostedEngine(suite, samples=samples)
        self._grading = Grading(self._engine)
        self._fingerprint = suite.fingerprint[:_FINGERPRINT]
        #: Per format: its records decode alone (a reader per record).
        self._alone: dict[str, bool] = {}

    @classmethod
    def from_policy(
        cls,
        path_or_text: str | os.PathLike[str],
        *,
        format: str = "auto",  # noqa: A002
        allow_code: bool = False,
        regex_timeout: float = 0.25,
        samples: Mapping[str, Any] | None = None,
    ) -> TraceHost:
        """Compile a policy: a file (a path, or a ``str`` of one line that is
        not JSON), or its YAML/JSON text (a ``str`` of several lines, or one
        that starts with ``{``). ``allow_code`` lets it run code it names
        (``--allow-code``); ``samples`` maps trace ids to dataset rows.

        Raises :class:`~trajgrade.errors.ConfigError` (every problem, located).
        """
        context = BuildContext(regex_timeout=regex_timeout, allow_code=allow_code)
        text = path_or_text if isinstance(path_or_text, str) else None
        if text is not None and ("\n" in text or text.lstrip().startswith("{")):
            json = text.lstrip().startswith("{")
            config = decode_config(text, name="<policy>", json=json)
            suite = compile_suite(config, context=context)
        else:
            suite = load_suite(path_or_text, context=context)
        return cls(suite, format=format, samples=samples)

    # ------------------------------------------------------------ states
    def open(self, trace_id: str) -> TraceState:
        """A fresh state for ``trace_id`` (nothing is graded until its first record)."""
        if not isinstance(trace_id, str) or not trace_id:
            msg = f"trace_id must be a non-empty str, got {trace_id!r}"
            raise TypeError(msg)
        return TraceState(
            _Data(trace_id, EngineState(traces=[], closed=[], unopened={}))
        )

    def snapshot(self, state: TraceState) -> bytes:
        """The state as bytes: CRC-32, then msgpack naming the snapshot
        version and the policy (see :meth:`restore`)."""
        body = _ENC.encode(_Snapshot(SNAPSHOT_VERSION, self._fingerprint, state._data))
        return zlib.crc32(body).to_bytes(_CRC, "big") + body

    def restore(self, data: bytes) -> TraceState:
        """A state from :meth:`snapshot`'s bytes, taken with the same policy.

        Raises :class:`~trajgrade.errors.InputError` for bytes that are not a
        snapshot (a bad checksum: damaged in the store) or one of another
        version, :class:`~trajgrade.errors.ConfigError` for one taken with
        another policy.
        """
        if not isinstance(data, _BYTES):
            msg = f"restore() takes the bytes snapshot() gave, not a {type(data).__name__}"
            raise TypeError(msg)
        raw = bytes(data)
        body = raw[_CRC:]
        if len(raw) <= _CRC or zlib.crc32(body).to_bytes(_CRC, "big") != raw[:_CRC]:
            msg = "not a TraceHost snapshot (its checksum does not match: damaged, or other bytes)"
            raise InputError(msg)
        problem = "its layout"
        try:
            snap = _SNAPSHOT.decode(body)
        except msgspec.DecodeError as exc:
            snap, problem = None, str(exc)
        if snap is None or snap.version != SNAPSHOT_VERSION:
            # (Its version alone first: another version's layout may differ.)
            try:
                version = _VERSION.decode(body).version
            except msgspec.DecodeError as exc:
                problem = str(exc)
            else:
                if version != SNAPSHOT_VERSION:
                    msg = f"TraceHost snapshot version {version}, and this trajgrade reads version {SNAPSHOT_VERSION}"
                    raise InputError(msg)
            msg = f"not a TraceHost snapshot ({problem})"
            raise InputError(msg)
        if snap.fingerprint != self._fingerprint:
            msg = (
                f"the snapshot was taken with another policy (fingerprint {snap.fingerprint}, "
                f"this one {self._fingerprint}); restore it with a host of the same policy"
            )
            raise ConfigError(msg, location=Location(file=self.suite.source))
        return TraceState(snap.data)

    # ------------------------------------------------------------ grading
    def trace_id_of(self, record: bytes | Mapping[str, Any]) -> str | None:
        """The trace a record names (its ``trace_id``), for a host's
        ``group_by``/``key_by``; None when it names none (key it yourself)."""
        if isinstance(record, Mapping):
            tid = record.get("trace_id")
            return tid if isinstance(tid, str) and tid else None
        if isinstance(record, _BYTES):
            try:
                tid = _NAMED.decode(record).trace_id
            except msgspec.DecodeError:  # (not one JSON object: read its start)
                return sniff_trace_id(bytes(record))
            return tid if isinstance(tid, str) and tid else None
        msg = f"trace_id_of() takes a record (bytes or a mapping), not a {type(record).__name__}"
        raise TypeError(msg)

    def feed(
        self, state: TraceState, record: bytes | Mapping[str, Any]
    ) -> list[HostOutput]:
        """Grade one record of the state's trace: what it decided.

        ``record`` is one line of a supported format (bytes) or a decoded
        mapping. A record that cannot be read taints the trace (its graders
        end in ``error``, as in ``trajgrade grade``; one that names no trace
        is this trace's, as with a Kafka record's key); events naming
        another trace raise ValueError (key the records by
        :meth:`trace_id_of`). Records of a closed trace are dropped.
        """
        data = state._data
        data.records += 1
        line = record_line(record)
        if isinstance(line, Refused):
            return self._run(state, lambda e: self._reject(e, data, line.problem.what))
        fmt = data.format or self._format_of(line)
        if fmt is None:
            why = "no supported format reads this record; give TraceHost its format="
            return self._run(state, lambda e: self._reject(e, data, why))
        data.format = fmt
        decoder = self._decoder(state, fmt)
        batches = [decoder.feed(line)]
        if decoder is not state._decoder:  # (a reader of this record alone)
            batches.append(decoder.close())
        batches = [b for b in batches if b.events or b.errors]
        self._check_trace(data.trace_id, batches)
        return self._run(state, lambda e: self._graded(decoder, batches))

    def finish(self, state: TraceState, *, reason: str = "end") -> list[HostOutput]:
        """End the trace: its open graders give their final verdicts.

        ``reason`` says why: ``"end"`` (the input ended) or ``"idle"`` (the
        host's idle timer: no record for a while). Either gives the verdicts
        ``trajgrade grade`` gives at the end of its input; the state is then
        closed (its late records are dropped).
        """
        if reason not in ("end", "idle"):
            msg = f"reason must be 'end' or 'idle', got {reason!r}"
            raise ValueError(msg)
        decoder, state._decoder = state._decoder, None
        batches = [decoder.close()] if decoder is not None else []

        def closing(engine: Engine) -> list[Verdict]:
            out = self._graded(decoder, batches) if decoder is not None else []
            return out + engine.finish()

        return self._run(state, closing)

    # ------------------------------------------------------------ internals
    def _format_of(self, line: bytes) -> str | None:
        return detect(line) if self.format == "auto" else self.format

    def _decoder(self, state: TraceState, fmt: str) -> SourceDecoder:
        """The trace's live reader (a format whose records need the ones
        before), or one for this record alone; its lines are the trace's."""
        if state._decoder is not None:
            return state._decoder
        decoder = SourceDecoder(
            state.trace_id,
            fmt=fmt,
            default_trace=state.trace_id,
            projection=self.suite.projection,
            fixes=API_FIXES,
        )
        decoder.resume_at(0, state._data.records, fmt)
        alone = self._alone.get(fmt)
        if alone is None:
            alone = self._alone[fmt] = SourceDecoder.can_resume_at(fmt)
        if not alone:
            state._decoder = decoder
        return decoder

    @staticmethod
    def _check_trace(trace_id: str, batches: list[Batch]) -> None:
        """Events of another trace raise; an unreadable record that names no
        trace is the state's (as a Kafka record's key names it)."""
        for batch in batches:
            for err in batch.errors:
                if err.trace_id is None:
                    err.trace_id = trace_id
            for event in batch.events:
                if event.trace_id and event.trace_id != trace_id:
                    msg = f"a record of trace {event.trace_id!r} was fed to the state of trace {trace_id!r}; key records by TraceHost.trace_id_of()"
                    raise ValueError(msg)

    def _graded(self, decoder: SourceDecoder, batches: list[Batch]) -> list[Verdict]:
        grading = self._grading
        try:
            return [v for b in batches for v in grading.feed(decoder, b)]
        finally:
            grading.errors.clear()
            grading.anomalies.clear()

    @staticmethod
    def _reject(engine: Engine, data: _Data, why: str) -> list[Verdict]:
        where = Location(file=data.trace_id, line=data.records)
        engine.reject(data.trace_id, str(InputError(why, location=where)))
        return []

    def _run(
        self, state: TraceState, work: Callable[[Engine], list[Verdict]]
    ) -> list[HostOutput]:
        data = state._data
        data.engine, verdicts, decisions = self._engine.run(data.engine, work)
        out = [_verdict(v) for v in verdicts]
        out.extend(_decision(d) for d in decisions)
        return out


def _verdict(v: Verdict) -> HostOutput:
    return HostOutput(
        kind="verdict", trace_id=v.trace_id, id=v.id, payload=msgspec.to_builtins(v)
    )


def _decision(d: GuardDecision) -> HostOutput:
    key = f"\x00{d.grader}\x00decision\x00{d.at_event}\x00{d.call_id or ''}\x00{d.rule}"
    return HostOutput(
        kind="decision",
        trace_id=d.trace_id,
        id=keyed_id(d.trace_id, key.encode()),
        payload=msgspec.to_builtins(d),
    )
