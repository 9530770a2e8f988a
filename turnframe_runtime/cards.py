"""Steps L and P: the cards the runtime raises, and how they are persisted.

A card is built here (pure), persisted before any block may show it, and its commands are
journaled `awaiting_confirmation` right after it; if any part fails the card is withdrawn, never
appears as a block, and `interaction_unavailable` says so.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from turnframe_core.commands import ConfirmationPolicy
from turnframe_core.derive import derive_interaction_id
from turnframe_core.erasure import erased_card_digest
from turnframe_core.errors import TurnframeError
from turnframe_core.interactions import (
    CardPurpose,
    ConfirmCommands,
    ConfirmsAct,
    DeclineCommands,
    DefersAct,
    Dismiss,
    Interaction,
    InteractionKind,
    InteractionOption,
    InteractionPayload,
    MeetsRequirement,
    OptionStyle,
    ReviewEntry,
    SelectTarget,
)
from turnframe_core.understanding import Constraint, ProposedAct
from turnframe_core.workflow import CompiledCommand, InteractionRequirement
from turnframe_runtime.context import AuditTrail, TurnContext
from turnframe_runtime.copy import CopyRenderError, ServerCopy, as_data, as_params
from turnframe_runtime.reduce import CaseInView, PlannedCommand
from turnframe_store.bundle import Stores
from turnframe_store.errors import StoreError
from turnframe_store.records import JournalEntry, JournalStatus

__all__ = [
    "CONFIRM_OPTION",
    "DECLINE_OPTION",
    "NONE_OF_THESE_OPTION",
    "CardFactory",
    "RaisedCard",
    "persist_card",
    "purpose_of",
    "requirement_key",
]

CONFIRM_OPTION = "opt_confirm"
DECLINE_OPTION = "opt_decline"
NONE_OF_THESE_OPTION = "opt_none"


@dataclass(frozen=True)
class RaisedCard:
    """A card a turn will persist before it executes, with the commands it confirms.
    `deferrable`: a confirmation whose case this turn also changes is raised after the commit
    instead, against the revision the commit leaves."""

    act_id: str
    card: Interaction
    commands: tuple[PlannedCommand, ...] = ()
    deferrable: bool = False


@dataclass(frozen=True)
class CardFactory:
    """Builds the runtime's own cards for one turn, in its locale (pure: persists nothing)."""

    turn: TurnContext
    copy: ServerCopy
    max_selection_candidates: int

    def _text(self, template_id: str, **params: Any) -> str:
        return self.copy.render(template_id, self.turn.locale, params).text

    def _card(
        self,
        key: str,
        case: CaseInView,
        kind: InteractionKind,
        payload: InteractionPayload,
        *,
        blocking: bool = True,
        revision_independent: bool = False,
        expires_at: int | None = None,
    ) -> Interaction:
        t = self.turn
        return Interaction.create(
            interaction_id=derive_interaction_id(t.account_id, t.turn_id, key),
            account_id=t.account_id,
            conversation_id=t.conversation_id,
            case_ref=case.case_ref,
            kind=kind,
            payload=payload,
            created_by_turn=t.turn_id,
            created_at=t.now,
            blocking=blocking,
            revision_independent=revision_independent,
            expires_at=expires_at,
        )

    def confirmation(
        self,
        act_id: str,
        case: CaseInView,
        commands: Sequence[CompiledCommand],
        command_ids: Sequence[str],
    ) -> Interaction:
        """The card an act waits for: what it would do, confirm or cancel."""
        policies = [case.workflow.policy(c.command_type) for c in commands]
        review = any(p.confirmation is ConfirmationPolicy.REVIEW_CARD for p in policies)
        workflow = case.case_ref.workflow
        entries = tuple(
            ReviewEntry(field=name, label=self._field_label(workflow, name), after=str(value))
            for command in commands
            for name, value in command.payload.items()
        )
        payload = InteractionPayload(
            title=self._confirm_title(case, commands),
            review_entries=entries if review else (),
            options=(
                InteractionOption(
                    option_id=CONFIRM_OPTION,
                    style=OptionStyle.PRIMARY,
                    label=self._text("turnframe.card.confirm.confirm"),
                    action=ConfirmCommands(command_ids=tuple(command_ids)),
                ),
                InteractionOption(
                    option_id=DECLINE_OPTION,
                    label=self._text("turnframe.card.confirm.decline"),
                    action=DeclineCommands(),
                ),
            ),
            purpose=ConfirmsAct(act_id=act_id),
        )
        kind = InteractionKind.REVIEW_CHANGES if review else InteractionKind.CONFIRM_COMMAND
        return self._card(f"confirm:{act_id}", case, kind, payload)

    def _confirm_title(self, case: CaseInView, commands: Sequence[CompiledCommand]) -> str:
        """What the card confirms, in the turn's locale: each command's own `<command type>.confirm`
        copy with its arguments (money, dates and numbers formatted by the template), else the
        operation's summary."""
        titles: list[str] = []
        for command in commands:
            template = f"{command.command_type}.confirm"
            if not self.copy.has(template):
                break
            params = as_params(command.payload)
            try:
                titles.append(self.copy.render(template, self.turn.locale, params).text)
            except CopyRenderError:
                break
        else:
            return " ".join(titles)
        summary = next(
            (
                spec.summary
                for spec in case.workflow.operations(case.view)
                if spec.operation == commands[0].command_type
            ),
            commands[0].command_type,
        )
        workflow = case.case_ref.workflow
        details = "; ".join(
            f"{self._field_label(workflow, name)} {as_data(value)}"
            for command in commands
            for name, value in command.payload.items()
        )
        return self._text("turnframe.card.confirm.title", summary=as_data(summary), details=details)

    def _field_label(self, workflow: str, name: str) -> str:
        template = f"{workflow}.field.{name}"
        if self.copy.has(template):
            with contextlib.suppress(CopyRenderError):
                return self._text(template)
        return name.replace("_", " ")

    def _rendered(self, payload: InteractionPayload) -> InteractionPayload:
        """A workflow's card with its copy references rendered in the turn's locale."""
        found = dict(payload.copy_references())
        if not found:
            return payload

        def text(name: str, value: Any) -> Any:
            ref = found.get(name)
            return value if ref is None else self._text(ref.template_id, **as_params(ref.params))

        return payload.model_copy(
            update={
                "title": text("title", payload.title),
                "body": text("body", payload.body),
                "freeform_prompt": text("freeform_prompt", payload.freeform_prompt),
                "options": tuple(
                    option.model_copy(
                        update={"label": text(f"options.{option.option_id}.label", option.label)}
                    )
                    for option in payload.options
                ),
            }
        )

    def selection(
        self, act: ProposedAct, cases: Sequence[CaseInView], constraints: Sequence[Constraint]
    ) -> Interaction:
        """Which case did an ambiguous act mean? The card holds the act until it is answered."""
        shown = list(cases)[: self.max_selection_candidates]
        options = [
            InteractionOption(
                option_id=f"opt_case{i}",
                label=case.label,
                action=SelectTarget(case_ref=case.case_ref),
            )
            for i, case in enumerate(shown, start=1)
        ]
        options.append(
            InteractionOption(
                option_id=NONE_OF_THESE_OPTION,
                label=self._text("turnframe.card.select.none"),
                action=Dismiss(),
            )
        )
        payload = InteractionPayload(
            title=self._text("turnframe.card.select.title"),
            options=tuple(options),
            purpose=DefersAct(act=act, constraints=tuple(constraints)),
        )
        return self._card(
            f"select_target:{act.act_id}",
            shown[0],
            InteractionKind.SELECT_TARGET,
            payload,
            blocking=False,
            revision_independent=True,
        )

    def requirement(self, case: CaseInView, requirement: InteractionRequirement) -> Interaction:
        """The card a workflow view requires now, built by its workflow, its copy rendered in
        the turn's locale (`MissingCopy` or `CopyRenderError` when it cannot be)."""
        payload = self._rendered(
            case.workflow.build_interaction(requirement, case.view, case.state)
        )
        payload = payload.model_copy(
            update={"purpose": MeetsRequirement(requirement_key=requirement.key)}
        )
        ref = case.case_ref
        expires_in = requirement.expires_in_ms
        return self._card(
            f"follow_up:{ref.workflow}:{ref.case_id}:{requirement.key}",
            case,
            requirement.kind,
            payload,
            blocking=requirement.blocking,
            revision_independent=requirement.revision_independent,
            expires_at=self.turn.now + expires_in if expires_in else None,
        )


