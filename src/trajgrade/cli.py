"""The ``trajgrade`` command line.

Commands::

    trajgrade grade -c CONFIG [INPUT ...]   grade logs (stdin when no INPUT or '-')
    trajgrade check -c CONFIG               validate a config, report every error
    trajgrade graders                       list grader types
    trajgrade formats                       list input formats
    trajgrade convert [INPUT ...]           write the canonical events of any log
    trajgrade stats [INPUT ...]             per-trace counts the graders see

Exit status of ``grade``: see :data:`trajgrade.exit_status.EXIT_CODES` (0 all
passed, 1 a fail or error, 2 usage/config error, 5 nothing graded, 130 forced).
"""

from __future__ import annotations

import sys
from functools import partial
from typing import Any, Final

import click

from trajgrade._gc import settle as settle_gc
from trajgrade.actions import ActionOptions, action_options
from trajgrade.cli_options import (
    EXIT_USAGE,
    allow_code_option,
    check_format,
    config_option,
    format_option,
    load_policy,
    log_level_option,
    max_line_bytes_option,
    output_option,
    quiet_option,
    regex_timeout_option,
    tick_option,
)
from trajgrade.graders._agents import AGENT_NAMES
from trajgrade.kafka.options import (  # kafka
    current_kafka_options,
    current_metrics_options,
    kafka_options,
)
from trajgrade.telemetry.options import current_telemetry, telemetry_options, wire

__all__ = ("main",)

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1


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
)
@click.option(
    "--threshold",
    type=click.FloatRange(0, 1),
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
    type=click.FloatRange(min=0),
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
    type=click.FloatRange(min=0.01),
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
@quiet_option("No summary or status line; only warnings and errors are logged.")
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
    log_level: str,
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

    from trajgrade import log as tlog
    from trajgrade.errors import InputError, SourceError, StateError
    from trajgrade.graders import BuildContext
    from trajgrade.runner import RunOptions, run

    if (kafka := current_kafka_options()) is not None:  # kafka
        from trajgrade.kafka.runner import runner_for  # kafka

        run = runner_for(kafka, inputs=inputs)  # kafka
    tlog.configure(level="warning" if quiet else log_level)
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
        from trajgrade.dataset import load_dataset

        try:
            samples = load_dataset(dataset_path, key=dataset_key)
        except InputError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_USAGE)
    usage = None
    if follow and not inputs:
        usage = "--follow needs the files to follow"
    elif follow and "-" in inputs:
        usage = "stdin cannot be followed (it is read live already); drop '-'"
    elif watch_dirs and inputs and not follow:
        usage = "with --watch, input files are followed too: add --follow"
    if usage is not None:
        raise click.UsageError(usage)
    pretty = output == "pretty" or (output == "auto" and sys.stdout.isatty())
    from_terminal = (
        not inputs and not watch_dirs and bool(sys.stdin and sys.stdin.isatty())
    )
    if from_terminal and not quiet:  # else it looks like a hang
        click.echo(STDIN_HINT, err=True)
    sink: Any
    status = None
    if pretty and sys.stdout.isatty() and not quiet:
        # A person is watching: a status line (progress bar for files of
        # known size), with the verdicts printed above it.
        from trajgrade.sinks.jsonl import PrettySink
        from trajgrade.status import ConsoleWriter, StatusLine

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
    except (SourceError, StateError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    except (OSError, BaseExceptionGroup) as exc:
        broken = _stdout_error(exc)
        if broken is None:
            raise
        _quiet_stdout()
        if not isinstance(broken, BrokenPipeError):
            click.echo(f"error: cannot write verdicts to stdout: {broken}", err=True)
        sys.exit(EXIT_FAILED)
    from trajgrade.exit_status import exit_code, report

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
    )
    sys.exit(exit_code(summary))


#: Shown when `grade` was given no input and stdin is a terminal.
STDIN_HINT: Final = (
    "trajgrade: reading events from stdin; type or paste JSON lines and end with "
    "Ctrl-D, or pipe a log in (tail -f LOG | trajgrade grade ...), or name files"
)

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


