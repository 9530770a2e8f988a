"""Events from outside become server turns (`runtime.server_event`, docs/server-events.md), on
every backend: a verified event runs the workflow's own command once and tells the conversation
with a receipt turn in its locale, without a model call; the same event again is the same turn;
every refusal (origin, signature, case, domain, key) is typed and writes nothing; a policy only a
click satisfies shows the card; a crash after the journal is finished by recovery, one effect."""

from __future__ import annotations

from typing import Any

import pytest

from turnframe_core import ServerEvent, TurnInput, TurnStatus, codes
from turnframe_core.blocks import ReceiptBlock
from turnframe_core.commands import ExternalCallback, InternalPolicy
from turnframe_core.replay import TurnPhase
from turnframe_runtime import (
    HmacOrigin,
    IdempotencyKeyReused,
    OriginNotVerified,
    RecoveryOutcome,
    ServerEventRefused,
    TrustedOrigin,
    TurnInProgress,
)
from turnframe_store import FaultPoint, NotFound, Timeout
from turnframe_test import DeskHarness, ScriptedNarrator, act
from turnframe_test.domains.travel import ProcessCrash

BANK = HmacOrigin("bank", b"a shared secret of the bank")
DESK = TrustedOrigin("desk")
ACCOUNT, CONVERSATION = "acct_1", "conv_1"


def _event(key: str = "evt-1", origin: str = "bank", **fields: Any) -> ServerEvent:
    body: dict[str, Any] = {
        "account_id": ACCOUNT,
        "conversation_id": CONVERSATION,
        "origin": origin,
        "idempotency_key": key,
        "workflow": "trip",
        "case_id": "T-100",
        "operation": "trip.set_name",
        "arguments": {"name": "Grace Hopper"},
    }
    return ServerEvent.model_validate({**body, **fields})


def _signed(event: ServerEvent) -> str:
    return BANK.sign(event.signing_bytes())


async def _opened(desk: DeskHarness, locale: str = "it") -> None:
    """The trip, and a conversation whose user writes in `locale`."""
    desk.ready_trip()
    await desk.say("Ciao", locale=locale)


async def _rows(desk: DeskHarness) -> dict[str, int]:
    """What the account's stores hold, counted."""
    stores = desk.stores
    turns = await stores.conversations.list_turns(ACCOUNT, CONVERSATION)
    journal = [e for t in turns for e in await stores.journal.for_turn(ACCOUNT, t.turn_id)]
    return {
        "turns": len(turns),
        "replies": len(await desk.runtime.load_conversation(ACCOUNT, CONVERSATION, 500)),
        "records": len(await stores.replay.for_conversation(ACCOUNT, CONVERSATION)),
        "journal": len(journal),
        "events": len(await desk.events()),
        "unfinished": len(await stores.conversations.list_unfinished_turns(100)),
        "applied": sum(desk.executor.applied.values()),
    }


@pytest.fixture
async def desk(make_desk: Any) -> DeskHarness:
    desk: DeskHarness = await make_desk(origins=[BANK, DESK])
    return desk


async def test_a_verified_event_runs_its_command_once_and_tells_the_conversation_in_its_locale(
    make_desk: Any,
) -> None:
    narrator = ScriptedNarrator()
    desk: DeskHarness = await make_desk(origins=[BANK], narrator=narrator)
    await _opened(desk, "it")
    calls = len(narrator.calls)
    event = _event()

    turn = await desk.runtime.server_event(event, signature=_signed(event))

    assert turn.status is TurnStatus.COMPLETED and turn.locale == "it"
    assert desk.receipt_codes(turn) == ["trip.name_set"]
    assert [b.copy_ref.locale for b in turn.blocks if isinstance(b, ReceiptBlock)] == ["it"]
    assert desk.desk.trips[(ACCOUNT, "T-100")].state["name"] == "Grace Hopper"
    assert list(desk.executor.applied.values()) == [1]
    assert await desk.event_types() == ["trip.name_set"]
    assert len(narrator.calls) == calls  # composed from server copy: no model call
    assert await desk.runtime.load_turn(ACCOUNT, turn.turn_id) == turn
    [entry] = await desk.journal(turn)
    assert entry.origin == ExternalCallback(callback_id="bank:evt-1", signature_verified=True)
    record = await desk.runtime.replay(ACCOUNT, turn.replay_token)
    assert record.phase is TurnPhase.DELIVERED and record.input.is_server_turn


