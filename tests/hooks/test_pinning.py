"""The installed hook pins its policy: a changed, missing or broken policy
denies every tool call (through the real `trajgrade hook` process), however
the hook runs, and says how to re-install; re-installing re-pins."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.hooks._installed import POLICY, command, denied, install, payload, run_hook

from trajgrade.hooks.pin import PinError, digest_of, pinned_bytes


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "policy.yaml").write_text(POLICY)
    proc = install(tmp_path, "-c", "policy.yaml")
    assert proc.returncode == 0, proc.stderr
    return tmp_path


def test_install_pins_the_digest_and_is_fail_closed(home: Path) -> None:
    words = command(home)
    pin = words[words.index("--pin") + 1]
    assert pin == digest_of((home / "policy.yaml").read_bytes())
    assert "--fail-closed" in words and "--host-key" in words
    # The command never holds the host key itself, only its id.
    key = (home / ".local/state/trajgrade/hooks/host.key").read_bytes()
    assert key.hex() not in " ".join(words) and len(key) == 32
    assert (
        os.stat(home / ".local/state/trajgrade/hooks/host.key").st_mode & 0o777 == 0o600
    )


def test_the_pinned_policy_grades_as_usual(home: Path) -> None:
    answer, _ = run_hook(home, payload("03-PreToolUse"))
    assert denied(answer) is None


@pytest.mark.parametrize(
    "damage",
    [
        # a valid, permissive replacement: never adopted silently
        lambda p: p.write_text(
            "graders:\n  - type: tool-call-count\n    config: {max: 100000}\n"
        ),
        lambda p: p.write_text("graders: ["),  # broken: never fails open
        lambda p: p.unlink(),  # missing
        lambda p: p.write_text(POLICY + "# a comment\n"),  # any edit at all
    ],
    ids=["replaced", "broken", "missing", "comment"],
)
def test_a_changed_policy_denies_every_call(home: Path, damage: object) -> None:
    policy = home / "policy.yaml"
    stat = policy.stat()
    damage(policy)  # type: ignore[operator]
    if policy.exists():  # the same mtime: a cache keyed on it would be fooled
        os.utime(policy, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    answer, _ = run_hook(home, payload("03-PreToolUse"))
    reason = denied(answer)
    assert reason is not None
    assert f"trajgrade hook install claude-code -c {policy}" in reason
    # The SessionStart gets a notice the user sees.
    start, _ = run_hook(home, payload("01-SessionStart"))
    assert start is not None and "install again" in str(start)


def test_fail_open_does_not_open_a_pinned_policy(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text(POLICY)
    proc = install(tmp_path, "-c", "policy.yaml", "--fail-open")
    assert proc.returncode == 0
    assert "tripwire" in proc.stderr
    assert "--fail-open" in command(tmp_path)
    (tmp_path / "policy.yaml").write_text("graders: [")
    answer, _ = run_hook(tmp_path, payload("03-PreToolUse"))
    assert denied(answer) is not None


def test_installing_again_re_pins(home: Path) -> None:
    (home / "policy.yaml").write_text(POLICY.replace("max: 1", "max: 5"))
    assert denied(run_hook(home, payload("03-PreToolUse"))[0]) is not None
    assert install(home, "-c", "policy.yaml").returncode == 0
    assert denied(run_hook(home, payload("03-PreToolUse"))[0]) is None


@settings(max_examples=50, deadline=None)
@given(st.binary(max_size=200), st.binary(min_size=1, max_size=8))
def test_any_other_bytes_fail_the_pin(data: bytes, extra: bytes) -> None:
    """Rule: only the exact pinned bytes pass."""
    import tempfile

    with tempfile.NamedTemporaryFile(delete=False) as f:
        f.write(data + extra)
    try:
        with pytest.raises(PinError, match="has changed"):
            pinned_bytes(f.name, digest_of(data), "codex")
        assert pinned_bytes(f.name, digest_of(data + extra), "codex") == data + extra
    finally:
        os.unlink(f.name)
