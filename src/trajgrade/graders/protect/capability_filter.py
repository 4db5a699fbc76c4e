"""``capability:`` on a tool matcher: the shell command starts a program
that can do one of the named things (docs/guard-matching.md).

``{kind: shell, capability: network}`` matches ``curl x``, ``git clone u``
and ``python3 -c "urlopen(...)"`` alike, from the program table
(:mod:`.programs`) and the shell analysis (:mod:`.shell`). A program the
table does not know, or a command that cannot be read, matches where a match
is a violation (``disallowed``, guard rules: fail closed, like ``program:``)
and never where it is credit (``required``).

Matching sits below this package, so the rule that builds a
:class:`~trajgrade.graders.matching._tool_match.Matcher` compiles the test
here and hands it over.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from trajgrade.graders.matching._tool_match import capabilities_named
from trajgrade.graders.protect.facts import CAPABILITIES
from trajgrade.graders.protect.programs import capabilities_of

if TYPE_CHECKING:
    from trajgrade.graders._spec import ErrorList
    from trajgrade.graders.matching._tool_match import ToolMatch

__all__ = ("CapabilityFilter", "compile_capability", "validate_capability")

#: Decided from the session's history (what the agent wrote), not from one
#: command's programs: the ``protect:`` section decides it.
_PROVENANCE: Final = "runs-agent-code"


class CapabilityFilter:
    """The compiled test: ``filter(command) -> bool``."""

    __slots__ = ("names", "unknown_matches")

    def __init__(self, names: frozenset[str], *, unknown_matches: bool) -> None:
        self.names = names
        self.unknown_matches = unknown_matches

    def __call__(self, command: str) -> bool:
        from trajgrade.graders.protect.shell import analyze_command

        facts = analyze_command(command, None)
        if facts.unreadable is not None and self.unknown_matches:
            return True
        for run in facts.runs:
            known = run.name is not None and (
                capabilities_of(run.name, run.argv) is not None
            )
            if not known:
                if self.unknown_matches:
                    return True
                continue
            if run.capabilities & self.names:
                return True
        return False


def compile_capability(
    spec: ToolMatch, *, unknown_matches: bool
) -> CapabilityFilter | None:
    """The test for ``spec.capability`` (None when the spec has none);
    ``spec`` has been validated."""
    names = capabilities_named(spec)
    if not names:
        return None
    return CapabilityFilter(frozenset(names), unknown_matches=unknown_matches)


def validate_capability(at: str, spec: ToolMatch, errors: ErrorList) -> None:
    """Each named capability exists and can be told from one command."""
    if spec.capability is None:
        return
    field = f"{at}.capability"
    names = capabilities_named(spec)
    if not names:
        errors.add(field, "capability: [] matches nothing; name one or drop it")
    known = [c for c in CAPABILITIES if c != _PROVENANCE]
    for name in names:
        if name == _PROVENANCE:
            errors.add(
                field,
                f"{_PROVENANCE} is decided from what the agent wrote earlier in the "
                f"session, not from one command; set protect.capabilities.{_PROVENANCE} "
                "instead",
            )
        elif name not in CAPABILITIES:
            import difflib  # error messages only: not on the hook path

            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            errors.add(
                field,
                f"unknown capability {name!r}; {hint}the capabilities are "
                f"{', '.join(known)} (docs/guard-programs.md lists each program's)",
            )
