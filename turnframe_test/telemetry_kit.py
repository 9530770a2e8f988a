"""In-memory OpenTelemetry and log capture for tests: what the runtime's spans, metrics and log
records hold, and a check that none of it holds a user's words, a model's output or a secret."""

from __future__ import annotations

import logging
import traceback
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Captured", "TelemetryLeak", "capture_telemetry", "captured_telemetry"]

_CAPTURED: list[Captured] = []


class TelemetryLeak(AssertionError):
    """Text that must never leave the process appeared in a span, a metric label or a log."""


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@dataclass
class Captured:
    """The process's telemetry since the last `clear`."""

    spans: Any
    metrics: Any
    logs: _Records
    #: loggers watched at DEBUG: the library's own, and dramatiq's (the outbox hands it work);
    #: every other logger is watched at the level it logs at
    loggers: tuple[str, ...] = (
        "turnframe_runtime",
        "turnframe_store",
        "turnframe_core",
        "dramatiq",
    )
    #: data points collected so far (the reader hands each delta out once)
    _points: list[tuple[str, dict[str, Any], Any]] = field(default_factory=list)

    def finished_spans(self) -> list[Any]:
        return list(self.spans.get_finished_spans())

    def metric_points(self) -> list[tuple[str, dict[str, Any], Any]]:
        """(metric name, attributes, value) of every data point recorded since `clear`."""
        data = self.metrics.get_metrics_data()
        found = self._points
        if data is None:
            return list(found)
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        value = getattr(point, "value", None)
                        if value is None:
                            value = getattr(point, "count", None)
                        found.append((metric.name, dict(point.attributes or {}), value))
        return list(found)

    def texts(self) -> Iterator[str]:
        """Every string a span, a metric or a log record carries."""
        for span in self.finished_spans():
            yield span.name
            yield span.status.description or ""
            yield from (str(v) for v in (span.attributes or {}).values())
            for span_event in span.events:
                yield span_event.name
                yield from (str(v) for v in (span_event.attributes or {}).values())
        for name, attributes, _value in self.metric_points():
            yield name
            yield from (str(v) for v in attributes.values())
        for record in self.logs.records:
            yield record.getMessage()
            yield from (str(v) for v in record.__dict__.values())
            if record.exc_info and record.exc_info[1] is not None:  # what a formatter prints
                yield "".join(traceback.format_exception(record.exc_info[1]))

    def assert_free_of(self, secrets: Iterable[str]) -> None:
        wanted = {s for s in secrets if len(s.strip()) >= 4}
        if not wanted:
            return
        leaked = sorted({s for text in self.texts() for s in wanted if s in text})
        if leaked:
            raise TelemetryLeak(f"telemetry holds text it must not: {leaked}")

    def clear(self) -> None:
        self.spans.clear()
        self.metrics.get_metrics_data()  # a delta reader forgets what it handed out
        self._points.clear()
        self.logs.records.clear()


def captured_telemetry() -> Captured:
    """The process's capture (`capture_telemetry`, made on first use)."""
    if not _CAPTURED:
        _CAPTURED.append(capture_telemetry())
    return _CAPTURED[0]


def capture_telemetry() -> Captured:
    """Install in-memory span and metric exporters as the global OpenTelemetry providers and a
    log handler on the root logger, so every logger of the process is watched (the turnframe
    loggers at DEBUG). OpenTelemetry takes its providers once per
    process: use `captured_telemetry`."""
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import Counter, Histogram, MeterProvider
    from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    spans = InMemorySpanExporter()
    tracer = TracerProvider()
    tracer.add_span_processor(SimpleSpanProcessor(spans))
    trace.set_tracer_provider(tracer)
    reader = InMemoryMetricReader(
        preferred_temporality={
            Counter: AggregationTemporality.DELTA,
            Histogram: AggregationTemporality.DELTA,
        }
    )
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    handler = _Records()
    captured = Captured(spans=spans, metrics=reader, logs=handler)
    # Every logger of the process reaches the root's handlers (psycopg's, asyncio's … at the
    # levels they log at); the library's own and dramatiq's log at DEBUG.
    logging.getLogger().addHandler(handler)
    for name in captured.loggers:
        logging.getLogger(name).setLevel(logging.DEBUG)
    return captured
