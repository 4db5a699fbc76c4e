"""On every real recording in tests/fixtures, the views a kind promises are
there: a shell call has its command, a fetch its URL, a read/write/edit its
path(s) -- so `{kind: K, <view>: ...}` is never a configuration error on
real calls, apart from the documented exceptions below."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from trajgrade.events import ToolCall
from trajgrade.formats import detect, detect_document, open_reader
from trajgrade.graders.matching._views import call_kind, view_of

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FOLDERS = (
    "claude-code",
    "codex",
    "gemini-cli",
    "gemini-cli-live",
    "openhands",
    "swe-agent",
    "mini-swe-agent",
    "atif",
    "letta",
    "guard-live",
)
PROMISED = {"shell": "command", "fetch": "url", "read": "path", "write": "path"}
PROMISED["edit"] = "path"
FILES = sorted(
    p
    for folder in FOLDERS
    for p in (FIXTURES / folder).rglob("*")
    if p.is_file()
    and p.suffix in (".jsonl", ".json", ".traj", ".gz")
    and "hooks" not in p.relative_to(FIXTURES).parts[1:-1]
)


def _calls(path: Path) -> list[ToolCall]:
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    fmt = detect(data.split(b"\n", 1)[0])
    if fmt is None:
        fmt, _ = detect_document(data[:65536], final=True)
    if fmt is None:
        return []
    reader = open_reader(fmt, source=str(path), default_trace="t")
    events, _, _ = reader.feed(data if data.endswith(b"\n") else data + b"\n", 1)
    more, _ = reader.close()
    return [e for e in events + more if isinstance(e, ToolCall)]


def _exception(call: ToolCall) -> bool:
    # The corpus redacted these Codex arguments: nothing left to read.
    if call.args is None and (call.args_raw or "").startswith("[REDACTED"):
        return True
    # SWE-agent's `edit` changes the file last opened: it names no path.
    return call.name == "edit" and "path" not in (call.args or {})


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_kinds_keep_their_promised_views(path: Path) -> None:
    missing = [
        (c.name, PROMISED[kind], c.args)
        for c in _calls(path)
        if (kind := call_kind(c)) in PROMISED
        and view_of(c, PROMISED[kind]) is None
        and not _exception(c)
    ]
    assert not missing, missing


def test_the_recordings_hold_many_calls_of_each_promising_kind() -> None:
    seen: dict[str, int] = {}
    for path in FILES:
        for c in _calls(path):
            kind = call_kind(c)
            if kind in PROMISED and view_of(c, PROMISED[kind]) is not None:
                seen[kind] = seen.get(kind, 0) + 1
    assert set(seen) == set(PROMISED), seen
    assert sum(seen.values()) > 500, seen
