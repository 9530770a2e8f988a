"""A case found by what the user names (decision 0033): a workflow declares the records a user
may name, the model proposes "the user named record X", the runtime checks its form, counts it
against the conversation's bound, finds it in the account and authorizes it. Another account's
record and a record that does not exist answer alike; nothing of a case's state reaches a
brief."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turnframe_core import (
    Brief,
    CaseKey,
    NameableRecord,
    TurnInput,
    Understanding,
    UnderstandingRejected,
    codes,
    named_record,
    understanding_of,
)
from turnframe_core.understanding import OfferedRecord, validate_understanding
from turnframe_runtime import RuntimeConfig
from turnframe_runtime.cases import CaseBook
from turnframe_runtime.lookup import CaseLookups, LookedUp, LookupLimiter
from turnframe_runtime.models import understanding_schema
from turnframe_runtime.ports import CaseCandidate
from turnframe_test.harness import DeskHarness
from turnframe_test.sample.travel import TRIP, TripDesk, TripDirectory, TripWorkflow
from turnframe_test.scripted import ScriptedInterpreter
from turnframe_test.understandings import act

NAME = "trip.set_name"
BOOKING = "booking_reference"


class NamedTrips(TripWorkflow):
    """Trips a user may name by their booking reference (BK- and four digits)."""

    def nameable(self) -> Sequence[NameableRecord]:
        return (NameableRecord(record=BOOKING, pattern=r"BK-[0-9]{4}", max_length=16),)


class LeakyDirectory(TripDirectory):
    """Finds a label in every account, as a careless directory might: only `authorize` keeps
    the accounts apart. Records what it was asked."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.asked: list[tuple[str, str]] = []

    async def find(self, account_id: str, workflow: str, name: str) -> Sequence[CaseCandidate]:
        self.asked.append(("find", name))
        return [
            CaseCandidate(case=CaseKey(workflow=TRIP, case_id=trip.trip_id), label=name)
            for trip in self.desk.trips.values()
            if trip.state["label"] == name
        ]

    async def authorize(self, account_id: str, case: CaseKey) -> bool:
        self.asked.append(("authorize", case.case_id))
        return await super().authorize(account_id, case)


MakeDesk = Callable[..., Awaitable[DeskHarness]]


def _asked(desk: DeskHarness) -> list[tuple[str, str]]:
    return cast(LeakyDirectory, desk.directory).asked


@pytest.fixture
async def named(make_desk: MakeDesk) -> DeskHarness:
    """A desk whose trips may be named by booking reference: Ada's BK-4821 (not yet in this
    conversation) and another account's BK-7777."""
    desk = await make_desk(workflow=NamedTrips())
    desk.directory = LeakyDirectory(desk.desk)
    desk.restart()
    desk.desk.open_trip(desk.account_id, "T-200", "BK-4821", name="Ada Lovelace")
    desk.desk.open_trip(desk.account_id, "T-201", "Rome trip", email="ada@example.com")
    desk.desk.open_trip("acct_2", "T-300", "BK-7777", email="eve@example.com")
    return desk


async def _say(desk: DeskHarness, text: str, *steps: Any) -> Any:
    """The user writes `text`; the interpreter answers each call with the next of `steps`."""
    for step in steps:
        cast(ScriptedInterpreter, desk.interpreter).then(step)
    desk.clock.advance(1_000)
    return await desk.runtime.handle_turn(
        TurnInput(account_id=desk.account_id, conversation_id=desk.conversation_id, text=text)
    )


def _briefs(desk: DeskHarness) -> list[Brief]:
    return cast(ScriptedInterpreter, desk.interpreter).briefs


def _handle_of(brief: Brief, label: str) -> str:
    [handle] = [offered.handle for offered in brief.handles if offered.label == label]
    return handle


def _shown(turn: Any) -> list[tuple[str, str | None, str]]:
    """What a reply shows, without its ids."""
    return [(b.kind, getattr(b, "code", None), b.text) for b in turn.blocks]


async def _nothing_written(desk: DeskHarness, turn: Any) -> None:
    assert await desk.events() == []
    assert await desk.journal(turn) == ()
    assert not any(b.kind == "interaction" for b in turn.blocks)


