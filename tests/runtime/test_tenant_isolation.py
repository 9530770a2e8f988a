"""Two accounts share nothing derived: the same client turn ids and the same case ids give each
account its own commands, cards and outbox rows."""

from __future__ import annotations

from turnframe_core import InteractionResponse, TurnInput
from turnframe_test import DeskHarness, act

REBOOK = "trip.request_rebooking"


async def _rebook_and_confirm(desk: DeskHarness) -> None:
    desk.ready_trip("T-100", "Rome trip")
    asked = await desk.say(
        "Rebook", act("a1", REBOOK, "h1", "Rebook", leg="outbound"), turn_id="turn_client_1"
    )
    card = desk.card(asked)
    clicked = await desk.runtime.handle_turn(
        TurnInput(
            account_id=desk.account_id,
            conversation_id=desk.conversation_id,
            turn_id="turn_client_2",
            interaction_response=InteractionResponse(
                interaction_id=card.interaction_id,
                option_id="opt_rebook",
                expected_case_revision=card.case_revision,
            ),
        )
    )
    assert desk.receipt_codes(clicked) == ["trip.rebooking_sent"]


async def test_two_accounts_with_the_same_turn_and_case_ids_both_complete(
    desk: DeskHarness, make_desk
) -> None:
    other = await make_desk(stores=desk.stores, clock=desk.clock, account_id="acct_2")
    await _rebook_and_confirm(desk)
    await _rebook_and_confirm(other)

    rows = []
    for account, harness in (("acct_1", desk), ("acct_2", other)):
        [entry] = [e for e in await harness.journal("turn_client_2") if e.account_id == account]
        rows.extend(await desk.stores.outbox.list_for_command(entry.command_id))
        assert await desk.stores.conversations.get_assistant_turn(account, "turn_client_2")
    assert len({row.outbox_id for row in rows}) == 2
    assert await desk.stores.conversations.list_unfinished_turns(10) == ()
