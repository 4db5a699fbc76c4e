"""The options and input of the library's graders, checked when given.

:class:`~trajgrade.api.stream_grader.StreamGrader` and :func:`~trajgrade.pipeline.whole.grade_bytes`
take a format name, a source name, a line limit and bytes; a typo in one
otherwise failed deep inside the decoder (``can't concat int to bytes`` for a
``bytearray``) or silently (``max_line_bytes=0`` skipped every line).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from trajgrade.errors import ConfigError, Location

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

__all__ = ("BATCH_FIXES", "byte_chunks", "check_input_options")

#: How a grade_bytes caller fixes an undetectable format and an oversize
#: line (SourceDecoder's ``fixes``: its errors name the CLI's flags).
BATCH_FIXES: Final = (
    "give grade_bytes its fmt= (the names: `trajgrade formats`)",
    "raise grade_bytes' max_line_bytes=",
)
_BYTES: Final = (bytes, bytearray, memoryview)


def check_input_options(fmt: object, source: object, max_line_bytes: object) -> None:
    """Options a typo would otherwise turn into an error at every record."""
    from trajgrade.formats import BUILTIN

    if fmt != "auto" and fmt not in BUILTIN:
        known = ", ".join(sorted(BUILTIN))
        msg = f"unknown input format {fmt!r}; known formats: {known} (or 'auto')"
        raise ConfigError(msg, location=Location(field="fmt"))
    if not isinstance(source, str) or not source:
        msg = f"source must be a non-empty str (it names the default trace), got {source!r}"
        raise TypeError(msg)
    if type(max_line_bytes) is not int or max_line_bytes < 1:
        msg = f"max_line_bytes must be a positive int, got {max_line_bytes!r}"
        raise ValueError(msg)


def byte_chunks(data: object) -> Iterator[bytes]:
    """``data`` (bytes-like, or an iterable of bytes-like chunks) as bytes."""
    if isinstance(data, _BYTES):
        yield bytes(data)
        return
    if isinstance(data, str) or not hasattr(data, "__iter__"):
        msg = (
            f"grade_bytes() takes bytes or an iterable of bytes chunks, not a "
            f"{type(data).__name__}; encode text first (data.encode())"
        )
        raise TypeError(msg)
    chunks: Iterable[object] = data
    for i, chunk in enumerate(chunks):
        if not isinstance(chunk, _BYTES):
            msg = (
                f"grade_bytes() chunk {i} is a {type(chunk).__name__}, not bytes; "
                f"encode text first (chunk.encode())"
            )
            raise TypeError(msg)
        yield bytes(chunk)
