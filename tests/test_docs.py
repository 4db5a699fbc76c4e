"""Docs that cannot go stale: every fenced block of README.md and docs/*.md.

Each block is run or checked, unless the line before it is
``<!-- illustrative -->``:

- ``sh``/``bash``/``shell``: run with ``bash -e -o pipefail`` in a scratch
  directory where ``src/``, ``tests/`` and ``policy.yaml`` (the example
  policy) are at hand; exit status 0, or N when the line before the block is
  ``<!-- exit: N -->``.
- ``console``: ``$ `` lines are commands, the lines after each are its stdout,
  compared line by line (a ``...`` line stands for any lines).
- ``yaml``: compiled with trajgrade's own loader (a bare list is a
  ``graders:`` list), so every type, key and regex in it is real.
- ``json``: parsed (the whole block, or each line).
- ``python``: run as a script in the scratch directory.

Illustrative blocks are still checked for what can go stale without running
them: every ``trajgrade`` sub-command and flag named anywhere (blocks and
inline code) must exist in the click commands, every ``type:`` must be a
registered grader type, every ``--format`` a registered format. New pages
under docs/ are collected automatically. The site's strict build runs too.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
import yaml

from trajgrade.cli.main import main as cli_main
from trajgrade.config.compile import compile_suite
from trajgrade.config.decode import decode_config
from trajgrade.formats import BUILTIN as FORMATS
from trajgrade.graders import registry
from trajgrade.hooks.invoke import UsageError
from trajgrade.hooks.invoke import parse_args as parse_hook_args

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL = {"sh", "bash", "shell", "console"}
CHECKED = SHELL | {"yaml", "yml", "json", "python"}
MARK = re.compile(r"<!--\s*(illustrative|exit:\s*(\d+)|file:\s*([\w.-]+))\s*-->")
#: Seconds one documented block may run.
BLOCK_TIMEOUT = 60


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    body: str
    illustrative: bool
    exit_status: int
    file: str | None = None  # `<!-- file: NAME -->`: saved for the page's commands

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def _blocks(page: Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"```([\w-]*)", lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        prev = next((x for x in reversed(lines[:i]) if x.strip()), "")
        mark = MARK.fullmatch(prev.strip())
        out.append(
            Block(
                page=page,
                line=i + 1,
                lang=m.group(1).lower(),
                body="\n".join(lines[i + 1 : j]) + "\n",
                illustrative=bool(mark and mark.group(1) == "illustrative"),
                exit_status=int(mark.group(2)) if mark and mark.group(2) else 0,
                file=mark.group(3) if mark else None,
            )
        )
        i = j + 1
    return out


BLOCKS = [b for page in PAGES for b in _blocks(page)]
RUN = [b for b in BLOCKS if b.lang in CHECKED and not b.illustrative]


def _params(langs: set[str]) -> list[object]:
    return [pytest.param(b, id=b.id) for b in RUN if b.lang in langs]


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """A working directory with the repository's examples and fixtures at hand."""
    for name in ("src", "tests", "docs", "deploy", "benchmarks"):
        (tmp_path / name).symlink_to(ROOT / name)
    shutil.copy(ROOT / "src/trajgrade/examples/policy.yaml", tmp_path / "policy.yaml")
    (tmp_path / "home").mkdir()
    return tmp_path


def _save_files(block: Block, scratch: Path) -> None:
    """Write the page's `<!-- file: NAME -->` blocks where its commands find them."""
    for b in BLOCKS:
        if b.page == block.page and b.file:
            (scratch / b.file).write_text(b.body, encoding="utf-8")


def _env(scratch: Path) -> dict[str, str]:
    env = dict(os.environ)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    env["HOME"] = str(scratch / "home")  # `hook install --user` and friends
    env["XDG_STATE_HOME"] = str(scratch / "home" / "state")
    env.pop("NO_COLOR", None)
    return env


def _run(argv: list[str], scratch: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        cwd=scratch,
        env=_env(scratch),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT,
        check=False,
    )


@pytest.mark.parametrize("block", _params({"sh", "bash", "shell"}))
def test_shell_block_runs(block: Block, scratch: Path) -> None:
    _save_files(block, scratch)
    proc = _run(["bash", "-e", "-o", "pipefail", "-c", block.body], scratch)
    assert proc.returncode == block.exit_status, (
        f"{block.id}: exit {proc.returncode}, documented {block.exit_status}\n"
        f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    )


def _console(body: str) -> list[tuple[str, list[str]]]:
    steps: list[tuple[str, list[str]]] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
    return steps


