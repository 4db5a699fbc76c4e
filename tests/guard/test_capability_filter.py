"""``capability:`` on tool-calls entries and guard rules, through the user's
path: policy text -> compile -> a trace -> the verdict."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests._support import call, finals, one, result

from trajgrade.errors import ConfigError
from trajgrade.verdicts import Outcome


def _verdict(policy: str, command: str, *, with_result: bool = False) -> Outcome:
    events = [call("Bash", "c1", command=command)]
    if with_result:
        events.append(result("c1"))
    (verdict,) = finals(one("tool-calls", policy), events).values()
    return verdict.outcome


NETWORK = "disallowed: [{kind: shell, capability: network}]"


@pytest.mark.parametrize(
    "command",
    [
        "curl -s https://example.com",
        "sudo -u nobody timeout 5 wget http://x",
        "git clone https://example.com/r.git",
        "pip install requests",
        """python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:9')" """,
        "perl -MIO::Socket -e 'IO::Socket::INET->new(q(127.0.0.1:9))'",
        "ls && bash -c 'nc 127.0.0.1 9 < /dev/null'",
        "echo x | ssh host cat",
    ],
)
def test_a_network_program_however_spelt_is_refused(command: str) -> None:
    assert _verdict(NETWORK, command) is Outcome.FAIL


@pytest.mark.parametrize(
    "command", ["ls -la", "git status", "python3 -c 'print(1)'", "cat a | wc -l"]
)
def test_programs_without_the_capability_pass(command: str) -> None:
    assert _verdict(NETWORK, command) is Outcome.PASS


@pytest.mark.parametrize(
    "command", ["/usr/bin/cur? http://x", "$CMD x", "some-unknown-tool x", "cat $("]
)
def test_an_unknown_program_matches_disallowed_and_not_required(command: str) -> None:
    assert _verdict(NETWORK, command) is Outcome.FAIL
    required = "required: [{kind: shell, capability: network}]"
    assert _verdict(required, command, with_result=True) is Outcome.FAIL


def test_required_is_met_by_a_known_program_with_the_capability() -> None:
    required = "required: [{kind: shell, capability: [privilege, network]}]"
    assert _verdict(required, "pkexec id", with_result=True) is Outcome.PASS
    assert _verdict(required, "ls", with_result=True) is Outcome.FAIL


def test_a_list_matches_any_of_its_capabilities() -> None:
    policy = "disallowed: [{kind: shell, capability: [privilege, signal]}]"
    assert _verdict(policy, "run0 id") is Outcome.FAIL
    assert _verdict(policy, "pkill -f x") is Outcome.FAIL
    assert _verdict(policy, "echo hi") is Outcome.PASS


def test_guard_rules_take_capability_too() -> None:
    s = one(
        "rate-limit",
        "match: {kind: shell, capability: network}\nmax: 1\nwindow: 60s",
    )
    events = [call("Bash", f"c{i}", command="curl http://x") for i in range(2)]
    (verdict,) = finals(s, [*events, call("Bash", "c3", command="ls")]).values()
    assert verdict.outcome is Outcome.FAIL


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("netwrok", r"unknown capability 'netwrok'; did you mean 'network'\?"),
        ("[read, privilidge]", r"did you mean 'privilege'\?"),
        ("runs-agent-code", r"protect\.capabilities\.runs-agent-code"),
        ("[]", "matches nothing"),
    ],
)
def test_a_bad_name_is_a_located_error_with_the_fix(value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=r"disallowed\[0\]\.capability.*" + message):
        one("tool-calls", f"disallowed: [{{kind: shell, capability: {value}}}]")


def test_check_prints_the_file_and_line(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "graders:\n  - type: tool-calls\n    config:\n      disallowed:\n"
        "        - {kind: shell, capability: netwrok}\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "trajgrade", "check", "-c", str(policy)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    assert f"{policy}:5" in done.stderr, done.stderr
    assert "did you mean 'network'" in done.stderr


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["curl", "wget", "nc", "ssh", "scp", "socat", "aria2c"]))
def test_quoting_the_program_does_not_hide_it(program: str) -> None:
    spelt = "".join(f"'{c}'" if i % 2 else c for i, c in enumerate(program))
    assert _verdict(NETWORK, f"{spelt} 127.0.0.1") is Outcome.FAIL
