"""Per-agent tool tables: tool name -> kind, and which arguments hold the
shell command, the file path(s) and the URL(s) (the argument *views*).

One table per input trajgrade reads, from the tools the real agents offer
(``corpus/*-live`` model requests, the recorded transcripts) and the names
each format adapter emits. The tables are data only: the matcher
(``_tool_match``), ``trajgrade check --agent`` and the generated reference
``docs/agents.md`` all read them, so they cannot disagree.

A call carries no source agent, so the matcher uses :data:`UNION`, the
tables merged. That is sound because no tool name means two different
things across agents (``test_agents`` checks it): ``Bash`` is Claude Code's
and Codex's hook name, ``shell``/``exec_command`` are Codex's, and so on.

View specs (strings, so the reference can print them):

* ``key`` -- a string argument (anything else there is no value, as in vally);
* ``key[]`` -- a list of strings: an argv, joined with shell quoting, for
  ``command``; several paths or URLs otherwise;
* ``a.b`` -- a nested object key; ``a[].b`` -- that key in every list item;
* ``@patch`` -- every path an ``apply_patch`` text touches (``args_raw`` or
  the ``input``/``patch``/``command`` argument);
* ``@urls:key`` -- the URLs written inside free text (Gemini's
  ``web_fetch`` ``prompt``);
* ``@word1:key`` -- the first argument of a command line (SWE-agent 0.x's
  ``open src/a.py``);
* ``@login_shell:key`` -- the script of a ``bash -lc '<script>'`` string
  (what ``codex exec --json`` reports), else the string;
* ``@patch_added`` -- the lines an ``apply_patch`` text adds.

Two more views serve the guard's analysis (``protect``), not the matcher's
filters: ``glob`` (arguments that are file globs: ``Glob``'s ``pattern``,
``Grep``'s ``glob``) and ``content`` (the text a call writes or sends:
``Write``'s ``content``, ``Edit``'s ``new_string``, a search query); and
``searches`` says whether a search tool reads file *contents* under its
path (``Grep``) or only *names* (``Glob``).
"""

from __future__ import annotations

from typing import Final

import msgspec

__all__ = (
    "AGENTS",
    "AGENT_NAMES",
    "ANALYSIS_VIEWS",
    "KINDS",
    "MCP_PREFIX",
    "UNION",
    "VIEWS",
    "Tool",
    "kinds_of_name",
    "narrow_advice",
)

#: The argument views a matcher can filter on.
VIEWS: Final = ("command", "path", "url")
#: The views only the guard's analysis reads (see the module doc).
ANALYSIS_VIEWS: Final = ("glob", "content")

#: Kinds, with what they mean (printed in the reference).
KINDS: Final = {
    "shell": "runs a shell command (has a `command` view)",
    "process": "talks to a running shell/process: reads its output, sends input, kills it",
    "read": "reads a file or image (has a `path` view)",
    "write": "creates or overwrites a file (has a `path` view)",
    "edit": "changes part of a file or applies a patch (has a `path` view)",
    "list": "lists a directory",
    "search": "searches file names or contents",
    "fetch": "fetches a URL (has a `url` view)",
    "web_search": "searches the web",
    "browse": "drives a browser",
    "code": "runs code in an interpreter (not a shell)",
    "mcp": "an MCP server's tool (any name `mcp__<server>__<tool>`)",
    "task": "starts, steers or waits for a subagent / background task",
    "todo": "keeps the agent's todo list or plan",
    "plan": "enters or leaves plan mode",
    "ask": "asks the user a question",
    "memory": "reads or writes the agent's long-term memory",
    "skill": "loads a skill",
    "message": "sends a message to the user or another agent",
    "think": "records a thought; no effect outside the agent",
    "finish": "ends the run or submits the result",
}

#: Tools whose name starts with this are MCP tools (Claude Code, Codex).
MCP_PREFIX: Final = "mcp__"


class Tool(msgspec.Struct, frozen=True):
    """One tool: its kind(s) and its view specs.

    A Struct, not a NamedTuple: this module is on the cold hook path, and a
    NamedTuple class costs ~5x a Struct's to create."""

    kind: str
    command: tuple[str, ...] = ()
    path: tuple[str, ...] = ()
    url: tuple[str, ...] = ()
    glob: tuple[str, ...] = ()
    content: tuple[str, ...] = ()
    #: A search tool's reach: "contents" (reads every file it searches),
    #: "names" (lists names), "" (not a file search: ``ToolSearch``).
    searches: str = ""
    #: Kind chosen by an argument (``str_replace_editor``'s ``command``):
    #: (argument, {value: kind}); ``kind`` is the fallback.
    by_arg: tuple[str, tuple[tuple[str, str], ...]] | None = None
    #: The argument keys the tool takes, where known (``check --agent``
    #: warns about an ``args:`` key none of the selected tools has).
    args: tuple[str, ...] = ()

    def kinds(self) -> frozenset[str]:
        """Every kind a call of this tool can have."""
        if self.by_arg is None:
            return frozenset((self.kind,))
        return frozenset((self.kind, *(k for _, k in self.by_arg[1])))


