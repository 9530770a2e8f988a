"""Whatever the last replies held, the memory built from them stays within its documented bound
and names a case only by the handle this turn issued for it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from turnframe_core.blocks import InteractionBlock
from turnframe_core.canonical import canonical_json
from turnframe_core.cases import CaseKey, CaseRef
from turnframe_core.derive import derive_replay_token
from turnframe_core.interactions import (
    Interaction,
    InteractionKind,
    InteractionOption,
    InteractionPayload,
    InteractionStatus,
    SelectTarget,
)
from turnframe_core.turn import AssistantTurn, Expectation, Offer, TurnStatus
from turnframe_core.understanding import MEMORY_MAX_CHARS, ExpectationKind
from turnframe_runtime.memory import Recalled, remember

CardSpec = tuple[int, list[int], InteractionStatus]
ReplySpec = tuple[list[tuple[int | None, str]], list[int], list[CardSpec]]
CASES = [CaseRef(workflow="trip", case_id=f"T-{n}", expected_revision=1) for n in range(20)]
OPERATIONS = ["trip.request_rebooking", "trip.keep_leg", "trip.withdraw"]

case_index = st.integers(min_value=0, max_value=len(CASES) - 1)
card_spec = st.tuples(
    case_index,
    st.lists(case_index, min_size=1, max_size=12, unique=True),
    st.sampled_from(list(InteractionStatus)),
)
reply_spec = st.tuples(
    st.lists(st.tuples(st.none() | case_index, st.sampled_from(OPERATIONS)), max_size=15),
    st.lists(case_index, max_size=15),
    st.lists(card_spec, max_size=4),
)


def _card(turn: int, n: int, spec: CardSpec) -> Interaction:
    case, choices, status = spec
    options = tuple(
        InteractionOption(
            option_id=f"opt_case{i}", label=f"Trip {i}", action=SelectTarget(case_ref=CASES[i])
        )
        for i in choices
    )
    card = Interaction.create(
        interaction_id=f"int_{turn}x{n}", account_id="acct_1", conversation_id="conv_1",
        case_ref=CASES[case], kind=InteractionKind.SELECT_TARGET,
        payload=InteractionPayload(title="Which trip?", options=options),
        created_by_turn=f"turn_{turn}", created_at=1, expires_at=10 if n % 2 else None,
    )  # fmt: skip
    chosen = options[0].option_id if not status.is_open else None
    return card.model_copy(update={"status": status, "resolved_option_id": chosen})


def _reply(turn: int, spec: ReplySpec, cards: dict[str, Interaction]) -> AssistantTurn:
    offers, subjects, card_specs = spec
    shown = [_card(turn, n, card) for n, card in enumerate(card_specs)]
    cards.update({card.interaction_id: card for card in shown})
    return AssistantTurn(
        turn_id=f"turn_{turn}",
        conversation_id="conv_1",
        account_id="acct_1",
        status=TurnStatus.COMPLETED,
        locale="en",
        blocks=tuple(
            InteractionBlock.from_view(f"blk_{card.interaction_id}", card.view()) for card in shown
        ),
        replay_token=derive_replay_token(f"turn_{turn}"),
        created_at=1,
        completed_at=2,
        expectations=tuple(
            Expectation(kind=ExpectationKind.AWAITING_SELECTION, case_ref=card.case_ref)
            for card in shown
        ),
        offers=tuple(
            Offer(case_ref=None if c is None else CASES[c], operation=op, words="next")
            for c, op in offers
        ),
        subjects=tuple(CASES[c] for c in subjects),
    )


@settings(max_examples=60, deadline=None)
@given(
    replies=st.lists(reply_spec, max_size=8),
    issued=st.lists(case_index, max_size=20, unique=True),
    now=st.sampled_from([5, 50]),
)
def test_a_memory_stays_within_its_bound_and_names_only_issued_handles(
    replies: list[ReplySpec],
    issued: list[int],
    now: int,
) -> None:
    cards: dict[str, Interaction] = {}
    recalled = Recalled(tuple(_reply(t, spec, cards) for t, spec in enumerate(replies)), cards)
    handles: dict[CaseKey, str] = {CASES[c].key: f"h{i + 1}" for i, c in enumerate(issued)}

    memory = remember(recalled, handles, now)

    assert len(canonical_json(memory.model_dump(mode="json"))) <= MEMORY_MAX_CHARS
    assert memory.handles() <= set(handles.values())
    by_handle = {h: key for key, h in handles.items()}
    for offer in memory.offers:
        if offer.handle is not None:
            assert any(
                o.case_ref is not None and o.case_ref.key == by_handle[offer.handle]
                for reply in recalled.replies
                for o in reply.offers
            )
