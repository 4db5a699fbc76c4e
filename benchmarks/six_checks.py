"""The grading function of the ``arg_regex_first`` check in ``six.yaml``.

letta-evals' ``tool_arguments`` extractor hands over the first ``bash``
call's arguments as JSON; the shared check asks whether its ``command``
matches ``\\bpytest\\b`` (``../shared/bench/common.py``). letta's built-in
``regex_match`` would take the pattern from a dataset row, which the
benchmark corpus does not have, hence this file (run with ``--allow-code``).
"""

from __future__ import annotations

import json
import re

from trajgrade.graders.letta_tool import GradeResult, Sample, grader

_PYTEST = re.compile(r"\bpytest\b")


@grader
def first_bash_runs_pytest(sample: Sample, submission: str) -> GradeResult:
    """1.0 when the first bash call's ``command`` matches ``\\bpytest\\b``."""
    args = json.loads(submission)
    command = args.get("command") if isinstance(args, dict) else None
    hit = isinstance(command, str) and _PYTEST.search(command) is not None
    return GradeResult(
        score=float(hit), rationale=f"first bash call runs pytest: {hit}"
    )
