"""Reading a hook payload: what the agent writes cannot make the guard fail open.

The tool input inside a payload is the agent's (the model's) text, so a
payload that cannot be read because of it is an attack surface, not only
a broken host. Two cases are handled here rather than by ``--fail-closed``:

* **Lone surrogate escapes** (``"\\ud800"``): JavaScript's ``JSON.stringify``
  writes one for a string with an unpaired surrogate, so a Node host
  (Claude Code, Gemini CLI) sends it when the model's input has one; msgspec
  refuses it. It is read as U+FFFD, the character a Node host hands the
  tool for it, so the call is judged on what would run.
* **Nesting deeper than** :data:`~trajgrade._util.depth.MAX_DEPTH`: no agent's
  input nests like that and it cannot be examined without exhausting the
  stack, so the hook denies the call it gates (:func:`refused_outright`),
  fail-open or not.
"""

from __future__ import annotations

from typing import Any

import msgspec

from trajgrade._util.depth import TooDeep, decode_bounded
from trajgrade._util.surrogates import without_lone_surrogates

__all__ = ("decode_payload", "refused_outright")


def decode_payload(raw: bytes) -> Any:
    """The payload's JSON value. Raises :class:`~trajgrade._util.depth.TooDeep`
    for over-deep input and ``msgspec.DecodeError`` for what is not JSON."""
    try:
        return decode_bounded(msgspec.json, raw)
    except TooDeep:
        raise
    except msgspec.DecodeError:
        repaired = without_lone_surrogates(raw)
        if repaired is raw:
            raise
        return decode_bounded(msgspec.json, repaired)


def refused_outright(exc: BaseException) -> str | None:
    """Why a payload that failed with ``exc`` is denied whatever
    ``--fail-closed`` says; None when that is for ``--fail-closed`` to decide."""
    if isinstance(exc, TooDeep):
        return f"the hook payload was refused: {exc}; the call it gates is denied"
    return None
