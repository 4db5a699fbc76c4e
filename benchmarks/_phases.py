"""One ``trajgrade grade`` run, in process, its CPU time split by phase.

``python benchmarks/_phases.py [GRADE ARGS...]`` runs the real command line
(:func:`trajgrade._entry.main`, the same reader, engine and sink as the
whole-process figures) with timers around the pieces a run is made of, and
prints one JSON object on stderr (stdout stays the verdicts):

* ``startup_s``: the process's CPU time when the first bytes reach the
  decoder (interpreter, imports, the policy read and compiled);
* ``decode_s``: the reader (``SourceDecoder.feed``/``close``: nesting
  bound, line split, typed decode);
* ``handlers_s``: the engine's feeding and closing of traces less the
  verdicts it builds (routing, grader handlers, bookkeeping);
* ``verdicts_s``: building the verdicts (``VerdictReporter._stamp``:
  evidence, id, the ``Verdict``), timed one by one with ``perf_counter``
  (so approximate: about 0.1 µs of timer per verdict is in it);
* ``output_s``: the JSONL sink;
* ``other_s``: the rest (the source's reads, the summary, exit).

The decode, engine and output timers are CPU time (``process_time``), one
pair per chunk or batch. ``run.py`` runs it in the same rounds as the
whole-process programs and prints the medians.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from typing import Any


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class _Phases:
    def __init__(self) -> None:
        self.startup_s: float | None = None
        self.decode_s = 0.0
        self.engine_s = 0.0
        self.verdicts_s = 0.0
        self.output_s = 0.0
        self.n_verdicts = 0

    def timed(self, fn: Any, phase: str) -> Any:
        """``fn`` with its CPU time added to ``phase``."""
        clock = time.process_time

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if self.startup_s is None and phase == "decode_s":
                self.startup_s = _cpu()
            t0 = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                setattr(self, phase, getattr(self, phase) + clock() - t0)

        return wrapper

    def timed_batches(self, fn: Any) -> Any:
        """A generator function whose iteration is engine time."""
        clock = time.process_time

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            it = iter(fn(*args, **kwargs))
            while True:
                t0 = clock()
                try:
                    item = next(it)
                except StopIteration:
                    self.engine_s += clock() - t0
                    return
                self.engine_s += clock() - t0
                yield item

        return wrapper

    def stamped(self, fn: Any) -> Any:
        clock = time.perf_counter

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t0 = clock()
            out = fn(*args, **kwargs)
            self.verdicts_s += clock() - t0
            self.n_verdicts += out is not None
            return out

        return wrapper

    def report(self) -> dict[str, Any]:
        total = _cpu()
        startup = self.startup_s if self.startup_s is not None else total
        handlers = max(0.0, self.engine_s - self.verdicts_s)
        known = startup + self.decode_s + self.engine_s + self.output_s
        return {
            "startup_s": startup,
            "decode_s": self.decode_s,
            "handlers_s": handlers,
            "verdicts_s": self.verdicts_s,
            "output_s": self.output_s,
            "other_s": max(0.0, total - known),
            "total_cpu_s": total,
            "n_verdicts": self.n_verdicts,
        }


def main() -> None:
    phases = _Phases()
    # Imported here, after the clock of the process started: their cost is
    # start-up, as in a real run.
    from trajgrade.engine.engine import Engine
    from trajgrade.engine.reporting import VerdictReporter
    from trajgrade.pipeline.decoder import SourceDecoder
    from trajgrade.sinks.jsonl import JsonlSink

    SourceDecoder.feed = phases.timed(SourceDecoder.feed, "decode_s")  # type: ignore[method-assign]
    SourceDecoder.close = phases.timed(SourceDecoder.close, "decode_s")  # type: ignore[method-assign]
    Engine.feed_many = phases.timed(Engine.feed_many, "engine_s")  # type: ignore[method-assign]
    Engine.finish_batches = phases.timed_batches(Engine.finish_batches)  # type: ignore[method-assign]
    VerdictReporter._stamp = phases.stamped(VerdictReporter._stamp)  # type: ignore[method-assign]
    JsonlSink.send = phases.timed(JsonlSink.send, "output_s")  # type: ignore[method-assign]

    from trajgrade._entry import main as entry

    sys.argv = ["trajgrade", *sys.argv[1:]]
    code: Any = 0
    try:
        entry()
    except SystemExit as exc:
        code = exc.code
    sys.stdout.flush()
    sys.stderr.write("\nPHASES " + json.dumps(phases.report()) + "\n")
    sys.exit(code)


if __name__ == "__main__":
    main()
