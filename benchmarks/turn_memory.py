"""Per-turn latency of the whole pipeline on MemoryStores with scripted ports.

Rows:
- click-only turn: a click on a rebooking card (journal, executor, commit bundle with an outbox
  row, receipt read back, re-projection, stored turn);
- text turn: two acts and one question (interpreter scripted, narrator off);
- baseline (same run): the store writes a click turn makes, called directly, without the pipeline;
  the ratio says what the pipeline adds on top of its own writes.

Run: `.venv/bin/python benchmarks/turn_memory.py [--turns N] [--telemetry none|api|sdk]`
(`none` is what a process without the `otel` extra pays for tracing: nothing).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from turnframe_core import (
    CommittedOutcome,
    InteractionBlock,
    InteractionResponse,
    TurnInput,
    TurnPhase,
)
from turnframe_store import CommitBundle, JournalCompletion, JournalEntry, UserTurnRecord
from turnframe_test.builders import envelope, event
from turnframe_test.sample.desk import DeskHarness
from turnframe_test.understandings import act, question, understanding


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p50 = statistics.median(ordered)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return p50, p99


async def click_turns(count: int) -> list[float]:
    desk = DeskHarness()
    cards: list[tuple[str, InteractionBlock]] = []
    for i in range(count):  # untimed: one trip and one open rebooking card per conversation
        conversation = f"conv_c{i}"
        desk.desk.open_trip(
            "acct_1",
            f"T-{i}",
            f"Trip {i}",
            conversation_id=conversation,
            name="Ada Lovelace",
            email="ada@example.com",
        )
        desk.interpreter.then(
            understanding(act("a1", "trip.request_rebooking", "h1", "rebook", leg="outbound"))
        )
        turn = await desk.runtime.handle_turn(
            TurnInput(account_id="acct_1", conversation_id=conversation, text="rebook")
        )
        cards.append((conversation, desk.card(turn)))
    samples = []
    for conversation, card in cards:
        turn_input = TurnInput(
            account_id="acct_1",
            conversation_id=conversation,
            interaction_response=InteractionResponse(
                interaction_id=card.interaction_id,
                option_id="opt_rebook",
                expected_case_revision=card.case_revision,
            ),
        )
        started = time.perf_counter()
        await desk.runtime.handle_turn(turn_input)
        samples.append(time.perf_counter() - started)
    assert desk.interpreter.calls == count  # the clicks made no model call
    return samples


async def text_turns(count: int) -> list[float]:
    desk = DeskHarness()
    for i in range(count):
        desk.desk.open_trip("acct_1", f"T-{i}", f"Trip {i}", conversation_id=f"conv_t{i}")
    samples = []
    text = "I'm Ada Lovelace, email ada@example.com. When do I fly?"
    for i in range(count):
        desk.interpreter.then(
            understanding(
                act("a1", "trip.set_name", "h1", "Ada Lovelace", name="Ada Lovelace"),
                act("a2", "trip.set_email", "h1", "ada@example.com", email="ada@example.com"),
                question("q1", "When do I fly?", "h1"),
            )
        )
        turn_input = TurnInput(account_id="acct_1", conversation_id=f"conv_t{i}", text=text)
        started = time.perf_counter()
        await desk.runtime.handle_turn(turn_input)
        samples.append(time.perf_counter() - started)
    return samples


async def store_floor(count: int) -> list[float]:
    """The writes of a click turn, straight to the store: no pipeline around them."""
    desk = DeskHarness()
    stores = desk.stores
    samples = []
    for i in range(count):
        conversation, turn_id = f"conv_f{i}", f"turn_f{i}"
        env = envelope(command_id=f"cmd_f{i}", turn_id=turn_id)
        ev = event(f"evt_f{i}", command_id=env.command_id)
        started = time.perf_counter()
        await stores.conversations.ensure_conversation("acct_1", conversation)
        await stores.conversations.append_user_turn(
            UserTurnRecord(
                account_id="acct_1",
                conversation_id=conversation,
                turn_id=turn_id,
                received_at=1,
                input=TurnInput(account_id="acct_1", conversation_id=conversation, text="x"),
            )
        )
        await stores.journal.begin(JournalEntry.from_envelope(env, now=1))
        await stores.journal.mark_executing("acct_1", env.command_id)
        await stores.commits.commit(
            CommitBundle(
                account_id="acct_1",
                conversation_id=conversation,
                turn_id=turn_id,
                journal_completions=(
                    JournalCompletion(
                        command_id=env.command_id,
                        outcome=CommittedOutcome(new_revision=2, event_ids=(ev.event_id,)),
                    ),
                ),
                events=(ev,),
                phase=TurnPhase.COMMITTED,
            )
        )
        await stores.events.get_by_ids("acct_1", [ev.event_id])
        samples.append(time.perf_counter() - started)
    return samples


def _telemetry(mode: str) -> None:
    """`none`: as without the `otel` extra (every call a no-op); `api`: the OpenTelemetry API
    with no SDK installed (what an application that configures nothing pays); `sdk`: the SDK
    recording every span and metric into memory (an application that exports everything)."""
    from turnframe_runtime import observe

    if mode == "none":
        observe._tracer = observe._meter = observe._trace = None
        observe.ENABLED = False
    elif mode == "sdk":
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
        trace.set_tracer_provider(provider)
        metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument(
        "--telemetry",
        choices=("none", "api", "sdk"),
        default="api",
        help="none: as without the otel extra; api: the API, no SDK; sdk: everything recorded",
    )
    args = parser.parse_args()
    _telemetry(args.telemetry)
    floor = asyncio.run(store_floor(args.turns))
    clicks = asyncio.run(click_turns(args.turns))
    texts = asyncio.run(text_turns(args.turns))
    f50, _f99 = _percentiles(floor)
    print(f"{'row':<44}{'p50 ms':>10}{'p99 ms':>10}{'p50 / floor':>14}")
    for name, samples in (
        ("store writes of a click turn (floor)", floor),
        ("click-only turn", clicks),
        ("text turn: two acts and a question", texts),
    ):
        p50, p99 = _percentiles(samples)
        print(f"{name:<44}{p50 * 1e3:>10.3f}{p99 * 1e3:>10.3f}{p50 / f50:>14.1f}")
    print(f"({args.turns} turns per row; telemetry: {args.telemetry})")


if __name__ == "__main__":
    main()
