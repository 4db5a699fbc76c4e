"""Hosting trajgrade's graders inside stream processors teams already run.

Each module adapts :class:`~trajgrade.api.trace_host.TraceHost` (one trace's
state as bytes in the engine's own store) to one engine, and imports that
engine only when imported itself (each is an extra): ``quixstreams``
(``trajgrade[quix]``) and ``flink`` (``trajgrade[flink]``; its example job
``flink_job``). See docs/scale-out.md.
"""

__all__ = ()
