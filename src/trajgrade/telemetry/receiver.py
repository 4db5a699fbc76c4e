"""``trajgrade grade --otlp HOST:PORT``: an OTLP/HTTP receiver feeding the run.

``POST /v1/logs`` and ``/v1/traces`` (``/v1/metrics`` is accepted and not
graded), with ``application/x-protobuf`` or ``application/json`` bodies,
gzip or not, sized or chunked, on the hardened edge of
:mod:`trajgrade.runtime.http_edge`. Each body is decoded in the handler's thread by
:mod:`trajgrade.telemetry.codec` into one OTLP/JSON line and handed to the
event loop, which grades it like a line of a followed file (the ``otel``
format; one input, ``otlp:HOST:PORT``, whose "line" numbers count requests):
live verdicts, ``--state``, ``--on-fail`` and metrics work as for files.

Answers follow the OTLP/HTTP specification:

* 200 with an ``Export*ServiceResponse`` in the request's encoding, whose
  ``partial_success`` counts the records rejected as input errors (they are
  also logged, located, as for files): the client must not retry them;
* 400 (a ``google.rpc.Status``) for a body that is not the message: not
  retryable; 413 for one with more values than the receiver expands
  (``max_values``: each costs ~450 bytes once decoded, from 2 of protobuf);
* 503 with ``Retry-After`` when the queue between the HTTP threads and the
  grader is full (in requests or in decoded bytes), the body was not graded
  in time, or the run is stopping: retryable;
* the edge's own 400/401/408/413/415 for framing, auth and size, each with
  a ``google.rpc.Status`` body in the request's encoding.

The handler answers once the body is graded (a 503 after ``read_timeout``
seconds, at least 5), so a 200 means the events reached the engine; a
retry of a request already graded (the last 4,096 are remembered) is
answered 200 and not graded again. Bodies are decoded one at a time: the
decode holds the GIL anyway, and concurrent expansions would add up.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from trajgrade.errors import SourceError
from trajgrade.runtime.http_edge import (
    EdgeHandler,
    EdgeServer,
    HttpError,
    Limits,
    bind_error,
)
from trajgrade.runtime.journal import Journal, recover
from trajgrade.telemetry.codec import (
    SIGNALS,
    BadPayload,
    Decoded,
    TooLarge,
    decode,
    response,
    status,
)

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectSendStream

    from trajgrade.telemetry import OtlpOptions

__all__ = ("OtlpReceiver", "bind")

_TYPES: Final = ("application/x-protobuf", "application/json")
#: A reply to an item the loop will not grade (the run is stopping).
_STOPPING: Final = (-1, "trajgrade is shutting down; retry")
_FULL: Final = (-2, "trajgrade's queue is full; retry later")
#: Requests remembered to recognise a client's retry of one (see receive).
_RECENT: Final = 4096
_Item = tuple[Decoded, "Future[tuple[int, str]]"]
#: The google.rpc code of an edge refusal (else INVALID_ARGUMENT, 3).
_RPC_CODES: Final = {401: 16, 404: 12, 408: 4, 413: 8}


class OtlpReceiver(EdgeServer):
    """The listening receiver; :meth:`receive` runs it inside a run."""

    def __init__(self, options: OtlpOptions, log: Any) -> None:
        limits = Limits(
            max_body=options.max_body,
            timeout=options.read_timeout,
            body_timeout=options.read_timeout,
            token=options.token,
        )
        super().__init__(
            (options.host, options.port),
            _Handler,
            limits=limits,
            allow_remote=options.allow_remote,
            what="trajgrade grade --otlp",
        )
        self.options = options
        self.log = log
        #: Values one request may expand to (~450 bytes each once decoded):
        #: one per 32 bytes of the body limit, at least 65,536.
        self.max_values = max(options.max_body // 32, 65_536)
        self.decoding = threading.Lock()
        #: How long a handler waits for its body to be graded (a short
        #: socket timeout must not turn a busy moment into 503s).
        self.grading_wait = max(options.read_timeout, 5.0)
        #: Bytes of decoded lines waiting for the grader (the queue counts
        #: requests, each up to tens of MiB); past it, 503 as for a full queue.
        self.max_queued_bytes = max(4 * options.max_body, 64 * 1024 * 1024)
        self._queued_bytes = 0
        self._queued_lock = threading.Lock()
        self.report = lambda event, fields: log.warning(event, **fields)
        self._send: MemoryObjectSendStream[_Item] | None = None
        self._token: Any = None

    @property
    def name(self) -> str:
        return f"otlp:{self.options.host}:{self.server_address[1]}"

    # ------------------------------------------------------------ HTTP threads
    def submit(self, decoded: Decoded) -> tuple[int, str]:
        """Hand one decoded body to the loop; (rejected, message) once graded."""
        send = self._send
        if send is None:
            return _STOPPING
        done: Future[tuple[int, str]] = Future()
        size = len(decoded.line)
        with self._queued_lock:
            # (One request is always let in: a big one is never refused for ever.)
            if self._queued_bytes and self._queued_bytes + size > self.max_queued_bytes:
                return _FULL
            self._queued_bytes += size
        try:
            anyio.from_thread.run_sync(
                send.send_nowait, (decoded, done), token=self._token
            )
        except anyio.WouldBlock:
            self._dequeued(size)
            return _FULL
        except (RuntimeError, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._dequeued(size)
            return _STOPPING
        try:
            return done.result(timeout=self.grading_wait)
        except FutureTimeout:
            # Not a 200: a run stopped before grading it would lose what the
            # client was told arrived. Graded later or not, the retry is
            # safe: receive() recognises a request it graded already.
            return (-3, "trajgrade is still grading earlier requests; retry later")

    def _dequeued(self, size: int) -> None:
        with self._queued_lock:
            self._queued_bytes -= size

    # ------------------------------------------------------------ event loop
    async def receive(self, run: Any) -> None:
        """Serve and grade until cancelled (``run`` is the runner's state)."""
        send, recv = anyio.create_memory_object_stream[_Item](self.options.queue_size)
        self._send, self._token = send, anyio.lowlevel.current_token()
        thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True
        )
        thread.start()
        url = f"http://{self.options.host}:{self.server_address[1]}"
        self.log.info("otlp_listening", url=url, signals=sorted(SIGNALS))
        name = self.name
        tracked = run.tracked(name, name, name)
        run.inputs[name] = tracked
        longest = run.options.max_line_bytes
        # A client retries what it got no answer for (its timeout is often
        # shorter than a long queue's wait): the same request again, byte
        # for byte once decoded, is answered and not graded twice. Records
        # carry nanosecond times, so two real requests are never equal.
        recent: OrderedDict[bytes, None] = OrderedDict()
        journal = _replayed(run, tracked, recent, self.log)
        try:
            async for decoded, done in recv:
                digest = hashlib.blake2b(decoded.line, digest_size=16).digest()
                if digest in recent:
                    self._dequeued(len(decoded.line))
                    self.log.info("otlp_duplicate_skipped", records=decoded.records)
                    done.set_result((0, ""))
                    continue
                recent[digest] = None
                if len(recent) > _RECENT:
                    recent.popitem(last=False)
                before = run.summary.input_errors
                if journal is not None:
                    try:
                        # Durable before the 200 (and before the take: no
                        # checkpoint can cut between the two).
                        journal.append(decoded.line)
                    except OSError as exc:
                        self._dequeued(len(decoded.line))
                        del recent[digest]
                        self.log.error("otlp_not_journaled", error=str(exc))
                        done.set_result(
                            (
                                -4,
                                f"trajgrade cannot record this request in its --state directory ({exc.strerror or exc}); retry later",
                            )
                        )
                        continue
                run.take(tracked, decoded.line + b"\n")
                self._dequeued(len(decoded.line))
                rejected = run.summary.input_errors - before
                if rejected and len(decoded.line) > longest:
                    # Skipped as one over-long line: every record of it is lost.
                    rejected = decoded.records
                done.set_result(
                    (
                        rejected,
                        f"{rejected} records could not be read; see trajgrade's log"
                        if rejected
                        else "",
                    )
                )
                await run.maybe_checkpoint()
        finally:
            self._send = None
            if journal is not None:
                journal.close()
            with anyio.CancelScope(shield=True):
                send.close()
                while True:
                    try:
                        left, done = recv.receive_nowait()
                    except (
                        anyio.WouldBlock,
                        anyio.EndOfStream,
                        anyio.ClosedResourceError,
                    ):
                        break
                    self._dequeued(len(left.line))
                    done.set_result(_STOPPING)
                recv.close()
                await anyio.to_thread.run_sync(self.shutdown)
                self.server_close()


