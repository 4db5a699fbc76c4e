"""letta-evals' ``kind: tool`` grader (``letta-tool``): the grader (``tool``),
its extractors (``_extract``), grading functions (``_functions``), regexes
with ``re``'s semantics (``_regex``), config compilation (``_compile``) and
user code lookup (``_code``).

Custom graders import from :mod:`trajgrade.graders.letta_tool`, the public
path, which names the same objects as :mod:`trajgrade.graders.letta.tool`.
"""

__all__: tuple[str, ...] = ()
