"""Whole-document formats: incremental item building and shape detection."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from trajgrade.events import Event, ToolCall, TraceEnd
from trajgrade.formats._document import DocumentReader, document_shape


class _Steps(DocumentReader):
    """A test-only document format: {"id": ..., "steps": [{"tool": name}, ...]}."""

    format = "steps-test"
    ITEMS = ("steps.item",)
    SCALARS = ("id",)

    def item(
        self, prefix: str, obj: Any, events: list[Event], errors: list[Any]
    ) -> None:
        events.append(ToolCall(trace_id=self.scalars.get("id", ""), name=obj["tool"]))

    def end(self, events: list[Event], errors: list[Any]) -> None:
        events.append(TraceEnd(trace_id=self.scalars.get("id", "")))


DOC = json.dumps(
    {"id": "run-1", "steps": [{"tool": "view"}, {"tool": "edit", "x": [1, {"y": 2}]}]},
    indent=2,
).encode()


def test_items_come_out_as_soon_as_they_close() -> None:
    """A step's event is emitted when its object closes, before the document ends."""
    reader = _Steps(source="d.json", default_trace="d.json")
    cut = DOC.index(b"}") + 1  # just after the first step
    first, errors, _ = reader.feed(DOC[:cut], 1)
    assert errors == [] and [e.name for e in first] == ["view"]  # type: ignore[union-attr]
    rest, _, _ = reader.feed(DOC[cut:], 5)
    end, _ = reader.close()
    assert [type(e).__name__ for e in rest + end] == ["ToolCall", "TraceEnd"]
    assert end[0].trace_id == "run-1"


def test_any_chunking_gives_the_same_events() -> None:
    """Bytes split anywhere give the same events."""
    for cut in range(1, len(DOC), 7):
        reader = _Steps(source="d.json", default_trace="d.json")
        events = (
            reader.feed(DOC[:cut], 1)[0]
            + reader.feed(DOC[cut:], 2)[0]
            + reader.close()[0]
        )
        assert [getattr(e, "name", None) for e in events] == ["view", "edit", None]


def test_a_truncated_document_is_reported_and_keeps_what_was_read() -> None:
    """A document cut short keeps its finished items and reports the truncation."""
    reader = _Steps(source="d.json", default_trace="d.json")
    cut = DOC.index(b"edit")
    events, _, _ = reader.feed(DOC[:cut], 1)
    more, errors = reader.close()
    assert [getattr(e, "name", None) for e in events + more] == ["view", None]
    (err,) = errors
    assert "not valid JSON" in err.message and err.trace_id == "d.json"


def test_document_shape_reads_a_prefix() -> None:
    """The shape shows top-level keys and the first item's keys from a partial document."""
    shape = document_shape(DOC[: DOC.index(b"edit")])
    assert shape is not None and not shape.complete
    assert shape.top_keys == {"id", "steps"} and shape.first_item_keys == {"tool"}
    assert document_shape(b'[{"role": "user"}, ') == document_shape(
        b'[{"role": "user"}]'
    ).__class__(True, frozenset(), frozenset({"role"}), False)
    assert document_shape(b"{not json") is None


class _Collect(DocumentReader):
    """Keeps every built item with its prefix: the elements of ``steps``,
    the value of ``agent`` and the elements of a top-level array."""

    format = "collect-test"
    ITEMS = ("steps.item", "agent", "item")
    SCALARS = ("id", "meta.version")

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.built: list[Any] = []

    def item(
        self, prefix: str, obj: Any, events: list[Event], errors: list[Any]
    ) -> None:
        self.built.append((prefix, obj))


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=25,
)


def _chunks(data: st.DataObject, doc: bytes) -> list[bytes]:
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(doc) - 1)), max_size=8)))
    return [doc[a:b] for a, b in zip([0, *cuts], [*cuts, len(doc)], strict=True)]


def _read(chunks: list[bytes]) -> _Collect:
    reader = _Collect(source="d.json", default_trace="d.json")
    for chunk in chunks:
        _, errors, _ = reader.feed(chunk, 1)
        assert errors == []
    reader.close()
    return reader


def _containers(values: list[Any]) -> list[Any]:
    return [v for v in values if isinstance(v, dict | list)]


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(_VALUES, max_size=6),
    agent=_VALUES,
    other=_VALUES,
    ident=st.text(max_size=6),
    data=st.data(),
)
def test_items_are_built_as_json_reads_them(
    steps: list[Any], agent: Any, other: Any, ident: str, data: st.DataObject
) -> None:
    """Items are built inline (``DocumentReader._drain``) from ijson's
    events without prefixes: for any nesting and any chunking they are the
    objects and arrays ``json.loads`` gives (scalar items are not items),
    in document order, under ijson's prefixes; containers that lead to no
    item are skipped; wanted top-level and nested scalars are kept."""
    doc_obj = {"other": other, "steps": steps, "agent": agent, "id": ident}
    doc_obj["meta"] = {"version": ident, "skip": other}
    doc = json.dumps(doc_obj, indent=1).encode()
    reader = _read(_chunks(data, doc))
    loaded = json.loads(doc)
    want = [("steps.item", s) for s in _containers(loaded["steps"])]
    want += [("agent", a) for a in _containers([loaded["agent"]])]
    assert reader.built == want
    assert reader.scalars == {"id": ident, "meta.version": ident}
    # A top-level array: its elements are the items "item".
    doc = json.dumps([*steps, agent]).encode()
    reader = _read(_chunks(data, doc))
    assert reader.built == [("item", v) for v in _containers(json.loads(doc))]


