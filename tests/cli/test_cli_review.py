"""The command line as a careless operator uses it: options repeated, given
without the one they work with, report files that cannot be written. Each
case is a usage error (status 2) naming the option and the fix, never an
option dropped without a word or a traceback after the run.

Real files and ``python -m trajgrade`` processes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

#: Fails trace `t` on its first call (the agent read `.env`).
POLICY = """\
graders:
  - type: tool-calls
    name: no-secrets
    config:
      disallowed:
        - {name: "^view$", path: "(^|/)\\\\.env$"}
"""
#: Passes trace `t` (one call, well under the budget).
LENIENT = "graders:\n  - type: tool-call-count\n    config: {max: 5}\n"
LOG = '{"type":"tool_call","trace_id":"t","name":"view","call_id":"c1","args":{"path":".env"}}\n'


def _files(tmp_path: Path) -> tuple[Path, Path, Path]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    lenient = tmp_path / "lenient.yaml"
    lenient.write_text(LENIENT)
    log = tmp_path / "log.jsonl"
    log.write_text(LOG)
    return policy, lenient, log


@pytest.mark.parametrize("command", ["grade", "check"])
def test_a_second_policy_is_refused_not_dropped(
    tmp_path: Path, run_cli: Any, command: str
) -> None:
    """`-c policy.yaml -c lenient.yaml` used to grade with lenient.yaml alone
    (click keeps the last value): the run passed (status 0) although the
    first policy fails the trace. Now it is a usage error naming both."""
    policy, lenient, log = _files(tmp_path)
    args = [log] if command == "grade" else []
    out = run_cli(command, "-c", policy, "-c", lenient, *args)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Invalid value for '-c' / '--config': given 2 times" in out.stderr
    assert "one policy file per run" in out.stderr
    assert out.stdout == ""


def test_one_policy_still_grades(tmp_path: Path, run_cli: Any) -> None:
    policy, _, log = _files(tmp_path)
    out = run_cli("grade", "-q", "-c", policy, log)
    assert out.returncode == 1, out.stderr
    assert '"outcome":"fail"' in out.stdout


def test_a_second_on_fail_command_is_refused_not_dropped(
    tmp_path: Path, run_cli: Any
) -> None:
    """Two --on-fail commands used to run only the last one."""
    policy, _, log = _files(tmp_path)
    out = run_cli("grade", "-c", policy, "--on-fail", "true", "--on-fail", "false", log)
    assert out.returncode == 2, out.stderr
    assert "Invalid value for '--on-fail': given 2 times" in out.stderr


def test_hook_install_refuses_a_second_policy(tmp_path: Path, run_cli: Any) -> None:
    policy, lenient, _ = _files(tmp_path)
    out = run_cli("hook", "install", "gemini", "-c", policy, "-c", lenient, "--dry-run")
    assert out.returncode == 2, out.stderr
    assert "given 2 times" in out.stderr


def _grade(cwd: Path, *args: str | Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "trajgrade", "grade", "-q", "--output", "jsonl"]
        + [str(a) for a in args],
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("missing/report.xml", "missing/report.xml: cannot write the JUnit report"),
        ("-", "--junit -: stdout has the verdicts"),
    ],
    ids=["no-such-directory", "stdout"],
)
def test_a_junit_report_that_cannot_be_written_is_refused_at_start(
    tmp_path: Path, where: str, expected: str
) -> None:
    """`--junit missing/report.xml` used to grade the whole run, then crash
    with a traceback and status 1 (a pass read as a fail, the report lost);
    `--junit -` wrote a file named "-". Now: status 2 before reading."""
    _, lenient, log = _files(tmp_path)
    proc = _grade(tmp_path, "-c", lenient, log, "--junit", where)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 2, stderr
    assert expected in stderr
    assert "Traceback" not in stderr
    assert stdout == ""  # nothing was graded
    assert not (tmp_path / "-").exists()


def test_a_junit_report_that_fails_at_the_end_is_status_2(tmp_path: Path) -> None:
    """The directory vanishes during the run: the verdicts are out, the
    report cannot be written; one error line naming it, status 2 (not a
    traceback and status 1, nor 'cannot write verdicts to stdout')."""
    policy, _, _ = _files(tmp_path)
    reports = tmp_path / "reports"
    reports.mkdir()
    proc = _grade(tmp_path, "-c", policy, "--junit", reports / "r.xml")
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.write(LOG)
    proc.stdin.flush()
    first = proc.stdout.readline()  # the early fail: start-up is over
    assert '"outcome":"fail"' in first
    reports.rmdir()
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 2, stderr
    assert f"{reports / 'r.xml'}: cannot write the JUnit report" in stderr
    assert "Traceback" not in stderr


@pytest.mark.parametrize(
    ("command", "option", "companion"),
    [
        ("grade", ["--on-fail-timeout", "5"], "--on-fail"),
        ("grade", ["--on-fail-concurrency", "2"], "--on-fail"),
        ("run", ["--on-fail-timeout", "5"], "--on-fail"),
        ("grade", ["--otlp-queue", "5"], "--otlp"),
        ("grade", ["--otlp-max-body", "100000"], "--otlp"),
        ("grade", ["--otlp-read-timeout", "3"], "--otlp"),
        ("grade", ["--otlp-token-env", "TOKEN"], "--otlp"),
        ("grade", ["--otlp-allow-remote"], "--otlp"),
        ("grade", ["--export-otlp-header", "Authorization=Bearer x"], "--export-otlp"),
    ],
)
def test_an_option_without_the_one_it_works_with_is_refused(
    tmp_path: Path, run_cli: Any, command: str, option: list[str], companion: str
) -> None:
    """docs/reliability.md: an option given without the one it works with is
    a usage error. These were ignored without a word (a token the operator
    believed was required, a timeout believed to bound a command)."""
    _, lenient, log = _files(tmp_path)
    tail = [log] if command == "grade" else ["--", "true"]
    out = run_cli(command, "-c", lenient, *option, *tail)
    assert out.returncode == 2, out.stderr
    assert f"{option[0]} works with {companion} only" in out.stderr


@pytest.mark.parametrize("template", ["", "{path.upper}", "{0}", "{trace}"])
def test_a_trace_id_template_that_cannot_name_a_trace_is_refused(
    tmp_path: Path, run_cli: Any, template: str
) -> None:
    """`--trace-id ''` named every trace the empty string and
    `{path.upper}` a method's repr: refused before anything is read."""
    _, lenient, log = _files(tmp_path)
    out = run_cli("grade", "-q", "-c", lenient, "--trace-id", template, log)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Invalid value for '--trace-id'" in out.stderr
    assert out.stdout == ""


