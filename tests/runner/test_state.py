"""Durable state (``--state DIR``): checkpoints, resume, crash safety.

The crash test kills ``python -m trajgrade`` with SIGKILL at random points
(drawn by hypothesis), restarts it with the same arguments until a run
completes, and compares what all the runs wrote with one uninterrupted run.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests._support import suite

from trajgrade._util.sealed import seal
from trajgrade.errors import StateError
from trajgrade.pipeline.decoder import SourceDecoder
from trajgrade.runner.store import Checkpoint, StateStore
from trajgrade.runner.tracking import TrackedInput, identity_matches

FIXTURES = Path(__file__).parents[1] / "fixtures"

POLICY = """\
graders:
  - type: tool-calls
    name: no-fetch
    config:
      disallowed: ["^web_fetch$"]
  - type: tool-calls
    name: tested
    config:
      required: [{name: "^bash$", command: "pytest"}]
      sequence: ["^view$", "^edit$", "^bash$"]
  - type: token-budget
    config: {max: 40000}
  - type: turn-count
    config: {max: 6}
"""


def corpus(n_traces: int, seed: int) -> bytes:
    """Interleaved canonical traces: some end explicitly, some never do."""
    rng = random.Random(seed)
    enc = msgspec.json.Encoder()
    live = {f"t{i:05d}": 0 for i in range(n_traces)}
    lines: list[bytes] = []
    ts = 1_767_225_600.0
    while live:
        tid = rng.choice(list(live))
        step = live[tid]
        ts += 0.01
        ev: dict[str, Any]
        if step % 4 == 0:
            ev = {"type": "turn_start"}
        elif step % 4 == 1:
            name = rng.choice(["view", "edit", "bash", "bash", "grep", "web_fetch"])
            args = {"command": "pytest -q"} if name == "bash" else {"path": "a.py"}
            ev = {
                "type": "tool_call",
                "name": name,
                "call_id": f"c{step}",
                "args": args,
            }
        elif step % 4 == 2:
            ev = {"type": "tool_result", "call_id": f"c{step - 1}", "result": "ok"}
        else:
            ev = {
                "type": "usage",
                "input_tokens": rng.randint(100, 4000),
                "output_tokens": 50,
            }
        lines.append(enc.encode({"trace_id": tid, "ts": ts, **ev}))
        live[tid] = step + 1
        if step > rng.randint(8, 40):
            if rng.random() < 0.7:
                lines.append(enc.encode({"trace_id": tid, "type": "trace_end"}))
            del live[tid]
    return b"\n".join(lines) + b"\n"


def trajgrade(
    *args: str | Path, quiet: bool = True, **kw: Any
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trajgrade",
            "grade",
            *(["-q"] if quiet else []),
            "--output",
            "jsonl",
            *map(str, args),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kw,
    )


def started(*args: str | Path) -> subprocess.Popen[bytes]:
    """A following run, returned once it says so (``follow_started``): a
    SIGTERM sent earlier could beat its signal handlers on a loaded machine."""
    p = trajgrade(*args, quiet=False)
    assert p.stderr is not None
    for line in p.stderr:
        if b'"follow_started"' in line:
            return p
    p.wait(timeout=30)
    raise AssertionError(f"the run ended before it followed (exit {p.returncode})")


def verdicts(out: bytes) -> list[dict[str, Any]]:
    return [msgspec.json.decode(line) for line in out.splitlines() if line.strip()]


def finals(vs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(v["trace_id"], v["grader"]): v for v in vs if v["final"]}


#: SIGKILLs that landed, per crash-test example (printed with ``-s``).
KILLS: list[int] = []


@pytest.fixture(scope="module", autouse=True)
def _report_kills() -> Any:
    yield
    if KILLS:
        print(
            f"\ncrash test: {sum(KILLS)} SIGKILLs over {len(KILLS)} runs, all recovered"
        )


#: Traces in the crash corpus (four verdicts each).
TRACES = 2000


class Ref(dict[str, Any]):
    """The uninterrupted run's output (short repr: hypothesis prints it)."""

    def __repr__(self) -> str:
        return f"<reference run: {len(self['verdicts'])} verdicts>"


