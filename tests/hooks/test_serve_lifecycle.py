"""``trajgrade serve`` and its thin client around the edges of their life:
a port already taken, an unusable state directory, SIGHUP, and a client
that reaches something other than the daemon.

Real daemons, real sockets, real hook processes; every process is stopped
by its pid.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from tests.hooks._replay import POLICY, payloads, run_hook
from tests.hooks._serve import serving
from tests.hooks.test_server import _post

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.slow


def _serve(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    policy = tmp / "policy.yaml"
    policy.write_text(POLICY)
    return subprocess.run(
        [sys.executable, "-m", "trajgrade", "serve", "-c", str(policy), *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_a_port_in_use_has_its_own_status_and_says_so(tmp_path: Path) -> None:
    """Another process holds the port: status 6 (a bind failure), one line
    naming the port and the fix, no traceback."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = _serve(tmp_path, "--port", str(port), "--state-dir", str(tmp_path / "s"))
    assert out.returncode == 6, out.stderr
    assert f"cannot listen on 127.0.0.1:{port}: the port is in use" in out.stderr
    assert "--port" in out.stderr
    assert "Traceback" not in out.stderr


def test_an_unusable_state_directory_is_named(tmp_path: Path) -> None:
    """--state-dir under a regular file: status 9, the path and the option named."""
    (tmp_path / "file").write_text("")
    state = tmp_path / "file" / "state"
    out = _serve(tmp_path, "--port", "0", "--state-dir", str(state))
    assert out.returncode == 9, out.stderr
    assert "cannot use the state directory" in out.stderr
    assert "--state-dir" in out.stderr and str(tmp_path / "file") in out.stderr
    assert "Traceback" not in out.stderr


def test_sighup_stops_the_daemon_with_a_checkpoint(tmp_path: Path) -> None:
    """SIGHUP (a closed terminal, a service manager) saves the sessions like
    SIGTERM: with checkpoints far apart, only the shutdown one can have
    written the state, and the cold hook goes on from it."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    state = tmp_path / "state"
    with serving(policy, state, "--checkpoint-interval", "3600") as (url, proc):
        for p in payloads("gemini")[:3]:
            assert _post(url, "gemini", p)[0] == 200
        os.kill(proc.pid, signal.SIGHUP)
        assert proc.wait(timeout=10) == 0
    assert len(list((state / "gemini").glob("*.state"))) == 1
    rest = payloads("gemini")[3:]
    outs = [run_hook("gemini", p, "-c", policy, "--state-dir", state) for p in rest]
    assert [json.loads(o.stdout)["decision"] for o in outs if o.stdout] == ["deny"]


@pytest.mark.parametrize(
    "answer",
    [
        b"SSH-2.0-OpenSSH_9.2\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-Trajgrade-Exit: zz\r\nContent-Length: 2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nContent-Length: many\r\n\r\n{}",
    ],
    ids=["not-http", "bad-exit-header", "bad-length"],
)
def test_a_client_reaching_another_service_fails_as_configured(answer: bytes) -> None:
    """Something else on the port: fail-open prints nothing, --fail-closed
    denies the call; both exit 0 with the reason on stderr, no traceback
    (a crash is a non-blocking error: the call would run, fail-closed or not)."""
    pre = payloads("claude-code")[2]
    with _peer(answer) as url:  # another service on the port
        opened = run_hook("claude-code", pre, "--server", url)
        closed = run_hook("claude-code", pre, "--server", url, "--fail-closed")
    assert (opened.returncode, opened.stdout) == (0, "")
    assert "check the port" in opened.stderr and "Traceback" not in opened.stderr
    assert closed.returncode == 0, closed.stderr
    decision = json.loads(closed.stdout)["hookSpecificOutput"]
    assert decision["permissionDecision"] == "deny"


@contextlib.contextmanager
def _peer(first: bytes, each: bytes = b"", pause: float | None = None) -> Iterator[str]:
    """A loopback service that answers every connection with ``first``, then
    (with a ``pause``) ``each`` every ``pause`` seconds until the client goes."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    sock.settimeout(0.1)  # (accept wakes up to see the stop)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                conn.recv(65536)
                try:
                    conn.sendall(first)
                    while pause is not None and not stop.wait(pause):
                        conn.sendall(each)
                except OSError:
                    continue  # the client gave up

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        stop.set()
        sock.close()
        thread.join(timeout=5)


