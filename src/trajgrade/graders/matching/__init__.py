"""Matching shared by every grader group: user text patterns and tool calls.

* text patterns: ``_match`` (the compiled :class:`Pattern`: literal fast path,
  RE2 when it reads the same language, else the time-boxed ``regex`` module),
  ``_jsregex`` (JavaScript ``RegExp`` sources translated), ``_jsliteral``
  (patterns that need no regex engine), ``_re2`` (the linear-time engine);
* tool calls: ``_agents`` (per-agent tool tables: names -> kinds, argument
  views), ``_views`` (a call's command, paths, URLs), ``_shell`` (the programs
  a shell command runs; ``_shell_words``: its words as bash reads them,
  ``_shell_wrappers``: commands that run other commands and their options),
  ``_tool_match`` (compiled tool matchers, used by
  ``tool-calls`` and the guard rules), ``agent_check`` (``trajgrade check
  --agent``: matchers that can never match an agent's tools).
"""

__all__: tuple[str, ...] = ()
