"""One turn's state: its context and the collaborators its steps share (`TurnState`).

A turn's state is begun by the kernel (`Kernel.begin`) and lives as long as that turn; nothing
in it outlives the turn or is shared with another one.
"""

from __future__ import annotations

from dataclasses import dataclass

from turnframe_runtime.cards import CardFactory
from turnframe_runtime.cases import CaseBook
from turnframe_runtime.context import AuditTrail, Teller, TurnContext
from turnframe_runtime.copy import ServerCopy
from turnframe_runtime.execute import Execution
from turnframe_runtime.record import Recorder
from turnframe_runtime.stream import TurnEvents

__all__ = ["TurnState"]


@dataclass(frozen=True)
class TurnState:
    """One turn's context and the collaborators its steps share; what each step decides is
    returned by that step."""

    ctx: TurnContext
    cases: CaseBook
    tell: Teller
    audit: AuditTrail
    copy: ServerCopy
    factory: CardFactory
    recorder: Recorder
    execution: Execution

    @property
    def events(self) -> TurnEvents:
        return self.recorder.events
