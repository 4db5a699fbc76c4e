"""Logging what grading found wrong with the input, one way for every runner.

The core collects located input errors and integrity anomalies
(:class:`~trajgrade.pipeline.Grading`); the runners at the edges log them here
with the same event names and fields, so a log pipeline reads ``grade``,
follow and ``run`` alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trajgrade.engine import Anomaly
    from trajgrade.errors import Location
    from trajgrade.pipeline import Grading

__all__ = ("log_anomaly", "report_problems")


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


def report_problems(grading: Grading, log: Any) -> tuple[int, int]:
    """Log and clear the input errors and anomalies gathered since last time;
    return how many of each there were."""
    for err in grading.errors:
        loc = err.location
        log.warning(
            "input_rejected",
            source=loc.file,
            line=loc.line,
            field=loc.field,
            trace=err.trace_id,
            reason=err.message,
        )
    for anomaly, loc in grading.anomalies:
        log_anomaly(log, anomaly, loc)
    counts = (len(grading.errors), len(grading.anomalies))
    grading.errors.clear()
    grading.anomalies.clear()
    return counts
