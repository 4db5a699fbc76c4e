"""The ``trajgrade`` command line.

Commands::

    trajgrade grade -c CONFIG [INPUT ...]   grade logs (stdin when no INPUT or '-')
    trajgrade check -c CONFIG               validate a config, report every error
    trajgrade graders                       list grader types
    trajgrade formats                       list input formats
    trajgrade convert [INPUT ...]           write the canonical events of any log
    trajgrade stats [INPUT ...]             per-trace counts the graders see

Exit status of ``grade``: 0 every final verdict passed; 1 at least one fail or
error verdict; 2 usage or config error (also ``check`` on an invalid config).
130 when a second SIGINT/SIGTERM forced an immediate exit.
"""

from __future__ import annotations

import sys
from typing import Any, Final

import click

__all__ = ("main",)

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2


def _config_errors(exc: Exception) -> list[str]:
    from trajgrade.errors import ConfigErrors

    if isinstance(exc, ConfigErrors):
        return [str(e) for e in exc.errors]
    return [str(exc)]


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
@click.option(
    "-c",
    "--config",
    "config_path",
    required=True,
    type=click.Path(dir_okay=False),
    help="Grader config (YAML or JSON).",
)
@click.argument("inputs", nargs=-1, type=str)
@click.option(
    "--format",
    "fmt",
    default="auto",
    show_default=True,
    help="Input format: auto, or a name from `trajgrade formats`.",
)
@click.option(
    "--output",
    type=click.Choice(["auto", "jsonl", "pretty"]),
    default="auto",
    show_default=True,
    help="Verdicts as JSON lines, or readable text (auto: text on a terminal).",
)
@click.option(
    "--clock",
    type=click.Choice(["auto", "event", "wall"]),
    default="auto",
    show_default=True,
    help="Time for wall-time budgets: event timestamps only, or also the runner's clock (auto: wall for pipes, event for files).",
)
@click.option(
    "--tick",
    "tick_interval",
    type=click.FloatRange(min=0.001),
    default=0.1,
    show_default=True,
    help="Seconds between clock checks.",
)
@click.option(
    "--regex-timeout",
    type=click.FloatRange(min=0.001),
    default=0.25,
    show_default=True,
    help="Seconds one user regex may run on one value.",
)
@click.option(
    "--max-line-bytes",
    type=click.IntRange(min=1024),
    default=32 * 1024 * 1024,
    show_default=True,
    help="Longer input lines are skipped and reported.",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
)
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
@click.option(
    "--allow-code",
    is_flag=True,
    help="Allow graders/extractors named as path.py:function in the config to be imported and run.",
)
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
    "-q",
    "--quiet",
    is_flag=True,
    help="No summary; only warnings and errors are logged.",
)
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
    quiet: bool,
) -> None:
    """Grade agent event logs; verdicts on stdout as they are decided."""
    import anyio

    from trajgrade import log as tlog
    from trajgrade.config import load_suite
    from trajgrade.errors import ConfigError, InputError, SourceError
    from trajgrade.formats import BUILTIN as FORMATS
    from trajgrade.graders import BuildContext
    from trajgrade.runner import RunOptions, run

    tlog.configure(level="warning" if quiet else log_level)
    logger = tlog.get_logger()
    if fmt != "auto" and fmt not in FORMATS:
        msg = f"unknown format {fmt!r}; known: auto, {', '.join(sorted(FORMATS))}"
        raise click.BadParameter(msg, param_hint="--format")
    try:
        suite = load_suite(
            config_path,
            context=BuildContext(
                regex_timeout=regex_timeout, allow_code=allow_code, threshold=threshold
            ),
        )
    except ConfigError as exc:
        for line in _config_errors(exc):
            click.echo(f"error: {line}", err=True)
        sys.exit(EXIT_USAGE)
    for warning in suite.warnings:
        click.echo(f"warning: {warning}", err=True)
    samples = None
    if dataset_path is not None:
        from trajgrade.dataset import load_dataset

        try:
            samples = load_dataset(dataset_path, key=dataset_key)
        except InputError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_USAGE)
    pretty = output == "pretty" or (output == "auto" and sys.stdout.isatty())
    sink: Any
    if pretty:
        from trajgrade.sinks.jsonl import PrettySink

        sink = PrettySink(sys.stdout, color=sys.stdout.isatty())
    else:
        from trajgrade.sinks.jsonl import JsonlSink

        sink = JsonlSink(sys.stdout.buffer)
    options = RunOptions(
        inputs=list(inputs) or ["-"],
        fmt=fmt,
        clock=clock,
        tick_interval=tick_interval,
        max_line_bytes=max_line_bytes,
        samples=samples,
        trace_template=trace_template,
    )
    try:
        summary = anyio.run(run, suite, options, sink, logger)
    except SourceError as exc:
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
    if pretty and not quiet:
        counts = (
            ", ".join(f"{n} {o}" for o, n in sorted(summary.verdicts.items()))
            or "no verdicts"
        )
        click.echo(
            f"\n{summary.traces} traces, {summary.events} events: {counts}; {summary.input_errors} input errors"
        )
        if summary.failed_traces:
            shown = ", ".join(summary.failed_traces[:10])
            more = (
                f" (+{len(summary.failed_traces) - 10} more)"
                if len(summary.failed_traces) > 10
                else ""
            )
            click.echo(f"not passed: {shown}{more}")
    if not quiet:
        logger.info(
            "run_finished",
            traces=summary.traces,
            events=summary.events,
            verdicts={str(k): v for k, v in summary.verdicts.items()},
            input_errors=summary.input_errors,
            anomalies=summary.anomalies,
            interrupted=summary.interrupted,
        )
    if summary.failed_sources:
        sys.exit(EXIT_USAGE)  # an input could not be read to its end
    sys.exit(EXIT_OK if summary.all_passed else EXIT_FAILED)


@main.command()
@click.option(
    "-c",
    "--config",
    "config_path",
    required=True,
    type=click.Path(dir_okay=False),
    help="Grader config to validate.",
)
@click.option(
    "--allow-code",
    is_flag=True,
    help="Also import graders/extractors named as path.py:function, to validate them.",
)
def check(config_path: str, allow_code: bool) -> None:
    """Validate a config; print every error with file, line and field."""
    from trajgrade.config import load_suite
    from trajgrade.errors import ConfigError
    from trajgrade.graders import BuildContext

    try:
        suite = load_suite(config_path, context=BuildContext(allow_code=allow_code))
    except ConfigError as exc:
        for line in _config_errors(exc):
            click.echo(f"error: {line}", err=True)
        sys.exit(EXIT_USAGE)
    for warning in suite.warnings:
        click.echo(f"warning: {warning}", err=True)
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
