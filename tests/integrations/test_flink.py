"""trajgrade in an Apache Flink job, on Flink's real local mini-cluster.

The PyPI wheel's mini-cluster runs in this process's JVM (started once for
the module, with the machine's JDK); each test runs a job whose Python
functions run in Flink's Python workers. Sources are bounded files of real
recorded sessions (the Claude Code and Codex corpora, ``trajgrade
convert``ed), read by Flink's checkpointable ``FileSource``; the verdicts and
guard decisions are checked against ``trajgrade grade`` (``grade_bytes``) on
the same events, trace by trace:

* a plain run (six benchmark checks, and the guard policy);
* a run that fails once mid-stream after a checkpoint completed and is
  restarted from it (state restored from the byte-array ``ValueState``, the
  source from its checkpointed position): identical after dropping
  duplicates by id;
* event-time idle timers ending a trace mid-stream.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
from tests._support import converted

pyflink = pytest.importorskip(
    "pyflink",
    reason="apache-flink is not installed here (pip install 'trajgrade[flink]'): "
    "these tests run in a virtualenv of their own, by test_flink_venv.py",
)

from pyflink.common import Configuration, Encoder, Types, WatermarkStrategy  # noqa: E402
from pyflink.datastream import MapFunction, StreamExecutionEnvironment  # noqa: E402
from pyflink.datastream.connectors.file_system import (  # noqa: E402
    FileSink,
    FileSource,
    StreamFormat,
)

from trajgrade.config.compile import load_suite  # noqa: E402
from trajgrade.graders import BuildContext  # noqa: E402
from trajgrade.integrations.flink import grade  # noqa: E402
from trajgrade.pipeline.whole import GradeResult, grade_bytes  # noqa: E402

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(600),
    # pyflink imports Apache Beam, whose pydot calls pyparsing's old names.
    pytest.mark.filterwarnings("ignore::DeprecationWarning:pydot"),
    pytest.mark.filterwarnings("ignore:.*deprecated:DeprecationWarning"),
    # Beam's in-process (loopback) worker: its gRPC reader thread is cancelled
    # when a job ends.
    pytest.mark.filterwarnings(
        "ignore:Exception in thread read_grpc_client_inputs:pytest.PytestUnhandledThreadExceptionWarning"
    ),
]

ROOT = Path(__file__).resolve().parents[2]
SIX = ROOT / "benchmarks" / "six.yaml"
GUARD = ROOT / "tests" / "fixtures" / "guard-live" / "regex-guard.yaml"
#: Longer than the corpus's whole span (about 400 days), so only the end of
#: input ends its traces, as in `trajgrade grade`. The files are not in time
#: order, and a watermark is the latest time seen: with 30 days, a session
#: dated months before the one read last was ended by its timer between two
#: of its records whenever a periodic watermark came in between (the paced
#: restore run: its early verdicts and its final counts cut short).
LONG_IDLE = timedelta(days=3650)
_ENC = msgspec.json.Encoder()
Graded = tuple[dict[str, list[bytes]], dict[str, list[bytes]]]


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    logs = sorted((ROOT / "tests" / "fixtures" / "claude-code").glob("*.jsonl"))
    logs += sorted((ROOT / "tests" / "fixtures" / "codex").glob("*.jsonl"))
    path = tmp_path_factory.mktemp("flink") / "sessions.jsonl"
    path.write_bytes(converted(logs))
    times = [
        e["ts"]
        for e in map(msgspec.json.decode, path.read_bytes().splitlines())
        if e.get("ts")
    ]
    assert max(times) - min(times) < LONG_IDLE.total_seconds() / 2
    return path


@pytest.fixture(scope="module", autouse=True)
def jvm() -> Iterator[None]:
    """One JVM (pyflink's gateway, in which each job's mini-cluster runs) for
    the module, stopped at its end: pyflink starts it and keeps no handle, so
    its launcher is wrapped to keep one."""
    import pyflink.java_gateway as gateway_module

    launched: list[subprocess.Popen[bytes]] = []
    launch = gateway_module.launch_gateway_server_process

    def keeping(*args: Any) -> subprocess.Popen[bytes]:
        launched.append(launch(*args))
        return launched[-1]

    gateway_module.launch_gateway_server_process = keeping
    try:
        gateway_module.get_gateway()
        yield
    finally:
        gateway_module.launch_gateway_server_process = launch
        if gateway_module._gateway is not None:
            gateway_module._gateway.shutdown()
            gateway_module._gateway = None
        for process in launched:
            process.terminate()
            process.communicate(timeout=60)


def _env(**settings: str) -> Any:
    conf = Configuration()
    # The workers run this interpreter (with trajgrade importable as here).
    conf.set_string("python.executable", sys.executable)
    conf.set_string("python.client.executable", sys.executable)
    for name, value in settings.items():
        conf.set_string(name, value)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    return env


def _source(env: Any, path: Path, name: str = "sessions") -> Any:
    files = FileSource.for_record_stream_format(
        StreamFormat.text_line_format(), str(path)
    ).build()
    return env.from_source(files, WatermarkStrategy.no_watermarks(), name)


def _collect(stream: Any) -> list[tuple[str, str, str]]:
    with stream.execute_and_collect() as results:
        return [(tid, oid, js) for tid, oid, js in results]


def _split(outputs: list[tuple[str, str, str]]) -> Graded:
    """Per trace: verdict and decision JSON, in output order."""
    verdicts: dict[str, list[bytes]] = {}
    decisions: dict[str, list[bytes]] = {}
    for tid, _, js in outputs:
        into = decisions if "action" in msgspec.json.decode(js) else verdicts
        into.setdefault(tid, []).append(js.encode())
    return verdicts, decisions


def _graded(result: GradeResult) -> Graded:
    verdicts: dict[str, list[bytes]] = {}
    decisions: dict[str, list[bytes]] = {}
    for v in result.verdicts:
        verdicts.setdefault(v.trace_id, []).append(_ENC.encode(v))
    for d in result.decisions:
        decisions.setdefault(d.trace_id, []).append(_ENC.encode(d))
    return verdicts, decisions


def _expected(policy: Path, data: bytes) -> Graded:
    suite = load_suite(policy, context=BuildContext(allow_code=True))
    return _graded(grade_bytes(suite, data))


@pytest.mark.parametrize("policy", [SIX, GUARD], ids=["six", "guard"])
def test_recorded_sessions_in_a_flink_job(sessions: Path, policy: Path) -> None:
    """A bounded file of real sessions through the job: what `trajgrade grade` gives."""
    env = _env()
    graded = grade(_source(env, sessions), policy, idle=LONG_IDLE, allow_code=True)
    got = _split(_collect(graded))
    want = _expected(policy, sessions.read_bytes())
    assert len(want[0]) >= 6
    assert got == want


class FailOnceAfterACheckpoint(MapFunction):  # type: ignore[misc]
    """Passes records on; fails the job once, mid-stream, after a checkpoint
    of it completed. Every record it sees (in any attempt) is logged, so the
    test knows the restart resumed from the checkpoint, not the start."""

    def __init__(self, checkpoints: str, seen: str, after: int) -> None:
        self.checkpoints, self.seen, self.after = checkpoints, seen, after
        self.count = 0
        self.started: int | None = None

    def map(self, value: str) -> str:
        self.count += 1
        with open(self.seen, "a", encoding="utf-8") as log:
            log.write("r\n")
        failed = Path(self.seen + ".failed")
        if self.count < self.after or failed.exists():
            return value
        if self.started is None:  # (checkpoints started, or done, until now)
            self.started = max(
                map(_number, Path(self.checkpoints).glob("*/chk-*")), default=0
            )
        done = Path(self.checkpoints).glob("*/chk-*/_metadata")
        if any(_number(p.parent) > self.started for p in done):
            # A checkpoint triggered after `after` records has completed.
            failed.write_text(str(self.count))
            msg = "injected failure, mid-stream, after a completed checkpoint"
            raise RuntimeError(msg)
        import time

        time.sleep(0.02)  # (pacing only, so that checkpoint can complete first)
        return value


def _number(checkpoint: Path) -> int:
    return int(checkpoint.name.removeprefix("chk-"))


def test_a_restore_from_a_checkpoint_mid_stream(sessions: Path, tmp_path: Path) -> None:
    """The job fails once after a checkpoint; restarted from it, its verdicts
    (duplicates dropped by id) are still exactly `trajgrade grade`'s."""
    import cloudpickle  # (pyflink's: ships this module's classes by value)

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    checkpoints, seen = tmp_path / "checkpoints", tmp_path / "seen.log"
    env = _env(
        **{
            "execution.checkpointing.interval": "300 ms",
            "execution.checkpointing.dir": checkpoints.as_uri(),
            # Few records queue before the (paced) map, in small network
            # buffers and Python bundles: a barrier reaches it soon.
            "taskmanager.memory.segment-size": "4kb",
            "taskmanager.network.memory.buffers-per-channel": "2",
            "taskmanager.network.memory.floating-buffers-per-gate": "2",
            "python.fn-execution.bundle.size": "10",
            "slot.request.timeout": "60 s",
            # Every state read goes to the state backend, as after a restore.
            "python.state.cache-size": "1",
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": "1",
            "restart-strategy.fixed-delay.delay": "100 ms",
        }
    )
    env.set_parallelism(1)
    lines = sessions.read_bytes().splitlines()
    records = _source(env, sessions).map(
        FailOnceAfterACheckpoint(str(checkpoints), str(seen), len(lines) // 3)
    )
    graded = grade(records, SIX, idle=LONG_IDLE, allow_code=True)
    # Out through a FileSink (part files committed at checkpoints), not
    # execute_and_collect: after a failover its client skips as many results
    # as it had, assuming the replay repeats them in the same order.
    sink_dir = tmp_path / "out"
    lines_out = graded.map(
        lambda o: f"{o[0]}\t{o[1]}\t{o[2]}", output_type=Types.STRING()
    )
    lines_out.sink_to(
        FileSink.for_row_format(str(sink_dir), Encoder.simple_string_encoder()).build()
    )
    env.execute("restore")
    outputs = [
        tuple(line.split("\t", 2))
        for part in sorted(sink_dir.rglob("*"))
        if part.is_file() and not part.name.startswith(".")
        for line in part.read_text(encoding="utf-8").splitlines()
    ]
    failed = Path(str(seen) + ".failed")
    assert failed.exists(), "the failure was not injected"
    read_before = int(failed.read_text())
    processed = len(seen.read_text().splitlines())
    # Resumed from that checkpoint (taken after len//3 records), not the start.
    assert read_before <= processed <= read_before + len(lines) - len(lines) // 3
    unique: dict[str, tuple[str, str, str]] = {}
    for output in outputs:
        unique.setdefault(output[1], output)
    print(
        f"restore: {len(outputs)} outputs, {len(unique)} unique; records read {processed} of {len(lines)}, failed at {read_before}"
    )
    want = _expected(SIX, sessions.read_bytes())
    got = _split(list(unique.values()))
    differ = [t for t in want[0] if got[0].get(t) != want[0][t]]
    missing = [
        (v["grader"], v.get("at_event"), v.get("final"))
        for t in differ
        for v in map(msgspec.json.decode, want[0][t])
        if v["id"] not in unique
    ]
    assert got == want, (differ, missing)


def test_an_idle_timer_ends_a_trace_and_its_late_records_are_dropped(
    tmp_path: Path,
) -> None:
    """Event time passing a trace's last record + idle ends it (`finish`, as
    the end of input would); its later records are dropped."""
    t0 = 1_767_225_600.0

    def event(tid: str, ts: float, kind: str, **more: Any) -> bytes:
        return _ENC.encode({"trace_id": tid, "type": kind, "ts": ts, **more})

    early = [
        event("quiet", t0, "turn_start", step=0),
        event("quiet", t0 + 1, "tool_call", step=0, name="view", args={}, call_id="c1"),
    ]
    late = [
        event(
            "quiet", t0 + 7200, "tool_call", step=1, name="grep", args={}, call_id="c2"
        )
    ]
    # Another trace moves event time (the watermark) two hours on.
    busy = [event("busy", t0 + 3600 * h, "turn_start", step=h) for h in range(1, 4)]
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"\n".join([*early, *busy[:2], *late, busy[2]]) + b"\n")
    env = _env()
    env.set_parallelism(1)
    graded = grade(_source(env, path), SIX, idle=timedelta(minutes=10), allow_code=True)
    got = _split(_collect(graded))[0]["quiet"]
    # As `trajgrade grade` grades the quiet trace without its late record.
    want = _expected(SIX, b"\n".join(early) + b"\n")[0]["quiet"]
    assert got == want


def test_the_example_job_prints_what_trajgrade_grade_prints(sessions: Path) -> None:
    """`python -m trajgrade.integrations.flink_job POLICY EVENTS` (its own JVM):
    the JSON lines `trajgrade grade --output jsonl` prints, per trace in order."""
    argv = [sys.executable, "-m", "trajgrade.integrations.flink_job", str(SIX)]
    argv += [str(sessions), "--allow-code", "--parallelism", "2"]
    argv += ["--idle-minutes", str(LONG_IDLE.total_seconds() / 60)]
    done = subprocess.run(
        argv,
        capture_output=True,
        check=False,
        # (without the PYFLINK_* of this process's own workers: a job of its own)
        env={k: v for k, v in os.environ.items() if "PYFLINK" not in k}
        | {"PYTHONPATH": str(ROOT / "src")},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got: dict[str, list[bytes]] = {}
    decisions: dict[str, list[bytes]] = {}
    for line in done.stdout.splitlines():
        output = msgspec.json.decode(line)
        into = decisions if "action" in output else got
        into.setdefault(output["trace_id"], []).append(line)
    assert (got, decisions) == _expected(SIX, sessions.read_bytes())
