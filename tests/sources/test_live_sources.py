"""LiveFiles (``--follow`` / ``--watch``) on real files, with real writers.

Every test checks the per-path order guarantees the runner relies on (see
:func:`files_of`) and then what was read. The notifier-dependent behaviours run
on every backend: ``inotify`` (Linux default), ``watchfiles`` (the portable
one) and ``poll`` (no notifications: only the periodic re-check).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from trajgrade.errors import SourceError
from trajgrade.sources import Closed, Data, FileId, LiveFiles, Opened, Piece
from trajgrade.sources._glob import Glob
from trajgrade.sources.pieces import Lost, Renamed

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path

pytestmark = pytest.mark.anyio

#: Seconds a test waits for an expected piece before it fails.
PATIENCE = 10.0


@pytest.fixture
def anyio_backend() -> str:
    """Run on asyncio, as the CLI does."""
    return "asyncio"


@pytest.fixture(params=["inotify", "watchfiles", "poll"])
def backend(request: pytest.FixtureRequest) -> str:
    """Each change-notification backend."""
    if request.param == "inotify" and not sys.platform.startswith("linux"):
        pytest.skip("inotify is Linux-only")
    return str(request.param)


class Log:
    """A structlog-shaped logger that keeps (level, event, fields)."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict[str, Any]]] = []

    def info(self, event: str, **kv: Any) -> None:
        self.lines.append(("info", event, kv))

    def error(self, event: str, **kv: Any) -> None:
        self.lines.append(("error", event, kv))

    def warning(self, event: str, **kv: Any) -> None:
        self.lines.append(("warning", event, kv))

    def events(self) -> list[str]:
        return [event for _, event, _ in self.lines]


class Follower:
    """The pieces a running LiveFiles has yielded so far."""

    def __init__(self) -> None:
        self.pieces: list[Piece] = []
        self._changed = anyio.Event()

    def add(self, piece: Piece) -> None:
        self.pieces.append(piece)
        self._changed.set()
        self._changed = anyio.Event()

    async def until(self, done: Callable[[list[Piece]], bool]) -> None:
        """Wait until ``done(pieces)``; fail after PATIENCE seconds."""
        with anyio.fail_after(PATIENCE):
            while not done(self.pieces):
                await self._changed.wait()

    def text(self, path: str) -> bytes:
        """Every byte read from ``path`` so far, over all its files."""
        return b"".join(data for _, _, data, _ in files_of(self.pieces, path))


@asynccontextmanager
async def following(live: LiveFiles) -> AsyncIterator[Follower]:
    """Run ``live.pieces()`` in a task while the body runs; stop it afterwards."""
    follower = Follower()

    async def pump() -> None:
        async for piece in live.pieces():
            follower.add(piece)

    async with anyio.create_task_group() as tg:
        tg.start_soon(pump)
        try:
            yield follower
        finally:
            tg.cancel_scope.cancel()
    live.close()


def files_of(
    pieces: list[Piece], path: str
) -> list[tuple[FileId, int, bytes, str | None]]:
    """Per file read through ``path``: (identity, start offset, bytes, close reason).

    Asserts the order guarantees: Opened before Data, contiguous Data, Closed
    before the next Opened.
    """
    files: list[tuple[FileId, int, bytes, str | None]] = []
    current: tuple[FileId, int] | None = None
    end = 0
    chunks: list[bytes] = []
    for piece in pieces:
        if piece.path != path or isinstance(piece, Lost):
            continue
        if isinstance(piece, Opened):
            assert current is None, f"Opened without Closed before it: {piece}"
            current, end, chunks = (piece.file, piece.offset), piece.offset, []
        elif isinstance(piece, Data):
            assert current is not None, f"Data before Opened: {piece}"
            assert piece.end == end + len(piece.data), f"gap or overlap at {piece}"
            end = piece.end
            chunks.append(piece.data)
        else:
            assert current is not None, f"Closed without Opened: {piece}"
            files.append((*current, b"".join(chunks), piece.reason))
            current = None
    if current is not None:
        files.append((*current, b"".join(chunks), None))
    return files


