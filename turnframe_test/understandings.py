"""Builders for scripted understandings: acts and questions grounded in the user's words.

The builders are the library's (`turnframe_core.understanding`); the kit re-exports them, and
`understanding` is `understanding_of` under the kit's older name."""

from __future__ import annotations

from turnframe_core.understanding import (
    act,
    ambiguous_act,
    constraint,
    question,
    understanding_of,
)

__all__ = ["act", "ambiguous_act", "constraint", "question", "understanding"]

understanding = understanding_of
