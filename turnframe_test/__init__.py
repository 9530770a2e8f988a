"""turnframe_test: the test kit shipped to adopters: a harness over your own workflows
(`Harness`), scripted model ports, builders of test records and understandings, the suites you
subclass (`turnframe_test.suites`) and the store backends the pytest plugin
(`turnframe_test.pytest_plugin`) hands to tests. The sample travel domain, its harness
(`DeskHarness`) and the demo live apart in `turnframe_test.sample`; this repository's release
machinery (`gates`, `gates_table`, `gates_plugin`, `process_chaos`, `turn_server`) loads only
when its commands run. Nothing outside this package imports it."""

from typing import TYPE_CHECKING, Any

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
from turnframe_test.harness import Harness
from turnframe_test.scripted import (
    ScriptedInterpreter,
    ScriptedNarrator,
    ScriptedReviewer,
    ScriptExhausted,
    UnexpectedCall,
)
from turnframe_test.understandings import act, ambiguous_act, constraint, question, understanding

if TYPE_CHECKING:
    from turnframe_test.sample.desk import DeskHarness

__all__ = [
    "DeskHarness",
    "Harness",
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


def __getattr__(name: str) -> Any:
    # The travel desk's harness loads with the sample domain, only when asked for.
    if name == "DeskHarness":
        from turnframe_test.sample.desk import DeskHarness

        return DeskHarness
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
