"""``plan``: how ``grade`` runs a request, decided without click or I/O."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from trajgrade.cli.grade_request import (
    GradeRequest,
    InputRequest,
    MetricsOptions,
    OutputRequest,
    PolicyRequest,
    Terminal,
)
from trajgrade.cli.plan import (
    LIVE_IDLE_TIMEOUT,
    Display,
    Export,
    PlanError,
    Runner,
    plan,
)
from trajgrade.kafka.options import KafkaOptions
from trajgrade.runtime.actions import ActionOptions
from trajgrade.telemetry import OtlpOptions
from trajgrade.telemetry.options import Telemetry

if TYPE_CHECKING:
    from pathlib import Path

POLICY = PolicyRequest(config_path="policy.yaml")
KAFKA = KafkaOptions(bootstrap="broker:9092", topic="events")
#: A person at a terminal: every stream a tty.
AT_TERMINAL = Terminal(stdout_tty=True, stderr_tty=True, stdin_tty=True)


def _request(**fields: Any) -> GradeRequest:
    fields.setdefault("inputs", InputRequest())
    return GradeRequest(policy=POLICY, **fields)


def test_files_piped_on_read_once_as_json_lines() -> None:
    p = plan(_request(inputs=InputRequest(paths=("a.jsonl", "b.jsonl"))))
    assert p.runner is Runner.BATCH
    assert p.display is Display.JSONL and not p.pretty and not p.color
    assert p.options.inputs == ["a.jsonl", "b.jsonl"]
    assert p.options.idle_timeout is None and not p.options.live
    assert p.kafka is None and p.verdicts_topic is None
    assert p.junit is None and p.export is None
    assert not p.hint_stdin and not p.summarised


def test_no_input_reads_stdin_and_hints_at_a_terminal() -> None:
    p = plan(_request(terminal=AT_TERMINAL))
    assert p.runner is Runner.BATCH
    assert p.options.inputs == ["-"]
    assert p.hint_stdin and p.status_label == "reading stdin"
    assert p.display is Display.STATUS_LINE and p.color and p.summarised


def test_quiet_at_a_terminal_is_readable_text_without_status_or_hint() -> None:
    p = plan(_request(terminal=AT_TERMINAL, output=OutputRequest(quiet=True)))
    assert p.display is Display.PRETTY and p.color
    assert not p.hint_stdin


def test_pretty_into_a_pipe_has_no_colour_and_jsonl_stays_jsonl_on_a_tty() -> None:
    piped = plan(_request(output=OutputRequest(output="pretty")))
    assert piped.display is Display.PRETTY and not piped.color
    assert not piped.summarised
    on_tty = plan(_request(output=OutputRequest(output="jsonl"), terminal=AT_TERMINAL))
    assert on_tty.display is Display.JSONL and not on_tty.color


def test_follow_and_watch_are_live_with_the_default_idle_timeout() -> None:
    given = InputRequest(
        paths=("s.jsonl",), follow=True, watch_dirs=("logs",), glob_pattern="*.log"
    )
    p = plan(_request(inputs=given))
    assert p.runner is Runner.FOLLOW
    assert p.options.follow and p.options.watch == [("logs", "*.log")]
    assert p.options.idle_timeout == LIVE_IDLE_TIMEOUT
    watch_only = plan(_request(inputs=InputRequest(watch_dirs=("logs",))))
    assert watch_only.options.inputs == []  # not stdin
    never = plan(
        _request(inputs=InputRequest(paths=("s",), follow=True, idle_timeout=0))
    )
    assert never.options.idle_timeout is None


def test_run_options_carry_every_input_output_and_metrics_option() -> None:
    given = InputRequest(
        paths=("a",),
        fmt="codex",
        clock="wall",
        tick_interval=0.5,
        max_line_bytes=4096,
        trace_template="{stem}",
        idle_timeout=9.0,
        state_dir="st",
        checkpoint_interval=2.0,
    )
    p = plan(
        _request(
            inputs=given,
            output=OutputRequest(decisions_path="-"),
            metrics=MetricsOptions(port=9100, host="0.0.0.0"),
        )
    )
    o = p.options
    assert (o.fmt, o.clock, o.tick_interval, o.max_line_bytes) == (
        "codex",
        "wall",
        0.5,
        4096,
    )
    assert (o.trace_template, o.idle_timeout) == ("{stem}", 9.0)
    assert (o.state_dir, o.checkpoint_interval, o.decisions) == ("st", 2.0, "-")
    assert (o.metrics_port, o.metrics_host) == (9100, "0.0.0.0")
    assert o.samples is None  # read by the command, not planned


def test_otlp_receives_instead_of_reading_stdin() -> None:
    otlp = OtlpOptions(port=0)
    p = plan(_request(telemetry=Telemetry(otlp=otlp), terminal=AT_TERMINAL))
    assert p.runner is Runner.OTLP
    assert p.options.otlp == otlp and p.options.inputs == []
    assert p.options.idle_timeout == LIVE_IDLE_TIMEOUT
    assert not p.open_receiver
    # Files given beside it are still read.
    with_files = plan(
        _request(inputs=InputRequest(paths=("a",)), telemetry=Telemetry(otlp=otlp))
    )
    assert with_files.options.inputs == ["a"]


def test_a_remote_receiver_without_a_token_is_flagged() -> None:
    remote = OtlpOptions(host="0.0.0.0", allow_remote=True)
    assert plan(_request(telemetry=Telemetry(otlp=remote))).open_receiver
    guarded = OtlpOptions(host="0.0.0.0", allow_remote=True, token="s3cret")
    assert not plan(_request(telemetry=Telemetry(otlp=guarded))).open_receiver


def test_kafka_runs_the_kafka_runner_and_may_write_a_topic() -> None:
    p = plan(_request(kafka=KAFKA))
    assert p.runner is Runner.KAFKA and p.kafka == KAFKA
    assert p.verdicts_topic is None
    topic = KafkaOptions(bootstrap="b:1", topic="events", verdicts_topic="verdicts")
    assert plan(_request(kafka=topic)).verdicts_topic == "verdicts"


def test_telemetry_sinks_and_actions_are_planned() -> None:
    tel = Telemetry(
        export_url="http://127.0.0.1:4318",
        export_headers={"Authorization": "Bearer x"},
        junit="report.xml",
    )
    actions = ActionOptions(fail_fast=True, on_fail="notify")
    p = plan(_request(telemetry=tel, actions=actions))
    assert p.junit == "report.xml"
    assert p.export == Export(
        url="http://127.0.0.1:4318", headers={"Authorization": "Bearer x"}
    )
    assert p.actions == actions


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"kafka": KAFKA, "inputs": InputRequest(paths=("a.jsonl",))},
            "with --kafka-bootstrap the input is topic 'events'; drop the INPUT arguments (a.jsonl)",
        ),
        (
            {"inputs": InputRequest(follow=True)},
            "--follow needs the files to follow",
        ),
        (
            {"inputs": InputRequest(paths=("-",), follow=True)},
            "stdin cannot be followed (it is read live already); drop '-'",
        ),
        (
            {"inputs": InputRequest(paths=("a",), watch_dirs=("d",))},
            "with --watch, input files are followed too: add --follow",
        ),
        (
            # A closed stdout wins over the input problems.
            {
                "inputs": InputRequest(follow=True),
                "terminal": Terminal(stdout_open=False),
            },
            "stdout is closed, so the verdicts have nowhere to go; redirect it (to /dev/null to keep only the exit status)",
        ),
        (
            {"kafka": KAFKA, "telemetry": Telemetry(otlp=OtlpOptions())},
            "--otlp and --kafka-bootstrap are two sources for one run; run one trajgrade for each",
        ),
        (
            {"kafka": KAFKA, "inputs": InputRequest(state_dir="st")},
            "--state, --follow and --watch are for files; a Kafka run keeps its state in the changelog topic",
        ),
        (
            {"kafka": KAFKA, "inputs": InputRequest(watch_dirs=("d",))},
            "--state, --follow and --watch are for files; a Kafka run keeps its state in the changelog topic",
        ),
    ],
)
def test_options_that_cannot_work_together_are_refused(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(PlanError) as caught:
        plan(_request(**fields))
    assert str(caught.value) == message


def test_the_command_reports_a_refused_plan_as_a_usage_error(tmp_path: Path) -> None:
    """What the CLI makes of a PlanError: click's usage error, status 2."""
    from click.testing import CliRunner

    from trajgrade.cli.main import main

    policy = tmp_path / "policy.yaml"
    policy.write_text("graders:\n  - {type: loop, config: {repeats: 2}}\n")
    result = CliRunner().invoke(main, ["grade", "-c", str(policy), "--follow"])
    assert result.exit_code == 2
    assert "Error: --follow needs the files to follow" in result.output


