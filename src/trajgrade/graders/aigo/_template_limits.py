"""A Jinja sandbox whose strings cannot grow past a size limit.

Jinja's sandbox keeps templates away from Python internals and caps
``range``, but not memory: ``{{ "x" * 300000000 }}``, a namespace string
doubled in a loop, ``"%300000000s" % 1`` or ``|center(300000000)`` build a
300 MB string. The AI GO! ``function_calls`` template renders a short list of
names, so every value a template builds is limited to
:data:`MAX_TEMPLATE_TEXT` characters: the operators that grow values
(``*``, ``+``, ``**``, ``%``, ``~``) and the filters that can (by width or
count) are checked *before* they build anything, and the rendered output is
read as a stream and abandoned past the limit.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sized
from typing import TYPE_CHECKING, Any, Final, NoReturn

from jinja2.compiler import CodeGenerator, Frame
from jinja2.exceptions import SecurityError

if TYPE_CHECKING:
    from jinja2.nodes import Concat
from jinja2.sandbox import ImmutableSandboxedEnvironment

__all__ = ("MAX_TEMPLATE_TEXT", "BoundedSandbox", "render_bounded")

#: Characters any value built by a template (and its output) may have.
MAX_TEMPLATE_TEXT: Final = 1 << 20
#: Largest exponent of ``**`` on integers (big-integer powers are CPU bombs).
_MAX_EXPONENT: Final = 4096
_WIDTH: Final = re.compile(r"%[-#0 +]*(\d+|\*)?(?:\.(\d+|\*))?")


def _refuse(what: str, size: int) -> NoReturn:
    msg = (
        f"{what} would build {size:,} characters, over the template limit of "
        f"{MAX_TEMPLATE_TEXT:,}; a function_calls template renders a short list"
    )
    raise SecurityError(msg)


def _huge_power(left: Any, right: Any) -> bool:
    ints = isinstance(left, int) and isinstance(right, int)
    return ints and abs(right) > _MAX_EXPONENT and abs(left) > 1


def _length(value: Any) -> int:
    return (
        len(value)
        if isinstance(value, Sized) and not isinstance(value, dict)
        else len(str(value))
    )


def _check_format(fmt: Any) -> None:
    if not isinstance(fmt, str):
        return
    for m in _WIDTH.finditer(fmt):
        for part in m.groups():
            if part == "*":
                msg = "`*` widths in a format string are not allowed in templates"
                raise SecurityError(msg)
            if part and int(part) > MAX_TEMPLATE_TEXT:
                _refuse("a format width", int(part))


class _BoundedCodeGenerator(CodeGenerator):
    """``a ~ b`` goes through :meth:`BoundedSandbox.bounded_concat` (a size check first)."""

    def visit_Concat(self, node: Concat, frame: Frame) -> None:
        self.write("environment.bounded_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox with size checks on everything that grows values."""

    code_generator_class = _BoundedCodeGenerator
    intercepted_binops = frozenset({"*", "+", "**", "%"})

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        for name, check in _FILTER_CHECKS.items():
            self.filters[name] = _checked(self.filters[name], check)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                sized = isinstance(seq, str | list | tuple) and isinstance(n, int)
                if sized and len(seq) * n > MAX_TEMPLATE_TEXT:
                    _refuse("`*`", len(seq) * n)
        elif operator == "+" and isinstance(left, str | list | tuple):
            if isinstance(right, Sized) and len(left) + len(right) > MAX_TEMPLATE_TEXT:
                _refuse("`+`", len(left) + len(right))
        elif operator == "**" and _huge_power(left, right):
            msg = f"`**` with exponent {right} is over the template limit of {_MAX_EXPONENT}"
            raise SecurityError(msg)
        elif operator == "%":
            _check_format(left)
        return super().call_binop(context, operator, left, right)

    def bounded_concat(self, parts: tuple[Any, ...]) -> str:
        texts = [p if isinstance(p, str) else str(p) for p in parts]
        total = sum(map(len, texts))
        if total > MAX_TEMPLATE_TEXT:
            _refuse("`~`", total)
        return "".join(texts)


def _checked(
    func: Callable[..., Any], check: Callable[..., None]
) -> Callable[..., Any]:
    def filter_(*args: Any, **kwargs: Any) -> Any:
        check(*args, **kwargs)
        return func(*args, **kwargs)

    for attr in ("jinja_pass_arg",):  # keep Jinja's context/env passing marker
        if hasattr(func, attr):
            setattr(filter_, attr, getattr(func, attr))
    return filter_


def _width(value: Any = "", width: Any = 80, *_: Any, **__: Any) -> None:
    if isinstance(width, int) and width > MAX_TEMPLATE_TEXT:
        _refuse("a filter width", width)


def _indent(value: Any = "", width: Any = 4, *_: Any, **__: Any) -> None:
    n = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
    lines = str(value).count("\n") + 1
    if n * lines + _length(value) > MAX_TEMPLATE_TEXT:
        _refuse("|indent", n * lines + _length(value))


def _replace(*args: Any, **kwargs: Any) -> None:
    # (eval_ctx, s, old, new, count=None): the context argument comes first.
    s, old, new = [*args[1:4], "", "", ""][:3]
    s, old, new = str(s), str(old), str(new)
    hits = s.count(old) if old else len(s) + 1
    if len(s) + hits * len(new) > MAX_TEMPLATE_TEXT:
        _refuse("|replace", len(s) + hits * len(new))


def _join(*args: Any, **kwargs: Any) -> None:
    # (eval_ctx, value, d="", attribute=None)
    items = args[1] if len(args) > 1 else ()
    sep = str(args[2]) if len(args) > 2 else str(kwargs.get("d", ""))
    if isinstance(items, Iterable) and isinstance(items, Sized):
        total = sum(_length(x) for x in items) + len(sep) * max(len(items) - 1, 0)
        if total > MAX_TEMPLATE_TEXT:
            _refuse("|join", total)


def _format(value: Any = "", *_: Any, **__: Any) -> None:
    _check_format(value)


_FILTER_CHECKS: Final[dict[str, Callable[..., None]]] = {
    "center": _width,
    "indent": _indent,
    "replace": _replace,
    "join": _join,
    "format": _format,
}


def render_bounded(template: Any, **context: Any) -> str:
    """Render ``template``, abandoning it once the output passes the limit."""
    out: list[str] = []
    size = 0
    for chunk in template.generate(**context):
        size += len(chunk)
        if size > MAX_TEMPLATE_TEXT:
            _refuse("the template's output", size)
        out.append(chunk)
    return "".join(out)
