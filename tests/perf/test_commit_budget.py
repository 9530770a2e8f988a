"""A turn's durable points, counted by PostgreSQL itself: a click-only turn commits at most three
times and a text turn at most four, reads included (decision 0006)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from turnframe_core import AssistantTurn, InteractionBlock
from turnframe_store import ManualClock, SqlStores
from turnframe_test import DeskHarness, act, question
from turnframe_test.postgres import PrivateDatabase

REBOOK = "trip.request_rebooking"


async def _commits_of(
    db: PrivateDatabase,
    desk: DeskHarness,
    clock: ManualClock,
    turn: Callable[[], Awaitable[AssistantTurn]],
) -> tuple[int, AssistantTurn]:
    """The commits the server counts for one turn, run on stores opened just for it."""
    await desk.stores.aclose()
    before = await db.commits()
    desk.use_stores(await SqlStores.connect(db.url, clock=clock))
    done = await turn()
    await desk.stores.aclose()
    return await db.commits() - before, done


async def _desk(db: PrivateDatabase) -> tuple[DeskHarness, ManualClock]:
    clock = ManualClock()
    stores = await SqlStores.connect(db.url, clock=clock)
    await stores.migrate()
    desk = DeskHarness(stores=stores, clock=clock)
    desk.ready_trip()
    return desk, clock


async def test_a_click_only_turn_commits_at_most_three_times(postgres_url: str) -> None:
    async with PrivateDatabase(postgres_url) as db:
        desk, clock = await _desk(db)
        asked = await desk.say("Rebook", act("a1", REBOOK, "h1", "Rebook", leg="outbound"))
        card: InteractionBlock = desk.card(asked)

        commits, clicked = await _commits_of(
            db, desk, clock, lambda: desk.click(card, "opt_rebook")
        )

        assert desk.receipt_codes(clicked) == ["trip.rebooking_sent"]  # it did the real work
        assert commits <= 3, commits


async def test_a_text_turn_commits_at_most_four_times(postgres_url: str) -> None:
    async with PrivateDatabase(postgres_url) as db:
        desk, clock = await _desk(db)

        async def text_turn() -> AssistantTurn:
            return await desk.say(
                "I'm Grace Hopper, rebook the outbound. When do I fly?",
                act("a1", "trip.set_name", "h1", "Grace Hopper", name="Grace Hopper"),
                act("a2", REBOOK, "h1", "rebook the outbound", leg="outbound"),
                question("q1", "When do I fly?", "h1"),
            )

        commits, turn = await _commits_of(db, desk, clock, text_turn)

        assert desk.receipt_codes(turn) == ["trip.name_set", "trip.rebooking_requested"]
        assert "interaction" in desk.kinds(turn)
        assert commits <= 4, commits
