"""Logging what grading found wrong with the input, one way for every runner.

The core collects located input errors and integrity anomalies
(:class:`~trajgrade.pipeline.grading.Grading`); the runners at the edges log them here
with the same event names and fields, so a log pipeline reads ``grade``,
follow and ``run`` alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Iterable

    from trajgrade.engine.engine import Anomaly
    from trajgrade.errors import Location
    from trajgrade.pipeline.grading import Grading
    from trajgrade.pipeline.sources import Duplicate

__all__ = ("log_anomalies", "log_anomaly", "log_duplicates", "report_problems")

#: Trace ids named in one summarised ``calls_unanswered`` line.
_SHOWN = 10
#: Located errors logged for one line (an OTLP request, a document) in one
#: report; the rest are counted in one ``input_rejected_more`` line. A
#: request of 100,000 bad records was 30 MB of log, 11 times its size.
_PER_LINE: Final = 20


def log_anomaly(log: Any, anomaly: Anomaly, loc: Location) -> None:
    """``input_anomaly`` (a warning), or ``calls_unanswered`` (info: normal for
    an interrupted session, worth knowing)."""
    if anomaly.kind == "unanswered_calls":
        log.info("calls_unanswered", trace=anomaly.trace_id, reason=anomaly.message)
        return
    log.warning(
        "input_anomaly",
        source=loc.file,
        line=loc.line,
        trace=anomaly.trace_id,
        kind=anomaly.kind,
        reason=anomaly.message,
    )


def log_anomalies(log: Any, pairs: Iterable[tuple[Anomaly, Location]]) -> None:
    """Log each anomaly, but traces ending with unanswered calls as one line
    when there are several (Ctrl-C on a live run closes every open trace)."""
    unanswered = []
    for anomaly, loc in pairs:
        if anomaly.kind == "unanswered_calls":
            unanswered.append((anomaly, loc))
        else:
            log_anomaly(log, anomaly, loc)
    if len(unanswered) == 1:
        log_anomaly(log, *unanswered[0])
    elif unanswered:
        first = unanswered[0][0]
        log.info(
            "calls_unanswered",
            traces=len(unanswered),
            trace_ids=[a.trace_id for a, _ in unanswered[:_SHOWN]],
            reason=f"{len(unanswered)} traces ended with tool calls that never got "
            f"a result (e.g. {first.trace_id}: {first.message})",
        )


def log_duplicates(log: Any, found: list[Duplicate]) -> None:
    """``session_in_two_inputs``, a warning once per trace id read from a
    second input (the same session file given twice, a session split over
    files): its events are graded as one trace. Cleared once logged."""
    for d in found:
        log.warning(
            "session_in_two_inputs",
            trace=d.trace_id,
            first=d.first,
            source=d.again,
            reason=f"session {d.trace_id} is in both {d.first} and {d.again}: "
            "its events are graded as one trace",
        )
    found.clear()


def report_problems(grading: Grading, log: Any) -> tuple[int, int]:
    """Log and clear the input errors and anomalies gathered since last time;
    return how many of each there were."""
    shown: dict[tuple[str | None, int | None], int] = {}
    for err in grading.errors:
        loc = err.location
        key = (loc.file, loc.line)
        n = shown[key] = shown.get(key, 0) + 1
        if n > _PER_LINE:
            continue
        log.warning(
            "input_rejected",
            source=loc.file,
            line=loc.line,
            field=loc.field,
            trace=err.trace_id,
            reason=err.message,
        )
    for (source, line), n in shown.items():
        if n > _PER_LINE:
            log.warning(
                "input_rejected_more",
                source=source,
                line=line,
                count=n - _PER_LINE,
                reason=f"{n} records of this line were rejected; the first {_PER_LINE} are logged",
            )
    log_anomalies(log, grading.anomalies)
    if grading.sources is not None:
        log_duplicates(log, grading.sources.duplicates)
    counts = (len(grading.errors), len(grading.anomalies))
    grading.errors.clear()
    grading.anomalies.clear()
    return counts