async def test_a_trusted_origins_commands_carry_the_servers_own_policy(desk: DeskHarness) -> None:
    await _opened(desk, "en")

    turn = await desk.runtime.server_event(_event(origin="desk"))

    assert desk.receipt_codes(turn) == ["trip.name_set"] and turn.locale == "en"
    [entry] = await desk.journal(turn)
    assert entry.origin == InternalPolicy(policy_key="event:desk")


async def test_an_event_may_name_its_own_locale(desk: DeskHarness) -> None:
    await _opened(desk, "it")
    event = _event(locale="de")

    turn = await desk.runtime.server_event(event, signature=_signed(event))

    assert turn.locale == "de" and desk.receipt_codes(turn) == ["trip.name_set"]


async def test_a_locale_an_event_named_leaves_the_conversations_locale_as_it_was(
    desk: DeskHarness,
) -> None:
    await _opened(desk, "it")
    named = _event("evt-de", locale="de")
    await desk.runtime.server_event(named, signature=_signed(named))
    told = _event("evt-after", arguments={"name": "Ada Lovelace"})

    turn = await desk.runtime.server_event(told, signature=_signed(told))

    assert turn.locale == "it" and desk.receipt_codes(turn) == ["trip.name_set"]


async def test_an_event_reads_its_conversation_by_key_never_every_turn(
    desk: DeskHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its reads do not grow with the conversation: none lists the conversation's turns."""
    await _opened(desk, "it")
    for n in range(3):
        await desk.say(f"Still here {n}", locale="it")

    async def every_turn(*args: Any) -> Any:
        raise AssertionError("an event listed every turn of its conversation")

    monkeypatch.setattr(desk.stores.conversations, "list_turns", every_turn)
    event = _event()

    turn = await desk.runtime.server_event(event, signature=_signed(event))
    again = await desk.runtime.server_event(event, signature=_signed(event))

    assert turn.locale == "it" and desk.receipt_codes(turn) == ["trip.name_set"]
    assert again == turn


async def test_the_same_event_again_is_the_same_turn_with_no_second_effect(
    desk: DeskHarness,
) -> None:
    await _opened(desk)
    event = _event()
    first = await desk.runtime.server_event(event, signature=_signed(event))
    before = await _rows(desk)

    again = await desk.runtime.server_event(event, signature=_signed(event))

    assert again == first
    assert await _rows(desk) == before
    assert list(desk.executor.applied.values()) == [1]


async def test_the_same_key_with_another_event_is_refused_and_writes_nothing(
    desk: DeskHarness,
) -> None:
    await _opened(desk)
    event = _event()
    await desk.runtime.server_event(event, signature=_signed(event))
    before = await _rows(desk)
    other = _event(arguments={"name": "Ada Lovelace"})

    with pytest.raises(IdempotencyKeyReused) as raised:
        await desk.runtime.server_event(other, signature=_signed(other))

    assert raised.value.code == codes.RUNTIME_IDEMPOTENCY_KEY_REUSED
    assert await _rows(desk) == before


@pytest.mark.parametrize(
    ("origin", "signature"),
    [
        ("bank", None),
        ("bank", "0" * 64),
        ("bank", "a forged signature"),
        ("nobody", "signed"),
    ],
    ids=["unsigned", "wrong-signature", "not-hex", "unknown-origin"],
)
async def test_an_event_whose_origin_does_not_verify_is_refused_and_writes_nothing(
    desk: DeskHarness, origin: str, signature: str | None
) -> None:
    await _opened(desk)
    before = await _rows(desk)

    with pytest.raises(OriginNotVerified) as raised:
        await desk.runtime.server_event(_event(origin=origin), signature=signature)

    assert raised.value.code == codes.SERVER_EVENT_ORIGIN_NOT_VERIFIED
    assert await _rows(desk) == before


async def test_a_signature_covers_the_whole_event(desk: DeskHarness) -> None:
    await _opened(desk)
    signed = _signed(_event())
    before = await _rows(desk)

    with pytest.raises(OriginNotVerified):
        await desk.runtime.server_event(_event(arguments={"name": "Mallory"}), signature=signed)

    assert await _rows(desk) == before


@pytest.mark.parametrize(
    "case",
    [{"case_id": "T-200"}, {"case_id": "T-999"}, {"workflow": "refund"}],
    ids=["another-accounts-case", "missing-case", "unknown-workflow"],
)
async def test_a_case_the_account_does_not_have_is_not_found_the_same_way_and_writes_nothing(
    desk: DeskHarness, case: dict[str, str]
) -> None:
    await _opened(desk)
    desk.desk.open_trip("acct_2", "T-200", "Paris trip")
    before = await _rows(desk)
    event = _event(**case)

    with pytest.raises(NotFound) as raised:
        await desk.runtime.server_event(event, signature=_signed(event))

    assert str(raised.value) == str(NotFound())
    assert await _rows(desk) == before


async def test_an_event_for_a_conversation_that_does_not_exist_is_not_found(
    desk: DeskHarness,
) -> None:
    desk.ready_trip()
    event = _event()

    with pytest.raises(NotFound):
        await desk.runtime.server_event(event, signature=_signed(event))

    with pytest.raises(NotFound):
        await desk.stores.conversations.get_conversation(ACCOUNT, CONVERSATION)
    assert desk.executor.applied == {}


@pytest.mark.parametrize(
    ("fields", "refusal"),
    [
        ({"arguments": {"name": "R2D2 4ever"}}, "trip.invalid_name"),
        ({"operation": "trip.confirm_rebooking", "arguments": {"leg": "outbound"}}, None),
        ({"operation": "trip.unheard_of"}, None),
    ],
    ids=["domain-refusal", "nothing-to-confirm", "operation-not-offered"],
)
async def test_an_operation_the_domain_refuses_is_refused_and_writes_nothing(
    desk: DeskHarness, fields: dict[str, Any], refusal: str | None
) -> None:
    await _opened(desk)
    before = await _rows(desk)
    event = _event(**fields)

    with pytest.raises(ServerEventRefused) as raised:
        await desk.runtime.server_event(event, signature=_signed(event))

    assert raised.value.code == codes.SERVER_EVENT_REFUSED
    if refusal is not None:
        assert raised.value.refusal_code == refusal
    assert await _rows(desk) == before


async def test_a_policy_the_origin_does_not_satisfy_shows_the_card_and_the_user_decides(
    desk: DeskHarness,
) -> None:
    await _opened(desk)
    event = _event(operation="trip.withdraw", arguments={})

    turn = await desk.runtime.server_event(event, signature=_signed(event))

    assert desk.kinds(turn)[-1] == "interaction"
    assert desk.executor.applied == {} and await desk.events() == []
    clicked = await desk.click(turn, "opt_confirm")
    assert desk.receipt_codes(clicked) == ["trip.withdrawn"]
    assert desk.desk.trips[(ACCOUNT, "T-100")].state["status"] == "withdrawn"


async def test_an_operation_that_changes_nothing_says_so_once(desk: DeskHarness) -> None:
    await _opened(desk)
    event = _event(arguments={"name": "Ada Lovelace"})  # the trip's name already

    turn = await desk.runtime.server_event(event, signature=_signed(event))

    assert turn.status is TurnStatus.COMPLETED and desk.receipt_codes(turn) == []
    assert desk.executor.applied == {}
    assert await desk.runtime.server_event(event, signature=_signed(event)) == turn


@pytest.mark.parametrize("applied", [False, True], ids=["before-the-request", "after-it"])
async def test_a_crash_between_the_journal_and_the_commit_is_finished_by_recovery_once(
    desk: DeskHarness, applied: bool
) -> None:
    await _opened(desk)
    event = _event()
    if applied:
        desk.executor.arm_after_remote_request(ProcessCrash())
    else:
        desk.executor.arm_before_remote_request(ProcessCrash())
    with pytest.raises(ProcessCrash):
        await desk.runtime.server_event(event, signature=_signed(event))
    [marker] = await desk.stores.conversations.list_unfinished_turns(10)
    assert marker.phase is TurnPhase.EXECUTING

    [recovered] = (await desk.runtime.recover_unfinished()).turns

    assert recovered.outcome is RecoveryOutcome.RESUMED
    assert list(desk.executor.applied.values()) == [1]
    turn = await desk.runtime.load_turn(ACCOUNT, marker.turn_id)
    assert desk.receipt_codes(turn) == ["trip.name_set"] and turn.locale == "it"
    assert await desk.runtime.server_event(event, signature=_signed(event)) == turn


async def test_a_commit_that_failed_is_finished_when_the_same_event_comes_a_lease_later(
    desk: DeskHarness,
) -> None:
    """Sooner, the turn may still be running in another process: it is in progress."""
    await _opened(desk)
    event = _event()
    # The start bundle crosses the point first; the commit's journal completions next.
    desk.stores.faults.arm(FaultPoint.AFTER_JOURNAL_INSERT_BEFORE_COMMIT, skip=1)
    with pytest.raises(Timeout):
        await desk.runtime.server_event(event, signature=_signed(event))
    assert await desk.events() == []
    desk.clock.advance(desk.config.timer_lease_ms - 1)
    with pytest.raises(TurnInProgress):
        await desk.runtime.server_event(event, signature=_signed(event))
    assert await desk.events() == []
    desk.clock.advance(1)

    turn = await desk.runtime.server_event(event, signature=_signed(event))

    assert desk.receipt_codes(turn) == ["trip.name_set"]
    assert list(desk.executor.applied.values()) == [1]
    assert await desk.event_types() == ["trip.name_set"]


async def test_a_fault_at_the_start_writes_nothing_and_the_event_can_come_again(
    desk: DeskHarness,
) -> None:
    await _opened(desk)
    event = _event()
    before = await _rows(desk)
    desk.stores.faults.arm(FaultPoint.AFTER_JOURNAL_INSERT_BEFORE_COMMIT)
    with pytest.raises(Timeout):
        await desk.runtime.server_event(event, signature=_signed(event))
    assert await _rows(desk) == before

    turn = await desk.runtime.server_event(event, signature=_signed(event))

    assert desk.receipt_codes(turn) == ["trip.name_set"]
    assert list(desk.executor.applied.values()) == [1]


def test_an_origin_signs_the_canonical_bytes_of_the_whole_event() -> None:
    event = _event()
    assert BANK.verify(event.signing_bytes(), _signed(event))
    assert not BANK.verify(_event(key="evt-2").signing_bytes(), _signed(event))
    assert not BANK.verify(event.signing_bytes(), None)
    assert DESK.verify(event.signing_bytes(), None)


def test_origins_are_named_once_and_keep_their_secrets_long() -> None:
    with pytest.raises(ValueError):
        HmacOrigin("bank", b"short")
    with pytest.raises(ValueError):
        TrustedOrigin("Not A Name")
    assert "secret" not in repr(BANK)


def test_a_runtime_refuses_two_origins_of_one_name() -> None:
    with pytest.raises(ValueError):
        DeskHarness(origins=[BANK, HmacOrigin("bank", b"another secret, as long")])


async def test_an_event_after_a_turn_a_crash_left_finishes_that_turn_first(
    desk: DeskHarness,
) -> None:
    await _opened(desk)
    desk.executor.arm_after_remote_request(ProcessCrash())
    with pytest.raises(ProcessCrash):
        await desk.say(
            "Email me at grace@example.com",
            act("a1", "trip.set_email", "h1", "grace@example.com", email="grace@example.com"),
            locale="it",
        )
    event = _event()

    turn = await desk.runtime.server_event(event, signature=_signed(event))

    assert desk.receipt_codes(turn) == ["trip.name_set"]
    assert await desk.stores.conversations.list_unfinished_turns(10) == ()
    assert await desk.event_types() == ["trip.email_set", "trip.name_set"]
    assert list(desk.executor.applied.values()) == [1, 1]


async def test_a_key_used_in_another_conversation_is_refused_and_writes_nothing(
    desk: DeskHarness,
) -> None:
    await _opened(desk)
    await desk.runtime.handle_turn(
        TurnInput(account_id=ACCOUNT, conversation_id="conv_2", text="Hello")
    )
    event = _event()
    await desk.runtime.server_event(event, signature=_signed(event))
    before = await _rows(desk)
    elsewhere = _event(conversation_id="conv_2")

    with pytest.raises(IdempotencyKeyReused):
        await desk.runtime.server_event(elsewhere, signature=_signed(elsewhere))

    assert await _rows(desk) == before
    assert len(await desk.stores.conversations.list_turns(ACCOUNT, "conv_2")) == 1
