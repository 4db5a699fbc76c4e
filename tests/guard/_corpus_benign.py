"""The benign corpus: every tool call of the real recorded sessions in tests/fixtures.

Each distinct session is replayed once, as its agent's hook payloads, in its
order (results included, so what the session wrote and read is known to the
guard, as it would be live):

* the hook recordings (``guard-live/<agent>/<run>/hooks``, ``hooks/<agent>/hooks``):
  their payloads as recorded (provenance: their SOURCES.md);
* the transcripts and rollouts of ``claude-code``, ``codex``, ``gemini-cli``
  and ``gemini-cli-live`` (provenance: ``tests/fixtures/CORPUS.md`` and each
  folder's SOURCES.md), read with trajgrade's own format readers and turned
  back into the payloads the agent's hook would have sent.

A session recorded in several forms (a hook recording and its transcript, a
transcript and its stream-json) is replayed once: a trace whose id or whose
every call id was already replayed is skipped. Calls whose arguments the
corpus redacted (``[REDACTED_ARGUMENTS …]``) are left out: nothing real
remains to judge.
"""

from __future__ import annotations

import gzip
import json
import shlex
from pathlib import Path
from typing import Any, Final

from trajgrade.events import Event, ToolCall, ToolResult, TraceStart
from trajgrade.formats import detect, detect_document, open_reader

__all__ = ("FIXTURES", "benign_sessions")

FIXTURES: Final = Path(__file__).resolve().parents[1] / "fixtures"
HOOK_FOLDERS: Final = {
    "claude-code": "claude-code",
    "codex": "codex",
    "gemini-cli": "gemini",
}
#: Transcript folder -> the agent whose hook payloads its calls become.
TRANSCRIPTS: Final = {
    "claude-code": "claude-code",
    "codex": "codex",
    "gemini-cli": "gemini",
    "gemini-cli-live": "gemini",
}
_GATE: Final = {
    "claude-code": "PreToolUse",
    "codex": "PreToolUse",
    "gemini": "BeforeTool",
}
_AFTER: Final = {
    "claude-code": "PostToolUse",
    "codex": "PostToolUse",
    "gemini": "AfterTool",
}

Session = tuple[str, list[dict[str, Any]]]


def _hook_sessions() -> list[tuple[str, Path]]:
    runs = sorted((FIXTURES / "guard-live").glob("*/*/hooks"))
    runs += sorted((FIXTURES / "hooks").glob("*/hooks"))
    return [
        (
            HOOK_FOLDERS[
                r.parent.parent.name if "guard-live" in r.parts else r.parent.name
            ],
            r,
        )
        for r in runs
    ]


def _events(path: Path) -> list[Event]:
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    fmt = detect(data.split(b"\n", 1)[0])
    if fmt is None:
        fmt, _ = detect_document(data[:65536], final=True)
    if fmt is None:
        return []
    reader = open_reader(fmt, source=str(path), default_trace="t")
    events, _, _ = reader.feed(data if data.endswith(b"\n") else data + b"\n", 1)
    more, _ = reader.close()
    return events + more


def _redacted(call: ToolCall) -> bool:
    return call.name.startswith("[REDACTED") or (
        call.args is None and (call.args_raw or "").startswith("[REDACTED")
    )


def _codex_tool(call: ToolCall) -> tuple[str, dict[str, Any]]:
    """A rollout's call as Codex's hook names it (``Bash {command}``)."""
    args = call.args or {}
    if call.name == "exec_command" and isinstance(args.get("cmd"), str):
        return "Bash", {"command": args["cmd"]}
    if call.name in ("shell", "local_shell") and isinstance(args.get("command"), list):
        argv = [str(a) for a in args["command"]]
        login = len(argv) == 3 and argv[1] in ("-lc", "-c")
        return "Bash", {"command": argv[2] if login else shlex.join(argv)}
    if call.name == "command_execution" and isinstance(args.get("command"), str):
        return "Bash", {"command": args["command"]}
    if call.name == "apply_patch" and call.args_raw is not None:
        return "apply_patch", {"command": call.args_raw}
    return call.name, dict(args)


