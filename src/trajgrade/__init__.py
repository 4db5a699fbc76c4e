"""trajgrade: a streaming grader for AI-agent trajectories.

Reading map (start at the top):

* ``events.py``    the canonical event model every grader sees
* ``verdicts.py``  outcomes, decisions, verdicts and the finality rule
* ``engine.py``    routes events to per-trace grader state; emits verdicts
* ``graders/``     one module per grader type (vally, …) plus the registry
* ``config.py``    config files: decode, locate errors, compile a Suite
* ``formats/``     upstream log formats -> canonical events (sans-IO)
* ``pipeline.py``  bytes -> lines -> events -> engine, without I/O
* ``runner.py``, ``sources/``, ``sinks/``, ``cli.py``  the async edges
* ``api.py``       StreamGrader: the pipeline for embedding (feed, finish, async)
* ``actions.py``, ``wrapper.py``  on-fail actions; ``trajgrade run`` (watch an agent)

Everything above ``runner.py`` is pure and synchronous: no I/O, no clock, no
logging. The public API is re-exported here.
"""

from __future__ import annotations

from typing import Any

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
from trajgrade.engine import Anomaly, Engine, EngineState, EngineStats, TraceSnapshot
from trajgrade.errors import (
    ConfigError,
    ConfigErrors,
    GradeError,
    InputError,
    Location,
    SinkError,
    SourceError,
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
from trajgrade.verdicts import Decision, Outcome, Verdict

__all__ = (
    "AgentError",
    "Anomaly",
    "BuildContext",
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
    "InputError",
    "Location",
    "Message",
    "OnFail",
    "Outcome",
    "SinkError",
    "SourceDecoder",
    "SourceError",
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


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import version

        return version("trajgrade")
    msg = f"module 'trajgrade' has no attribute {name!r}"
    raise AttributeError(msg)
