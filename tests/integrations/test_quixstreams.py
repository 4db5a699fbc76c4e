"""trajgrade in a Quix Streams pipeline, run by Quix's own ``sdf.test()``.

Each record goes through the real pipeline :func:`grade` builds: the
stateful ``apply`` whose state is a RocksDB store partition, the session
window that ends idle traces, the headers and the JSON values. Every trace
is left without a ``trace_end`` to the idle timer: a tick record far ahead in
event time closes every session, so the end of each trace is the idle path.

Checked against ``trajgrade grade`` (``grade_bytes``) on the same events:

* every upstream conformance case (its trace read as the events trajgrade
  reads it as, one record each; the case's own expectation checked too);
* the recorded Claude Code and Codex sessions (``trajgrade convert``ed),
  with the six benchmark checks and the guard policy (decisions too).
"""

from __future__ import annotations

import importlib
import json
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import pytest
from quixstreams import Application
from quixstreams.models import MessageContext, Topic
from quixstreams.models.topics.topic import TopicConfig
from tests._support import converted

from trajgrade.config.compile import compile_suite
from trajgrade.config.decode import decode_config
from trajgrade.errors import ConfigError
from trajgrade.integrations.quixstreams import TICK_KEY, QuixGrader, grade
from trajgrade.pipeline.decoder import SourceDecoder
from trajgrade.pipeline.whole import GradeResult, grade_bytes
from trajgrade.verdicts import Verdict

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "tests" / "conformance" / "cases"
SIX = ROOT / "benchmarks" / "six.yaml"
GUARD = ROOT / "tests" / "fixtures" / "guard-live" / "regex-guard.yaml"
#: Longer than any gap between a recorded trace's events (they span hours):
#: only the final tick ends them. The idle test uses its own.
LONG_IDLE = timedelta(days=30)
IDLE = timedelta(minutes=10)
_ENC = msgspec.json.Encoder()
#: A tick this far past any event closes every session (idle traces end).
_FAR_MS = 10**14
_T0 = 1_767_225_600_000  # (2026-01-01, in ms)


class Pipeline:
    """A grading pipeline on one input partition, fed by ``sdf.test()``."""

    def __init__(self, state_dir: Path, grader: QuixGrader, idle: timedelta) -> None:
        self.app = Application(
            broker_address="127.0.0.1:9",  # (never contacted: no topic is fetched)
            consumer_group="trajgrade-test",
            state_dir=str(state_dir),
            use_changelog_topics=False,
        )
        topic = Topic("events", key_deserializer="str", value_deserializer="bytes")
        topic.broker_config = TopicConfig(
            num_partitions=1,
            replication_factor=1,
            extra_config={"retention.ms": "-1", "retention.bytes": "-1"},
        )
        self.topic = topic
        self.sdf = grade(self.app.dataframe(topic), grader, idle=idle)
        # sdf.test() runs the pipeline without a consumer: its stateful steps
        # need the store partition an assignment would open, and a checkpoint.
        self.app._state_manager.on_partition_assign(
            stream_id=self.sdf.stream_id, partition=0, committed_offsets={}
        )
        self.app._processing_context.init_checkpoint()
        self.offset = 0

    def send(self, value: bytes, key: str, timestamp_ms: int) -> list[tuple[Any, ...]]:
        ctx = MessageContext(
            topic=self.topic.name, partition=0, offset=self.offset, size=len(value)
        )
        self.offset += 1
        return self.sdf.test(value, key=key, timestamp=timestamp_ms, ctx=ctx)

    def close(self) -> None:
        self.app._state_manager.close()


@pytest.fixture
def pipelines(tmp_path: Path) -> Iterator[Any]:
    made: list[Pipeline] = []

    def make(grader: QuixGrader, idle: timedelta = LONG_IDLE) -> Pipeline:
        made.append(Pipeline(tmp_path / f"state-{len(made)}", grader, idle))
        return made[-1]

    yield make
    for p in made:
        p.close()


def _records(data: bytes) -> list[tuple[str, bytes, int]]:
    """(key, value, timestamp in ms) of each canonical event line, stamped
    as a producer replaying them stamps them (CreateTime: its clock, a
    millisecond apart), whenever they were recorded."""
    lines = data.splitlines()
    return [
        (json.loads(line)["trace_id"], line, _T0 + i) for i, line in enumerate(lines)
    ]


def _run(
    pipeline: Pipeline, data: bytes
) -> tuple[dict[str, list[bytes]], dict[str, list[bytes]]]:
    """Per trace, the verdict and decision values the pipeline gave."""
    outs: list[tuple[Any, ...]] = []
    newest = 0
    for key, value, ts in _records(data):
        newest = max(newest, ts)
        outs += pipeline.send(value, key, ts)
    outs += pipeline.send(b"tick", TICK_KEY, max(newest, 0) + _FAR_MS)
    verdicts: dict[str, list[bytes]] = {}
    decisions: dict[str, list[bytes]] = {}
    for value, key, _ts, headers in outs:
        kind = dict(headers)["trajgrade-kind"]
        into = verdicts if kind == b"verdict" else decisions
        into.setdefault(key, []).append(value)
        payload = json.loads(value)
        assert payload["trace_id"] == key
        if kind == b"verdict":
            assert dict(headers)["trajgrade-id"] == payload["id"].encode()
    return verdicts, decisions


