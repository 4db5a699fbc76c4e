"""OpenAI Responses / OpenResponses items, the AI GO! trace shape (seed 004).

A line holds one of:

* a JSON array of items: one whole trace;
* an object with item lists: an AI GO! ``Trace`` (``{"items": [...],
  "metadata"?}``) or a Responses API response (``{"id", "object":
  "response", "output": [...], "usage"?, "status"?}``, optionally with the
  request's ``input`` list or string, read before ``output``): one whole trace,
  named by its ``trace_id`` or ``id`` when it has one;
* a single item: an event of the source's default trace (or of the item's
  ``trace_id``, a trajgrade extension), which ends at end of input.

Whole traces end with ``trace_end``; unnamed ones are the source's default
trace, then ``<default>#2``, ``#3``, … (as for vally trajectories).

Mapping (decisions in docs/formats.md, "openresponses"):

* ``message`` (``role``; ``content`` a string or parts, whose ``input_text``/
  ``output_text``/``text`` texts and ``refusal`` texts are concatenated with
  no separator, as the OpenAI SDK's ``output_text`` does) → ``message``. A
  *user* message first opens a turn (``turn_start``, source ``user``): a turn
  is a user request and everything the agent does about it. An item with a
  ``role`` and no ``type`` (an "easy" input message) is a message too.
* ``function_call`` (``name``, ``call_id``, ``arguments`` JSON text) →
  ``tool_call`` with ``args_raw`` and, when the text is a JSON object, ``args``.
* ``function_call_output`` (``call_id``, ``output``) → ``tool_result``.
* ``reasoning`` → ``message`` with role ``reasoning`` (its ``content`` texts,
  else its ``summary`` texts), so transcripts keep it and tool graders ignore it.
* Other item types (built-in tools such as ``web_search_call``, MCP items,
  ``item_reference``) are skipped: they are not function calls, and AI GO!
  counts ``function_call`` items only.
* A response's ``usage`` → ``usage`` (``input_tokens`` and ``output_tokens``
  as OpenAI counts them, i.e. including cached and reasoning tokens, which
  are also given as ``cache_read_tokens`` / ``reasoning_tokens``); its
  ``error`` → ``error``; ``status`` ``failed``/``cancelled`` → ``trace_end``
  with ``is_error``. A non-empty ``metadata`` object → ``trace_start``
  metadata (a ``sample`` key in it is a dataset row, as for canonical logs).
* An item's ``timestamp`` (AI GO! trace events carry one) → ``ts``.

A malformed item (not an object, a call without a string ``name``, a
``type`` that is not a string) or a response ``status`` that is not a string
is reported with its line and field and taints its trace, whose graders then
end in ``error`` rather than grade a partial trace. Content parts of other
types (or whose ``type`` is not a string) add no text.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from trajgrade._util.depth import decode_bounded
from trajgrade.errors import InputError, Location
from trajgrade.events import (
    AgentError,
    Event,
    Message,
    ToolCall,
    ToolResult,
    TraceEnd,
    TraceStart,
    TurnStart,
    Usage,
)
from trajgrade.formats._fields import BadField, opt_str
from trajgrade.formats._lines import RecordReader
from trajgrade.formats._positions import Positions
from trajgrade.formats._sniff import sniff_trace_id
from trajgrade.formats.vally import parse_timestamp

__all__ = ("FORMAT", "FORMATS", "OpenResponsesReader")

_JSON: Final = msgspec.json.Decoder()

#: Item types that only OpenResponses uses: one of them on a line is enough
#: to tell the format (``message`` is also a canonical tag, so it is not).
# fmt: off
_OWN_TYPES: Final = frozenset({
    "function_call", "function_call_output", "reasoning", "custom_tool_call",
    "custom_tool_call_output", "web_search_call", "file_search_call",
    "computer_call", "computer_call_output", "code_interpreter_call",
    "image_generation_call", "local_shell_call", "local_shell_call_output",
    "mcp_call", "mcp_list_tools", "mcp_approval_request",
    "mcp_approval_response", "item_reference",
})
# fmt: on
_ITEM_TYPES: Final = _OWN_TYPES | {"message"}
_TEXT_PARTS: Final = frozenset({"input_text", "output_text", "text"})
_FAILED: Final = frozenset({"failed", "cancelled"})


class _BadItem(BadField):
    """An item that cannot become an event: (field inside the item, message)."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message, field)


def _is_item(x: object) -> bool:
    return isinstance(x, dict) and _typed(x, _ITEM_TYPES)


def _typed(d: dict[str, Any], types: frozenset[str]) -> bool:
    """Whether ``d``'s ``type`` is one of ``types`` (a value that is not a
    string is none of them)."""
    kind = d.get("type")
    return isinstance(kind, str) and kind in types


#: Keys only a whole-trace line has (a Trace's items, a response's object).
_WHOLE_KEYS: Final = (b'"items"', b'"object"')