def has_bytes(path: str, expected: bytes) -> Callable[[list[Piece]], bool]:
    """True once everything read through ``path`` adds up to ``expected``."""

    def done(pieces: list[Piece]) -> bool:
        got = b"".join(d for _, _, d, _ in files_of(pieces, path))
        assert expected.startswith(got), f"read {got!r}, expected {expected!r}"
        return got == expected

    return done


def count(kind: type, path: str, reason: str | None = None) -> Callable[..., int]:
    """How many pieces of ``kind`` (with ``reason``) a list holds for ``path``."""
    return lambda pieces: sum(
        1
        for p in pieces
        if isinstance(p, kind)
        and p.path == path
        and (reason is None or getattr(p, "reason", None) == reason)
    )


def append(path: Path, data: bytes) -> None:
    """Append ``data`` as one write."""
    with path.open("ab") as f:
        f.write(data)


def live(*args: Any, backend: str = "inotify", **kw: Any) -> LiveFiles:
    """A LiveFiles on ``backend``; only the poll backend re-checks often."""
    kw.setdefault("poll_interval", 0.05 if backend == "poll" else 2.0)
    return LiveFiles(*args, backend=backend, **kw)


# ---------------------------------------------------------------- follow

WRITER = textwrap.dedent(
    """
    import random, sys, time
    path, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    with open(path, "ab", buffering=0) as f:
        for i in range(n):
            line = b'{"i": %d, "pad": "%s"}\\n' % (i, b"x" * rng.randrange(0, 300))
            if rng.random() < 0.3:
                cut = rng.randrange(1, len(line))
                f.write(line[:cut])
                time.sleep(rng.random() * 0.003)
                f.write(line[cut:])
            else:
                f.write(line)
            if rng.random() < 0.2:
                time.sleep(rng.random() * 0.004)
    """
)


def expected_writer_output(n: int, seed: int) -> bytes:
    """What WRITER writes for ``n`` and ``seed`` (the same random draws)."""
    import random

    rng = random.Random(seed)
    out = []
    for i in range(n):
        line = b'{"i": %d, "pad": "%s"}\n' % (i, b"x" * rng.randrange(0, 300))
        if rng.random() < 0.3:
            rng.randrange(1, len(line))
            rng.random()
        if rng.random() < 0.2:
            rng.random()
        out.append(line)
    return b"".join(out)


@pytest.mark.slow
async def test_writer_process_bytes_arrive_once_in_order(
    tmp_path: Path, backend: str
) -> None:
    """A writer process appending with pauses and half lines: every byte exactly once."""
    path = tmp_path / "agent.jsonl"  # does not exist yet: waited for
    n, seed = 400, 7
    expected = expected_writer_output(n, seed)
    log = Log()
    async with following(live([str(path)], backend=backend, log=log)) as f:
        proc = await anyio.open_process(
            [sys.executable, "-c", WRITER, str(path), str(n), str(seed)],
            stdin=subprocess.DEVNULL,
            stdout=None,
            stderr=None,
        )
        try:
            await f.until(has_bytes(str(path), expected))
            with anyio.fail_after(PATIENCE):
                await proc.wait()
        finally:
            if proc.returncode is None:
                proc.kill()
            await proc.wait()
        assert proc.returncode == 0
    assert path.read_bytes() == expected
    assert count(Opened, str(path))(f.pieces) == 1
    assert log.events().count("follow_waiting") == 1


async def test_rotation_drains_the_old_file_first(tmp_path: Path, backend: str) -> None:
    """rename + new file: the old file's last appends, Closed(rotated), the new file from 0."""
    path = tmp_path / "app.log"
    path.write_bytes(b"one\n")
    log = Log()
    p = str(path)
    async with following(live([p], backend=backend, log=log)) as f:
        await f.until(has_bytes(p, b"one\n"))
        append(path, b"two (last words)\n")
        path.rename(tmp_path / "app.log.1")
        path.write_bytes(b"three\n")
        await f.until(has_bytes(p, b"one\ntwo (last words)\nthree\n"))
    (old_id, _, old, reason), (new_id, start, new, _) = files_of(f.pieces, p)
    assert (old, reason) == (b"one\ntwo (last words)\n", "rotated")
    assert (new, start) == (b"three\n", 0)
    assert new_id == FileId.of(os.stat(path)) != old_id
    assert "follow_rotated" in log.events()


