"""Whole-document formats: incremental item building and shape detection."""

from __future__ import annotations

import json
from typing import Any

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
