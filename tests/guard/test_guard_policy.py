"""The example guard policy (``src/trajgrade/examples/guard.yaml``) on every
real recording of Claude Code, Codex and Gemini CLI in
``tests/fixtures/guard-live`` (provenance in its SOURCES.md): hook payloads,
transcripts, stream-json, ``codex exec --json`` and rollouts.

One policy, every form: each call is mapped to the scripted model turn that
made it, and every form of every run must judge that turn's call the same
way -- every scripted call allowed (``cat /etc/hostname`` too: the host
name is no secret, see docs/guard-matching.md), and no call a
configuration error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests._support import finals, suite

from trajgrade.events import Event, ToolCall
from trajgrade.formats import detect, open_reader
from trajgrade.graders.matching._tool_match import ArgMissingError, Matcher, ToolMatch
from trajgrade.hooks.payloads import OpenCall, translate
from trajgrade.verdicts import Outcome

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "src" / "trajgrade" / "examples" / "guard.yaml"
LIVE = ROOT / "tests" / "fixtures" / "guard-live"
HOOK_AGENT = {"claude-code": "claude-code", "codex": "codex", "gemini-cli": "gemini"}
RUNS = sorted(p.relative_to(LIVE).as_posix() for p in LIVE.glob("*/*") if p.is_dir())

#: The scripted model's turns (each corpus README), found by what they touch.
TURNS = {
    "echo hello": 1,
    "/etc/hostname": 2,
    "note.txt": 3,
    "/nonexistent-trajgrade-path": 4,
}
#: What the guard decides per turn: the disallowed rules that match it.
EXPECTED: dict[int, list[str]] = {1: [], 2: [], 3: [], 4: []}


def _policy() -> dict[str, Any]:
    data = msgspec.yaml.decode(POLICY.read_bytes())
    assert isinstance(data, dict)
    return data


def _matchers() -> list[Matcher]:
    guard = next(g for g in _policy()["graders"] if g.get("name") == "guard")
    specs = msgspec.convert(guard["config"]["disallowed"], list[ToolMatch])
    return [Matcher(s, f"disallowed[{i}]", 1.0) for i, s in enumerate(specs)]


def _file_events(path: Path) -> list[Event]:
    data = path.read_bytes()
    fmt = detect(data.split(b"\n", 1)[0])
    assert fmt is not None, path
    reader = open_reader(fmt, source=str(path), default_trace="t")
    events, errors, _ = reader.feed(data, 1)
    more, errors2 = reader.close()
    assert not errors + errors2, (path, errors + errors2)
    return events + more


def _hook_events(run: Path) -> list[Event]:
    agent = HOOK_AGENT[run.parent.name]
    open_calls: list[OpenCall] = []
    n = 0
    out: list[Event] = []
    for hook in sorted((run / "hooks").glob("*.json")):
        payload = json.loads(hook.read_text())
        t, n = translate(agent, payload, now=0.0, open_calls=open_calls, next_call=n)
        out.extend(t.events)
    return out


def _forms(run: Path) -> dict[str, list[Event]]:
    forms = {f.name: _file_events(f) for f in sorted(run.glob("*.jsonl"))}
    forms["hooks"] = _hook_events(run)
    return forms


def _turn(call: ToolCall) -> int:
    text = json.dumps([call.args, call.args_raw])
    found = [t for key, t in TURNS.items() if key in text]
    assert len(found) == 1, (call.name, text)
    return found[0]


def _judge(matchers: list[Matcher], call: ToolCall) -> list[str]:
    # matches_call raises ArgMissingError for a configuration error: the
    # policy must never be one on a real call.
    return [m.where for m in matchers if m.matches_call(call)]


@pytest.mark.parametrize("run", RUNS)
def test_one_policy_judges_every_form_alike(run: str) -> None:
    matchers = _matchers()
    judged: dict[str, dict[int, list[str]]] = {}
    for form, events in _forms(LIVE / run).items():
        calls = [e for e in events if isinstance(e, ToolCall)]
        assert calls, (run, form)
        turns = [_turn(c) for c in calls]
        assert turns == sorted(turns), (run, form, turns)  # in script order
        judged[form] = {_turn(c): _judge(matchers, c) for c in calls}
        for turn, rules in judged[form].items():
            assert rules == EXPECTED[turn], (run, form, turn, rules)
    # Every form was read (hooks plus at least one log), and the hook
    # payloads saw every call the model made before the run stopped.
    assert len(judged) >= 3, judged.keys()
    seen = set().union(*(set(j) for j in judged.values()))
    assert set(judged["hooks"]) == seen


def test_every_recording_is_covered() -> None:
    """The fixture holds every run of the three live corpora (base + blocking)."""
    assert len(RUNS) == 15
    forms = [f for run in RUNS for f in (LIVE / run).glob("*.jsonl")]
    assert len(forms) == 30


@pytest.mark.parametrize("run", RUNS)
def test_the_policy_grades_each_log_as_the_guard_decides(run: str) -> None:
    """Through the engine: every log passes ``guard`` (the hostname call
    included) and the call budget."""
    policy = suite(POLICY.read_text())
    for form, events in _forms(LIVE / run).items():
        verdicts = finals(policy, events)
        guard = [v for (_, grader), v in verdicts.items() if grader == "guard"]
        assert len(guard) == 1, (run, form, verdicts)
        assert guard[0].outcome is Outcome.PASS, (run, form, guard[0].evidence)
        count = [v for (_, g), v in verdicts.items() if g == "tool-call-count"]
        assert [v.outcome for v in count] == [Outcome.PASS]


_LOGS = {"claude-code": "transcript.jsonl", "codex": "rollout.jsonl"}
_LOGS["gemini-cli"] = "transcript.jsonl"


@pytest.mark.slow
@pytest.mark.parametrize("agent", sorted(HOOK_AGENT))
def test_cold_hook_processes_refuse_the_same_call(agent: str, tmp_path: Path) -> None:
    """The base run's payloads, each answered by a fresh `trajgrade hook`
    process under the example policy, with the hostname call made a read of
    `/etc/shadow`: that call alone is refused, by the `guard` rule, on every
    agent (the recorded `cat /etc/hostname` runs: test_every_recorded_call_runs)."""
    from tests.hooks._replay import run_hook

    run = LIVE / agent / "base"
    log = tmp_path / _LOGS[agent]
    log.write_bytes((run / _LOGS[agent]).read_bytes())
    hook_agent = HOOK_AGENT[agent]
    gate = "BeforeTool" if hook_agent == "gemini" else "PreToolUse"
    refused: list[str] = []
    for path in sorted((run / "hooks").glob("*.json")):
        text = path.read_text().replace("/etc/hostname", "/etc/shadow")
        payload = json.loads(text)
        payload["transcript_path"] = str(log)
        proc = run_hook(
            hook_agent, payload, "-c", POLICY, "--state-dir", tmp_path / "state"
        )
        assert proc.returncode == 0, proc.stderr
        if payload["hook_event_name"] == gate and proc.stdout:
            refused.append(json.dumps(payload["tool_input"]) + proc.stdout)
    assert len(refused) == 1, refused
    assert "/etc/shadow" in refused[0] and "guard" in refused[0]


@pytest.mark.parametrize("agent", sorted(HOOK_AGENT))
def test_every_recorded_call_runs(agent: str, tmp_path: Path) -> None:
    """The base run as recorded, through the hook path in-process: no call
    refused or asked, `cat /etc/hostname` included (no secret: `uname -n`
    prints the same name without a file)."""
    from trajgrade import load_suite
    from trajgrade.hooks.session import new_state, step

    policy = load_suite(POLICY)
    hook_agent = HOOK_AGENT[agent]
    payloads = [
        json.loads(p.read_text())
        for p in sorted((LIVE / agent / "base" / "hooks").glob("*.json"))
    ]
    state = new_state(hook_agent, payloads[0]["session_id"], policy, 0.0)
    answered = [step(policy, state, p, now=0.0, fail_closed=True) for p in payloads]
    assert any("/etc/hostname" in json.dumps(p) for p in payloads)
    assert [(d.deny, d.ask) for d in answered if d.deny or d.ask] == []


_VIEW_PATTERNS = {
    "command": ["^echo ", "hostname$", "nonexistent", "^ls /", "\\bcat\\b"],
    "program": ["^echo$", "^cat$", "^(cat|ls)$", "^bash$", "^sh$"],
    # Suffix patterns: Codex's patch names note.txt relative to the cwd, its
    # exec stream absolute (see docs/guard-matching.md).
    "path": ["(^|/)note\\.txt$", "\\.txt$", "/note\\.txt$", "(^|/)\\.env$"],
}
_ENTRY = st.fixed_dictionaries(
    {"kind": st.sampled_from(["shell", "read", "write", "edit", ["write", "edit"]])},
    optional={
        view: st.sampled_from(patterns) for view, patterns in _VIEW_PATTERNS.items()
    },
)
_ALL_FORMS = {run: _forms(LIVE / run) for run in RUNS}


def _outcome(m: Matcher, call: ToolCall) -> str:
    try:
        return "match" if m.matches_call(call) else "-"
    except ArgMissingError:
        return "error"


@settings(max_examples=150, deadline=None)
@given(st.lists(_ENTRY, min_size=1, max_size=3))
def test_any_agent_neutral_policy_judges_every_form_alike(
    entries: list[dict[str, Any]],
) -> None:
    """For any kind/view policy, each run's forms agree on every call."""
    matchers = [
        Matcher(msgspec.convert(e, ToolMatch), f"disallowed[{i}]", 1.0)
        for i, e in enumerate(entries)
    ]
    for run, forms in _ALL_FORMS.items():
        by_turn: dict[int, tuple[str, list[str]]] = {}
        for form, events in forms.items():
            for call in (e for e in events if isinstance(e, ToolCall)):
                got = [_outcome(m, call) for m in matchers]
                seen = by_turn.setdefault(_turn(call), (form, got))
                assert seen[1] == got, (run, _turn(call), seen[0], form, entries)
