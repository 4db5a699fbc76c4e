"""agentv's ``tool_trajectory`` grader (seed 001): the grader
(``tool_trajectory``), how agentv reads its config (``_config``), compares
arguments (``_args``) and reports hits, misses and a score (``_score``).
"""

__all__: tuple[str, ...] = ()
