"""A runner that writes verdicts as it goes changes nothing.

``Grading.feed_batches`` feeds a decoded batch to the engine in parts and
gives each part's verdicts before the next part is fed (the file runner
writes them in between, so a chunk in which thousands of traces end does
not hold all their verdicts). On random suites and interleaved canonical
streams with broken lines and reused call ids, cut into random chunks and
random parts, the verdicts, guard decisions, located input errors and
located anomalies equal those of ``Grading.feed``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import chunked, sprinkled, streams
from test_routing import mixed_suites

from trajgrade.engine.engine import Engine
from trajgrade.pipeline.decoder import SourceDecoder
from trajgrade.pipeline.grading import Grading

if TYPE_CHECKING:
    from strategies import Stream

    from trajgrade.config.model import Suite

_BROKEN = (
    b'{"type":"tool_call","trace_id":"t0","name":7}',
    b'{"type":"tool_result","trace_id":"t1","call_id":"zz"}',
    b"not json",
)


@settings(max_examples=200, deadline=None)
@given(suite=mixed_suites(), stream=streams(max_traces=4), data=st.data())
def test_feeding_in_parts_equals_feeding_whole(
    suite: Suite, stream: Stream, data: st.DataObject
) -> None:
    chunks = data.draw(chunked(sprinkled(data, stream.events, _BROKEN)))
    part = data.draw(st.integers(1, 5), label="events per part")
    runs = []
    for parts in (False, True):
        engine = Engine(suite)
        grading = Grading(engine)
        decoder = SourceDecoder("<input>")
        verdicts = []
        for chunk in [*chunks, None]:
            batch = decoder.close() if chunk is None else decoder.feed(chunk)
            if parts:
                for out in grading.feed_batches(decoder, batch, events=part):
                    verdicts += out
            else:
                verdicts += grading.feed(decoder, batch)
        verdicts += engine.finish()
        located = [(str(e), e.location) for e in grading.errors]
        runs.append((verdicts, engine.decisions, located, grading.anomalies))
    assert runs[0] == runs[1]
