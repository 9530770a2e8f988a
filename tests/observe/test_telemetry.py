"""What an operator sees of turns: a span per turn with a child per pipeline stage, model call
and store transaction; the safety metrics; log records with the turn's id and replay token; and
nothing that a user wrote or a model said (checked for every test with a desk: tests/conftest.py)
nor a secret."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace

from turnframe_core import TurnInput, codes
from turnframe_runtime import OutboxConfig, OutboxWorker, connect_broker, observe
from turnframe_store import SqlStores, Unavailable
from turnframe_test.demo import EMBEDDED, run_demo
from turnframe_test.domains.travel import TripWorkflow
from turnframe_test.harness import DeskHarness
from turnframe_test.postgres import PrivateDatabase
from turnframe_test.telemetry_kit import TelemetryLeak, captured_telemetry
from turnframe_test.understandings import act, question

TELEMETRY = captured_telemetry()
NAME = act("a1", "trip.set_name", "h1", "Grace Hopper", name="Grace Hopper")
REBOOK = act("a1", "trip.request_rebooking", "h1", "Rebook my outbound", leg="outbound")


def _points(name: str) -> list[tuple[dict, int]]:
    return [(attrs, value) for metric, attrs, value in TELEMETRY.metric_points() if metric == name]


async def test_a_turn_is_a_span_with_a_child_per_stage_model_call_and_transaction(desk) -> None:
    desk.ready_trip()
    turn = await desk.say("My name is Grace Hopper. What do you have?", NAME,
                          question("q1", "What do you have?", "h1"))  # fmt: skip
    spans = TELEMETRY.finished_spans()
    [root] = [s for s in spans if s.name == "turnframe.turn"]
    assert root.attributes["turnframe.turn_id"] == turn.turn_id
    assert root.attributes["turnframe.replay_token"] == turn.replay_token
    children = {s.name for s in spans if s.parent and s.parent.span_id == root.context.span_id}
    assert {
        "turnframe.stage D-F load",
        "turnframe.stage A-C accept",
        "turnframe.stage G understand",
        "turnframe.stage J-K reduce",
        "turnframe.stage L start",
        "turnframe.stage M execute",
        "turnframe.stage N-P commit",
    } <= children
    names = [s.name for s in spans]
    assert "turnframe.model.understand" in names
    assert names.count("turnframe.store.transaction") >= 3  # a text turn's durable points
    assert all(s.context.trace_id == root.context.trace_id for s in spans)


async def test_the_safety_metrics_count_what_the_turns_did(desk) -> None:
    desk.ready_trip()
    await desk.say("Grace Hopper", NAME)
    asked = await desk.say("Rebook my outbound", REBOOK)
    card = desk.card(asked)
    await desk.click(card, "opt_keep")
    await desk.click(card, "opt_keep")  # the card is closed now
    await desk.say("R2D2", act("a1", "trip.set_name", "h1", "R2D2", name="R2D2"))  # refused

    assert sum(v for _, v in _points("turnframe.turn.received")) == 5
    assert sum(v for _, v in _points("turnframe.turn.completed")) == 5
    executed = {a["turnframe.command_type"]: v for a, v in _points("turnframe.command.executed")}
    assert executed == {"trip.set_name": 1, "trip.request_rebooking": 1, "trip.keep_leg": 1}
    receipts = {a["turnframe.status_code"] for a, _ in _points("turnframe.claim.receipt_emitted")}
    assert receipts == {"trip.name_set", "trip.rebooking_requested", "trip.leg_kept"}
    assert sum(v for _, v in _points("turnframe.act.refused")) == 1
    assert sum(v for _, v in _points("turnframe.interaction.created")) == 1
    stages = {a["turnframe.stage"] for a, _ in _points("turnframe.stage.duration_ms")}
    assert {"A-C", "G", "J-K", "M", "N-P"} <= stages
    for name, attributes, _ in TELEMETRY.metric_points():
        assert name.startswith("turnframe.")
        assert all(" " not in str(v) for v in attributes.values())  # codes and keys only


async def test_log_records_name_the_event_the_turn_and_its_replay_token(desk) -> None:
    desk.ready_trip()
    turn = await desk.say("Grace Hopper", NAME)
    delivered = [r for r in TELEMETRY.logs.records if r.getMessage() == "turn.delivered"]
    [record] = delivered
    assert record.name == "turnframe_runtime.turn" and record.levelno == logging.INFO
    assert record.turnframe == {  # type: ignore[attr-defined]
        "event": "turn.delivered",
        "turn_id": turn.turn_id,
        "replay_token": turn.replay_token,
        "status": "completed",
    }


async def test_the_outbox_reports_each_dispatch() -> None:
    desk = DeskHarness(outbox=EMBEDDED)
    await run_demo(io.StringIO(), desk=desk)
    dispatched = _points("turnframe.outbox.dispatched")
    assert [(a["turnframe.outcome"], v) for a, v in dispatched] == [("completed", 1)]
    [span] = [s for s in TELEMETRY.finished_spans() if s.name == "turnframe.outbox.dispatch"]
    assert span.attributes["turnframe.attempt"] == 1
    assert any(r.getMessage() == "outbox.dispatched" for r in TELEMETRY.logs.records)
    # the answer's follow-up turn is finished as written, which is no recovery
    assert not [name for name, _, _ in TELEMETRY.metric_points() if "recovery." in name]
    assert sum(v for _, v in _points("turnframe.outbox.enqueued")) == 1


def test_an_attribute_that_is_not_an_id_or_a_code_is_left_out() -> None:
    with observe.span("check", turn_id="turn_1", said="Grace Hopper", code="x.y", n=3):
        pass
    [span] = [s for s in TELEMETRY.finished_spans() if s.name == "turnframe.check"]
    assert dict(span.attributes) == {
        "turnframe.turn_id": "turn_1",
        "turnframe.code": "x.y",
        "turnframe.n": 3,
    }


def test_the_leak_check_finds_words_that_reached_a_span_a_label_or_a_log() -> None:
    tracer = trace.get_tracer("elsewhere")
    with tracer.start_as_current_span("leaky", attributes={"said": "my card is 4111 1111"}):
        pass
    with pytest.raises(TelemetryLeak, match="4111 1111"):
        TELEMETRY.assert_free_of(["my card is 4111 1111"])
    TELEMETRY.clear()
    logging.getLogger("turnframe_runtime.turn").info("the user said %s", "hello there friend")
    with pytest.raises(TelemetryLeak):
        TELEMETRY.assert_free_of(["hello there friend"])
    TELEMETRY.clear()


SECRET = "s3cr3t-Pa55word"


async def test_a_database_password_reaches_no_span_label_log_or_error(postgres_url: str) -> None:
    async with PrivateDatabase(postgres_url) as db:
        url = db.url
        user, _, rest = url.partition("@")
        with_password = f"{user}:{SECRET}@{rest}"  # the server trusts local connections
        stores = await SqlStores.connect(with_password)
        try:
            await stores.migrate()
            desk = DeskHarness(stores=stores)
            desk.ready_trip()
            await desk.say("Grace Hopper", NAME)
            assert SECRET not in stores.url
        finally:
            await stores.aclose()
    with pytest.raises(Unavailable) as refused:
        await SqlStores.connect(f"postgresql+psycopg://postgres:{SECRET}@127.0.0.1:9/nowhere")
    assert SECRET not in str(refused.value)
    assert any(s.name == "turnframe.turn" for s in TELEMETRY.finished_spans())
    TELEMETRY.assert_free_of([SECRET])


NO_EXTRA = """
import asyncio, io, sys
sys.modules["opentelemetry"] = None  # as if the otel extra were not installed
from turnframe_runtime import observe
from turnframe_test.demo import run_demo
assert not observe.ENABLED
turns = asyncio.run(run_demo(io.StringIO()))
print(len(turns))
"""


def test_without_the_otel_extra_turns_run_and_report_nothing() -> None:
    ran = subprocess.run([sys.executable, "-c", NO_EXTRA], capture_output=True, text=True,
                         timeout=120, check=False)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert int(ran.stdout) >= 9


async def test_a_failing_model_call_is_recorded_by_its_type_never_its_message(desk) -> None:
    said = "my passport number is X1234567"
    desk.ready_trip()
    desk.interpreter.then(RuntimeError(f"the provider choked on: {said}"))
    turn = await desk.runtime.handle_turn(
        TurnInput(account_id=desk.account_id, conversation_id=desk.conversation_id, text=said)
    )
    assert turn.blocks[0].kind == "notice"  # message_unreadable: nothing changed
    [call] = [s for s in TELEMETRY.finished_spans() if s.name == "turnframe.model.understand"]
    assert call.status.description == "RuntimeError"
    assert call.events == ()  # no exception event, so no message and no traceback
    TELEMETRY.assert_free_of([said, "the provider choked"])


def test_a_failure_is_named_by_a_code_only_when_it_is_one() -> None:
    class Odd(Exception):
        code = "not a code: it quotes Grace Hopper"

    with pytest.raises(Odd), observe.span("odd"):
        raise Odd("Grace Hopper's passport X1234567")
    [span] = [s for s in TELEMETRY.finished_spans() if s.name == "turnframe.odd"]
    assert span.status.description == codes.PROVIDER_ERROR and span.events == ()
    observe.failure(logging.getLogger("turnframe_runtime.test"), "odd.failed", Odd("X1234567"))
    TELEMETRY.assert_free_of(["Grace Hopper", "X1234567"])


def test_the_console_example_prints_spans_metrics_and_json_logs() -> None:
    root = Path(__file__).resolve().parents[2]
    ran = subprocess.run([sys.executable, "-m", "examples.otel_console"], cwd=root,
                         capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert '"name": "turnframe.turn"' in ran.stdout
    assert '"name": "turnframe.stage N-P commit"' in ran.stdout
    assert '"name": "turnframe.claim.receipt_emitted"' in ran.stdout
    logged = [json.loads(line) for line in ran.stderr.splitlines() if line.startswith("{")]
    assert {"turn.delivered", "outbox.dispatched"} <= {line["event"] for line in logged}
    assert all(line["logger"].startswith("turnframe_") for line in logged)


async def test_a_provider_code_that_echoes_the_user_is_never_a_label(desk) -> None:
    """A code need only look like one to pass a pattern; only the library's own codes are
    labels, a span's status or a log field: any other is `turnframe.provider.error`."""
    said = "Grace Hopper, passport X1234567"

    class ProviderFailure(Exception):
        code = "invalid_request:grace.hopper:X1234567"  # looks like a code, quotes the user

    desk.ready_trip()
    desk.interpreter.then(ProviderFailure("rejected"))
    await desk.runtime.handle_turn(
        TurnInput(account_id=desk.account_id, conversation_id=desk.conversation_id, text=said)
    )
    [call] = [s for s in TELEMETRY.finished_spans() if s.name == "turnframe.model.understand"]
    assert call.status.description == codes.PROVIDER_ERROR
    failed = [attributes for attributes, _ in _points("turnframe.provider.failed")]
    assert failed and all(a["turnframe.code"] == codes.PROVIDER_ERROR for a in failed)
    TELEMETRY.assert_free_of(["X1234567", "grace.hopper"])