async def test_logrotate_create_reads_what_the_writer_adds_before_reopening(
    tmp_path: Path, backend: str
) -> None:
    """logrotate ``create``: rename, an empty file at the path, the writer
    (still holding the old file) finishes its half line and writes one more,
    then reopens the path. Every byte once, the old file's first."""
    path = tmp_path / "app.log"
    p = str(path)
    with path.open("ab", buffering=0) as writer:
        writer.write(b"one\ntw")
        async with following(live([p], backend=backend)) as f:
            await f.until(has_bytes(p, b"one\ntw"))
            path.rename(tmp_path / "app.log.1")
            path.write_bytes(b"")
            await anyio.sleep(0.05)  # the follower sees the empty new file
            writer.write(b"o\nthree\n")
            await f.until(has_bytes(p, b"one\ntwo\nthree\n"))
            append(path, b"four\n")  # reopened
            await f.until(has_bytes(p, b"one\ntwo\nthree\nfour\n"))
    (_, _, old, reason), (_, start, new, _) = files_of(f.pieces, p)
    assert (old, reason, new, start) == (b"one\ntwo\nthree\n", "rotated", b"four\n", 0)


async def test_rotation_before_the_new_file_exists(
    tmp_path: Path, backend: str
) -> None:
    """A file renamed away is still read while its writer may write there
    (it has not reopened the path yet); closed as rotated once quiet for
    ``rotate_wait``; the path is read again when it returns."""
    path = tmp_path / "app.log"
    path.write_bytes(b"a\n")
    p = str(path)
    async with following(live([p], backend=backend, rotate_wait=0.3)) as f:
        await f.until(has_bytes(p, b"a\n"))
        path.rename(tmp_path / "old.log")
        append(tmp_path / "old.log", b"late\n")  # the writer, before it reopens
        await f.until(lambda ps: count(Closed, p, "rotated")(ps) == 1)
        path.write_bytes(b"b\n")
        await f.until(has_bytes(p, b"a\nlate\nb\n"))


async def test_copytruncate_restarts_at_zero(tmp_path: Path, backend: str) -> None:
    """copytruncate: Closed(truncated), then the same file again from offset 0."""
    path = tmp_path / "app.log"
    path.write_bytes(b"a long first line\n")
    p = str(path)
    log = Log()
    async with following(live([p], backend=backend, log=log)) as f:
        await f.until(has_bytes(p, b"a long first line\n"))
        shutil.copyfile(path, tmp_path / "app.log.1")
        with path.open("r+b") as fh:
            fh.truncate(0)
        await f.until(lambda ps: count(Opened, p)(ps) == 2)
        append(path, b"short\n")
        await f.until(has_bytes(p, b"a long first line\nshort\n"))
    first, second = files_of(f.pieces, p)
    assert first[3] == "truncated"
    assert (second[0], second[1], second[2]) == (first[0], 0, b"short\n")
    assert "follow_truncated" in log.events()


async def test_truncate_and_rewrite_past_the_offset(
    tmp_path: Path, backend: str
) -> None:
    """Truncated and at once rewritten to the same size: still seen as truncated."""
    path = tmp_path / "app.log"
    path.write_bytes(b'{"trace_id": "t3"}\n')
    p = str(path)
    async with following(live([p], backend=backend)) as f:
        await f.until(has_bytes(p, b'{"trace_id": "t3"}\n'))
        with path.open("r+b") as fh:
            fh.truncate(0)
            fh.write(b'{"trace_id": "t4"}\n')
        await f.until(has_bytes(p, b'{"trace_id": "t3"}\n{"trace_id": "t4"}\n'))
    assert [r for _, _, _, r in files_of(f.pieces, p)] == ["truncated", None]
    # No copy of the old content: whether it held more past byte 19 cannot
    # be known, so that is reported, not passed over.
    (lost,) = [x for x in f.pieces if isinstance(x, Lost)]
    assert (lost.path, lost.offset) == (p, 19)