@main.command()
@config_option("Grader config to validate.")
@click.option(
    "--allow-code",
    is_flag=True,
    help="Also import graders/extractors named as path.py:function, to validate them.",
)
@click.option(
    "--agent",
    "agents",
    multiple=True,
    type=click.Choice(AGENT_NAMES),
    help="Warn about tool matchers that can never work on this agent's tools (repeatable).",
)
def check(config_path: str, allow_code: bool, agents: tuple[str, ...]) -> None:
    """Validate a config; print every error with file, line and field."""
    from trajgrade.graders import BuildContext
    from trajgrade.graders.agent_check import agent_warnings

    suite = load_policy(config_path, BuildContext(allow_code=allow_code))
    for agent in agents:
        for warning in agent_warnings(suite, agent):
            click.echo(f"warning: {agent}: {warning}", err=True)
    click.echo(
        f"{config_path}: ok, {len(suite.graders)} grader(s): {', '.join(g.name for g in suite.graders)}"
    )


@main.command()
def graders() -> None:
    """List the grader types, one line each."""
    from trajgrade.graders import provider, registry

    types = registry()
    width = max(len(k) for k in types)
    for kind in sorted(types):
        t = types[kind]
        if t.kind != kind:
            continue  # an alias; listed with its type
        origin = provider(kind)
        plugin = "" if origin == "trajgrade" else f" [plugin: {origin}]"
        aliases = getattr(t, "aliases", ())
        also = f" (also: {', '.join(aliases)})" if aliases else ""
        click.echo(f"{kind:<{width}}  {t.summary}{also}{plugin}")


@main.command()
def formats() -> None:
    """List the input formats, one line each."""
    from trajgrade.formats import BUILTIN

    width = max(len(k) for k in BUILTIN)
    for name in sorted(BUILTIN):
        click.echo(f"{name:<{width}}  {BUILTIN[name].summary}")


@main.command()
@click.argument("inputs", nargs=-1, type=str)
@click.option(
    "--format",
    "fmt",
    default="auto",
    show_default=True,
    help="Input format: auto, or a name from `trajgrade formats`.",
)
def convert(inputs: tuple[str, ...], fmt: str) -> None:
    """Write the canonical JSONL events any supported log is read as."""
    from trajgrade import log as tlog
    from trajgrade.convert import convert as run_convert
    from trajgrade.errors import SourceError

    tlog.configure(level="warning")
    try:
        errors = run_convert(
            list(inputs) or ["-"], fmt=fmt, out=sys.stdout.buffer, log=tlog.get_logger()
        )
    except SourceError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    sys.exit(EXIT_FAILED if errors else EXIT_OK)


@main.command()
@click.argument("inputs", nargs=-1, type=str)
@click.option(
    "--format",
    "fmt",
    default="auto",
    show_default=True,
    help="Input format: auto, or a name from `trajgrade formats`.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="One JSON object per trace instead of a table.",
)
def stats(inputs: tuple[str, ...], fmt: str, as_json: bool) -> None:
    """Per trace: tool calls by name, results, unanswered calls, errors, turns, tokens, duration."""
    import msgspec

    from trajgrade import log as tlog
    from trajgrade.convert import print_stats
    from trajgrade.convert import stats as run_stats
    from trajgrade.errors import SourceError

    tlog.configure(level="warning")
    try:
        rows, errors = run_stats(list(inputs) or ["-"], fmt=fmt, log=tlog.get_logger())
    except SourceError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    if as_json:
        for row in rows:
            sys.stdout.buffer.write(msgspec.json.encode(row) + b"\n")
    else:
        print_stats(rows)
    sys.exit(EXIT_FAILED if errors else EXIT_OK)


# wrapper


