"""The public import path for custom letta graders and extractors.

``from trajgrade.graders.letta_tool import GradeResult, Sample, extractor,
grader`` (docs/graders.md) keeps working: the ``letta-tool`` grader lives in
:mod:`trajgrade.graders.letta.tool`, and this names the same objects.

A package rather than a ``letta_tool.py`` file: a file at the old path would
stop git from following the move of the grader's code to ``letta/tool.py``.
"""

from __future__ import annotations

from trajgrade.graders.letta.tool import (
    GRADER_TYPES,
    LETTA_TOOL,
    GradeResult,
    LettaTool,
    LettaToolConfig,
    LettaToolState,
    Sample,
    TurnGrade,
    extractor,
    grader,
)

__all__ = (
    "GRADER_TYPES",
    "LETTA_TOOL",
    "GradeResult",
    "LettaTool",
    "LettaToolConfig",
    "LettaToolState",
    "Sample",
    "TurnGrade",
    "extractor",
    "grader",
)