def test_parent_names_the_directory_of_a_file_in_the_working_directory(
    tmp_path: Path,
) -> None:
    """`{parent}` of `x.jsonl` (no directory given) was the empty string."""
    work = tmp_path / "runs"
    work.mkdir()
    (work / "p.yaml").write_text(LENIENT)
    (work / "x.jsonl").write_text('{"type":"tool_call","name":"ls"}\n')
    grade = (sys.executable, "-m", "trajgrade", "grade", "-q", "--output", "jsonl")
    out = subprocess.run(
        [*grade, "-c", "p.yaml", "--trace-id", "{parent}/{stem}", "x.jsonl"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert '"trace_id":"runs/x"' in out.stdout


#: A record no reader knows: logged as a warning (`input_rejected`).
GARBAGE = "not json\n"


@pytest.mark.parametrize("command", ["grade", "run"])
@pytest.mark.parametrize(
    ("flags", "logged"),
    [
        (["-q", "--log-level", "error"], False),
        (["--log-level", "error", "-q"], False),
        (["-q"], True),
        (["-q", "--log-level", "debug"], True),
        (["--log-level", "error"], False),
    ],
    ids=["q-then-error", "error-then-q", "q-alone", "q-debug", "error-alone"],
)
def test_an_explicit_log_level_wins_over_quiet(
    tmp_path: Path, run_cli: Any, command: str, flags: list[str], logged: bool
) -> None:
    """`-q --log-level error` used to log warnings (-q set the level to
    warning whatever --log-level said). The explicit level wins; -q only
    changes the default, on every command that has both."""
    policy, _, _ = _files(tmp_path)
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text(GARBAGE)
    if command == "grade":
        args: list[str | Path] = ["grade", *flags, "-c", policy, garbage]
    else:
        agent = [sys.executable, "-c", f"print({GARBAGE.strip()!r})"]
        sink = ["--agent-output", "/dev/null"]
        args = ["run", *flags, "-c", policy, *sink, "--", *agent]
    out = run_cli(*args)
    assert out.returncode in (0, 5), out.stderr
    assert ('"input_rejected"' in out.stderr) is logged, out.stderr
    if flags[-1] == "debug":  # -q drops the summary, not the detail
        assert '"source_done"' in out.stderr or '"agent_' in out.stderr, out.stderr
        assert '"run_finished"' not in out.stderr, out.stderr


#: AI GO! coverage: the calls a trace must make come from its dataset row.
SCORERS = """\
scorers:
  - type: function_call_coverage
    function_calls: "{{ sample.function_calls }}"
"""
CALLS = "".join(
    f'{{"trace_id":"{t}","type":"tool_call","name":"search","call_id":"c1"}}\n'
    for t in ("t1", "t2", "t3")
)


def _rows(*ids: str) -> str:
    return "".join(f'{{"id": "{i}", "function_calls": ["search"]}}\n' for i in ids)


@pytest.mark.parametrize(
    ("ids", "expected"),
    [
        (
            ("calls.jsonl-1", "calls.jsonl-2"),  # keys that fit no trace id
            "2 of 2 rows matched no trace; 3 of 3 traces had no row (e.g. 't1')",
        ),
        (("t1", "t2", "t9"), "1 of 3 rows matched no trace; 1 of 3 traces had no row"),
        (("t1", "t2", "t3"), None),
    ],
    ids=["none-match", "some-match", "all-match"],
)
def test_dataset_rows_that_match_no_trace_are_reported(
    tmp_path: Path, ids: tuple[str, ...], expected: str | None
) -> None:
    """A dataset whose rows fit no trace id was taken without a word: the
    graders that need a row gave `error` verdicts and nothing said why. The
    run now warns in the log and in its summary, naming the file and the
    counts; the verdicts stay as they were."""
    (tmp_path / "scorers.yaml").write_text(SCORERS)
    (tmp_path / "calls.jsonl").write_text(CALLS)
    (tmp_path / "rows.jsonl").write_text(_rows(*ids))
    args = ["-c", "scorers.yaml", "--dataset", "rows.jsonl", "calls.jsonl"]
    jsonl = _grade(tmp_path, *args)
    out, err = jsonl.communicate(timeout=60)
    outcomes = {v["trace_id"]: v["outcome"] for v in map(json.loads, out.splitlines())}
    assert outcomes == {
        t: ("pass" if t in ids else "error") for t in ("t1", "t2", "t3")
    }
    warnings = [
        r
        for r in map(json.loads, err.splitlines())
        if r["event"] == "dataset_unmatched"
    ]
    pretty = subprocess.run(
        [sys.executable, "-m", "trajgrade", "grade", "--output", "pretty", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if expected is None:
        assert warnings == [], err
        assert "warning:" not in pretty.stdout
        return
    [warning] = warnings  # -q keeps warnings
    assert warning["level"] == "warning"
    assert warning["dataset"] == "rows.jsonl"
    assert f"dataset rows.jsonl: {expected}" in warning["reason"]
    assert "check --dataset-key" in warning["reason"]
    summary = pretty.stdout.split("\n\n")[-1]  # the closing summary
    assert f"warning: dataset rows.jsonl: {expected}" in summary, pretty.stdout