@pytest.mark.parametrize(
    ("first", "each", "pause", "why"),
    [
        (b"HTTP/1.1 200 OK\r\n", b"X", 0.05, "no whole answer within 1s"),
        (b"HTTP/1.1 200 OK\r\n\r\n", b"x" * 65536, 0.0, "an answer over"),
    ],
    ids=["trickled", "endless"],
)
def test_a_client_facing_a_trickling_or_endless_answer_fails_in_time(
    monkeypatch: pytest.MonkeyPatch, first: bytes, each: bytes, pause: float, why: str
) -> None:
    """The thin client's timeout bounds the whole answer, not each read: a
    peer that drips bytes (or never stops sending) gets the fail-closed deny
    in time, before the agent's own hook timeout would run the call."""
    from trajgrade.hooks import client

    monkeypatch.setattr(client, "TIMEOUT", 1.0)
    pre = json.dumps(payloads("claude-code")[2]).encode()
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    monkeypatch.setattr("sys.stderr", err)
    with _peer(first, each, pause) as url:
        started = time.monotonic()
        code = client.forward(url, "claude-code", pre, fail_closed=True)
        took = time.monotonic() - started
    assert code == 0 and took < 4, (took, err.getvalue())
    assert why in err.getvalue()
    decision = json.loads(out.getvalue())["hookSpecificOutput"]
    assert decision["permissionDecision"] == "deny"


def test_a_server_url_that_is_not_http_host_port_is_named() -> None:
    """An https:// or path URL is refused with the expected form, not a DNS error."""
    pre = payloads("claude-code")[2]
    for url in ("https://127.0.0.1:8787", "http://127.0.0.1:8787/hook"):
        out = run_hook("claude-code", pre, "--server", url)
        assert out.returncode == 0 and out.stdout == ""
        assert "--server must be http://HOST:PORT" in out.stderr, out.stderr


def test_a_call_in_flight_at_sigterm_is_answered_and_saved(tmp_path: Path) -> None:
    """SIGTERM while a call's body is still arriving: the daemon finishes
    that call (its agent gets the deny, not a dropped connection that fails
    open) and only then takes its last checkpoint, which holds the call."""
    import time

    import msgspec

    from trajgrade._util.sealed import unseal

    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    state = tmp_path / "state"
    calls = payloads("gemini")
    with serving(policy, state, "--checkpoint-interval", "3600") as (url, proc):
        for p in calls[:4]:
            assert _post(url, "gemini", p)[0] == 200
        body = json.dumps(calls[4]).encode()  # BeforeTool cat /etc/hostname
        head = f"POST /hook/gemini HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
            conn.sendall(head.encode() + body[:10])
            time.sleep(0.3)  # the handler is reading the body
            os.kill(proc.pid, signal.SIGTERM)
            time.sleep(0.3)  # the daemon is shutting down
            sent = time.time()
            conn.sendall(body[10:])
            answer = b""
            while chunk := conn.recv(65536):
                answer += chunk
        assert proc.wait(timeout=10) == 0
    assert answer.startswith(b"HTTP/1.1 200"), answer
    assert json.loads(answer.partition(b"\r\n\r\n")[2])["decision"] == "deny"
    [saved] = (state / "gemini").glob("*.state")
    assert msgspec.msgpack.decode(unseal(saved.read_bytes()))["updated"] >= sent


def test_a_session_that_cannot_be_saved_at_shutdown_is_reported(
    tmp_path: Path,
) -> None:
    """One agent's state folder is gone (replaced by a file) when the daemon
    stops: the other sessions are still saved, the lost one is named in one
    error line, the status is 1; no traceback."""
    import shutil

    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    state = tmp_path / "state"
    with serving(
        policy, state, "--checkpoint-interval", "3600", stderr=subprocess.PIPE
    ) as (url, proc):
        for agent in ("gemini", "claude-code"):
            for p in payloads(agent)[:3]:
                assert _post(url, agent, p)[0] == 200
        shutil.rmtree(state / "gemini")
        (state / "gemini").write_text("")
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=10) == 1
        assert proc.stderr is not None
        err = proc.stderr.read()
    assert "checkpoint_failed" in err
    assert f"error: {state}: 1 session(s) could not be saved at shutdown" in err
    assert "Traceback" not in err
    assert len(list((state / "claude-code").glob("*.state"))) == 1


