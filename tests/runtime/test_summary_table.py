"""The end-of-run summary's table (``trajgrade.sinks.summary.RunTable``):
failures first, bounded in rows and listed verdicts whatever the run."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from trajgrade.sinks.summary import SHOWN_FAILURES, SHOWN_FILES, RunTable
from trajgrade.verdicts import Matched, Outcome, Source, Verdict, verdict_id


def _v(trace: str, file: str, outcome: Outcome, line: int | None = None) -> Verdict:
    failed = outcome is not Outcome.PASS
    return Verdict(
        id=verdict_id(trace, "g", final=True),
        trace_id=trace,
        grader="g",
        kind="tool-calls",
        outcome=outcome,
        score=0.0 if failed else 1.0,
        final=True,
        evidence="why",
        matched=Matched(
            rule="disallowed[0]", tool="Bash", field="command", value="rm -rf /"
        )
        if failed
        else None,
        source=Source(file=file, line=line),
    )


def test_rows_and_listed_failures_are_bounded() -> None:
    table = RunTable()
    n_files = SHOWN_FILES + 10
    table.send(
        [
            _v(f"t{i}", f"f{i:03}.jsonl", Outcome.FAIL if i % 2 else Outcome.PASS, i)
            for i in range(n_files)
        ]
    )
    lines = table.lines()
    failed = n_files // 2
    assert f"failed ({failed} of {n_files} final verdicts):" in lines
    listed = [line for line in lines if line.startswith("  FAIL  ")]
    assert len(listed) == SHOWN_FAILURES
    assert f"  (+{failed - SHOWN_FAILURES} more)" in lines
    rows = [line for line in lines if line.startswith("  f")]
    assert len(rows) == SHOWN_FILES
    # Failing files first, in the order they came; then the passing ones.
    names = [row.split()[0] for row in rows]
    assert names[:failed] == [f"f{i:03}.jsonl" for i in range(1, n_files, 2)]
    assert lines[-1] == "  (+10 more inputs: 10 traces, 0 failing)"
    assert (
        "  FAIL  f001.jsonl:1  t1  g: disallowed[0]: Bash command 'rm -rf /'" in lines
    )


def test_one_input_has_no_table() -> None:
    table = RunTable()
    table.send([_v("a", "one.jsonl", Outcome.PASS), _v("b", "one.jsonl", Outcome.FAIL)])
    lines = table.lines()
    assert "failed (1 of 2 final verdicts):" in lines
    assert not any(line.startswith("by input") for line in lines)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a.jsonl", "b.jsonl", "c.jsonl"]),
            st.sampled_from(list(Outcome)),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_every_failing_input_comes_before_every_passing_one(
    verdicts: list[tuple[str, Outcome]],
) -> None:
    table = RunTable()
    table.send([_v(f"t{i}", f, o) for i, (f, o) in enumerate(verdicts)])
    lines = table.lines()
    failing = {f for f, o in verdicts if o is not Outcome.PASS}
    if len({f for f, _ in verdicts}) < 2:
        assert not any(line.startswith("by input") for line in lines)
        return
    start = lines.index("by input, failing first (pass/fail per grader):") + 2
    rows = [line.split() for line in lines[start:] if not line.startswith("    ")]
    order = [r[0] for r in rows]
    assert sorted(order) == sorted({f for f, _ in verdicts})
    assert order[: len(failing)] == sorted(failing, key=order.index)
    assert set(order[: len(failing)]) == failing
    for name, traces, cell in rows:
        passed = sum(1 for f, o in verdicts if f == name and o is Outcome.PASS)
        total = sum(1 for f, _ in verdicts if f == name)
        assert (traces, cell) == (str(total), f"{passed}/{total - passed}")
