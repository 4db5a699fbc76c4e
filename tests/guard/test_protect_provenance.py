"""Provenance: the files the agent wrote, remembered (bounded) and
recognised when a later call runs them; the state as a checkpoint."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.guard._protect_support import CWD, d, policy, r, run, shell, tool, w, x

from trajgrade.graders.protect.decide import decide
from trajgrade.graders.protect.facts import CallFacts
from trajgrade.graders.protect.state import WRITTEN_MAX, ProtectState, record_writes
from trajgrade.verdicts import Action

STRICT = {"profile": "strict"}


def after(*writes: CallFacts) -> ProtectState:
    state = ProtectState()
    for facts in writes:
        record_writes(state, facts, CWD)
    return state


def asked_for_agent_code(facts: CallFacts, state: ProtectState) -> bool:
    j = decide(policy(STRICT), facts, state, cwd=CWD)
    return j is not None and j.rule == "protect.capabilities.runs-agent-code"


WROTE_SCRIPT = tool("Write", "write", w(f"{CWD}/run.sh"))

RUNS_IT = [
    pytest.param(shell(run("./run.sh"), touches=(x(f"{CWD}/run.sh"),)), id="./run.sh"),
    pytest.param(
        shell(run("sh", "run.sh", caps=("run-code",)), touches=(r(f"{CWD}/run.sh"),)),
        id="sh run.sh",
    ),
    pytest.param(shell(run("bash", "run.sh")), id="bash run.sh (a word, no touch)"),
    pytest.param(
        shell(
            run("cat", "run.sh"),
            run("sh", caps=("run-code",)),
            touches=(r(f"{CWD}/run.sh"),),
        ),
        id="cat run.sh | sh",
    ),
    pytest.param(shell(run("source", f"{CWD}/run.sh")), id="source run.sh"),
]


@pytest.mark.parametrize("facts", RUNS_IT)
def test_running_a_written_file_is_runs_agent_code(facts):
    assert asked_for_agent_code(facts, after(WROTE_SCRIPT))
    assert not asked_for_agent_code(facts, ProtectState())


@pytest.mark.parametrize(
    ("written", "runner"),
    [
        (f"{CWD}/tests/test_x.py", ("pytest", "-q")),
        (f"{CWD}/conftest.py", ("pytest",)),
        (f"{CWD}/tests/test_x.py", ("python3", "-m", "pytest")),
        (f"{CWD}/src/a.js", ("npm", "test")),
        (f"{CWD}/a_test.go", ("go", "test", "./...")),
        (f"{CWD}/src/lib.rs", ("cargo", "test")),
        (f"{CWD}/tox.ini", ("tox",)),
        (f"{CWD}/src/a.test.js", ("jest",)),
        (f"{CWD}/Makefile", ("make",)),
        (f"{CWD}/package.json", ("npm", "run", "build")),
        (f"{CWD}/.git/hooks/pre-commit", ("git", "commit", "-m", "x")),
        (f"{CWD}/setup.py", ("pip", "install", "-e", ".")),
    ],
)
def test_runners_that_pick_up_written_code(written, runner):
    facts = shell(run(*runner))
    state = after(tool("Write", "write", w(written)))
    assert asked_for_agent_code(facts, state), runner


def test_runners_over_an_untouched_tree_and_unrelated_programs_are_not_agent_code():
    assert not asked_for_agent_code(shell(run("pytest")), ProtectState())
    state = after(tool("Write", "write", w(f"{CWD}/notes.md")))
    for argv in (
        ("git", "status"),
        ("ls",),
        ("cat", "notes.md"),
        ("make",),
        ("python3", "-m", "http.server"),
    ):
        assert not asked_for_agent_code(shell(run(*argv)), state), argv


def test_make_is_agent_code_only_after_a_makefile():
    state = after(tool("Write", "write", w("/elsewhere/x.c")))
    assert not asked_for_agent_code(shell(run("make")), state)
    assert asked_for_agent_code(
        shell(run("make")), after(tool("Write", "write", w(f"{CWD}/Makefile")))
    )


def test_the_strict_profile_asks_and_names_the_file():
    j = decide(policy(STRICT), shell(run("sh", "run.sh")), after(WROTE_SCRIPT), cwd=CWD)
    assert j is not None and j.action is Action.ASK and "run.sh" in j.reason


def test_only_writes_are_remembered_and_a_glob_write_forgets():
    state = after(shell(run("rm"), touches=(d(f"{CWD}/old.sh"), r(f"{CWD}/a.sh"))))
    assert not state.written and not state.tree_changed
    state = after(shell(run("cp"), touches=(w(f"{CWD}/*.sh", pattern=True),)))
    assert state.forgot and state.tree_changed
    # Forgotten: any script of the project counts.
    assert asked_for_agent_code(
        shell(run("./x.sh"), touches=(x(f"{CWD}/x.sh"),)), state
    )


def test_the_state_is_bounded_and_keeps_the_conservative_answer():
    state = after(
        *(tool("Write", "write", w(f"{CWD}/f{i}.sh")) for i in range(WRITTEN_MAX + 10))
    )
    assert len(state.written) == WRITTEN_MAX
    assert f"{CWD}/f0.sh" not in state.written and state.forgot
    assert asked_for_agent_code(
        shell(run("./f0.sh"), touches=(x(f"{CWD}/f0.sh"),)), state
    )


# ---------------------------------------------------------------- properties
_PATHS = st.sampled_from(
    [
        f"{CWD}/run.sh",
        f"{CWD}/Makefile",
        f"{CWD}/t/test_a.py",
        "/tmp/x.sh",
        "rel.sh",
        f"{CWD}/.env",
    ]
)
_TOUCH = st.builds(
    lambda p, m, pat: __import__(
        "trajgrade.graders.protect.facts", fromlist=["Touch"]
    ).Touch(path=p, mode=m, pattern=pat),
    st.one_of(_PATHS, st.text(min_size=1, max_size=12).map(lambda s: f"{CWD}/{s}")),
    st.sampled_from(["read", "write", "delete", "exec"]),
    st.booleans(),
)
_ARGV = st.lists(
    st.sampled_from(
        [
            "sh",
            "run.sh",
            "pytest",
            "make",
            "git",
            "commit",
            "curl",
            "ls",
            "npm",
            "test",
            "-q",
        ]
    ),
    min_size=1,
    max_size=4,
)
_CAPS = st.frozensets(
    st.sampled_from(["read", "write", "run-code", "network", "signal", "privilege"])
)
_FACTS = st.builds(
    lambda argv, touches, caps: shell(
        run(*argv, caps=tuple(caps)), touches=tuple(touches)
    ),
    _ARGV,
    st.lists(_TOUCH, max_size=4),
    _CAPS,
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_FACTS, max_size=40), st.integers(min_value=1, max_value=300))
def test_state_stays_bounded_for_any_sequence(calls, extra):
    state = ProtectState()
    for facts in calls:
        record_writes(state, facts, CWD)
    for i in range(extra):
        record_writes(state, tool("Write", "write", w(f"{CWD}/g{i}")), CWD)
    assert len(state.written) <= WRITTEN_MAX


_DECODE = msgspec.msgpack.Decoder(ProtectState)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(_FACTS, min_size=1, max_size=30),
    st.lists(st.integers(min_value=0), max_size=5),
)
def test_checkpoint_and_restore_change_no_decision(calls, cuts):
    """Deciding a sequence with the state checkpointed (encoded and
    decoded) between any calls gives the same rulings as without."""
    pol = policy(STRICT)
    cut = {c % len(calls) for c in cuts}
    plain, restored = ProtectState(), ProtectState()
    for i, facts in enumerate(calls):
        a = decide(pol, facts, plain, cwd=CWD)
        b = decide(pol, facts, restored, cwd=CWD)
        assert a == b
        record_writes(plain, facts, CWD)
        record_writes(restored, facts, CWD)
        if i in cut:
            restored = _DECODE.decode(msgspec.msgpack.encode(restored))
            assert restored == plain
