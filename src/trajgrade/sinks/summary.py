"""What a person reads at the end of a ``grade`` run: failures first.

Verdicts are printed live, as they are decided, in the order they are
decided; nothing is held back to sort them (a trace is never buffered).
What is ordered is the summary the run ends with, built from the final
verdicts as they pass (:class:`RunTable`, a sink teed beside stdout):

* the failed final verdicts, each with its input file and the line of its
  deciding event (the first ``SHOWN_FAILURES``; the rest counted);
* with several inputs, a table of them, failing files first: traces,
  pass/fail per grader, and the first deciding event of a failure there
  (file:line and what matched).

Memory is bounded: a row per input file (``SHOWN_FILES`` are shown, the rest
summed up) and ``SHOWN_FAILURES`` verdicts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from trajgrade.verdicts import Outcome

if TYPE_CHECKING:
    from collections.abc import Sequence

    from trajgrade.sinks import Sink
    from trajgrade.verdicts import Verdict

__all__ = ("SHOWN_FAILURES", "SHOWN_FILES", "FailuresOnly", "RunTable", "where")

#: Failed verdicts listed in the summary (the rest are counted).
SHOWN_FAILURES: Final = 20
#: Input files given a row in the table (the rest are summed in one line).
SHOWN_FILES: Final = 50
#: Files counted per run, at most (a ``--watch`` of a huge tree).
FILES_MAX: Final = 10_000
#: Characters of "what matched" in one table cell.
_WHAT_CHARS: Final = 80
#: The row of verdicts that name no input.
_NO_FILE: Final = "-"


def where(v: Verdict) -> str:
    """``file:line`` of a verdict's deciding event (``file`` alone when the
    line is not known; empty without a source)."""
    src = v.source
    if src is None:
        return ""
    return src.file if src.line is None else f"{src.file}:{src.line}"


def what_matched(v: Verdict) -> str:
    """What decided a verdict, short: the rule and the value it matched,
    else the evidence's first line."""
    m = v.matched
    if m is not None and m.value is not None:
        seen = " ".join(str(p) for p in (m.tool, m.field) if p)
        value = m.value if isinstance(m.value, str) else f"{m.value:g}"
        text = f"{m.rule}: {seen} {value!r}" if seen else f"{m.rule}: {value!r}"
    else:
        text = (v.evidence or v.outcome.value).split("\n", 1)[0]
    return text if len(text) <= _WHAT_CHARS else text[: _WHAT_CHARS - 1] + "…"


class _FileRow:
    __slots__ = ("first", "graders", "order")

    def __init__(self, order: int) -> None:
        self.order = order
        #: grader -> [passed, not passed] final verdicts.
        self.graders: dict[str, list[int]] = {}
        #: The first final verdict here that did not pass.
        self.first: Verdict | None = None

    @property
    def traces(self) -> int:
        """Traces with a final verdict: each gets one per grader."""
        return max((p + f for p, f in self.graders.values()), default=0)

    @property
    def failed(self) -> int:
        return max((f for _, f in self.graders.values()), default=0)


class RunTable:
    """A sink of the run's final verdicts, for the end-of-run summary."""

    def __init__(self) -> None:
        self._files: dict[str, _FileRow] = {}
        self._graders: dict[str, None] = {}
        self.failures: list[Verdict] = []
        self.failed = 0
        #: Final verdicts seen (files past ``FILES_MAX`` are counted in "-").
        self.finals = 0

    def send(self, verdicts: Sequence[Verdict]) -> None:
        for v in verdicts:
            if not v.final:
                continue
            self.finals += 1
            name = v.source.file if v.source is not None else _NO_FILE
            row = self._files.get(name)
            if row is None:
                if len(self._files) >= FILES_MAX:
                    name = _NO_FILE
                row = self._files.setdefault(name, _FileRow(len(self._files)))
            self._graders.setdefault(v.grader, None)
            counts = row.graders.setdefault(v.grader, [0, 0])
            if v.outcome is Outcome.PASS:
                counts[0] += 1
                continue
            counts[1] += 1
            self.failed += 1
            if row.first is None:
                row.first = v
            if len(self.failures) < SHOWN_FAILURES:
                self.failures.append(v)

    def flush(self) -> None:
        pass  # read once, when the run ends

    def close(self) -> None:
        pass

    # ------------------------------------------------------------ reading
    def lines(self) -> list[str]:
        """The summary's lines before its totals: failed verdicts, then (with
        several input files) the table, failing files first."""
        out: list[str] = []
        if self.failures:
            out += ["", f"failed ({self.failed} of {self.finals} final verdicts):"]
            for v in self.failures:
                word = "FAIL " if v.outcome is Outcome.FAIL else "ERROR"
                place = where(v) or _NO_FILE
                out.append(
                    f"  {word} {place}  {v.trace_id}  {v.grader}: {what_matched(v)}"
                )
            if self.failed > len(self.failures):
                out.append(f"  (+{self.failed - len(self.failures)} more)")
        if len(self._files) > 1:
            out += ["", *self._table()]
        return out

    def _table(self) -> list[str]:
        files = self._files.items()
        rows = sorted(files, key=lambda kv: (not kv[1].failed, kv[1].order))
        graders = list(self._graders)
        head = ["input", "traces", *graders]
        body = [
            [name, str(row.traces), *(_cell(row.graders.get(g)) for g in graders)]
            for name, row in rows[:SHOWN_FILES]
        ]
        widths = [max(len(r[i]) for r in (head, *body)) for i in range(len(head))]
        out = ["by input, failing first (pass/fail per grader):"]
        for n, cells in enumerate((head, *body)):
            padded = [cells[0].ljust(widths[0])]
            padded += [c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
            out.append("  " + "  ".join(padded).rstrip())
            first = rows[n - 1][1].first if n else None
            if first is not None:
                out.append(f"    first failure: {_first(first)}")
        rest = rows[SHOWN_FILES:]
        if rest:
            traces = sum(row.traces for _, row in rest)
            failing = sum(1 for _, row in rest if row.failed)
            more = f"{len(rest)} more inputs: {traces} traces, {failing} failing"
            out.append(f"  (+{more})")
        return out


def _cell(counts: list[int] | None) -> str:
    return "-" if counts is None else f"{counts[0]}/{counts[1]}"


def _first(v: Verdict | None) -> str:
    """The first failure of a file: where, the trace, what matched."""
    if v is None:
        return ""
    return f"{where(v) or _NO_FILE} {v.trace_id} {v.grader}: {what_matched(v)}"


class FailuresOnly:
    """``--only-failures``: the verdicts that did not pass, to ``sink``
    (stdout's); passes are left out (the summary and other sinks keep them)."""

    def __init__(self, sink: Sink) -> None:
        self._sink = sink

    def send(self, verdicts: Sequence[Verdict]) -> None:
        failed = [v for v in verdicts if v.outcome is not Outcome.PASS]
        if failed:
            self._sink.send(failed)

    def flush(self) -> None:
        self._sink.flush()

    def close(self) -> None:
        self._sink.close()
