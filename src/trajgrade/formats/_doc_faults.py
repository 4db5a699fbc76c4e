"""Where a JSON document breaks: the parser's excerpt, found in its bytes.

ijson's C parser (yajl) reports no position for a syntax error. Its message
shows the bytes around the fault instead: one line with up to 30 bytes
either side (newlines shown as spaces), laid out so that column 40 is the
parser's offset, and a caret line under it. Without a position, a document
format's error would name the last line of whatever chunk held the fault,
so the same broken file would be reported at a different line when read
whole than when read from a pipe. Finding the excerpt in the bytes the
parser was given names the fault's own line either way.
"""

from __future__ import annotations

from typing import Final

__all__ = ("fault_line", "fault_reason")

#: Where yajl puts the parser's offset in its excerpt line, and how many
#: bytes of context it shows either side of it.
_CARET_COLUMN: Final = 40
_CONTEXT: Final = 30
#: yajl's marker under the parser's offset (at column 40).
_ARROW: Final = b" " * 21 + b"(right here) ------^"
#: yajl shows newlines and carriage returns as spaces.
_AS_SHOWN: Final = bytes.maketrans(b"\n\r", b"  ")


def fault_reason(exc: Exception) -> str:
    """The parser's message on one line (yajl gives bytes when the excerpt
    is not UTF-8: shown with escapes instead of as a bytes literal)."""
    arg = exc.args[0] if exc.args else str(exc)
    text = (
        arg.decode("utf-8", "backslashreplace") if isinstance(arg, bytes) else str(arg)
    )
    return " ".join(text.split())


def fault_line(exc: Exception, buf: bytes | memoryview, first_line: int) -> int | None:
    """The line of ``buf`` (whose first line is ``first_line``) where the
    parser stopped, or None when its message has no excerpt that ``buf``
    holds (another parser, or the end of input)."""
    arg = exc.args[0] if exc.args else None
    if isinstance(arg, str):
        arg = arg.encode("utf-8", "surrogateescape")
    if not isinstance(arg, bytes):
        return None
    parts = arg.split(b"\n")
    if len(parts) >= 3 and parts[2].find(b"^") == _CARET_COLUMN:
        excerpt = parts[1]
    elif len(parts) >= 2 and parts[1].endswith(_ARROW):
        # yajl copies the excerpt as a C string: a NUL byte at the fault
        # ends it (and its newline), so the arrow follows on its line.
        excerpt = parts[1][: -len(_ARROW)] + b"\x00"
    else:
        return None
    data = bytes(buf)
    shown = data.translate(_AS_SHOWN)
    offset = _offset(excerpt, shown)
    if offset is None:
        return None
    return first_line + data.count(b"\n", 0, offset)


def _offset(excerpt: bytes, shown: bytes) -> int | None:
    """The parser's offset in ``shown``. Under 30, the excerpt is the start
    of the bytes, padded to column 40; else it starts 10 columns in with the
    30 bytes before the offset."""
    for offset in range(_CONTEXT):
        lead = _CARET_COLUMN - offset
        if not excerpt[:lead].strip() and shown.startswith(excerpt[lead:]):
            return offset
    pad = _CARET_COLUMN - _CONTEXT
    if excerpt[:pad].strip():
        return None
    at = shown.find(excerpt[pad:])
    return None if at < 0 else at + _CONTEXT
