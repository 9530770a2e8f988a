"""`turnframe demo`: a scripted travel-desk conversation, printed turn by turn.

The interpreter is scripted (no model needed); everything else is the real runtime: reduction,
policy, cards persisted before they are shown, journal, executor, the commit bundle, receipts read
back from the ledger, the claim guard and the stored turn.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TextIO

from turnframe_core import AssistantTurn
from turnframe_core.blocks import (
    AnswerBlock,
    InteractionBlock,
    NoticeBlock,
    ReceiptBlock,
    TransitionBlock,
)
from turnframe_test.harness import DeskHarness
from turnframe_test.understandings import act, question

__all__ = ["register", "run_demo"]


def register(commands: Any) -> None:
    parser = commands.add_parser("demo", help="run a scripted travel-desk conversation")
    parser.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    asyncio.run(run_demo(sys.stdout))
    return 0


def _print_turn(out: TextIO, number: int, said: str, turn: AssistantTurn) -> None:
    out.write(f"\n── turn {number} ─ user: {said}\n")
    for block in turn.blocks:
        author = block.author if hasattr(block, "author") else "?"
        if isinstance(block, AnswerBlock | TransitionBlock) and block.copy_ref is not None:
            author = "server copy"
        if isinstance(block, ReceiptBlock):
            out.write(f"  [receipt · {author}] {block.title}\n")
            out.write(f"      status {block.status_code}; events {', '.join(block.event_ids)}\n")
        elif isinstance(block, NoticeBlock):
            out.write(f"  [notice · {author}] {block.text}  ({block.code})\n")
        elif isinstance(block, AnswerBlock):
            out.write(f"  [answer · {author}] {block.text}  ({block.status.value})\n")
        elif isinstance(block, TransitionBlock):
            out.write(f"  [transition · {author}] {block.text}\n")
        elif isinstance(block, InteractionBlock):
            options = " | ".join(f"{o.label} ({o.option_id})" for o in block.options)
            out.write(f"  [card · {author}] {block.title}  → {options}\n")
            out.write(
                f"      {block.interaction_kind.value}, bound to revision {block.case_revision}\n"
            )
        else:
            out.write(f"  [{block.kind} · {author}]\n")
    out.write(f"  replay token {turn.replay_token}\n")


async def run_demo(out: TextIO) -> list[AssistantTurn]:
    """Run the scripted conversation, print every turn, return the turns."""
    desk = DeskHarness()
    desk.trip("T-100", "Rome trip")
    turns: list[AssistantTurn] = []
    number = 0

    async def step(said: str, action: Callable[[], Awaitable[AssistantTurn]]) -> AssistantTurn:
        nonlocal number
        number += 1
        turn = await action()
        _print_turn(out, number, said, turn)
        turns.append(turn)
        return turn

    text = "I'm Ada Lovelace, my email is ada@example.com. Which flights do I have?"
    await step(
        text,
        lambda: desk.say(
            text,
            act("a1", "trip.set_name", "h1", "Ada Lovelace", name="Ada Lovelace"),
            act("a2", "trip.set_email", "h1", "ada@example.com", email="ada@example.com"),
            question("q1", "Which flights do I have?", "h1"),
        ),
    )
    text = "Please rebook my outbound flight."
    asked = await step(
        text,
        lambda: desk.say(
            text, act("a1", "trip.request_rebooking", "h1", "rebook my outbound", leg="outbound")
        ),
    )
    card = desk.card(asked)
    await step("(clicks “Rebook”)", lambda: desk.click(card, "opt_rebook"))
    await step("(clicks “Rebook” on the same card again)", lambda: desk.click(card, "opt_rebook"))
    text = "Rebook the return flight as well."
    asked = await step(
        text,
        lambda: desk.say(
            text, act("a1", "trip.request_rebooking", "h1", "Rebook the return", leg="return")
        ),
    )
    stale = desk.card(asked)
    text = "I travel on 2027-03-14."
    await step(
        text,
        lambda: desk.say(
            text, act("a1", "trip.set_travel_date", "h1", "2027-03-14", travel_date="2027-03-14")
        ),
    )
    await step(
        "(clicks “Rebook” on the return-flight card shown before the edit)",
        lambda: desk.click(stale, "opt_rebook"),
    )
    text = "Rebook the outbound flight again."
    await step(
        text,
        lambda: desk.say(
            text, act("a1", "trip.request_rebooking", "h1", "Rebook the outbound", leg="outbound")
        ),
    )
    text = "What do you have on file for my trip?"
    await step(text, lambda: desk.say(text, question("q1", text, "h1")))
    reloaded = await desk.runtime.load_turn(desk.account_id, turns[0].turn_id)
    same = reloaded.to_stored_json() == turns[0].to_stored_json()
    out.write(f"\nReloaded turn 1 from the store: {'identical' if same else 'DIFFERENT'} blocks.\n")
    return turns