def _shell(*keys: str) -> Tool:
    return Tool("shell", command=keys or ("command",))


_EDITOR: Final = Tool(
    "edit",
    path=("path",),
    content=("file_text", "new_str"),
    by_arg=(
        "command",
        (("view", "read"), ("create", "write"), ("str_replace", "edit")),
    ),
)

_CLAUDE: Final = {
    "Bash": _shell(),
    "BashOutput": Tool("process"),
    "KillShell": Tool("process"),
    "KillBash": Tool("process"),
    "Read": Tool("read", path=("file_path",)),
    "NotebookRead": Tool("read", path=("notebook_path",)),
    "Write": Tool("write", path=("file_path",), content=("content",)),
    "Edit": Tool("edit", path=("file_path",), content=("new_string",)),
    "MultiEdit": Tool("edit", path=("file_path",), content=("edits[].new_string",)),
    "NotebookEdit": Tool("edit", path=("notebook_path",), content=("new_source",)),
    "LS": Tool("list", path=("path",)),
    "Glob": Tool("search", path=("path",), glob=("pattern",), searches="names"),
    "Grep": Tool("search", path=("path",), glob=("glob",), searches="contents"),
    "WebFetch": Tool("fetch", url=("url",), content=("prompt",)),
    "WebSearch": Tool("web_search", content=("query",)),
    "Task": Tool("task"),
    "Agent": Tool("task"),
    "TaskOutput": Tool("task"),
    "TaskCreate": Tool("task"),
    "TaskGet": Tool("task"),
    "TaskList": Tool("task"),
    "TaskStop": Tool("task"),
    "TaskUpdate": Tool("task"),
    "SendMessage": Tool("message"),
    "TodoWrite": Tool("todo"),
    "TodoRead": Tool("todo"),
    "ExitPlanMode": Tool("plan"),
    "EnterPlanMode": Tool("plan"),
    "AskUserQuestion": Tool("ask"),
    "Skill": Tool("skill"),
    "SlashCommand": Tool("skill"),
    # 2.1.331: orchestration and host tools (none touches files or a shell
    # itself; a Workflow's subagents' calls reach the hooks as their own).
    "Workflow": Tool("task"),
    "ScheduleWakeup": Tool("task"),
    "ListAgents": Tool("message"),
    "ReportFindings": Tool("message"),
    "ToolSearch": Tool("search"),
}

_CODEX: Final = {
    # Rollouts: shell (<= 0.40, argv array), exec_command (unified exec,
    # `cmd` a string or an argv), local_shell (Responses built-in).
    "shell": _shell("command[]", "command"),
    "exec_command": _shell("cmd", "cmd[]"),
    "local_shell": _shell("command[]", "command"),
    "write_stdin": Tool("process", content=("chars",)),
    "apply_patch": Tool("edit", path=("@patch",), content=("@patch_added",)),
    "view_image": Tool("read", path=("path",)),
    "update_plan": Tool("todo"),
    "web_search": Tool(
        "web_search", url=("url",), content=("query", "queries[]", "pattern")
    ),
    "request_user_input": Tool("ask"),
    "list_mcp_resources": Tool("mcp"),
    "list_mcp_resource_templates": Tool("mcp"),
    "read_mcp_resource": Tool("mcp"),
    "js": Tool("code", content=("code", "input", "source")),
    "get_goal": Tool("todo"),
    "create_goal": Tool("todo"),
    "update_goal": Tool("todo"),
    "tool_search": Tool("search"),
    # `codex exec --json` item types (collab tools keep their own names).
    # The command as `codex exec` ran it, `/bin/bash -lc '<cmd>'`: the view
    # is the model's <cmd>, as in the rollout and the hook.
    "command_execution": _shell("@login_shell:command"),
    "file_change": Tool("edit", path=("changes[].path",)),
    "spawn_agent": Tool("task"),
    "send_input": Tool("task"),
    "wait": Tool("task"),
    "close_agent": Tool("task"),
    # Codex hooks name the shell tool `Bash`; the hook adapter spells it the
    # rollout's way (exec_command, `cmd`) before any matcher sees it.
}

