"""``flow``'s binding (``bind`` with ``unless_bound`` or ``if_bound``): its
config checks and the rulings on a ``forbid`` call against the bound values,
apart from the rule so each module stays short."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trajgrade.graders.rules._flow_parts import kept_form, redacted, short
from trajgrade.graders.rules._shared import arg_values, call_label

if TYPE_CHECKING:
    from trajgrade.events import ToolCall
    from trajgrade.graders._spec import ErrorList
    from trajgrade.graders.matching._tool_match import Matcher
    from trajgrade.graders.rules._flow_parts import FlowConfig

__all__ = ("if_bound_hit", "read_binding", "unless_bound_hit")


def read_binding(
    config: FlowConfig,
    after: Matcher | None,
    secret: str | None,
    errors: ErrorList,
) -> None:
    """Check ``bind``, ``unless_bound`` and ``if_bound`` against each other
    and against the trigger (``after`` matcher, or ``secret`` kind)."""
    bind = config.bind
    for key in ("bind", "unless_bound", "if_bound"):
        name = getattr(config, key)
        if name is not None and not name.strip():
            errors.add(
                key,
                f"{key} must name an argument (command, path, url, or the "
                "argument's own name)"
                + (", result or secret" if key == "bind" else ""),
            )
    if bind is None:
        for key in ("unless_bound", "if_bound"):
            if getattr(config, key) is not None:
                errors.add(key, f"{key} compares with bound values; give bind too")
        return
    if config.forbid is None:
        errors.add("bind", "bind works with forbid (and unless_bound or if_bound)")
    if (config.unless_bound is None) == (config.if_bound is None):
        errors.add("bind", "with bind, give exactly one of unless_bound or if_bound")
    if bind == "secret" and secret is None:
        errors.add("bind", "bind: secret needs after: {secret: ...}")
    elif bind != "secret" and secret is not None:
        errors.add("bind", "with after: {secret: ...}, bind must be secret")
    elif (
        bind not in ("result", "secret")
        and after is not None
        and after.result is not None
    ):
        errors.add(
            "bind",
            "binding an argument needs an after matcher without result "
            "(the argument is taken when the call is made)",
        )


def unless_bound_hit(
    call: ToolCall, arg: str, bind: str | None, values: dict[str, None]
) -> tuple[str, str] | None:
    """``unless_bound: arg``: a ``forbid`` call is refused unless every value
    of its ``arg`` (and at least one) equals a bound value."""
    given = arg_values(call, arg)
    unbound = [v for v in given if kept_form(v, exact=True) not in values]
    if given and not unbound:
        return None
    shown = short(unbound[0]) if unbound else "nothing"
    return (
        "unless_bound",
        f"{call_label(call)} has {arg}={shown}, which no earlier call matching after bound ({bind})",
    )


def if_bound_hit(
    call: ToolCall,
    arg: str,
    bind: str | None,
    values: dict[str, None],
    trigger: str,
) -> tuple[str, str] | None:
    """``if_bound: arg``: a ``forbid`` call is refused when a value of its
    ``arg`` contains a bound value."""
    for value in arg_values(call, arg):
        for bound in values:
            if bound in value:
                # A bound secret is never repeated in full: the reason
                # reaches the model, logs and verdict files.
                shown = redacted(bound) if bind == "secret" else short(bound)
                return (
                    "if_bound",
                    f"{call_label(call)} has {arg} containing {shown}, a value bound from {bind} after {trigger}",
                )
    return None
