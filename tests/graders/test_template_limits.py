"""AI GO! templates cannot build huge strings (reliability: template bombs)."""

from __future__ import annotations

import time

import pytest
from jinja2.exceptions import SecurityError

from trajgrade.graders.aigo._template_limits import MAX_TEMPLATE_TEXT, render_bounded
from trajgrade.graders.aigo.function_call_coverage import _compile

BOMBS = {
    "repeat": '{{ "x" * 300000000 }}',
    "list repeat": '{{ ["a"] * 300000000 }}',
    "doubling ~": '{% set ns = namespace(s="a") %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}',
    "doubling +": '{% set ns = namespace(s="a") %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}x',
    "percent width": '{{ "%300000000s" % 1 }}',
    "center": '{{ "a"|center(300000000) }}',
    "format filter": '{{ "%300000000s"|format(1) }}',
    "replace": '{{ ("a" * 1000)|replace("a", "b" * 100000) }}',
    "indent": '{{ ("a\n" * 1000)|indent(100000) }}',
    "power": "{{ 10 ** 100000000 }}",
    "join": '{{ ["a" * 600000, "b" * 600000]|join }}',
    "output": "{% for i in range(100000) %}{% for j in range(100000) %}xxxxxxxxxx{% endfor %}{% endfor %}",
}


@pytest.mark.parametrize("source", BOMBS.values(), ids=BOMBS.keys())
def test_template_bombs_are_refused_before_they_allocate(source: str) -> None:
    template, _ = _compile(source)
    start = time.process_time()
    with pytest.raises(SecurityError, match="template limit"):
        render_bounded(template, sample={})
    assert time.process_time() - start < 2


def test_ordinary_templates_render() -> None:
    template, uses_sample = _compile(
        '{{ sample.calls|join(",") }} {{ "ab" ~ "c" }} {{ "%5s" % "x" }}'
    )
    assert uses_sample
    assert render_bounded(template, sample={"calls": ["a", "b"]}) == "a,b abc     x"
    big, _ = _compile('{{ "x" * ' + str(MAX_TEMPLATE_TEXT) + " }}")
    assert len(render_bounded(big, sample={})) == MAX_TEMPLATE_TEXT