@pytest.fixture(scope="module")
def crash_setup(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, Path, Ref]:
    d = tmp_path_factory.mktemp("crash")
    policy = d / "policy.yaml"
    policy.write_text(POLICY)
    log = d / "events.jsonl"
    log.write_bytes(corpus(TRACES, seed=7))
    p = trajgrade("-c", policy, log)
    out, err = p.communicate(timeout=120)
    assert p.returncode in (0, 1), err.decode()
    vs = verdicts(out)
    assert len({v["id"] for v in vs}) == len(vs)
    ref = Ref(verdicts=vs, finals=finals(vs), status=p.returncode)
    assert any(v["outcome"] == "fail" for v in vs)
    assert any(v["outcome"] == "pass" for v in vs)
    return policy, log, ref


# ---------------------------------------------------------------- crash test
@pytest.mark.slow
# About 60 runs of an 8 k-verdict corpus: an uninterrupted run writes about
# five checkpoints (a third of what the 24 k corpus it had before wrote, at a
# third of the cost), so kills still land before, between and after them.
# The default 120 s timed the larger corpus out beside other workers (a
# hang guard, not a bound on speed).
@pytest.mark.timeout(600)
@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    derandomize=True,
)
@given(
    kills=st.lists(
        st.tuples(st.integers(0, 4 * TRACES), st.floats(0, 0.05)),
        min_size=1,
        max_size=3,
    )
)
def test_sigkill_at_random_points_loses_nothing(
    crash_setup: tuple[Path, Path, Ref],
    tmp_path_factory: pytest.TempPathFactory,
    kills: list[tuple[int, float]],
) -> None:
    """Each kill: after ``n`` verdict lines were read from stdout (plus a
    random delay), SIGKILL; then restart with the same arguments."""
    policy, log, ref = crash_setup
    state = tmp_path_factory.mktemp("state")
    args = ("-c", policy, "--state", state, "--checkpoint-interval", "0.01", log)
    seen: list[dict[str, Any]] = []
    killed = 0
    for n_lines, delay in kills:
        p = trajgrade(*args)
        assert p.stdout is not None
        got = []
        try:
            while len(got) < n_lines:
                line = p.stdout.readline()
                if not line:
                    break
                got.append(line)
            time.sleep(delay)
            p.send_signal(signal.SIGKILL)
            rest = p.stdout.read()
        finally:
            p.kill()
            p.communicate()
        if p.returncode == -signal.SIGKILL:
            killed += 1
        out = b"".join(got) + rest
        # A line the kill cut short is not a verdict (a reader of a killed
        # process's stdout drops it); it was not journalled, so it comes again.
        seen += verdicts(out[: out.rfind(b"\n") + 1])
    p = trajgrade(*args)
    out, err = p.communicate(timeout=120)
    assert p.returncode == ref["status"], err.decode()
    seen += verdicts(out)
    KILLS.append(killed)
    # Every final verdict is there, identical to the uninterrupted run's.
    assert finals(seen) == ref["finals"]
    # Nothing that the uninterrupted run did not say; nothing said twice
    # except a verdict re-emitted once per kill (same id, same content).
    by_id: dict[str, list[dict[str, Any]]] = {}
    for v in seen:
        by_id.setdefault(v["id"], []).append(v)
    ref_ids = {v["id"]: v for v in ref["verdicts"]}
    assert set(by_id) == set(ref_ids)
    for vid, copies in by_id.items():
        assert len(copies) <= 1 + killed
        assert all(c == ref_ids[vid] for c in copies)