async def test_a_record_named_in_the_users_own_account_is_found_and_acted_on(
    named: DeskHarness,
) -> None:
    text = "Booking BK-4821: the name is Grace Hopper"
    turn = await _say(
        named,
        text,
        understanding_of(named_record(BOOKING, "BK-4821")),
        lambda brief: understanding_of(
            act("a1", NAME, _handle_of(brief, "BK-4821"), "Grace Hopper", name="Grace Hopper")
        ),
    )
    first, second = _briefs(named)
    assert first.records == (OfferedRecord(record=BOOKING, workflow=TRIP),)
    assert "BK-4821" not in [h.label for h in first.handles]
    assert second.records == ()  # no second round of lookups
    assert named.receipt_codes(turn) == ["trip.name_set"]
    trip = named.desk.trip(named.account_id, "T-200")
    assert trip is not None and trip.state["name"] == "Grace Hopper"


async def test_another_accounts_record_and_a_missing_one_answer_identically(
    named: DeskHarness,
) -> None:
    foreign = await _say(
        named, "What about BK-7777?", understanding_of(named_record(BOOKING, "BK-7777"))
    )
    asked_foreign = list(_asked(named))
    _asked(named).clear()
    missing = await _say(
        named, "What about BK-0000?", understanding_of(named_record(BOOKING, "BK-0000"))
    )

    assert _shown(foreign) == _shown(missing)
    assert named.notice_codes(foreign) == [codes.CASE_LOOKUP_NOT_FOUND]
    assert "There is no such record here." in named.texts(foreign)
    assert len(_briefs(named)) == 2  # one call per turn: nothing found, nothing re-read
    assert asked_foreign == [("find", "BK-7777"), ("authorize", "T-300")]
    assert _asked(named) == [("find", "BK-0000")]
    for turn in (foreign, missing):
        await _nothing_written(named, turn)
        assert "eve@example.com" not in named.texts(turn) and "T-300" not in named.texts(turn)


async def test_a_malformed_reference_is_refused_by_its_code_before_any_lookup(
    named: DeskHarness,
) -> None:
    turn = await _say(
        named, "Booking BK-12 please", understanding_of(named_record(BOOKING, "BK-12"))
    )

    assert named.notice_codes(turn) == [codes.CASE_LOOKUP_MALFORMED_REFERENCE]
    assert "does not have the form" in named.texts(turn)
    assert _asked(named) == []
    await _nothing_written(named, turn)


async def test_lookups_past_the_conversations_bound_are_refused_until_the_window_passes(
    make_desk: MakeDesk,
) -> None:
    config = RuntimeConfig(
        locales=("en", "it", "de"), lookups_per_conversation=2, lookup_window_ms=60_000
    )
    desk = await make_desk(workflow=NamedTrips(), config=config)
    desk.directory = LeakyDirectory(desk.desk)
    desk.restart()
    said = [
        await _say(
            desk, f"Is BK-000{n} mine?", understanding_of(named_record(BOOKING, f"BK-000{n}"))
        )
        for n in range(3)
    ]

    assert [desk.notice_codes(t) for t in said] == [
        [codes.CASE_LOOKUP_NOT_FOUND],
        [codes.CASE_LOOKUP_NOT_FOUND],
        [codes.CASE_LOOKUP_RATE_LIMITED],
    ]
    assert "Too many records were looked up" in desk.texts(said[-1])
    assert _asked(desk) == [("find", "BK-0000"), ("find", "BK-0001")]
    await _nothing_written(desk, said[-1])
    desk.clock.advance(60_000)
    later = await _say(desk, "And BK-0003?", understanding_of(named_record(BOOKING, "BK-0003")))
    assert desk.notice_codes(later) == [codes.CASE_LOOKUP_NOT_FOUND]


async def test_a_brief_shows_a_found_case_by_handle_and_label_and_nothing_of_its_state(
    named: DeskHarness,
) -> None:
    named.desk.touch(named.account_id, "T-200", email="ada@example.com", travel_date="2027-03-14")
    await _say(
        named,
        "Open BK-4821",
        understanding_of(named_record(BOOKING, "BK-4821")),
        Understanding(),
    )

    found = _briefs(named)[-1]
    [offered] = [h for h in found.handles if h.label == "BK-4821"]
    assert offered.workflow == TRIP
    for brief in _briefs(named):
        shown = brief.model_dump_json()
        for secret in ("ada@example.com", "Ada Lovelace", "2027-03-14", "T-200", "T-201"):
            assert secret not in shown