def _response(agent: str, tool: str, result: Any) -> Any:
    if agent == "gemini":
        return {"llmContent": result, "returnDisplay": result}
    if agent == "claude-code" and tool == "Bash" and isinstance(result, str):
        return {"stdout": result, "stderr": "", "interrupted": False}
    return result


def _payloads(
    agent: str, trace: str, events: list[Event], cwd: str
) -> list[dict[str, Any]]:
    base = {"session_id": trace, "transcript_path": "", "cwd": cwd}
    out = [{**base, "hook_event_name": "SessionStart", "source": "startup"}]
    gates: dict[str, dict[str, Any]] = {}
    for e in events:
        if isinstance(e, ToolCall) and not _redacted(e):
            name, tool_input = (
                _codex_tool(e) if agent == "codex" else (e.name, dict(e.args or {}))
            )
            p = {
                **base,
                # A transcript line's own cwd (Claude Code records one per
                # line) is where the call ran; the session's otherwise.
                "cwd": e.cwd or cwd,
                "hook_event_name": _GATE[agent],
                "tool_name": name,
                "tool_input": tool_input,
            }
            if agent != "gemini" and e.call_id:
                p["tool_use_id"] = e.call_id
            if e.agent and agent == "claude-code":
                p["agent_id"] = e.agent
            out.append(p)
            if e.call_id:
                gates[e.call_id] = p
        elif isinstance(e, ToolResult) and e.call_id in gates:
            gate = gates.pop(e.call_id)
            failed = bool(e.is_error) and agent == "claude-code"
            p = {
                **gate,
                "hook_event_name": "PostToolUseFailure" if failed else _AFTER[agent],
            }
            if failed:
                p["error"] = (
                    e.result if isinstance(e.result, str) else json.dumps(e.result)
                )
            else:
                p["tool_response"] = _response(agent, gate["tool_name"], e.result)
            out.append(p)
    return out


def _traces(path: Path) -> dict[str, list[Event]]:
    """One transcript file's events by trace (a file may hold several)."""
    by_trace: dict[str, list[Event]] = {}
    for e in _events(path):
        by_trace.setdefault(e.trace_id or "t", []).append(e)
    return by_trace


def _cwd(events: list[Event], default: str) -> str:
    start = next((e for e in events if isinstance(e, TraceStart)), None)
    cwd = (start.metadata or {}).get("cwd") if start is not None else None
    return cwd if isinstance(cwd, str) and cwd.startswith("/") else default


def benign_sessions(default_cwd: str) -> tuple[list[Session], list[str]]:
    """Every distinct recorded session as (agent, payloads), and where each came from."""
    sessions: list[Session] = []
    sources: list[str] = []
    #: Sessions replayed from their hook recordings (every call of them).
    hooked: set[str] = set()
    seen_calls: set[str] = set()
    for agent, folder in _hook_sessions():
        payloads = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]
        sid = payloads[0]["session_id"]
        if sid in hooked:
            continue
        hooked.add(sid)
        seen_calls |= {p["tool_use_id"] for p in payloads if "tool_use_id" in p}
        sessions.append((agent, payloads))
        sources.append(str(folder.relative_to(FIXTURES)))
    for folder, agent in TRANSCRIPTS.items():
        for path in sorted((FIXTURES / folder).iterdir()):
            if path.suffix not in (".jsonl", ".json", ".gz"):
                continue
            for trace, evs in _traces(path).items():
                ids = {e.call_id for e in evs if isinstance(e, ToolCall) and e.call_id}
                calls = [e for e in evs if isinstance(e, ToolCall) and not _redacted(e)]
                # A subagent's file shares its session's id, not its calls;
                # a hook-recorded session's transcript shares its id.
                if not calls or trace in hooked or (ids and ids <= seen_calls):
                    continue
                seen_calls |= ids
                payloads = _payloads(agent, trace, evs, _cwd(evs, default_cwd))
                sessions.append((agent, payloads))
                sources.append(str(path.relative_to(FIXTURES)))
    return sessions, sources
