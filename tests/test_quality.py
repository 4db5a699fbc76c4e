"""Lint and type checks run inside the suite, so CI cannot drift from them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str) -> list[str]:
    exe = shutil.which(name, path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.fail(
            f"{name} is not installed; install the test extra: pip install -e '.[test]'"
        )
    return [exe]


@pytest.mark.slow
def test_ruff_is_clean() -> None:
    """ruff finds nothing in src, tests and benchmarks."""
    proc = subprocess.run(
        [*_tool("ruff"), "check", "src", "tests", "benchmarks"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
def test_ruff_format_is_clean() -> None:
    """The code is formatted as ruff format would."""
    proc = subprocess.run(
        [*_tool("ruff"), "format", "--check", "src", "tests", "benchmarks"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
def test_mypy_strict_is_clean() -> None:
    """mypy --strict (configured in pyproject) passes on src."""
    proc = subprocess.run(
        [*_tool("mypy")], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


#: The house rule: a module a reader can hold in mind.
MAX_MODULE_LINES = 500
#: Modules known to be over it, each with where its split is happening. An
#: entry must be removed once its module fits (the test says so).
OVER_LIMIT: dict[str, str] = {}


def test_modules_stay_under_the_size_limit() -> None:
    """Every module under src/trajgrade has at most MAX_MODULE_LINES lines."""
    src = ROOT / "src" / "trajgrade"
    sizes = {
        p.relative_to(src).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
        for p in src.rglob("*.py")
    }
    over = {m: n for m, n in sizes.items() if n > MAX_MODULE_LINES}
    assert set(over) <= set(OVER_LIMIT), (
        f"modules over {MAX_MODULE_LINES} lines: {over}; split them along their seams"
    )
    fitted = [m for m in OVER_LIMIT if sizes.get(m, 0) <= MAX_MODULE_LINES]
    assert not fitted, f"{fitted} fit now: remove them from OVER_LIMIT"


@pytest.mark.slow
def test_imports_follow_the_floor_plan() -> None:
    """lint-imports keeps the contracts in pyproject.toml: every part imports
    only the parts below it, and no modules or packages import each other in
    a circle (imports for typing and inside functions count too)."""
    proc = subprocess.run(
        [*_tool("lint-imports"), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


#: The house rule: a function a reader can follow (radon's cyclomatic
#: complexity). A hot loop may be written out on purpose above it: it says so
#: in a comment or its docstring, near its top.
MAX_COMPLEXITY = 20
WRITTEN_OUT = "written out on purpose"


def _heads(text: str) -> dict[int, str]:
    """Each function's head by its line: its docstring and the comments
    before its first statement."""
    import ast

    lines = text.splitlines()
    heads = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            first = (
                body[1] if len(body) > 1 and isinstance(body[0], ast.Expr) else body[0]
            )
            heads[node.lineno] = "\n".join(lines[node.lineno - 1 : first.lineno])
    return heads


def _too_complex() -> list[str]:
    from radon.complexity import cc_visit

    found = []
    for path in sorted((ROOT / "src" / "trajgrade").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        heads = _heads(text)
        for block in cc_visit(text):
            if block.complexity <= MAX_COMPLEXITY:
                continue
            if WRITTEN_OUT not in heads.get(block.lineno, "").lower():
                where = path.relative_to(ROOT).as_posix()
                found.append(
                    f"{where}:{block.lineno} {block.fullname} {block.complexity}"
                )
    return found


def test_functions_stay_simple() -> None:
    """No function in src/ has a cyclomatic complexity above MAX_COMPLEXITY,
    unless it says, near its top, that it is written out on purpose."""
    over = _too_complex()
    assert not over, (
        f"functions above complexity {MAX_COMPLEXITY}: {over}; split them along "
        f"their cases, or say why one is {WRITTEN_OUT!r} (a hot loop)"
    )


def _struct_bases() -> set[str]:
    """Project classes derived from msgspec.Struct that another class derives
    from, as ``module.Name``."""
    import ast

    src = ROOT / "src"
    classes: dict[str, tuple[str, list[str]]] = {}  # name -> (module, bases)
    for path in (src / "trajgrade").rglob("*.py"):
        module = ".".join(path.relative_to(src).with_suffix("").parts)
        module = module.removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = [
                    ast.unparse(b).split("[")[0].split(".")[-1] for b in node.bases
                ]
                classes[node.name] = (module, bases)

    def is_struct(name: str, seen: frozenset[str] = frozenset()) -> bool:
        if name == "Struct":
            return True
        if name not in classes or name in seen:
            return False
        return any(is_struct(b, seen | {name}) for b in classes[name][1])

    used = {b for _, bases in classes.values() for b in bases}
    return {f"{classes[n][0]}.{n}" for n in used if n in classes and is_struct(n)}


def test_ruff_knows_every_struct_base() -> None:
    """msgspec reads Struct annotations at run time, so ruff must never move
    them under TYPE_CHECKING: every Struct base the project derives from is
    in ruff's runtime-evaluated-base-classes, and nothing stale is."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(
        config["tool"]["ruff"]["lint"]["flake8-type-checking"][
            "runtime-evaluated-base-classes"
        ]
    )
    assert listed == {"msgspec.Struct"} | _struct_bases()
