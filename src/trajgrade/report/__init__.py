"""The run report (``--report run.html``): one self-contained HTML page of
a run, fed as a sink of verdicts, decisions and events (the core stays
pure; this package is an edge)."""

from trajgrade.report.collector import RunReport
from trajgrade.report.sink import ReportSink

__all__ = ("ReportSink", "RunReport")
