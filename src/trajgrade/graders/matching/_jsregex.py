"""Translate JavaScript ``RegExp`` sources (no flags) for the :mod:`regex` module.

vally's ``tool-calls`` grader builds its matchers with ``new RegExp(source)`` and no
flags: Annex B (non-unicode) syntax, case-sensitive, ``.`` excluding line
terminators, ``^``/``$`` anchored to the whole input, ASCII ``\\d \\w \\b`` and
Unicode ``\\s``.  :func:`translate` walks such a source once and writes a pattern
for the backtracking :mod:`regex` module (whose ``timeout=`` is our ReDoS guard),
compiled with ``regex.ASCII | regex.VERSION0``; :func:`literal_of` spots plain
literals for substring fast paths.  Pure functions only: no I/O, logging or clock.

Deliberate leniency: ``(?P<name>...)``, ``(?P=name)`` and ``(?i)`` are accepted
although JavaScript would reject them.  Known deviations are listed on
:func:`translate`.
"""

from __future__ import annotations

import re
import string
from typing import TYPE_CHECKING, NoReturn

from trajgrade.graders.matching._jsliteral import CONTROL as _CONTROL
from trajgrade.graders.matching._jsliteral import JSRegexError, literal_of

__all__ = ("JSRegexError", "compile_js", "literal_of", "translate")

#: ASCII keeps ``\d \w \b`` (and ``(?i)`` folding) ASCII-only as in JavaScript;
#: VERSION0 is the ``re``-compatible dialect (no nested sets, no set operations).
if TYPE_CHECKING:
    import regex

# ECMAScript WhiteSpace + LineTerminator; the ASCII flag would shrink \s to 6 chars.
_WS = r"\t\n\x0b\x0c\r\x20\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
# Class escapes are spelled out so no emitted set contains \D \W or \S: regex
# 2026.11 wrongly matches everything with e.g. [^\d\D].
_CLASS_BODY = {"d": "0-9", "w": "0-9A-Z_a-z", "s": _WS}
_DOT = r"[^\n\r\u2028\u2029]"
_ANY, _NOTHING = r"[\x00-\U0010ffff]", r"[^\x00-\U0010ffff]"
_QUANT = re.compile(r"\{([0-9]+)(?:,([0-9]*))?\}")
_OCTAL = re.compile(r"[0-3][0-7]{0,2}|[4-7][0-7]?")  # Annex B LegacyOctalEscape
_DIGITS = re.compile(r"[0-9]+")
_NAMED = re.compile(r"\(\?P?<(?![=!])([^>]*)>")
_GROUP_REF = re.compile(r"\(\?P=\w+\)")
_FLAG_GROUP = re.compile(r"\(\?-?i[:)]")
_KREF = re.compile(r"k<([^>]*)>")
_PRESCAN = re.compile(
    r"\\.|\[(?:\\.|[^\]\\])*\]|\((?!\?)|\(\?P?<(?![=!])([^>]*)>", re.DOTALL
)


def _lit(ch: str) -> str:
    """Spell one character so it is literal both inside and outside a set."""
    if (ch.isascii() and ch.isalnum()) or (not ch.isascii() and ch.isprintable()):
        return ch
    if ch.isascii() and ch.isprintable():
        return "\\" + ch
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _hex(text: str, width: int) -> int | None:
    ok = len(text) == width and all(h in string.hexdigits for h in text)
    return int(text, 16) if ok else None


#: Deepest group nesting accepted (the engine itself fails near 150-200).
MAX_GROUP_NESTING = 100


