"""Turnframe's spans, metrics and logs on the console: `python -m examples.otel_console`.

Installs the OpenTelemetry SDK with its console exporters (no collector, no network), sends
the `turnframe_*` loggers to standard error as one JSON object per record, then runs the demo's
scripted travel-desk conversation on in-memory stores. Swap the console exporters for OTLP ones
(`opentelemetry-exporter-otlp`) to ship the same signals to a collector.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import sys

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter


class JsonLines(logging.Formatter):
    """A log record as one JSON line: time, level, logger, event and its ids and codes."""

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "turnframe", {})
        return json.dumps(
            {"at": record.created, "level": record.levelname, "logger": record.name, **fields}
        )


def install() -> MeterProvider:
    resource = Resource.create({"service.name": "turnframe-demo"})
    tracing = TracerProvider(resource=resource)
    tracing.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter(out=sys.stdout)))
    trace.set_tracer_provider(tracing)
    reader = PeriodicExportingMetricReader(ConsoleMetricExporter(out=sys.stdout))
    meters = MeterProvider(resource=resource, metric_readers=[reader])
    metrics.set_meter_provider(meters)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLines())
    for name in ("turnframe_runtime", "turnframe_store"):
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    return meters


def main() -> None:
    meters = install()
    from turnframe_test.sample.demo import run_demo  # after the providers: nothing is missed

    asyncio.run(run_demo(io.StringIO()))
    trace.get_tracer_provider().force_flush()  # type: ignore[attr-defined]
    meters.force_flush()
    meters.shutdown()


if __name__ == "__main__":
    main()