_GEMINI: Final = {
    "run_shell_command": _shell(),
    "list_background_processes": Tool("process"),
    "read_background_output": Tool("process"),
    "read_file": Tool("read", path=("absolute_path", "file_path", "path")),
    "read_many_files": Tool(
        "read", path=("paths[]", "include[]"), glob=("include[]", "paths[]")
    ),
    "write_file": Tool(
        "write", path=("file_path", "absolute_path", "path"), content=("content",)
    ),
    "replace": Tool(
        "edit", path=("file_path", "absolute_path", "path"), content=("new_string",)
    ),
    "list_directory": Tool("list", path=("dir_path", "path")),
    "glob": Tool(
        "search", path=("dir_path", "path"), glob=("pattern",), searches="names"
    ),
    "grep_search": Tool(
        "search", path=("dir_path", "path"), glob=("include",), searches="contents"
    ),
    "search_file_content": Tool(
        "search", path=("dir_path", "path"), glob=("include",), searches="contents"
    ),
    "web_fetch": Tool("fetch", url=("url", "@urls:prompt")),
    "google_web_search": Tool("web_search", content=("query",)),
    "save_memory": Tool("memory"),
    "write_todos": Tool("todo"),
    "enter_plan_mode": Tool("plan"),
    "exit_plan_mode": Tool("plan"),
    "invoke_agent": Tool("task"),
    "activate_skill": Tool("skill"),
    "update_topic": Tool("think"),
}

_OPENHANDS: Final = {
    "execute_bash": _shell(),
    "execute_ipython_cell": Tool("code", content=("code",)),
    "str_replace_editor": _EDITOR,
    "edit_file": Tool("edit", path=("path",), content=("content",)),
    "browser": Tool("browse", url=("@urls:code",), content=("code",)),
    "web_read": Tool("fetch", url=("url",)),
    "fetch": Tool("fetch", url=("url",)),
    "task_tracker": Tool("todo"),
    "think": Tool("think"),
    "finish": Tool("finish"),
}

_SWE_AGENT: Final = {
    # 1.x function calling.
    "bash": _shell(),
    "str_replace_editor": _EDITOR,
    "submit": Tool("finish"),
    # 0.x commands: the call is named by the action's first word and its
    # only argument is the action text (`open src/a.py 10`). Other words are
    # programs run in the shell and have no fixed kind; goto/scroll_* page
    # through the file `open` read, and `edit 10:12` edits that file: no path.
    "open": Tool("read", path=("path", "@word1:command")),
    "create": Tool("write", path=("path", "@word1:command")),
    "edit": Tool("edit", content=("command",)),
    "find_file": Tool("search", searches="names"),
    "search_dir": Tool("search", searches="contents"),
    "search_file": Tool("search", searches="contents"),
}

_MINI_SWE_AGENT: Final = {"bash": _shell()}

_LETTA: Final = {
    "send_message": Tool("message"),
    "core_memory_append": Tool("memory"),
    "core_memory_replace": Tool("memory"),
    "memory_insert": Tool("memory"),
    "memory_replace": Tool("memory"),
    "memory_rethink": Tool("memory"),
    "archival_memory_insert": Tool("memory"),
    "archival_memory_search": Tool("memory"),
    "conversation_search": Tool("memory"),
    "web_search": Tool("web_search", url=("url",), content=("query",)),
    "fetch_webpage": Tool("fetch", url=("url",)),
    "run_code": Tool("code", content=("code",)),
}

_ATIF: Final = {
    # Harbor's terminus-2: keystrokes typed into a terminal.
    "bash_command": _shell("keystrokes"),
    "mark_task_complete": Tool("finish"),
}

#: vally's / trajgrade's canonical names (the README and vally docs use them).
_CANONICAL: Final = {
    "bash": _shell(),
    "view": Tool("read", path=("path",)),
    "create": Tool("write", path=("path",), content=("content", "file_text")),
    "edit": Tool("edit", path=("path",), content=("new_string", "new_str")),
    "grep": Tool("search", path=("path",), glob=("glob",), searches="contents"),
    "glob": Tool("search", path=("path",), glob=("pattern",), searches="names"),
    "web_fetch": Tool("fetch", url=("url",)),
    "web_search": Tool("web_search", url=("url",), content=("query",)),
}


def _with_args(tools: dict[str, Tool], keys: dict[str, str]) -> dict[str, Tool]:
    """The tools with their argument keys (from the agents' tool schemas and
    recorded calls) filled in."""
    out = dict(tools)
    for name, words in keys.items():
        out[name] = msgspec.structs.replace(out[name], args=tuple(words.split()))
    return out


