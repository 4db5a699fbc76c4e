"""Third-party grader types: an installed entry point goes through the same path
as the built-ins (listing, config validation, grading)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

PLUGIN = '''
"""A third-party grader: the trace must contain a message saying `word`."""
from __future__ import annotations

import msgspec

from trajgrade.events import Message
from trajgrade.verdicts import Decision, Outcome


class SaysConfig(msgspec.Struct, forbid_unknown_fields=True):
    word: str


class SaysState(msgspec.Struct):
    seen: bool = False


class Says:
    kind = "says"
    state_type = SaysState
    event_types = frozenset({Message})
    uses_clock = False

    def __init__(self, word: str, name: str) -> None:
        self.word = word
        self.name = name

    def start(self) -> SaysState:
        return SaysState()

    def step(self, state, event):
        if self.word in event.text:
            return Decision(outcome=Outcome.PASS, score=1.0, evidence=f"said {self.word!r}")
        return None

    def tick(self, state, *, elapsed):
        return None

    def finish(self, state):
        return Decision(outcome=Outcome.FAIL, score=0.0, evidence=f"never said {self.word!r}")


class _SaysType:
    kind = "says"
    summary = "a message contains a word (test plugin)"
    origin = "tests"
    config_type = SaysConfig

    def build(self, config, *, name, context):
        return Says(config.word, name)


SAYS = _SaysType()
'''


def _install(tmp_path: Path) -> dict[str, str]:
    site = tmp_path / "site"
    (site / "saysplugin").mkdir(parents=True)
    (site / "saysplugin" / "__init__.py").write_text(PLUGIN)
    dist = site / "saysplugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: saysplugin\nVersion: 1.0\n"
    )
    (dist / "entry_points.txt").write_text(
        "[trajgrade.graders]\nsays = saysplugin:SAYS\n"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(site), env.get("PYTHONPATH", "")])
    )
    return env


def _run(
    env: dict[str, str], *args: str, stdin: bytes = b""
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "trajgrade", *args],
        input=stdin,
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )


def test_plugin_grader_is_listed_with_its_distribution(tmp_path: Path) -> None:
    """`trajgrade graders` shows an entry-point grader and names its distribution."""
    proc = _run(_install(tmp_path), "graders")
    assert proc.returncode == 0, proc.stderr
    line = next(ln for ln in proc.stdout.decode().splitlines() if ln.startswith("says"))
    assert "[plugin: saysplugin]" in line


def test_plugin_grader_config_is_validated_like_a_builtin(tmp_path: Path) -> None:
    """A typo in a plugin grader's config is reported with file, line and field."""
    cfg = tmp_path / "policy.yaml"
    cfg.write_text("graders:\n  - type: says\n    config:\n      wrod: hello\n")
    proc = _run(_install(tmp_path), "check", "-c", str(cfg))
    assert proc.returncode == 2
    assert (
        f"{cfg}:4: graders[0].config.wrod: unknown field `wrod`" in proc.stderr.decode()
    )


def test_plugin_grader_grades_a_trace(tmp_path: Path) -> None:
    """A plugin grader produces verdicts through the same engine as the built-ins."""
    cfg = tmp_path / "policy.yaml"
    cfg.write_text(
        textwrap.dedent("""\
        graders:
          - type: says
            config: {word: done}
          - type: turn-count
            config: {max: 5}
        """)
    )
    log = b'{"type":"message","role":"assistant","text":"all done"}\n'
    proc = _run(_install(tmp_path), "grade", "-q", "-c", str(cfg), stdin=log)
    verdicts = [json.loads(line) for line in proc.stdout.splitlines()]
    assert proc.returncode == 0, proc.stderr
    says = next(v for v in verdicts if v["grader"] == "says")
    assert says["outcome"] == "pass" and says["early"] is True