def test_the_daemon_starts_with_stdout_closed(tmp_path: Path) -> None:
    """A supervisor that closes stdout: the URL is on stderr, the daemon
    serves (it used to crash flushing a missing sys.stdout)."""
    import urllib.request

    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    argv = [sys.executable, "-m", "trajgrade", "serve", "-c", str(policy)]
    argv += ["--port", "0", "--state-dir", str(tmp_path / "state")]
    proc = subprocess.Popen(
        ["sh", "-c", 'exec "$@" >&-', "sh", *argv], stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "listening on http://127.0.0.1:" in line, line
        url = line.rsplit(" ", 1)[1].strip()
        # A daemon that crashed after its first line refuses or drops this.
        with urllib.request.urlopen(f"{url}/health", timeout=10) as resp:
            assert resp.read() == b"ok\n"
        assert proc.poll() is None
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
        assert proc.stderr is not None
        proc.stderr.close()


def test_an_unwritable_verdicts_path_is_refused_at_start(tmp_path: Path) -> None:
    """--verdicts in a missing folder: status 2 naming the path and the
    option, before serving, not a 500 at the first verdict."""
    missing = tmp_path / "no-such-dir" / "v.jsonl"
    out = _serve(
        tmp_path,
        "--port",
        "0",
        "--state-dir",
        str(tmp_path / "s"),
        "--verdicts",
        str(missing),
    )
    assert out.returncode == 2, out.stderr
    assert f"{missing}: cannot write" in out.stderr and "--verdicts" in out.stderr


def test_a_verdict_that_cannot_be_written_does_not_undo_a_deny(
    tmp_path: Path,
) -> None:
    """The verdicts file becomes unwritable while serving: the forbidden call
    is still denied (the failure used to turn its answer into a 500, and a
    500 lets the call run); the loss is logged."""
    import shutil

    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    verdicts = out_dir / "v.jsonl"
    with serving(
        policy, tmp_path / "state", "--verdicts", str(verdicts), stderr=subprocess.PIPE
    ) as (url, proc):
        shutil.rmtree(out_dir)
        (tmp_path / "out").write_text("")  # the folder is now a file
        answers = [_post(url, "gemini", p) for p in payloads("gemini")]
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
        assert proc.stderr is not None
        err = proc.stderr.read()
    assert all(status == 200 for status, _ in answers), answers
    denied = [json.loads(body) for _, body in answers if body]
    assert [d["decision"] for d in denied] == ["deny"]
    assert "records_not_written" in err


def test_the_cold_hook_still_denies_when_its_verdicts_cannot_be_written(
    tmp_path: Path,
) -> None:
    """The same for `trajgrade hook` without a daemon: --verdicts in a
    missing folder loses the records, not the deny."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    verdicts = tmp_path / "no-such-dir" / "v.jsonl"
    args = ("-c", policy, "--state-dir", tmp_path / "state", "--verdicts", verdicts)
    outs = [run_hook("gemini", p, *args) for p in payloads("gemini")]
    assert all(o.returncode == 0 for o in outs)
    denied = [json.loads(o.stdout) for o in outs if o.stdout]
    assert [d["decision"] for d in denied] == ["deny"]
    assert any("records_not_written" in o.stderr for o in outs)


def _small_files() -> None:
    """In the hook process: files past 256 bytes fail with EFBIG (a full disk)."""
    import resource

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG, not a kill
    resource.setrlimit(resource.RLIMIT_FSIZE, (256, 256))


def test_the_cold_hook_still_denies_when_its_state_cannot_be_saved(
    tmp_path: Path,
) -> None:
    """The session's state cannot be saved (files limited to 256 bytes, as on a
    full disk): the forbidden call is still denied, and that is logged; it
    used to be an internal error, answered fail-open: the call ran."""
    from tests.hooks._replay import hook_cmd

    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    args = ("-c", policy, "--state-dir", tmp_path / "state")
    calls = payloads("gemini")
    for p in calls[:4]:  # the state, saved while there is room
        assert run_hook("gemini", p, *args).returncode == 0
    big = (tmp_path / "state" / "gemini").glob("*.state")
    assert max(f.stat().st_size for f in big) > 256  # else the limit bites nothing
    out = subprocess.run(
        hook_cmd("gemini", *args),
        input=json.dumps(calls[4]),
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_small_files,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["decision"] == "deny", out.stderr
    assert "state_not_saved" in out.stderr


def test_a_state_directory_from_the_environment_that_cannot_be_used_is_named(
    tmp_path: Path,
) -> None:
    """$XDG_STATE_HOME names a file: the hook says which directory and where
    it comes from (it said "internal error: Not a directory"), and denies
    the call fail-closed."""
    from tests.hooks._replay import hook_cmd

    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    (tmp_path / "file").write_text("")
    out = subprocess.run(
        hook_cmd("claude-code", "-c", policy, "--fail-closed"),
        input=json.dumps(payloads("claude-code")[2]),
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "file")},
        check=False,
    )
    assert out.returncode == 0
    where = tmp_path / "file" / "trajgrade" / "hooks"
    assert f"cannot use the state directory {where}: Not a directory" in out.stderr
    assert "$XDG_STATE_HOME" in out.stderr
    decision = json.loads(out.stdout)["hookSpecificOutput"]
    assert decision["permissionDecision"] == "deny"
