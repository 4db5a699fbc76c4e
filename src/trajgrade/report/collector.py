"""What a run report shows, gathered as the run goes, in bounded memory.

Per trace: its source file, each grader's latest verdict, the guard's
decisions, and a ring of its most recent calls. When a verdict fails, the
calls around its deciding event are frozen (a bounded window); the rest of
a passing trace is only counted. Closed passing traces past
``max_passing`` are folded into per-file counts, so a 1 M-event corpus
costs a bounded number of rows and calls.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, Final

import msgspec

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from trajgrade.events import Event
    from trajgrade.verdicts import GuardDecision, Verdict

__all__ = ("Call", "RunReport", "TraceRow")

#: Calls kept per open trace (the window a failure is shown in).
RING: Final = 24
#: Decisions and budget points kept per trace for its timeline.
TIMELINE: Final = 200
#: Calls kept after the deciding one (the rest of the window is before it).
AFTER: Final = 6
#: Argument text kept per call.
ARGS_CHARS: Final = 400


#: Projected events (trajgrade.events.PROJECTED, by name: this module does
#: not import the event model) -> the event each stands for.
_PROJECTED: Final = {"LeanResult": "ToolResult", "LeanUsage": "Usage"}


class Call(msgspec.Struct, kw_only=True):
    """One tool call as the report shows it."""

    at_event: int
    call_id: str | None
    tool: str
    args: str
    is_error: bool | None = None


class TraceRow(msgspec.Struct, kw_only=True):
    trace_id: str
    source: str = ""
    events: int = 0
    calls: int = 0
    cost_usd: float = 0.0
    verdicts: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)
    #: (at_event, grader, action, tool) of each guard decision, bounded.
    decisions: list[list[Any]] = msgspec.field(default_factory=list)
    #: (at_event, cumulative cost) points, bounded.
    budget: list[list[float]] = msgspec.field(default_factory=list)
    #: The calls around the first deciding event of a failure (frozen).
    window: list[Call] = msgspec.field(default_factory=list)
    deciding: dict[str, Any] | None = None
    after_left: int = 0
    closed: bool = False

    @property
    def failed(self) -> bool:
        return any(v["outcome"] != "pass" for v in self.verdicts.values())


class RunReport:
    """Feed it events (with their source), verdicts and decisions; read
    :meth:`snapshot` for the page. Memory is bounded by ``max_passing``
    closed passing rows plus, per failing or open trace, ``RING`` calls and
    ``TIMELINE`` points."""

    def __init__(self, *, max_passing: int = 500, max_failing: int = 2000) -> None:
        self.max_passing = max_passing
        self.max_failing = max_failing
        self.rows: dict[str, TraceRow] = {}
        self._rings: dict[str, deque[Call]] = {}
        self._passing_closed: deque[str] = deque()
        #: Per file: closed traces no longer kept (counted, not shown).
        self.folded: dict[str, int] = {}
        #: Of those, failing ones past ``max_failing``.
        self.dropped_failing = 0
        self.events = 0
        #: trace id -> the first file it was seen in, for the duplicate warning.
        self.duplicates: list[tuple[str, str, str]] = []
        self._twice: set[str] = set()
        self._graders: set[str] = set()
        self._failing_kept = 0

    # ------------------------------------------------------------ feeding
    def observe(
        self, source: str, events: Iterable[Event]
    ) -> list[tuple[str, str, str]]:
        """Events decoded from ``source``; returns (trace, first file, this
        file) for each trace newly seen in a second input."""
        found: list[tuple[str, str, str]] = []
        for event in events:
            self.events += 1
            row = self._row(event.trace_id)
            if row is None:
                continue
            if not row.source:
                row.source = source
            elif row.source != source and row.trace_id not in self._twice:
                self._twice.add(row.trace_id)
                found.append((row.trace_id, row.source, source))
            row.events += 1
            self._take(row, event)
        if len(self.duplicates) < TIMELINE:
            self.duplicates.extend(found[: TIMELINE - len(self.duplicates)])
        return found

    def send(self, verdicts: Sequence[Verdict]) -> None:
        for v in verdicts:
            row = self._row(v.trace_id)
            if row is None:
                continue
            matched = _matched(v.metadata)
            row.verdicts[v.grader] = {
                "outcome": str(v.outcome),
                "score": v.score,
                "final": v.final,
                "evidence": v.evidence,
                "at_event": v.at_event,
                "matched": matched,
            }
            if str(v.outcome) != "pass" and row.deciding is None:
                self._freeze(row, v.grader, v.at_event, v.evidence, matched)
            self._graders.add(v.grader)
            # Closed once every grader seen in the run has its final verdict
            # (an early final one does not close a trace the others grade on).
            if v.final and all(
                g in row.verdicts and row.verdicts[g]["final"] for g in self._graders
            ):
                self._close(row)

    def send_decisions(self, decisions: Sequence[GuardDecision]) -> None:
        for d in decisions:
            row = self._row(d.trace_id)
            if row is None or len(row.decisions) >= TIMELINE:
                continue
            row.decisions.append([d.at_event, d.grader, str(d.action), d.tool or ""])

    # ------------------------------------------------------------ reading
    def snapshot(self) -> dict[str, Any]:
        rows = sorted(
            self.rows.values(), key=lambda r: (not r.failed, r.source, r.trace_id)
        )
        files: dict[str, dict[str, Any]] = {}
        for r in rows:
            f = files.setdefault(
                r.source or "-", {"traces": 0, "graders": {}, "first": None}
            )
            f["traces"] += 1
            for name, v in r.verdicts.items():
                g = f["graders"].setdefault(name, {"pass": 0, "fail": 0})
                g["pass" if v["outcome"] == "pass" else "fail"] += 1
            if f["first"] is None and r.deciding is not None:
                f["first"] = {"trace": r.trace_id, **r.deciding}
        for name, n in self.folded.items():
            f = files.setdefault(name, {"traces": 0, "graders": {}, "first": None})
            f["traces"] += n
            f["folded"] = n
        return {
            "events": self.events,
            "traces": len(self.rows) + sum(self.folded.values()),
            "failed": sum(r.failed for r in rows) + self.dropped_failing,
            "files": files,
            "rows": [msgspec.to_builtins(r) | {"failed": r.failed} for r in rows],
            "duplicates": [list(d) for d in self.duplicates[:50]],
        }

    def held_calls(self) -> int:
        """Calls held in memory (rings and frozen windows): the bound's test."""
        return sum(len(r) for r in self._rings.values()) + sum(
            len(r.window) for r in self.rows.values()
        )

    # ------------------------------------------------------------ inside
    def _row(self, trace_id: str) -> TraceRow | None:
        row = self.rows.get(trace_id)
        if row is None:
            row = self.rows[trace_id] = TraceRow(trace_id=trace_id)
            self._rings[trace_id] = deque(maxlen=RING)
        return row

    def _take(self, row: TraceRow, event: Event) -> None:
        kind = type(event).__name__
        kind = _PROJECTED.get(kind, kind)
        if kind == "ToolCall":
            row.calls += 1
            call = Call(
                at_event=row.events,
                call_id=getattr(event, "call_id", None),
                tool=getattr(event, "name", ""),
                args=_args_text(event),
            )
            ring = self._rings.get(row.trace_id)
            if ring is not None:
                ring.append(call)
            if row.deciding is not None and row.after_left > 0:
                row.after_left -= 1  # the calls after the deciding one
                row.window.append(call)
        elif kind == "ToolResult":
            ring = self._rings.get(row.trace_id)
            cid = getattr(event, "call_id", None)
            for c in reversed(row.window if row.deciding else ring or ()):
                if cid is not None and c.call_id == cid:
                    c.is_error = getattr(event, "is_error", None)
                    break
        elif kind == "Usage":
            cost = getattr(event, "cost_usd", None)
            if cost:
                row.cost_usd += cost
                if len(row.budget) < TIMELINE:
                    row.budget.append([row.events, round(row.cost_usd, 6)])

    def _freeze(
        self,
        row: TraceRow,
        grader: str,
        at_event: int,
        evidence: str,
        matched: dict[str, Any],
    ) -> None:
        ring = self._rings.get(row.trace_id) or deque()
        # The calls up to the deciding event: later ones are not yet read
        # (streaming), so the window is what led to the decision.
        row.window = [c for c in ring if at_event <= 0 or c.at_event <= at_event]
        row.window = row.window[-(RING - AFTER) :]
        row.after_left = AFTER
        call = _deciding_call(matched.get("call_id"), evidence, at_event, row.window)
        call_id = call.call_id if call is not None else matched.get("call_id")
        value = matched.get("value")
        if value is None and call is not None:
            value = _value_in(evidence, call.args)
        row.deciding = {
            "grader": grader,
            "at_event": at_event,
            "evidence": evidence,
            "call_id": call_id,
            "call_at": call.at_event if call is not None else None,
            "field": matched.get("field"),
            "value": value,
        }

    def _close(self, row: TraceRow) -> None:
        if row.closed:
            return
        row.closed = True
        self._rings.pop(row.trace_id, None)
        if row.failed:
            if self._failing_kept >= self.max_failing:
                del self.rows[row.trace_id]
                self.dropped_failing += 1
                key = row.source or "-"
                self.folded[key] = self.folded.get(key, 0) + 1
            else:
                self._failing_kept += 1
            return
        self._passing_closed.append(row.trace_id)
        while len(self._passing_closed) > self.max_passing:
            old = self.rows.pop(self._passing_closed.popleft(), None)
            if old is not None:
                key = old.source or "-"
                self.folded[key] = self.folded.get(key, 0) + 1