async def test_an_actors_failure_reaches_dramatiqs_log_by_its_code_only(make_desk) -> None:
    """The follow-up turn of an airline's answer fails in a workflow whose words quote the
    traveller: dramatiq logs what the actor raised, which names the failure's type alone."""
    secret = "Grace Hopper's passport X1234567"

    class Quoting(TripWorkflow):
        def receipts(self, events: Any) -> Any:
            if any(e.event_type == "trip.rebooked" for e in events):
                raise RuntimeError(f"cannot word this for {secret}")
            return super().receipts(events)

    desk = await make_desk(workflow=Quoting(), outbox=OutboxConfig(poll_ms=10))
    desk.ready_trip()
    said = "Rebook the outbound"
    asked = await desk.say(said, act("a1", "trip.request_rebooking", "h1", said, leg="outbound"))
    await desk.click(desk.card(asked), "opt_rebook")
    worker = OutboxWorker(desk.runtime, connect_broker("stub://"), threads=1)
    await worker.start()

    async def dramatiq_logged() -> logging.LogRecord:
        while True:
            for record in TELEMETRY.logs.records:
                if record.name.startswith("dramatiq") and record.levelno >= logging.ERROR:
                    return record
            await asyncio.sleep(0.01)

    try:
        logged = await asyncio.wait_for(dramatiq_logged(), 30)
    finally:
        await worker.stop()
    assert logged.exc_info is not None and type(logged.exc_info[1]).__name__ == "AttemptFailed"
    assert str(logged.exc_info[1]) == "RuntimeError"
    TELEMETRY.assert_free_of([secret, "X1234567"])


async def test_an_executors_failure_message_is_never_a_code(desk) -> None:
    from turnframe_runtime import ExecutionFailed

    desk.ready_trip()
    desk.executor.arm_before_remote_request(ExecutionFailed("Grace.Hopper:X1234567"))
    said = "Name Grace Hopper"
    turn = await desk.say(said, act("a1", "trip.set_name", "h1", "Grace", name="Grace Hopper"))
    record = await desk.runtime.replay(desk.account_id, turn.replay_token)
    [outcome] = record.command_outcomes
    assert outcome.outcome.code == codes.EXECUTION_FAILED  # type: ignore[union-attr]
    failed = [attributes for attributes, _ in _points("turnframe.command.failed")]
    assert failed == [
        {"turnframe.code": codes.EXECUTION_FAILED, "turnframe.command_type": "trip.set_name"}
    ]
    TELEMETRY.assert_free_of(["X1234567"])
