"""An example Flink job: a bounded file of events graded on a local mini-cluster.

    python -m trajgrade.integrations.flink_job POLICY EVENTS [--allow-code]

reads EVENTS (one event a line: canonical events as ``trajgrade convert``
writes them, or a supported log format) with Flink's ``FileSource``, grades
it with :func:`trajgrade.integrations.flink.grade` and prints the verdicts
and guard decisions as JSON lines (what ``trajgrade grade --output jsonl
--decisions`` prints, per trace in order). ``--checkpoint-dir`` turns on
checkpoints there. For Kafka in and out see docs/scale-out.md.
"""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from pyflink.common import Configuration, WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import FileSource, StreamFormat

from trajgrade.integrations.flink import grade

__all__ = ("environment", "job", "main")


def environment(
    *,
    parallelism: int = 1,
    checkpoint_dir: Path | None = None,
    interval_ms: int = 10_000,
) -> Any:
    """A local environment whose Python workers run this interpreter."""
    conf = Configuration()
    conf.set_string("python.executable", sys.executable)
    conf.set_string("python.client.executable", sys.executable)
    if checkpoint_dir is not None:
        conf.set_string("execution.checkpointing.interval", f"{interval_ms} ms")
        conf.set_string(
            "execution.checkpointing.dir", checkpoint_dir.resolve().as_uri()
        )
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    return env


def job(
    env: Any, policy: Path, events: Path, *, idle: timedelta, allow_code: bool
) -> Any:
    """The graded stream of a file's events: ``(trace_id, id, json)``."""
    files = FileSource.for_record_stream_format(
        StreamFormat.text_line_format(), str(events.resolve())
    ).build()
    lines = env.from_source(files, WatermarkStrategy.no_watermarks(), "events")
    return grade(lines, policy, idle=idle, allow_code=allow_code)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trajgrade.integrations.flink_job")
    parser.add_argument("policy", type=Path)
    parser.add_argument("events", type=Path)
    parser.add_argument("--allow-code", action="store_true")
    parser.add_argument("--idle-minutes", type=float, default=30.0)
    parser.add_argument("--parallelism", type=int, default=1)
    parser.add_argument("--checkpoint-dir", type=Path)
    args = parser.parse_args(argv)
    env = environment(parallelism=args.parallelism, checkpoint_dir=args.checkpoint_dir)
    idle = timedelta(minutes=args.idle_minutes)
    graded = job(env, args.policy, args.events, idle=idle, allow_code=args.allow_code)
    out = sys.stdout
    with graded.execute_and_collect() as results:
        for _trace_id, _id, js in results:
            out.write(js + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
