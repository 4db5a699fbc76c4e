"""The thin command client: forward one hook call to ``trajgrade serve``.

For agents without ``http`` hooks (Codex, Gemini CLI), or to keep Claude Code
on ``command`` hooks: ``trajgrade hook AGENT --server http://127.0.0.1:P``
posts the payload to ``/hook/AGENT`` and prints the daemon's answer. It uses
a raw socket and the standard library only (no msgspec, no http.client), so
the process costs little more than the interpreter start.

If the daemon cannot be reached or fails, the call is fail-open (nothing is
printed; the reason goes to stderr) unless ``--fail-closed`` was given, in
which case the pending tool call is denied.
"""

from __future__ import annotations

import socket
import sys
import time
from typing import Final

__all__ = ("forward", "server_address")

#: Seconds to connect and to get the whole answer, however it trickles in;
#: the agent's own hook timeout is longer (Claude Code 60 s, Codex the
#: configured one, Gemini ms-based), and an agent that times a hook out runs
#: the call whatever ``--fail-closed`` says.
TIMEOUT: Final = 10.0
#: Largest answer read (trajgrade's are a few hundred bytes).
ANSWER_MAX: Final = 1 << 20


def forward(
    url: str,
    agent: str,
    body: bytes,
    *,
    fail_closed: bool,
    token_file: str | None = None,
) -> int:
    """Post ``body`` to the daemon at ``url``; print its answer; the exit status.

    ``token_file``: the file holding serve's bearer token, read here (the
    command line, in the agent's readable settings, names only the file).
    """
    try:
        host, port = server_address(url)
        token = None
        if token_file is not None:
            with open(token_file, encoding="utf-8") as f:
                token = f.read().strip()
        status, headers, answer = _post(host, port, f"/hook/{agent}", body, token)
        if status != 200:
            detail = answer.decode("utf-8", "replace").strip()
            msg = f"HTTP {status}: {detail}"
            raise OSError(msg)
        code = headers.get("x-trajgrade-exit", "0")
        if not code.isdigit():
            msg = f"not trajgrade serve's answer (X-Trajgrade-Exit: {code!r}); check the port"
            raise OSError(msg)
    except (OSError, ValueError) as exc:
        return _failed(agent, body, fail_closed, f"trajgrade serve at {url}: {exc}")
    sys.stdout.buffer.write(answer)
    sys.stdout.flush()
    return int(code)


def server_address(url: str) -> tuple[str, int]:
    """(host, port) of ``--server``; ValueError naming the expected form."""
    rest = url.removeprefix("http://").rstrip("/")
    host, _, port = rest.rpartition(":")
    if not host or not port.isdigit() or "/" in host or int(port) > 65535:
        msg = f"--server must be http://HOST:PORT (got {url!r})"
        raise ValueError(msg)
    return host.strip("[]"), int(port)


def _post(
    host: str, port: int, path: str, body: bytes, token: str | None = None
) -> tuple[int, dict[str, str], bytes]:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        f"{auth}Connection: close\r\n\r\n"
    ).encode()
    deadline = time.monotonic() + TIMEOUT
    with socket.create_connection((host, port), timeout=TIMEOUT) as sock:
        sock.sendall(head + body)
        chunks: list[bytes] = []
        size = 0
        while True:
            left = deadline - time.monotonic()
            try:
                if left <= 0:
                    raise TimeoutError
                sock.settimeout(left)  # (per read; the deadline bounds them all)
                chunk = sock.recv(65536)
            except TimeoutError:
                msg = f"no whole answer within {TIMEOUT:g}s"
                raise TimeoutError(msg) from None
            if not chunk:
                break
            size += len(chunk)
            if size > ANSWER_MAX:
                msg = f"an answer over {ANSWER_MAX:,} bytes; check the port"
                raise OSError(msg)
            chunks.append(chunk)
    raw = b"".join(chunks)
    top, sep, rest = raw.partition(b"\r\n\r\n")
    if not sep:
        msg = "incomplete HTTP answer"
        raise OSError(msg)
    lines = top.decode("latin-1").split("\r\n")
    first = lines[0].split(" ", 2)
    if len(first) < 2 or not first[0].startswith("HTTP/") or not first[1].isdigit():
        # Something else listens on the port: a failure like no answer
        # (fail-closed must deny, not crash into a non-blocking error).
        msg = f"not an HTTP answer ({lines[0][:40]!r}); check the port"
        raise OSError(msg)
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    length = headers.get("content-length", str(len(rest)))
    if not length.isdigit():
        msg = f"bad Content-Length {length!r} in the answer; check the port"
        raise OSError(msg)
    return int(first[1]), headers, rest[: int(length)]


def _failed(agent: str, body: bytes, fail_closed: bool, problem: str) -> int:
    sys.stderr.write(f"trajgrade hook: {problem}\n")
    if not fail_closed:
        return 0
    import json

    try:
        event = json.loads(body).get("hook_event_name")
    except (ValueError, AttributeError):
        event = None
    if not isinstance(event, str) or not event:
        # An unreadable payload: answer as the gate (the call it may carry
        # must not run; other events ignore a gate's answer).
        event = "BeforeTool" if agent == "gemini" else "PreToolUse"
    reason = f"trajgrade could not grade this call and runs fail-closed: {problem}"
    if agent == "gemini" and event == "BeforeTool":
        out: dict[str, object] = {"decision": "deny", "reason": reason}
    elif agent != "gemini" and event == "PreToolUse":
        out = {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }
        }
    else:
        return 0
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
    return 0


def main(argv: list[str]) -> int:
    """``python client.py AGENT --server URL [--fail-closed]``, payload on stdin.

    Run as a script (not ``-m``), this file imports no part of ``trajgrade``:
    ``hook install --server`` registers it that way, so forwarding costs only
    the interpreter's start.
    """
    agent = argv[0] if argv else ""
    url = _value(argv, "--server")
    token_file = _value(argv, "--token-file")
    if agent not in ("claude-code", "codex", "gemini") or url is None:
        sys.stderr.write(
            "usage: client.py {claude-code|codex|gemini} --server URL [--token-file FILE] [--fail-closed]\n"
        )
        return 0
    return forward(
        url,
        agent,
        sys.stdin.buffer.read(),
        fail_closed="--fail-closed" in argv,
        token_file=token_file,
    )


def _value(argv: list[str], flag: str) -> str | None:
    if flag not in argv[1:]:
        return None
    i = argv.index(flag, 1)
    return argv[i + 1] if i + 1 < len(argv) else None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
