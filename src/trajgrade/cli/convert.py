"""``trajgrade convert`` and ``trajgrade stats``: the readers without graders.

``convert`` writes the canonical events any input is read as (JSONL, one event
a line, trace ids filled in): for producers that feed a Kafka topic, and to
see exactly what the graders see. ``stats`` prints, per trace, the numbers the
metric graders work from. Both read inputs the way ``grade`` does (detection,
framing, located errors on stderr), event by event.
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import IO, TYPE_CHECKING, Any

import anyio
import msgspec

from trajgrade.events import AgentError, Event, ToolCall, ToolResult, TurnStart, Usage
from trajgrade.pipeline.decoder import SourceDecoder
from trajgrade.sources import open_source

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from trajgrade.pipeline.batches import Batch

__all__ = ("TraceStats", "convert", "print_stats", "stats")


class TraceStats(msgspec.Struct, kw_only=True):
    """What one trace contains, as the graders would count it."""

    trace_id: str
    events: int = 0
    tool_calls: dict[str, int] = msgspec.field(default_factory=dict)
    results: int = 0
    unanswered: int = 0
    tool_errors: int = 0
    errors: int = 0
    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    duration_ms: int | None = None


async def _read(
    inputs: Sequence[str], fmt: str, on_batch: Callable[[SourceDecoder, Batch], None]
) -> None:
    """Feed every input's batches to ``on_batch``, in order."""
    for name in inputs:
        source = open_source(name)
        decoder = SourceDecoder(
            source.name, fmt=fmt, default_trace=source.default_trace
        )
        try:
            async for chunk in source.chunks():
                on_batch(decoder, decoder.feed(chunk))
            on_batch(decoder, decoder.close())
        finally:
            source.close()


def _log_errors(batch: Batch, log: Any) -> int:
    for err in batch.errors:
        loc = err.location
        log.warning(
            "input_rejected",
            source=loc.file,
            line=loc.line,
            field=loc.field,
            trace=err.trace_id,
            reason=err.message,
        )
    return len(batch.errors)


def convert(inputs: Sequence[str], *, fmt: str, out: IO[bytes], log: Any) -> int:
    """Write every input's events as canonical JSONL; return the input-error count."""
    enc = msgspec.json.Encoder()
    errors = 0

    def on_batch(decoder: SourceDecoder, batch: Batch) -> None:
        nonlocal errors
        errors += _log_errors(batch, log)
        if not batch.events:
            return
        buf = bytearray()
        for ev in batch.events:
            if not ev.trace_id:
                ev = msgspec.structs.replace(ev, trace_id=decoder.default_trace)
            enc.encode_into(ev, buf, -1)
            buf += b"\n"
        out.write(buf)
        out.flush()

    anyio.run(_read, list(inputs), fmt, on_batch)
    return errors


def stats(inputs: Sequence[str], *, fmt: str, log: Any) -> tuple[list[TraceStats], int]:
    """Per-trace counts of every input, in order of first appearance."""
    traces: dict[str, TraceStats] = {}
    open_calls: dict[str, set[str]] = {}
    spans: dict[str, list[float]] = {}
    errors = 0

    def on_batch(decoder: SourceDecoder, batch: Batch) -> None:
        nonlocal errors
        errors += _log_errors(batch, log)
        for ev in batch.events:
            _count(ev, ev.trace_id or decoder.default_trace)

    def _count(ev: Event, tid: str) -> None:
        st = traces.get(tid)
        if st is None:
            st = traces[tid] = TraceStats(trace_id=tid)
            open_calls[tid] = set()
        st.events += 1
        if ev.ts is not None:
            span = spans.setdefault(tid, [ev.ts, ev.ts])
            span[0], span[1] = min(span[0], ev.ts), max(span[1], ev.ts)
        if isinstance(ev, ToolCall):
            st.tool_calls[ev.name] = st.tool_calls.get(ev.name, 0) + 1
            if ev.call_id:
                open_calls[tid].add(ev.call_id)
        elif isinstance(ev, ToolResult):
            st.results += 1
            st.tool_errors += bool(ev.is_error)
            open_calls[tid].discard(ev.call_id or "")
        elif isinstance(ev, AgentError):
            st.errors += 1
        elif isinstance(ev, TurnStart):
            st.turns += 1
        elif isinstance(ev, Usage):
            st.input_tokens += ev.input_tokens
            st.output_tokens += ev.output_tokens

    anyio.run(_read, list(inputs), fmt, on_batch)
    for tid, st in traces.items():
        st.unanswered = len(open_calls[tid])
        if tid in spans:
            st.duration_ms = round((spans[tid][1] - spans[tid][0]) * 1000)
    return list(traces.values()), errors


def print_stats(rows: list[TraceStats], *, out: IO[str] = sys.stdout) -> None:
    """A readable table, one trace a block."""
    for st in rows:
        calls = Counter(st.tool_calls)
        top = ", ".join(f"{name} {n}" for name, n in calls.most_common())
        duration = "-" if st.duration_ms is None else f"{st.duration_ms / 1000:.1f}s"
        out.write(
            f"{st.trace_id}\n"
            f"  events {st.events}  turns {st.turns}  duration {duration}\n"
            f"  tool calls {sum(calls.values())} ({top or 'none'})\n"
            f"  results {st.results}  unanswered {st.unanswered}  tool errors {st.tool_errors}  errors {st.errors}\n"
            f"  tokens in {st.input_tokens}  out {st.output_tokens}\n"
        )