async def test_copytruncate_while_lagging_reads_the_rest_from_the_copy(
    tmp_path: Path, backend: str
) -> None:
    """Lines written, copied to ``app.log.1`` and truncated before the
    follower looked: the unread rest comes from the copy, then the new content."""
    path = tmp_path / "app.log"
    path.write_bytes(b"one\n")
    p = str(path)
    log = Log()
    async with following(live([p], backend=backend, log=log)) as f:
        await f.until(has_bytes(p, b"one\n"))
        # (No await in between: the follower cannot look before the end.)
        append(path, b"two\nthree\n")
        (tmp_path / "app.log.2").write_bytes(b"one\nother\n")  # an older copy
        shutil.copyfile(path, tmp_path / "app.log.1")
        with path.open("r+b") as fh:
            fh.truncate(0)
        append(path, b"four\n")
        await f.until(has_bytes(p, b"one\ntwo\nthree\nfour\n"))
    assert [r for _, _, _, r in files_of(f.pieces, p)] == ["truncated", None]
    assert not [x for x in f.pieces if isinstance(x, Lost)]
    assert "follow_tail_copied" in log.events()


async def test_a_file_replaced_by_a_copy_of_itself_is_read_on(
    tmp_path: Path, backend: str
) -> None:
    """``cp log tmp && mv tmp log``: the same content under a new inode is
    not read again; what is appended to the copy is."""
    path = tmp_path / "app.log"
    path.write_bytes(b"one\ntwo\n")
    p = str(path)
    async with following(live([p], backend=backend)) as f:
        await f.until(has_bytes(p, b"one\ntwo\n"))
        shutil.copyfile(path, tmp_path / ".app.log.tmp")
        os.replace(tmp_path / ".app.log.tmp", path)
        append(path, b"three\n")
        await f.until(has_bytes(p, b"one\ntwo\nthree\n"))
    assert count(Opened, p)(f.pieces) == 1


async def test_files_rotated_away_between_two_looks_are_read_in_order(
    tmp_path: Path, backend: str
) -> None:
    """Two rename rotations before the follower looked: the file it never
    opened (now ``app.log.1``) is read between the old one and the new one."""
    path = tmp_path / "app.log"
    path.write_bytes(b"a\n")
    p = str(path)
    async with following(live([p], backend=backend)) as f:
        await f.until(has_bytes(p, b"a\n"))
        append(path, b"a2\n")
        path.rename(tmp_path / "app.log.1")
        path.write_bytes(b"b\n")
        (tmp_path / "app.log.1").rename(tmp_path / "app.log.2")
        path.rename(tmp_path / "app.log.1")
        path.write_bytes(b"c\n")
        await f.until(has_bytes(p, b"a\na2\nb\nc\n"))
    assert [r for _, _, _, r in files_of(f.pieces, p)] == ["rotated", "rotated", None]


async def test_delete_then_recreate(tmp_path: Path, backend: str) -> None:
    """A deleted file is drained and closed; a --follow path is read again when recreated."""
    path = tmp_path / "app.log"
    path.write_bytes(b"a\n")
    p = str(path)
    async with following(live([p], backend=backend)) as f:
        await f.until(has_bytes(p, b"a\n"))
        append(path, b"b\n")
        path.unlink()
        await f.until(lambda ps: count(Closed, p, "deleted")(ps) == 1)
        path.write_bytes(b"c\n")
        await f.until(has_bytes(p, b"a\nb\nc\n"))
    assert [(d, r) for _, _, d, r in files_of(f.pieces, p)] == [
        (b"a\nb\n", "deleted"),
        (b"c\n", None),
    ]


async def test_symlinked_log_follows_its_target(tmp_path: Path) -> None:
    """A --follow path that is a symlink: appends to the target arrive at once,
    and pointing the link elsewhere reads the new target from its start."""
    (tmp_path / "runs").mkdir()
    first, second = tmp_path / "runs" / "run-1.log", tmp_path / "runs" / "run-2.log"
    first.write_bytes(b"1a\n")
    link = tmp_path / "current.log"
    link.symlink_to(first)
    p = str(link)
    async with following(live([p], poll_interval=60.0)) as f:
        await f.until(has_bytes(p, b"1a\n"))
        append(first, b"1b\n")
        await f.until(has_bytes(p, b"1a\n1b\n"))
        second.write_bytes(b"2a\n")
        (tmp_path / "next.log").symlink_to(second)
        (tmp_path / "next.log").rename(link)
        await f.until(has_bytes(p, b"1a\n1b\n2a\n"))
        append(second, b"2b\n")
        await f.until(has_bytes(p, b"1a\n1b\n2a\n2b\n"))
    assert [r for _, _, _, r in files_of(f.pieces, p)] == ["rotated", None]