def _matched(metadata: dict[str, Any]) -> dict[str, Any]:
    evidence = metadata.get("evidence")
    if isinstance(evidence, dict) and isinstance(evidence.get("matched"), dict):
        return dict(evidence["matched"])
    if isinstance(metadata.get("matched"), dict):
        return dict(metadata["matched"])
    return {}


def _deciding_call(
    call_id: str | None, evidence: str, at_event: int, window: Sequence[Call]
) -> Call | None:
    """The windowed call that decided: the one structured evidence names,
    else (before it) the one the evidence text names, the deciding event,
    or the last call before it."""
    before = [c for c in window if at_event <= 0 or c.at_event <= at_event]
    for c in reversed(before):
        if call_id is not None and c.call_id == call_id:
            return c
    for c in reversed(before):
        if c.call_id and f"call {c.call_id}" in evidence:
            return c
    for c in reversed(before):
        if c.at_event == at_event:
            return c
    return before[-1] if before else None


def _value_in(evidence: str, args: str) -> str | None:
    """Fallback before structured evidence: the longest word of the
    evidence that the deciding call's arguments contain (a path, a host)."""
    words = {w.strip(".,:;()'\"`") for w in evidence.split()}
    found = [w for w in words if len(w) > 2 and w in args]
    return max(found, key=len) if found else None


def _args_text(event: Any) -> str:
    args = getattr(event, "args", None)
    if args is None:
        text = (
            getattr(event, "args_raw", None) or getattr(event, "args_json", None) or ""
        )
    else:
        try:
            text = msgspec.json.encode(args).decode()
        except (TypeError, msgspec.EncodeError):
            text = repr(args)
    return text[:ARGS_CHARS]
