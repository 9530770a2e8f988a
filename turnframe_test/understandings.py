"""Builders for scripted understandings: acts and questions grounded in the user's words."""

from __future__ import annotations

from typing import Any

from turnframe_core import (
    AmbiguousTarget,
    ArgumentValue,
    CardTarget,
    Constraint,
    ConstraintKind,
    Evidence,
    HandleTarget,
    ProposedAct,
    Question,
    Understanding,
)

__all__ = ["act", "ambiguous_act", "constraint", "question", "understanding"]


def act(
    act_id: str,
    operation: str,
    handle: str | None,
    quote: str,
    *,
    corrects: str | None = None,
    cancels: str | None = None,
    **arguments: Any,
) -> ProposedAct:
    """An act on `handle` (None: the card on screen) whose every argument quotes `quote`."""
    return ProposedAct(
        act_id=act_id,
        operation=operation,
        target=HandleTarget(handle=handle) if handle else CardTarget(),
        arguments=tuple(
            ArgumentValue(name=name, value=value, evidence=Evidence(quote=quote))
            for name, value in arguments.items()
        ),
        evidence=Evidence(quote=quote),
        corrects=corrects,
        cancels=cancels,
    )


def ambiguous_act(
    act_id: str, operation: str, handles: tuple[str, ...], quote: str, **arguments: Any
) -> ProposedAct:
    base = act(act_id, operation, handles[0], quote, **arguments)
    return base.model_copy(update={"target": AmbiguousTarget(handles=handles)})


def question(question_id: str, text: str, *about: str, hypothetical: bool = False) -> Question:
    return Question(question_id=question_id, text=text, about=about, hypothetical=hypothetical)


def constraint(kind: str, quote: str) -> Constraint:
    return Constraint(kind=ConstraintKind(kind), evidence=Evidence(quote=quote))


def understanding(*parts: Any) -> Understanding:
    return Understanding(
        acts=tuple(p for p in parts if isinstance(p, ProposedAct)),
        questions=tuple(p for p in parts if isinstance(p, Question)),
        constraints=tuple(p for p in parts if isinstance(p, Constraint)),
    )
