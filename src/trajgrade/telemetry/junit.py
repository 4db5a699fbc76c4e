"""``--junit FILE``: the run's final verdicts as JUnit XML, for CI.

One ``<testsuite>`` per trace (named by the trace id), one ``<testcase>``
per grader (``classname`` the grader's type; ``file`` the input the trace
was read from and ``line`` its deciding event's, when known), a ``fail`` verdict as
``<failure>`` and an ``error`` verdict as ``<error>``, each with the
verdict's evidence as message and text. The file is written once, when the
run ends (sorted by trace, then grader; the last final verdict of a pair
wins), atomically: a CI job never reads half a report.

Written with the standard library's ``xml.etree`` (escaping by the library);
characters XML 1.0 cannot hold at all (NUL and other C0 controls, which
tool output does contain) are replaced with U+FFFD first, so the report
always parses.
"""

from __future__ import annotations

import contextlib
import os
import re
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING, Final

from trajgrade.errors import Location, SinkError
from trajgrade.verdicts import Outcome

if TYPE_CHECKING:
    from collections.abc import Sequence

    from trajgrade.verdicts import Verdict

__all__ = ("JunitSink", "check_writable")

_NOT_XML: Final = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def _clean(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


#: How to put a failed ``--junit`` right.
_FIX: Final = "check --junit (a file in an existing directory you can write to)"


def _unwritable(path: str, why: str) -> SinkError:
    msg = f"cannot write the JUnit report: {why}; {_FIX}"
    return SinkError(msg, location=Location(file=path))


def check_writable(path: str) -> None:
    """Raise :class:`SinkError` unless the report can be written at ``path``:
    found at start-up, not after the whole run (where it used to be a
    traceback, and status 1, with the report lost)."""
    if path == "-":  # stdout has the verdicts; a file named "-" is never meant
        msg = "--junit -: stdout has the verdicts; name a file, e.g. --junit report.xml"
        raise SinkError(msg)
    if os.path.isdir(path):
        raise _unwritable(path, "it is a directory")
    tmp = f"{path}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT, 0o644)
    except OSError as exc:
        raise _unwritable(path, exc.strerror or str(exc)) from None
    os.close(fd)
    os.unlink(tmp)


class JunitSink:
    """Collects final verdicts; writes the report on :meth:`close` (a
    :class:`SinkError` naming the file when it cannot)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._final: dict[tuple[str, str], Verdict] = {}

    def send(self, verdicts: Sequence[Verdict]) -> None:
        for v in verdicts:
            if v.final:
                self._final[(v.trace_id, v.grader)] = v

    def flush(self) -> None:
        pass  # written once, at the end

    def close(self) -> None:
        root = ET.Element("testsuites", name="trajgrade")
        totals = {"tests": 0, "failures": 0, "errors": 0}
        suite: ET.Element | None = None
        trace = None
        for (tid, _), v in sorted(self._final.items()):
            if suite is None or tid != trace:
                trace = tid
                suite = ET.SubElement(root, "testsuite", name=_clean(tid))
                suite.attrib.update(tests="0", failures="0", errors="0", skipped="0")
            case = ET.SubElement(
                suite, "testcase", name=_clean(v.grader), classname=_clean(v.kind)
            )
            case.set("time", "0")
            if v.source is not None:  # the input, as pytest's report names a test's
                case.set("file", _clean(v.source.file))
                if v.source.line is not None:
                    case.set("line", str(v.source.line))
            _count(suite, "tests")
            totals["tests"] += 1
            if v.outcome is Outcome.PASS:
                continue
            tag = "failure" if v.outcome is Outcome.FAIL else "error"
            key = "failures" if tag == "failure" else "errors"
            _count(suite, key)
            totals[key] += 1
            evidence = _clean(v.evidence or v.outcome.value)
            detail = ET.SubElement(
                case,
                tag,
                message=evidence.split("\n", 1)[0][:1000],
                type=v.outcome.value,
            )
            detail.text = f"{evidence}\n(score {v.score}, at event {v.at_event}{', early' if v.early else ''})"
        root.attrib.update({k: str(n) for k, n in totals.items()})
        tmp = f"{self.path}.tmp"
        try:
            ET.ElementTree(root).write(tmp, encoding="utf-8", xml_declaration=True)
            os.replace(tmp, self.path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)  # a partial report (a full disk) is not left behind
            raise _unwritable(self.path, exc.strerror or str(exc)) from None


def _count(el: ET.Element, key: str) -> None:
    el.set(key, str(int(el.get(key, "0")) + 1))
