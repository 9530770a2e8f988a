"""An event from outside the conversation (a webhook, a timer) that becomes a server turn.

Rules:
- An event names its sender (`origin`, a name the runtime registered) and the sender's own
  `idempotency_key`: one event per (account, origin, key). The same key sent again with the same
  content is the same event; with other content it is refused.
- It asks for one workflow `operation` on one case, with `arguments`: the workflow's own
  `compile` turns it into commands and its policy judges them, exactly as for a user's act. An
  event defines no command itself.
- `signing_bytes()` is what a signature covers: the canonical JSON of the whole event, every
  field included (`arguments` `{}` and `locale` `null` when not given).
"""

from __future__ import annotations

import re
from typing import Annotated, Final

from pydantic import Field, JsonValue, StringConstraints

from turnframe_core._input import InputModel, LocaleTag
from turnframe_core.canonical import canonical_bytes, digest
from turnframe_core.cases import CaseId, WorkflowKey
from turnframe_core.ids import AccountId, ConversationId
from turnframe_core.workflow import ArgumentName, OperationName

__all__ = ["MAX_EVENT_KEY_CHARS", "OriginName", "ServerEvent", "is_origin_name"]

#: The longest idempotency key a sender may give.
MAX_EVENT_KEY_CHARS: Final = 200
_ORIGIN_NAME: Final = r"[a-z0-9][a-z0-9_.-]{0,63}"
#: A registered origin's name: lowercase letters, digits, `_`, `.` and `-`, at most 64.
OriginName = Annotated[str, StringConstraints(pattern=rf"^{_ORIGIN_NAME}$")]
#: A sender's idempotency key: printable ASCII, no space.
EventKey = Annotated[str, StringConstraints(pattern=rf"^[!-~]{{1,{MAX_EVENT_KEY_CHARS}}}$")]


def is_origin_name(value: object) -> bool:
    """Whether `value` is an origin's name (`OriginName`)."""
    return isinstance(value, str) and re.fullmatch(_ORIGIN_NAME, value) is not None


class ServerEvent(InputModel):
    """One event from a registered origin: an operation on a case of the conversation's account,
    told to the conversation as a server turn. `locale` None: the conversation's locale.
    Every refusal of its shape raises `InvalidTurnInput`."""

    account_id: AccountId
    conversation_id: ConversationId
    origin: OriginName
    idempotency_key: EventKey
    workflow: WorkflowKey
    case_id: CaseId
    operation: OperationName
    arguments: dict[ArgumentName, JsonValue] = Field(default_factory=dict)
    locale: LocaleTag | None = None

    def signing_bytes(self) -> bytes:
        """What a signature covers: the event's canonical JSON (UTF-8)."""
        return canonical_bytes(self)

    def content_digest(self) -> str:
        """`sha256:` of the event's canonical JSON: what tells one event from another under one
        key."""
        return digest(self)
