"""``grade``'s telemetry options as one value: the OTLP receiver
(``--otlp`` and its limits), ``--export-otlp`` and ``--junit``. The
command-line options that fill it are :mod:`trajgrade.cli.telemetry_options`;
how a run uses it is :func:`trajgrade.cli.plan.plan`."""

from __future__ import annotations

import msgspec

from trajgrade.telemetry import OtlpOptions

__all__ = ("Telemetry",)


class Telemetry(msgspec.Struct, frozen=True, kw_only=True):
    """Telemetry in and out of one run; every part optional."""

    #: Receive OTLP/HTTP (``--otlp``): the run's input.
    otlp: OtlpOptions | None = None
    #: ``--export-otlp``: verdicts and guard decisions as OTel log records.
    export_url: str | None = None
    export_headers: dict[str, str] = msgspec.field(default_factory=dict)
    #: ``--junit``: the final verdicts as JUnit XML.
    junit: str | None = None
    #: ``--report``: the run as one self-contained HTML page.
    report: str | None = None
