"""Neutral corpus calls -> each agent's real hook payloads.

The shapes are the recorded ones (``tests/fixtures/hooks``,
``tests/fixtures/guard-live``): Claude Code 2.1 (``PreToolUse`` with its own
tool names), Codex 0.169 (``PreToolUse`` with ``Bash {command}`` and
``apply_patch {command: patch}``), Gemini CLI 0.61 (``BeforeTool`` with
``run_shell_command``, ``read_file``, ``grep_search``, ``write_file``,
``replace``, ``web_fetch``). A kind an agent has no tool for is sent through
the tools it has, as its model would: Codex reads with ``cat``, searches
with ``grep`` and fetches with ``curl``; its writes and edits are patches.
One neutral call may become several agent calls (a ``MultiEdit`` is one
``replace`` per edit on Gemini CLI).
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from typing import Any, Final

from tests.guard._corpus import Call

__all__ = ("AGENTS", "GATE", "Session", "render")

#: Agent forms, as ``trajgrade hook AGENT`` names them.
AGENTS: Final = ("claude-code", "codex", "gemini")
GATE: Final = {
    "claude-code": "PreToolUse",
    "codex": "PreToolUse",
    "gemini": "BeforeTool",
}
_AFTER: Final = {
    "claude-code": "PostToolUse",
    "codex": "PostToolUse",
    "gemini": "AfterTool",
}

ToolCall = tuple[str, dict[str, Any]]


@dataclass
class Session:
    """The fields every payload of one session carries."""

    agent: str
    session_id: str
    cwd: str
    transcript: str
    calls: int = 0

    def base(self, event: str) -> dict[str, Any]:
        p: dict[str, Any] = {
            "session_id": self.session_id,
            "transcript_path": self.transcript,
            "cwd": self.cwd,
            "hook_event_name": event,
        }
        if self.agent == "codex":
            p["model"] = "gpt-5.5"
            p["permission_mode"] = "bypassPermissions"
        elif self.agent == "claude-code" and event not in (
            "SessionStart",
            "SessionEnd",
        ):
            p["permission_mode"] = "default"
        return p

    def start(self) -> dict[str, Any]:
        return {**self.base("SessionStart"), "source": "startup"}

    def prompt(self, text: str) -> dict[str, Any]:
        event = "BeforeAgent" if self.agent == "gemini" else "UserPromptSubmit"
        return {**self.base(event), "prompt": text}

    def end(self) -> dict[str, Any]:
        return {**self.base("SessionEnd"), "reason": "other"}

    def gate(self, call: ToolCall) -> dict[str, Any]:
        """The payload asking whether ``call`` may run."""
        name, tool_input = call
        p = {**self.base(GATE[self.agent]), "tool_name": name, "tool_input": tool_input}
        if self.agent != "gemini":  # Gemini CLI sends no call id
            self.calls += 1
            p["tool_use_id"] = f"toolu_corpus_{self.calls:04d}"
        return p

    def after(self, gate: dict[str, Any], result: str) -> dict[str, Any]:
        """The payload reporting what the call of ``gate`` returned."""
        p = {**gate, "hook_event_name": _AFTER[self.agent]}
        name = gate["tool_name"]
        if self.agent == "gemini":
            p["tool_response"] = {"llmContent": result, "returnDisplay": result}
        elif self.agent == "claude-code" and name == "Bash":
            p["tool_response"] = {"stdout": result, "stderr": "", "interrupted": False}
        elif self.agent == "claude-code" and name == "Read":
            path = gate["tool_input"]["file_path"]
            p["tool_response"] = {
                "type": "text",
                "file": {"filePath": path, "content": result},
            }
        else:
            p["tool_response"] = result
        return p


def render(agent: str, call: Call, cwd: str) -> list[ToolCall]:
    """The tool calls ``agent`` makes for ``call`` (tool name, tool_input)."""
    if call.kind == "shell":
        return [_shell(agent, call.args)]
    if call.kind == "mcp":
        return [(call.args["tool"], dict(call.args.get("args", {})))]
    if agent == "codex":
        return _codex(call)
    if agent == "gemini":
        return _gemini(call)
    return _claude(call, cwd)


def _shell(agent: str, command: str) -> ToolCall:
    if agent == "gemini":
        return ("run_shell_command", {"command": command})
    if agent == "claude-code":
        return ("Bash", {"command": command, "description": "Run a command"})
    return ("Bash", {"command": command})


def _edits(call: Call) -> list[tuple[str, str]]:
    if call.kind == "edit":
        return [(call.args["old"], call.args["new"])]
    return [(e["old"], e["new"]) for e in call.args["edits"]]


def _claude(call: Call, cwd: str) -> list[ToolCall]:
    a = call.args
    kind = call.kind
    if kind == "read":
        return [("Read", {"file_path": _absolute(a, cwd)})]
    if kind == "read_many":
        return [("Read", {"file_path": _absolute(p, cwd)}) for p in a]
    if kind == "grep":
        grep = {"pattern": a["pattern"], "output_mode": a.get("output_mode", "content")}
        grep |= {k: a[k] for k in ("path", "glob") if k in a}
        return [("Grep", grep)]
    if kind == "glob":
        return [("Glob", {k: a[k] for k in ("pattern", "path") if k in a})]
    if kind == "write":
        return [
            ("Write", {"file_path": _absolute(a["path"], cwd), "content": a["content"]})
        ]
    if kind == "edit":
        old, new = _edits(call)[0]
        edit = {
            "file_path": _absolute(a["path"], cwd),
            "old_string": old,
            "new_string": new,
        }
        return [("Edit", edit)]
    if kind == "multiedit":
        edits = [{"old_string": o, "new_string": n} for o, n in _edits(call)]
        return [("MultiEdit", {"file_path": _absolute(a["path"], cwd), "edits": edits})]
    if kind == "fetch":
        return [
            (
                "WebFetch",
                {"url": a["url"], "prompt": a.get("prompt", "Summarise this page")},
            )
        ]
    return _patch_as_tools("claude-code", a, cwd)


def _gemini(call: Call) -> list[ToolCall]:
    a = call.args
    kind = call.kind
    if kind == "read":
        return [("read_file", {"file_path": a})]
    if kind == "read_many":
        return [("read_many_files", {"include": list(a)})]
    if kind == "grep":
        grep = {"pattern": a["pattern"]}
        grep |= {"dir_path": a["path"]} if "path" in a else {}
        grep |= {"include": a["glob"]} if "glob" in a else {}
        return [("grep_search", grep)]
    if kind == "glob":
        found = {"pattern": a["pattern"]} | (
            {"dir_path": a["path"]} if "path" in a else {}
        )
        return [("glob", found)]
    if kind == "write":
        return [("write_file", {"file_path": a["path"], "content": a["content"]})]
    if kind in ("edit", "multiedit"):
        return [
            ("replace", {"file_path": a["path"], "old_string": o, "new_string": n})
            for o, n in _edits(call)
        ]
    if kind == "fetch":
        prompt = a.get("prompt", "Summarise this page")
        return [("web_fetch", {"prompt": f"{prompt}: {a['url']}"})]
    return _patch_as_tools("gemini", a, "")


def _codex(call: Call) -> list[ToolCall]:
    a = call.args
    kind = call.kind
    q = shlex.quote
    if kind == "read":
        return [("Bash", {"command": f"cat {_shell_path(a)}"})]
    if kind == "read_many":
        return [("Bash", {"command": "cat " + " ".join(_shell_path(p) for p in a)})]
    if kind == "grep":
        include = f" --include={q(a['glob'])}" if "glob" in a else ""
        path = q(a.get("path", "."))
        return [("Bash", {"command": f"grep -rn{include} -e {q(a['pattern'])} {path}"})]
    if kind == "glob":
        name = a["pattern"].rsplit("/", 1)[-1]
        return [("Bash", {"command": f"find {q(a.get('path', '.'))} -name {q(name)}"})]
    if kind == "fetch":
        return [("Bash", {"command": f"curl -sL {q(a['url'])}"})]
    if kind == "write":
        return [("apply_patch", {"command": add_file_patch(a["path"], a["content"])})]
    if kind in ("edit", "multiedit"):
        hunks = "".join(_hunk(o, n) for o, n in _edits(call))
        patch = f"*** Begin Patch\n*** Update File: {a['path']}\n{hunks}*** End Patch\n"
        return [("apply_patch", {"command": patch})]
    return [("apply_patch", {"command": a})]


def _shell_path(path: str) -> str:
    """A path as Codex's shell read names it: quoted, except that a glob
    stays a glob (``cat '.e?v'`` would read a file named ``.e?v``: the
    entry means the files the glob names)."""
    if re.fullmatch(r"[\w@./*?~\[\]-]+", path) and re.search(r"[*?\[]", path):
        return path
    return shlex.quote(path)


def add_file_patch(path: str, content: str) -> str:
    """An ``apply_patch`` text that creates ``path`` with ``content``."""
    lines = "".join(f"+{line}\n" for line in content.splitlines())
    return f"*** Begin Patch\n*** Add File: {path}\n{lines}*** End Patch\n"


def _hunk(old: str, new: str) -> str:
    minus = "".join(f"-{line}\n" for line in old.splitlines())
    plus = "".join(f"+{line}\n" for line in new.splitlines())
    return f"@@\n{minus}{plus}"


_HEADER: Final = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+)$")


def _patch_as_tools(agent: str, patch: str, cwd: str) -> list[ToolCall]:
    """A Codex patch as the file tools of an agent that has no ``apply_patch``."""
    out: list[ToolCall] = []
    action, path, minus, plus = "", "", [], []

    def flush() -> None:
        if not action:
            return
        target = _absolute(path, cwd) if agent == "claude-code" else path
        if action == "Delete":
            out.append(_shell(agent, f"rm {shlex.quote(path)}"))
        elif action == "Add":
            tool = "Write" if agent == "claude-code" else "write_file"
            out.append((tool, {"file_path": target, "content": "\n".join(plus) + "\n"}))
        else:
            tool = "Edit" if agent == "claude-code" else "replace"
            edit = {"old_string": "\n".join(minus), "new_string": "\n".join(plus)}
            out.append((tool, {"file_path": target, **edit}))

    for line in patch.splitlines():
        m = _HEADER.match(line)
        if m:
            flush()
            action, path, minus, plus = m.group(1), m.group(2), [], []
        elif line.startswith("+"):
            plus.append(line[1:])
        elif line.startswith("-"):
            minus.append(line[1:])
    flush()
    return out


#: Placeholders that stand for absolute paths (filled after rendering).
_ABSOLUTE_NAMES = ("@@HOME@@", "@@CWD@@", "@@POLICY@@", "@@STATE@@")


def _absolute(path: str, cwd: str) -> str:
    """The path as Claude Code's file tools take it: absolute, but with the
    spelling kept (``sub/../.env`` stays ``/project/sub/../.env``)."""
    if path.startswith(("/", "~", *_ABSOLUTE_NAMES)) or not cwd:
        return path
    return os.path.join(cwd, path)
