"""Fuzz: mutated real records interleaved with clean traces.

Records of the example session (canonical JSONL) and of a recorded Claude
Code transcript are renamed to fuzz traces and mutated: truncated, bytes
flipped, invalid UTF-8, NUL bytes, values of the wrong JSON type, nesting
thousands deep, lines of megabytes, BOMs and CRLF. They are interleaved
with clean traces. Whatever the mutations do, grading never raises, every
rejected record is located, and every clean trace's final verdicts are
exactly those of grading the clean records alone.

CI runs a few seconds' worth (``FUZZ_LINES`` below). Set
``TRAJGRADE_FUZZ_LINES`` for a longer run (e.g. 2000000, with ``--timeout 0``); the volume run is
printed with ``-s``.
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path
from typing import Any

import pytest

from trajgrade import Engine, load_suite
from trajgrade.pipeline.decoder import SourceDecoder
from trajgrade.pipeline.grading import Grading
from trajgrade.pipeline.whole import grade_bytes

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "src" / "trajgrade" / "examples" / "policy.yaml"
SESSION = ROOT / "src" / "trajgrade" / "examples" / "session.jsonl"
CLAUDE = ROOT / "tests" / "fixtures" / "claude-code" / "live_v2.1.197_transcript.jsonl"
#: Mutated lines per format in CI (a few seconds).
FUZZ_LINES = int(os.environ.get("TRAJGRADE_FUZZ_LINES", "2000"))
CHUNK = 64 * 1024


def _mutate(rng: random.Random, line: bytes) -> bytes:
    """One hostile variant of ``line`` (no newline inside)."""
    kind = rng.randrange(12)
    if kind == 6 and rng.random() < 0.9:
        kind = 1  # megabyte lines are rarer: they cost the most time
    if kind == 0:  # truncation
        return line[: rng.randrange(len(line))]
    if kind == 1:  # byte flips
        b = bytearray(line)
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(b))
            b[i] = rng.randrange(256)
        return bytes(b).replace(b"\n", b" ")
    if kind == 2:  # invalid UTF-8 inside a string
        i = line.find(b'":"') + 3 if b'":"' in line else len(line) // 2
        return line[:i] + rng.choice([b"\xff", b"\xc3\x28", b"\xed\xa0\x80"]) + line[i:]
    if kind == 3:  # NUL bytes
        i = rng.randrange(len(line))
        return line[:i] + b"\x00" * rng.randint(1, 4) + line[i:]
    if kind == 4:  # wrong JSON types
        try:
            rec = json.loads(line)
        except ValueError:
            return line
        if isinstance(rec, dict) and rec:
            key = rng.choice(list(rec))
            rec[key] = rng.choice([3, None, [], {}, "x", 1.5e308, True, [[["deep"]]]])
        return json.dumps(rec).encode()
    if kind == 5:  # deep nesting, in place of a value
        depth = rng.choice([200, 1000, 5000, 100_000])
        deep = b"[" * depth + b"]" * depth
        i = line.find(b":") + 1
        return line[:i] + deep + b"," + line[i:] if i else deep
    if kind == 6:  # a huge line
        pad = b"x" * rng.choice([1 << 20, 3 << 20])
        return line[:-1] + b',"pad":"' + pad + b'"}'
    if kind == 7:  # BOM
        return b"\xef\xbb\xbf" + line
    if kind == 8:  # CRLF
        return line + b"\r"
    if kind == 9:  # binary garbage
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 300))).replace(
            b"\n", b""
        )
    if kind == 10:  # a scalar or an array instead of an object
        return rng.choice([b"42", b"[]", b'"text"', b"null", b"[{}]"])
    return line  # untouched: a valid record of a fuzz trace


def _renamed(line: bytes, names: dict[bytes, bytes]) -> bytes:
    for old, new in names.items():
        line = line.replace(old, new)
    return line


def _corpus(
    rng: random.Random, clean: list[bytes], dirty: list[bytes], n: int
) -> tuple[bytes, int]:
    """Clean lines in order, with ``n`` mutated lines between them (after the
    first: the format is detected from the first record, and a hostile first
    record would make the whole input another format)."""
    out: list[bytes] = []
    slots = sorted(rng.randrange(1, len(clean) + 1) for _ in range(n))
    j = 0
    for i, line in enumerate(clean):
        while j < n and slots[j] == i:
            out.append(_mutate(rng, rng.choice(dirty)))
            j += 1
        out.append(line)
    out.extend(_mutate(rng, rng.choice(dirty)) for _ in range(n - j))
    return b"\n".join(out) + b"\n", n


def _chunks(data: bytes) -> list[bytes]:
    return [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]


def _finals(verdicts: list[Any], keep: set[str]) -> dict[str, str]:
    return {
        v.id: f"{v.outcome}:{v.score}"
        for v in verdicts
        if v.final and v.trace_id in keep
    }


def _two_files(suite: Any, clean: bytes, dirty: bytes) -> tuple[list[Any], list[Any]]:
    """Grade two inputs in one engine, their chunks interleaved (as with
    several followed files): for formats with one session per file, where a
    broken line is charged to the file's session."""
    engine = Engine(suite)
    grading = Grading(engine)
    a, b = SourceDecoder("clean.jsonl"), SourceDecoder("dirty.jsonl")
    verdicts: list[Any] = []
    ca, cb = _chunks(clean), _chunks(dirty)
    for i in range(max(len(ca), len(cb))):
        for dec, chunks in ((a, ca), (b, cb)):
            if i < len(chunks):
                verdicts += grading.feed(dec, dec.feed(chunks[i]))
    for dec in (a, b):
        verdicts += grading.feed(dec, dec.close())
    verdicts += engine.finish()
    return verdicts, grading.errors


