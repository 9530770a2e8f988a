"""Conformance checks: interactions (cards): admission, replacement, resolution, expiry."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from turnframe_core.interactions import Interaction, InteractionStatus
from turnframe_store import builders as build
from turnframe_store.builders import ACCOUNT_A, ACCOUNT_B, T0
from turnframe_store.bundle import Stores
from turnframe_store.conformance.data import card_status, ids
from turnframe_store.conformance.expect import equal, refused
from turnframe_store.conformance.runner import check
from turnframe_store.errors import Conflict, InvalidRecord, NotFound
from turnframe_store.roles.interactions import CARD_LIFECYCLE


@check
async def check_a_second_open_blocking_card_for_a_case_is_a_conflict(stores: Stores) -> None:
    cards = stores.interactions
    await cards.insert(build.card("int_first"))
    await refused(
        Conflict, cards.insert(build.card("int_second")), "a second blocking card for the case"
    )
    await refused(NotFound, cards.get(ACCOUNT_A, "int_second"), "the refused card")
    await cards.insert(build.card("int_side", blocking=False))
    await cards.insert(build.card("int_other_case", case=build.case("case-2")))
    await cards.insert(build.card("int_other_account", account=ACCOUNT_B))
    await cards.begin_resolution(ACCOUNT_A, "int_first", "opt_yes")
    await refused(
        Conflict,
        cards.insert(build.card("int_while_resolving")),
        "a blocking card while the case's card is resolving",
    )
    await cards.finish(ACCOUNT_A, "int_first", InteractionStatus.RESOLVED, "opt_yes")
    await cards.insert(build.card("int_next"))
    equal(
        await card_status(stores, ACCOUNT_A, "int_next"), InteractionStatus.ACTIVE, "the next card"
    )


@check
async def check_a_blocking_card_is_replaced_only_while_it_is_active(stores: Stores) -> None:
    cards = stores.interactions
    await cards.insert(build.card("int_old"))
    replaced = await cards.insert_replacing_blocking(build.card("int_new", created_at=T0 + 1))
    equal(replaced, ("int_old",), "the replaced cards")
    equal(
        await card_status(stores, ACCOUNT_A, "int_old"),
        InteractionStatus.INVALIDATED,
        "the old card",
    )
    equal(
        ids(await cards.open_for_conversation(ACCOUNT_A, "conv_1"), "interaction_id"),
        ["int_new"],
        "the open cards after the replacement",
    )
    await cards.begin_resolution(ACCOUNT_A, "int_new", "opt_yes")
    await refused(
        Conflict,
        cards.insert_replacing_blocking(build.card("int_newer", created_at=T0 + 2)),
        "replacing a card that is being resolved",
    )
    await refused(NotFound, cards.get(ACCOUNT_A, "int_newer"), "the refused replacement")
    equal(
        await card_status(stores, ACCOUNT_A, "int_new"),
        InteractionStatus.RESOLVING,
        "the resolving card",
    )
    equal(
        await cards.insert_replacing_blocking(build.card("int_alone", case=build.case("case-2"))),
        (),
        "replacing where there is no blocking card",
    )


@check
async def check_card_resolution_is_compare_and_swap_and_a_repeat_is_accepted(
    stores: Stores,
) -> None:
    cards = stores.interactions
    await cards.insert(build.card("int_1"))
    claimed = await cards.begin_resolution(ACCOUNT_A, "int_1", "opt_yes")
    equal(
        (claimed.status, claimed.resolved_option_id),
        (InteractionStatus.RESOLVING, "opt_yes"),
        "the claimed card",
    )
    for option in ("opt_yes", "opt_no"):
        await refused(
            Conflict,
            cards.begin_resolution(ACCOUNT_A, "int_1", option),
            "a second claim of the card",
        )
    await refused(
        Conflict,
        cards.finish(ACCOUNT_A, "int_1", InteractionStatus.RESOLVED, "opt_no", ("evt_1",)),
        "settling with an option that was not claimed",
    )
    resolved = await cards.finish(
        ACCOUNT_A, "int_1", InteractionStatus.RESOLVED, "opt_yes", ("evt_1",)
    )
    equal(
        (resolved.status, resolved.resolved_option_id, resolved.resolution_event_ids),
        (InteractionStatus.RESOLVED, "opt_yes", ("evt_1",)),
        "the resolved card",
    )
    again = await cards.finish(
        ACCOUNT_A, "int_1", InteractionStatus.RESOLVED, "opt_yes", ("evt_1",)
    )
    equal(again, resolved, "the same settlement again")
    refusals: list[tuple[str, Callable[[], Awaitable[object]]]] = [
        (
            "resolving with other events",
            lambda: cards.finish(
                ACCOUNT_A, "int_1", InteractionStatus.RESOLVED, "opt_yes", ("evt_2",)
            ),
        ),
        (
            "failing a resolved card",
            lambda: cards.finish(ACCOUNT_A, "int_1", InteractionStatus.FAILED),
        ),
        ("declining a resolved card", lambda: cards.decline(ACCOUNT_A, "int_1")),
        ("claiming a resolved card", lambda: cards.begin_resolution(ACCOUNT_A, "int_1", "opt_yes")),
    ]
    for what, action in refusals:
        await refused(Conflict, action(), what)
    equal(await cards.get(ACCOUNT_A, "int_1"), resolved, "the resolved card after refused moves")

    await cards.insert(build.card("int_2", case=build.case("case-2")))
    outcomes = await asyncio.gather(
        *(cards.begin_resolution(ACCOUNT_A, "int_2", "opt_yes") for _ in range(6)),
        return_exceptions=True,
    )
    unexpected = [
        o for o in outcomes if isinstance(o, BaseException) and not isinstance(o, Conflict)
    ]
    if unexpected:
        raise unexpected[0]
    winners = [o for o in outcomes if isinstance(o, Interaction)]
    equal(len(winners), 1, "concurrent claims of one card that win")
    released = await cards.finish(ACCOUNT_A, "int_2", InteractionStatus.ACTIVE)
    equal(
        (released.status, released.resolved_option_id),
        (InteractionStatus.ACTIVE, None),
        "a released card",
    )
    await cards.begin_resolution(ACCOUNT_A, "int_2", "opt_no")
    failed = await cards.finish(ACCOUNT_A, "int_2", InteractionStatus.FAILED)
    equal(failed.status, InteractionStatus.FAILED, "a failed resolution")
    equal(
        await cards.finish(ACCOUNT_A, "int_2", InteractionStatus.FAILED), failed, "failing it again"
    )

    await cards.insert(build.card("int_3", case=build.case("case-3")))
    await refused(
        InvalidRecord,
        cards.begin_resolution(ACCOUNT_A, "int_3", "opt_unknown"),
        "claiming an option the card does not offer",
    )
    declined = await cards.decline(ACCOUNT_A, "int_3", "opt_no")
    equal(declined.status, InteractionStatus.DECLINED, "a declined card")
    equal(await cards.decline(ACCOUNT_A, "int_3", "opt_no"), declined, "declining it again")
    await refused(Conflict, cards.dismiss(ACCOUNT_A, "int_3"), "dismissing a declined card")
    await cards.insert(build.card("int_4", case=build.case("case-4")))
    dismissed = await cards.dismiss(ACCOUNT_A, "int_4")
    equal(await cards.dismiss(ACCOUNT_A, "int_4"), dismissed, "dismissing it again")


@check
async def check_interaction_payloads_are_immutable(stores: Stores) -> None:
    cards = stores.interactions
    card = build.card("int_1")
    await cards.insert(card)
    equal(await cards.insert(card), card, "inserting the same card again")
    changed = build.card("int_1", title="Another title")
    await refused(Conflict, cards.insert(changed), "another payload under a stored id")
    await refused(
        Conflict,
        cards.insert_replacing_blocking(changed),
        "replacing a card with another payload under its own id",
    )
    await cards.begin_resolution(ACCOUNT_A, "int_1", "opt_yes")
    await cards.finish(ACCOUNT_A, "int_1", InteractionStatus.RESOLVED, "opt_yes", ("evt_1",))
    stored = await cards.get(ACCOUNT_A, "int_1")
    equal(
        stored.model_dump(exclude=set(CARD_LIFECYCLE)),
        card.model_dump(exclude=set(CARD_LIFECYCLE)),
        "everything but the lifecycle fields after resolution",
    )
    equal(stored.payload_hash, card.payload.hash(), "the payload hash")
    equal(await cards.insert(card), stored, "re-inserting a settled card (never reactivates it)")


@check
async def check_revision_invalidation_spares_revision_independent_cards(stores: Stores) -> None:
    cards = stores.interactions
    at_one = build.case("case-1", 1)
    await cards.insert(build.card("int_a", case=at_one, created_at=T0 + 1))
    await cards.insert(
        build.card(
            "int_b", case=at_one, blocking=False, revision_independent=True, created_at=T0 + 2
        )
    )
    await cards.insert(
        build.card("int_c", case=build.case("case-1", 2), blocking=False, created_at=T0 + 3)
    )
    await cards.insert(build.card("int_d", case=at_one, blocking=False, created_at=T0 + 4))
    await cards.begin_resolution(ACCOUNT_A, "int_d", "opt_yes")
    await cards.insert(build.card("int_e", case=at_one, blocking=False, created_at=T0))
    await cards.insert(build.card("int_f", case=build.case("case-2", 1)))
    invalidated = await cards.invalidate_for_revision(ACCOUNT_A, at_one.key, 2)
    equal(invalidated, ("int_e", "int_a"), "the stale cards, by (created_at, interaction_id)")
    expected = {
        "int_a": InteractionStatus.INVALIDATED,
        "int_b": InteractionStatus.ACTIVE,
        "int_c": InteractionStatus.ACTIVE,
        "int_d": InteractionStatus.RESOLVING,
        "int_e": InteractionStatus.INVALIDATED,
        "int_f": InteractionStatus.ACTIVE,
    }
    equal(
        {card_id: await card_status(stores, ACCOUNT_A, card_id) for card_id in expected},
        expected,
        "statuses after the revision moved to 2",
    )
    equal(await cards.invalidate_for_revision(ACCOUNT_A, at_one.key, 2), (), "invalidating again")
    equal(
        await cards.invalidate_case_cards(ACCOUNT_A, at_one.key),
        ("int_b", "int_c"),
        "the administrative invalidation (revision-independent cards included)",
    )
    equal(
        await card_status(stores, ACCOUNT_A, "int_d"),
        InteractionStatus.RESOLVING,
        "the resolving card",
    )
    equal(
        await card_status(stores, ACCOUNT_A, "int_f"),
        InteractionStatus.ACTIVE,
        "another case's card",
    )


@check
async def check_the_expiry_sweep_expires_only_due_active_cards(stores: Stores) -> None:
    cards = stores.interactions
    await cards.insert(build.card("int_1", case=build.case("case-1"), expires_at=T0 + 10))
    await cards.insert(build.card("int_2", case=build.case("case-2"), expires_at=T0 + 20))
    await cards.insert(build.card("int_3", case=build.case("case-3"), expires_at=T0 + 15))
    await cards.begin_resolution(ACCOUNT_A, "int_3", "opt_yes")
    await cards.insert(build.card("int_4", case=build.case("case-4")))
    await cards.insert(build.card("int_5", case=build.case("case-5"), expires_at=T0 + 30))
    await cards.insert(build.card("int_6", account=ACCOUNT_B, expires_at=T0 + 5))

    def listed(found: Sequence[Interaction]) -> list[tuple[str, str, InteractionStatus]]:
        return [(c.account_id, c.interaction_id, c.status) for c in found]

    expired = InteractionStatus.EXPIRED
    equal(
        listed(await cards.expire_due(T0 + 20, 2)),
        [(ACCOUNT_B, "int_6", expired), (ACCOUNT_A, "int_1", expired)],
        "the first sweep, by (expires_at, account_id, interaction_id)",
    )
    equal(
        listed(await cards.expire_due(T0 + 20, 2)),
        [(ACCOUNT_A, "int_2", expired)],
        "the second sweep",
    )
    equal(await cards.expire_due(T0 + 20, 2), (), "a third sweep")
    equal(
        [await card_status(stores, ACCOUNT_A, c) for c in ("int_3", "int_4", "int_5")],
        [InteractionStatus.RESOLVING, InteractionStatus.ACTIVE, InteractionStatus.ACTIVE],
        "a resolving card, a card without expiry and a card not yet due",
    )
    await cards.insert(build.card("int_7", case=build.case("case-1")))
