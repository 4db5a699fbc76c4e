"""Damaged state is refused, never resumed with other verdicts.

Before the checksums, 11 of 65 damaged ``--state`` checkpoints (one flipped
bit, or cut short) were resumed with other verdicts (a flipped bit in a
file's inode or offset still decoded, and the file was read again: double
counts), and 5 gave a traceback with status 1. A FIFO in place of the
checkpoint hung start-up. Real ``python -m trajgrade`` processes for the
command line; hypothesis over every bit and every cut for each sealed form
(``--state`` checkpoints, ``StreamGrader`` checkpoints, hook session files,
Kafka changelog values).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests._support import suite
from tests.runner.test_state_failures import _GRADE, POLICY, _corpus, _grade

from trajgrade import StreamGrader
from trajgrade.errors import ConfigError, InputError, StateError
from trajgrade.runner.store import decode_checkpoint

if TYPE_CHECKING:
    from collections.abc import Callable

CKPT = "checkpoint.msgpack"


def _checkpointed(tmp_path: Path) -> Path:
    """A state directory whose checkpoint holds the open traces of a
    followed ``log.jsonl`` (the follower is then killed), and the rest of
    those traces appended to the log: a resume grades them."""
    (tmp_path / "p.yaml").write_text(POLICY)
    log = tmp_path / "log.jsonl"
    log.write_bytes(_corpus(4, end=False))
    path = tmp_path / "s" / CKPT
    follow = [*_GRADE, "-c", "p.yaml", "--state", "s", "--checkpoint-interval", "0.01"]
    p = subprocess.Popen(
        [*follow, "--follow", "log.jsonl"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                ckpt = decode_checkpoint(path.read_bytes(), path)
            except (OSError, StateError):
                ckpt = None
            if ckpt is not None and len(ckpt.engine.traces) == 4:
                break
            time.sleep(0.02)
        else:
            pytest.fail("no checkpoint with the four open traces")
    finally:
        p.kill()
        p.wait()
    with log.open("ab") as f:
        f.write(_corpus(4, end=True))
    return path


def _flip(data: bytes, bit: int) -> bytes:
    out = bytearray(data)
    out[bit // 8] ^= 1 << (bit % 8)
    return bytes(out)


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda d: _flip(d, 3), id="a bit of the tag"),
        pytest.param(lambda d: _flip(d, 8 * 5 + 2), id="a bit of the length"),
        pytest.param(lambda d: _flip(d, 8 * (len(d) - 2) + 1), id="a bit of the CRC"),
        pytest.param(
            lambda d: _flip(d, 8 * (len(d) - 40) + 5), id="a bit of the state"
        ),
        pytest.param(lambda d: d[: len(d) - 7], id="cut short"),
        pytest.param(lambda d: d + b"\x00", id="a byte more"),
    ],
)
def test_a_damaged_checkpoint_is_refused_with_status_2_naming_it(
    tmp_path: Path, damage: Callable[[bytes], bytes]
) -> None:
    path = _checkpointed(tmp_path)
    path.write_bytes(damage(path.read_bytes()))
    p = _grade(tmp_path, "--state", "s", "log.jsonl")
    err = p.stderr.decode()
    assert p.returncode == 2, err
    assert f"s/{CKPT}: the checkpoint is damaged" in err
    assert f"delete s/{CKPT} to start over" in err
    assert "Traceback" not in err
    assert p.stdout == b""  # no verdict from the damaged state


def test_an_undamaged_checkpoint_still_resumes(tmp_path: Path) -> None:
    """(The test above would pass with a store that refuses everything.)"""
    _checkpointed(tmp_path)
    p = _grade(tmp_path, "--state", "s", "log.jsonl")
    assert p.returncode == 1, p.stderr.decode()  # web_fetch in t0000 fails
    assert len(p.stdout.splitlines()) == 6  # the open traces' verdicts


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_non_regular_file_in_place_of_the_checkpoint_is_refused_at_once(
    tmp_path: Path, kind: str
) -> None:
    """A FIFO without a writer hung start-up (open() waited for one)."""
    path = _checkpointed(tmp_path)
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    try:
        p = _grade(tmp_path, "--state", "s", "log.jsonl")  # (20 s bound)
    except subprocess.TimeoutExpired:
        pytest.fail("start-up hung on the checkpoint's path")
    err = p.stderr.decode()
    assert p.returncode == 9, err
    what = "a FIFO" if kind == "fifo" else "a directory"
    assert f"s/{CKPT}: {what} is in place of a state file" in err
    assert "Traceback" not in err


def test_a_fifo_in_place_of_a_hook_session_file_is_refused_at_once(
    tmp_path: Path,
) -> None:
    """Read without blocking: unreadable state (a deny with --fail-closed)."""
    root = tmp_path / "hooks"
    (root / "claude-code").mkdir(parents=True)
    os.mkfifo(root / "claude-code" / "s1.state")
    script = (
        "import sys, msgspec\n"
        "from trajgrade.hooks.store import SessionStore\n"
        "try:\n"
        f"    SessionStore({str(root)!r}, 'claude-code').load('s1')\n"
        "except msgspec.DecodeError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "a FIFO is in place of a state file" in done.stdout


# ------------------------------------------------------------ hypothesis


@pytest.fixture(scope="module")
def state_bytes(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return _checkpointed(tmp_path_factory.mktemp("ckpt")).read_bytes()


def _damages(size: int) -> st.SearchStrategy[tuple[str, int]]:
    return st.one_of(
        st.tuples(st.just("flip"), st.integers(0, size * 8 - 1)),
        st.tuples(st.just("cut"), st.integers(0, size - 1)),
    )


def _damaged(data: bytes, how: tuple[str, int]) -> bytes:
    kind, at = how
    return _flip(data, at) if kind == "flip" else data[:at]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_flipped_bit_or_cut_of_a_state_checkpoint_is_refused(
    state_bytes: bytes, data: st.DataObject
) -> None:
    how = data.draw(_damages(len(state_bytes)))
    damaged = _damaged(state_bytes, how)
    path = Path("s") / CKPT
    try:
        got = decode_checkpoint(damaged, path)
    except StateError as exc:
        refused = str(exc)
    else:
        # (Unreachable with a digest; what the property allows.)
        assert got == decode_checkpoint(state_bytes, path)
        return
    assert str(path) in refused


POLICY_LIB = """\
graders:
  - type: tool-calls
    config:
      disallowed: ["^web_fetch$"]
  - type: turn-count
    config: {max: 6}
