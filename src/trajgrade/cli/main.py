"""The ``trajgrade`` command line.

Commands::

    trajgrade grade -c CONFIG [INPUT ...]   grade logs (stdin when no INPUT or '-')
    trajgrade check -c CONFIG               validate a config, report every error
    trajgrade graders                       list grader types
    trajgrade formats                       list input formats
    trajgrade convert [INPUT ...]           write the canonical events of any log
    trajgrade stats [INPUT ...]             per-trace counts the graders see
    trajgrade run -c POLICY -- AGENT ...    grade an agent's live output, stop it on a fail
    trajgrade hook / serve                  grade an agent from its hooks

``grade`` is defined here; ``check``, ``graders``, ``formats``, ``convert`` and
``stats`` in :mod:`trajgrade.cli.inspect`, ``run`` in :mod:`trajgrade.cli.run`,
``hook`` and ``serve`` in :mod:`trajgrade.cli.hooks`; the options they share
in :mod:`trajgrade.cli.options`.

Exit status of ``grade``: see :data:`trajgrade.runtime.exit_status.EXIT_CODES` (0 all
passed, 1 a fail or error, 2 usage/config error, 5 nothing graded, 130 forced).
"""

from __future__ import annotations

import sys
from functools import partial
from typing import TYPE_CHECKING, Any, Final

import click

from trajgrade.cli.action_options import action_options
from trajgrade.cli.options import (
    EXIT_FAILED,
    EXIT_USAGE,
    allow_code_option,
    check_format,
    check_trace_template,
    config_option,
    format_option,
    load_policy,
    log_level,
    log_level_option,
    max_line_bytes_option,
    output_option,
    quiet_option,
    regex_timeout_option,
    tick_option,
)
from trajgrade.cli.types import FiniteFloat, require_companions
from trajgrade.kafka.options import (  # kafka
    current_kafka_options,
    current_metrics_options,
    kafka_options,
)
from trajgrade.runtime.gc import settle as settle_gc
from trajgrade.runtime.stdin_hint import hint_stdin, stdin_is_terminal
from trajgrade.telemetry.options import current_telemetry, telemetry_options, wire

if TYPE_CHECKING:
    from trajgrade.runtime.actions import ActionOptions

__all__ = ("main",)


def _stdout_error(exc: BaseException) -> OSError | None:
    """The stdout write error inside ``exc`` (the task group wraps it), if any."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _stdout_error(inner)
            if found is not None:
                return found
        return None
    return (
        exc
        if isinstance(exc, OSError) and not isinstance(exc, FileNotFoundError)
        else None
    )


def _found(exc: BaseException, kinds: tuple[type[Exception], ...]) -> Exception | None:
    """The first exception of ``kinds`` in ``exc`` or the groups it nests."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            if (found := _found(inner, kinds)) is not None:
                return found
        return None
    return exc if isinstance(exc, kinds) else None


def _quiet_stdout() -> None:
    # The reader is gone (or the disk is full): point stdout at /dev/null so
    # the interpreter's final flush does not fail a second time.
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="trajgrade")
def main() -> None:
    """Streaming grader for AI-agent trajectories."""


