"""Conformance checks: interactions (cards): admission, replacement, resolution, expiry."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from turnframe_core.interactions import Interaction, InteractionStatus
from turnframe_store.bundle import Stores
from turnframe_store.conformance._data import (
    _A,
    _B,
    _CARD_LIFECYCLE,
    _T0,
    _card,
    _case,
    _ids,
    _status,
)
from turnframe_store.conformance._expect import _equal, _refused
from turnframe_store.conformance._runner import _check
from turnframe_store.errors import Conflict, InvalidRecord, NotFound


@_check
async def check_a_second_open_blocking_card_for_a_case_is_a_conflict(stores: Stores) -> None:
    cards = stores.interactions
    await cards.insert(_card("int_first"))
    await _refused(
        Conflict, cards.insert(_card("int_second")), "a second blocking card for the case"
    )
    await _refused(NotFound, cards.get(_A, "int_second"), "the refused card")
    await cards.insert(_card("int_side", blocking=False))
    await cards.insert(_card("int_other_case", case=_case("case-2")))
    await cards.insert(_card("int_other_account", account=_B))
    await cards.begin_resolution(_A, "int_first", "opt_yes")
    await _refused(
        Conflict,
        cards.insert(_card("int_while_resolving")),
        "a blocking card while the case's card is resolving",
    )
    await cards.finish(_A, "int_first", InteractionStatus.RESOLVED, "opt_yes")
    await cards.insert(_card("int_next"))
    _equal(await _status(stores, _A, "int_next"), InteractionStatus.ACTIVE, "the next card")


@_check
async def check_a_blocking_card_is_replaced_only_while_it_is_active(stores: Stores) -> None:
    cards = stores.interactions
    await cards.insert(_card("int_old"))
    replaced = await cards.insert_replacing_blocking(_card("int_new", created_at=_T0 + 1))
    _equal(replaced, ("int_old",), "the replaced cards")
    _equal(await _status(stores, _A, "int_old"), InteractionStatus.INVALIDATED, "the old card")
    _equal(
        _ids(await cards.open_for_conversation(_A, "conv_1"), "interaction_id"),
        ["int_new"],
        "the open cards after the replacement",
    )
    await cards.begin_resolution(_A, "int_new", "opt_yes")
    await _refused(
        Conflict,
        cards.insert_replacing_blocking(_card("int_newer", created_at=_T0 + 2)),
        "replacing a card that is being resolved",
    )
    await _refused(NotFound, cards.get(_A, "int_newer"), "the refused replacement")
    _equal(await _status(stores, _A, "int_new"), InteractionStatus.RESOLVING, "the resolving card")
    _equal(
        await cards.insert_replacing_blocking(_card("int_alone", case=_case("case-2"))),
        (),
        "replacing where there is no blocking card",
    )


@_check
async def check_card_resolution_is_compare_and_swap_and_a_repeat_is_accepted(
    stores: Stores,
) -> None:
    cards = stores.interactions
    await cards.insert(_card("int_1"))
    claimed = await cards.begin_resolution(_A, "int_1", "opt_yes")
    _equal(
        (claimed.status, claimed.resolved_option_id),
        (InteractionStatus.RESOLVING, "opt_yes"),
        "the claimed card",
    )
    for option in ("opt_yes", "opt_no"):
        await _refused(
            Conflict, cards.begin_resolution(_A, "int_1", option), "a second claim of the card"
        )
    await _refused(
        Conflict,
        cards.finish(_A, "int_1", InteractionStatus.RESOLVED, "opt_no", ("evt_1",)),
        "settling with an option that was not claimed",
    )
    resolved = await cards.finish(_A, "int_1", InteractionStatus.RESOLVED, "opt_yes", ("evt_1",))
    _equal(
        (resolved.status, resolved.resolved_option_id, resolved.resolution_event_ids),
        (InteractionStatus.RESOLVED, "opt_yes", ("evt_1",)),
        "the resolved card",
    )
    again = await cards.finish(_A, "int_1", InteractionStatus.RESOLVED, "opt_yes", ("evt_1",))
    _equal(again, resolved, "the same settlement again")
    refusals: list[tuple[str, Callable[[], Awaitable[object]]]] = [
        (
            "resolving with other events",
            lambda: cards.finish(_A, "int_1", InteractionStatus.RESOLVED, "opt_yes", ("evt_2",)),
        ),
        ("failing a resolved card", lambda: cards.finish(_A, "int_1", InteractionStatus.FAILED)),
        ("declining a resolved card", lambda: cards.decline(_A, "int_1")),
        ("claiming a resolved card", lambda: cards.begin_resolution(_A, "int_1", "opt_yes")),
    ]
    for what, action in refusals:
        await _refused(Conflict, action(), what)
    _equal(await cards.get(_A, "int_1"), resolved, "the resolved card after refused moves")

    await cards.insert(_card("int_2", case=_case("case-2")))
    outcomes = await asyncio.gather(
        *(cards.begin_resolution(_A, "int_2", "opt_yes") for _ in range(6)),
        return_exceptions=True,
    )
    unexpected = [
        o for o in outcomes if isinstance(o, BaseException) and not isinstance(o, Conflict)
    ]
    if unexpected:
        raise unexpected[0]
    winners = [o for o in outcomes if isinstance(o, Interaction)]
    _equal(len(winners), 1, "concurrent claims of one card that win")
    released = await cards.finish(_A, "int_2", InteractionStatus.ACTIVE)
    _equal(
        (released.status, released.resolved_option_id),
        (InteractionStatus.ACTIVE, None),
        "a released card",
    )
    await cards.begin_resolution(_A, "int_2", "opt_no")
    failed = await cards.finish(_A, "int_2", InteractionStatus.FAILED)
    _equal(failed.status, InteractionStatus.FAILED, "a failed resolution")
    _equal(await cards.finish(_A, "int_2", InteractionStatus.FAILED), failed, "failing it again")

    await cards.insert(_card("int_3", case=_case("case-3")))
    await _refused(
        InvalidRecord,
        cards.begin_resolution(_A, "int_3", "opt_unknown"),
        "claiming an option the card does not offer",
    )
    declined = await cards.decline(_A, "int_3", "opt_no")
    _equal(declined.status, InteractionStatus.DECLINED, "a declined card")
    _equal(await cards.decline(_A, "int_3", "opt_no"), declined, "declining it again")
    await _refused(Conflict, cards.dismiss(_A, "int_3"), "dismissing a declined card")
    await cards.insert(_card("int_4", case=_case("case-4")))
    dismissed = await cards.dismiss(_A, "int_4")
    _equal(await cards.dismiss(_A, "int_4"), dismissed, "dismissing it again")


@_check
async def check_interaction_payloads_are_immutable(stores: Stores) -> None:
    cards = stores.interactions
    card = _card("int_1")
    await cards.insert(card)
    _equal(await cards.insert(card), card, "inserting the same card again")
    changed = _card("int_1", title="Another title")
    await _refused(Conflict, cards.insert(changed), "another payload under a stored id")
    await _refused(
        Conflict,
        cards.insert_replacing_blocking(changed),
        "replacing a card with another payload under its own id",
    )
    await cards.begin_resolution(_A, "int_1", "opt_yes")
    await cards.finish(_A, "int_1", InteractionStatus.RESOLVED, "opt_yes", ("evt_1",))
    stored = await cards.get(_A, "int_1")
    _equal(
        stored.model_dump(exclude=_CARD_LIFECYCLE),
        card.model_dump(exclude=_CARD_LIFECYCLE),
        "everything but the lifecycle fields after resolution",
    )
    _equal(stored.payload_hash, card.payload.hash(), "the payload hash")
    _equal(await cards.insert(card), stored, "re-inserting a settled card (never reactivates it)")


@_check
async def check_revision_invalidation_spares_revision_independent_cards(stores: Stores) -> None:
    cards = stores.interactions
    at_one = _case("case-1", 1)
    await cards.insert(_card("int_a", case=at_one, created_at=_T0 + 1))
    await cards.insert(
        _card("int_b", case=at_one, blocking=False, revision_independent=True, created_at=_T0 + 2)
    )
    await cards.insert(_card("int_c", case=_case("case-1", 2), blocking=False, created_at=_T0 + 3))
    await cards.insert(_card("int_d", case=at_one, blocking=False, created_at=_T0 + 4))
    await cards.begin_resolution(_A, "int_d", "opt_yes")
    await cards.insert(_card("int_e", case=at_one, blocking=False, created_at=_T0))
    await cards.insert(_card("int_f", case=_case("case-2", 1)))
    invalidated = await cards.invalidate_for_revision(_A, at_one.key, 2)
    _equal(invalidated, ("int_e", "int_a"), "the stale cards, by (created_at, interaction_id)")
    expected = {
        "int_a": InteractionStatus.INVALIDATED,
        "int_b": InteractionStatus.ACTIVE,
        "int_c": InteractionStatus.ACTIVE,
        "int_d": InteractionStatus.RESOLVING,
        "int_e": InteractionStatus.INVALIDATED,
        "int_f": InteractionStatus.ACTIVE,
    }
    _equal(
        {card_id: await _status(stores, _A, card_id) for card_id in expected},
        expected,
        "statuses after the revision moved to 2",
    )
    _equal(await cards.invalidate_for_revision(_A, at_one.key, 2), (), "invalidating again")
    _equal(
        await cards.invalidate_case_cards(_A, at_one.key),
        ("int_b", "int_c"),
        "the administrative invalidation (revision-independent cards included)",
    )
    _equal(await _status(stores, _A, "int_d"), InteractionStatus.RESOLVING, "the resolving card")
    _equal(await _status(stores, _A, "int_f"), InteractionStatus.ACTIVE, "another case's card")


@_check
async def check_the_expiry_sweep_expires_only_due_active_cards(stores: Stores) -> None:
    cards = stores.interactions
    await cards.insert(_card("int_1", case=_case("case-1"), expires_at=_T0 + 10))
    await cards.insert(_card("int_2", case=_case("case-2"), expires_at=_T0 + 20))
    await cards.insert(_card("int_3", case=_case("case-3"), expires_at=_T0 + 15))
    await cards.begin_resolution(_A, "int_3", "opt_yes")
    await cards.insert(_card("int_4", case=_case("case-4")))
    await cards.insert(_card("int_5", case=_case("case-5"), expires_at=_T0 + 30))
    await cards.insert(_card("int_6", account=_B, expires_at=_T0 + 5))

    def listed(found: Sequence[Interaction]) -> list[tuple[str, str, InteractionStatus]]:
        return [(c.account_id, c.interaction_id, c.status) for c in found]

    expired = InteractionStatus.EXPIRED
    _equal(
        listed(await cards.expire_due(_T0 + 20, 2)),
        [(_B, "int_6", expired), (_A, "int_1", expired)],
        "the first sweep, by (expires_at, account_id, interaction_id)",
    )
    _equal(
        listed(await cards.expire_due(_T0 + 20, 2)),
        [(_A, "int_2", expired)],
        "the second sweep",
    )
    _equal(await cards.expire_due(_T0 + 20, 2), (), "a third sweep")
    _equal(
        [await _status(stores, _A, c) for c in ("int_3", "int_4", "int_5")],
        [InteractionStatus.RESOLVING, InteractionStatus.ACTIVE, InteractionStatus.ACTIVE],
        "a resolving card, a card without expiry and a card not yet due",
    )
    await cards.insert(_card("int_7", case=_case("case-1")))
