"""Builders for the ``protect`` decision tests: policies compiled from real
sections, facts as the analysis reports them (CallFacts is the decision's
real input type)."""

from __future__ import annotations

from typing import Any

from trajgrade.graders.protect.config import ProtectConfig
from trajgrade.graders.protect.facts import CallFacts, Run, Touch
from trajgrade.graders.protect.policy import CompiledPolicy, compile_policy
from trajgrade.graders.protect.profiles import resolved
from trajgrade.graders.protect.self_guard import ProtectedTrees, builtin_roots

HOME = "/home/u"
CWD = "/proj"
POLICY = "/proj/policy.yaml"
STATE_DIR = "/home/u/.local/state/trajgrade"
SECRET = "/proj/.env"
READ_ONLY = "/proj/.git/hooks"


def policy(section: dict[str, Any] | None = None, **paths: Any) -> CompiledPolicy:
    """A section compiled as the grader compiles it. Secret and read-only
    paths are matched by ProtectedTrees (the same matcher protocol as
    PathRules), with exact paths: these tests are about the decision."""
    import msgspec

    config = resolved(msgspec.convert(section or {}, ProtectConfig))
    return compile_policy(
        config,
        guarded=ProtectedTrees(builtin_roots((POLICY, STATE_DIR)), agent_dirs=True),
        timeout=0.25,
        paths={
            "secrets": paths.get("secrets", ProtectedTrees((SECRET,))),
            "not_secrets": paths.get("not_secrets"),
            "read_only": paths.get("read_only", ProtectedTrees((READ_ONLY,))),
        },
        home=HOME,
    )


def shell(*runs: Run, touches: tuple[Touch, ...] = (), **kw: Any) -> CallFacts:
    caps = frozenset().union(*(r.capabilities for r in runs)) if runs else frozenset()
    caps = caps | kw.pop("capabilities", frozenset())
    return CallFacts(
        tool="Bash", kind="shell", runs=runs, touches=touches, capabilities=caps, **kw
    )


def run(*argv: str, caps: tuple[str, ...] = ()) -> Run:
    name = argv[0].rsplit("/", 1)[-1]
    return Run(name=name, argv=argv, capabilities=frozenset(caps))


def tool(name: str, kind: str | None, *touches: Touch, **kw: Any) -> CallFacts:
    return CallFacts(tool=name, kind=kind, touches=touches, **kw)


def w(path: str, **kw: Any) -> Touch:
    return Touch(path=path, mode="write", **kw)


def r(path: str, **kw: Any) -> Touch:
    return Touch(path=path, mode="read", **kw)


def d(path: str, **kw: Any) -> Touch:
    return Touch(path=path, mode="delete", **kw)


def x(path: str, **kw: Any) -> Touch:
    return Touch(path=path, mode="exec", **kw)


class KnownValues:
    """Stands in for secret_values.SecretValues (not on this branch yet):
    the same ``found_in`` contract, over the values themselves."""

    def __init__(self, *values: str) -> None:
        self.values = values

    def found_in(self, text: str) -> bool:
        return any(v in text for v in self.values)
