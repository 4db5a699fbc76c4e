"""The ``trajgrade`` command line.

Commands::

    trajgrade grade -c CONFIG [INPUT ...]   grade logs (stdin when no INPUT or '-')
    trajgrade check -c CONFIG               validate a config, report every error
    trajgrade init [--agent AGENT] [PATH]   write a starting policy (a shipped example)
    trajgrade graders                       list grader types
    trajgrade formats                       list input formats
    trajgrade convert [INPUT ...]           write the canonical events of any log
    trajgrade stats [INPUT ...]             per-trace counts the graders see
    trajgrade run -c POLICY -- AGENT ...    grade an agent's live output, stop it on a fail
    trajgrade hook / serve                  grade an agent from its hooks

The group is defined here; ``grade`` in :mod:`trajgrade.cli.grade` (its
request, plan and run in :mod:`~trajgrade.cli.grade_request`,
:mod:`~trajgrade.cli.plan` and :mod:`~trajgrade.cli.grade_run`); ``check``,
``graders``, ``formats``, ``convert`` and ``stats`` in
:mod:`trajgrade.cli.inspect`, ``run`` in :mod:`trajgrade.cli.run`, ``hook``
and ``serve`` in :mod:`trajgrade.cli.hooks`; the options they share in
:mod:`trajgrade.cli.options`.

Exit status of ``grade``: see :data:`trajgrade.runtime.exit_status.EXIT_CODES` (0 all
passed, 1 a fail or error, 2 usage/config error, 5 nothing graded, 130 forced).
"""

from __future__ import annotations

import click

__all__ = ("main",)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="trajgrade")
def main() -> None:
    """Streaming grader for AI-agent trajectories."""


# The other commands live in their own modules; they are added here.
from trajgrade.cli.grade import grade  # noqa: E402
from trajgrade.cli.hooks import hook, serve  # noqa: E402  # hooks
from trajgrade.cli.init import init  # noqa: E402
from trajgrade.cli.inspect import check, convert, formats, graders, stats  # noqa: E402
from trajgrade.cli.run import run  # noqa: E402  # wrapper

main.add_command(grade)
main.add_command(check)
main.add_command(init)
main.add_command(graders)
main.add_command(formats)
main.add_command(convert)
main.add_command(stats)
main.add_command(run)  # wrapper

main.add_command(hook)  # hooks
main.add_command(serve)  # hooks