_CLAUDE_ARGS: Final = {
    "Bash": "command description timeout run_in_background dangerouslyDisableSandbox",
    "Read": "file_path offset limit pages allow_large",
    "NotebookRead": "notebook_path cell_id",
    "Write": "file_path content",
    "Edit": "file_path old_string new_string replace_all",
    "MultiEdit": "file_path edits",
    "NotebookEdit": "notebook_path cell_id new_source cell_type edit_mode",
    "Glob": "pattern path",
    "Grep": "pattern path glob type output_mode -i -n -A -B -C multiline head_limit offset",
    "WebFetch": "url prompt",
    "WebSearch": "query allowed_domains blocked_domains",
    "Task": "description prompt subagent_type model run_in_background",
    "Agent": "description prompt subagent_type model effort run_in_background isolation",
    "Skill": "skill args",
    "Workflow": "script name description title args scriptPath resumeFromRunId",
    "ScheduleWakeup": "delaySeconds reason prompt stop noop",
    "ListAgents": "channel q cursor",
    "ReportFindings": "level findings",
    "ToolSearch": "query max_results",
    "TodoWrite": "todos",
    "ExitPlanMode": "plan",
    "AskUserQuestion": "questions",
}
_CODEX_ARGS: Final = {
    "exec_command": "cmd workdir shell login yield_time_ms max_output_tokens "
    "justification sandbox_permissions prefix_rule with_escalated_permissions",
    "shell": "command workdir timeout_ms justification with_escalated_permissions",
    "local_shell": "type command workdir timeout_ms env user",
    "write_stdin": "session_id chars yield_time_ms max_output_tokens",
    "update_plan": "explanation plan",
    "view_image": "path",
    "command_execution": "command",
    "file_change": "changes",
    "web_search": "query type url pattern queries",
}
_GEMINI_ARGS: Final = {
    "run_shell_command": "command description dir_path is_background",
    "read_file": "absolute_path file_path offset limit",
    # 0.61 (include); `paths` in earlier versions.
    "read_many_files": "include exclude recursive useDefaultExcludes "
    "file_filtering_options paths",
    "write_file": "file_path content",
    "replace": "file_path old_string new_string instruction expected_replacements",
    "list_directory": "dir_path ignore file_filtering_options",
    "glob": "pattern dir_path case_sensitive respect_git_ignore",
    "grep_search": "pattern dir_path include",
    "web_fetch": "prompt",
    "google_web_search": "query",
    "save_memory": "fact",
    "write_todos": "todos",
}

#: Agent (as ``check --agent`` and ``hook`` name it) -> its tools.
AGENTS: Final[dict[str, dict[str, Tool]]] = {
    "claude-code": _with_args(_CLAUDE, _CLAUDE_ARGS),
    "codex": _with_args(_CODEX, _CODEX_ARGS),
    "gemini": _with_args(_GEMINI, _GEMINI_ARGS),
    "openhands": _OPENHANDS,
    "swe-agent": _SWE_AGENT,
    "mini-swe-agent": _MINI_SWE_AGENT,
    "letta": _LETTA,
    "atif": _ATIF,
    # OpenAI chat tool loops (tau-bench) call the application's own tools:
    # no name has a fixed kind.
    "openai-chat": {},
    "canonical": _CANONICAL,
}
AGENT_NAMES: Final = tuple(AGENTS)


def _both(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(a + b))


def _merge() -> dict[str, Tool]:
    out: dict[str, Tool] = {}
    for tools in AGENTS.values():
        for name, tool in tools.items():
            known = out.get(name)
            if known is None:
                out[name] = tool
            elif known.kinds() != tool.kinds():
                msg = f"tool {name!r} has kinds {known.kinds()} and {tool.kinds()}"
                raise AssertionError(msg)
            else:
                # The same tool under two agents: every argument spelling counts.
                out[name] = msgspec.structs.replace(
                    known,
                    command=_both(known.command, tool.command),
                    path=_both(known.path, tool.path),
                    url=_both(known.url, tool.url),
                    glob=_both(known.glob, tool.glob),
                    content=_both(known.content, tool.content),
                    searches=known.searches or tool.searches,
                    args=_both(known.args, tool.args)
                    if known.args and tool.args
                    else (),
                )
    return out


#: Every agent's tools merged (names never collide; checked at import).
UNION: Final = _merge()


def kinds_of_name(name: str) -> frozenset[str]:
    """The kinds a call to ``name`` can have (empty: unknown tool)."""
    tool = UNION.get(name)
    if tool is not None:
        return tool.kinds()
    if name.startswith(MCP_PREFIX):
        return frozenset(("mcp",))
    return frozenset()


def narrow_advice(kinds: frozenset[str], view: str) -> str:
    """The fix for an entry filtering on ``view`` that selects tools without
    it: narrow it by kind, or, when its ``kind:`` already is the cause (a
    ``kind: shell`` entry with ``path:``), split the filter off."""
    having = sorted({t.kind for t in UNION.values() if getattr(t, view, ())})
    if not kinds:
        return f"narrow the entry with kind: ({', '.join(having)} have {view}) or name:"
    lacking = sorted(kinds - set(having)) or sorted(kinds)
    return (
        f"its kind: {', '.join(lacking)} selects tools without {view}: filter "
        f"them on a view they have, and give {view}: an entry of its own with "
        f"a kind that has it ({', '.join(having)})"
    )
