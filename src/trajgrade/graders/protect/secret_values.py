"""The values in a secret file, kept as digests: :class:`SecretValues`.

A policy names secret *files*; what must not leave is what is *in* them.
From a file's bytes this takes every value -- dotenv ``KEY=value`` and
``export KEY="value"`` lines (quotes, escapes, inline comments), INI
``key = value`` and YAML ``key: value`` lines, JSON string values, PEM
blocks, and the whole file when it is one short token -- and keeps, for
each value and each way it could be spelt on its way out (as it is, JSON-
escaped, URL-encoded, hex, base64 at each of the three byte alignments it
can have inside a larger base64 text), only a keyed blake2b digest and the
spelling's length. The key is random per process, so a digest cannot be
looked up in a table computed elsewhere. Nothing in clear is kept, logged
or put in a message.

Values shorter than :data:`VALUE_MIN` and plain words (``development``,
``true``, ``5432``) are skipped: every text would "hold" them.

:meth:`SecretValues.found_in` splits a text on characters that occur in no
spelling (quotes, brackets, blanks ... whichever of them none uses), looks a
whole token up by its length, and slides over longer tokens with a digest
of :data:`VALUE_MIN` characters as a prefilter: one small digest per
character of a long token, a full one only where a spelling can start.
"""

from __future__ import annotations

import base64
import json
import re
from hashlib import blake2b
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

__all__ = ("VALUE_MIN", "SecretValues", "values_in")

#: Shortest value recognised (and the prefilter's window).
VALUE_MIN: Final = 8
#: Spellings kept per file, at most (a file with more is not a .env).
SPELLINGS_MAX: Final = 1 << 14
_ONE_TOKEN_MAX: Final = 4096
#: The per-process key of the digests, made at first use: ``secrets`` brings
#: hmac, random and base64 (~7 ms), which a call with no secret values to
#: compare never needs.
_KEYS: Final[list[bytes]] = []
#: Characters a text may be split on, when no spelling of a value has them.
_SEPARATORS: Final = " \t\r\n\"'`<>()[]{},;|\\"

_ASSIGNMENT: Final = re.compile(
    r"^[^\S\n]*(?:export[^\S\n]+)?[A-Za-z_][\w.\-]*[^\S\n]*[=:][^\S\n]*(.*?)[^\S\n]*$",
    re.MULTILINE,
)
_PEM: Final = re.compile(
    r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL
)
_PLAIN: Final = re.compile(r"[a-z]+(?:[._-][a-z]+)*|[0-9.]+|true|false|null|none")
_ESCAPES: Final = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "$": "$"}


def _key() -> bytes:
    if not _KEYS:
        import secrets

        _KEYS.append(secrets.token_bytes(32))
    return _KEYS[0]


def _digest(text: str, size: int = 16) -> bytes:
    return blake2b(
        text.encode("utf-8", "replace"), key=_key(), digest_size=size
    ).digest()


def _unquote(raw: str) -> str:
    """A dotenv/INI/YAML value as the program reading it sees it."""
    if raw[:1] == '"':
        out: list[str] = []
        i = 1
        while i < len(raw) and raw[i] != '"':
            if raw[i] == "\\" and i + 1 < len(raw):
                i += 1
                out.append(_ESCAPES.get(raw[i], "\\" + raw[i]))
            else:
                out.append(raw[i])
            i += 1
        return "".join(out)
    if raw[:1] == "'":
        end = raw.find("'", 1)
        return raw[1:end] if end > 0 else raw[1:]
    return re.split(r"\s#", raw, maxsplit=1)[0].strip()


