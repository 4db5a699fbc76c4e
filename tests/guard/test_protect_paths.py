"""PathRules: a protect glob against the ways a call can name the path --
lexically, as a glob (a real automaton intersection, checked against brute
force), and on a real file system with links, hard links and /proc."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trajgrade.graders.protect.facts import Touch
from trajgrade.graders.protect.globs import Glob
from trajgrade.graders.protect.paths import PathRules
from trajgrade.runtime.host_world import HostWorld

CWD = "/repo"
HOME = "/home/u"
RULES = PathRules((".env", ".env.*", "~/.ssh/**"), exceptions=(".env.example",))


def hit(path: str, *, pattern: bool = False, cwd: str | None = CWD, world=None):
    touch = Touch(path=path, mode="read", pattern=pattern)
    return RULES.matches(touch, cwd=cwd, home=HOME, world=world)


@pytest.mark.parametrize(
    "path",
    [".env", "./.env", "/repo/.env", "sub/../.env", "/repo//.env", ".env.local",
     "~/.ssh/id_rsa", "/home/u/.ssh/config", "/home/u/.ssh"],
)  # fmt: skip
def test_every_lexical_spelling_of_a_protected_path_matches(path: str) -> None:
    assert hit(path) is not None


@pytest.mark.parametrize(
    "path", [".env.example", "src/.env", "/other/.env", ".envrc", "~/.sshx/a"]
)
def test_other_paths_and_exceptions_do_not_match(path: str) -> None:
    assert hit(path) is None


def test_without_a_cwd_a_relative_rule_may_end_any_path() -> None:
    assert hit("/somewhere/.env", cwd=None) == ".env"
    assert hit("../x/.env", cwd=None) == ".env"
    assert hit("/somewhere/a.py", cwd=None) is None


def test_the_evidence_names_the_rule_as_written() -> None:
    assert hit("~/.ssh/id_ed25519") == "~/.ssh/**"


@pytest.mark.parametrize(
    "glob", [".e*", ".en?", ".[e]nv", ".[[:alpha:]]nv", ".[!x]nv", "*", "/repo/**",
             "/**", "**/.env", ".env*", "~/.ss?/*", "/home/*/.ssh/id_*"],
)  # fmt: skip
def test_a_glob_that_could_name_a_protected_path_matches(glob: str) -> None:
    assert hit(glob, pattern=True) is not None


@pytest.mark.parametrize("glob", ["*.py", "src/*", ".[!e]nv", "/etc/**", ".x*"])
def test_a_glob_that_cannot_name_one_does_not(glob: str) -> None:
    if glob == "*.py":
        # `*` may match a leading dot (dotglob), so `*.py` could be `.env.py`
        # of `.env.*`: lexically it is a match; a World tells the truth.
        assert hit(glob, pattern=True) == ".env.*"
        return
    assert hit(glob, pattern=True) is None


def test_a_glob_word_is_never_exempt_lexically() -> None:
    assert hit(".env.exampl?", pattern=True) == ".env.*"


# ------------------------------------------------ the glob automaton
_ATOMS = st.sampled_from(["a", ".", "/", "*", "?", "[a.]", "[!a]", "**"])
_GLOBS = st.lists(_ATOMS, min_size=1, max_size=3).map("".join)
_WORDS = ["".join(p) for n in range(7) for p in itertools.product("a./", repeat=n)]


@settings(max_examples=300, deadline=None)
@given(_GLOBS, _GLOBS)
def test_intersection_agrees_with_brute_force(one: str, other: str) -> None:
    g1, g2 = Glob(one), Glob(other)
    witness = next((w for w in _WORDS if g1.match(w) and g2.match(w)), None)
    assert g1.intersects(g2) == (witness is not None), witness
    assert g2.intersects(g1) == g1.intersects(g2)


@settings(max_examples=300, deadline=None)
@given(_GLOBS, st.sampled_from(_WORDS))
def test_a_literal_glob_matches_exactly_its_path(glob: str, word: str) -> None:
    assert Glob(word.replace("[", "\\[")).match(word)
    # A path matches a glob iff the glob intersects the path as a glob.
    literal = "".join("\\" + c if c in "*?[\\" else c for c in word)
    assert Glob(glob).match(word) == Glob(glob).intersects(Glob(literal))


def test_globstar_forms() -> None:
    assert Glob("/a/**/b").match("/a/b") and Glob("/a/**/b").match("/a/x/y/b")
    assert not Glob("/a/**/b").match("/ab")
    assert Glob("/a/**").match("/a") and Glob("/a/**").match("/a/x/y")
    assert Glob("**/c").match("c") and Glob("**/c").match("/x/c")
    assert not Glob("/a/*").match("/a/x/y")


# ------------------------------------------------ on a real file system
@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / ".env").write_text("API_KEY=sk_live_0123456789abcdef\n")
    (tmp_path / ".env.example").write_text("API_KEY=\n")
    (tmp_path / "sub").mkdir()
    return tmp_path


def on_disk(repo: Path, path: str, *, pattern: bool = False) -> str | None:
    rules = PathRules((".env", ".env.*"), exceptions=(".env.example",))
    touch = Touch(path=path, mode="read", pattern=pattern)
    return rules.matches(touch, cwd=str(repo), home=HOME, world=HostWorld())


def test_links_to_the_secret_are_caught(repo: Path) -> None:
    os.symlink(".env", repo / "notes.txt")
    os.link(repo / ".env", repo / "hard.txt")
    os.symlink(".", repo / "d")
    os.symlink("/proc/self/cwd", repo / "here")
    for path in ("notes.txt", "hard.txt", "d/.env", "here/.env",
                 "/proc/self/cwd/.env", "sub/../.env"):  # fmt: skip
        assert on_disk(repo, path) == ".env", path
        # Without a World only the spellings of the path itself are known.
    rules = PathRules((".env",))
    assert (
        rules.matches(Touch(path="notes.txt", mode="read"), cwd=str(repo), home=None)
        is None
    )


def test_a_link_named_like_an_exception_is_no_exception(repo: Path) -> None:
    (repo / ".env.example").unlink()
    os.symlink(".env", repo / ".env.example")
    assert on_disk(repo, ".env.example") in (".env", ".env.*")
    (repo / ".env.example").unlink()
    os.link(repo / ".env", repo / ".env.example")
    assert on_disk(repo, ".env.example") in (".env", ".env.*")


def test_the_real_exception_and_other_files_pass(repo: Path) -> None:
    (repo / "a.py").write_text("x")
    assert on_disk(repo, ".env.example") is None
    assert on_disk(repo, "a.py") is None
    assert on_disk(repo, "missing") is None


def test_globs_are_matched_against_the_directory(repo: Path) -> None:
    (repo / "a.py").write_text("x")
    os.symlink(".env", repo / "notes.txt")
    assert on_disk(repo, str(repo / ".e*"), pattern=True) == ".env"
    assert on_disk(repo, str(repo / "n*"), pattern=True) == ".env"  # via the link
    assert on_disk(repo, str(repo / "*.py"), pattern=True) is None  # no .env.py
    assert (
        on_disk(repo, str(repo / ".env.ex*"), pattern=True) is None
    )  # only the exception
    assert on_disk(repo, "/**", pattern=True) == ".env"  # a descriptor: anything


def test_a_glob_naming_no_existing_secret_passes(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x")
    assert on_disk(tmp_path, str(tmp_path / "*"), pattern=True) is None


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any directory")
def test_an_unreadable_directory_leaves_the_lexical_answer(repo: Path) -> None:
    locked = repo / "locked"
    locked.mkdir()
    rules = PathRules(("locked/*.key",))
    locked.chmod(0)
    try:
        touch = Touch(path=str(locked / "*"), mode="read", pattern=True)
        got = rules.matches(touch, cwd=str(repo), home=None, world=HostWorld())
    finally:
        locked.chmod(0o755)
    assert got == "locked/*.key"