async def test_partial_line_is_passed_on_as_bytes(tmp_path: Path) -> None:
    """Half a line is delivered as soon as it is written; the rest follows."""
    path = tmp_path / "app.log"
    path.write_bytes(b"")
    p = str(path)
    async with following(live([p])) as f:
        append(path, b'{"half": ')
        await f.until(has_bytes(p, b'{"half": '))
        append(path, b"1}\n")
        await f.until(has_bytes(p, b'{"half": 1}\n'))


async def test_large_existing_file_arrives_in_contiguous_chunks(tmp_path: Path) -> None:
    """A file bigger than one read comes as several contiguous Data pieces."""
    path = tmp_path / "big.jsonl"
    body = b"".join(b"%07d\n" % i for i in range(400_000))  # 3.2 MB
    path.write_bytes(body)
    p = str(path)
    async with following(live([p])) as f:
        await f.until(has_bytes(p, body))
    assert count(Data, p)(f.pieces) >= 3


# ---------------------------------------------------------------- watch


async def test_watch_reads_existing_and_new_files_in_nested_dirs(
    tmp_path: Path, backend: str
) -> None:
    """Existing matches are read from the start; new ones in new nested dirs are found."""
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "rollout-1.jsonl").write_bytes(b"1\n")
    (tmp_path / "old" / "notes.jsonl").write_bytes(b"ignored\n")
    root = str(tmp_path)
    one = os.path.join(root, "old/rollout-1.jsonl")
    two = os.path.join(root, "2026/11/22/rollout-2.jsonl")
    watch = [(root, "**/rollout-*.jsonl")]
    async with following(live(watch=watch, backend=backend)) as f:
        await f.until(has_bytes(one, b"1\n"))
        (tmp_path / "2026" / "11" / "22").mkdir(parents=True)
        (tmp_path / "2026" / "11" / "22" / "rollout-2.jsonl").write_bytes(b"2\n")
        (tmp_path / "2026" / "11" / "22" / "other.txt").write_bytes(b"no\n")
        await f.until(has_bytes(two, b"2\n"))
        append(tmp_path / "old" / "rollout-1.jsonl", b"more\n")
        await f.until(has_bytes(one, b"1\nmore\n"))
    assert {p.path for p in f.pieces} == {one, two}


async def test_watch_glob_without_doublestar_stays_at_its_depth(tmp_path: Path) -> None:
    """``*.jsonl`` matches files directly in the directory, not in subdirectories."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "deep.jsonl").write_bytes(b"deep\n")
    (tmp_path / "top.jsonl").write_bytes(b"top\n")
    root = str(tmp_path)
    async with following(live(watch=[(root, "*.jsonl")])) as f:
        await f.until(has_bytes(os.path.join(root, "top.jsonl"), b"top\n"))
        (tmp_path / "late.jsonl").write_bytes(b"late\n")
        await f.until(has_bytes(os.path.join(root, "late.jsonl"), b"late\n"))
    assert {p.path for p in f.pieces} == {
        os.path.join(root, "top.jsonl"),
        os.path.join(root, "late.jsonl"),
    }


async def test_watched_file_deleted_is_closed_and_forgotten(tmp_path: Path) -> None:
    """A watched file that is deleted is closed; a new file at its name starts at 0."""
    file = tmp_path / "s.jsonl"
    file.write_bytes(b"x\n")
    p = str(file)
    async with following(live(watch=[(str(tmp_path), "*.jsonl")])) as f:
        await f.until(has_bytes(p, b"x\n"))
        file.unlink()
        await f.until(lambda ps: count(Closed, p, "deleted")(ps) == 1)
        file.write_bytes(b"y\n")
        await f.until(has_bytes(p, b"x\ny\n"))


def data_of(pieces: list[Piece], path: str) -> bytes:
    """The bytes of every Data piece for ``path`` (Renamed: no new Opened)."""
    return b"".join(p.data for p in pieces if isinstance(p, Data) and p.path == path)


async def test_watched_file_renamed_to_a_matching_name_reads_on(
    tmp_path: Path, backend: str
) -> None:
    """A watched file renamed to a name the glob matches: Renamed, then its
    next bytes under the new name, never its old bytes again."""
    old, new = tmp_path / "s.jsonl", tmp_path / "s-1.jsonl"
    old.write_bytes(b"x\n")
    async with following(
        live(watch=[(str(tmp_path), "*.jsonl")], backend=backend)
    ) as f:
        await f.until(has_bytes(str(old), b"x\n"))
        old.rename(new)
        append(new, b"y\n")
        await f.until(lambda ps: data_of(ps, str(new)) == b"y\n")
    assert data_of(f.pieces, str(old)) == b"x\n"
    assert Renamed(str(old), str(new)) in f.pieces
    assert count(Opened, str(new))(f.pieces) == 0
    assert count(Closed, str(old))(f.pieces) == 0


async def test_many_watched_files_beyond_the_open_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files closed to respect the descriptor cap are reopened where they were."""
    import trajgrade.sources.live as live_module

    monkeypatch.setattr(live_module, "MAX_OPEN_WATCHED", 2)
    files = [tmp_path / f"s{i}.jsonl" for i in range(6)]
    for i, file in enumerate(files):
        file.write_bytes(b"%d\n" % i)
    async with following(live(watch=[(str(tmp_path), "*.jsonl")])) as f:
        for i, file in enumerate(files):
            await f.until(has_bytes(str(file), b"%d\n" % i))
        for i, file in enumerate(files):
            append(file, b"again %d\n" % i)
        for i, file in enumerate(files):
            await f.until(has_bytes(str(file), b"%d\nagain %d\n" % (i, i)))
        assert len(_open_under(tmp_path)) <= 2
    for file in files:
        assert count(Opened, str(file))(f.pieces) == 1


