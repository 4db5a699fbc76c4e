"""Telemetry in and out: the OTLP/HTTP receiver (``grade --otlp``), verdicts
as OpenTelemetry evaluation events (``--export-otlp``) and JUnit XML
(``--junit``). Importing this package loads nothing heavy: the protobuf
messages are imported only by the modules that use them."""

from __future__ import annotations

import msgspec

__all__ = ("OtlpOptions",)


class OtlpOptions(msgspec.Struct, frozen=True, kw_only=True):
    """Where and how the OTLP receiver listens (``--otlp`` and friends)."""

    host: str = "127.0.0.1"
    port: int = 4318
    allow_remote: bool = False
    max_body: int = 16 * 1024 * 1024
    read_timeout: float = 30.0
    token: str | None = None
    #: Requests decoded but not yet graded; past it, 503 with Retry-After.
    queue_size: int = 64