def purpose_of(card: Interaction) -> CardPurpose | None:
    """Why the runtime raised `card`. Cards stored before `purpose` existed (decision 0005) kept
    it in `metadata`; they are read the same way, or as having none when that is unreadable."""
    if card.payload.purpose is not None:
        return card.payload.purpose
    legacy = card.payload.metadata
    try:
        if isinstance(legacy.get("deferred_act"), dict):
            return DefersAct(
                act=ProposedAct.model_validate(legacy["deferred_act"]),
                constraints=tuple(
                    Constraint.model_validate(c) for c in legacy.get("constraints", [])
                ),
            )
        if isinstance(legacy.get("requirement_key"), str):
            return MeetsRequirement(requirement_key=legacy["requirement_key"])
        if isinstance(legacy.get("act_id"), str):
            return ConfirmsAct(act_id=legacy["act_id"])
    except (ValidationError, TurnframeError):
        return None
    return None


def requirement_key(card: Interaction) -> str | None:
    purpose = purpose_of(card)
    return purpose.requirement_key if isinstance(purpose, MeetsRequirement) else None


async def persist_card(
    stores: Stores,
    turn: TurnContext,
    card: Interaction,
    commands: Sequence[PlannedCommand],
    audit: AuditTrail,
) -> bool:
    """Persist a card, then journal the commands it will confirm, as one savepoint. True when
    the card may be shown; on any failure nothing of it remains (a half-persisted card never
    stays answerable) and the caller says `interaction_unavailable`."""
    try:
        async with stores.savepoint():
            if card.blocking:
                await stores.interactions.insert_replacing_blocking(card)
            else:
                await stores.interactions.insert(card)
            for command in commands:
                entry = JournalEntry.from_envelope(
                    command.envelope, now=turn.now, status=JournalStatus.AWAITING_CONFIRMATION
                )
                await stores.journal.begin(entry)
    except StoreError:
        with contextlib.suppress(StoreError):  # stores without savepoints may have kept it
            async with stores.savepoint():
                await stores.interactions.dismiss(turn.account_id, card.interaction_id)
        return False
    audit.interactions_created.append(card.interaction_id)
    audit.interaction_digests.append(card.content_digest())
    audit.erased_interaction_digests.append(erased_card_digest(card))
    return True
