"""The config model: a decoded config file and a compiled suite.

:class:`SuiteConfig` is what :mod:`trajgrade.config.decode` makes of a
file (grader entries, each located); :class:`Suite` is what
:mod:`trajgrade.config.compile` builds from it (the graders, ready to feed).
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any, Final

import msgspec

from trajgrade._util.locate import Path as _Path
from trajgrade._util.locate import render
from trajgrade.errors import ConfigError, Location
from trajgrade.graders.capabilities import Capabilities, projection

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from trajgrade.events import Projection
    from trajgrade.graders import Grader

__all__ = (
    "ConfigWarning",
    "GraderSpec",
    "OnFail",
    "Suite",
    "SuiteConfig",
    "default_on_fail",
)


class OnFail(enum.StrEnum):
    """What a failed verdict of a grader should do to a live agent (``on_fail:``).

    A trajgrade-level key of every grader entry, in every layout. Omitted, it
    is ``abort`` for metric thresholds and ``cost-budget`` (budgets: the run
    is over) and ``deny``
    for every other type (one call broke the policy: refuse that call).
    """

    #: End the run: hooks answer ``continue: false``; ``trajgrade run`` stops the agent.
    ABORT = "abort"
    #: Refuse the offending call; the wrapper, which cannot refuse one call, stops the agent.
    DENY = "deny"
    #: Only write the verdict: no hook decision, no stop, no --signal/--fail-fast.
    REPORT = "report"
    #: Shadow mode: the call runs; the decision is reported (to the model and
    #: user where the host can show it, to logs and the decision stream).
    WARN = "warn"
    #: Ask the user to confirm the call where the host supports it (Claude
    #: Code); hosts that refuse ``ask`` get a deny.
    ASK = "ask"


#: Grader types whose failure means the run is spent, not one bad call.
_ABORT_BY_DEFAULT: Final = frozenset(
    {
        "token-budget",
        "tool-call-count",
        "turn-count",
        "error-count",
        "wall-time",
        "cost-budget",
    }
)


def default_on_fail(kind: str) -> OnFail:
    """The ``on_fail`` of a grader type when its entry names none."""
    return OnFail.ABORT if kind in _ABORT_BY_DEFAULT else OnFail.DENY


class GraderSpec(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One entry of ``graders:`` as written."""

    type: str
    #: ``config:`` may be left empty in YAML (null); it then means ``{}``.
    config: dict[str, Any] | None = None
    name: str | None = None
    #: Where the entry sits in the file (for messages).
    path: _Path = ()
    #: Options sit in the entry itself (upstream layouts), not under ``config``.
    inline: bool = False
    #: The entry's ``on_fail:`` (None: the type's default, see :class:`OnFail`).
    on_fail: OnFail | None = None
    #: The entry's ``message:``: what the model and the user are told when
    #: the grader fails or refuses a call (a rule's own ``message:`` wins).
    message: str | None = None


class SuiteConfig(msgspec.Struct, frozen=True, kw_only=True):
    """A decoded (not yet compiled) config file."""

    graders: tuple[GraderSpec, ...]
    #: The file it came from, or a label such as ``<string>``.
    source: str = "<config>"
    #: Field path -> 1-based line, from the YAML node tree.
    lines: dict[_Path, int] = msgspec.field(default_factory=dict)
    base_dir: str | None = None
    #: Suite-wide pass threshold from the layout (agentv ``execution.threshold``).
    threshold: float | None = None
    #: Problems found while reading the layout; compile_suite raises them
    #: together with every grader's own errors.
    problems: tuple[ConfigError, ...] = ()

    def locate(self, path: Sequence[str | int]) -> Location:
        """The Location of a field path (nearest enclosing line)."""
        p = tuple(path)
        line = None
        while True:
            line = self.lines.get(p)
            if line is not None or not p:
                break
            p = p[:-1]
        return Location(file=self.source, line=line, field=render(tuple(path)) or None)


class ConfigWarning(msgspec.Struct, frozen=True):
    """A non-fatal config problem (what the upstream tool skips with a warning)."""

    message: str
    location: Location

    def __str__(self) -> str:
        where = str(self.location)
        return f"{where}: {self.message}" if where else self.message


class Suite:
    """Compiled graders, shared by every trace. Immutable once built."""

    __slots__ = (
        "capabilities",
        "fingerprint",
        "graders",
        "messages",
        "on_fail",
        "projection",
        "rule_lines",
        "source",
        "uses_project_path",
        "warnings",
    )

    def __init__(
        self,
        graders: Sequence[Grader[Any]],
        *,
        fingerprint: str,
        source: str,
        warnings: Sequence[ConfigWarning] = (),
        on_fail: Mapping[str, OnFail] | None = None,
        messages: Mapping[str, str] | None = None,
        rule_lines: Mapping[str, Callable[[str], int | None]] | None = None,
        uses_project_path: bool = False,
    ) -> None:
        self.graders: tuple[Grader[Any], ...] = tuple(graders)
        #: What each grader offers beyond the Grader protocol, by index
        #: (trajgrade.graders.capabilities): probed once, here, so that a
        #: Suite built in code has it too.
        self.capabilities: tuple[Capabilities, ...] = tuple(
            Capabilities.of(g) for g in self.graders
        )
        #: What the decoders build of the events for these graders.
        self.projection: Projection = projection(self.graders, self.capabilities)
        #: Grader name (``Verdict.grader``) -> what its failure should do; every
        #: grader has an entry (its type's default when the config names none).
        self.on_fail: dict[str, OnFail] = {
            g.name: default_on_fail(g.kind) for g in self.graders
        }
        self.on_fail.update(on_fail or {})
        #: Grader name -> its entry's ``message:`` (graders without one: absent).
        self.messages: dict[str, str] = dict(messages or {})
        #: Grader name -> the policy line of one of its rules (``disallowed[0]``),
        #: for :attr:`~trajgrade.verdicts.Matched.line`; absent for a Suite
        #: built in code.
        self.rule_lines: dict[str, Callable[[str], int | None]] = dict(rule_lines or {})
        #: A matcher filters ``project_path``: the runners give calls without
        #: a cwd their project root (``--project-root``, the log's cwd).
        self.uses_project_path = uses_project_path
        #: Problems that did not stop compilation (`trajgrade check` prints them).
        self.warnings: tuple[ConfigWarning, ...] = tuple(warnings)
        #: Hash of the normalised grader specs; checkpoints from another config
        #: are refused by comparing it.
        self.fingerprint = fingerprint
        self.source = source

    def __repr__(self) -> str:
        names = ", ".join(g.name for g in self.graders)
        return f"Suite({names})"
