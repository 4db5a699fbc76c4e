"""What a shell command does (trajgrade.graders.protect.shell): the spellings
an attacker uses for the same file or the same program."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trajgrade.graders.protect.programs import PROGRAMS, capabilities_of
from trajgrade.graders.protect.shell import analyze_command


def reads(command: str, cwd: str = "/repo") -> set[tuple[str, bool]]:
    facts = analyze_command(command, cwd)
    return {(t.path, t.pattern) for t in facts.touches if t.mode == "read"}


@pytest.mark.parametrize(
    "command",
    [
        "cat .env",
        "cat '.'env",
        "cat .e''nv",
        'cat ".env"',
        "cat \\.env",
        "cat $'\\x2eenv'",
        "cat {.e,x}nv",
        "head -n 5 ./.env",
        "cat sub/../.env",
        "base64 < .env",
        "sudo -u root timeout 5 cat .env",
        "bash -c 'cat .env'",
        "cp .env /tmp/x",
    ],
)
def test_every_literal_spelling_names_the_file(command: str) -> None:
    assert ("/repo/.env", False) in reads(command)


@pytest.mark.parametrize(
    ("command", "glob"),
    [
        ("cat .e*", "/repo/.e*"),
        ("cat .en?", "/repo/.en?"),
        ("cat .[e]nv", "/repo/.[e]nv"),
        ("cat $(echo .env)", "/repo/*"),
        ("cat ${X}nv", "/repo/*nv"),
        ("tac < .e?v", "/repo/.e?v"),
    ],
)
def test_what_cannot_be_known_is_a_pattern(command: str, glob: str) -> None:
    assert (glob, True) in reads(command)


@pytest.mark.parametrize(
    "command",
    [
        """python3 -c "open('.e'+'nv').read()" """,
        """perl -e 'open F, ".e" . "nv"; print <F>'""",
        """node -e "require('fs').readFileSync(['.e','nv'].join(''))" """,
    ],
)
def test_interpreter_code_built_from_pieces_is_a_pattern(command: str) -> None:
    assert ("/repo/.e*nv", True) in reads(command)


def test_obscured_code_could_name_any_path() -> None:
    assert ("/repo/**", True) in reads(
        """python3 -c "import base64; open(base64.b64decode('LmVudg=='))" """
    )


def test_network_code_in_an_interpreter_has_the_network_capability() -> None:
    facts = analyze_command(
        """python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:9')" """,
        None,
    )
    assert "network" in facts.runs[0].capabilities
    plain = analyze_command("python3 -c 'print(1)'", None)
    assert "network" not in plain.runs[0].capabilities


@pytest.mark.parametrize(
    "command", ["/usr/bin/cur? http://x", "$CMD x", "$(echo curl) x"]
)
def test_a_program_named_by_a_glob_or_expansion_is_unknown(command: str) -> None:
    assert any(r.name is None for r in analyze_command(command, None).runs)


def test_redirections_write_and_read() -> None:
    facts = analyze_command("echo x >> policy.yaml 2>&1 < in.txt", "/p")
    modes = {(t.path, t.mode) for t in facts.touches}
    assert ("/p/policy.yaml", "write") in modes
    assert ("/p/in.txt", "read") in modes


def test_roles_of_operands() -> None:
    facts = analyze_command(
        "mv a b; rm -rf c; sh run.sh; curl -T d -o e http://h", "/p"
    )
    modes = {(t.path, t.mode) for t in facts.touches}
    assert {("/p/a", "delete"), ("/p/b", "write"), ("/p/c", "delete")} <= modes
    assert {("/p/run.sh", "exec"), ("/p/d", "read"), ("/p/e", "write")} <= modes
    assert facts.urls == ("http://h",)


def test_privilege_and_signal_capabilities() -> None:
    runs = analyze_command("pkexec id; run0 id; pkill -f trajgrade", None).runs
    caps = {r.name: r.capabilities for r in runs}
    assert "privilege" in caps["pkexec"] and "privilege" in caps["run0"]
    assert "signal" in caps["pkill"]


def test_git_runs_code_it_is_given() -> None:
    assert "run-code" in (
        capabilities_of("git", ["git", "-c", "alias.x=!sh", "x"]) or ()
    )
    assert "network" in (capabilities_of("git", ["git", "clone", "u"]) or ())
    assert capabilities_of("git", ["git", "status"]) == frozenset({"read", "write"})


def test_an_unparseable_command_is_unreadable() -> None:
    assert analyze_command("cat $(", None).unreadable
    assert analyze_command("cat .env", None).unreadable is None


def test_unknown_programs_have_no_table_entry() -> None:
    assert capabilities_of("definitely-not-a-program", ["x"]) is None
    assert "cat" in PROGRAMS


_QUOTINGS = st.sampled_from(
    [
        lambda w: w,
        lambda w: f"'{w}'",
        lambda w: f'"{w}"',
        lambda w: "".join(f"\\{c}" for c in w),
    ]
)


@given(
    st.lists(
        st.sampled_from(["cat", "head", "wc", "rm", "cp"]), min_size=1, max_size=1
    ),
    st.lists(
        st.from_regex(r"[a-z][a-z0-9._-]{0,8}", fullmatch=True), min_size=1, max_size=3
    ),
    _QUOTINGS,
)
def test_quoting_a_word_any_way_changes_nothing(
    program: list[str], args: list[str], quote: object
) -> None:
    plain = analyze_command(" ".join(program + args), "/r")
    quoted = analyze_command(" ".join(program + [quote(a) for a in args]), "/r")  # type: ignore[operator]
    assert plain.touches == quoted.touches
    assert [r.name for r in plain.runs] == [r.name for r in quoted.runs]