def _matches(got: list[str], want: list[str]) -> bool:
    pattern = "\n".join(
        ".*" if w.strip() == "..." else re.escape(w.rstrip()) for w in want
    )
    text = "\n".join(g.rstrip() for g in got)
    return re.fullmatch(pattern, text, re.DOTALL) is not None


@pytest.mark.parametrize("block", _params({"console"}))
def test_console_block_prints_what_it_shows(block: Block, scratch: Path) -> None:
    _save_files(block, scratch)
    steps = _console(block.body)
    assert steps, f"{block.id}: a console block needs `$ ` command lines"
    statuses = []
    for command, want in steps:
        proc = _run(["bash", "-c", command], scratch)
        statuses.append(proc.returncode)
        got = proc.stdout.splitlines()
        assert _matches(got, want), (
            f"{block.id}: `{command}` printed\n{proc.stdout}{proc.stderr[-2000:]}\n"
            "documented\n" + "\n".join(want)
        )
    # `<!-- exit: N -->`: one command exits N (a failed grade), the others 0
    failing = [s for s in statuses if s != 0]
    assert failing == ([block.exit_status] if block.exit_status else []), (
        f"{block.id}: exit statuses {statuses}"
    )


@pytest.mark.parametrize("block", _params({"yaml", "yml"}))
def test_config_block_compiles(block: Block) -> None:
    data = yaml.safe_load(block.body)
    text = block.body
    if isinstance(data, list):  # a fragment of a graders: list
        text = "graders:\n" + textwrap.indent(block.body, "  ")
    assert isinstance(yaml.safe_load(text), dict), (
        f"{block.id}: not a trajgrade config; mark it <!-- illustrative -->"
    )
    suite = compile_suite(decode_config(text, name=block.id))
    assert suite is not None


@pytest.mark.parametrize("block", _params({"json"}))
def test_json_block_parses(block: Block) -> None:
    try:
        json.loads(block.body)
    except json.JSONDecodeError:
        for line in filter(str.strip, block.body.splitlines()):
            json.loads(line)


@pytest.mark.parametrize("block", _params({"python"}))
def test_python_block_runs(block: Block, scratch: Path) -> None:
    _save_files(block, scratch)
    script = scratch / "example.py"
    script.write_text(block.body, encoding="utf-8")
    proc = _run([sys.executable, str(script)], scratch)
    assert proc.returncode == block.exit_status, f"{block.id}:\n{proc.stderr[-3000:]}"


# ------------------------------------------------------------ names that must exist
def _code_texts() -> list[tuple[str, str]]:
    """(where, text) of every block and inline code span, illustrative ones too."""
    out = [(b.id, b.body) for b in BLOCKS]
    for page in PAGES:
        text = re.sub(
            r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL
        )
        out += [
            (str(page.relative_to(ROOT)), m) for m in re.findall(r"`([^`\n]+)`", text)
        ]
    return out


def _commands() -> list[tuple[str, list[str]]]:
    """Every `trajgrade ...` invocation written in the docs, as argv after `trajgrade`:
    in shell blocks, JSON hook settings and inline code that starts with it."""
    texts = [(b.id, b.body) for b in BLOCKS if b.lang in SHELL]
    texts += [
        (b.id, cmd)
        for b in BLOCKS
        if b.lang == "json"
        for cmd in re.findall(r'"command":\s*"(trajgrade [^"]*)"', b.body)
    ]
    texts += [(w, s) for w, s in _code_texts() if s.startswith("trajgrade ")]
    found = []
    for where, text in texts:
        for line in text.replace("\\\n", " ").splitlines():
            line = re.sub(r"(^|\s)#.*", "", line.removeprefix("$ "))
            for m in re.finditer(
                r"(?:^|[|;&(`]\s*|\$\()trajgrade((?:\s+[^|;&)]*)?)", line
            ):
                try:
                    argv = shlex.split(m.group(1))
                except ValueError:
                    argv = m.group(1).split()
                if argv and re.fullmatch(r"[a-z]+", argv[0]):
                    found.append((where, argv))
    return found


def _command(argv: list[str]) -> tuple[click.Command, list[str]]:
    cmd: click.Command = cli_main
    rest = list(argv)
    ctx = click.Context(cli_main)
    while isinstance(cmd, click.Group) and rest:
        sub = cmd.get_command(ctx, rest[0])  # (the group imports it on demand)
        if sub is None:
            break
        cmd = sub
        rest.pop(0)
    return cmd, rest


def _options(cmd: click.Command) -> set[str]:
    names = {"--help", "-h"}
    for p in cmd.params:
        names.update(p.opts)
        names.update(p.secondary_opts)
    return names


