#!/usr/bin/env python3
"""The six shared checks as one hand-written loop: what the targets ask of Python.

This is not trajgrade. It is the fastest special-purpose program we know how
to write in CPython for exactly ``six.yaml``'s job, so that ``run.py`` can
show in the same run how far a general engine is from it, and how far the
hand-written loop itself is from the targets:

* read the file in 1 MiB chunks and cut them at the last newline;
* decode each chunk with one ``decode_lines`` call into one slim event
  class (its type, trace id, and a call's name and arguments; everything
  else, such as a tool result's payload, skipped unbuilt);
* dispatch on the event's type, keep the six checks' state per trace in a
  plain list, and at ``trace_end`` write one final verdict line per check
  (the same records and grader names as ``six.yaml``, so ``run.py`` checks
  every trace's verdicts against the ``stream_ref`` floor's).

With ``--bounded`` each chunk is also scanned by ``trajgrade._util.depth.scan``
first: the nesting bound (lines nested deeper than 128 levels are refused
before anything recurses into them) and the line count for error locations,
which trajgrade owes its users and the floors do not do.

With ``--decode-only`` it grades nothing and writes nothing: the file read,
(bounded,) and decoded into the slim event class. That is what any Python
grader of this corpus pays before its first check; ``run.py`` subtracts it
from what each speed target allows.

Left out, and owed by trajgrade: guard decisions, verdict ids, scores and
evidence, sealed (early) verdicts, integrity checks, input errors with their
place, dataset rows, checkpoints, any other config.

Usage: ``python benchmarks/hand_loop.py [--bounded] [--decode-only] EVENTS.jsonl > verdicts.jsonl``
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

import msgspec

_SHARED_BENCH = Path(__file__).resolve().parent / "shared" / "bench"


class _Event(msgspec.Struct, gc=False):
    """Any canonical event, reduced to what the six checks read (msgspec
    skips every other field without building it)."""

    type: str
    trace_id: str = ""
    name: str = ""
    args: dict[str, Any] = {}


class _Verdict(msgspec.Struct):
    trace_id: str
    grader: str
    outcome: str
    final: bool = True


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("events", type=Path)
    p.add_argument("--bounded", action="store_true", help="scan chunks for depth")
    p.add_argument(
        "--decode-only", action="store_true", help="read and decode, grade nothing"
    )
    p.add_argument("--shared", type=Path, default=_SHARED_BENCH.parent)
    args = p.parse_args()
    sys.path.insert(0, str(args.shared / "bench"))
    from common import (  # the checks' constants, as stream_ref uses them
        ANY_ORDER,
        ARG_FIELD,
        ARG_REGEX,
        ARG_TOOL,
        CHECK_ORDER,
        FORBIDDEN,
        GOLDEN,
        IN_ORDER,
    )

    scan = None
    if args.bounded:
        from trajgrade._util.depth import scan

    # six.yaml's graders: the checks, and exact's length as a grader of its own.
    graders = (*CHECK_ORDER, "exact_length")
    decode_lines = msgspec.json.Decoder(_Event).decode_lines
    encode = msgspec.json.Encoder().encode
    rx = re.compile(ARG_REGEX)
    any_order = frozenset(ANY_ORDER)
    n_order, n_golden = len(IN_ORDER), len(GOLDEN)
    # Per trace: [order cursor, names seen of ANY_ORDER, forbidden called,
    # some ARG_TOOL call matched, first ARG_TOOL call matched (None: none yet),
    # golden position, golden broken, calls].
    states: dict[str, list[Any]] = {}
    out = sys.stdout.buffer
    rest = b""
    with args.events.open("rb") as f:
        while True:
            chunk = f.read(1 << 20)
            buf = rest + chunk
            cut = buf.rfind(b"\n") + 1 if chunk else len(buf)
            body, rest = buf[:cut], buf[cut:]
            if scan is not None and scan(body).deep:
                raise SystemExit("a line nests too deep (not expected in the corpus)")
            lines: list[bytes] = []
            if args.decode_only:
                decode_lines(body)
                if not chunk:
                    break
                continue
            for ev in decode_lines(body):
                kind = ev.type
                if kind == "tool_call":
                    s = states.get(ev.trace_id)
                    if s is None:
                        s = states[ev.trace_id] = [
                            0,
                            set(),
                            False,
                            False,
                            None,
                            0,
                            False,
                            0,
                        ]
                    name, call_args = ev.name, ev.args
                    s[7] += 1
                    if s[0] < n_order and name == IN_ORDER[s[0]]:
                        s[0] += 1
                    if name in any_order:
                        s[1].add(name)
                    if name == FORBIDDEN:
                        s[2] = True
                    if name == ARG_TOOL:
                        value = call_args.get(ARG_FIELD)
                        hit = isinstance(value, str) and rx.search(value) is not None
                        s[3] = s[3] or hit
                        if s[4] is None:
                            s[4] = hit
                    if not s[6]:
                        if s[5] < n_golden and GOLDEN[s[5]] == (name, call_args):
                            s[5] += 1
                        else:
                            s[6] = True
                elif kind == "trace_end":
                    tid = ev.trace_id
                    s = states.pop(tid, None) or [
                        0,
                        (),
                        False,
                        False,
                        None,
                        0,
                        False,
                        0,
                    ]
                    passed = (
                        s[0] == n_order,
                        len(s[1]) == len(any_order),
                        not s[2],
                        s[3],
                        bool(s[4]),
                        not s[6] and s[5] == n_golden,
                        s[7] <= n_golden,
                    )
                    for grader, ok in zip(graders, passed, strict=True):
                        lines.append(
                            encode(_Verdict(tid, grader, "pass" if ok else "fail"))
                        )
            if lines:
                lines.append(b"")
                out.write(b"\n".join(lines))
            if not chunk:
                break
    return 0


if __name__ == "__main__":
    sys.exit(main())