def _open_under(directory: Path) -> list[str]:
    """Files under ``directory`` this process has open (none known off Linux)."""
    found: list[str] = []
    if not os.path.isdir("/proc/self/fd"):
        return found
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(directory) + os.sep):
            found.append(target)
    return found


# ---------------------------------------------------------------- resume


async def test_resume_same_file_starts_at_the_offset(tmp_path: Path) -> None:
    """``start`` with the file's identity: reading continues at the recorded offset."""
    path = tmp_path / "app.log"
    path.write_bytes(b"seen\nnew\n")
    p = str(path)
    start = {p: (FileId.of(os.stat(path)), 5)}
    async with following(live([p], start=start)) as f:
        await f.until(has_bytes(p, b"new\n"))
    assert files_of(f.pieces, p)[0][1] == 5


async def test_resume_replaced_file_starts_at_zero(tmp_path: Path) -> None:
    """``start`` naming another file (rotated while we were down): read from 0."""
    path = tmp_path / "app.log"
    path.write_bytes(b"old\n")
    p = str(path)
    start = {p: (FileId.of(os.stat(path)), 4)}
    path.rename(tmp_path / "app.log.1")
    path.write_bytes(b"fresh\n")
    log = Log()
    async with following(live([p], start=start, log=log)) as f:
        await f.until(has_bytes(p, b"fresh\n"))
    assert files_of(f.pieces, p)[0][1] == 0
    assert "follow_resume_from_start" in log.events()