#: ``grade --otlp --state``: the requests answered since the last checkpoint.
JOURNAL_NAME: Final = "otlp.journal"


def _replayed(
    run: Any, tracked: Any, recent: OrderedDict[bytes, None], log: Any
) -> Journal | None:
    """With ``--state``, grade again the requests answered after the last
    checkpoint (a killed run answered them 200), then journal new ones.

    Records are written, not fsynced (as the verdicts journal): they
    survive a killed process; the checkpoint itself is fsynced.
    """
    store = run.store
    if store is None:
        return None
    where = str(store.dir)
    found = recover(where, JOURNAL_NAME)
    for damage in found.damage:
        log.warning(
            "journal_damaged",
            path=damage.path,
            offset=damage.offset,
            reason=damage.reason,
        )
    for line in found.records:
        recent[hashlib.blake2b(line, digest_size=16).digest()] = None
        run.take(tracked, line + b"\n")
    if found.records:
        log.info("otlp_journal_replayed", requests=len(found.records))
    journal = Journal(where, JOURNAL_NAME, fsync=False)
    store.input_journals.append(journal)
    return journal


def bind(options: OtlpOptions, log: Any) -> OtlpReceiver:
    """Listen now, so a taken port or a refused host is a clear error at start."""
    try:
        return OtlpReceiver(options, log)
    except OSError as exc:
        error = bind_error("--otlp", options.host, options.port, exc)
        raise error from None
    except ValueError as exc:
        msg = f"--otlp {options.host}:{options.port}: {exc}"
        raise SourceError(msg) from None


