"""Telemetry options refuse combinations that cannot work, with the fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from trajgrade.cli.main import main

POLICY = (
    Path(__file__).resolve().parents[2] / "docs" / "examples" / "telemetry-policy.yaml"
)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--otlp", "127.0.0.1:0", "--kafka-bootstrap", "x:1", "--topic", "t"],
            "two sources",
        ),
        (
            [
                "--kafka-bootstrap",
                "x:1",
                "--topic",
                "t",
                "--repartition",
                "--kafka-encoding",
                "otlp_json",
            ],
            "keyed by session",
        ),
        (["--otlp", "127.0.0.1:notaport"], "HOST:PORT"),
        (
            ["--otlp", "127.0.0.1:0", "--otlp-token-env", "TRAJGRADE_SURELY_UNSET"],
            "not set",
        ),
        (["--export-otlp", "ftp://x", "-"], "http(s) URL"),
        (
            [
                "--export-otlp",
                "http://127.0.0.1:9",
                "--export-otlp-header",
                "nokey",
                "-",
            ],
            "KEY=VALUE",
        ),
    ],
)
def test_usage_errors(args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["grade", "-c", str(POLICY), *args], input="")
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_otlp_on_a_public_address_needs_the_flag() -> None:
    result = CliRunner().invoke(
        main, ["grade", "-c", str(POLICY), "--otlp", "0.0.0.0:0"]
    )
    assert result.exit_code == 2
    assert "loopback only" in result.output
