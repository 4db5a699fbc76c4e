"""``trajgrade grade`` output for people and for programs, on recorded agent
logs (tests/fixtures, several files at once): the summary lists failures
first and tabulates the inputs, ``--only-failures`` leaves passes out,
verdicts carry their ``source`` (input file, deciding line), JUnit test
cases their ``file``, and a session found in two inputs is warned of once,
on stderr, naming both files (issue 36, item 2)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from junitparser import JUnitXml

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
#: Recorded sessions: two that edit files (a no-edits policy fails them at
#: their first Write/Edit call) and two that do not.
PASSING = [
    FIXTURES / "claude-code" / "spotter_v2.1.38_short_tool_errors.jsonl",
    FIXTURES / "codex" / "localpush_v0.104_redacted_mcp_calls.jsonl",
]
FAILING = [
    FIXTURES / "claude-code" / "codemie_v2.0.64_small.jsonl",
    FIXTURES / "claude-code" / "agentcmd_v2.0.26_plan_mode.jsonl",
]
POLICY = """\
graders:
  - type: tool-calls
    name: no-edits
    config:
      disallowed:
        - name: '^(Write|Edit)$'
  - type: turn-count
    config: {max: 20}
"""


def _policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY, encoding="utf-8")
    return path


def _inputs() -> list[str]:
    # Passing files first: a summary in input order would bury the failures.
    return [str(p) for p in (*PASSING, *FAILING)]


def _verdicts(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines()]


def _line(path: str, number: int) -> str:
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    assert 1 <= number <= len(lines), f"{path} has no line {number}"
    return lines[number - 1]


def test_json_verdicts_name_their_input_and_the_deciding_line(
    run_cli: Any, tmp_path: Path
) -> None:
    proc = run_cli("grade", "-q", "-c", _policy(tmp_path), *_inputs())
    assert proc.returncode == 1, proc.stderr
    final = [v for v in _verdicts(proc.stdout) if v["final"]]
    assert len(final) == 2 * len(_inputs())  # a final verdict per grader per trace
    by_file: dict[str, set[str]] = {}
    for v in final:
        by_file.setdefault(v["source"]["file"], set()).add(v["trace_id"])
    assert set(by_file) == set(_inputs())  # each trace is in its own file
    for name, traces in by_file.items():
        text = Path(name).read_text(encoding="utf-8")
        assert all(t in text for t in traces)  # the trace is read from that file
    fails = [v for v in final if v["outcome"] == "fail"]
    assert {v["source"]["file"] for v in fails} == {str(p) for p in FAILING}
    for v in fails:
        assert v["grader"] == "no-edits" and v["early"]
        # The line named is the call that matched: its id and tool are on it.
        line = _line(v["source"]["file"], v["source"]["line"])
        assert v["matched"]["call_id"] in line
        assert f'"name":"{v["matched"]["tool"]}"' in line.replace(" ", "")
    # A verdict decided at the trace's end names the file, not a line.
    ended = [v for v in final if not v.get("early")]
    assert ended and all("line" not in v["source"] for v in ended)


def test_stdin_verdicts_name_stdin_as_dash(run_cli: Any, tmp_path: Path) -> None:
    log = FAILING[0].read_text(encoding="utf-8")
    proc = run_cli("grade", "-q", "-c", _policy(tmp_path), input=log)
    fail = next(v for v in _verdicts(proc.stdout) if v["outcome"] == "fail")
    assert fail["source"]["file"] == "-"
    assert fail["matched"]["call_id"] in log.splitlines()[fail["source"]["line"] - 1]


def _summary(stdout: str) -> list[str]:
    """The lines of the end-of-run summary: from the first blank line on."""
    lines = stdout.splitlines()
    return lines[lines.index("") :]


def _table(summary: list[str]) -> list[list[str]]:
    """The input table's rows (header first), split into cells."""
    start = summary.index("by input, failing first (pass/fail per grader):") + 1
    rows = []
    for line in summary[start:]:
        if not line.startswith("  ") or line.startswith("    "):
            if not line.startswith("    "):
                break
            continue
        rows.append(line.split())
    return rows


def test_the_summary_lists_failures_first_and_a_row_per_input(
    run_cli: Any, tmp_path: Path
) -> None:
    proc = run_cli("grade", "--output", "pretty", "-c", _policy(tmp_path), *_inputs())
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    # Live: every verdict as it is decided, passes included (nothing held back).
    live = lines[: lines.index("")]
    assert sum(line.startswith("PASS ") for line in live) == 6
    assert sum(line.startswith("FAIL ") for line in live) == 2
    summary = _summary(proc.stdout)
    failed = summary.index("failed (2 of 8 final verdicts):")
    listed = summary[failed + 1 : failed + 3]
    for path in FAILING:
        (entry,) = [line for line in listed if f"  {path}:" in line]
        assert entry.startswith("  FAIL  ") and "no-edits: disallowed[0]" in entry
    header, *rows = _table(summary)
    assert header == ["input", "traces", "no-edits", "turn-count"]
    # The failing inputs first (in the order given), then the passing ones.
    assert [r[0] for r in rows] == [str(p) for p in (*FAILING, *PASSING)]
    assert [r[1:] for r in rows] == [["1", "0/1", "1/0"]] * 2 + [
        ["1", "1/0", "1/0"]
    ] * 2
    firsts = [line for line in summary if line.startswith("    first failure: ")]
    assert len(firsts) == 2
    for path, line in zip(FAILING, firsts, strict=True):
        place = line.split()[2]
        file, number = place.rsplit(":", 1)
        assert file == str(path)
        assert '"Write"' in _line(file, int(number)) or '"Edit"' in _line(
            file, int(number)
        )
        assert "disallowed[0]:" in line
    assert "4 traces" in summary[-2] or any(s.startswith("4 traces") for s in summary)


