"""From bytes to verdicts, without I/O: framing, format detection, feeding.

The face of the package (names load on first use). Inside: ``decoder``
(:class:`SourceDecoder`: bytes to located events), ``batches`` (a decoded
chunk), ``grading`` (batches into one engine), ``options`` (the library's
input options, checked), ``whole`` (:func:`grade_bytes`: a whole input at
once).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trajgrade._util.lazy import exporter

if TYPE_CHECKING:
    from trajgrade.pipeline.batches import Batch
    from trajgrade.pipeline.decoder import DEFAULT_MAX_LINE_BYTES, SourceDecoder
    from trajgrade.pipeline.grading import Grading
    from trajgrade.pipeline.whole import GradeResult, grade_bytes

__all__ = (
    "DEFAULT_MAX_LINE_BYTES",
    "Batch",
    "GradeResult",
    "Grading",
    "SourceDecoder",
    "grade_bytes",
)

__getattr__ = exporter(
    __name__,
    {
        "DEFAULT_MAX_LINE_BYTES": "trajgrade.pipeline.decoder",
        "SourceDecoder": "trajgrade.pipeline.decoder",
        "Batch": "trajgrade.pipeline.batches",
        "Grading": "trajgrade.pipeline.grading",
        "GradeResult": "trajgrade.pipeline.whole",
        "grade_bytes": "trajgrade.pipeline.whole",
    },
)