class _Handler(EdgeHandler):
    server: OtlpReceiver

    def do_GET(self) -> None:
        self.reply(405, b"OTLP/HTTP: POST /v1/logs, /v1/traces or /v1/metrics\n")

    def _ctype(self) -> str:
        """The request's media type, without parameters, lowercase."""
        headers = getattr(self, "headers", None)  # (unset before the head is read)
        raw = (headers.get("Content-Type") or "") if headers is not None else ""
        return raw.split(";", 1)[0].strip().lower()

    def refuse(self, exc: HttpError) -> None:
        """OTLP/HTTP wants every 4xx/5xx body to be a ``google.rpc.Status``
        in the request's encoding (protobuf unless it was JSON)."""
        self.refused(exc)
        ctype = self._ctype()
        ctype = ctype if ctype in _TYPES else _TYPES[0]
        body = status(_RPC_CODES.get(exc.status, 3), exc.message, ctype)
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        try:
            self.reply(exc.status, body, content_type=ctype, headers=headers)
        except OSError:
            self.close_connection = True

    def do_POST(self) -> None:
        self.authorize()
        path = self.path.split("?", 1)[0]
        if path not in SIGNALS:
            self.close_connection = True
            raise HttpError(
                404,
                f"unknown path {path!r}; POST /v1/logs, /v1/traces or /v1/metrics",
                close=True,
            )
        ctype = self._ctype()
        if ctype not in _TYPES:
            msg = f"Content-Type {ctype!r} is not OTLP; use application/x-protobuf or application/json"
            raise HttpError(415, msg, close=True)
        body = self.read_body()
        server = self.server
        try:
            # One body expanded at a time: decoding holds the GIL anyway, and
            # concurrent requests would multiply the expansion's memory.
            with server.decoding:
                decoded = decode(path, body, ctype, max_values=server.max_values)
        except BadPayload as exc:
            server.report("otlp_bad_request", {"path": path, "reason": str(exc)})
            code = 413 if isinstance(exc, TooLarge) else 400
            self.reply(code, status(3, str(exc), ctype), content_type=ctype)
            return
        rejected, message = (
            (0, "")
            if path == "/v1/metrics" or not decoded.records
            else self.server.submit(decoded)
        )
        if rejected < 0:
            # Retryable: the client's exporter backs off and sends again.
            self.reply(
                503,
                status(14, message, ctype),
                content_type=ctype,
                headers={"Retry-After": "1"},
            )
            return
        self.reply(200, response(path, ctype, rejected, message), content_type=ctype)