def test_the_planned_sinks_declare_what_they_take(tmp_path: Path) -> None:
    """JUnit is teed beside stdout but takes no guard decisions (so the
    engine need not judge every call for it); the exporter counts for
    /metrics and takes them only with --export-decisions."""
    from trajgrade.cli.grade_run import open_sinks
    from trajgrade.telemetry.export import EvaluationExporter
    from trajgrade.telemetry.junit import JunitSink

    junit_only = plan(_request(telemetry=Telemetry(junit=str(tmp_path / "r.xml"))))
    status, tee = open_sinks(junit_only, (), log=None)
    assert status is None
    assert [type(s) for s in tee.more] == [JunitSink]
    assert tee.decision_sinks == [] and tee.collectors == []
    exporting = plan(_request(telemetry=Telemetry(export_url="http://127.0.0.1:9")))
    _, tee = open_sinks(exporting, (), log=None)
    try:
        (exporter,) = tee.more
        assert isinstance(exporter, EvaluationExporter)
        assert tee.decision_sinks == [] and tee.collectors == [exporter]
    finally:
        exporter.close()
    asked = plan(
        _request(
            telemetry=Telemetry(export_url="http://127.0.0.1:9"),
            output=OutputRequest(export_decisions=True),
        )
    )
    _, tee = open_sinks(asked, (), log=None)
    try:
        (exporter,) = tee.more
        assert tee.decision_sinks == [exporter] and tee.collectors == [exporter]
    finally:
        exporter.close()