def _graded(
    result: GradeResult,
) -> tuple[dict[str, list[bytes]], dict[str, list[bytes]]]:
    verdicts: dict[str, list[bytes]] = {}
    decisions: dict[str, list[bytes]] = {}
    for v in result.verdicts:
        verdicts.setdefault(v.trace_id, []).append(_ENC.encode(v))
    for d in result.decisions:
        decisions.setdefault(d.trace_id, []).append(_ENC.encode(d))
    return verdicts, decisions


def _canonical(trace: bytes) -> bytes:
    """The canonical events trajgrade reads an upstream trace as, one line each."""
    decoder = SourceDecoder("case", default_trace="case")
    batches = [decoder.feed(trace), decoder.close()]
    assert not [e for b in batches for e in b.errors]
    events = [
        ev if ev.trace_id else msgspec.structs.replace(ev, trace_id="case")
        for b in batches
        for ev in b.events
    ]
    return b"".join(_ENC.encode(ev) + b"\n" for ev in events)


def _conformance_cases(name: str) -> list[dict[str, Any]]:
    lines = (CASES / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


_FAMILIES = {
    "vally.jsonl": "vally",
    "agentv.jsonl": "agentv",
    "letta-evals.jsonl": "letta",
    "aigo-function-call-coverage.jsonl": "aigo",
}


@pytest.mark.parametrize("name", sorted(_FAMILIES))
def test_conformance_cases_in_a_quix_pipeline(name: str, pipelines: Any) -> None:
    """Every case: the pipeline's verdicts are grade's, and the upstream's."""
    fam = importlib.import_module(f"tests.conformance.family_{_FAMILIES[name]}")
    cases = _conformance_cases(name)
    graded = 0
    for case in cases:
        try:
            suite = compile_suite(
                decode_config(fam.config_text(case), name="case.yaml")
            )
        except ConfigError as exc:
            fam.check_config_error(case, exc)
            continue
        samples = fam.samples(case)
        want = grade_bytes(suite, fam.trace_bytes(case), source="case", samples=samples)
        grader = QuixGrader.from_policy(fam.config_text(case), samples=samples)
        verdicts, decisions = _run(pipelines(grader), _canonical(fam.trace_bytes(case)))
        assert (verdicts, decisions) == _graded(want), case["source"]
        got = [
            msgspec.json.decode(v, type=Verdict) for vs in verdicts.values() for v in vs
        ]
        fam.check(case, GradeResult(verdicts=got, errors=[], anomalies=[]))
        graded += 1
    assert graded >= len(cases) // 2


@pytest.fixture(scope="module")
def sessions() -> bytes:
    logs = sorted((ROOT / "tests" / "fixtures" / "claude-code").glob("*.jsonl"))
    logs += sorted((ROOT / "tests" / "fixtures" / "codex").glob("*.jsonl"))
    return converted(logs)


@pytest.mark.parametrize("policy", [SIX, GUARD], ids=["six", "guard"])
def test_recorded_sessions_in_a_quix_pipeline(
    sessions: bytes, policy: Path, pipelines: Any
) -> None:
    grader = QuixGrader.from_policy(policy, allow_code=True)
    verdicts, decisions = _run(pipelines(grader), sessions)
    want = _graded(grade_bytes(grader.host.suite, sessions))
    assert len(want[0]) >= 6
    assert (verdicts, decisions) == want


def test_idle_ends_a_trace_only_when_its_partition_moves_on(pipelines: Any) -> None:
    """A trace without ``trace_end`` ends once the partition's event time is
    ``idle`` past its last record; its later records are dropped."""
    grader = QuixGrader.from_policy(SIX, allow_code=True)
    p = pipelines(grader, IDLE)
    call = b'{"type":"tool_call","name":"web_fetch","call_id":"c","trace_id":"a"}'
    early = p.send(call, "a", 1_000)
    early_verdicts = [json.loads(v) for v, *_ in early if b"decision" not in v]
    assert {v["grader"] for v in early_verdicts} >= {"forbidden"}
    other = b'{"type":"message","role":"user","text":"hi","trace_id":"b"}'
    assert p.send(other, "b", 1_000 + int(IDLE.total_seconds() * 500)) == []
    ended = p.send(other, "b", 2_000 + int(IDLE.total_seconds() * 1000))
    assert {json.loads(v)["trace_id"] for v, *_ in ended} == {"a"}
    assert all(json.loads(v)["final"] for v, *_ in ended)
    assert p.send(call, "a", 3_000 + int(IDLE.total_seconds() * 1000)) == []
    assert p.send(b"tick", TICK_KEY, _FAR_MS) and grader.unkeyed == 0


def test_unkeyed_and_misrouted_records_are_counted_not_graded(pipelines: Any) -> None:
    grader = QuixGrader.from_policy(SIX, allow_code=True)
    p = pipelines(grader)
    call = b'{"type":"tool_call","name":"web_fetch","trace_id":"n"}'
    assert p.send(call, "", 1) == []
    assert grader.unkeyed == 1
    assert p.send(call, "m", 2) == []
    assert grader.misrouted == 1
    assert p.send(call, "n", 3)


def test_grade_refuses_a_nonpositive_idle(tmp_path: Path) -> None:
    grader = QuixGrader.from_policy(SIX, allow_code=True)
    app = Application(broker_address="127.0.0.1:9", state_dir=str(tmp_path))
    sdf = app.dataframe(Topic("events", value_deserializer="bytes"))
    with pytest.raises(ValueError, match="idle"):
        grade(sdf, grader, idle=timedelta(0))