class _Translator:
    def __init__(self, src: str) -> None:
        self.src, self.pos, self.groups = src, 0, 0
        names: set[str] = set()
        # Annex B decides "\N = backreference or octal" and "\k = named reference
        # or literal k" from the groups of the *whole* pattern, so count them first.
        for m in _PRESCAN.finditer(src):
            if m[0].startswith("("):
                self.groups += 1
                if m[1] is not None:
                    names.add(m[1])
        self.names = frozenset(names)
        # Open groups: (repeatable once closed, i.e. not a lookbehind; number and
        # name if capturing); ``closed`` holds the labels of completed groups.
        self.opened: list[tuple[bool, tuple[str, ...]]] = []
        self.closed: set[str] = set()
        self.captures = 0
        self.pieces: list[tuple[int, str]] = []  # (source offset, translation)

    def fail(self, reason: str, pos: int) -> NoReturn:
        raise JSRegexError(self.src, pos, reason)

    def origin(self, out_pos: int | None) -> int | None:
        """Map an engine error offset in the translation back into the JS source."""
        if out_pos is None:
            return None
        for src_pos, text in self.pieces:
            if out_pos < len(text):
                return src_pos
            out_pos -= len(text)
        return len(self.src)

    def run(self) -> str:
        src, opened = self.src, self.opened
        repeatable = False  # may a quantifier follow the previous term?
        while self.pos < len(src):
            start, ch = self.pos, src[self.pos]
            self.pos += 1
            quant = _QUANT.match(src, start) if ch == "{" else None
            if ch == "\\":
                text, repeatable = self.escape()
            elif ch == "[":
                text, repeatable = self.char_class(), True
            elif ch == "(":
                text, repeatable = self.group(start)
            elif ch == ")":
                if not opened:
                    self.fail("unmatched )", start)
                repeatable, labels = opened.pop()
                self.closed.update(labels)
                text = ")"
            elif ch in "*+?" or quant is not None:
                if not repeatable:
                    self.fail("nothing to repeat", start)
                text = ch
                if quant is not None:
                    if quant[2] and int(quant[2]) < int(quant[1]):
                        self.fail("numbers out of order in {} quantifier", start)
                    text, self.pos = quant[0], quant.end()
                if src.startswith("?", self.pos):
                    text, self.pos = text + "?", self.pos + 1
                repeatable = False
            elif ch in "|^$":
                text, repeatable = {"|": "|", "^": "^", "$": r"\Z"}[ch], False
            elif ch == ".":
                text, repeatable = _DOT, True
            else:  # includes ] } and a { that starts no quantifier: literal in Annex B
                text, repeatable = _lit(ch), True
            self.pieces.append((start, text))
        if opened:
            self.fail("missing )", len(src))
        return "".join(text for _, text in self.pieces)

    def group(self, start: int) -> tuple[str, bool]:
        """Translate what follows "("; return (text, may a quantifier follow now)."""
        src = self.src
        for head in ("(?:", "(?=", "(?!", "(?<=", "(?<!"):
            if src.startswith(head, start):  # Annex B: only lookaheads are repeatable
                return self.open(start + len(head), head, not head.startswith("(?<"))
        if m := _NAMED.match(src, start):
            if not m[1].isidentifier():
                self.fail(f"invalid or unsupported capture group name '{m[1]}'", start)
            if m[1] in self.closed.union(*(labels for _, labels in self.opened)):
                self.fail(f"duplicate capture group name '{m[1]}'", start)
            self.captures += 1
            return self.open(m.end(), f"(?P<{m[1]}>", True, str(self.captures), m[1])
        if m := _GROUP_REF.match(src, start):
            self.pos = m.end()
            return m[0], True
        if m := _FLAG_GROUP.match(src, start):
            if m[0].endswith(":"):
                return self.open(m.end(), m[0], True)
            self.pos = m.end()
            return m[0], False
        if src.startswith("(?", start):
            self.fail(
                "invalid group (of Python's inline flags only (?i) is accepted)", start
            )
        self.captures += 1
        return self.open(start + 1, "(", True, str(self.captures))

    def open(
        self, end: int, text: str, repeatable: bool, *labels: str
    ) -> tuple[str, bool]:
        """Enter a group; *repeatable* applies once it is closed."""
        if len(self.opened) >= MAX_GROUP_NESTING:
            # The engine's parser recurses per level, so how deep it gets
            # depended on the caller's stack; a fixed bound answers the same
            # everywhere.
            self.fail(
                f"groups nested too deeply (at most {MAX_GROUP_NESTING} levels)", end
            )
        self.pos = end
        self.opened.append((repeatable, labels))
        return text, False

    def escape(self) -> tuple[str, bool]:
        src, i = self.src, self.pos
        if i >= len(src):
            self.fail("\\ at end of pattern", i - 1)
        c = src[i]
        if c in "dDwWbB":
            self.pos += 1
            return "\\" + c, c not in "bB"
        if c in "sS":
            self.pos += 1
            return ("[^" if c == "S" else "[") + _WS + "]", True
        digits = _DIGITS.match(src, i)
        if c != "0" and digits and int(digits[0]) <= self.groups:
            self.pos = digits.end()
            return self.backref(digits[0]), True
        if c == "k" and self.names:
            ref = _KREF.match(src, i)
            if ref is None or ref[1] not in self.names:
                self.fail("invalid named reference", i - 1)
            self.pos = ref.end()
            return self.backref(ref[1]), True
        return _lit(self.char_escape(in_class=False)), True

    def backref(self, label: str) -> str:
        # JS: a reference to a group that has not matched matches the empty string.
        # Quantifiers reset captures per iteration, so a group still open, or (but
        # for lookbehinds, which run right to left) not yet opened, has not matched.
        if any(label in labels for _, labels in self.opened) or (
            label not in self.closed and all(ahead for ahead, _ in self.opened)
        ):
            return "(?:)"
        return f"(?({label})\\g<{label}>)"

    def char_escape(self, in_class: bool) -> str:
        """Decode the CharacterEscape after a backslash into the one char it denotes."""
        src, i = self.src, self.pos
        c, nxt = src[i], src[i + 1 : i + 2]
        self.pos = i + 1
        if c == "c":
            if nxt.isascii() and (
                nxt.isalpha() or (in_class and (nxt.isdigit() or nxt == "_"))
            ):
                self.pos += 1
                return chr(ord(nxt) % 32)
            self.pos = i  # Annex B: a bare "\c" is a literal backslash, then "c"
            return "\\"
        width = {"x": 2, "u": 4}.get(c, 0)
        code = _hex(src[i + 1 : i + 1 + width], width) if width else None
        if code is not None:
            self.pos += width
            low = None
            if src.startswith("\\u", self.pos):
                low = _hex(src[self.pos + 2 : self.pos + 6], 4)
            # Python strings hold code points, not UTF-16 units: fuse an escaped pair.
            if 0xD800 <= code < 0xDC00 and low is not None and 0xDC00 <= low < 0xE000:
                self.pos += 6
                return chr(0x10000 + ((code - 0xD800) << 10) + low - 0xDC00)
            return chr(code)
        if c in "upP" and nxt == "{":
            self.fail(f"\\{c}{{...}} needs the u flag (vally sets none)", i - 1)
        if c in "01234567":
            octal = _OCTAL.match(src, i)
            assert octal is not None
            self.pos = octal.end()
            return chr(int(octal[0], 8))
        if c == "k" and self.names:  # only reachable inside a class
            self.fail("invalid escape \\k in a pattern with named groups", i - 1)
        return _CONTROL.get(c, c)  # everything else is an identity escape

    def class_atom(self) -> str:
        """Return one char, or a two-char class escape such as ``\\d``."""
        src = self.src
        ch = src[self.pos]
        self.pos += 1
        if ch != "\\":
            return ch
        if self.pos >= len(src):
            self.fail("\\ at end of pattern", self.pos - 1)
        if src[self.pos] in "dDwWsSb":
            self.pos += 1
            return "\b" if src[self.pos - 1] == "b" else "\\" + src[self.pos - 1]
        return self.char_escape(in_class=True)

    def char_class(self) -> str:
        src = self.src
        negated = src.startswith("^", self.pos)
        self.pos += negated
        body: list[str] = []
        complements: list[str] = []  # bodies of the \D \W \S members
        while True:
            if self.pos >= len(src):
                self.fail("missing ]", len(src))
            if src[self.pos] == "]":  # so "[]" is empty and "[^]" is everything
                self.pos += 1
                break
            atoms = [self.class_atom()]
            dash = self.pos
            if src.startswith("-", dash) and src[dash + 1 : dash + 2] not in ("", "]"):
                self.pos += 1
                atoms += ["-", self.class_atom()]
                if len(atoms[0]) == len(atoms[2]) == 1:
                    if atoms[0] > atoms[2]:
                        self.fail("range out of order in character class", dash)
                    body.append(f"{_lit(atoms[0])}-{_lit(atoms[2])}")
                    continue
                # Annex B: with a class escape at either end the "-" is a literal.
            for atom in atoms:
                if len(atom) == 1:
                    body.append(_lit(atom))
                elif atom[1].islower():
                    body.append(_CLASS_BODY[atom[1]])
                else:
                    complements.append(_CLASS_BODY[atom[1].lower()])
        members = "".join(body)
        if not complements:
            if not members:
                return _ANY if negated else _NOTHING
            return f"[{'^' if negated else ''}{members}]"
        # VERSION0 has no set operations, so unions/intersections with complements
        # become single-character alternations and lookaheads.
        if not negated:
            alts = ([f"[{members}]"] if members else []) + [
                f"[^{c}]" for c in complements
            ]
            return "(?:" + "|".join(alts) + ")"
        head = f"(?![{members}])" if members else ""
        looks = "".join(f"(?=[{c}])" for c in complements[:-1])
        return f"(?:{head}{looks}[{complements[-1]}])"


