"""Config loading: layouts, located errors (file, line, field), all at once."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from trajgrade import (
    ConfigError,
    ConfigErrors,
    compile_suite,
    decode_config,
    load_config,
    load_suite,
)

BAD = textwrap.dedent(
    """\
    graders:
      - type: tool-calls
        config:
          disallowed:
            - name: view
              min_count: 2
      - type: tool-call
        config: {max: 3}
      - type: tool-calls
        config:
          required:
            - name: bash
              min_cout: 2
      - type: wall-time
        config:
          max: 120
    """
)


def _errors(text: str, name: str = "policy.yaml") -> list[str]:
    with pytest.raises(ConfigError) as info:
        compile_suite(decode_config(text, name=name))
    exc = info.value
    return [str(e) for e in exc.errors] if isinstance(exc, ConfigErrors) else [str(exc)]


def test_every_error_is_reported_with_file_line_and_field() -> None:
    """All four problems come back together, each located precisely."""
    errors = _errors(BAD)
    assert len(errors) == 4
    assert errors[0].startswith(
        "policy.yaml:6: graders[0].config.disallowed[0].min_count: min_count is only allowed"
    )
    assert errors[1].startswith(
        "policy.yaml:7: graders[1].type: unknown grader type 'tool-call'; did you mean 'tool-calls'"
    )
    assert errors[2].startswith(
        "policy.yaml:13: graders[2].config.required[0].min_cout: unknown field `min_cout`; did you mean `min_count`?"
    )
    assert errors[3].startswith(
        "policy.yaml:16: graders[3].config.max: wall-time max must be"
    )


def test_yaml_syntax_errors_name_the_line() -> None:
    """A YAML syntax error reports its line and asks for a fix."""
    (err,) = _errors("graders:\n  - type: tool-calls\n    config: {required: [a}\n")
    assert err.startswith("policy.yaml:3:") and "not valid YAML" in err
    assert "<unicode string>" not in err  # the file is named, not PyYAML's stream
    assert "(line 3, column " in err


def test_a_misspelt_layout_key_gets_a_did_you_mean() -> None:
    """`grader:` for `graders:` names the key, its line and the right spelling."""
    (err,) = _errors("# policy\ngrader:\n  - type: turn-count\n    config: {max: 1}\n")
    assert err == "policy.yaml:2: grader: no graders found: did you mean `graders`?"


def test_a_bad_enum_value_lists_the_choices_with_a_did_you_mean() -> None:
    """msgspec says only "Invalid enum value"; the error names the choices."""
    (err,) = _errors(
        "graders:\n  - type: cost-budget\n"
        "    config: {max_usd: 1, unknown_model: warm}\n"
    )
    assert err == (
        "policy.yaml:3: graders[0].config.unknown_model: `unknown_model` must be "
        "one of deny, ignore, warn (got 'warm'); did you mean `warn`?"
    )


def test_json_config_is_accepted(tmp_path: Path) -> None:
    """A .json config file works like YAML."""
    path = tmp_path / "policy.json"
    path.write_text('{"graders": [{"type": "turn-count", "config": {"max": 3}}]}')
    assert [g.name for g in load_suite(path).graders] == ["turn-count"]


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    """An unreadable config names the path; the library names no CLI flag
    (a program calling ``load_suite`` has no ``-c``)."""
    with pytest.raises(ConfigError, match="cannot read config file") as err:
        load_config(tmp_path / "nope.yaml")
    assert str(tmp_path / "nope.yaml") in str(err.value)
    assert "--config" not in str(err.value)


def test_layout_must_have_graders() -> None:
    """A file without a graders list explains the expected layout."""
    (err,) = _errors("required: [a]\n")
    assert "no graders found; expected one of the layouts" in err


def test_unknown_top_level_keys_are_errors() -> None:
    """A typo at the top level is reported, not ignored."""
    errors = _errors(
        "grader: []\ngraders:\n  - type: turn-count\n    config: {max: 1}\n"
    )
    assert any("unknown top-level key 'grader'" in e for e in errors)


def test_duplicate_types_get_unique_names() -> None:
    """Two graders of one type are named type and type#2; explicit names must be unique."""
    text = "graders:\n  - {type: turn-count, config: {max: 1}}\n  - {type: turn-count, config: {max: 2}}\n"
    assert [g.name for g in compile_suite(decode_config(text)).graders] == [
        "turn-count",
        "turn-count#2",
    ]
    (err,) = _errors(
        "graders:\n  - {type: turn-count, name: x, config: {max: 1}}\n  - {type: tool-call-count, name: x, config: {max: 2}}\n"
    )
    assert "grader name 'x' is used twice" in err


def test_empty_config_block_means_no_options() -> None:
    """`config:` left empty is read as {} (and then validated)."""
    (err,) = _errors("graders:\n  - type: tool-calls\n    config:\n")
    assert "at least one of required, disallowed or sequence" in err


def test_fingerprint_changes_with_the_config() -> None:
    """Suites from different configs have different fingerprints; equal ones match."""
    a = compile_suite(decode_config("graders: [{type: turn-count, config: {max: 1}}]"))
    b = compile_suite(decode_config("graders: [{type: turn-count, config: {max: 2}}]"))
    c = compile_suite(
        decode_config("graders:\n  - type: turn-count\n    config:\n      max: 1\n")
    )
    assert a.fingerprint != b.fingerprint and a.fingerprint == c.fingerprint


def test_an_unreadable_entry_does_not_hide_the_other_graders_errors() -> None:
    """A broken entry and another grader's config error are reported in one pass."""
    text = textwrap.dedent(
        """\
        execution:
          evaluators:
            - type: tool_trajectory
              mode: in_order
              expected: [{tool: a}]
            - name: two
              type: tool_trajectory
              mode: bogus
        """
    )
    errors = _errors(text, name="eval.yaml")
    assert errors[0].startswith(
        "eval.yaml:3: execution.evaluators[0].name: `name` must be a non-empty string"
    )
    assert errors[1].startswith(
        "eval.yaml:8: execution.evaluators[1].mode: invalid mode 'bogus'"
    )


def test_a_key_written_twice_is_an_error_not_a_silent_override() -> None:
    """A second `graders:` block would silently replace the first; it is reported instead."""
    (err,) = _errors(
        "graders:\n  - {type: tool-calls, config: {disallowed: [rm]}}\n"
        "graders:\n  - {type: turn-count, config: {max: 3}}\n"
    )
    assert err.startswith(
        "policy.yaml:3: graders: key `graders` is written twice (first on line 1)"
    )
