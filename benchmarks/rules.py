"""What each stateful guard rule costs per event.

Loads the ``run.py`` corpus (``medium`` by default) once, gives its usage
events a model (so ``cost-budget`` prices tokens through genai-prices, its
most expensive path), and drives compiled graders by their contract, as the
engine does: ``step`` (the grader's handler) for every event it wants, then
``judge`` for every ``tool_call``. For N rounds, alternating, it times

* the benchmark's own three ``tool-calls`` graders (``bench.yaml``), the
  baseline;
* each rule of :data:`RULES` alone,

and prints the median nanoseconds per corpus event of each (net of the
driver loop itself, timed with no grader), and each rule's
cost as a ratio of the baseline's. Target: every rule costs at most as much
per event as the three ``tool-calls`` graders together (ratio ≤ 1.0), so a
policy with a guard rule stays within the throughput figures of ``run.py``.

Usage: ``python benchmarks/rules.py [--size medium] [--rounds 5]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import CONFIG, ensure_corpus, find_shared
from trajgrade import compile_suite, decode_config, load_suite
from trajgrade.events import ToolCall, Usage
from trajgrade.pipeline.decoder import SourceDecoder

TARGET_RATIO = 1.0
EMPTY = "(driver loop, no grader)"

#: One policy per rule, over the corpus' tool vocabulary.
RULES: dict[str, str] = {
    "cost-budget (genai-prices)": "{max_usd: 1000000, warn_at: 0.5}",
    "cost-budget (prices table)": "{max_usd: 1000000, prices: {bench-model: {input_mtok: 3, output_mtok: 15}}}",
    "rate-limit": "{match: '^bash$', max: 5, window: 60s}",
    "loop": "{repeats: 3, within: 30, ping_pong: 6}",
    "flow forbid": "{after: {name: '^view$', path: 'env'}, forbid: '^web_fetch$'}",
    "flow require": "{after: '^edit$', require: {name: '^bash$', command: pytest}, within: 5}",
    "flow bind": "{after: '^view$', bind: path, forbid: '^edit$', unless_bound: path}",
}


def _kind(label: str) -> str:
    return label.split(" ")[0]


def load_events(corpus: Path, model: str) -> list[Any]:
    dec = SourceDecoder("events.jsonl")
    data = (corpus / "events.jsonl").read_bytes()
    batch, end = dec.feed(data), dec.close()
    return [
        msgspec.structs.replace(e, model=model) if type(e) is Usage else e
        for e in [*batch.events, *end.events]
    ]


def drive(graders: list[Any], events: list[Any]) -> float:
    """Seconds to step and judge ``events`` through ``graders`` (per trace)."""
    states: dict[str, list[Any]] = {}
    routes = [
        (g, getattr(g, "handlers", {}), getattr(g, "judge", None)) for g in graders
    ]
    t0 = time.perf_counter()
    for e in events:
        st = states.get(e.trace_id)
        if st is None:
            st = states[e.trace_id] = [g.start() for g in graders]
        kind = type(e)
        for (g, handlers, judge), s in zip(routes, st, strict=True):
            if kind in g.event_types:
                handlers.get(kind, g.step)(s, e)
            if judge is not None and kind is ToolCall:
                judge(s, e)
    for st in states.values():
        for g, s in zip(graders, st, strict=True):
            g.finish(s)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size", default="medium", choices=("small", "medium", "large"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--shared", default=None, help="path of ../shared")
    args = ap.parse_args()
    corpus = ensure_corpus(find_shared(args.shared), args.size)
    variants: dict[str, tuple[list[Any], list[Any]]] = {}
    sonnet = load_events(corpus, "claude-sonnet-4-5")
    own = load_events(corpus, "bench-model")
    variants[EMPTY] = ([], sonnet)
    variants["baseline: bench.yaml (3 tool-calls)"] = (
        list(load_suite(CONFIG).graders),
        sonnet,
    )
    for label, config in RULES.items():
        text = f"graders:\n  - type: {_kind(label)}\n    config: {config}\n"
        graders = list(compile_suite(decode_config(text)).graders)
        variants[label] = (graders, own if "table" in label else sonnet)
    n = len(sonnet)
    for graders, events in variants.values():
        drive(graders, events[:2000])  # warm up: imports, name caches
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(args.rounds):
        for label, (graders, events) in variants.items():
            times[label].append(drive(graders, events))
    empty = statistics.median(times[EMPTY]) / n
    base_label = list(variants)[1]
    base = statistics.median(times[base_label]) / n - empty
    print(
        f"corpus {args.size}: {n} events, {args.rounds} rounds; median ns per corpus "
        f"event, net of the driver loop ({empty * 1e9:.0f} ns/event)"
    )
    ok = True
    for label in list(variants)[1:]:
        per = statistics.median(times[label]) / n - empty
        if label == base_label:
            print(f"  {label:40} {per * 1e9:8.0f} ns/event")
            continue
        ratio = per / base
        ok = ok and ratio <= TARGET_RATIO
        print(f"  {label:40} {per * 1e9:8.0f} ns/event  {ratio:5.2f}x baseline")
    print(
        f"target: every rule <= {TARGET_RATIO:.1f}x the baseline per event: {'met' if ok else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