def _item_lists(record: dict[str, Any]) -> list[tuple[str, Any]] | None:
    """(field, item) of a whole-trace object, in order; None for a single item."""
    if _typed(record, _ITEM_TYPES):
        # A function_call_output's "output" may be a list of content parts.
        return None
    items = record.get("items")
    if isinstance(items, list):
        return [(f"items[{i}]", item) for i, item in enumerate(items)]
    inp, out = record.get("input"), record.get("output")
    if not isinstance(out, list) and not isinstance(inp, list):
        return None
    found: list[tuple[str, Any]] = []
    if isinstance(inp, str):
        found.append(("input", {"type": "message", "role": "user", "content": inp}))
    elif isinstance(inp, list):
        found.extend((f"input[{i}]", item) for i, item in enumerate(inp))
    if isinstance(out, list):
        found.extend((f"output[{i}]", item) for i, item in enumerate(out))
    return found


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    out = []
    for part in content:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        value = part.get("refusal") if kind == "refusal" else part.get("text")
        if (_typed(part, _TEXT_PARTS) or kind == "refusal") and isinstance(value, str):
            out.append(value)
    return "".join(out)


def _reasoning_text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, list) and content:
        return "".join(
            p["text"]
            for p in content
            if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    summary = item.get("summary")
    if isinstance(summary, list):
        return "\n".join(
            p["text"]
            for p in summary
            if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""


def _args(raw: Any) -> tuple[dict[str, Any] | None, str | None]:
    if isinstance(raw, dict):
        return raw, None
    if isinstance(raw, str):
        try:
            parsed = decode_bounded(_JSON, raw)
        except (msgspec.DecodeError, UnicodeDecodeError):
            return None, raw
        return (parsed if isinstance(parsed, dict) else None), raw
    if raw is None:
        return None, None
    msg = f"arguments must be a JSON string, got {type(raw).__name__}"
    raise _BadItem(msg, field="arguments")


def _translate(item: dict[str, Any], tid: str) -> list[Event]:
    """One item's events (none for item types that are not read)."""
    kind = item.get("type")
    ts = parse_timestamp(item.get("timestamp"))
    if kind == "message" or (kind is None and "role" in item):
        role = item.get("role")
        if not isinstance(role, str):
            msg = f"a message needs a string role, got {role!r}"
            raise _BadItem(msg, field="role")
        message = Message(
            trace_id=tid, ts=ts, role=role, text=_text(item.get("content"))
        )
        if role == "user":
            return [TurnStart(trace_id=tid, ts=ts, source="user"), message]
        return [message]
    if kind == "function_call":
        name = item.get("name")
        if not isinstance(name, str):
            got = "missing" if name is None else type(name).__name__
            msg = f"a function_call needs a string name ({got})"
            raise _BadItem(msg, field="name")
        args, raw = _args(item.get("arguments"))
        cid = opt_str(item, "call_id")
        return [
            ToolCall(
                trace_id=tid, ts=ts, name=name, call_id=cid, args=args, args_raw=raw
            )
        ]
    if kind == "function_call_output":
        cid = opt_str(item, "call_id")
        return [ToolResult(trace_id=tid, ts=ts, call_id=cid, result=item.get("output"))]
    if kind == "reasoning":
        return [
            Message(trace_id=tid, ts=ts, role="reasoning", text=_reasoning_text(item))
        ]
    if not isinstance(kind, str):
        # Unknown item *types* are skipped (the API grows); no type at all is junk.
        got = "missing" if kind is None else type(kind).__name__
        msg = f"an item needs a string type, got {got}"
        raise _BadItem(msg, field="type")
    return []


def _int(d: dict[str, Any], key: str, where: str) -> int:
    value = d.get(key, 0)
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    msg = f"{where}{key} must be an integer, got {type(value).__name__}"
    raise _BadItem(msg, field=f"{where}{key}")


def _usage(u: Any, tid: str) -> Usage:
    if not isinstance(u, dict):
        msg = f"usage must be an object, got {type(u).__name__}"
        raise _BadItem(msg, field="usage")
    cached = u.get("input_tokens_details")
    reasoning = u.get("output_tokens_details")
    return Usage(
        trace_id=tid,
        input_tokens=_int(u, "input_tokens", "usage."),
        output_tokens=_int(u, "output_tokens", "usage."),
        cache_read_tokens=_int(cached, "cached_tokens", "usage.input_tokens_details.")
        if isinstance(cached, dict)
        else 0,
        reasoning_tokens=_int(
            reasoning, "reasoning_tokens", "usage.output_tokens_details."
        )
        if isinstance(reasoning, dict)
        else 0,
    )


class OpenResponsesReader(RecordReader):
    """Translates OpenResponses items (and whole traces) to canonical events."""

    format = "openresponses"
    expected = "an OpenResponses item, an array of items or a response object"

    def __init__(self, *, source: str, default_trace: str) -> None:
        super().__init__(source=source, default_trace=default_trace)
        self._positions = Positions(self._default)

    def record(
        self, record: Any, n: int, events: list[Event], errors: list[InputError]
    ) -> None:
        if isinstance(record, list):
            listed = [(f"[{i}]", item) for i, item in enumerate(record)]
            self._trace(listed, {}, n, events, errors)
        elif not isinstance(record, dict):
            msg = f"expected a JSON object or array, got {type(record).__name__}"
            errors.append(self.error(msg, n, trace=self._default))
        elif (items := _item_lists(record)) is not None:
            self._trace(items, record, n, events, errors)
        else:
            tid = record.get("trace_id")
            tid = tid if isinstance(tid, str) and tid else self._default
            self._item(record, tid, n, "", events, errors)

    def undecodable(self, line: bytes, n: int, exc: Exception) -> InputError:
        # A lost item taints the trace it names, else the source's; a lost
        # whole trace (an array, a Trace or a response) is still counted, so
        # later unnamed traces keep their names, and its own ends in `error`.
        tid = sniff_trace_id(line)
        whole = line.lstrip()[:1] == b"[" or any(k in line for k in _WHOLE_KEYS)
        if whole:
            positional = self._positions.next()
            tid = tid or positional
        msg = f"not valid JSON ({exc}); each line must be {self.expected}"
        return self.error(msg, n, trace=tid or self._default)

    def _trace(
        self,
        items: list[tuple[str, Any]],
        record: dict[str, Any],
        n: int,
        events: list[Event],
        errors: list[InputError],
    ) -> None:
        positional = self._positions.next()
        tid = record.get("trace_id") or record.get("id")
        if not isinstance(tid, str) or not tid:
            tid = positional
        meta = record.get("metadata")
        if isinstance(meta, dict) and meta:
            events.append(TraceStart(trace_id=tid, metadata=meta))
        for where, item in items:
            self._item(item, tid, n, where, events, errors)
        try:
            status = opt_str(record, "status")
        except BadField as exc:
            msg = f"cannot read the response's status: {exc.message}; fix the producer or the line"
            errors.append(self._error(msg, n, exc.field, tid))
            status = None
        end_error = status in _FAILED or None
        try:
            if record.get("usage") is not None:
                model = record.get("model")
                events.append(
                    msgspec.structs.replace(
                        _usage(record["usage"], tid),
                        model=model if isinstance(model, str) and model else None,
                    )
                )
        except BadField as exc:
            msg = f"cannot read the response's usage: {exc.message}; fix the producer or the line"
            errors.append(self._error(msg, n, exc.field, tid))
        err = record.get("error")
        if isinstance(err, dict):
            code = err.get("code")
            events.append(
                AgentError(
                    trace_id=tid,
                    message=str(err.get("message", "")),
                    code=code if isinstance(code, str) else None,
                )
            )
        events.append(TraceEnd(trace_id=tid, is_error=end_error))

    def _item(
        self,
        item: Any,
        tid: str,
        n: int,
        where: str,
        events: list[Event],
        errors: list[InputError],
    ) -> None:
        if not isinstance(item, dict):
            msg = f"expected an item object, got {type(item).__name__}"
            errors.append(self._error(msg, n, where or None, tid))
            return
        try:
            events.extend(_translate(item, tid))
        except BadField as exc:
            kind = item.get("type", "message")
            what = repr(kind) if isinstance(kind, str) else "an"
            msg = (
                f"cannot read {what} item: {exc.message}; fix the producer or the line"
            )
            field = f"{where}.{exc.field}" if where else exc.field
            errors.append(self._error(msg, n, field, tid))

    def _error(self, msg: str, n: int, field: str | None, tid: str) -> InputError:
        where = Location(file=self._source, line=n, field=field)
        return InputError(msg, location=where, trace_id=tid)


class _OpenResponsesFormat:
    name = "openresponses"
    summary = "OpenAI Responses / OpenResponses items (AI GO! traces): an array of items or {items|input|output: [...]} per line, or one item per line"

    def sniff(self, record: object) -> bool:
        if isinstance(record, list):
            return bool(record) and _is_item(record[0])
        if not isinstance(record, dict):
            return False
        kind = record.get("type")
        if _typed(record, _OWN_TYPES):
            return True
        if kind == "message":
            # A canonical message has "text"; an OpenResponses one has "content".
            return "content" in record and "text" not in record
        if record.get("object") == "response":
            return True
        for key in ("items", "output", "input"):
            value = record.get(key)
            if isinstance(value, list) and value:
                # An agentv record also has "output", but its messages have
                # no item "type": only typed items are claimed.
                return _is_item(value[0])
        return False

    def reader(self, *, source: str, default_trace: str) -> OpenResponsesReader:
        return OpenResponsesReader(source=source, default_trace=default_trace)


FORMAT: Final = _OpenResponsesFormat()

#: What this module contributes to the registry.
FORMATS: Final = (FORMAT,)