def _brief(text: str, *records: OfferedRecord) -> Brief:
    return Brief(text=text, locale="en", records=records)


def test_an_understanding_naming_a_kind_of_record_the_brief_did_not_offer_is_rejected() -> None:
    with pytest.raises(UnderstandingRejected) as rejected:
        validate_understanding(
            understanding_of(named_record("order_number", "BK-4821")), _brief("BK-4821")
        )
    assert [p.code for p in rejected.value.problems] == [codes.UNDERSTANDING_UNKNOWN_RECORD]


def test_a_named_reference_must_be_words_the_user_wrote() -> None:
    offered = OfferedRecord(record=BOOKING, workflow=TRIP)
    named_elsewhere = named_record(BOOKING, "BK-9999", quote="my booking")
    with pytest.raises(UnderstandingRejected) as rejected:
        validate_understanding(understanding_of(named_elsewhere), _brief("my booking", offered))
    assert [(p.code, p.path) for p in rejected.value.problems] == [
        (codes.UNDERSTANDING_VALUE_NOT_GROUNDED, "lookups[0].reference")
    ]


def test_a_nameable_record_accepts_only_references_of_its_form_and_length() -> None:
    record = NameableRecord(record=BOOKING, pattern=r"BK-[0-9]+", max_length=8)
    assert record.accepts("BK-4821")
    assert not record.accepts("BK-4821x")  # matched whole
    assert not record.accepts("BK-123456")  # longer than its bound
    with pytest.raises(ValueError, match="regular expression"):
        NameableRecord(record=BOOKING, pattern="BK-[")


def test_a_kind_of_record_two_workflows_declare_is_refused() -> None:
    class OtherTrips(NamedTrips):
        key = "other_trip"

    with pytest.raises(ValueError, match="one workflow"):
        CaseLookups.build([NamedTrips(), OtherTrips()], 10, 60_000)


def test_the_limiter_counts_per_conversation_and_forgets_what_left_its_window() -> None:
    limiter = LookupLimiter(bound=1, window_ms=1_000)
    assert limiter.admit("acct_1", "conv_1", now=0)
    assert not limiter.admit("acct_1", "conv_1", now=999)
    assert limiter.admit("acct_1", "conv_2", now=999)  # another conversation has its own
    assert limiter.admit("acct_1", "conv_1", now=1_000)


def test_the_model_is_offered_lookups_only_of_the_kinds_the_brief_offers() -> None:
    assert "lookups" not in understanding_schema(_brief("hi"))["properties"]
    schema = understanding_schema(_brief("hi", OfferedRecord(record=BOOKING, workflow=TRIP)))
    record = schema["properties"]["lookups"]["items"]["properties"]["record"]
    assert record == {"type": "string", "enum": [BOOKING]}


async def _look_up_as_acct_1(desk: TripDesk, reference: str) -> tuple[LookedUp, list[str]]:
    directory = LeakyDirectory(desk)
    lookups = CaseLookups.build([NamedTrips()], 10, 60_000)
    cases = CaseBook(directory, {TRIP: NamedTrips()}, "acct_1")
    named = named_record(BOOKING, reference)
    looked = await lookups.look_up(cases, "acct_1", "conv_1", [named], now=0)
    return looked, [call for call, _ in directory.asked]


@settings(max_examples=60, deadline=None)
@given(
    st.one_of(
        st.from_regex(r"BK-[0-9]{4}", fullmatch=True),
        st.text(min_size=1, max_size=24).filter(str.strip),
    )
)
async def test_any_reference_to_another_accounts_record_answers_as_one_to_no_record(
    reference: str,
) -> None:
    foreign_desk = TripDesk()
    foreign_desk.open_trip("acct_2", "T-300", reference)
    foreign, asked_foreign = await _look_up_as_acct_1(foreign_desk, reference)
    missing, asked_missing = await _look_up_as_acct_1(TripDesk(), reference)

    assert foreign == missing and foreign.found == ()
    assert len(foreign.noticed.notices) == 1
    well_formed = NamedTrips().nameable()[0].accepts(reference)
    assert asked_missing == (["find"] if well_formed else [])
    assert asked_foreign == (["find", "authorize"] if well_formed else [])
