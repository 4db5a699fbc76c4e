"""mini-swe-agent trajectories: a JSON list of chat messages.

Read as one JSON document, incrementally: a plain list of ``{role,
content}`` messages (what mini-swe-agent's tests save), or the saved-run
wrapper ``{info{exit_status, submission, model_stats}, messages,
trajectory_format}``. There are no tool calls in the messages: each
assistant message holds its command in a fenced ```` ```mswea_bash_command ````
block, and the next ``user`` message is its output.

Mapping:

* ``system`` → ``message`` (role ``system``).
* ``assistant`` → ``message`` (its whole text), then, when it holds exactly
  one fenced ``mswea_bash_command`` block, a ``tool_call`` named ``bash``
  with ``args`` ``{"command": <the block's text>}`` and no id.
* ``user``: the first one is the task → ``turn_start`` (source ``user``) +
  ``message``; the one after a call is that call's ``tool_result`` (content
  as written; ``is_error`` = ``<returncode>`` ≠ 0); any other (format-error
  feedback) → ``message`` (role ``user``).
* ``info`` (wrapper only) → ``usage`` (``model_stats.instance_cost`` as
  ``cost_usd``; no token counts are written) and the ``trace_end`` outcome.

Decisions:

1. Pairing by adjacency, mini-swe-agent's own rule: the ``user`` message
   right after an action is its observation; neither has an id.
2. A message with no block, or with several, is not run by mini-swe-agent
   (it answers with a format error): no call.
3. Errors: ``<returncode>N</returncode>`` with N ≠ 0 is an error; a result
   without a return code (the final submission) leaves ``is_error`` unset.
4. Turns: runs are not interactive: one turn, opened by the task.
5. End: the document is a finished run: ``trace_end`` at its end. Its
   ``result`` is ``info.submission``, else the output of the final
   ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` command (the last
   ``user`` message); ``is_error`` when ``info.exit_status`` is there and is
   not ``Submitted``.
6. No timestamps; the trace is the source's default trace.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final

from trajgrade.events import (
    Message,
    ToolCall,
    ToolResult,
    TraceEnd,
    TurnStart,
    Usage,
)
from trajgrade.formats._fields import finite
from trajgrade.formats._message_items import MessageItemsReader
from trajgrade.formats._openai_chat_messages import BadMessageError, text_of

if TYPE_CHECKING:
    from trajgrade.errors import InputError
    from trajgrade.events import Event
    from trajgrade.formats._document import DocShape

__all__ = ("FORMAT", "FORMATS", "MiniSweAgentReader")

#: mini-swe-agent's action regex (``action_regex`` in its default config).
_ACTION: Final = re.compile(r"```mswea_bash_command\s*\n(.*?)\n```", re.DOTALL)
#: (An exit status has a few digits; ``int`` refuses thousands of them.)
_RETURNCODE: Final = re.compile(r"<returncode>\s*(-?\d{1,20})\s*</returncode>")
#: The command that ends a run; its output is the submission.
_SUBMIT: Final = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


class MiniSweAgentReader(MessageItemsReader):
    """Translates a mini-swe-agent message list into canonical events."""

    format = "mini-swe-agent"
    ITEMS = ("item", "messages.item", "info")

    def __init__(self, *, source: str, default_trace: str) -> None:
        super().__init__(source=source, default_trace=default_trace)
        self._tasked = False
        #: The command waiting for its output.
        self._open: str | None = None
        self._submitted: Any = None

    def _message(self, m: Any) -> list[Event]:
        if not isinstance(m, dict):
            msg = f"a message must be an object, got {type(m).__name__}"
            raise BadMessageError(msg)
        role = m.get("role")
        if not isinstance(role, str):
            msg = "a message needs a string `role`"
            raise BadMessageError(msg, "role")
        tid = self.trace_id
        text = text_of(m.get("content"))
        if role == "user":
            if self._open is not None:
                command, self._open = self._open, None
                code = _RETURNCODE.search(text)
                if code is None and _SUBMIT in command:
                    self._submitted = text
                return [
                    ToolResult(
                        trace_id=tid,
                        name="bash",
                        result=m.get("content"),
                        is_error=None if code is None else int(code[1]) != 0,
                    )
                ]
            if self._tasked:
                return [Message(trace_id=tid, role="user", text=text)]
            self._tasked = True
            return [
                TurnStart(trace_id=tid, step=0, source="user"),
                Message(trace_id=tid, role="user", text=text),
            ]
        out: list[Event] = [Message(trace_id=tid, role=role, text=text)]
        if role == "assistant":
            actions = _ACTION.findall(text)
            if len(actions) == 1:
                self._open = actions[0]
                out.append(
                    ToolCall(trace_id=tid, name="bash", args={"command": actions[0]})
                )
        return out

    def end(self, events: list[Event], errors: list[InputError]) -> None:
        tid = self.trace_id
        info = self._info
        stats = info.get("model_stats")
        cost = stats.get("instance_cost") if isinstance(stats, dict) else None
        if (amount := finite(cost)) is not None:
            events.append(Usage(trace_id=tid, cost_usd=amount))
        status = info.get("exit_status")
        submission = info.get("submission")
        events.append(
            TraceEnd(
                trace_id=tid,
                result=submission if submission is not None else self._submitted,
                is_error=None if not isinstance(status, str) else status != "Submitted",
            )
        )


class _MiniSweAgentFormat:
    name = "mini-swe-agent"
    summary = "mini-swe-agent trajectories: a JSON list of {role, content} messages with fenced mswea_bash_command actions, or {info, messages, trajectory_format}"

    def sniff(self, record: object) -> bool:
        return False  # a document, never a line (see sniff_document)

    def sniff_document(self, shape: DocShape) -> bool:
        first = shape.first_item_keys
        if shape.is_array:
            # Plain chat messages, with nothing of OpenAI tool loops or typed items.
            return {"role", "content"} <= first and not first & {
                "type",
                "tool_calls",
                "tool_call_id",
                "message_type",
            }
        return "messages" in shape.top_keys and (
            "trajectory_format" in shape.top_keys or "info" in shape.top_keys
        )

    def reader(self, *, source: str, default_trace: str) -> MiniSweAgentReader:
        return MiniSweAgentReader(source=source, default_trace=default_trace)


FORMAT: Final = _MiniSweAgentFormat()

#: What this module contributes to the registry.
FORMATS: Final = (FORMAT,)
