"""turnframe_test: the test kit shipped to adopters: the travel-desk harness and sample domain,
scripted model ports, builders of test records and understandings, and the store backends the
pytest plugin (`turnframe_test.pytest_plugin`) hands to tests. Nothing outside this package
imports it."""

from turnframe_test.backends import StoreBackend
from turnframe_test.builders import (
    card_payload,
    case,
    confirm_card,
    copy_ref,
    envelope,
    event,
    receipt_block,
)
from turnframe_test.harness import DeskHarness
from turnframe_test.scripted import (
    ScriptedInterpreter,
    ScriptedNarrator,
    ScriptedReviewer,
    ScriptExhausted,
    UnexpectedCall,
)
from turnframe_test.understandings import act, ambiguous_act, constraint, question, understanding

__all__ = [
    "DeskHarness",
    "ScriptExhausted",
    "ScriptedInterpreter",
    "ScriptedNarrator",
    "ScriptedReviewer",
    "StoreBackend",
    "UnexpectedCall",
    "act",
    "ambiguous_act",
    "card_payload",
    "case",
    "confirm_card",
    "constraint",
    "copy_ref",
    "envelope",
    "event",
    "question",
    "receipt_block",
    "understanding",
]
