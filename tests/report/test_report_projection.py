"""The report reads the events a projected decode gives (a suite that reads
neither results' payloads nor usage) as it reads the full ones: a failed
call's ``is_error``, a usage's cost."""

from __future__ import annotations

from trajgrade.config.compile import compile_suite
from trajgrade.config.decode import decode_config
from trajgrade.events import FULL, LeanResult, LeanUsage
from trajgrade.pipeline.decoder import SourceDecoder
from trajgrade.report import RunReport

_LOG = (
    b'{"type":"tool_call","trace_id":"t","name":"bash","call_id":"c1","args":{"command":"ls"}}\n'
    b'{"type":"tool_result","trace_id":"t","call_id":"c1","result":"boom","is_error":true}\n'
    b'{"type":"usage","trace_id":"t","tokens":{"input":3,"output":1},"cost_usd":0.25}\n'
)


def _report(*, projected: bool) -> RunReport:
    suite = compile_suite(
        decode_config(
            "graders:\n  - {type: tool-calls, name: a, config: {required: [bash]}}\n"
        )
    )
    projection = suite.projection if projected else FULL
    decoder = SourceDecoder("log.jsonl", projection=projection)
    events = decoder.feed(_LOG).events
    kinds = {type(e) for e in events}
    assert (LeanResult in kinds and LeanUsage in kinds) is projected
    report = RunReport()
    report.observe("log.jsonl", events)
    return report


def test_the_report_reads_projected_events_as_full_ones() -> None:
    full, lean = _report(projected=False), _report(projected=True)
    for report in (full, lean):
        (row,) = report.rows.values()
        assert row.cost_usd == 0.25
        assert [c.is_error for c in report._rings["t"]] == [True]