async def test_resume_offset_past_the_end_starts_at_zero(tmp_path: Path) -> None:
    """Same file but shorter than the recorded offset (truncated while down): from 0."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"ab\n")
    p = str(path)
    start = {p: (FileId.of(os.stat(path)), 100)}
    async with following(live(watch=[(str(tmp_path), "*.jsonl")], start=start)) as f:
        await f.until(has_bytes(p, b"ab\n"))


# ---------------------------------------------------------------- errors


def test_follow_a_directory_is_an_error_naming_it(tmp_path: Path) -> None:
    """--follow DIR fails before reading, naming the path and the fix."""
    with pytest.raises(SourceError, match=r"is a directory; .*--watch") as err:
        LiveFiles([str(tmp_path)])
    assert err.value.location.file == str(tmp_path)


def test_watch_a_missing_directory_is_an_error_naming_it(tmp_path: Path) -> None:
    """--watch of a directory that does not exist fails, naming it."""
    missing = str(tmp_path / "nope")
    with pytest.raises(SourceError, match="does not exist") as err:
        LiveFiles(watch=[(missing, "*.jsonl")])
    assert err.value.location.file == missing


def test_watch_a_file_is_an_error(tmp_path: Path) -> None:
    """--watch of a regular file says to use --follow."""
    file = tmp_path / "x.jsonl"
    file.write_bytes(b"")
    with pytest.raises(SourceError, match="use --follow"):
        LiveFiles(watch=[(str(file), "*.jsonl")])


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0,
    reason="root reads any file",
)
def test_follow_an_unreadable_file_is_an_error(tmp_path: Path) -> None:
    """--follow of a file without read permission fails, naming it."""
    file = tmp_path / "secret.log"
    file.write_bytes(b"")
    file.chmod(0)
    with pytest.raises(SourceError, match="cannot read") as err:
        LiveFiles([str(file)])
    assert err.value.location.file == str(file)


async def test_path_replaced_by_a_directory_is_logged_not_fatal(tmp_path: Path) -> None:
    """A followed path that becomes a directory is reported once; following goes on."""
    path = tmp_path / "app.log"
    other = tmp_path / "other.log"
    other.write_bytes(b"o\n")
    log = Log()
    async with following(live([str(path), str(other)], log=log)) as f:
        await f.until(has_bytes(str(other), b"o\n"))
        path.mkdir()
        append(other, b"p\n")
        await f.until(has_bytes(str(other), b"o\np\n"))
        for _ in range(3):
            await anyio.sleep(0.01)
            append(other, b"q\n")
        await f.until(has_bytes(str(other), b"o\np\nq\nq\nq\n"))
    assert [e for lvl, e, kv in log.lines if lvl == "error"] == ["follow_unreadable"]


# ---------------------------------------------------------------- idle


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
async def test_idle_follower_barely_wakes(tmp_path: Path) -> None:
    """Idle for 1 s with a 0.25 s re-check: a handful of wakeups, not hundreds.

    Busy polling at 1 ms would be ~1000 context switches of the loop thread;
    the re-check plus test machinery is well under 100.
    """
    path = tmp_path / "app.log"
    path.write_bytes(b"a\n")
    files = [tmp_path / f"w{i}.jsonl" for i in range(50)]
    for file in files:
        file.write_bytes(b"w\n")
    lf = LiveFiles([str(path)], [(str(tmp_path), "*.jsonl")], poll_interval=0.25)
    async with following(lf) as f:
        await f.until(has_bytes(str(path), b"a\n"))
        await f.until(has_bytes(str(files[-1]), b"w\n"))
        before = _switches()
        await anyio.sleep(1.0)
        woke = _switches() - before
    assert woke < 100, f"{woke} context switches in 1 s idle"


def _switches() -> int:
    with open("/proc/thread-self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt")):
                return sum(
                    int(x.split(":")[1]) for x in [line, f.readline()] if x.strip()
                )
    raise AssertionError("no context switch counts in /proc")


# ---------------------------------------------------------------- glob


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("**/*.jsonl", "a.jsonl", True),
        ("**/*.jsonl", "p/q/a.jsonl", True),
        ("**/rollout-*.jsonl", "2025/01/02/rollout-x.jsonl", True),
        ("**/rollout-*.jsonl", "2025/01/02/other.jsonl", False),
        ("*.jsonl", "a.jsonl", True),
        ("*.jsonl", "d/a.jsonl", False),
        ("*/s?.jsonl", "d/s1.jsonl", True),
        ("*/s?.jsonl", "d/s12.jsonl", False),
        ("[ab]*.log", "b1.log", True),
        ("[!ab]*.log", "b1.log", False),
        ("a.b", "axb", False),
    ],
)
def test_glob(pattern: str, path: str, matches: bool) -> None:
    """Shell glob semantics on relative paths; ``**`` spans directories."""
    assert Glob(pattern).match(path) is matches


async def test_resume_by_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``start`` keyed by the absolute path applies to a relative --follow path."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "app.log").write_bytes(b"seen\nnew\n")
    start = {str(tmp_path / "app.log"): (FileId.of(os.stat("app.log")), 5)}
    async with following(live(["app.log"], start=start)) as f:
        await f.until(has_bytes("app.log", b"new\n"))