@main.command()
@config_option()
@click.argument("inputs", nargs=-1, type=str)
@format_option()
@output_option
@click.option(
    "--clock",
    type=click.Choice(["auto", "event", "wall"]),
    default="auto",
    show_default=True,
    help="Time for wall-time budgets: event timestamps only, or also the runner's clock (auto: wall for pipes, event for files).",
)
@tick_option
@regex_timeout_option
@max_line_bytes_option()
@log_level_option
@click.option(
    "--dataset",
    "dataset_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Samples (JSONL, or a JSON/YAML list) giving traces their ground truth.",
)
@click.option(
    "--dataset-key",
    default="id",
    show_default=True,
    help="Sample field matched (as text) against the trace id.",
)
@allow_code_option
@click.option(
    "--trace-id",
    "trace_template",
    default="{path}",
    show_default=True,
    help="Trace id of events that carry none: a template with {path}, {name}, {stem}, {parent}.",
    callback=check_trace_template,
)
@click.option(
    "--threshold",
    type=FiniteFloat(0, 1),
    default=None,
    help="Pass threshold for graders that have one (agentv tool_trajectory; default 0.8).",
)
@click.option(
    "--follow",
    "-f",
    is_flag=True,
    help="Keep reading the input files as they grow (like tail -F); survives rotation and truncation.",
)
@click.option(
    "--watch",
    "watch_dirs",
    multiple=True,
    type=click.Path(file_okay=False),
    metavar="DIR",
    help="Grade every session file under DIR, including ones created later (repeatable).",
)
@click.option(
    "--glob",
    "glob_pattern",
    default="**/*.jsonl",
    show_default=True,
    help="Which files under a --watch DIR are session files.",
)
@click.option(
    "--idle-timeout",
    type=FiniteFloat(min=0),
    default=None,
    help="Seconds without an event after which a live trace is closed and gets its final verdicts (default 600 with --follow/--watch; 0: never).",
)
@click.option(
    "--state",
    "state_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Checkpoint grader state and read positions here; a restart with the same arguments continues where the last run stopped.",
)
@click.option(
    "--checkpoint-interval",
    type=FiniteFloat(min=0.01),
    default=5.0,
    show_default=True,
    help="Seconds between checkpoints (also written on shutdown).",
)
@click.option(
    "--decisions",
    "decisions_path",
    metavar="PATH",
    default=None,
    help='Also write every guard decision (a call a rule denies, asks about or warns of; a run abort) as a JSON line with "type": "decision" to PATH (appended; \'-\': stdout, between the verdicts). See docs/guard.md.',
)
@quiet_option(
    "No summary or status line; only warnings and errors are logged (unless --log-level says otherwise)."
)
@action_options
@kafka_options  # kafka
@telemetry_options
def grade(
    config_path: str,
    inputs: tuple[str, ...],
    fmt: str,
    output: str,
    clock: str,
    tick_interval: float,
    regex_timeout: float,
    max_line_bytes: int,
    given_level: str | None,
    dataset_path: str | None,
    dataset_key: str,
    allow_code: bool,
    trace_template: str,
    threshold: float | None,
    follow: bool,
    watch_dirs: tuple[str, ...],
    glob_pattern: str,
    idle_timeout: float | None,
    state_dir: str | None,
    checkpoint_interval: float,
    decisions_path: str | None,
    quiet: bool,
    actions: ActionOptions,
) -> None:
    """Grade agent event logs; verdicts on stdout as they are decided."""
    import anyio

    from trajgrade.errors import InputError, SinkError, SourceError, StateError
    from trajgrade.graders import BuildContext
    from trajgrade.runner.options import RunOptions
    from trajgrade.runner.run import run
    from trajgrade.runtime import log as tlog

    if (kafka := current_kafka_options()) is not None:  # kafka
        from trajgrade.kafka.runner import runner_for  # kafka

        run = runner_for(kafka, inputs=inputs)  # kafka
    tlog.configure(level=log_level(given_level, quiet=quiet))
    logger = tlog.get_logger()
    check_format(fmt)
    suite = load_policy(
        config_path,
        BuildContext(
            regex_timeout=regex_timeout, allow_code=allow_code, threshold=threshold
        ),
    )
    samples = None
    if dataset_path is not None:
        from trajgrade.runner.dataset import load_dataset

        try:
            samples = load_dataset(dataset_path, key=dataset_key)
        except InputError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_USAGE)
    require_companions(
        {
            "glob_pattern": "watch_dirs",
            "dataset_key": "dataset_path",
            "checkpoint_interval": "state_dir",
        }
    )
    usage = None
    if follow and not inputs:
        usage = "--follow needs the files to follow"
    elif follow and "-" in inputs:
        usage = "stdin cannot be followed (it is read live already); drop '-'"
    elif watch_dirs and inputs and not follow:
        usage = "with --watch, input files are followed too: add --follow"
    if sys.stdout is None:  # started with stdout closed (`>&-`)
        usage = "stdout is closed, so the verdicts have nowhere to go; redirect it (to /dev/null to keep only the exit status)"
    if usage is not None:
        raise click.UsageError(usage)
    pretty = output == "pretty" or (output == "auto" and sys.stdout.isatty())
    from_terminal = not inputs and not watch_dirs and stdin_is_terminal()
    if from_terminal and not quiet:  # else it looks like a hang
        hint_stdin("grade")
    sink: Any
    status = None
    if pretty and sys.stdout.isatty() and not quiet:
        # A person is watching: a status line (progress bar for files of
        # known size), with the verdicts printed above it.
        from trajgrade.runtime.status_line import ConsoleWriter, StatusLine
        from trajgrade.sinks.jsonl import PrettySink

        status = StatusLine(
            total_bytes=_total_bytes(inputs, live=follow or bool(watch_dirs)),
            label="reading stdin" if from_terminal else None,
        )
        sink = PrettySink(ConsoleWriter(status.console), color=True)
    elif pretty:
        from trajgrade.sinks.jsonl import PrettySink

        sink = PrettySink(sys.stdout, color=sys.stdout.isatty())
    else:
        from trajgrade.sinks.jsonl import JsonlSink

        sink = JsonlSink(sys.stdout.buffer)
    options = RunOptions(
        inputs=list(inputs) or ([] if watch_dirs else ["-"]),
        fmt=fmt,
        clock=clock,
        tick_interval=tick_interval,
        max_line_bytes=max_line_bytes,
        samples=samples,
        trace_template=trace_template,
        follow=follow,
        watch=[(d, glob_pattern) for d in watch_dirs],
        idle_timeout=_idle_timeout(idle_timeout, live=follow or bool(watch_dirs)),
        state_dir=state_dir,
        checkpoint_interval=checkpoint_interval,
        decisions=decisions_path,
    )
    options.metrics_port, options.metrics_host = current_metrics_options()
    sink = wire(
        current_telemetry(),
        options,
        sink,
        given=inputs,
        log=logger,
        live_idle=LIVE_IDLE_TIMEOUT,
    )
    extra: dict[str, Any] = {"status": status, "actions": actions}
    settle_gc()
    try:
        if status is not None:
            with status:
                summary = anyio.run(partial(run, **extra), suite, options, sink, logger)
        else:
            summary = anyio.run(partial(run, **extra), suite, options, sink, logger)
    except (SourceError, StateError, SinkError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    except (OSError, BaseExceptionGroup) as exc:
        # A state directory that fails mid-run (a full disk) surfaces from
        # inside the task group: the same error and status as at start-up.
        fatal = _found(exc, (SourceError, StateError, SinkError))
        if fatal is not None:
            click.echo(f"error: {fatal}", err=True)
            sys.exit(EXIT_USAGE)
        broken = _stdout_error(exc)
        if broken is None:
            raise
        _quiet_stdout()
        if not isinstance(broken, BrokenPipeError):
            click.echo(f"error: cannot write verdicts to stdout: {broken}", err=True)
        sys.exit(EXIT_FAILED)
    from trajgrade.runtime.exit_status import exit_code, report

    notes = []
    if dataset_path is not None and summary.dataset is not None:
        from trajgrade.runner.dataset import unmatched_note

        match = summary.dataset
        note = unmatched_note(match, path=dataset_path, key=dataset_key)
        if note is not None:  # verdicts stand; the log and summary say why
            logger.warning(
                "dataset_unmatched",
                dataset=dataset_path,
                rows_unmatched=match.rows_unmatched,
                traces_without_row=match.traces_without_row,
                reason=note,
            )
            notes.append(note)

    # After the readable summary, on the same terminal, the log line says
    # nothing new; it stays for log pipelines (stderr not a terminal).
    summarised = pretty and sys.stdout.isatty() and sys.stderr.isatty()
    report(
        summary,
        logger,
        pretty=pretty,
        quiet=quiet,
        echo=click.echo,
        summarised=summarised,
        notes=notes,
    )
    sys.exit(exit_code(summary))


#: Idle timeout of live traces when --idle-timeout is not given.
LIVE_IDLE_TIMEOUT: Final = 600.0


def _total_bytes(inputs: tuple[str, ...], *, live: bool) -> int | None:
    """Bytes a batch run will read, when every input is a regular file."""
    import os
    import stat

    if live or not inputs:
        return None
    total = 0
    for name in inputs:
        try:
            st = os.stat(name)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        total += st.st_size
    return total


def _idle_timeout(given: float | None, *, live: bool) -> float | None:
    if given is None:
        return LIVE_IDLE_TIMEOUT if live else None
    return given or None


# The other commands live in their own modules; they are added here.
from trajgrade.cli.hooks import hook, serve  # noqa: E402  # hooks
from trajgrade.cli.inspect import check, convert, formats, graders, stats  # noqa: E402
from trajgrade.cli.run import run  # noqa: E402  # wrapper

main.add_command(check)
main.add_command(graders)
main.add_command(formats)
main.add_command(convert)
main.add_command(stats)
main.add_command(run)  # wrapper

main.add_command(hook)  # hooks
main.add_command(serve)  # hooks
