"""A real ``trajgrade grade --otlp`` process, its verdicts read as they come,
and a recording OTLP sink (a real HTTP server) for ``--export-otlp``."""

from __future__ import annotations

import gzip
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
)

if TYPE_CHECKING:
    from pathlib import Path


class Grader:
    """``trajgrade grade -c POLICY --otlp 127.0.0.1:0 ARGS…``."""

    def __init__(self, policy: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "trajgrade",
                "grade",
                "-c",
                str(policy),
                "--otlp",
                "127.0.0.1:0",
                "--output",
                "jsonl",
                *args,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.verdicts: queue.Queue[dict[str, Any]] = queue.Queue()
        self.log: list[dict[str, Any]] = []
        self.stderr: list[bytes] = []
        ready: queue.Queue[int] = queue.Queue()
        threading.Thread(target=self._out, daemon=True).start()
        threading.Thread(target=self._err, args=(ready,), daemon=True).start()
        try:
            self.port = ready.get(timeout=30)
        except queue.Empty:
            self.stop()
            raise AssertionError(b"".join(self.stderr).decode()) from None

    def _out(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.verdicts.put(json.loads(line))

    def _err(self, ready: queue.Queue[int]) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            self.log.append(rec)
            if rec.get("event") == "otlp_listening":
                ready.put(int(rec["url"].rsplit(":", 1)[1]))

    def wait_for(self, count: int, timeout: float = 60) -> list[dict[str, Any]]:
        """The first ``count`` verdicts, while the process keeps running."""
        got: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while len(got) < count:
            try:
                got.append(
                    self.verdicts.get(timeout=max(0.01, deadline - time.monotonic()))
                )
            except queue.Empty:
                raise AssertionError(f"only {got} after {timeout}s") from None
        return got

    def stop(self) -> int:
        """SIGINT, as a user would; the exit status."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGINT)
        code = self.proc.wait(timeout=30)
        time.sleep(0.1)  # let the reader threads drain
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        return code

    def rest(self) -> list[dict[str, Any]]:
        out = []
        while not self.verdicts.empty():
            out.append(self.verdicts.get())
        return out


class OtlpSink:
    """A recording OTLP/HTTP logs endpoint: decodes what it is sent."""

    def __init__(
        self, fail_first: int = 0, retry_after: str = "0", answer: bytes = b""
    ) -> None:
        self.requests: list[ExportLogsServiceRequest] = []
        self.statuses: list[int] = []
        self.fail_first = fail_first
        #: Sent with each 503; and the body of each 200 (an Export*Response).
        self.retry_after = retry_after
        self.answer = answer
        sink = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if sink.fail_first > 0:
                    sink.fail_first -= 1
                    status = 503
                else:
                    msg = ExportLogsServiceRequest()
                    msg.ParseFromString(body)
                    sink.requests.append(msg)
                    status = 200
                sink.statuses.append(status)
                self.send_response(status)
                answer = sink.answer if status == 200 else b""
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                if status == 503:
                    self.send_header("Retry-After", sink.retry_after)
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def records(self) -> list[dict[str, Any]]:
        """Every received log record: event name, attributes, trace id, resource."""
        out = []
        for req in self.requests:
            for rl in req.resource_logs:
                res = {kv.key: kv.value.string_value for kv in rl.resource.attributes}
                for sl in rl.scope_logs:
                    for r in sl.log_records:
                        attrs: dict[str, Any] = {}
                        for kv in r.attributes:
                            which = kv.value.WhichOneof("value")
                            attrs[kv.key] = getattr(kv.value, which) if which else None
                        out.append(
                            {
                                "event_name": r.event_name,
                                "attributes": attrs,
                                "trace_id": r.trace_id.hex(),
                                "resource": res,
                            }
                        )
        return out

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
