"""``program:``: the programs a shell command runs, read with tree-sitter-bash."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path
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
        # strings bash runs later, like eval
        ("trap 'curl x' EXIT", ["trap", "curl"]),
        ("trap -- 'rm -f l; wget y' INT TERM", ["trap", "rm", "wget"]),
        ("trap - EXIT; trap INT", ["trap", "trap"]),  # resets: nothing runs
        ("mapfile -tC 'curl x' -c 1 arr < f", ["mapfile", "curl"]),
        ("readarray -C 'wget y' arr", ["readarray", "wget"]),
        ("compgen -C 'curl x' w", ["compgen", "curl"]),
        ("watch -n 1 'curl x'", ["watch", "curl"]),  # watch runs `sh -c`
        ("watch -d curl x", ["watch", "curl"]),  # -d takes no next word
        ("watch -x wget y", ["watch", "wget"]),
        # backticks in an unquoted here-document body run
        ("cat <<EOF\n`curl x` and $(wget y)\nEOF", ["cat", "curl", "wget"]),
        ("coproc curl x; wait", ["coproc", "curl", "wait"]),
        # option clusters and values read as the program reads them
        ("bash -eo pipefail -c 'curl x'", ["bash", "curl"]),
        ("env -S 'A=1' curl x", ["env", "curl"]),  # -S words, then the rest
        ("sudo A=1 curl x", ["sudo", "curl"]),
        ("xargs --replace sh -c 'curl x'", ["xargs", "sh", "curl"]),
        ("xargs --max-lines wget y", ["xargs", "wget"]),
        ("xargs -r0n 1 curl", ["xargs", "curl"]),
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
        # a shell reading its script from stdin or a descriptor
        "bash - < cmds.txt",
        "sh -",
        "bash +",
        "curl x | bash -s -- --flag",
        "bash /dev/stdin <<< 'curl x'",
        "bash /proc/self/fd/0 <<< 'curl x'",
        "sh /dev/fd/3 3< f",
        "bash /dev//./stdin",
        "bash --rcfile <(echo curl x) -ic true",
        "source <(echo curl x)",
        ". <(echo curl x)",
        "source /dev/stdin <<< 'curl x'",
        'source "$F"',
        "su root",  # an interactive shell: it reads stdin
        "sudo -s",
        "chroot /srv",
        # variables whose value a shell runs
        "BASH_ENV=<(echo curl x) bash -c true",
        "BASH_ENV=/tmp/x bash -c true",
        "env BASH_ENV=/dev/stdin bash -c true",
        "sudo BASH_ENV=/tmp/x bash -c true",
        "export BASH_ENV=/dev/stdin",
        "export BASH\\_ENV=/dev/stdin",
        "builtin export BASH_ENV=x",
        ": ${BASH_ENV:=/dev/stdin}",
        "read BASH_ENV < f",
        "declare -n r=BASH_ENV",
        "PS4='$(curl x)' bash -xc true",
        "ENV=/tmp/rc sh -i",
        "env 'BASH_FUNC_ls%%=() { curl x; }' bash -c ls",
        # names given other code
        "hash -p /tmp/curl foo; foo x",
        "shopt -s expand_aliases; alias c=curl; c x",
        "enable -f ./x.so curl",
        # words xargs -I and find -exec fill in
        "xargs -I{} sh -c {} < cmds.txt",
        "xargs -i sh -c '{}' < cmds.txt",
        "xargs --replace=@ bash -c @ < cmds.txt",
        "xargs -I % sh -c 'echo %' < cmds.txt",
        "find /tmp -name x -exec {} \\;",
        "find . -name '*.sh' -exec sh -c 'bash {}' \\;",
        # strings run later, built from expansions
        'trap "$X" EXIT',
        'mapfile -C "$X" arr',
        "cat <<EOF\n`curl x\nEOF",  # a backtick left open
        "env -S '${X} x'",
    ],
)
def test_what_cannot_be_read_is_unknown(command: str) -> None:
    assert programs(command).unknown


@pytest.mark.parametrize(
    "command",
    [
        "coproc NAME { curl x; }",
        "coproc { curl x; }",
        "coproc ( curl x )",
        "coproc N while true; do curl x; done",
    ],
)
def test_a_coproc_body_is_read(command: str) -> None:
    assert "curl" in programs(command).names, programs(command)


@pytest.mark.parametrize(
    "command",
    [
        "git status",
        "pytest -q",
        "ls -la",
        "grep -rn foo .",
        "grep -n ENV Dockerfile",
        "docker run -e ENV=prod img",
        "cat <<EOF > notes.txt\nhello $USER, it's $(date)\nEOF",
        "cat <<'EOF' > README.md\n```sh\nmake\n```\nEOF",  # quoted: not run
        "xargs rm < files",
        "find . -name '*.pyc' -exec rm {} +",
        "trap 'rm -f /tmp/lock' EXIT",
        "source .venv/bin/activate && pytest",
        ". ./env.sh",
        "bash build.sh",
        "bash - build.sh",
        "bash -eo pipefail -c 'make test'",
        "export PATH=$PATH:/opt/bin",
        "local out=$(ls)",
        "read -r line < f",
        "alias",
        "hash -r",
        "coproc cat",
        "watch -n 5 ls",
        "sudo -u app make",
    ],
)
def test_ordinary_commands_stay_readable(command: str) -> None:
    got = programs(command)
    assert not got.unknown, got
    assert not _matcher(deny=True).matches_call(_call(command)), got


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


#: Each runs `curl` in bash (the test checks it with a fake curl).
_RUNS_CURL = [
    "trap 'curl x' EXIT",
    "coproc curl x; wait",
    "coproc C { curl x; }; wait",
    "cat <<EOF\n`curl x`\nEOF",
    "bash - < cmds.txt",
    "bash -s < cmds.txt",
    "bash /dev/stdin <<< 'curl x'",
    "bash /proc/self/fd/0 <<< 'curl x'",
    "bash /dev/fd/3 3< cmds.txt",
    "source <(echo curl x)",
    ". <(echo curl x)",
    "BASH_ENV=<(echo curl x) bash -c true",
    "PS4='$(curl x)'; set -x; true",  # (bash -x imports PS4 unless root)
    "env 'BASH_FUNC_ls%%=() { curl x; }' bash -c ls",
    "mapfile -C 'curl x' -c 1 arr < f",
    "readarray -C 'curl x' -c 1 arr < f",
    "compgen -C 'curl x' w",
    "hash -p ./bin/curl foo; foo x",
    "shopt -s expand_aliases\nalias c=curl\nc x",
    "xargs -I{} sh -c {} < cmds.txt",
    "xargs --replace sh -c 'curl x' < f",
    "find . -name cmds.txt -exec sh -c 'bash {}' \\;",
    "bash -eo pipefail -c 'curl x'",
    "env -S 'A=1' curl x",
]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("command", _RUNS_CURL)
def test_what_bash_runs_is_matched(command: str, tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    curl = tmp_path / "bin" / "curl"
    curl.write_text(f"#!/bin/sh\necho ran >> {tmp_path}/ran\n")
    curl.chmod(0o755)
    (tmp_path / "cmds.txt").write_text("curl x\n")
    (tmp_path / "f").write_text("hi\n")
    env = {"PATH": f"{tmp_path}/bin:/usr/bin:/bin", "HOME": str(tmp_path)}
    subprocess.run(
        ["bash", "-c", command],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=20,
        check=False,
    )
    assert (tmp_path / "ran").exists(), "the trick did not run curl"
    assert _matcher(deny=True).matches_call(_call(command)), programs(command)


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
            if "{}" in what and "{}" in cmd:
                continue  # xargs -I{} would fill in the command's own {}
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
