"""What an operator sees of turns: OpenTelemetry spans and metrics, and structured log records.

Spans, metrics and logs carry ids and codes only — turn ids, replay tokens, workflow keys,
stage letters, outcome and notice codes — never a user's words, a case's values, a model's
output or a secret. Every attribute and label passes `_safe`, which keeps a value only when it
is an id or a code (no spaces, nothing but letters, digits and `_ . : -`), so a value that is
not one cannot reach an exporter even by mistake.

OpenTelemetry is optional (`pip install 'turnframe[otel]'`, the API only): the runtime calls the
global OpenTelemetry API, which does nothing until the application installs an SDK and its
exporters. Without the package every call here is a no-op. With it but while the global providers
are still the API's own (no SDK installed yet), the helpers do not call the API either: a span or
a stage is one shared do-nothing context manager, no attributes are built, no instrument is
touched. Each call looks at the global provider (one API call and an identity check), so spans
and metrics start as soon as an application installs an SDK, before or after the runtime is made.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Iterator, Mapping
from typing import Any

from turnframe_core import codes
from turnframe_core.blocks import AnswerBlock, AnswerStatus, NoticeBlock, ReceiptBlock
from turnframe_core.replay import (
    CommittedOutcome,
    FailedOutcome,
    IdempotentReplayOutcome,
    OutcomeUnknown,
    RejectedOutcome,
    ReplayRecord,
    RevisionConflictOutcome,
)
from turnframe_core.turn import AssistantTurn

__all__ = [
    "ENABLED",
    "annotate",
    "failure",
    "count",
    "event",
    "record_ms",
    "span",
    "stage",
    "turn_delivered",
    "turn_failed",
]

TRACER_NAME = "turnframe"
METER_NAME = "turnframe"

try:  # the `otel` extra
    from opentelemetry import metrics as _metrics
    from opentelemetry import trace as _trace
except ImportError:  # pragma: no cover - exercised where the extra is not installed
    _metrics = None  # type: ignore[assignment]
    _trace = None  # type: ignore[assignment]

#: whether the OpenTelemetry API is installed (without it, spans and metrics cost nothing)
ENABLED = _trace is not None

_tracer: Any = _trace.get_tracer(TRACER_NAME) if _trace is not None else None
_meter: Any = _metrics.get_meter(METER_NAME) if _metrics is not None else None
_counters: dict[str, Any] = {}
_histograms: dict[str, Any] = {}
_NOTHING = contextlib.nullcontext()


class _Judged:
    """A global provider (the tracer's or the meter's) and whether it records, judged once per
    provider object: an SDK installed later is seen at the next call."""

    def __init__(self) -> None:
        self.seen: tuple[Any, bool] = (None, False)

    def records(self, provider: Any) -> bool:
        seen, recording = self.seen
        if provider is not seen:
            recording = _records(provider)
            self.seen = (provider, recording)
        return recording


_traces, _metrics_judged = _Judged(), _Judged()


def _records(provider: Any) -> bool:
    """Whether a global provider records: every provider but the API's own (its proxy, used
    until an SDK is installed, and its no-op ones)."""
    package = ".".join(type(provider).__module__.split(".")[:2])
    return package not in ("opentelemetry.trace", "opentelemetry.metrics")


def _tracing() -> bool:
    """Whether spans go anywhere: an SDK (or another provider) is the global tracer provider."""
    return _tracer is not None and _traces.records(_trace.get_tracer_provider())


def _metering() -> bool:
    """Whether metrics go anywhere: an SDK (or another provider) is the global meter provider."""
    return _meter is not None and _metrics_judged.records(_metrics.get_meter_provider())


#: an id or a code: what an attribute, a label or a log field may hold
_ID_OR_CODE = re.compile(r"^[A-Za-z0-9_.:\-]{1,200}$")


def _safe(values: Mapping[str, Any]) -> dict[str, Any]:
    """The values that are ids, codes, numbers or flags; anything else is left out."""
    kept: dict[str, Any] = {}
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool | int | float) or (
            isinstance(value, str) and _ID_OR_CODE.fullmatch(value)
        ):
            kept[f"turnframe.{key}"] = value
    return kept


def span(name: str, **attributes: Any) -> contextlib.AbstractContextManager[Any]:
    """A span `turnframe.<name>`, the current span's child, with id and code attributes."""
    if not _tracing():
        return _NOTHING
    return _span(f"turnframe.{name}", _safe(attributes))