def _unknown(commands: list[tuple[str, list[str]]]) -> list[str]:
    """What in these command lines the CLI does not have."""
    bad = []
    for where, argv in commands:
        if (
            argv[0] == "hook"
            and argv[1:2]
            and argv[1] in {"claude-code", "codex", "gemini"}
        ):
            try:  # the hook's fast path parses its own arguments, without click
                parse_hook_args(argv[2:])
            except UsageError as exc:
                if "is required" in str(exc):
                    continue  # prose naming the command, not a command line
                bad.append(f"{where}: `trajgrade hook {argv[1]}`: {exc}")
            continue
        cmd, rest = _command(argv)
        if cmd is cli_main:
            bad.append(f"{where}: no command `trajgrade {argv[0]}`")
            continue
        known = _options(cmd)
        for tok in rest:
            if tok == "--":
                break  # the agent's own command line follows
            flag = tok.split("=", 1)[0]
            if re.fullmatch(r"--?[a-zA-Z][\w-]*", flag) and flag not in known:
                bad.append(f"{where}: `trajgrade {' '.join(argv[:2])}` has no {flag}")
    return bad


def test_documented_commands_and_flags_exist() -> None:
    commands = _commands()
    assert len(commands) > 20
    bad = _unknown(commands)
    assert not bad, "\n".join(bad)


def test_an_unknown_command_or_flag_is_caught() -> None:
    """The check above can fail: made-up names are reported, real ones are not."""
    made_up = [
        ("x", ["grade", "-c", "p.yaml", "--no-such-flag"]),
        ("x", ["frobnicate"]),
        ("x", ["hook", "codex", "-c", "p.yaml", "--fail-sideways"]),
        ("x", ["hook", "install", "codex", "--nope"]),
    ]
    assert len(_unknown(made_up)) == 4
    real = [("x", ["grade", "-c", "p.yaml", "--follow", "--", "--not-ours"])]
    assert _unknown(real) == []


#: Flags of other programs that the docs write on their own in inline code.
FOREIGN_FLAGS = {
    "--input-format": "claude --input-format stream-json",
    "--size": "the benchmark generator's --size",
}


def _all_options() -> set[str]:
    from trajgrade.hooks.hook_args import USAGE as HOOK_USAGE

    # The hook's fast path parses its options by hand: read them off its usage.
    names = set(re.findall(r"(?m)^\s+(?:-\w, )?(--[\w-]+)", HOOK_USAGE)) | {"-c"}

    def walk(cmd: click.Command) -> None:
        names.update(_options(cmd))
        if isinstance(cmd, click.Group):
            ctx = click.Context(cmd)
            for name in cmd.list_commands(ctx):  # (imported on demand)
                sub = cmd.get_command(ctx, name)
                assert sub is not None, name
                walk(sub)

    walk(cli_main)
    return names


def _benchmark_options() -> set[str]:
    """The options the scripts in benchmarks/ define (their own argparse flags)."""
    return {
        flag
        for script in (ROOT / "benchmarks").glob("*.py")
        for flag in re.findall(
            r"add_argument\(\s*\"(--[\w-]+)\"", script.read_text(encoding="utf-8")
        )
    }


def test_inline_flags_exist() -> None:
    """A long flag written on its own in prose (`--follow`, `--state DIR`) is a
    real one (short flags in prose are as often another program's: `grep -i`)."""
    known = _all_options() | set(FOREIGN_FLAGS) | _benchmark_options()
    bad = []
    for where, span in _code_texts():
        if where.startswith("docs/guard-programs.md"):
            continue  # the generated table of other programs' options
        m = re.match(r"(--[a-zA-Z][\w-]*)(?:[ =]|$)", span)
        if m and m.group(1) not in known:
            bad.append(f"{where}: `{span}`")
    assert not bad, "\n".join(bad)


def test_documented_grader_types_exist() -> None:
    types = set(registry())
    bad = [
        f"{where}: type {name!r}"
        for where, text in _code_texts()
        for name in re.findall(r"(?<![\w.\"])type:\s*[\"']?([\w.<>-]+)", text)
        if name not in types and name not in {"command", "http", "<grader"}
    ]
    assert not bad, "\n".join(bad)


def test_documented_formats_exist() -> None:
    names = set(FORMATS) | {"auto"}
    bad = [
        f"{where}: --format {name}"
        for where, text in _code_texts()
        for name in re.findall(r"--format[ =]([a-z][\w-]*)", text)
        if name not in names
    ]
    assert not bad, "\n".join(bad)


