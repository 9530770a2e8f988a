"""What an erased value holds (decision 0032): the one definition of an erased string, of an
erased payload and of an erased user turn, shared by the replay record's digest and every
erased form (`turnframe_core.erasure`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from turnframe_core.turn import TurnInput

__all__ = ["ERASED", "ERASED_URI", "erase_input", "erase_value"]

#: What an erased string holds.
ERASED: Final = "[erased]"
#: What an erased artifact's reference holds (a reference must stay a controlled one).
ERASED_URI: Final = "artifact:erased"


def erase_value(value: Any) -> Any:
    """A JSON value with every leaf erased, its shape kept: each string becomes `ERASED`, each
    number or boolean None; keys and lengths stay, so what the value held is still named."""
    if isinstance(value, Mapping):
        return {key: erase_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [erase_value(item) for item in value]
    if isinstance(value, str):
        return ERASED
    return None


def erase_input(turn_input: TurnInput) -> TurnInput:
    """A user's turn without its words: text, a card answer's free text and attachments' file
    names become `ERASED`; the card, the option, ids, locale and origin stay."""
    data = turn_input.model_dump(mode="json")
    if data.get("text") is not None:
        data["text"] = ERASED
    answer = data.get("interaction_response")
    if answer is not None and answer.get("freeform_input") is not None:
        answer["freeform_input"] = ERASED
    for attachment in data.get("attachments") or ():
        if attachment.get("filename") is not None:
            attachment["filename"] = ERASED
    return TurnInput.model_validate(data)
