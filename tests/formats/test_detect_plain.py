"""The format registry is lazy, and detecting a canonical event loads no
other format: a plain canonical event (a ``type`` of the event model and no
key beyond its fields) is told as ``trajgrade`` by its shape, and asking
every format's ``sniff`` in detection order gives the same answer."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from trajgrade import formats
from trajgrade.events import EVENT_TYPES
from trajgrade.formats import BUILTIN, BUILTIN_MODULES, detect

REPO = Path(__file__).parents[2]


def test_the_lazy_table_matches_the_format_modules_in_detection_order() -> None:
    """BUILTIN_MODULES lists every format each module defines, in the
    detection order of the modules (canonical events last)."""
    found: dict[str, str] = {}
    for module in dict.fromkeys(BUILTIN_MODULES.values()):
        for fmt in importlib.import_module(f"trajgrade.formats.{module}").FORMATS:
            found[fmt.name] = module
    assert list(found.items()) == list(BUILTIN_MODULES.items())
    assert list(BUILTIN) == list(BUILTIN_MODULES)
    assert [f.name for f in BUILTIN.values()] == list(BUILTIN_MODULES)
    assert list(BUILTIN)[-1] == "trajgrade"
    assert "nope" not in BUILTIN and BUILTIN.get("nope") is None


def _by_sniffing(record: Any) -> str | None:
    """detect()'s answer without its shortcut: every format asked in turn."""
    for fmt in BUILTIN.values():
        try:
            if fmt.sniff(record):
                return fmt.name
        except (TypeError, ValueError):
            continue
    return None


_KEYS = sorted(formats._EVENT_KEYS - {"type"})
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from([*_KEYS, "data", "x"]), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(sorted(EVENT_TYPES)),
    fields=st.dictionaries(st.sampled_from(_KEYS), _JSON, max_size=6),
)
def test_a_plain_canonical_event_is_detected_as_every_sniff_would(
    kind: str, fields: dict[str, Any]
) -> None:
    record = {"type": kind, **fields}
    line = msgspec.json.encode(record)
    assert formats._is_plain_event(record)
    assert _by_sniffing(record) == detect(line) == "trajgrade"


@settings(max_examples=200, deadline=None)
@given(
    kind=st.sampled_from([*sorted(EVENT_TYPES), "result", "init", "progress"]),
    fields=st.dictionaries(
        st.sampled_from([*_KEYS, "data", "sessionId", "payload", "events", "content"]),
        _JSON,
        max_size=4,
    ),
)
def test_any_first_record_is_detected_as_every_sniff_would(
    kind: str, fields: dict[str, Any]
) -> None:
    """Records the shortcut leaves to the formats (a key of another format's)
    are detected as before."""
    record = {"type": kind, **fields}
    assert detect(msgspec.json.encode(record)) == _by_sniffing(record)


def test_reading_canonical_events_loads_no_other_format() -> None:
    code = (
        "import sys\n"
        "from trajgrade.pipeline.decoder import SourceDecoder\n"
        "d = SourceDecoder('s')\n"
        'line = b\'{"type":"tool_call","trace_id":"t","name":"bash"}\\n\'\n'
        "assert len(d.feed(line).events) == 1\n"
        "print(sorted(m for m in sys.modules if m.startswith(('trajgrade.formats.', 'ijson'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout
    loaded = eval(out)  # (a printed list of module names)
    assert "trajgrade.formats.native" in loaded
    assert not [m for m in loaded if m.startswith("ijson")]
    others = {f"trajgrade.formats.{m}" for m in BUILTIN_MODULES.values()} - {
        "trajgrade.formats.native"
    }
    assert not others & set(loaded)
