"""MkDocs hook (``hooks:`` in mkdocs.yml): the README's front page as the
site's ``readme.md``, its links rewritten for the site, so the site holds
the page its overview points to instead of a copy that would drift."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

README = Path(__file__).resolve().parent / "README.md"
#: ``[text](target)`` with a relative target (not http, mailto or #anchor).
_LINK = re.compile(r"\[([^\]]*)\]\((?!https?:|mailto:|#)([^)\s]+)\)")


def _site_link(match: re.Match[str]) -> str:
    text, target = match.group(1), match.group(2)
    if target.startswith("docs/"):
        return f"[{text}]({target.removeprefix('docs/')})"
    return text  # a file of the repository, not a page of the site: its name stays


def on_files(files: Files, config: Any) -> Files:
    text = _LINK.sub(_site_link, README.read_text(encoding="utf-8"))
    files.append(File.generated(config, "readme.md", content=text))
    return files
