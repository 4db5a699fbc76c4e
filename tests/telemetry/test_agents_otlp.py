"""End to end: the real Codex and Gemini CLI, offline against their scripted
fake models, export OpenTelemetry straight to ``trajgrade grade --otlp``;
their sessions (write a file, 5 model calls) fail a tool rule and a token
budget live. Codex sends protobuf (``binary``), Gemini CLI JSON."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from tests.hooks._agents import base_env, fake_server, npm_agent
from tests.hooks.test_real_agents_codex import CODEX_VERSION
from tests.hooks.test_real_agents_gemini import GEMINI_VERSION, SETTINGS
from tests.telemetry._grade import Grader

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hooks"
POLICY = """graders:
  - type: tool-calls
    name: no-notes
    config:
      disallowed:
        - {name: "^(apply_patch|write_file)$"}
  - type: token-budget
    name: tokens
    config: {max: 300}
"""


def _check(grader: Grader) -> None:
    live = grader.wait_for(2)
    assert grader.proc.poll() is None  # decided while the receiver runs
    assert all(v["early"] for v in live)
    assert grader.stop() == 1
    finals = {v["grader"]: v["outcome"] for v in live + grader.rest() if v["final"]}
    assert finals == {"no-notes": "fail", "tokens": "fail"}


def test_codex_exports_protobuf_to_trajgrade(tmp_path: Path) -> None:
    exe = npm_agent("codex", "@openai/codex", CODEX_VERSION, "node_modules/.bin/codex")
    harness = FIXTURES / "codex" / "harness"
    policy = tmp_path / "p.yaml"
    policy.write_text(POLICY)
    work = tmp_path / "work"
    work.mkdir()
    codex_home = tmp_path / "home" / "codex_home"
    codex_home.mkdir(parents=True)
    grader = Grader(policy)
    try:
        with fake_server(
            harness / "fake_openai.py", harness / "codex_script.json", tmp_path / "srv"
        ) as port:
            config = (harness / "config.toml").read_text().replace("PORT", str(port))
            otel = f'exporter = {{ otlp-http = {{ endpoint = "http://127.0.0.1:{grader.port}/v1/logs", protocol = "binary" }} }}\nlog_user_prompt = false'
            (codex_home / "config.toml").write_text(
                config.replace('exporter = "none"', otel)
            )
            proc = subprocess.run(
                [str(exe), "exec", "--json", "--skip-git-repo-check", "do the task"],
                cwd=work,
                env=base_env(tmp_path / "home")
                | {
                    "CODEX_HOME": str(codex_home),
                    "FAKE_OPENAI_API_KEY": "dummy-key-for-fake-server",
                },
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=90,
                check=False,
            )
            assert proc.returncode == 0, proc.stderr[-2000:]
        _check(grader)
    finally:
        grader.stop()


def test_gemini_cli_exports_json_to_trajgrade(tmp_path: Path) -> None:
    exe = npm_agent(
        "gemini", "@google/gemini-cli", GEMINI_VERSION, "node_modules/.bin/gemini"
    )
    harness = FIXTURES / "gemini-cli" / "harness"
    policy = tmp_path / "p.yaml"
    policy.write_text(POLICY)
    work = tmp_path / "work"
    work.mkdir()
    script = tmp_path / "script.json"
    script.write_text(
        (harness / "gemini_script.json").read_text().replace("__WORK__", str(work))
    )
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    grader = Grader(policy)
    try:
        settings = SETTINGS | {
            "telemetry": {
                "enabled": True,
                "target": "local",
                "otlpEndpoint": f"http://127.0.0.1:{grader.port}",
                "otlpProtocol": "http",
                "logPrompts": True,
            }
        }
        (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
        with fake_server(harness / "fake_gemini.py", script, tmp_path / "srv") as port:
            proc = subprocess.run(
                [
                    str(exe),
                    "-p",
                    "do the task",
                    "--output-format",
                    "stream-json",
                    "--yolo",
                ],
                cwd=work,
                env=base_env(home)
                | {
                    "GEMINI_API_KEY": "dummy-key-for-fake-server",
                    "GOOGLE_GEMINI_BASE_URL": f"http://127.0.0.1:{port}",
                },
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=90,
                check=False,
            )
            assert proc.returncode == 0, proc.stderr[-2000:]
        _check(grader)
    finally:
        grader.stop()
