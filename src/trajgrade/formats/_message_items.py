"""Documents that are a list of messages plus an ``info`` object (SWE-agent
``.traj`` histories, mini-swe-agent trajectories): the item loop they share.

Each message item is handed to the subclass's ``_message``; a message it
cannot read (:class:`BadMessageError`) becomes a located error naming the
item (``history[3].role``) and reading goes on. The ``info`` object is kept
for the end of the document.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trajgrade.formats._document import DocumentReader
from trajgrade.formats._openai_chat_messages import BadMessageError

if TYPE_CHECKING:
    from trajgrade.errors import InputError
    from trajgrade.events import Event

__all__ = ("MessageItemsReader",)


class MessageItemsReader(DocumentReader):
    """A :class:`DocumentReader` over message items and an ``info`` object."""

    def __init__(self, *, source: str, default_trace: str) -> None:
        super().__init__(source=source, default_trace=default_trace)
        self._index = 0
        self._info: dict[str, Any] = {}

    def item(
        self, prefix: str, obj: Any, events: list[Event], errors: list[InputError]
    ) -> None:
        if prefix == "info":
            self._info = obj if isinstance(obj, dict) else {}
            return
        at = f"{prefix.removesuffix('.item')}[{self._index}]"
        self._index += 1
        try:
            events.extend(self._message(obj))
        except BadMessageError as exc:
            field = f"{at}.{exc.field}" if exc.field else at
            errors.append(self.error(exc.message, field=field, trace=self.trace_id))

    def _message(self, m: Any) -> list[Event]:
        """One message item's events; BadMessageError for one it cannot read."""
        raise NotImplementedError
