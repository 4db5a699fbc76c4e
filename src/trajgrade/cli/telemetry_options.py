"""``grade``'s telemetry options on the command line: ``--otlp`` (and its
limits), ``--export-otlp`` and ``--junit``, as one decorator; the command
receives them as one ``telemetry:`` :class:`~trajgrade.telemetry.options.Telemetry`
keyword argument."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Final, TypeVar

import click

from trajgrade.cli.http_options import edge_limits, http_limit_options
from trajgrade.cli.types import require_companions
from trajgrade.telemetry import OtlpOptions
from trajgrade.telemetry.options import Telemetry

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ("telemetry_options",)

F = TypeVar("F", bound="Callable[..., Any]")
#: The receiver's default port: OTLP/HTTP's registered port.
OTLP_HTTP_PORT: Final = 4318


def _address(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = value, str(OTLP_HTTP_PORT)
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        msg = f"--otlp {value!r}: expected HOST:PORT, e.g. 127.0.0.1:4318 (port 0: any free one)"
        raise click.UsageError(msg)
    return host, int(port)


def _headers(values: Sequence[str]) -> dict[str, str]:
    out = {}
    for v in values:
        key, sep, val = v.partition("=")
        if not sep or not key.strip():
            msg = f"--export-otlp-header {v!r}: expected KEY=VALUE"
            raise click.UsageError(msg)
        out[key.strip()] = val.strip()
    return out


_OPTIONS: Final = [
    click.option(
        "--otlp",
        "otlp",
        metavar="HOST:PORT",
        default=None,
        help="Receive agents' OpenTelemetry over OTLP/HTTP here (/v1/logs, /v1/traces; protobuf or JSON) and grade it live. Loopback unless --otlp-allow-remote.",
    ),
    click.option(
        "--otlp-allow-remote",
        is_flag=True,
        help="Let --otlp listen on a non-loopback address (set --otlp-token-env too).",
    ),
    click.option(
        "--otlp-queue",
        type=click.IntRange(min=1),
        default=64,
        show_default=True,
        help="OTLP requests waiting for the grader; past it, 503 + Retry-After.",
    ),
    http_limit_options("otlp-"),
    click.option(
        "--export-otlp",
        "export_url",
        metavar="URL",
        default=None,
        help="Send every verdict as an OTel gen_ai.evaluation.result log record to this OTLP/HTTP endpoint (e.g. http://127.0.0.1:4318).",
    ),
    click.option(
        "--export-otlp-header",
        "export_headers",
        metavar="KEY=VALUE",
        multiple=True,
        help="Extra HTTP header for --export-otlp (repeatable), e.g. an Authorization.",
    ),
    click.option(
        "--junit",
        "junit",
        type=click.Path(dir_okay=False),
        default=None,
        help="Write the final verdicts as JUnit XML here (a suite per trace, a case per grader).",
    ),
    click.option(
        "--report",
        "report",
        type=click.Path(dir_okay=False),
        default=None,
        help="Write the run as one self-contained HTML page here (failures first, their deciding calls, a timeline per trace); rewritten as a live run goes.",
    ),
]
_NAMES: Final = (
    "otlp",
    "otlp_allow_remote",
    "otlp_queue",
    "otlp_max_body",
    "otlp_read_timeout",
    "otlp_token_env",
    "export_url",
    "export_headers",
    "junit",
    "report",
)

#: Options that do nothing without another (a usage error, not ignored).
_COMPANIONS: Final = {
    **dict.fromkeys(
        (
            "otlp_allow_remote",
            "otlp_queue",
            "otlp_max_body",
            "otlp_read_timeout",
            "otlp_token_env",
        ),
        "otlp",
    ),
    "export_headers": "export_url",
}


def _receiver(v: dict[str, Any]) -> OtlpOptions | None:
    """``--otlp`` and its limits; None when not given."""
    if v["otlp"] is None:
        return None
    host, port = _address(v["otlp"])
    limits = edge_limits(
        v["otlp_max_body"], v["otlp_read_timeout"], v["otlp_token_env"]
    )
    return OtlpOptions(
        host=host,
        port=port,
        allow_remote=v["otlp_allow_remote"],
        max_body=limits.max_body,
        read_timeout=limits.timeout,
        token=limits.token,
        queue_size=v["otlp_queue"],
    )


def telemetry_options(command: F) -> F:
    """Add the telemetry options to a click command; it receives them as
    ``telemetry=Telemetry(...)``."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        require_companions(_COMPANIONS)
        v = {name: kwargs.pop(name) for name in _NAMES}
        kwargs["telemetry"] = Telemetry(
            otlp=_receiver(v),
            export_url=v["export_url"],
            export_headers=_headers(v["export_headers"]),
            junit=v["junit"],
            report=v["report"],
        )
        return command(*args, **kwargs)

    decorated: Any = wrapper
    for option in reversed(_OPTIONS):
        decorated = option(decorated)
    return decorated  # type: ignore[no-any-return]
