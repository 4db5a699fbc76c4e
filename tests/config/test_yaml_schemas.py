"""Configs are read with their upstream's YAML version; aliases are bounded."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import pytest

from trajgrade.config import _yaml as _yaml
from trajgrade.config.compile import compile_suite
from trajgrade.config.decode import decode_config, load_config
from trajgrade.errors import ConfigError

SCALARS = (
    "[yes, on, off, 010, 0o17, 1_000, 1e3, '1e3', 1:30, 2024-01-01, Null, 0x1F, .5]"
)


def test_core_schema_resolves_scalars_as_the_yaml_npm_package() -> None:
    # Values as `yaml@2` (agentv's and vally's parser) gives them to JavaScript.
    got = _yaml.safe_load(f"v: {SCALARS}", _yaml.Schema.YAML_1_2)["v"]
    assert got == [
        "yes",
        "on",
        "off",
        10,
        15,
        "1_000",
        1000.0,
        "1e3",
        "1:30",
        "2024-01-01",
        None,
        31,
        0.5,
    ]


def test_pyyaml_schema_resolves_scalars_as_yaml_1_1() -> None:
    got = _yaml.safe_load(f"v: {SCALARS}", _yaml.Schema.YAML_1_1)["v"]
    assert got == [
        True,
        True,
        False,
        8,
        "0o17",
        1000,
        "1e3",
        "1e3",
        90,
        dt.date(2024, 1, 1),
        None,
        31,
        0.5,
    ]


def test_core_schema_keys_are_javascript_object_keys() -> None:
    got = _yaml.safe_load("1: a\ntrue: b\n<<: {m: 1}\n", _yaml.Schema.YAML_1_2)
    assert got == {"1": "a", "true": "b", "<<": {"m": 1}}  # no merge keys in 1.2


def _agentv(args: str) -> str:
    return f"""execution:
  evaluators:
    - name: t
      type: tool_trajectory
      mode: any_order
      minimums: {{a: 1}}
      expected:
        - tool: a
          args: {args}
"""


def test_agentv_layout_reads_yaml_1_2() -> None:
    config = decode_config(
        _agentv("{confirm: yes, n: 010, when: 1:30}"), name="eval.yaml"
    )
    options = config.graders[0].config or {}
    assert options["expected"][0]["args"] == {"confirm": "yes", "n": 10, "when": "1:30"}


def test_vally_layout_reads_yaml_1_2() -> None:
    text = "graders:\n  - type: tool-calls\n    config:\n      required: [{name: on}]\n"
    config = decode_config(text, name="vally.yaml")
    assert (config.graders[0].config or {})["required"] == [{"name": "on"}]


def test_letta_layout_reads_yaml_1_1() -> None:
    text = "graders:\n  g:\n    kind: tool\n    function: exact_match\n    extractor: last_assistant\n    extra: [yes, 010]\n"
    config = decode_config(text, name="suite.yaml")
    assert config.graders[0].config["extra"] == [True, 8]


def test_errors_keep_their_line_in_the_1_2_layouts() -> None:
    text = _agentv("{x: 1}").replace("mode: any_order", "mode: bogus")
    config = decode_config(text, name="eval.yaml")
    with pytest.raises(ConfigError) as info:
        compile_suite(config)
    assert "eval.yaml:5: execution.evaluators[0].mode" in str(info.value)


#: A billion-laughs policy like the reliability issue's 414-byte one: 9^9 "lol"s.
BOMB = "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n"
    for p, n in zip("abcdefgh", "bcdefghi", strict=True)
)
BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + BOMB


@pytest.mark.parametrize(
    "layout",
    [
        "graders: [{type: tool-calls, config: {x: *i}}]\n",
        "graders: {g: {kind: tool, x: *i}}\n",
    ],
)
def test_alias_bomb_is_refused_quickly_at_the_alias(
    tmp_path: Path, layout: str
) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB + layout)
    start = time.process_time()
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert time.process_time() - start < 5  # was 35 s and 4.5 GB
    message = str(info.value)
    assert f"{path}:5:" in message  # *d, the alias past the bound
    assert "aliases expand to more than 10,000 nodes" in message


def test_recursive_alias_is_refused() -> None:
    text = "graders:\n  - &x\n    type: tool-calls\n    config: {disallowed: [*x]}\n"
    with pytest.raises(
        ConfigError, match=r"x.yaml:4: alias \*x is used inside its own anchor"
    ):
        decode_config(text, name="x.yaml")


def test_a_few_aliases_are_fine() -> None:
    text = "base: &b {name: view}\ngraders:\n  - type: tool-calls\n    config: {disallowed: [*b, *b]}\n"
    config = decode_config(text, name="x.yaml")
    with pytest.raises(ConfigError, match="unknown top-level key 'base'"):
        compile_suite(config)
