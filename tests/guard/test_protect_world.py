"""HostWorld on real files: links one by one, /proc/self rewritten to the
agent's cwd, descriptors unknowable, bounded globs, safe secret reads."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from trajgrade.runtime.host_world import EXPAND_MAX, READ_MAX, HostWorld


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> HostWorld:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return HostWorld()


def test_links_resolve_to_the_file_and_its_inode(tmp_path: Path, world) -> None:
    secret = tmp_path / ".env"
    secret.write_text("K=v")
    os.symlink(".env", tmp_path / "notes.txt")
    os.link(secret, tmp_path / "hard")
    (tmp_path / "sub").mkdir()
    os.symlink("../.env", tmp_path / "sub" / "up")
    os.symlink("sub", tmp_path / "dirlink")
    cwd = str(tmp_path)
    want = world.find(".env", cwd)
    assert want is not None and want.real == str(secret)
    for path in ("notes.txt", "sub/up", "dirlink/up", "dirlink/../.env"):
        got = world.find(path, cwd)
        assert got is not None and got.real == str(secret), path
    hard = world.find("hard", cwd)
    assert hard is not None and hard.inode == want.inode and hard.real != want.real


def test_proc_self_means_the_agent_not_the_guard(tmp_path: Path, world) -> None:
    (tmp_path / ".env").write_text("K=v")
    os.symlink("/proc/self/cwd", tmp_path / "here")
    cwd = str(tmp_path)
    assert os.getcwd() != cwd  # the guard's own cwd is elsewhere
    for path in ("/proc/self/cwd/.env", "/proc/thread-self/cwd/.env", "here/.env",
                 f"/proc/self/root{cwd}/.env"):  # fmt: skip
        got = world.find(path, cwd)
        assert got is not None and got.real == f"{cwd}/.env", path


def test_descriptors_and_other_processes_cannot_be_known(world) -> None:
    for path in ("/proc/self/fd/0", "/dev/fd/0", "/dev/stdin", f"/proc/{os.getpid()}/cwd",
                 "/proc/1/root/etc/passwd", "/proc/self/task/1/cwd"):  # fmt: skip
        assert world.find(path, "/") is None, path


def test_missing_dangling_and_looping_paths_are_none(tmp_path: Path, world) -> None:
    os.symlink("nowhere", tmp_path / "dangling")
    os.symlink("loop2", tmp_path / "loop1")
    os.symlink("loop1", tmp_path / "loop2")
    for path in ("missing", "dangling", "loop1", "a/../../nope"):
        assert world.find(path, str(tmp_path)) is None
    assert world.find("relative", None) is None


def test_home_paths_use_the_guards_home(tmp_path: Path, world) -> None:
    (tmp_path / "home" / ".netrc").write_text("machine x")
    got = world.find("~/.netrc", None)
    assert got is not None and got.real == str(tmp_path / "home" / ".netrc")


def test_globs_see_hidden_files_and_are_bounded(tmp_path: Path, world) -> None:
    (tmp_path / ".env").write_text("")
    (tmp_path / "many").mkdir()
    for i in range(EXPAND_MAX + 10):
        (tmp_path / "many" / f"f{i}").write_text("")
    cwd = str(tmp_path)
    assert world.expand(".e*", cwd) == [f"{cwd}/.env"]
    assert world.expand("*", cwd) is not None and f"{cwd}/.env" in world.expand(
        "*", cwd
    )
    assert len(world.expand("many/*", cwd) or []) == EXPAND_MAX
    assert world.expand("nothing/*", cwd) == []


def test_secrets_are_read_bounded_and_never_from_a_fifo(tmp_path: Path, world) -> None:
    big = tmp_path / "big"
    big.write_bytes(b"x" * (READ_MAX + 100))
    assert len(world.read_secret(str(big)) or b"") == READ_MAX
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    done = threading.Event()
    result: list[bytes | None] = []

    def read() -> None:
        result.append(world.read_secret(str(fifo)))
        done.set()

    threading.Thread(target=read, daemon=True).start()
    assert done.wait(10), "read_secret blocked on a FIFO"
    assert result == [None]
    assert world.read_secret("/dev/zero") is None
    assert world.read_secret(str(tmp_path / "missing")) is None
    os.symlink("big", tmp_path / "link")
    assert world.read_secret(str(tmp_path / "link")) is None  # only a resolved path


def test_answers_are_fresh_across_turns(tmp_path: Path, world, monkeypatch) -> None:
    import trajgrade.runtime.host_world as hw

    cwd = str(tmp_path)
    assert world.find("later", cwd) is None
    (tmp_path / "later").write_text("")
    monkeypatch.setattr(hw, "FRESH_S", -1.0)  # the next turn
    assert world.find("later", cwd) is not None


def test_a_tree_walk_is_bounded_and_finds_deep_secrets(tmp_path: Path) -> None:
    """`**/.env` is expanded by a bounded walk: a deep secret is found in a
    small tree; a tree past WALK_MAX entries is "cannot be known" (None), so
    the lexical rules stand, instead of a decision that walks a whole home."""
    from trajgrade.runtime import host_world

    small = tmp_path / "small"
    (small / "a" / "b").mkdir(parents=True)
    (small / "a" / "b" / ".env").write_text("K=v\n")
    found = HostWorld().expand("**/.env", str(small))
    assert found == [str(small / "a" / "b" / ".env")]
    big = tmp_path / "big"
    big.mkdir()
    for i in range(host_world.WALK_MAX + 1):
        (big / f"f{i}").touch()
    assert HostWorld().expand("**/.env", str(big)) is None


def test_a_link_made_by_the_call_before_is_seen_at_once(
    tmp_path: Path, world: HostWorld
) -> None:
    """`ln -s policy notes.yaml`, then a write through notes.yaml in the same
    turn, milliseconds later: the second decision must not reuse the first's
    "notes.yaml does not exist"."""
    from trajgrade.config.compile import compile_suite
    from trajgrade.config.decode import load_config
    from trajgrade.engine.engine import Engine
    from trajgrade.events import ToolCall, TraceStart
    from trajgrade.graders import BuildContext

    policy = tmp_path / "policy.yaml"
    policy.write_text("protect:\n  default: allow\n")
    suite = compile_suite(load_config(policy), context=BuildContext(world=world))
    engine = Engine(suite)
    cwd = str(tmp_path)
    write = {"file_path": f"{cwd}/notes.yaml", "content": "graders: []\n"}
    engine.feed(TraceStart(trace_id="t", metadata={"cwd": cwd}))
    engine.feed(ToolCall(trace_id="t", name="Write", call_id="1", args=write))
    assert not engine.decisions  # notes.yaml is a plain new file
    os.symlink(policy, tmp_path / "notes.yaml")
    engine.feed(ToolCall(trace_id="t", name="Write", call_id="2", args=write))
    (denied,) = engine.decisions
    assert denied.call_id == "2" and denied.rule == "protect.self"
