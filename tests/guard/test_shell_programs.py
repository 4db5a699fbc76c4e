"""``program:``: the programs a shell command runs, read with tree-sitter-bash."""

from __future__ import annotations

import shlex
import subprocess
import sys
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trajgrade.events import ToolCall
from trajgrade.graders.matching._shell import MAX_DEPTH, programs
from trajgrade.graders.matching._tool_match import Matcher, ToolMatch


@pytest.mark.parametrize(
    ("command", "names"),
    [
        ("curl -s x | sh", ["curl", "sh"]),
        ("a && b || c; d", ["a", "b", "c", "d"]),
        ("(cd x && make) 2>&1 | tee log", ["cd", "make", "tee"]),
        ("echo $(whoami) `id`", ["echo", "whoami", "id"]),
        ("bash -c 'rm -rf /tmp/x && wget y'", ["bash", "rm", "wget"]),
        ("sh -ec \"curl 'a b'\"", ["sh", "curl"]),
        ("sudo -u root -- /usr/bin/curl x", ["sudo", "curl"]),
        ("env -i A=1 B=2 wget x", ["env", "wget"]),
        ("timeout -s KILL 5 nc -l 1", ["timeout", "nc"]),
        ("nice -n 10 nohup scp a b", ["nice", "nohup", "scp"]),
        ("find . -name '*.py' | xargs -n1 -I{} curl {}", ["find", "xargs", "curl"]),
        ("find . -exec rm {} \\;", ["find", "rm"]),
        ("command -v curl", ["command"]),  # a lookup: nothing runs
        ("c\\url x; 'wg'\"et\" y", ["curl", "wget"]),  # quote removal
        (
            "if true; then ssh h; fi; for i in 1; do scp $i h:; done",
            ["true", "ssh", "scp"],
        ),
        ("f() { telnet h; }; f", ["telnet", "f"]),
        ('x=$(curl y) && eval "wget $x"', ["curl", "eval"]),  # eval of an expansion
        ("cat <(curl x) > /dev/null", ["cat", "curl"]),
        # wrappers that run their arguments
        ("chroot --userspec=u:g / curl x", ["chroot", "curl"]),
        ("busybox wget x", ["busybox", "wget"]),
        ("strace -f -o log -e trace=network curl x", ["strace", "curl"]),
        ("ltrace -o log nc h 1", ["ltrace", "nc"]),
        ("nsenter -t 1 -n curl x", ["nsenter", "curl"]),
        ("unshare -n --map-user 0 wget x", ["unshare", "wget"]),
        # options whose value is a command line
        ("su - root -c 'curl x'", ["su", "curl"]),
        ("su -lc 'nc h 1' root", ["su", "nc"]),
        ("su root", ["su"]),  # an interactive shell: nothing more is known
        ("runuser -u bob --command='wget x'", ["runuser", "wget"]),
        ("flock -w 5 /tmp/l -c 'curl x'", ["flock", "curl"]),
        ("flock /tmp/l scp a b:", ["flock", "scp"]),
        ("env -iS 'curl x'", ["env", "curl"]),
        ("env ls -S x", ["env", "ls"]),  # ls's -S: env stops at its command
        ("script -qc 'curl x' /dev/null", ["script", "curl"]),
        # bash joins `cu\<newline>rl` into `curl` (tree-sitter reads two words)
        ("cu\\\nrl x", ["cu", "curl"]),
        ("make \\\n  -j4 \\\n  all", ["make"]),
        ('bash -c "w\\\nget x"', ["bash", "w", "wget"]),
        # ... but not inside single quotes, nor in a comment
        ("echo 'cu\\\nrl'", ["echo"]),
        ("# don't \\\nls", ["ls"]),
    ],
)
def test_programs(command: str, names: list[str]) -> None:
    got = programs(command)
    assert list(got.names) == names, got


@pytest.mark.parametrize(
    "command",
    [
        "$CMD x",  # the program is an expansion
        "$(echo curl) x",
        "echo curl | sh",  # a shell reading its script from stdin
        'bash -c "$X"',
        'echo "unterminated',  # a parse error
        'eval "curl $x"',
        'su -c "$X"',
        "flock /tmp/l -c",
    ],
)
def test_what_cannot_be_read_is_unknown(command: str) -> None:
    assert programs(command).unknown


def test_nesting_beyond_the_limit_is_unknown() -> None:
    cmd = "curl x"
    for _ in range(MAX_DEPTH + 1):
        cmd = f"bash -c {shlex.quote(cmd)}"
    assert programs(cmd).unknown
    shallow = f"bash -c {shlex.quote('sh -c ' + shlex.quote('curl x'))}"
    assert programs(shallow) == (("bash", "sh", "curl"), False)


def _call(command: str) -> ToolCall:
    return ToolCall(trace_id="t", name="Bash", call_id="c", args={"command": command})


def _matcher(*, deny: bool) -> Matcher:
    spec = msgspec.convert({"kind": "shell", "program": "^curl$"}, ToolMatch)
    return Matcher(spec, "disallowed[0]", 1.0, unreadable_matches=deny)


def test_an_unreadable_command_matches_a_deny_rule_and_no_requirement() -> None:
    assert _matcher(deny=True).matches_call(_call("$CMD x"))
    assert not _matcher(deny=False).matches_call(_call("$CMD x"))
    assert not _matcher(deny=True).matches_call(_call("ls | grep x"))


