"""trajgrade: a streaming grader and guard for AI-agent trajectories.

Reading map. A pure, synchronous **core** (events in; verdicts and per-call
guard decisions out; no I/O, no clock, no logging) sits inside **edges** that
read, write, wait, and talk to processes and brokers. Each part below is a
module or a package; a package's ``__init__`` says what is inside it.
tests/test_public_api.py keeps the two lists: every part is on exactly one,
no core module imports an I/O, clock, logging or async library or an edge,
and tests/test_house.py keeps the layers: no import circle, and no import
from a part to one listed after it (the lists run from the ground up).

Core (start at the top):

* ``errors``        typed errors that carry the place and the fix
* ``_util/``        pure helpers: nesting bounds, lone surrogates, JSON
  values, error locations, bounded id memories, digests, JavaScript
  renderings, package faces
* ``events``        the canonical event model every grader sees, and its
  projection (decode only what a suite reads)
* ``verdicts``      outcomes, decisions, verdicts and the finality rule
* ``graders/``      the grader contract (``_spec``, ``capabilities``) and
  registry; ``matching/`` (regexes, tool matchers, per-agent tool tables)
  and one subpackage per upstream: ``vally/``, ``agentv/``, ``letta/``,
  ``aigo/``, and trajgrade's own guard ``rules/``
* ``formats/``      upstream log formats -> canonical events (sans-IO)
* ``config/``       config files: YAML, the model, layouts, decode, compile
  a Suite (``load_config`` is the core's one file read)
* ``engine/``       per-trace grader state, checkpoints, the clock, routes,
  a guard decision for every tool call, packed idle traces
* ``pipeline/``     bytes -> lines -> events -> engine: the decoder, decoded
  batches, grading them, ``grade_bytes``

Edges:

* ``api/``          StreamGrader: the pipeline for embedding (feed, finish;
  live async sources; checkpoints; the checks of its arguments); TraceHost:
  one trace's state kept by a stream processor
* ``sources/``, ``sinks/``  where events come from and verdicts go
* ``report/``       the run as one self-contained HTML page (``grade --report``)
* ``telemetry/``    OTLP in and out, JUnit
* ``runtime/``      what every long-running command shares: signals, memory,
  exit status, the status line, metrics, the HTTP edge, on-fail actions,
  logs, reports of bad input
* ``runner/``       grade files, pipes and followed logs: the run, its state,
  tracked inputs, rotation, the durable store, datasets
* ``sandbox/``      the guard's OS layer: the policy's ``protect:`` section
  compiled into the host's sandbox settings and into bubblewrap
* ``kafka/``        grade a Kafka topic: consumer loop, grading steps, output
* ``integrations/`` graders hosted in stream processors (Quix Streams)
* ``hooks/``        answer agents' hook calls (cold hooks and ``serve``)
* ``wrapper/``      ``trajgrade run -- AGENT``: the agent's process group and
  output, stopped on a fail
* ``cli/``          every command and every click option group
* ``_entry``, ``__main__``, ``_version``, ``examples/``  the console entry
  point (the hook path first, without click), the version, shipped policies

The public API is re-exported here, lazily.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trajgrade.api.stream_grader import StreamGrader
    from trajgrade.config.compile import compile_suite, load_suite
    from trajgrade.config.decode import decode_config, load_config
    from trajgrade.config.model import OnFail, Suite, SuiteConfig
    from trajgrade.engine.engine import (
        Anomaly,
        Engine,
        EngineState,
        EngineStats,
        TraceSnapshot,
    )
    from trajgrade.errors import (
        ConcurrentUseError,
        ConfigError,
        ConfigErrors,
        GradeError,
        InputError,
        Location,
        SinkError,
        SourceError,
        StateError,
        TrajgradeError,
    )
    from trajgrade.events import (
        AgentError,
        Event,
        Message,
        ToolCall,
        ToolResult,
        TraceEnd,
        TraceStart,
        TurnStart,
        Usage,
    )
    from trajgrade.graders import BuildContext, Grader, GraderType
    from trajgrade.pipeline.decoder import SourceDecoder
    from trajgrade.pipeline.whole import GradeResult, grade_bytes
    from trajgrade.verdicts import (
        Action,
        Decision,
        GuardDecision,
        Judgement,
        Outcome,
        Verdict,
    )

__all__ = (
    "Action",
    "AgentError",
    "Anomaly",
    "BuildContext",
    "ConcurrentUseError",
    "ConfigError",
    "ConfigErrors",
    "Decision",
    "Engine",
    "EngineState",
    "EngineStats",
    "Event",
    "GradeError",
    "GradeResult",
    "Grader",
    "GraderType",
    "GuardDecision",
    "InputError",
    "Judgement",
    "Location",
    "Message",
    "OnFail",
    "Outcome",
    "SinkError",
    "SourceDecoder",
    "SourceError",
    "StateError",
    "StreamGrader",
    "Suite",
    "SuiteConfig",
    "ToolCall",
    "ToolResult",
    "TraceEnd",
    "TraceSnapshot",
    "TraceStart",
    "TrajgradeError",
    "TurnStart",
    "Usage",
    "Verdict",
    "compile_suite",
    "decode_config",
    "grade_bytes",
    "load_config",
    "load_suite",
)


#: Public name -> the module that defines it. Imported on first use, so
#: ``import trajgrade.<part>`` (the hook path, say) loads only that part.
_EXPORTS: dict[str, str] = {
    "Action": "trajgrade.verdicts",
    "AgentError": "trajgrade.events",
    "Anomaly": "trajgrade.engine",
    "BuildContext": "trajgrade.graders",
    "ConcurrentUseError": "trajgrade.errors",
    "ConfigError": "trajgrade.errors",
    "ConfigErrors": "trajgrade.errors",
    "Decision": "trajgrade.verdicts",
    "Engine": "trajgrade.engine",
    "EngineState": "trajgrade.engine",
    "EngineStats": "trajgrade.engine",
    "Event": "trajgrade.events",
    "GradeError": "trajgrade.errors",
    "GradeResult": "trajgrade.pipeline",
    "Grader": "trajgrade.graders",
    "GraderType": "trajgrade.graders",
    "GuardDecision": "trajgrade.verdicts",
    "Judgement": "trajgrade.verdicts",
    "InputError": "trajgrade.errors",
    "Location": "trajgrade.errors",
    "Message": "trajgrade.events",
    "OnFail": "trajgrade.config",
    "Outcome": "trajgrade.verdicts",
    "SinkError": "trajgrade.errors",
    "SourceDecoder": "trajgrade.pipeline",
    "SourceError": "trajgrade.errors",
    "StateError": "trajgrade.errors",
    "StreamGrader": "trajgrade.api",
    "Suite": "trajgrade.config",
    "SuiteConfig": "trajgrade.config",
    "ToolCall": "trajgrade.events",
    "ToolResult": "trajgrade.events",
    "TraceEnd": "trajgrade.events",
    "TraceSnapshot": "trajgrade.engine",
    "TraceStart": "trajgrade.events",
    "TrajgradeError": "trajgrade.errors",
    "TurnStart": "trajgrade.events",
    "Usage": "trajgrade.events",
    "Verdict": "trajgrade.verdicts",
    "compile_suite": "trajgrade.config",
    "decode_config": "trajgrade.config",
    "grade_bytes": "trajgrade.pipeline",
    "load_config": "trajgrade.config",
    "load_suite": "trajgrade.config",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # later lookups skip this function
        return value
    if name == "__version__":
        from importlib.metadata import version

        return version("trajgrade")
    msg = f"module 'trajgrade' has no attribute {name!r}"
    raise AttributeError(msg)


def __dir__() -> list[str]:
    return sorted(__all__)
