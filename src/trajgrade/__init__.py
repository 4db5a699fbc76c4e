"""trajgrade: a streaming grader and guard for AI-agent trajectories.

Reading map. A pure, synchronous **core** (events in; verdicts and per-call
guard decisions out; no I/O, no clock, no logging) sits inside **edges** that
read, write, wait, and talk to processes and brokers. tests/test_public_api.py
keeps the two lists below: every module is on exactly one, and no core
module imports an I/O, clock, logging or async library, or an edge module.

Core (start at the top):

* ``events``        the canonical event model every grader sees
* ``verdicts``      outcomes, decisions, verdicts and the finality rule
* ``errors``        typed errors that carry the place and the fix
* ``engine``, ``engine_state``, ``engine_checkpoint``, ``engine_clock``,
  ``engine_input``, ``engine_dataset``, ``guarding``, ``routing``,
  ``packing``  per-trace grader state and its checkpoints, verdicts, ticks
  by deadline and idle timeouts, events built in code checked before they
  are graded, which dataset rows found their trace, a decision
  for every tool call, the compiled routes (which graders an event can
  concern), idle traces' states packed into bytes
* ``graders/``      the grader contract and registry; ``matching/`` (regexes,
  tool matchers, per-agent tool tables) and one subpackage per upstream:
  ``vally/``, ``agentv/``, ``letta/``, ``aigo/``, and trajgrade's own guard
  ``rules/``
* ``formats/``      upstream log formats -> canonical events (sans-IO)
* ``config``, ``_config_layouts``  config files: decode, recognise the
  layout, compile a Suite (``load_config`` is the core's one file read)
* ``pipeline``, ``batches``, ``grading``, ``projection``  bytes -> lines ->
  events -> engine; decoded chunks and their lines; batches into the engine
  with their errors located; the decode of only what a suite reads
* ``_locate``, ``_yaml``, ``_digest``, ``_depth``, ``_surrogates``,
  ``_json_values``, ``_input_options``, ``bounded_ids``  their helpers
  (error locations, YAML 1.1/1.2, ids, nesting limits, lone surrogate
  escapes, the values a JSON line holds, the library's input options,
  bounded memories of recent ids)

Edges:

* ``api``, ``api_async``, ``api_state``, ``_api_checks``  StreamGrader: the
  pipeline for embedding (feed, finish; live async sources; checkpoints;
  the checks of its arguments)
* ``runner``, ``_run_state``, ``sources/``, ``sinks/``, ``tracking``,
  ``rotation``, ``state``  grade files, pipes and followed logs; checkpoints
* ``kafka/``        grade a Kafka topic: consumer loop, grading steps, output
* ``hooks/``, ``http_edge``, ``http_options``  answer agents' hook calls
* ``wrapper``, ``_agent_output``, ``_agent_group``, ``actions``,
  ``action_options``  ``trajgrade run``; on-fail actions
* ``telemetry/``, ``metrics``, ``log``, ``status``, ``reporting``  OTLP,
  Prometheus, structured logs, the status line
* ``cli``, ``cli_inspect``, ``cli_run``, ``cli_options``, ``_click_types``,
  ``stdin_hint``, ``_entry``, ``__main__``  the command line
* ``convert``, ``dataset``, ``exit_status``, ``agents_reference``, ``_gc``,
  ``_malloc``, ``_signals``, ``_version``, ``examples/``  the rest of the tooling

The public API is re-exported here, lazily.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trajgrade.api import StreamGrader
    from trajgrade.config import (
        OnFail,
        Suite,
        SuiteConfig,
        compile_suite,
        decode_config,
        load_config,
        load_suite,
    )
    from trajgrade.engine import (
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
    from trajgrade.pipeline import GradeResult, SourceDecoder, grade_bytes
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
