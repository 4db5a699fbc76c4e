"""``trajgrade check --agent NAME``: tool matchers that can never work on NAME.

A compiled grader that matches tool calls lists its matchers through a
``matchers()`` method (``tool-calls`` does; so can any grader built on
``_tool_match``), read from ``Suite.capabilities``. Each matcher is checked against the agent's table in
``_agents``:

* its name regex / kind selects none of the agent's tools: it never matches;
* a ``command``/``path``/``url``/``program`` filter on a tool it selects that
  has no such view: an ``error`` verdict on that tool's calls (vally's
  configuration error), which a guard without ``--fail-closed`` lets run;
* an ``args:`` key that none of the selected tools takes: it never matches.

Warnings, not errors: a policy may cover several agents on purpose.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from trajgrade.graders.matching._agents import (
    AGENTS,
    MCP_PREFIX,
    UNION,
    Tool,
    narrow_advice,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

    from trajgrade.config.model import Suite
    from trajgrade.graders.matching._tool_match import Matcher

__all__ = ("agent_warnings", "capability_table", "matcher_warnings")

#: Agents whose MCP tools are named ``mcp__<server>__<tool>``.
_MCP_AGENTS: Final = frozenset(("claude-code", "codex", "canonical"))
_SAMPLE_MCP: Final = MCP_PREFIX + "server__tool"


#: What a binding option naming an argument no selected tool takes does.
_UNBOUND: Final = {
    "bind": "nothing is ever bound",
    "unless_bound": "every call its forbid matches is refused",
    "if_bound": "it never refuses a call",
}


def agent_warnings(suite: Suite, agent: str) -> list[str]:
    """Every warning for ``agent``, each naming the grader and the entry."""
    out: list[str] = []
    for grader, caps in zip(suite.graders, suite.capabilities, strict=True):
        matchers = caps.matchers
        for m in matchers() if matchers is not None else ():
            out.extend(f"{grader.name}: {text}" for text in matcher_warnings(m, agent))
        bindings = caps.bindings
        for key, arg, m in bindings() if bindings is not None else ():
            out.extend(f"{grader.name}: {t}" for t in _binding(key, arg, m, agent))
    return out


def capability_table() -> list[str]:
    """The program table, one line per capability set: what ``capability:``
    filters and ``protect.capabilities`` decide (docs/guard-programs.md)."""
    from trajgrade.graders.protect.programs_reference import table_lines

    return [
        "# programs' capabilities (docs/guard-programs.md; arguments add more,"
        " unlisted programs are unknown)",
        *(f"#   {line}" for line in table_lines()),
    ]


def _selected(m: Matcher, agent: str) -> tuple[dict[str, Tool], bool]:
    """The agent's tools ``m`` selects, and whether it selects MCP tools."""
    selected = {name: tool for name, tool in AGENTS[agent].items() if m.name(name)}
    # str_replace_editor-like tools: keep them only if a chosen kind is theirs.
    if m.kinds:
        selected = {n: t for n, t in selected.items() if t.kinds() & m.kinds}
    return selected, agent in _MCP_AGENTS and m.name(_SAMPLE_MCP)


def _takes_none(selected: dict[str, Tool], mcp: bool, key: str) -> bool:
    """No selected tool takes argument ``key`` (each one's arguments known)."""
    known = [t for t in selected.values() if t.args]
    complete = bool(known) and len(known) == len(selected) and not mcp
    return complete and not any(key in t.args for t in known)


def _binding(key: str, arg: str, m: Matcher, agent: str) -> list[str]:
    """A flow ``bind``/``unless_bound``/``if_bound`` naming an argument that
    none of the tools of its matcher takes on ``agent`` (a typo: ``pth``)."""
    selected, mcp = _selected(m, agent)
    if not _takes_none(selected, mcp, arg):
        return []
    return [
        f"{key}: {arg!r} is an argument none of {agent}'s {_names(selected)} "
        f"(selected by {m.where} {m.label}) takes, so {_UNBOUND[key]} on "
        f"{agent}" + _view_hint(arg)
    ]


def matcher_warnings(m: Matcher, agent: str) -> list[str]:
    """What cannot work on ``agent`` in one matcher (empty: nothing)."""
    tools = AGENTS[agent]
    if not tools:
        return []  # the application's own tools (openai-chat): nothing known
    selected, mcp = _selected(m, agent)
    where = f"{m.where} {m.label}"
    if not selected and not mcp:
        return [
            f"{where} matches none of {agent}'s tools ({_names(tools)}); it never "
            f"matches on {agent} (docs/agents.md lists them by kind)"
        ]
    out = []
    for view in m.required_args:
        lacking = [n for n, t in selected.items() if not _has_view(t, view)]
        if lacking:
            out.append(
                f"{where} filters on {view!r}, but {agent}'s {_names(lacking)} "
                f"{'has' if len(lacking) == 1 else 'have'} no {view}: "
                f"{'its' if len(lacking) == 1 else 'their'} calls get an error "
                f"verdict (a configuration error); {narrow_advice(m.kinds, view)}"
            )
    for key, _ in m.args:
        if _takes_none(selected, mcp, key):
            out.append(
                f"{where} filters on args.{key}, which none of {agent}'s "
                f"{_names(selected)} takes; it never matches on {agent}"
                + _view_hint(key)
            )
    return out


def _has_view(tool: Tool, view: str) -> bool:
    specs: tuple[str, ...] = getattr(tool, view)
    return bool(specs)


def _view_hint(key: str) -> str:
    for view in ("command", "path", "url"):
        if any(key in getattr(t, view) for t in UNION.values()):
            return f" (use the {view}: view, which reads the right argument per tool)"
    return ""


def _names(names: Iterable[Any]) -> str:
    items = sorted(names)
    shown = ", ".join(items[:8])
    return shown + (f", … ({len(items)} tools)" if len(items) > 8 else "")