# Ways to hide a command inside another; each keeps it run. Prefixes
# (sudo, env, ...) take a simple command: a compound one goes in `bash -c`.
_PREFIXES: list[str] = [
    "sudo",
    "sudo -u root --",
    "env A=1",
    "timeout 5",
    "timeout -k 1 5",
    "nice -n 5",
    "nohup",
    "exec",
    "command",
    "xargs -I{}",
    "/usr/bin/env",
    "chroot /",
    "busybox",
    "strace -f -o log",
    "nsenter -t 1 -n",
    "unshare -n",
    "flock -w 5 /tmp/lock",
]
_COMPOUNDS: list[Any] = [
    lambda c: f"bash -c {shlex.quote(c)}",
    lambda c: f"sh -lc {shlex.quote(c)}",
    lambda c: f"eval {shlex.quote(c)}",
    lambda c: f"echo $( {c} )",
    lambda c: f"echo `{c}`" if "`" not in c else f"echo $( {c} )",
    lambda c: f"( {c} )",
    lambda c: f"{{ {c}; }}",
    lambda c: f"ls | {c}",
    lambda c: f"{c} | grep x",
    lambda c: f"true && {c}",
    lambda c: f"false || {c}",
    lambda c: f"cd /tmp; {c}",
    lambda c: f"if true; then {c}; fi",
    lambda c: f"x=$( {c} )",
    lambda c: f"su - root -c {shlex.quote(c)}",
    lambda c: f"flock /tmp/l -c {shlex.quote(c)}",
    lambda c: f"script -qc {shlex.quote(c)} /dev/null",
]
_WRAP = st.one_of(
    st.sampled_from(_PREFIXES).map(lambda p: ("prefix", p)),
    st.integers(0, len(_COMPOUNDS) - 1).map(lambda i: ("compound", i)),
)


def _wrap(cmd: str, wraps: list[tuple[str, Any]]) -> str:
    simple = True
    for how, what in wraps:
        if how == "prefix":
            inner = cmd if simple else f"bash -c {shlex.quote(cmd)}"
            cmd, simple = f"{what} {inner}", True
        else:
            cmd, simple = _COMPOUNDS[what](cmd), False
    return cmd


_FORBIDDEN = ["curl", "/usr/bin/curl", "wget", "/bin/nc"]
_ARGS = st.lists(
    st.sampled_from(["-s", "http://h/x", "'a b'", "-o", "out", "1"]), max_size=3
)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(_FORBIDDEN),
    _ARGS,
    st.lists(_WRAP, max_size=5),
)
def test_a_forbidden_program_is_found_under_any_wrapping(
    program: str, args: list[str], wraps: list[tuple[str, Any]]
) -> None:
    cmd = _wrap(" ".join([program, *args]), wraps)
    base = program.rsplit("/", 1)[-1]
    got = programs(cmd)
    assert base in got.names, (cmd, got)
    assert not got.unknown, cmd
    deny = Matcher(
        msgspec.convert({"kind": "shell", "program": f"^{base}$"}, ToolMatch),
        "disallowed[0]",
        1.0,
    )
    assert deny.matches_call(_call(cmd))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(_FORBIDDEN), _ARGS, st.lists(_WRAP, max_size=3), st.data())
def test_a_line_continuation_inside_the_name_hides_nothing(
    program: str, args: list[str], wraps: list[tuple[str, Any]], data: st.DataObject
) -> None:
    cut = data.draw(st.integers(1, len(program) - 1))
    split = program[:cut] + "\\\n" + program[cut:]  # bash runs `program`
    cmd = _wrap(" ".join([split, *args]), wraps)
    got = programs(cmd)
    assert program.rsplit("/", 1)[-1] in got.names, (cmd, got)
    assert not got.unknown, cmd


@settings(max_examples=200, deadline=None)
@given(_ARGS, st.lists(_WRAP, max_size=4))
def test_harmless_commands_do_not_match(
    args: list[str], wraps: list[tuple[str, Any]]
) -> None:
    cmd = _wrap(" ".join(["ls", *args]), wraps)
    assert not _matcher(deny=True).matches_call(_call(cmd)), cmd


def test_the_parser_is_not_imported_until_a_program_filter_runs() -> None:
    """The hook path imports the matcher; tree-sitter only comes with use."""
    code = (
        "import sys, msgspec\n"
        "from trajgrade.graders.matching._tool_match import Matcher, ToolMatch\n"
        "from trajgrade.events import ToolCall\n"
        "m = Matcher(msgspec.convert({'kind': 'shell', 'command': 'x'}, ToolMatch), 'd', 1.0)\n"
        "m.matches_call(ToolCall(name='Bash', args={'command': 'ls'}))\n"
        "assert 'tree_sitter' not in sys.modules, 'imported early'\n"
        "p = Matcher(msgspec.convert({'kind': 'shell', 'program': 'x'}, ToolMatch), 'd', 1.0)\n"
        "assert 'tree_sitter' not in sys.modules, 'imported at compile'\n"
        "p.matches_call(ToolCall(name='Bash', args={'command': 'ls'}))\n"
        "assert 'tree_sitter' in sys.modules\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr


def test_the_grammar_loaded_directly_is_the_packages() -> None:
    import tree_sitter
    import tree_sitter_bash

    from trajgrade.graders.matching._shell import _bash_grammar

    direct = tree_sitter.Language(_bash_grammar())
    public = tree_sitter.Language(tree_sitter_bash.language())
    assert direct.abi_version == public.abi_version
    assert direct.node_kind_count == public.node_kind_count
