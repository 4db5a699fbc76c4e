"""``trajgrade init``: write a starting policy, one of the examples shipped
in the package (``trajgrade/examples/``), so an installed trajgrade (pipx,
a wheel) has them without a clone."""

from __future__ import annotations

import sys
from typing import Final

import click

from trajgrade.cli.options import EXIT_USAGE
from trajgrade.graders.matching._agents import AGENT_NAMES

__all__ = ("init",)

#: ``--example`` -> the shipped file, and what it is for.
EXAMPLES: Final = {
    "guard": ("guard.yaml", "the strict guard: deny what no rule allows"),
    "guard-standard": (
        "guard-standard.yaml",
        "the standard guard: allow what no rule names",
    ),
    "grade": ("policy.yaml", "grading recorded logs (tests run, no secrets read)"),
}
#: Agents whose hooks trajgrade installs (the others: `trajgrade run`, `grade`).
_HOOKED: Final = ("claude-code", "codex", "gemini")


@click.command()
@click.argument("path", default="policy.yaml", type=click.Path(dir_okay=False))
@click.option(
    "--agent",
    type=click.Choice(AGENT_NAMES),
    default=None,
    help="The agent the policy is for: warns of rules that cannot work on its tools, and says how to attach it.",
)
@click.option(
    "--example",
    type=click.Choice(tuple(EXAMPLES)),
    default="guard",
    show_default=True,
    help="Which shipped policy: "
    + "; ".join(f"{k}: {v[1]}" for k, v in EXAMPLES.items())
    + ".",
)
@click.option("--force", is_flag=True, help="Overwrite PATH if it exists.")
def init(path: str, agent: str | None, example: str, force: bool) -> None:
    """Write a starting policy to PATH (default policy.yaml).

    \b
    trajgrade init                                  # the strict guard
    trajgrade init --agent codex guard.yaml         # and how to attach it to Codex
    trajgrade init --example grade grading.yaml     # a grading policy
    """
    from importlib.resources import files

    from trajgrade.config.agent_check import agent_warnings
    from trajgrade.config.compile import load_suite

    text = (files("trajgrade") / "examples" / EXAMPLES[example][0]).read_text("utf-8")
    try:
        with open(path, "x" if not force else "w", encoding="utf-8") as f:
            f.write(text)
    except FileExistsError:
        click.echo(
            f"error: {path} exists; give another PATH, or --force to overwrite it",
            err=True,
        )
        sys.exit(EXIT_USAGE)
    except OSError as exc:
        click.echo(f"error: cannot write {path}: {exc.strerror}", err=True)
        sys.exit(EXIT_USAGE)
    click.echo(
        f"{path}: written, the shipped {example} example: {EXAMPLES[example][1]}"
    )
    if agent is None:
        return
    for warning in agent_warnings(load_suite(path), agent):
        click.echo(f"warning: {agent}: {warning}", err=True)
    if agent in _HOOKED:
        click.echo(f"next: trajgrade hook install {agent} -c {path}")
    else:
        click.echo(f"next: trajgrade grade -c {path} --format {agent} LOG")