"""
_EVENTS = [
    {"trace_id": "t", "type": "turn_start"},
    {"trace_id": "t", "type": "tool_call", "name": "bash", "call_id": "c1"},
    {"trace_id": "u", "type": "turn_start"},
    {"trace_id": "u", "type": "tool_call", "name": "web_fetch", "call_id": "c2"},
]
_REST = [
    {"trace_id": "t", "type": "turn_start"},
    {"trace_id": "t", "type": "trace_end"},
    {"trace_id": "u", "type": "trace_end"},
]


def _verdicts(grader: StreamGrader) -> list[tuple[str, str, str]]:
    out = [v for ev in _REST for v in grader.feed(ev)] + grader.finish()
    return sorted((v.trace_id, v.grader, v.outcome) for v in out if v.final)


def _library_checkpoint() -> tuple[bytes, list[tuple[str, str, str]]]:
    grader = StreamGrader.from_text(POLICY_LIB)
    for ev in _EVENTS:
        grader.feed(ev)
    saved = grader.checkpoint()
    return saved, _verdicts(grader)


LIB_SAVED, LIB_VERDICTS = _library_checkpoint()


@settings(max_examples=300, deadline=None)
@given(how=_damages(len(LIB_SAVED)))
def test_any_flipped_bit_or_cut_of_a_grader_checkpoint_is_refused_or_the_same(
    how: tuple[str, int],
) -> None:
    grader = StreamGrader.from_text(POLICY_LIB)
    try:
        grader.restore(_damaged(LIB_SAVED, how))
    except (InputError, ConfigError):
        assert grader.engine.open_traces() == []
        return
    assert _verdicts(grader) == LIB_VERDICTS


def _session_bytes(tmp: Path) -> tuple[bytes, object]:
    from trajgrade.hooks.session import new_state
    from trajgrade.hooks.store import SessionStore

    store = SessionStore(str(tmp), "claude-code")
    state = new_state("claude-code", "s1", suite(POLICY_LIB), 1_767_225_600.0)
    store.save(state)
    return Path(store.path("s1")).read_bytes(), store.load("s1")


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_any_flipped_bit_or_cut_of_a_hook_session_file_is_refused(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    from trajgrade.hooks.store import SessionStore

    tmp = tmp_path_factory.mktemp("hooks")
    saved, state = _session_bytes(tmp)
    damaged = _damaged(saved, data.draw(_damages(len(saved))))
    store = SessionStore(str(tmp), "claude-code")
    Path(store.path("s1")).write_bytes(damaged)
    try:
        got = store.load("s1")
    except msgspec.DecodeError:
        return
    assert got == state


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_any_flipped_bit_or_cut_of_a_changelog_value_is_refused(
    data: st.DataObject,
) -> None:
    from trajgrade.kafka.changelog import (
        ENTRY_VERSION,
        Entry,
        decode_entry,
        encode_entry,
    )

    grader = StreamGrader.from_text(POLICY_LIB)
    for ev in _EVENTS:
        grader.feed(ev)
    [snap, *_] = grader.engine.snapshot()
    entry = Entry(
        v=ENTRY_VERSION, fingerprint="fp", kind="open", offset=7, snapshot=snap
    )
    raw = encode_entry(entry)
    damaged = _damaged(raw, data.draw(_damages(len(raw))))
    try:
        got = decode_entry(damaged)
    except msgspec.DecodeError:
        return
    assert got == entry


@pytest.mark.parametrize("states", [[b"zz", None], [None] * 9])
def test_a_sealed_checkpoint_the_graders_cannot_hold_is_refused(
    tmp_path: Path, states: list[object]
) -> None:
    """Whole and checksummed, but not this config's state (written by a
    bug, or by hand): status 2 naming the file, not a traceback."""
    from trajgrade._util.sealed import seal, unseal

    path = _checkpointed(tmp_path)
    ckpt = msgspec.msgpack.decode(unseal(path.read_bytes()))
    ckpt["engine"][0][0][6] = states  # the first open trace's grader states
    path.write_bytes(seal(msgspec.msgpack.encode(ckpt)))
    p = _grade(tmp_path, "--state", "s", "log.jsonl")
    err = p.stderr.decode()
    assert p.returncode == 2, err
    assert f"s/{CKPT}: the checkpoint does not fit this config's graders" in err
    assert "Traceback" not in err