def _json_strings(value: object, depth: int = 0) -> Iterator[str]:
    if depth > 64:
        return
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _json_strings(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            yield from _json_strings(item, depth + 1)


def values_in(data: bytes) -> set[str]:
    """Every value of a secret file (transient: the caller keeps digests)."""
    text = data.decode("utf-8", "replace")
    found: set[str] = set()
    whole = text.strip()
    if whole and len(whole) <= _ONE_TOKEN_MAX and not any(c.isspace() for c in whole):
        found.add(whole)
    if whole[:1] in ("{", "["):
        try:
            found.update(_json_strings(json.loads(whole)))
        except ValueError:
            pass
    for match in _PEM.finditer(text):
        body = match.group(2)
        found.add(match.group(0))
        found.add("".join(body.split()))
        found.update(line.strip() for line in body.splitlines())
    for match in _ASSIGNMENT.finditer(text):
        raw = match.group(1)
        found.add(_unquote(raw) or raw)
    return {v for v in found if len(v) >= VALUE_MIN and not _PLAIN.fullmatch(v)}


def _base64_spellings(raw: bytes) -> Iterator[str]:
    """The base64 of ``raw`` alone, and the characters that stand for it
    inside a longer base64 text wherever it starts (byte offset mod 3)."""
    yield base64.b64encode(raw).decode()
    for skip in (0, 1, 2):
        inner = raw[skip:]
        inner = inner[: len(inner) - len(inner) % 3]
        if inner:
            yield base64.b64encode(inner).decode()
            yield base64.urlsafe_b64encode(inner).decode()


def spellings(value: str) -> set[str]:
    """The ways ``value`` can appear in a text on its way out."""
    raw = value.encode("utf-8", "replace")
    from urllib.parse import quote, quote_plus  # ~6 ms: only once secrets are read

    out = {value, json.dumps(value)[1:-1], quote(value, safe=""), quote(value)}
    out.add(quote_plus(value))
    out.update((raw.hex(), raw.hex().upper()))
    out.update(_base64_spellings(raw))
    return {s for s in out if len(s) >= VALUE_MIN}


class SecretValues:
    """The digests of one secret file's values, in every spelling."""

    __slots__ = ("_digests", "_lengths", "_prefixes", "_split")

    def __init__(self, data: bytes) -> None:
        self._digests: set[bytes] = set()
        self._prefixes: set[bytes] = set()
        lengths: set[int] = set()
        separators = set(_SEPARATORS)
        for spelling in _bounded(s for v in values_in(data) for s in spellings(v)):
            self._digests.add(_digest(spelling))
            self._prefixes.add(_digest(spelling[:VALUE_MIN], 8))
            lengths.add(len(spelling))
            separators.difference_update(spelling)
        #: Ascending, so a slide stops at the first length that overruns.
        self._lengths = tuple(sorted(lengths))
        chars = "".join(sorted(separators))
        self._split = re.compile(f"[{re.escape(chars)}]+") if chars else None

    def __bool__(self) -> bool:
        return bool(self._digests)

    def __repr__(self) -> str:  # never the values, nor their digests
        return f"SecretValues({len(self._digests)} spellings)"

    def found_in(self, text: str) -> bool:
        """Whether ``text`` holds any value, in any spelling."""
        if not self._digests or len(text) < VALUE_MIN:
            return False
        tokens = self._split.split(text) if self._split is not None else (text,)
        return any(self._in_token(t) for t in tokens if len(t) >= VALUE_MIN)

    def hidden(self, text: str) -> str:
        """``text`` with every token that holds a value, in any spelling,
        replaced by ``[REDACTED]`` (evidence shows a refused call's argument)."""
        if not self._digests or len(text) < VALUE_MIN:
            return text
        if self._split is None:
            return "[REDACTED]" if self._in_token(text) else text
        # Split keeping the separators (odd indexes), so the rest reads as written.
        parts = re.split(f"({self._split.pattern})", text)
        return "".join(
            "[REDACTED]"
            if i % 2 == 0 and len(p) >= VALUE_MIN and self._in_token(p)
            else p
            for i, p in enumerate(parts)
        )

    def _in_token(self, token: str) -> bool:
        n = len(token)
        if n in self._lengths and _digest(token) in self._digests:
            return True
        if n == VALUE_MIN:
            return False
        copy = blake2b(key=_key(), digest_size=8).copy
        prefixes, digests, lengths = self._prefixes, self._digests, self._lengths
        for i, window in enumerate(_windows(token)):
            probe = copy()
            probe.update(window)
            if probe.digest() not in prefixes:
                continue
            for size in lengths:
                if i + size > n:
                    break
                if _digest(token[i : i + size]) in digests:
                    return True
        return False


def _windows(token: str) -> Iterator[bytes]:
    """Each :data:`VALUE_MIN`-character window of ``token``, as UTF-8 (sliced
    as bytes when the token is ASCII, where the indexes agree)."""
    last = len(token) - VALUE_MIN + 1
    if token.isascii():
        data = token.encode()
        return (data[i : i + VALUE_MIN] for i in range(last))
    return (token[i : i + VALUE_MIN].encode("utf-8", "replace") for i in range(last))


def _bounded(items: Iterable[str]) -> Iterator[str]:
    for count, item in enumerate(items):
        if count >= SPELLINGS_MAX:
            return
        yield item