def test_kill_before_the_first_checkpoint_re_emits_nothing(
    crash_setup: tuple[Path, Path, Ref], tmp_path: Path
) -> None:
    """The journal covers the time before any checkpoint: a run killed then
    starts over from the beginning but does not write its verdicts again."""
    policy, log, ref = crash_setup
    state = tmp_path / "s"
    args = ("-c", policy, "--state", state, "--checkpoint-interval", "3600", log)
    p = trajgrade(*args)
    assert p.stdout is not None
    first = [p.stdout.readline() for _ in range(2000)]
    p.send_signal(signal.SIGKILL)
    p.communicate()
    assert not (state / "checkpoint.msgpack").exists()
    before = verdicts(b"".join(first))
    p = trajgrade(*args)
    out, err = p.communicate(timeout=120)
    assert p.returncode == ref["status"], err.decode()
    after = verdicts(out)
    # Only the batch in flight (written to the pipe, not yet journalled when
    # the kill landed) may come again: never the verdicts well before it.
    again = {v["id"] for v in after}
    assert not again & {v["id"] for v in before[:1000]}
    assert len(again) < len(ref["verdicts"]) - 1000
    assert finals(before + after) == ref["finals"]


def test_journal_of_another_config_suppresses_nothing(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    try:
        assert store.open_journal("one") == set()
        store.journal(["aaaa"])
    finally:
        store.close()
    store = StateStore(tmp_path)
    try:
        assert store.open_journal("one") == {"aaaa"}
    finally:
        store.close()
    store = StateStore(tmp_path)
    try:
        assert store.open_journal("two") == set()
    finally:
        store.close()


# ---------------------------------------------------------------- resume
def test_rerun_after_a_complete_run_repeats_nothing(
    crash_setup: tuple[Path, Path, Ref], tmp_path: Path
) -> None:
    policy, log, ref = crash_setup
    args = ("-c", policy, "--state", tmp_path / "s", log)
    p = trajgrade(*args)
    out, _ = p.communicate(timeout=120)
    assert finals(verdicts(out)) == ref["finals"]
    p = trajgrade(*args)
    out, _ = p.communicate(timeout=120)
    assert out == b""
    assert p.returncode == ref["status"], (
        "a resumed run keeps the earlier verdicts' exit status"
    )
    assert (tmp_path / "s" / "checkpoint.msgpack").is_file()


def test_appended_input_continues_from_the_checkpoint(tmp_path: Path) -> None:
    """A file that grew between two runs: the second run grades only the new
    lines, with the state the first run left (turn 7 breaks the budget)."""
    policy = tmp_path / "p.yaml"
    policy.write_text(POLICY)
    log = tmp_path / "log.jsonl"
    turns = [f'{{"trace_id":"a","type":"turn_start","ts":{i}}}\n' for i in range(7)]
    log.write_text("".join(turns[:4]))
    state = tmp_path / "s"
    # Interrupted (SIGTERM) while reading stdin would close traces; a file
    # read to its end with --state is finished, so follow the growth instead:
    p = started("-c", policy, "--state", state, "--follow", "--idle-timeout", "0", log)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err.decode()
    assert out == b""  # four turns: nothing decided yet
    with log.open("a") as f:
        f.write("".join(turns[4:]))
    p = trajgrade(
        "-c", policy, "--state", state, "--follow", "--idle-timeout", "0", log
    )
    try:
        line = p.stdout.readline() if p.stdout else b""
    finally:
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=30)
    v = msgspec.json.decode(line)
    assert (v["grader"], v["outcome"], v["at_event"]) == ("turn-count", "fail", 7)


def test_checkpoint_of_another_config_is_refused(
    crash_setup: tuple[Path, Path, Ref], tmp_path: Path
) -> None:
    policy, log, _ = crash_setup
    state = tmp_path / "s"
    p = trajgrade("-c", policy, "--state", state, log)
    p.communicate(timeout=120)
    other = tmp_path / "other.yaml"
    other.write_text(POLICY.replace("max: 6", "max: 7"))
    p = trajgrade("-c", other, "--state", state, log)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 2
    assert b"different config" in err
    assert b"another --state DIR" in err


