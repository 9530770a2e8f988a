"""In-process chaos: seeded random conversations (text turns, clicks, double clicks, stale clicks)
with a fault at a random crossing of one fault point, then recovery, on every backend.

After every conversation: no effect applied twice (counted by idempotency key in the sample
domain), no receipt without a committed event, no card shown that is not stored, every turn
delivered, failed or interrupted, no card left `resolving`, a client's retry never told
"in progress" once recovery ran, and every returned turn reloads equal. Run with `-s` for the
counts.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from typing import Any

import pytest

from turnframe_core import (
    AssistantTurn,
    Brief,
    CaseKey,
    InteractionBlock,
    InteractionResponse,
    InteractionStatus,
    ReceiptBlock,
    TurnInput,
    TurnPhase,
    TurnStatus,
    Understanding,
    verify_chain,
)
from turnframe_runtime import RuntimeConfig, TurnFailed, TurnInProgress
from turnframe_store import FaultPoint, JournalStatus, NotFound, StoreError
from turnframe_test import DeskHarness, ScriptedReviewer, understanding
from turnframe_test.domains.travel import ProcessCrash
from turnframe_test.sayings import SAYINGS

pytestmark = pytest.mark.slow

CONVERSATIONS = 50
#: the store's fault points a turn crosses today (the outbox's are crossed by its relay: #13)
TURN_POINTS = [
    FaultPoint.BEFORE_JOURNAL_INSERT,
    FaultPoint.AFTER_JOURNAL_INSERT_BEFORE_COMMIT,
    FaultPoint.AFTER_COMMIT_BEFORE_EVENT_READBACK,
    FaultPoint.AFTER_INTERACTION_PERSISTENCE,
    FaultPoint.BEFORE_RESPONSE_PERSISTENCE,
]
POINTS = [*(p.value for p in TURN_POINTS), "after_remote_request"]


async def _interpret(brief: Brief) -> Understanding:
    """The interpreter of these conversations: each saying means one act (a function of the
    words, so a turn that failed before asking leaves nothing queued for the next)."""
    return understanding(SAYINGS[brief.text or ""])


class _Narrator:
    async def transition(self, request: Any) -> dict[str, Any]:
        return {"kind": "transition", "text": "Here is where things stand.", "facts_used": []}

    async def answer(self, request: Any) -> Any:
        raise AssertionError("no questions here")


class _Chaos:
    """One backend's run of every conversation for one fault point, and its tallies."""

    def __init__(self, desk: DeskHarness, point: str, rng: random.Random) -> None:
        self.desk = desk
        self.point = point
        self.rng = rng
        self.returned: dict[str, AssistantTurn] = {}
        self.requests: dict[str, TurnInput] = {}
        self.counts: Counter[str] = Counter()
        self.violations: list[str] = []
        self.pending_remote = -1
        self.remote_armed = 0

    def check(self, holds: bool, what: str) -> None:
        self.counts["invariant checks"] += 1
        if not holds:
            self.violations.append(f"{self.point}: {what}")

    def arm(self) -> None:
        """A fault at a random crossing of this conversation's point."""
        if self.point == "after_remote_request":
            self.pending_remote = self.rng.randrange(4)
            return
        skip = self.rng.randrange(4)
        self.desk.stores.faults.arm(FaultPoint(self.point), skip=skip)

    async def run(self, request: TurnInput) -> None:
        if self.point == "after_remote_request" and self.pending_remote == 0:
            error: BaseException = self.rng.choice([ProcessCrash(), RuntimeError("lost")])
            self.desk.executor.arm_after_remote_request(error)
            self.remote_armed += 1
        self.pending_remote -= 1
        self.requests[request.turn_id or ""] = request
        self.desk.clock.advance(1_000)
        try:
            turn = await self.desk.runtime.handle_turn(request)
        except (StoreError, ProcessCrash) as fault:
            self.counts["turns that raised"] += 1
            self.counts[type(fault).__name__] += 1
            await self.recover_and_retry(request)
            return
        await self.returned_turn(turn)

    async def returned_turn(self, turn: AssistantTurn) -> None:
        """A reply as it reaches the user: every card it shows is stored already."""
        self.returned[turn.turn_id] = turn
        for block in turn.blocks:
            if isinstance(block, InteractionBlock):
                try:
                    await self.desk.stores.interactions.get("acct_1", block.interaction_id)
                    stored = True
                except NotFound:
                    stored = False
                self.check(stored, f"{turn.turn_id} shows a card not stored when it returned")

    async def recover_and_retry(self, request: TurnInput) -> None:
        """The process restarts: recovery, then the client sends the same request again."""
        await self.desk.runtime.recover_unfinished()
        try:
            turn = await self.desk.runtime.handle_turn(request)
        except TurnInProgress:
            self.check(False, f"{request.turn_id} still in progress after recovery")
            return
        except TurnFailed:
            return  # it ended before any effect; a new turn id would run it
        await self.returned_turn(turn)

    def card(self) -> InteractionBlock | None:
        for turn in reversed(list(self.returned.values())):
            if turn.conversation_id != self.desk.conversation_id:
                continue
            cards = [b for b in turn.blocks if isinstance(b, InteractionBlock)]
            if cards:
                return cards[0]
        return None

    def click(self, card: InteractionBlock, turn_id: str, option: str | None = None) -> TurnInput:
        return TurnInput(
            account_id="acct_1",
            conversation_id=self.desk.conversation_id,
            turn_id=turn_id,
            interaction_response=InteractionResponse(
                interaction_id=card.interaction_id,
                option_id=option or card.options[0].option_id,
                expected_case_revision=card.case_revision,
            ),
        )

    async def conversation(self, n: int) -> None:
        desk, rng = self.desk, self.rng
        desk.conversation_id = f"conv_{n}"
        desk.ready_trip(f"T-{n}")
        narrated = rng.random() < 0.5  # half the conversations store the reply after the commit
        desk.narrator = _Narrator() if narrated else None
        desk.reviewer = ScriptedReviewer.passing() if narrated else None
        desk.use_stores(desk.stores)  # the same stores, a runtime with (or without) narration
        self.arm()
        stale: InteractionBlock | None = None
        for step in range(rng.randrange(3, 7)):
            turn_id = f"turn_{n}_{step}"
            card = self.card()
            kind = rng.choice(["say", "say", "click", "double", "stale"])
            if kind == "say" or (card is None and kind != "stale"):
                words = rng.choice(list(SAYINGS))
                await self.run(TurnInput(account_id="acct_1", conversation_id=desk.conversation_id,
                                         text=words, turn_id=turn_id))  # fmt: skip
            elif kind == "click" and card is not None:
                await self.run(self.click(card, turn_id))
                stale = card
            elif kind == "double" and card is not None:
                await asyncio.gather(
                    self.run(self.click(card, turn_id)), self.run(self.click(card, turn_id + "b"))
                )
                stale = card
            elif stale is not None:
                await self.run(self.click(stale, turn_id))
        desk.stores.faults.clear()
        self.remote_armed -= desk.executor.disarm()  # armed, but no batch took effect after
        await desk.runtime.recover_unfinished()
        await self.verify()

    async def verify(self) -> None:
        desk = self.desk
        stores, account, conversation = desk.stores, "acct_1", desk.conversation_id
        self.check(
            all(count == 1 for count in desk.executor.applied.values()),
            "an effect applied twice",
        )
        ledger = {e.event_id for e in await desk.events()}
        records = await stores.replay.for_conversation(account, conversation)
        self.check(verify_chain(records) == [], f"{conversation}'s replay chain breaks")
        entries = []
        for record in await stores.conversations.list_turns(account, conversation):
            entries.extend(await stores.journal.for_turn(account, record.turn_id))
        for record in await stores.conversations.list_turns(account, conversation):
            marker = await stores.conversations.get_phase(account, record.turn_id)
            self.check(
                marker.phase in (TurnPhase.DELIVERED, TurnPhase.FAILED),
                f"{record.turn_id} left {marker.phase.value}",
            )
            try:
                turn = await stores.conversations.get_assistant_turn(account, record.turn_id)
            except NotFound:
                self.check(marker.phase is TurnPhase.FAILED, f"{record.turn_id} has no reply")
                continue
            self.check(
                turn.status in (TurnStatus.COMPLETED, TurnStatus.INTERRUPTED),
                f"{record.turn_id} is {turn.status.value}",
            )
            for block in turn.blocks:
                if isinstance(block, ReceiptBlock):
                    self.check(set(block.event_ids) <= ledger, f"{record.turn_id} cites an event")
                elif isinstance(block, InteractionBlock):
                    try:
                        await stores.interactions.get(account, block.interaction_id)
                        stored = True
                    except NotFound:
                        stored = False
                    self.check(stored, f"{record.turn_id} shows a card never stored")
            if record.turn_id in self.returned:
                self.check(self.returned[record.turn_id] == turn, f"{record.turn_id} reloads")
        case = CaseKey(workflow="trip", case_id=f"T-{conversation.removeprefix('conv_')}")
        for card in await stores.interactions.for_case(account, case):
            self.check(
                card.status is not InteractionStatus.RESOLVING, f"{card.interaction_id} resolving"
            )
            # A card says what its commands did: resolved only if one of them committed, and
            # answerable again only if none did.
            committed = any(
                getattr(e.origin, "interaction_id", None) == card.interaction_id
                and e.status is JournalStatus.COMMITTED
                for e in entries
            )
            if card.status is InteractionStatus.RESOLVED:
                self.check(committed, f"{card.interaction_id} resolved with nothing committed")
            elif card.status is InteractionStatus.ACTIVE:
                self.check(not committed, f"{card.interaction_id} open after its command ran")


@pytest.mark.parametrize("point", POINTS)
async def test_every_interrupted_conversation_is_finished_and_keeps_every_invariant(
    make_desk, store_backend, point: str
) -> None:
    rng = random.Random(f"{point}-{store_backend.name}")
    desk: DeskHarness = await make_desk(config=RuntimeConfig(locales=("en", "it")))
    desk.interpreter.understand = _interpret  # type: ignore[method-assign]
    chaos = _Chaos(desk, point, rng)
    for n in range(CONVERSATIONS):
        await chaos.conversation(n)
    chaos.counts["faults fired"] = len(desk.stores.faults.fired) + chaos.remote_armed
    print(
        f"\nchaos {store_backend.name} {point}: conversations {CONVERSATIONS}, "
        f"faults fired {chaos.counts['faults fired']}, turns that raised "
        f"{chaos.counts['turns that raised']}, "
        f"invariant checks {chaos.counts['invariant checks']}, "
        f"violations {len(chaos.violations)}"
    )
    assert chaos.violations == []
    assert chaos.counts["faults fired"] > 0