def test_a_document_broken_late_is_still_detected_and_reported() -> None:
    """One bad byte far into a document: its format is still told from what
    came before (not "cannot tell the log format" at line 1, nothing graded),
    the steps before it are read, and the error is the reader's, whole or
    chunked."""
    from pathlib import Path

    from tests.formats._decode import decode

    fixture = Path(__file__).parents[1] / "fixtures" / "atif"
    data = (fixture / "harbor_terminus2_v1.5_linear_history.json").read_bytes()
    at = len(data) * 3 // 4
    broken = data[:at] + b"\xeb" + data[at:]
    session = json.loads(data)["session_id"]
    fault = data[:at].count(b"\n") + 1
    whole = decode(broken, fmt="atif")
    for size in (4096, 1000, 97):
        chunked = decode(broken, fmt="atif", chunks=[size] * (len(broken) // size))
        for events, errors in (whole, chunked):
            assert events
            (error,) = errors
            assert error.message.split(" (")[0] == "the atif document is not valid JSON"
            # The fault's own line, and the session the document had named
            # (not the default trace), however the bytes were cut.
            assert (error.location.line, error.trace_id) == (fault, session)
            assert "b'" not in error.message  # the parser's bytes, shown as text
        assert len(whole[0]) == len(chunked[0])


@settings(max_examples=150, deadline=None)
@given(
    at=st.integers(min_value=1, max_value=len(DOC) - 1),
    bad=st.sampled_from([b"\xeb", b"#", b"}", b'"']),
    cuts=st.lists(st.integers(min_value=1, max_value=len(DOC)), max_size=6),
)
def test_a_broken_documents_error_has_one_line_however_it_is_cut(
    at: int, bad: bytes, cuts: list[int]
) -> None:
    """Where the parser stops is named by its line, read whole or in any
    chunks (the parser gives no position; its excerpt is found in the bytes).
    Every mutation is a fault somewhere: a stray byte or quote, or a brace
    that ends the document early (trailing data)."""
    broken = DOC[:at] + bad + DOC[at:]

    def errors(pieces: list[bytes]) -> list[tuple[int | None, str]]:
        reader = _Steps(source="d.json", default_trace="d.json")
        out, line = [], 1
        for piece in pieces:
            out += reader.feed(piece, line)[1]
            line += piece.count(b"\n")
        out += reader.close()[1]
        # (An item's own errors are placed at its chunk's last line, as
        # its events are: the parser reports item ends without positions.)
        return [
            (e.location.line, e.message.split(" (")[0])
            for e in out
            if "not valid JSON" in e.message
        ]

    bounds = [0, *sorted(set(cuts)), len(broken)]
    pieces = [broken[i:j] for i, j in itertools.pairwise(bounds) if j > i]
    assert errors(pieces) == errors([broken])


def test_the_fault_is_found_from_the_parsers_excerpt() -> None:
    """yajl's excerpt (offset at column 40; newlines shown as spaces) names
    the line, near the start of the bytes and far in; other messages name
    none."""
    import ijson

    from trajgrade.formats._doc_faults import fault_line, fault_reason

    def parse_error(data: bytes) -> Exception:
        parser = ijson.basic_parse_coro(ijson.sendable_list())
        try:
            parser.send(data)
            parser.close()
        except ijson.JSONError as exc:
            return exc
        raise AssertionError("no error")

    near = b'{"a": [1,\n2,\n 4x5]}'
    assert fault_line(parse_error(near), near, 10) == 12
    far = b'{"a": [' + b"1,\n" * 40 + b" 4x5]}"
    assert fault_line(parse_error(far), far, 1) == 41
    not_utf8 = b'{"a": [1,\n2\xeb]}'
    exc = parse_error(not_utf8)
    assert fault_line(exc, not_utf8, 1) == 2
    assert "\\xeb" in fault_reason(exc) and "\n" not in fault_reason(exc)
    assert fault_line(ValueError("no excerpt"), far, 1) is None
    # The end of the input: an empty excerpt, found nowhere in particular.
    assert fault_line(parse_error(b'{"a": ['), b'{"a": [', 1) in (1, None)