def test_a_state_dir_in_use_is_refused(tmp_path: Path) -> None:
    """One owner per state directory: a second run is refused with status
    8 naming the first one's pid; once the first is killed (SIGKILL: its
    lock file stays, with its pid), the directory can be used again."""
    policy = tmp_path / "p.yaml"
    policy.write_text(POLICY)
    state = tmp_path / "s"
    first = trajgrade("-c", policy, "--state", state, "-", stdin=subprocess.PIPE)
    lock = state / "owner.lock"
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (
            lock.exists() and lock.read_text().strip() == str(first.pid)
        ):
            time.sleep(0.05)
        second = trajgrade("-c", policy, "--state", state, os.devnull)
        _, err = second.communicate(timeout=60)
        assert second.returncode == 8, err
        assert f"the state directory is in use by process {first.pid}".encode() in err
        assert b"Traceback" not in err
    finally:
        first.kill()
        first.communicate()
    assert lock.read_text().strip() == str(first.pid)  # stale: its owner died
    third = trajgrade("-c", policy, "--state", state, os.devnull)
    _, err = third.communicate(timeout=60)
    assert third.returncode != 8, err


def test_damaged_or_foreign_checkpoints_are_refused(tmp_path: Path) -> None:
    fingerprint = suite(POLICY).fingerprint
    (tmp_path / "checkpoint.msgpack").write_bytes(b"\x93not a checkpoint")
    store = StateStore(tmp_path)
    try:
        with pytest.raises(StateError, match="damaged or not a trajgrade checkpoint"):
            store.load(fingerprint)
        (tmp_path / "checkpoint.msgpack").write_bytes(
            seal(msgspec.msgpack.encode({"version": 99}))
        )
        with pytest.raises(StateError, match="format 99"):
            store.load(fingerprint)
        # A format-1 checkpoint (no checksum) is refused, saying why.
        (tmp_path / "checkpoint.msgpack").write_bytes(
            msgspec.msgpack.encode({"version": 1})
        )
        with pytest.raises(StateError, match="format 1, written by an older trajgrade"):
            store.load(fingerprint)
    finally:
        store.close()


def test_checkpoint_write_is_atomic_and_drops_old_journals(tmp_path: Path) -> None:
    from trajgrade.engine.engine import EngineState
    from trajgrade.runner.store import STATE_VERSION

    store = StateStore(tmp_path)
    try:
        assert store.open_journal("f") == set()
        store.journal(["aaaa", "bbbb"])
        seq = store.begin()
        store.journal(["cccc"])
        ckpt = Checkpoint(
            version=STATE_VERSION,
            fingerprint="f",
            sequence=seq,
            created=0.0,
            positions=[],
            engine=EngineState(traces=[], closed=[], unopened={}),
        )
        store.write(store.encode(ckpt), seq)
        assert sorted(p.name for p in tmp_path.iterdir()) == [
            "checkpoint.msgpack",
            "emitted.1",
            "owner.lock",
        ]
        assert store.emitted_since(seq) == {"cccc"}
        assert store.load("f") == ckpt
    finally:
        store.close()