def translate(pattern: str) -> str:
    """Translate a JavaScript RegExp source (no flags) into a :mod:`regex` pattern.

    The result must be compiled with ``regex.ASCII | regex.VERSION0``;
    :func:`compile_js` does that.  Raises :class:`JSRegexError` for syntax errors the
    tokenizer sees; errors only the engine detects surface from :func:`compile_js`.

    Unavoidable deviations from JavaScript: strings are matched as code points, not
    UTF-16 units (an astral char is one char for ``.``, classes and quantifiers, and
    ``\\uD83D\\uDE00`` is fused into one char); a backreference to a group closed
    earlier inside the same quantified group may see an earlier iteration's (or an
    empty iteration's) capture, where JavaScript resets it; ``\\u{...}``,
    ``\\p{...}`` and ``\\P{...}`` (literal text without the u flag) are rejected as
    almost certainly unintended; group names must be Python identifiers (no ``$``)
    and may not repeat (ES2025 allows repeats across alternatives); ``(?i)`` folds
    ASCII only; quantifier bounds beyond the engine's limit (about 4e9) and very
    deep nesting are rejected.
    """
    return _Translator(pattern).run()


def _flags() -> int:
    import regex

    return int(regex.ASCII | regex.VERSION0)


def compile_js(pattern: str) -> regex.Pattern[str]:
    """Translate and compile *pattern*; every failure becomes a :class:`JSRegexError`."""
    # The engine is imported only here: translating (for RE2) needs only the
    # stdlib tokenizers above, so a cold hook whose patterns all run on RE2
    # never loads the backtracking engine (~15 ms).
    import regex

    translator = _Translator(pattern)
    source = translator.run()
    try:
        return regex.compile(source, _flags())
    except (regex.error, ValueError) as exc:  # ValueError: e.g. flag clashes
        pos = translator.origin(getattr(exc, "pos", None))
        raise JSRegexError(pattern, pos, getattr(exc, "msg", None) or str(exc)) from exc
    except RecursionError as exc:  # the engine's parser recurses per nesting level
        raise JSRegexError(pattern, None, "groups nested too deeply") from exc
