"""Fuzz every adapter: mutated real records, through the user's path.

Each format's recorded file (tests/formats/test_every_adapter.py) is the
seed. A hostile or sloppy producer's version of it is drawn: values of the
wrong JSON type at any field (null, numbers, 1e400, 2**70, booleans, lists,
objects, long strings, lone surrogate escapes, nesting just under and over
the 128-level bound), keys dropped, duplicated or renamed, bytes cut, flipped
or replaced (invalid UTF-8, NUL, a BOM, CRLF), records repeated, moved ahead
of the records they answer, dropped, lines of another format appended, the
input cut anywhere. Whatever the mutations do:

* grading never raises, and no record reaches a reader's catch-all (a
  "could not be read" error is a reader bug hostile input found);
* every rejection is located (its file and line);
* chunking changes nothing: the same bytes in small random pieces give the
  same final verdicts and the same errors (line, field, trace);
* clean traces are unaffected: the clean file graded next to the mutated
  one (its traces renamed), in one engine with their chunks interleaved,
  gets exactly the verdicts it gets alone.

CI runs ``FUZZ_EXAMPLES`` examples per format (a few seconds in all); set
``TRAJGRADE_FUZZ_ADAPTER_EXAMPLES`` for a longer run (e.g. 200, with
``--timeout 0``).
"""

from __future__ import annotations

import json
import os
import random
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests._support import suite
from tests.formats._decode import DOCUMENTS
from tests.formats.test_every_adapter import _data

from trajgrade import Engine
from trajgrade.formats import BUILTIN
from trajgrade.pipeline.decoder import SourceDecoder
from trajgrade.pipeline.grading import Grading
from trajgrade.pipeline.whole import grade_bytes

#: Examples per format in CI.
FUZZ_EXAMPLES = int(os.environ.get("TRAJGRADE_FUZZ_ADAPTER_EXAMPLES", "12"))
#: Graders that read every kind of event, and decide early (disallowed).
POLICY = suite(
    """
    graders:
      - type: tool-calls
        config:
          disallowed: [{name: "^(rm|delete_file)$"}]
      - type: tool-call-count
        config: {max: 30}
      - type: token-budget
        config: {max: 100000}
      - type: turn-count
        config: {max: 15}
      - type: wall-time
        config: {max: "1h"}
    """
)
#: How the mutated copy's traces get names of their own (the clean file's
#: named traces keep theirs): ids written as numbers get a digit; the
#: canonical trace ids a prefix; longer string ids are reversed below.
RENAMES: dict[str, list[tuple[bytes, bytes]]] = {
    "letta": [(rb'"sample": \{"id": (\d+)', rb'"sample": {"id": 9\1')],
    "openai-chat-json": [(rb'"task_id": (\d+)', rb'"task_id": 9\1')],
    "trajgrade": [(rb'"trace_id":"', rb'"trace_id":"fz-')],
}

_DEEP = [b"[" * n + b"]" * n for n in (127, 129, 5000)]
VALUES: list[bytes] = [
    b"null", b"0", b"-1", b"1.5", b"true", b"false", b'""', b'"x"', b"[]", b"{}",
    b'[1,"a"]', b'{"a":1}', b"1e400", b"-1e400", str(2**70).encode(),
    str(-(2**64)).encode(), b'"\\ud800"', b'"a\\udfffb"', b'"' + b"y" * 70_000 + b'"',
    b'{"type":"tool_call"}', b"-0", b"1E-400", *_DEEP,
]  # fmt: skip


def _paths(
    obj: Any, at: tuple[Any, ...] = (), out: list[Any] | None = None
) -> list[Any]:
    """Paths of every value of ``obj`` (the first 40 items of each list)."""
    out = [] if out is None else out
    if len(at) > 14:
        return out
    items = (
        obj.items()
        if isinstance(obj, dict)
        else enumerate(obj[:40])
        if isinstance(obj, list)
        else ()
    )
    for k, v in items:
        out.append((*at, k))
        _paths(v, (*at, k), out)
    return out


def _structural(rng: random.Random, doc: Any) -> bytes | None:
    """``doc`` with one to three fields made hostile, as JSON text."""
    raw: dict[str, bytes] = {}
    for _ in range(rng.randint(1, 3)):
        paths = _paths(doc)
        if not paths:
            break
        *head, key = rng.choice(paths)
        parent = doc
        for k in head:
            parent = parent[k]
        token = f"__raw{len(raw)}__"
        op = rng.randrange(6)
        if op == 0 and isinstance(parent, dict):
            del parent[key]
        elif op == 1 and isinstance(parent, dict):
            # A duplicate key, before or after the real one.
            raw[f'"{token}k"'] = json.dumps(key).encode()
            raw[f'"{token}"'] = rng.choice(VALUES)
            items = list(parent.items())
            items.insert(rng.choice([0, len(items)]), (f"{token}k", token))
            parent.clear()
            parent.update(items)
        elif op == 2 and isinstance(parent[key], str):
            parent[key] = rng.choice([7, None, [parent[key]], {"id": 1}, True])
        elif op == 3:
            parent[key] = [parent[key]] if rng.random() < 0.5 else {"v": parent[key]}
        else:
            raw[f'"{token}"'] = rng.choice(VALUES)
            parent[key] = token
    text = json.dumps(doc, ensure_ascii=False, indent=rng.choice([None, 1])).encode(
        "utf-8", "surrogatepass"
    )
    for token, value in raw.items():
        text = text.replace(token.encode(), value)
    return text


