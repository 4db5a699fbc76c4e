"""Token usage read incrementally from transcripts: counted once, at any cut."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.hooks._replay import FIXTURES, RECORDED

from trajgrade.events import Usage
from trajgrade.hooks.usage import Cursor, read_usage
from trajgrade.pipeline.decoder import SourceDecoder


def _batch_tokens(data: bytes, name: str) -> tuple[int, int]:
    decoder = SourceDecoder(name)
    events = [e for b in (decoder.feed(data), decoder.close()) for e in b.events]
    usage = [e for e in events if isinstance(e, Usage)]
    return sum(u.input_tokens for u in usage), sum(u.output_tokens for u in usage)


def _sum(usage: list[Usage]) -> tuple[int, int]:
    return sum(u.input_tokens for u in usage), sum(u.output_tokens for u in usage)


@pytest.mark.parametrize("agent", ["claude-code", "codex", "gemini"])
def test_growing_transcript_counts_like_the_adapter(agent: str, tmp_path: Path) -> None:
    """Reading a transcript as it grows, cut anywhere, sums to the adapter's totals."""
    folder, name = RECORDED[agent]
    data = (FIXTURES / folder / name).read_bytes()
    expected = _batch_tokens(data, name)
    assert expected != (0, 0)
    for step in (97, 1000, len(data)):
        path = tmp_path / f"{step}.jsonl"
        path.write_bytes(b"")
        cursor = Cursor()
        got: list[Usage] = []
        for cut in range(step, len(data) + step, step):
            path.write_bytes(data[: min(cut, len(data))])
            got += read_usage(agent, str(path), cursor)
        assert _sum(got) == expected, f"cut every {step} bytes"


def test_rereading_from_a_stored_cursor_adds_nothing(tmp_path: Path) -> None:
    """A cursor restored after a restart neither recounts nor misses a response."""
    data = (FIXTURES / "claude-code" / "transcript.jsonl").read_bytes()
    path = tmp_path / "t.jsonl"
    half = data.index(b"\n", len(data) // 2) + 1
    path.write_bytes(data[:half])
    cursor = Cursor()
    first = read_usage("claude-code", str(path), cursor)
    import msgspec

    restored = msgspec.msgpack.decode(msgspec.msgpack.encode(cursor), type=Cursor)
    assert read_usage("claude-code", str(path), restored) == []
    path.write_bytes(data)
    rest = read_usage("claude-code", str(path), restored)
    assert _sum(first + rest) == _batch_tokens(data, "t.jsonl")


def test_missing_transcript_gives_nothing(tmp_path: Path) -> None:
    """A transcript that does not exist (yet) is no usage, not an error."""
    assert read_usage("codex", str(tmp_path / "absent.jsonl"), Cursor()) == []