def _check(
    clean: list[bytes], dirty: list[bytes], keep: set[str], seed: int, *, split: bool
) -> int:
    suite = load_suite(POLICY)
    reference = grade_bytes(suite, b"\n".join(clean) + b"\n")
    want = _finals(reference.verdicts, keep)
    assert want, "the clean traces must have verdicts"
    rng = random.Random(seed)
    total = 0
    per_run = max(len(clean), 200)
    while total < FUZZ_LINES:
        n = min(per_run, FUZZ_LINES - total)
        if split:
            junk = b"\n".join(_mutate(rng, rng.choice(dirty)) for _ in range(n))
            verdicts, errors = _two_files(suite, b"\n".join(clean) + b"\n", junk)
        else:
            data, _ = _corpus(rng, clean, dirty, n)
            got = grade_bytes(suite, _chunks(data), source="fuzz.jsonl")
            verdicts, errors = got.verdicts, got.errors
        assert _finals(verdicts, keep) == want
        assert all(e.location.line is not None for e in errors)
        total += n
    return total


VOLUME: dict[str, int] = {}


@pytest.fixture(scope="module", autouse=True)
def _report() -> Any:
    started = time.perf_counter()
    yield
    took = time.perf_counter() - started
    print(f"\nfuzz: {VOLUME} mutated lines in {took:.1f}s")


def test_fuzzed_canonical_records_change_no_clean_verdict() -> None:
    base = [ln.encode() for ln in SESSION.read_text().splitlines() if ln.strip()]
    traces = sorted({json.loads(ln)["trace_id"] for ln in base})
    clean = [
        _renamed(ln, {t.encode(): f"clean{i}-{t}".encode() for t in traces})
        for i in range(3)
        for ln in base
    ]
    keep = {f"clean{i}-{t}" for i in range(3) for t in traces}
    dirty = [
        _renamed(ln, {t.encode(): b"fz-" + t.encode() for t in traces}) for ln in base
    ]
    VOLUME["canonical"] = _check(clean, dirty, keep, seed=1, split=False)


def test_fuzzed_claude_code_records_change_no_clean_verdict() -> None:
    lines = [ln for ln in CLAUDE.read_bytes().splitlines() if ln.strip()]
    session = json.loads(lines[0])["sessionId"].encode()
    # Fuzz records get their own session and message/tool ids, so a record
    # that survives mutation belongs to a fuzz trace only.
    dirty = [
        _renamed(
            ln,
            {
                session: b"fz-" + session,
                b'"msg_': b'"fz_msg_',
                b'"toolu_': b'"fz_toolu_',
            },
        )
        for ln in lines
    ]
    VOLUME["claude-code"] = _check(lines, dirty, {session.decode()}, seed=2, split=True)