def _bytes(rng: random.Random, line: bytes) -> bytes:
    """``line`` broken at the byte level (no newline inside)."""
    if not line:
        return rng.choice([b"\x00", b"\xef\xbb\xbf", b"\r", b" "])
    i = rng.randrange(len(line))
    kind = rng.randrange(8)
    if kind == 0:
        return line[:i]
    if kind == 1:
        b = bytearray(line)
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return bytes(b).replace(b"\n", b" ")
    bad = [
        b"\xff",
        b"\xc3\x28",
        b"\xed\xa0\x80",
        b"\x00",
        b"\xef\xbb\xbf",
        b"\\ud800",
        b"\r",
    ]
    if kind < 7:
        return line[:i] + bad[kind - 2] + line[i:]
    return line + b"\r"


def _mutated(rng: random.Random, fmt: str, data: bytes, other: bytes) -> bytes:
    """A hostile version of ``data`` (a file of format ``fmt``)."""
    if fmt in DOCUMENTS:
        out = _structural(rng, json.loads(data)) or data
        lines = out.split(b"\n")
        for _ in range(rng.choice([0, 0, 1, 2])):
            j = rng.randrange(len(lines))
            lines[j] = _bytes(rng, lines[j])
        out = b"\n".join(lines)
    else:
        lines = [ln for ln in data.split(b"\n") if ln.strip()]
        for _ in range(rng.randint(1, 4)):
            j = rng.randrange(len(lines))
            op = rng.randrange(7)
            if op <= 2:
                try:
                    lines[j] = _structural(rng, json.loads(lines[j])) or lines[j]
                except (ValueError, RecursionError):  # (not JSON, or too deep)
                    lines[j] = _bytes(rng, lines[j])
            elif op == 3:
                lines[j] = _bytes(rng, lines[j])
            elif op == 4:  # a record again (a call id reused), or ahead of its call
                lines.insert(rng.randrange(len(lines) + 1), lines[j])
            elif op == 5:
                lines.insert(rng.randrange(j + 1), lines.pop(j))
            else:
                lines.insert(j, rng.choice([b"", b"  ", b"\r", b"\xef\xbb\xbf"]))
        out = b"\n".join(lines) + b"\n"
    if rng.random() < 0.15:  # the file goes on in another format
        out += other
    if rng.random() < 0.15:  # cut anywhere
        out = out[: rng.randrange(len(out) + 1)]
    return out


def _renamed(fmt: str, data: bytes, traces: set[str]) -> bytes:
    for pattern, repl in RENAMES.get(fmt, []):
        data = re.sub(pattern, repl, data)
    for t in traces:
        if len(t) >= 8:
            data = data.replace(f'"{t}"'.encode(), f'"{t[::-1]}"'.encode())
    return data


def _outcomes(verdicts: list[Any], keep: set[str] | None = None) -> dict[str, str]:
    return {
        v.id: f"{v.trace_id}:{v.outcome}:{v.score}"
        for v in verdicts
        if v.final and (keep is None or v.trace_id in keep)
    }


def _cuts(rng: random.Random, data: bytes) -> list[bytes]:
    cuts = sorted(rng.randrange(len(data) + 1) for _ in range(rng.randint(1, 40)))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


def _side_by_side(fmt: str, clean: bytes, dirty: list[bytes]) -> list[Any]:
    """Verdicts of the clean file graded next to the mutated one."""
    engine = Engine(POLICY)
    grading = Grading(engine)
    a = SourceDecoder("clean.log", fmt=fmt)
    b = SourceDecoder("dirty.log", fmt=fmt)
    verdicts: list[Any] = []
    ca = [clean[i : i + 4096] for i in range(0, len(clean), 4096)]
    for i in range(max(len(ca), len(dirty))):
        for dec, chunks in ((a, ca), (b, dirty)):
            if i < len(chunks):
                verdicts += grading.feed(dec, dec.feed(chunks[i]))
    for dec in (a, b):
        verdicts += grading.feed(dec, dec.close())
    return verdicts + engine.finish()


def _where(fmt: str, errors: list[Any]) -> list[tuple[Any, ...]]:
    """Where each error is: a document's items are placed at the last line
    of the bytes that closed them (the parser gives no positions), so there
    the line depends on the pieces; the rest must not."""
    return sorted(
        (
            0 if fmt in DOCUMENTS else e.location.line,
            e.location.field or "",
            e.trace_id or "",
        )
        for e in errors
    )


@pytest.mark.parametrize("fmt", sorted(BUILTIN))
@settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(seed=st.integers(0, 2**32 - 1))
def test_mutated_records_are_rejected_located_and_change_no_clean_trace(
    fmt: str, seed: int
) -> None:
    rng = random.Random(seed)
    clean = _data(fmt)
    alone = grade_bytes(POLICY, clean, source="clean.log", fmt=fmt)
    keep = {v.trace_id for v in alone.verdicts}
    other = _data(rng.choice(sorted(set(BUILTIN) - {fmt})))
    dirty = _mutated(rng, fmt, _renamed(fmt, clean, keep), other)

    whole = grade_bytes(POLICY, dirty, source="dirty.log", fmt=fmt)
    for e in whole.errors:
        assert e.location.file == "dirty.log"
        assert e.location.line is not None, e
        assert "could not be read" not in e.message, e
    # (A mutation may give a record a clean trace's name, e.g. an id of 0:
    # those traces are the fuzz's too; the rename keeps the rest apart.)
    named = {v.trace_id for v in whole.verdicts} | {e.trace_id for e in whole.errors}
    keep -= named

    pieces = _cuts(rng, dirty)
    chunked = grade_bytes(POLICY, pieces, source="dirty.log", fmt=fmt)
    assert _outcomes(chunked.verdicts) == _outcomes(whole.verdicts)
    assert _where(fmt, chunked.errors) == _where(fmt, whole.errors)

    both = _side_by_side(fmt, clean, pieces)
    assert _outcomes(both, keep) == _outcomes(alone.verdicts, keep)