# ---------------------------------------------------------------- readers
@pytest.mark.parametrize(
    ("fixture", "fmt"),
    [
        ("claude-code", "claude-code"),
        ("codex", "codex"),
        (None, "trajgrade"),
    ],
)
def test_resumed_reader_continues_exactly(
    fixture: str | None, fmt: str, tmp_path: Path
) -> None:
    """Cut the input at line boundaries; a resumed decoder (replayed, or
    started mid-file for stateless formats) yields exactly the events an
    uninterrupted decoder yields after the cut."""
    if fixture is None:
        path = tmp_path / "events.jsonl"
        path.write_bytes(corpus(20, seed=1))
    else:
        path = max(
            (FIXTURES / fixture).rglob("*.jsonl"), key=lambda p: p.stat().st_size
        )
    data = path.read_bytes()
    cuts = [i + 1 for i, b in enumerate(data) if b == 0x0A]
    enc = msgspec.json.encode
    for cut in cuts[:: max(1, len(cuts) // 7)]:
        whole = SourceDecoder(str(path), default_trace="t")
        whole.feed(data[:cut])
        assert whole.format == fmt
        after = whole.feed(data[cut:]).events + whole.close().events
        first = TrackedInput(
            str(path), SourceDecoder(str(path), default_trace="t"), dev=0, ino=0
        )
        first.feed(data[:cut])
        pos = first.position()
        assert pos is not None
        st_ = path.stat()
        pos.dev, pos.ino = st_.st_dev, st_.st_ino
        fd = os.open(path, os.O_RDONLY)
        try:
            assert identity_matches(fd, pos)
            again = TrackedInput(str(path), SourceDecoder(str(path), default_trace="t"))
            again.resume(fd, pos)
            rest = os.read(fd, len(data))
        finally:
            os.close(fd)
        got = again.feed(rest).events + again.close().events
        assert [enc(e) for e in got] == [enc(e) for e in after], f"cut at byte {cut}"


def test_a_replaced_file_is_not_resumed(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(corpus(3, seed=2))
    t = TrackedInput(str(path), SourceDecoder(str(path)), dev=0, ino=0)
    t.feed(path.read_bytes())
    pos = t.position()
    assert pos is not None
    st_ = path.stat()
    pos.dev, pos.ino = st_.st_dev, st_.st_ino
    fd = os.open(path, os.O_RDONLY)
    try:
        assert identity_matches(fd, pos)
    finally:
        os.close(fd)
    # Same inode, other content (rewritten in place): not the same file.
    data = path.read_bytes()
    path.write_bytes(b"X" + data[1:])
    fd = os.open(path, os.O_RDONLY)
    try:
        assert not identity_matches(fd, pos)
    finally:
        os.close(fd)


def test_watched_claude_session_resumes_mid_file(tmp_path: Path) -> None:
    """--watch --state on a Claude Code transcript (a reader with state: the
    resume replays the bytes before the checkpoint): stopped halfway, grown,
    restarted, the session's final verdicts equal batch grading of the whole
    file."""
    from trajgrade.pipeline.whole import grade_bytes

    policy = tmp_path / "p.yaml"
    policy.write_text(
        "graders:\n"
        "  - type: tool-calls\n"
        "    config: {required: ['^Bash$'], disallowed: ['^WebFetch$']}\n"
        "  - type: token-budget\n"
        "    config: {max: 200000}\n"
        "  - type: tool-call-count\n"
        "    config: {max: 50}\n"
    )
    data = (FIXTURES / "claude-code" / "agentcmd_v2.0.26_plan_mode.jsonl").read_bytes()
    lines = data.splitlines(keepends=True)
    half = len(lines) // 2
    sessions = tmp_path / "projects" / "-home-me-repo"
    sessions.mkdir(parents=True)
    log = sessions / "session.jsonl"
    log.write_bytes(b"".join(lines[:half]))
    state = tmp_path / "state"
    watch = ("-c", policy, "--watch", tmp_path / "projects", "--state", state)
    p = started(*watch, "--idle-timeout", "0")
    p.send_signal(signal.SIGTERM)
    first, err = p.communicate(timeout=30)
    assert p.returncode in (0, 1), err.decode()
    with log.open("ab") as f:
        f.write(b"".join(lines[half:]))
    p = trajgrade(*watch, "--idle-timeout", "1")
    try:
        deadline = time.monotonic() + 30
        out = b""
        assert p.stdout is not None
        while out.count(b'"final":true') < 3 and time.monotonic() < deadline:
            out += p.stdout.readline()
    finally:
        p.send_signal(signal.SIGTERM)
        rest, _ = p.communicate(timeout=30)
    seen = verdicts(first + out + rest)
    expected = grade_bytes(suite(policy.read_text()), data).verdicts

    def final(vs: list[Any]) -> set[tuple[str, str, str, float]]:
        return {
            (v["trace_id"], v["grader"], v["outcome"], v["score"])
            for v in (msgspec.to_builtins(x) for x in vs)
            if v["final"]
        }

    assert final(seen) == final(expected)
