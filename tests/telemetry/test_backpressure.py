"""Back-pressure: when the queue between the HTTP threads and the grader is
full, the receiver answers 503 with Retry-After (retryable per OTLP), and
a stopping run answers 503 too, never a hang."""

from __future__ import annotations

import json
import threading
from concurrent.futures import Future
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel
import anyio.to_thread
import structlog
from tests._http import post, raw_request

from trajgrade.telemetry import OtlpOptions
from trajgrade.telemetry.codec import Decoded
from trajgrade.telemetry.receiver import OtlpReceiver

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from anyio.streams.memory import MemoryObjectReceiveStream

_Item = tuple[Decoded, Future[tuple[int, str]]]

BODY = json.dumps(
    {
        "resourceLogs": [
            {
                "scopeLogs": [
                    {
                        "logRecords": [
                            {
                                "timeUnixNano": "1",
                                "body": {"stringValue": "claude_code.user_prompt"},
                            }
                        ]
                    }
                ]
            }
        ]
    }
).encode()


def _post(port: int) -> tuple[int, dict[str, str], bytes]:
    headers = {"Content-Type": "application/json", "Content-Length": str(len(BODY))}
    status, h, body, _ = raw_request(port, post("/v1/logs", BODY, headers))
    return status, h, body


@asynccontextmanager
async def _serving(
    queue: int,
) -> AsyncIterator[tuple[OtlpReceiver, MemoryObjectReceiveStream[_Item]]]:
    """A receiver serving HTTP on a thread, whose grader side is the test:
    the queue's receiving end is handed over and nothing else takes from it."""
    receiver = OtlpReceiver(
        OtlpOptions(port=0, queue_size=queue), structlog.get_logger()
    )
    send, recv = anyio.create_memory_object_stream[_Item](queue)
    receiver._send, receiver._token = send, anyio.lowlevel.current_token()
    thread = threading.Thread(
        target=receiver.serve_forever, kwargs={"poll_interval": 0.05}
    )
    thread.start()
    try:
        yield receiver, recv
    finally:
        await anyio.to_thread.run_sync(receiver.shutdown)
        receiver.server_close()
        thread.join()
        send.close()
        recv.close()


def test_full_queue_is_503_with_retry_after() -> None:
    async def main() -> None:
        async with _serving(queue=1) as (receiver, _):
            # The grader side, held still: one request fills the queue.
            assert receiver._send is not None
            receiver._send.send_nowait((Decoded(b"{}", 1), Future()))
            port = receiver.server_address[1]
            status, headers, body = await anyio.to_thread.run_sync(_post, port)
            assert status == 503
            assert headers["retry-after"] == "1"
            assert "queue is full" in json.loads(body)["message"]
            receiver._send = None  # the run is stopping
            status, _, body = await anyio.to_thread.run_sync(_post, port)
            assert status == 503
            assert "shutting down" in json.loads(body)["message"]

    anyio.run(main)


def test_queued_bytes_are_bounded_too() -> None:
    """The queue counts requests; the bytes of decoded lines waiting for
    the grader are bounded as well (each line can be tens of MiB): past
    the bound, 503 with Retry-After, though the queue has room."""

    async def main() -> None:
        async with _serving(queue=64) as (receiver, recv):
            receiver.max_queued_bytes = 100  # less than two lines of BODY
            port = receiver.server_address[1]
            # The first request is always let in (taken, not graded yet:
            # its bytes still count) ...
            async with anyio.create_task_group() as tg:
                tg.start_soon(anyio.to_thread.run_sync, _post, port)
                _, done = await recv.receive()
                # ... the second would pass the byte bound.
                status, headers, body = await anyio.to_thread.run_sync(_post, port)
                assert status == 503
                assert headers["retry-after"] == "1"
                assert "queue is full" in json.loads(body)["message"]
                done.set_result((0, ""))

    anyio.run(main)


def test_a_request_not_graded_in_time_is_503_not_200() -> None:
    """A 200 says the events reached the engine: a request still queued when
    the read timeout runs out is answered 503 (retryable; the retry of a
    request graded meanwhile is recognised and not graded twice), because
    a run stopped before grading it would otherwise lose what was 200'd."""

    async def main() -> None:
        async with _serving(queue=4) as (receiver, _):
            receiver.grading_wait = 0.3
            port = receiver.server_address[1]
            status, headers, _ = await anyio.to_thread.run_sync(_post, port)
            assert status == 503
            assert headers["retry-after"] == "1"

    anyio.run(main)
