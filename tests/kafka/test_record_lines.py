"""A Kafka batch as lines: the one-join fast path, against a value-by-value rule.

``partition._lines`` joins a batch's record values into newline-terminated
lines in one pass when every value already is one plain line; any other
batch goes record by record (None). No broker is needed: this is the rule.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from trajgrade.kafka.partition import _lines


def _plain(value: bytes | None) -> bool:
    """One plain line: a value, not empty, no leading whitespace or control
    byte, no CR or LF inside."""
    return (
        value is not None
        and value[:1] >= b"!"
        and b"\n" not in value
        and b"\r" not in value
    )


_VALUES = st.one_of(
    st.none(),
    st.binary(max_size=12),
    st.sampled_from([b'{"a":1}', b'{"b":"x\ny"}', b'{"c":"\r"}', b" {}", b"\n"]),
)


@given(st.lists(_VALUES, max_size=8))
def test_a_batch_is_joined_exactly_when_every_value_is_a_plain_line(
    values: list[bytes | None],
) -> None:
    got = _lines(list(values))
    if values and all(_plain(v) for v in values):
        assert got == b"".join(v + b"\n" for v in values if v is not None)
    else:
        assert got is None


def test_a_newline_or_carriage_return_inside_a_value_sends_the_batch_one_by_one() -> (
    None
):
    assert _lines([b'{"a":1}', b'{"b":2}']) == b'{"a":1}\n{"b":2}\n'
    assert _lines([b'{"a":1}', b'{"b"\n:2}']) is None
    assert _lines([b'{"a":1}', b'{"b"\r:2}']) is None
    assert _lines([b'{"a":1}', b'{"b":2}\n']) is None