def test_only_failures_prints_only_what_did_not_pass(
    run_cli: Any, tmp_path: Path
) -> None:
    policy = _policy(tmp_path)
    pretty = run_cli(
        "grade", "--output", "pretty", "--only-failures", "-c", policy, *_inputs()
    )
    assert pretty.returncode == 1
    live = pretty.stdout.splitlines()[: pretty.stdout.splitlines().index("")]
    assert [line.split()[0] for line in live if not line.startswith(" ")] == [
        "FAIL"
    ] * 2
    # The summary still counts every verdict: the passing inputs have rows.
    rows = _table(_summary(pretty.stdout))[1:]
    assert [r[0] for r in rows] == [str(p) for p in (*FAILING, *PASSING)]
    jsonl = run_cli("grade", "-q", "--only-failures", "-c", policy, *_inputs())
    got = _verdicts(jsonl.stdout)
    assert got and all(v["outcome"] != "pass" for v in got)
    assert {v["source"]["file"] for v in got} == {str(p) for p in FAILING}
    assert jsonl.returncode == 1  # the exit status still counts every verdict


def test_junit_test_cases_name_their_input_file(run_cli: Any, tmp_path: Path) -> None:
    report = tmp_path / "report.xml"
    proc = run_cli(
        "grade", "-q", "-c", _policy(tmp_path), *_inputs(), "--junit", report
    )
    assert proc.returncode == 1, proc.stderr
    cases = [
        (suite.name, case) for suite in JUnitXml.fromfile(str(report)) for case in suite
    ]
    assert len(cases) == 8
    files = {name: case._elem.get("file") for name, case in cases}
    for path in _inputs():
        text = Path(path).read_text(encoding="utf-8")
        (trace,) = [t for t in files if t in text]
        assert files[trace] == path
    failed = [case for _, case in cases if not case.is_passed]
    assert len(failed) == 2
    for case in failed:
        file, line = case._elem.get("file"), int(case._elem.get("line"))
        assert file in {str(p) for p in FAILING}
        assert '"Write"' in _line(file, line) or '"Edit"' in _line(file, line)


def test_a_session_in_two_inputs_is_warned_of_once_on_stderr(
    run_cli: Any, tmp_path: Path
) -> None:
    copy = tmp_path / "copy.jsonl"
    shutil.copyfile(FAILING[0], copy)
    inputs = [str(FAILING[0]), str(PASSING[0]), str(copy), str(FAILING[0])]
    proc = run_cli("grade", "-q", "-c", _policy(tmp_path), *inputs)
    warned = [
        json.loads(line)
        for line in proc.stderr.splitlines()
        if '"session_in_two_inputs"' in line
    ]
    # Once per id, naming both files (the first file given again is no news).
    assert len(warned) == 1, proc.stderr
    (w,) = warned
    assert (w["first"], w["source"]) == (str(FAILING[0]), str(copy))
    assert w["level"] == "warning" and w["trace"] in FAILING[0].read_text()
    # stdout stays JSON lines, and the trace's verdicts name its first file.
    got = _verdicts(proc.stdout)
    assert {v["source"]["file"] for v in got if v["trace_id"] == w["trace"]} == {
        str(FAILING[0])
    }


def test_one_input_has_no_duplicate_warning_and_no_table(
    run_cli: Any, tmp_path: Path
) -> None:
    proc = run_cli(
        "grade", "--output", "pretty", "-c", _policy(tmp_path), str(FAILING[0])
    )
    assert "session_in_two_inputs" not in proc.stderr
    summary = _summary(proc.stdout)
    assert "failed (1 of 2 final verdicts):" in summary
    assert not any(line.startswith("by input") for line in summary)


def test_export_otlp_records_carry_source_and_what_matched(
    run_cli: Any, tmp_path: Path
) -> None:
    from tests.telemetry._grade import OtlpSink

    sink = OtlpSink()
    try:
        proc = run_cli(
            "grade",
            "-q",
            "-c",
            _policy(tmp_path),
            *_inputs(),
            "--export-otlp",
            sink.url,
        )
    finally:
        sink.close()
    assert proc.returncode == 1, proc.stderr
    fails = {
        v["trace_id"]: v
        for v in _verdicts(proc.stdout)
        if v["outcome"] == "fail" and v["final"]
    }
    records = [r["attributes"] for r in sink.records()]
    assert len(records) == len(_verdicts(proc.stdout))  # verdicts only, no decisions
    failed = [a for a in records if a["gen_ai.evaluation.score.label"] == "fail"]
    assert {a["trajgrade.trace_id"] for a in failed} == set(fails)
    for a in failed:
        v = fails[a["trajgrade.trace_id"]]
        assert a["trajgrade.source.file"] == v["source"]["file"]
        assert a["trajgrade.source.line"] == v["source"]["line"]
        assert a["trajgrade.matched.rule"] == "disallowed[0]"
        assert a["trajgrade.matched.tool"] == v["matched"]["tool"]
        assert a["trajgrade.matched.call_id"] == v["matched"]["call_id"]
    # Every record carries its verdict's source and matched fields, no more.
    by_id = {v["id"]: v for v in _verdicts(proc.stdout)}
    for a in records:
        v = by_id[a["trajgrade.verdict.id"]]
        assert a["trajgrade.source.file"] == v["source"]["file"]
        got = {
            k.removeprefix("trajgrade.matched."): x
            for k, x in a.items()
            if k.startswith("trajgrade.matched.")
        }
        assert got == v.get("matched", {})
