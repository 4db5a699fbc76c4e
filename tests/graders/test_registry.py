"""The built-in grader registry: lazy, and in step with the grader modules."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

from trajgrade.graders import BUILTIN_MODULES

REPO = Path(__file__).parents[2]


def test_lazy_builtin_table_matches_the_grader_modules() -> None:
    """BUILTIN_MODULES (which lets a policy import only the graders it names)
    lists exactly the types and aliases each built-in module defines."""
    found = {}
    for module in sorted(set(BUILTIN_MODULES.values())):
        for t in importlib.import_module(f"trajgrade.graders.{module}").GRADER_TYPES:
            for name in (t.kind, *getattr(t, "aliases", ())):
                found[name] = module
    assert found == dict(BUILTIN_MODULES)


def test_compiling_a_policy_imports_only_its_graders() -> None:
    code = (
        "import sys\n"
        "from tests._support import suite\n"
        "suite('graders:\\n  - type: token-budget\\n    config: {max: 5}\\n')\n"
        "print(sorted(m for m in sys.modules if m.startswith('trajgrade.graders.')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout
    assert "trajgrade.graders.vally.metric_threshold" in out
    assert "trajgrade.graders.letta" not in out
    assert "trajgrade.graders.aigo" not in out


def test_a_literal_only_policy_does_not_load_the_regex_engine() -> None:
    """Plain literals are matched with str methods; `regex` loads only for a
    real regular expression (hook start-up)."""
    code = (
        "import sys\n"
        "from tests._support import suite\n"
        'suite(\'graders:\\n  - type: tool-calls\\n    config: {disallowed: [{name: "^Bash$", command: "rm -rf"}]}\\n\')\n'
        "print('regex' in sys.modules)\n"
        "suite('graders:\\n  - type: tool-calls\\n    config: {disallowed: [\"^Ba(sh|t)$\"]}\\n')\n"
        "print('regex' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout
    assert out.split() == ["False", "True"]