@contextlib.contextmanager
def _span(name: str, attributes: dict[str, Any]) -> Iterator[Any]:
    """A span that records a failure by its code (or its type), never by its message or its
    traceback: an exception's message may quote what a user wrote."""
    with _tracer.start_as_current_span(
        name, attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as current:
        try:
            yield current
        except BaseException as failure:
            reason = codes.code_of(failure)
            current.set_status(_trace.Status(_trace.StatusCode.ERROR, reason))
            current.set_attributes(_safe({"error": reason}))
            raise


def stage(letters: str, name: str, **attributes: Any) -> contextlib.AbstractContextManager[Any]:
    """One pipeline stage (DESIGN §5: `G understand`, `N commit` …): a span named by its letters
    and a duration in `turnframe.stage.duration_ms`."""
    if not (_tracing() or _metering()):
        return _NOTHING
    return _stage(letters, name, attributes)


@contextlib.contextmanager
def _stage(letters: str, name: str, attributes: dict[str, Any]) -> Iterator[None]:
    started = time.perf_counter()
    with _span(f"turnframe.stage {letters} {name}", _safe({"stage": letters, **attributes})):
        try:
            yield
        finally:
            record_ms("stage.duration_ms", (time.perf_counter() - started) * 1000, stage=letters)


def annotate(**attributes: Any) -> None:
    """Add id and code attributes to the current span (a turn's id once it is known)."""
    if _tracing():
        current = _trace.get_current_span()
        if current.is_recording():
            current.set_attributes(_safe(attributes))


def count(name: str, value: int = 1, **labels: Any) -> None:
    """Add to the counter `turnframe.<name>`; labels are codes and keys, never text."""
    if value == 0 or not _metering():
        return
    counter = _counters.get(name)
    if counter is None:
        counter = _counters[name] = _meter.create_counter(f"turnframe.{name}")
    counter.add(value, _safe(labels))


def record_ms(name: str, milliseconds: float, **labels: Any) -> None:
    """Record a duration in the histogram `turnframe.<name>` (milliseconds)."""
    if not _metering():
        return
    histogram = _histograms.get(name)
    if histogram is None:
        histogram = _histograms[name] = _meter.create_histogram(f"turnframe.{name}", unit="ms")
    histogram.record(milliseconds, _safe(labels))


def failure(
    logger: logging.Logger, name: str, failed: BaseException, level: int = logging.ERROR
) -> None:
    """A failure as a log record: the event, the failure's code or type; never its message or
    traceback, which may quote a user or a secret."""
    event(logger, name, level, error=codes.code_of(failed))


def event(logger: logging.Logger, name: str, level: int = logging.INFO, **fields: Any) -> None:
    """A structured log record: its message is the stable event name, its fields (ids and
    codes only, as attributes of the record: `record.turnframe` holds them all) say which
    turn, which row, which code."""
    if logger.isEnabledFor(level):
        safe = {key.removeprefix("turnframe."): v for key, v in _safe(fields).items()}
        logger.log(level, name, extra={"turnframe": {"event": name, **safe}})


# --- the safety metrics of a delivered turn ---------------------------------------------------

_TURNS = logging.getLogger("turnframe_runtime.turn")

#: notices that stand for a safety signal of their own
_NOTICE_SIGNALS = {
    "turnframe.notice.stale_interaction": "interaction.stale",
    "turnframe.notice.act_refused": "act.refused",
    "turnframe.notice.interaction_unavailable": "interaction.failed",
}


def turn_failed(turn_id: str, replay_token: str | None, code: str) -> None:
    count("turn.failed", code=code)
    event(_TURNS, "turn.failed", logging.WARNING, turn_id=turn_id, replay_token=replay_token,
          code=code)  # fmt: skip


def turn_delivered(record: ReplayRecord, turn: AssistantTurn) -> None:
    """What a stored reply says about the safety properties, as counters (reference §7.1): side
    effects, claims, workflow, semantics and provider health, and the denominators."""
    if _metering():
        count("turn.delivered", status=turn.status.value)
        count("outbox.enqueued", len(record.outbox_ids))
        if record.claimed_interaction is not None:
            count("interaction.resolved")
        for outcome in record.command_outcomes:
            kind = outcome.outcome
            command_type = outcome.command_type
            if isinstance(kind, CommittedOutcome):
                count("command.executed", command_type=command_type)
            elif isinstance(kind, IdempotentReplayOutcome):
                count("command.idempotency_replay", command_type=command_type)
            elif isinstance(kind, RejectedOutcome):
                count("command.rejected", code=kind.code, command_type=command_type)
            elif isinstance(kind, RevisionConflictOutcome):
                count("command.revision_conflict", command_type=command_type)
            elif isinstance(kind, OutcomeUnknown):
                count("external.outcome_unknown", command_type=command_type)
            elif isinstance(kind, FailedOutcome):
                count("command.failed", code=kind.code, command_type=command_type)
        for decision in record.policy_decisions:
            if not decision.allowed:
                count("command.confirmation_required", command_type=decision.command_type)
        for resolution in record.target_resolutions:
            if resolution.resolution != "exact":
                count(f"target.{resolution.resolution}")
        count("interaction.created", len(record.interactions_created))
        for attempt in record.provider_attempts:
            if attempt.latency_ms is not None:
                record_ms("provider.latency_ms", attempt.latency_ms, purpose=attempt.purpose)
            if attempt.outcome == "failed":
                count("provider.failed", purpose=attempt.purpose, code=attempt.code)
        replaced = [f for f in record.prose_findings if f.replaced_by == "server_copy"]
        count("claim.guard_replaced", len(replaced))
        for block in turn.blocks:
            if isinstance(block, ReceiptBlock):
                count("claim.receipt_emitted", status_code=block.status_code)
            elif isinstance(block, NoticeBlock):
                signal = _NOTICE_SIGNALS.get(block.code)
                if signal is not None:
                    count(signal)
            elif isinstance(block, AnswerBlock):
                answered = block.status is AnswerStatus.ANSWERED
                count("question.answered" if answered else "question.unanswered",
                      status=block.status.value)  # fmt: skip
    event(_TURNS, "turn.delivered", turn_id=turn.turn_id, replay_token=turn.replay_token,
          status=turn.status.value)  # fmt: skip
