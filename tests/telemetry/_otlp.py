"""The recorded OTLP exports (tests/fixtures/otel-live) and how to read them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trajgrade.events import Event
from trajgrade.formats import BUILTIN
from trajgrade.telemetry.codec import decode

LIVE = Path(__file__).resolve().parents[1] / "fixtures" / "otel-live"


def bodies(agent: str, kind: str) -> list[tuple[str, str, bytes]]:
    """(path, content type, body) of one recording, in the order sent."""
    out = []
    for f in sorted((LIVE / agent).glob(f"v1-*.{kind}*")):
        if f.name.endswith(".meta.json"):
            continue
        meta_name = f.name.split(f".{kind}")[0] + f".{kind}.meta.json"
        meta: dict[str, Any] = json.loads((f.parent / meta_name).read_text())
        headers = {k.lower(): v for k, v in meta["headers"].items()}
        out.append((meta["path"], headers["content-type"], f.read_bytes()))
    return out


def events_of(lines: list[bytes]) -> tuple[list[Event], list[Any]]:
    """The ``otel`` format's events and errors for OTLP/JSON lines."""
    reader = BUILTIN["otel"].reader(source="otlp", default_trace="-")
    events, errors, _ = reader.feed(b"".join(line + b"\n" for line in lines), 1)
    return events, errors


def recorded_events(agent: str, kind: str) -> list[Event]:
    lines = [decode(p, body, ct).line for p, ct, body in bodies(agent, kind)]
    events, errors = events_of(lines)
    assert not errors, errors
    return events