def test_every_format_and_grader_has_its_section() -> None:
    """docs/formats.md has one section per format; docs/graders.md names every type."""
    formats = (ROOT / "docs" / "formats.md").read_text(encoding="utf-8")
    sections = re.findall(r"^## `([\w-]+)`", formats, re.MULTILINE)
    assert sorted(sections) == sorted(FORMATS), "one section per format, once"
    graders = (ROOT / "docs" / "graders.md").read_text(encoding="utf-8")
    kinds = {t.kind for t in registry().values()}
    missing = [k for k in kinds if not re.search(rf"\b{re.escape(k)}\b", graders)]
    assert not missing, f"docs/graders.md does not name {missing}"


def test_docs_site_builds_strictly(tmp_path: Path) -> None:
    """`mkdocs build --strict`: no broken link, no page left out of the nav."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-q",
            "-d",
            str(tmp_path),
        ],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},  # Material's end-of-life banner
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (tmp_path / "formats" / "index.html").is_file()


# ------------------------------------------------------------ policies as written
def _readme_block(after_heading: str, lang: str) -> Block:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(after_heading)
    line = text[:start].count("\n") + 1
    return next(
        b for b in _blocks(ROOT / "README.md") if b.line > line and b.lang == lang
    )


@pytest.mark.parametrize(
    ("name", "args", "refused"),
    [
        ("Read", {"file_path": "/repo/.env"}, True),  # Claude Code
        ("Bash", {"command": "cat .env | head"}, True),
        ("read_file", {"file_path": "/repo/.env"}, True),  # Gemini CLI 0.61
        ("read_file", {"absolute_path": "/repo/.env"}, True),  # Gemini CLI 0.1x
        ("run_shell_command", {"command": "source .env"}, True),
        ("exec_command", {"cmd": "grep KEY .env"}, True),  # Codex
        ("Read", {"file_path": "/repo/.envrc.md"}, False),
        ("Bash", {"command": "pytest -q"}, False),
        ("exec_command", {"cmd": "ls"}, False),
    ],
)
def test_readme_stop_policy_works_on_each_agent(
    name: str, args: dict[str, str], refused: bool
) -> None:
    """The README's agent policy fails the call the moment it is made, with the
    tool names and argument keys each agent really writes (see docs/formats.md)."""
    from trajgrade import Engine, ToolCall

    block = _readme_block("### Stop Claude Code", "yaml")
    engine = Engine(compile_suite(decode_config(block.body, name=block.id)))
    verdicts = engine.feed(ToolCall(trace_id="t", name=name, call_id="c1", args=args))
    failed = [v.grader for v in verdicts if v.outcome == "fail"]
    assert failed == (["protect"] if refused else [])


@pytest.mark.parametrize(
    ("agent", "folder", "payload"),
    [
        ("claude-code", "claude-code", "03-PreToolUse.json"),
        ("codex", "codex", "03-PreToolUse.json"),
        ("gemini", "gemini-cli", "03-BeforeTool.json"),
    ],
)
def test_readme_stop_policy_denies_through_each_agents_hook(
    agent: str, folder: str, payload: str, tmp_path: Path
) -> None:
    """The README's policy as the agent's hook: a recorded shell-call payload
    is let through; the same call reading .env is denied."""
    block = _readme_block("### Stop Claude Code", "yaml")
    policy = tmp_path / "agents.yaml"
    policy.write_text(block.body, encoding="utf-8")
    recorded = json.loads(
        (ROOT / "tests/fixtures/hooks" / folder / "hooks" / payload).read_text()
    )

    hook_cmd = [sys.executable, "-m", "trajgrade", "hook"]

    def hook(tool_input: dict[str, str]) -> str:
        body = {**recorded, "tool_input": tool_input}
        proc = subprocess.run(
            [
                *hook_cmd,
                agent,
                "-c",
                str(policy),
                "--state-dir",
                str(tmp_path / "state"),
            ],
            input=json.dumps(body),
            capture_output=True,
            text=True,
            timeout=BLOCK_TIMEOUT,
            check=True,
        )
        return proc.stdout

    assert hook(recorded["tool_input"]) == ""  # `echo hello`: no decision
    answer = json.loads(hook({**recorded["tool_input"], "command": "cat .env"}))
    decision = answer.get("hookSpecificOutput", answer)
    assert "deny" in (decision.get("permissionDecision"), decision.get("decision"))


def test_readme_links_resolve() -> None:
    """The README is not part of the site build: its relative links are checked here."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if not re.match(r"[a-z]+://", t)]
    assert len(local) > 10
    missing = [t for t in local if not (ROOT / t).exists()]
    assert not missing, missing
