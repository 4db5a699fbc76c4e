"""``grade --help`` in sections by purpose, with examples. Every option has
a section in :data:`trajgrade.cli.help_groups.GRADE_GROUPS`: a new option
left out falls into "Other", and the first test here names it."""

from __future__ import annotations

from typing import Any

import click
from click.testing import CliRunner

from trajgrade.cli.grade import grade
from trajgrade.cli.help_groups import GRADE_GROUPS, OTHER, GroupedCommand, option_name


def _options(command: click.Command) -> list[str]:
    return [option_name(p) for p in command.params if isinstance(p, click.Option)]


def test_every_grade_option_has_a_section() -> None:
    placed = {name for names in GRADE_GROUPS.values() for name in names}
    unplaced = [name for name in _options(grade) if name not in placed]
    assert not unplaced, (
        f"grade options in no --help section (they show under {OTHER!r}): "
        f"{', '.join(unplaced)}; add each to a group of GRADE_GROUPS in "
        "src/trajgrade/cli/help_groups.py"
    )


def test_every_placed_name_is_an_option_once() -> None:
    names = [name for names in GRADE_GROUPS.values() for name in names]
    assert len(names) == len(set(names)), "an option is placed twice"
    stale = sorted(set(names) - set(_options(grade)))
    assert not stale, f"GRADE_GROUPS names options grade does not have: {stale}"


def test_grade_help_lists_examples_then_the_sections_in_order(run_cli: Any) -> None:
    out = run_cli("grade", "--help")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "Examples:\n    trajgrade grade -c policy.yaml session.jsonl" in text
    assert "\n    5   nothing was graded" in text  # the epilog, from EXIT_CODES
    headings = [line[:-1] for line in text.splitlines() if line.endswith(":")]
    sections = [h for h in headings if h in (*GRADE_GROUPS, OTHER)]
    assert sections == [*GRADE_GROUPS, OTHER]
    other = text.split(f"\n{OTHER}:\n", 1)[1].split("\n\n", 1)[0]
    assert other.split() == ["-h,", "--help", "Show", "this", "message", "and", "exit."]
    kafka = text.split("\nKafka:\n", 1)[1].split("\n\n", 1)[0]
    assert kafka.lstrip().startswith("--kafka-bootstrap")
    assert "--verdicts-topic" in kafka
    assert "--junit" not in kafka


def test_an_option_nobody_placed_is_shown_under_other() -> None:
    @click.command(cls=GroupedCommand, help_groups={"Input": ("--config",)})
    @click.option("--config", help="The policy.")
    @click.option("--brand-new", help="Added without a place.")
    def cmd(config: str | None, brand_new: str | None) -> None:
        """A command."""

    text = CliRunner().invoke(cmd, ["--help"]).output
    assert text.index("Input:") < text.index("--config") < text.index("Other:")
    assert text.index("Other:") < text.index("--brand-new")