@main.command(
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)
@config_option(
    "Policy: a grader config (YAML or JSON); `on_fail:` marks what stops the agent."
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@format_option("The agent's output format: auto, or a name from `trajgrade formats`.")
@click.option(
    "--agent-output",
    default="-",
    show_default=True,
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Where the agent's stdout goes, byte for byte ('-': our stdout).",
)
@click.option(
    "--verdicts",
    "verdicts_path",
    default=None,
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Where verdicts go (default: stderr; '-': stdout, only with --agent-output FILE).",
)
@click.option(
    "--decisions",
    "decisions_path",
    metavar="PATH",
    default=None,
    help='Also write every guard decision as a JSON line with "type": "decision" to PATH (appended; \'-\': stdout, only with --agent-output FILE). See docs/guard.md.',
)
@output_option
@click.option(
    "--stop-on",
    type=click.Choice(["marked", "abort", "never"]),
    default="marked",
    show_default=True,
    help="Which fails stop the agent: graders marked on_fail abort or deny, only abort, or never.",
)
@click.option(
    "--grace",
    type=click.FloatRange(min=0),
    default=5.0,
    show_default=True,
    help="Seconds between SIGTERM and SIGKILL when stopping the agent.",
)
@tick_option
@regex_timeout_option
@max_line_bytes_option(
    "Longer lines of the agent's output are passed through but not graded."
)
@click.option(
    "--trace-id",
    default=None,
    help="Trace id of events that carry none (default: the command's name).",
)
@allow_code_option
@log_level_option
@quiet_option()
@action_options(fail_fast=False)
def run(
    config_path: str,
    command: tuple[str, ...],
    fmt: str,
    agent_output: str,
    verdicts_path: str | None,
    decisions_path: str | None,
    output: str,
    stop_on: str,
    grace: float,
    tick_interval: float,
    regex_timeout: float,
    max_line_bytes: int,
    trace_id: str | None,
    allow_code: bool,
    log_level: str,
    quiet: bool,
    actions: Any,
) -> None:
    """Start an agent, grade its live output, stop it on a fail.

    \b
    trajgrade run -c policy.yaml -- claude -p "..." --output-format stream-json --verbose
    trajgrade run -c policy.yaml -- codex exec --json "..."

    Exit status: 0 passed; 1 a verdict failed; 2 usage/config error or the
    agent could not start; 3 trajgrade stopped the agent; 4 the agent failed
    on its own; 128+N a signal N to trajgrade (forwarded) ended the run.
    """
    import contextlib
    import functools

    import anyio

    from trajgrade import log as tlog
    from trajgrade.errors import SourceError
    from trajgrade.graders import BuildContext
    from trajgrade.wrapper import WrapOptions, wrap

    tlog.configure(level="warning" if quiet else log_level)
    logger = tlog.get_logger()
    check_format(fmt)
    for given, hint in ((verdicts_path, "--verdicts"), (decisions_path, "--decisions")):
        if given == "-" and agent_output == "-":
            what = hint.removeprefix("--")
            msg = f"stdout carries the agent's output; send it to a file with --agent-output FILE to get {what} on stdout"
            raise click.BadParameter(msg, param_hint=hint)
    suite = load_policy(
        config_path, BuildContext(regex_timeout=regex_timeout, allow_code=allow_code)
    )
    with contextlib.ExitStack() as stack:
        try:
            agent_out = (
                sys.stdout.buffer
                if agent_output == "-"
                else stack.enter_context(open(agent_output, "wb"))
            )
            if verdicts_path is None:
                verdict_out = sys.stderr.buffer
            elif verdicts_path == "-":
                verdict_out = sys.stdout.buffer
            else:
                verdict_out = stack.enter_context(open(verdicts_path, "wb"))
        except OSError as exc:
            click.echo(
                f"error: {exc.filename}: {exc.strerror}; check the path", err=True
            )
            sys.exit(EXIT_USAGE)
        sink: Any
        if output == "pretty" or (output == "auto" and verdict_out.isatty()):
            import io

            from trajgrade.sinks.jsonl import PrettySink

            text = io.TextIOWrapper(verdict_out, encoding="utf-8", write_through=True)
            stack.callback(text.detach)
            sink = PrettySink(text, color=verdict_out.isatty())
        else:
            from trajgrade.sinks.jsonl import JsonlSink

            sink = JsonlSink(verdict_out)
        options = WrapOptions(
            command=list(command),
            fmt=fmt,
            stop_on=stop_on,
            grace=grace,
            tick_interval=tick_interval,
            max_line_bytes=max_line_bytes,
            trace_id=trace_id,
            decisions=decisions_path,
        )
        settle_gc()
        try:
            summary = anyio.run(
                functools.partial(
                    wrap,
                    suite,
                    options,
                    agent_out=agent_out,
                    sink=sink,
                    log=logger,
                    actions=actions,
                )
            )
        except SourceError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_USAGE)
    stopped = summary.stopped_by
    logger.info(
        "run_finished",
        agent_exit=summary.agent_exit,
        exit_code=summary.exit_code,
        stopped_by=None if stopped is None else stopped.grader,
        traces=summary.traces,
        events=summary.events,
        verdicts={str(k): v for k, v in summary.verdicts.items()},
        input_errors=summary.input_errors,
    )
    sys.exit(summary.exit_code)


from trajgrade.hooks.cli import hook, serve  # noqa: E402  # hooks

main.add_command(hook)  # hooks
main.add_command(serve)  # hooks
