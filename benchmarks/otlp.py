"""OTLP receiver throughput against the file path, on the same events.

The recorded Claude Code export (tests/fixtures/otel-live) is copied into
``--sessions`` sessions per request and ``--requests`` requests. The same
requests are (a) POSTed to ``trajgrade grade --otlp`` over one keep-alive
connection, as OTLP/JSON and as protobuf — each answer comes once its body
is graded, so the clock stops at the last answer — and (b) written as
OTLP/JSON lines to a file graded by ``trajgrade grade FILE`` (its start-up,
measured on an empty file, subtracted). Figures are events/s; the ratio is
receiver / file. Asserts nothing.

Run: python benchmarks/otlp.py [--requests 200] [--sessions 20]
"""

from __future__ import annotations

import argparse
import copy
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
)

from trajgrade.telemetry.codec import decode

ROOT = Path(__file__).resolve().parents[1]
RECORDED = (
    ROOT / "tests" / "fixtures" / "otel-live" / "claude-code" / "v1-logs.http-json.json"
)
POLICY = """graders:
  - type: tool-calls
    config: {disallowed: [{name: "^Write$", args: {file_path: "secret"}}]}
  - type: token-budget
    config: {max: 1000000}
  - type: tool-call-count
    config: {max: 1000}
"""


def _requests(n: int, sessions: int) -> list[dict]:
    base = json.loads(RECORDED.read_text())
    records = base["resourceLogs"][0]["scopeLogs"][0]["logRecords"]
    out = []
    for r in range(n):
        body = copy.deepcopy(base)
        recs = []
        for s in range(sessions):
            for rec in records:
                rec = copy.deepcopy(rec)
                for kv in rec["attributes"]:
                    if kv["key"] == "session.id":
                        kv["value"] = {"stringValue": f"bench-{r}-{s}"}
                recs.append(rec)
        body["resourceLogs"][0]["scopeLogs"][0]["logRecords"] = recs
        out.append(body)
    return out


def _grade_cmd(policy: Path, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "trajgrade",
        "grade",
        "-c",
        str(policy),
        "--output",
        "jsonl",
        "--quiet",
        *args,
    ]


def _events(lines: list[bytes]) -> int:
    from trajgrade.formats import BUILTIN

    reader = BUILTIN["otel"].reader(source="bench", default_trace="-")
    events, errors, _ = reader.feed(b"".join(x + b"\n" for x in lines), 1)
    assert not errors
    return len(events)


def _file(policy: Path, lines: list[bytes], tmp: Path) -> float:
    empty = tmp / "empty.jsonl"
    empty.write_bytes(b"")
    data = tmp / "otlp.jsonl"
    data.write_bytes(b"".join(line + b"\n" for line in lines))
    t = time.perf_counter()
    subprocess.run(
        _grade_cmd(policy, str(empty)), stdout=subprocess.DEVNULL, check=False
    )
    startup = time.perf_counter() - t
    t = time.perf_counter()
    subprocess.run(
        _grade_cmd(policy, str(data)), stdout=subprocess.DEVNULL, check=False
    )
    return time.perf_counter() - t - startup


def _receiver(policy: Path, bodies: list[bytes], ctype: str) -> float:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trajgrade",
            "grade",
            "-c",
            str(policy),
            "--output",
            "jsonl",
            "--otlp",
            "127.0.0.1:0",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    port = 0
    for line in proc.stderr:
        if "otlp_listening" in line:
            port = int(json.loads(line)["url"].rsplit(":", 1)[1])
            break
    conn = http.client.HTTPConnection("127.0.0.1", port)
    t = time.perf_counter()
    for body in bodies:
        conn.request("POST", "/v1/logs", body=body, headers={"Content-Type": ctype})
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 200, resp.status
    took = time.perf_counter() - t
    conn.close()
    os.kill(proc.pid, signal.SIGTERM)
    proc.communicate(timeout=60)
    return took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--sessions", type=int, default=20)
    ns = ap.parse_args()
    reqs = _requests(ns.requests, ns.sessions)
    json_bodies = [json.dumps(r, separators=(",", ":")).encode() for r in reqs]
    proto_bodies = []
    lines = []
    for body in json_bodies:
        line = decode("/v1/logs", body, "application/json").line
        lines.append(line)
        msg = ExportLogsServiceRequest()
        json_format.Parse(json.dumps(_b64ids(json.loads(line))), msg)
        proto_bodies.append(msg.SerializeToString())
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        policy = tmp / "p.yaml"
        policy.write_text(POLICY)
        events = _events(lines)
        print(
            f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}"
        )
        print(f"{ns.requests} requests x {ns.sessions} sessions = {events} events")
        f = _file(policy, lines, tmp)
        print(f"file (OTLP/JSON lines)            {events / f:10.0f} events/s")
        for name, bodies, ctype in (
            ("receiver, OTLP/JSON", json_bodies, "application/json"),
            ("receiver, protobuf", proto_bodies, "application/x-protobuf"),
        ):
            r = _receiver(policy, bodies, ctype)
            print(
                f"{name:<33} {events / r:10.0f} events/s   receiver/file = {f / r:.2f}"
            )


def _b64ids(tree: object) -> object:
    """The line's hex ids back to protobuf JSON's base64 (for json_format)."""
    import base64

    if isinstance(tree, dict):
        return {
            k: base64.b64encode(bytes.fromhex(v)).decode()
            if k in ("traceId", "spanId") and isinstance(v, str)
            else _b64ids(v)
            for k, v in tree.items()
        }
    if isinstance(tree, list):
        return [_b64ids(x) for x in tree]
    return tree


if __name__ == "__main__":
    main()
